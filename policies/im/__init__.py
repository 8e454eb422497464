"""Infrastructure Manager policies."""
