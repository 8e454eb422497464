"""Taxi-trip analytics as one Spark application: parse -> enrich (lookup) -> windowed aggregation per zone.

- parse: the stage's CPU cost per trip (``cpu_ms``) and derived fields (fare per km);
- enrich: a lookup to an "external service" per trip (``wait_ms`` of waiting) that adds the zone's borough;
- aggregate (``foreachBatch``, idempotent per batch id): per tumbling window of ``window_s`` wall seconds of
  creation time and per zone, trips / fare / distance are added to the open windows of the previous batch's
  state (``BatchState`` under ``<workdir>/taxi-state``). Records arrive in creation order across batches, so a
  window ends when a batch holds a record created after it; ended windows are written once to
  ``<workdir>/windows/<window start>.json`` (a replay overwrites the same file) and leave the state.
- the sink reports end-to-end latency (sink time - trip creation time: mean, p95, n) per batch.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from connectors.spark.trace_source import read_trace

from .common import BatchState, StageOptions, burn, latency_stats, write_json_atomic

ENRICHED_SCHEMA = (
    "id long, created double, zone int, borough string, fare double, distance double, fare_km double"
)
BOROUGHS = ("Manhattan", "Brooklyn", "Queens", "Bronx", "Staten Island")


def borough_of(zone: int) -> str:
    """The (made-up) borough of a zone: the enrichment lookup."""
    return BOROUGHS[(zone * 7) % len(BOROUGHS)]


def _parse_enrich_fn(cpu_ms: float, wait_ms: float):
    def parse_enrich(batches):
        for pdf in batches:
            burn(len(pdf), cpu_ms, 0.0)  # parse
            pdf = pdf.assign(fare_km=(pdf["fare"] / pdf["distance"].clip(lower=0.1)).round(3))
            burn(len(pdf), 0.0, wait_ms)  # enrich: the lookup
            pdf = pdf.assign(borough=[borough_of(int(z)) for z in pdf["zone"]])
            yield pdf[["id", "created", "zone", "borough", "fare", "distance", "fare_km"]]

    return parse_enrich


def taxi_sink(opts: StageOptions, window_s: float):
    state_store = BatchState(opts.path("taxi-state"))
    windows_dir = Path(opts.path("windows"))

    def sink(df: Any, batch_id: int) -> None:
        rows = df.select("created", "zone", "fare", "distance").collect()
        state = state_store.before(batch_id)
        open_w: dict[str, list[float]] = state.get("open", {})
        for created, zone, fare, distance in rows:
            key = f"{int(created // window_s * window_s)}|{zone}"
            acc = open_w.setdefault(key, [0, 0.0, 0.0])
            acc[0] += 1
            acc[1] += fare
            acc[2] += distance
        newest = max([r[0] for r in rows], default=state.get("newest", 0.0))
        ended = sorted({k.split("|")[0] for k in open_w if int(k.split("|")[0]) + window_s <= newest})
        for w in ended:
            zones = {k.split("|")[1]: v for k, v in open_w.items() if k.split("|")[0] == w}
            write_json_atomic(
                windows_dir / f"{w}.json", {"window": int(w), "windowS": window_s, "zones": zones}
            )
            for z in zones:
                del open_w[f"{w}|{z}"]
        trips = int(state.get("trips", 0)) + len(rows)
        state_store.save(batch_id, {"batch": batch_id, "trips": trips, "newest": newest, "open": open_w})
        mean_s, p95_s, n = latency_stats([r[0] for r in rows], time.time())
        opts.latency.report(batch_id, mean_s, p95_s, n)

    return sink


def build_taxi(spark: Any, opts: StageOptions, window_s: float = 60.0) -> Any:
    """Start the taxi query (see module docstring)."""
    src = read_trace(spark, opts.source_options("taxi"), opts.source, opts.path("input"))
    if opts.source == "files":  # small files are packed into few partitions: spread them over the tasks
        src = src.repartition(opts.partitions)
    enriched = src.mapInPandas(_parse_enrich_fn(opts.cpu_ms, opts.wait_ms), ENRICHED_SCHEMA)
    return (
        enriched.writeStream.foreachBatch(taxi_sink(opts, window_s))
        .option("checkpointLocation", opts.path("checkpoints", "taxi"))
        .queryName("taxi")
        .trigger(processingTime=f"{opts.interval_s} seconds")
        .start()
    )


def zone_totals(workdir: str | Path) -> tuple[Counter, int]:
    """(trips per zone over ended and open windows, trips) in the newest state under ``workdir``."""
    root = Path(workdir)
    state = BatchState(root / "taxi-state").latest()
    totals: Counter = Counter()
    for key, acc in state.get("open", {}).items():
        totals[int(key.split("|")[1])] += int(acc[0])
    import json

    for f in sorted((root / "windows").glob("*.json")):
        for zone, acc in json.loads(f.read_text())["zones"].items():
            totals[int(zone)] += int(acc[0])
    return totals, int(state.get("trips", 0))
