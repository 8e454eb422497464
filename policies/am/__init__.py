"""Application Manager policies."""
