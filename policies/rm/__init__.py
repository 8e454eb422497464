"""Region Manager policies."""
