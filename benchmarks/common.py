"""What the simulator benchmarks share: the do-nothing baseline policy, the paper's single-operator setting, one
whole-trace run, the published Taxi rows of paper 001 and the environment of a benchmark's subprocesses."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from policies.base import Observation, Policy
from policies.operator_model import OperatorSpec
from policies.paths import REPO_DIR


class DoNothing(Policy):
    """The trivial baseline of the speed and latency ratios: the base class's ``step()`` around a decision that
    always does nothing (the simulator loop and the call with no policy work)."""

    name: ClassVar[str] = "do-nothing"

    def _decide(
        self, k: np.ndarray, rate: float, obs: Observation | None, explain: bool
    ) -> tuple[int, dict[int, float]]:
        return 0, {}


def bench_spec(infra: str, n_res: int, k_max: int) -> OperatorSpec:
    """The paper's single-operator scenario: first ``n_res`` types of ``infra``, C_max of the whole list."""
    from policies.operator_model import infrastructure, infrastructure_c_max

    return OperatorSpec(infrastructure(infra, n_res), k_max=k_max, c_max=infrastructure_c_max(infra, k_max))


def make_policy(name: str, spec: OperatorSpec, params: dict[str, Any] | None = None, seed: int = 0) -> Policy:
    """OM policy ``name`` of the registry, or ``do-nothing`` (:class:`DoNothing`)."""
    from policies.registry import load

    if name == "do-nothing":
        return DoNothing(spec)
    policy: Policy = load("om", name)(spec, params, seed=seed)
    return policy


def full_run(job: tuple[str, str, int, int, int, dict[str, Any], str, int | None]) -> dict[str, Any]:
    """One whole-trace run in paper mode of ``job = (policy, infra, n_res, k_max, seed, params, trace_path,
    steps)`` on :func:`bench_spec`; the summary plus the job's identity (a process pool's unit of work)."""
    from policies.sim.operator import run_operator
    from policies.sim.trace import load_trace

    name, infra, n_res, k_max, seed, params, trace_path, steps = job
    policy = make_policy(name, bench_spec(infra, n_res, k_max), params, seed)
    summary = run_operator(load_trace(trace_path, steps), policy).summary()
    summary.update(policy=name, infra=infra, n_res=n_res, k_max=k_max, seed=seed, params=params)
    return summary


def published_rows(path: str | Path, trace: str = "taxi") -> list[dict[str, str]]:
    """Rows of a published result table (``policies/reference/paper_om_tables.csv``) for ``trace``, values kept as
    printed; none when the file is missing."""
    p = Path(path)
    if not p.is_file():
        return []
    with p.open() as fh:
        return [r for r in csv.DictReader(fh) if r["trace"] == trace]


def subprocess_env() -> dict[str, str]:
    """The environment of a benchmark's child Python process: this one's, with the repository first on
    ``PYTHONPATH`` so that ``benchmarks`` imports from any working directory."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_DIR), env.get("PYTHONPATH", "")) if p)
    return env
