"""Connector tests. This directory is on ``sys.path`` once this conftest loads (pytest's prepend import mode), so
the engines' test modules below it import the shared connector contract as ``connector_contract``."""
