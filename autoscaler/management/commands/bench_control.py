"""``manage.py bench_control``, a thin wrapper: the benchmark is ``benchmarks.control.command``, also run as
``python -m benchmarks control`` (see benchmarks/README.md). The benchmarks are not installed with the product."""

from benchmarks.control.command import Command

__all__ = ["Command"]
