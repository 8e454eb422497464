"""``manage.py bench_dashboard``, a thin wrapper: the benchmark is ``benchmarks.dashboard.command``, also run as
``python -m benchmarks dashboard`` (see benchmarks/README.md). The benchmarks are not installed with the product."""

from benchmarks.dashboard.command import Command

__all__ = ["Command"]
