"""Operator Manager policies."""
