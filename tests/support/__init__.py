"""Helpers shared by tests and benchmarks: a fault-injecting OpenAI-compatible server and
the builders/starters for the real model servers used by contract tests."""
