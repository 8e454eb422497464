"""Shared pieces of the example pipelines: per-record cost, idempotent driver-side state, latency statistics.

- ``burn(n, cpu_ms, wait_ms)``: the configurable per-record cost of an operator stage: ``cpu_ms`` of busy CPU
  work and ``wait_ms`` of waiting (imitating a lookup to an external service) per record, in ms. Waiting does not
  use a core, so more executors (task slots) visibly raise a stage's capacity even on a 2-core machine.
- ``BatchState``: a small state (JSON) kept by a ``foreachBatch`` sink, one file per batch id written atomically
  (tmp + rename). A batch replayed after a restart reads the state of the batch before it and overwrites its own
  file: the sink is idempotent, no record is counted twice or lost.
- ``latency_stats``: mean / p95 (s) of ``now - created`` over a batch's records.
- ``LatencyReporter``: a sink reports its end-to-end latency through it; the entry point binds it to the
  agent (``agent.report_latency``) and it keeps a local log too.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def burn(n: int, cpu_ms: float, wait_ms: float) -> None:
    """Spend the cost of ``n`` records: ``n * cpu_ms`` ms of busy work and ``n * wait_ms`` ms of waiting."""
    if n <= 0:
        return
    if cpu_ms > 0:
        until = time.perf_counter() + n * cpu_ms / 1000.0
        x = 0
        while time.perf_counter() < until:
            for i in range(200):
                x += i * i
    if wait_ms > 0:
        time.sleep(n * wait_ms / 1000.0)


def latency_stats(created: list[float], now: float) -> tuple[float, float, int]:
    """(mean s, p95 s, n) of ``now - created`` (nearest-rank p95); (0, 0, 0) for no records."""
    n = len(created)
    if n == 0:
        return 0.0, 0.0, 0
    lat = sorted(now - c for c in created)
    p95 = lat[min(n - 1, max(0, int(round(0.95 * n + 0.5)) - 1))]
    return sum(lat) / n, p95, n


@dataclass
class LatencyReporter:
    """Where a sink reports end-to-end latency: a bound callback (the agent) and a local log (``path``)."""

    path: Path | None = None
    callback: Callable[[float, float, int], None] | None = None
    log: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def bind(self, callback: Callable[[float, float, int], None]) -> None:
        """Forward from now on (and what was logged before binding) to ``callback``."""
        with self._lock:
            self.callback = callback
            for row in self.log:
                if not row.get("forwarded"):
                    callback(row["mean_s"], row["p95_s"], row["n"])
                    row["forwarded"] = True

    def report(self, batch_id: int, mean_s: float, p95_s: float, n: int) -> None:
        row = {"batch": batch_id, "timestamp": time.time(), "mean_s": mean_s, "p95_s": p95_s, "n": n}
        with self._lock:
            if self.callback is not None and n > 0:
                self.callback(mean_s, p95_s, n)
                row["forwarded"] = True
            self.log.append(row)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a") as fh:
                    fh.write(json.dumps({k: v for k, v in row.items() if k != "forwarded"}) + "\n")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` via a temporary file and a rename (readers never see half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


class BatchState:
    """State of a ``foreachBatch`` sink, one JSON file per batch id under ``root`` (see module docstring)."""

    def __init__(self, root: str | Path, keep: int = 5) -> None:
        self.root = Path(root)
        self.keep = keep

    def _batches(self) -> list[int]:
        if not self.root.is_dir():
            return []
        return sorted(int(p.stem) for p in self.root.glob("*.json") if p.stem.isdigit())

    def before(self, batch_id: int) -> dict[str, Any]:
        """The state after the last batch before ``batch_id`` (empty dict at the start)."""
        earlier = [b for b in self._batches() if b < batch_id]
        if not earlier:
            return {}
        return json.loads((self.root / f"{earlier[-1]}.json").read_text())

    def save(self, batch_id: int, state: dict[str, Any]) -> None:
        """Write the state after ``batch_id`` (overwriting a replay) and drop files older than ``keep`` batches."""
        write_json_atomic(self.root / f"{batch_id}.json", state)
        for b in self._batches()[: -self.keep]:
            (self.root / f"{b}.json").unlink(missing_ok=True)

    def latest(self) -> dict[str, Any]:
        """The newest state (empty dict when no batch was written)."""
        batches = self._batches()
        return json.loads((self.root / f"{batches[-1]}.json").read_text()) if batches else {}


@dataclass
class StageOptions:
    """Options of one pipeline stage (units in the field comments)."""

    workdir: str  # root of checkpoints, intermediates and sink output
    trace: str = "taxi_last_month"
    trace_start: int = 0  # first trace minute
    trace_minutes: int | None = None  # trace minutes to replay (None = the rest of the trace)
    compress: float = 72.0  # trace minutes per wall minute
    rate_scale: float = 0.1  # multiplier of the trace rates (tuples/s)
    seed: int = 0
    start_time: float | None = None  # t0 of the trace (epoch s); None = when the query first starts
    partitions: int = 4  # source partitions (tasks) per micro-batch
    shuffle_partitions: int = 4
    interval_s: float = 5.0  # micro-batch trigger interval (s)
    cpu_ms: float = 0.0  # busy CPU per record and stage (ms)
    wait_ms: float = 0.0  # waiting (external lookup) per record and stage (ms)
    top_k: int = 10
    source: str = "python"  # python (the Python data source) | files (generator thread + JSON file source)
    latency: LatencyReporter = field(default_factory=LatencyReporter)

    def path(self, *parts: str) -> str:
        return str(Path(self.workdir, *parts))

    def source_options(self, kind: str) -> dict[str, str]:
        opts = {
            "kind": kind,
            "trace": self.trace,
            "traceStart": str(self.trace_start),
            "compress": str(self.compress),
            "rateScale": str(self.rate_scale),
            "seed": str(self.seed),
            "numPartitions": str(self.partitions),
        }
        if self.trace_minutes is not None:
            opts["traceMinutes"] = str(self.trace_minutes)
        if self.start_time is not None:
            opts["startTime"] = str(self.start_time)
        return opts
