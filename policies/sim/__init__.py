"""Trace-driven simulator: one operator (paper 001 "paper" mode) or a whole DAG."""

from policies.sim.operator import SimResult, run_operator
from policies.sim.scenario import initial_deployment, paper_spec, run_paper
from policies.sim.trace import load_trace

__all__ = ["SimResult", "initial_deployment", "load_trace", "paper_spec", "run_operator", "run_paper"]
