"""Shared fixtures of the pure-policy tests (no Django): small traces and the paper-001 operator spec."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from policies.sim.scenario import paper_spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def taxi_head() -> Path:
    """The first 3,000 minutes of the Taxi trace (tuples/s per line)."""
    return FIXTURES / "taxi_head3000.txt"


@pytest.fixture
def bad_trace() -> Path:
    """A trace whose third line is not a number."""
    return FIXTURES / "bad_trace.txt"


@pytest.fixture
def spec_a3():
    """Infrastructure A, 3 node types (speedups 1.0, 0.7, 1.3; price = speedup), K_max 10, paper defaults."""
    return paper_spec("A", 3, 10)


@pytest.fixture
def python() -> str:
    return sys.executable
