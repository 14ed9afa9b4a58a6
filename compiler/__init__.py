"""The compiler: spec + gold cases -> a pack (issue 11). Django-free; imports `runtime` only."""

from compiler.induce import Constraint, InducedField, Induction, InductionScore, induce, score_against_grammars

__all__ = [
    "Constraint",
    "InducedField",
    "Induction",
    "InductionScore",
    "induce",
    "score_against_grammars",
]
