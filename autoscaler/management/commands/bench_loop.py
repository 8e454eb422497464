"""``manage.py bench_loop``, a thin wrapper: the benchmark is ``benchmarks.loop.command``, also run as
``python -m benchmarks loop`` (see benchmarks/README.md). The benchmarks are not installed with the product."""

from benchmarks.loop.command import Command

__all__ = ["Command"]
