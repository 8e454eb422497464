"""Every benchmark of the project, behind one runner: ``python -m benchmarks <name> [args]``.

``python -m benchmarks --list`` prints the registry below (name, what it measures); ``benchmarks/README.md`` gives
each benchmark's command and its section of ``docs/benchmarks.md``. Benchmarks of the policy library need only
``policies/`` (numpy) and run without Django; those that drive the product (``django=True``) set Django up first and
are also ``python manage.py bench_<name>`` (thin wrappers in ``autoscaler/management/commands/``).

This package is not installed with the product (``[tool.setuptools.packages.find]`` in ``pyproject.toml``): it
may import ``policies``, ``connectors`` and ``autoscaler``, never the other way round.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from typing import Any


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """One entry of the runner: ``target`` is ``module:function`` (called with the argument list, returns the
    exit status or None) or, with ``django``, ``module:Command`` (a management command class)."""

    name: str
    target: str
    description: str
    django: bool = False
    #: the ``manage.py`` command of a benchmark that drives the product
    command: str = ""


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "paper-tables",
        "benchmarks.paper_tables:main_paper_tables",
        "OM policies in the simulator against paper 001's Tables 2-5 and the clairvoyant bound",
    ),
    Benchmark(
        "decision-latency",
        "benchmarks.paper_tables:main_decision_latency",
        "Policy.step() latency of every OM policy against a do-nothing policy",
    ),
    Benchmark(
        "ql-family",
        "benchmarks.ql_family:main",
        "tabular Q-learning OMs: fidelity to the authors' simulator and Tables 2-3, speed, memory",
    ),
    Benchmark(
        "deep-rl",
        "benchmarks.deep_rl:main",
        "deep Q-learning OMs: decision latency and whole-trace quality against Table 2",
    ),
    Benchmark(
        "model-based",
        "benchmarks.model_based:main",
        "model-based OM: whole-trace time and memory, quality against the published tables and dp",
    ),
    Benchmark(
        "am",
        "benchmarks.am:main_am",
        "naive vs BO-tuned Application Manager on paper 001's applications A, B and C",
    ),
    Benchmark(
        "multilevel",
        "benchmarks.multilevel:main",
        "Region and Infrastructure Managers in the simulator (paper 004, Tables 1-2)",
    ),
    Benchmark(
        "centralized",
        "benchmarks.centralized:main",
        "centralized MDP and RL vs decentralized thresholds on a 3-operator pipeline (paper 000, Table 1)",
    ),
    Benchmark(
        "calibration",
        "benchmarks.calibration:main",
        "OM policies saturating, before and after self-calibration (issue 20; JSON lines)",
    ),
    Benchmark(
        "predictive",
        "benchmarks.predictive:main",
        "online OM policies vs the clairvoyant bound on synthetic and shipped traces",
    ),
    Benchmark(
        "spark-latency",
        "benchmarks.spark.latency_probe:main",
        "live executor add/remove latency on a local Spark cluster, stage by stage (needs Java 17)",
    ),
    Benchmark(
        "loop",
        "benchmarks.loop.command:Command",
        "the product's control loop (manifest -> tick -> OM -> AM -> simulated engine), scenario by scenario",
        django=True,
        command="bench_loop",
    ),
    Benchmark(
        "control",
        "benchmarks.control.command:Command",
        "control-plane throughput with PostgreSQL, Redis and Celery workers, 100 to 10,000 operators",
        django=True,
        command="bench_control",
    ),
    Benchmark(
        "dashboard",
        "benchmarks.dashboard.command:Command",
        "server time of the application dashboard's pages and API on a large decision log",
        django=True,
        command="bench_dashboard",
    ),
    Benchmark(
        "spark",
        "benchmarks.spark.command:Command",
        "scaling strategies and OM policies on the taxi pipeline on a live local Spark cluster",
        django=True,
        command="bench_spark",
    ),
    Benchmark(
        "flink",
        "benchmarks.flink.command:Command",
        "OM policies in closed loop on a live local Flink cluster",
        django=True,
        command="bench_flink",
    ),
)
BY_NAME = {b.name: b for b in BENCHMARKS}

USAGE = "usage: python -m benchmarks <name> [args] | --list | <name> --help"


def listing() -> str:
    """The ``--list`` output: one line per benchmark, name and what it measures."""
    width = max(len(b.name) for b in BENCHMARKS)
    lines = []
    for b in BENCHMARKS:
        via = f" [Django; also manage.py {b.command}]" if b.django else ""
        lines.append(f"{b.name:<{width}}  {b.description}{via}")
    return "\n".join(lines)


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def run_django_command(target: str, name: str, argv: list[str]) -> int:
    """Set Django up (the settings of ``manage.py``), then run the management command class ``target`` as
    ``manage.py`` would (its usage line says ``python -m benchmarks <name>``)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoscaler.settings")
    import django

    django.setup()
    _load(target)().run_from_argv(["python -m benchmarks", name, *argv])
    return 0


def main(argv: list[str] | None = None) -> int:
    """The runner: ``argv`` is ``[name, *args]`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--list"], ["-l"]):
        print(listing())
        return 0
    if argv[:1] in (["--help"], ["-h"]):
        print(f"{USAGE}\n\n{listing()}")
        return 0
    if not argv or argv[0] not in BY_NAME:
        got = repr(argv[0]) if argv else "nothing"
        print(f"error: benchmark: expected one of {', '.join(BY_NAME)}, got {got}", file=sys.stderr)
        return 2
    bench, rest = BY_NAME[argv[0]], argv[1:]
    if bench.django:  # Django is imported only here: the policy benchmarks run without it
        return run_django_command(bench.target, bench.name, rest)
    status = _load(bench.target)(rest)
    return int(status or 0)
