"""probe layer."""
