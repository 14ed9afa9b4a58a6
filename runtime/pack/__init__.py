"""Pack format v1: loading and the loaded model. See docs/pack-format.md."""

from runtime.pack.load import load_pack
from runtime.pack.model import Case, Edge, Node, Pack, RetryPolicy

__all__ = ["Case", "Edge", "Node", "Pack", "RetryPolicy", "load_pack"]
