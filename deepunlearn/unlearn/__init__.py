"""unlearn layer."""
