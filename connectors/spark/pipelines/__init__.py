"""Example Spark Structured Streaming pipelines fed by the trace-driven source (``connectors.spark.trace_source``).

Each stage factory has the signature ``build(spark, StageOptions) -> StreamingQuery`` and is registered in
``STAGES`` under ``(pipeline, stage)``:

- ``("wordcount", "splitter")`` and ``("wordcount", "counter")``: paper 004's WordCount as two applications
  chained through files (``wordcount.py``);
- ``("taxi", "all")``: taxi-trip analytics, parse -> enrich -> windowed aggregation per zone (``taxi.py``).

Run one stage as a Spark application under the autoscaler's agent with ``python -m
connectors.spark.pipelines.run`` (see ``run.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .common import StageOptions
from .taxi import build_taxi
from .wordcount import build_counter, build_splitter

STAGES: dict[tuple[str, str], Callable[[Any, StageOptions], Any]] = {
    ("wordcount", "splitter"): build_splitter,
    ("wordcount", "counter"): build_counter,
    ("taxi", "all"): build_taxi,
}

__all__ = ["STAGES", "StageOptions"]
