"""Benchmarks, run by hand (``python -m bench.<name>``); speed is never asserted in tests."""
