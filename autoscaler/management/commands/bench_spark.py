"""``manage.py bench_spark``, a thin wrapper: the benchmark is ``benchmarks.spark.command``, also run as
``python -m benchmarks spark`` (see benchmarks/README.md). The benchmarks are not installed with the product."""

from benchmarks.spark.command import Command

__all__ = ["Command"]
