"""``manage.py bench_flink``, a thin wrapper: the benchmark is ``benchmarks.flink.command``, also run as
``python -m benchmarks flink`` (see benchmarks/README.md). The benchmarks are not installed with the product."""

from benchmarks.flink.command import Command

__all__ = ["Command"]
