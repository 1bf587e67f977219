"""api tests."""
