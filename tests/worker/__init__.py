"""worker tests."""
