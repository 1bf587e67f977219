"""services tests."""
