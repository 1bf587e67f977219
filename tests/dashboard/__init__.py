"""dashboard tests."""
