"""Trace-driven simulator: one operator (paper 001 "paper" mode) or a whole DAG."""

from policies.sim.operator import SimResult, run_operator
from policies.sim.trace import load_trace

__all__ = ["SimResult", "load_trace", "run_operator"]
