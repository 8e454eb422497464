"""Taxi-trip analytics on PyFlink: trips -> enrich -> aggregate -> report.

Vertices (operator names): ``trips`` (trace-driven source of synthetic trips, parallelism 1), ``enrich`` (fare per
km and a zone lookup, per-record cost), ``aggregate`` (keyed by pickup zone: running trip count, mean fare and
distance in keyed state, per-record cost) and ``report`` (latest statistics per zone; end-to-end latency gauges;
parallelism 1). Options as WordCount (``common.options``).
"""

from __future__ import annotations

from common import CountingSink, run_trace_job, spend
from pyflink.common import Types
from pyflink.datastream import DataStream, KeyedProcessFunction, MapFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor
from trace_source import taxi_trip

TRIP = Types.TUPLE([Types.STRING(), Types.DOUBLE(), Types.DOUBLE(), Types.LONG()])
STATS = Types.TUPLE([Types.STRING(), Types.LONG(), Types.DOUBLE(), Types.LONG()])


class Enrich(MapFunction):
    """Record number -> (zone, km, fare per km, created ms) after a per-record lookup cost."""

    def __init__(self, cost_ms: float, kind: str) -> None:
        self.cost_ms, self.kind = cost_ms, kind

    def map(self, value):
        record, created = value
        spend(self.cost_ms, self.kind)
        zone, km, fare = taxi_trip(record)
        return zone, km, fare / km, created


class Aggregate(KeyedProcessFunction):
    """Per zone: trips so far and mean fare per km (keyed state); emits (zone, trips, mean $/km, created ms)."""

    def __init__(self, cost_ms: float, kind: str) -> None:
        self.cost_ms, self.kind = cost_ms, kind

    def open(self, runtime_context: RuntimeContext) -> None:
        self.trips = runtime_context.get_state(ValueStateDescriptor("trips", Types.LONG()))
        self.fare = runtime_context.get_state(ValueStateDescriptor("fare_sum", Types.DOUBLE()))

    def process_element(self, value, ctx):
        spend(self.cost_ms, self.kind)
        n = (self.trips.value() or 0) + 1
        total = (self.fare.value() or 0.0) + value[2]
        self.trips.update(n)
        self.fare.update(total)
        yield value[0], n, total / n, value[3]


class Report(CountingSink):
    """Latest statistics per zone: the end-to-end latency of every record, the trip count per zone appended."""

    def key_count_created(self, value) -> tuple[str, int, int]:
        return value[0], value[1], value[3]


def operators(trips: DataStream, args) -> DataStream:
    """enrich -> aggregate, at the initial parallelism ``args.parallelism``."""
    enriched = (
        trips.rebalance()
        .map(Enrich(args.cost_ms, args.cost_kind), output_type=TRIP)
        .name("enrich")
        .set_parallelism(args.parallelism)
    )
    return (
        enriched.key_by(lambda r: r[0], key_type=Types.STRING())
        .process(Aggregate(args.cost_ms, args.cost_kind), output_type=STATS)
        .name("aggregate")
        .set_parallelism(args.parallelism)
    )


def main() -> None:
    run_trace_job(
        "Taxi-trip analytics driven by a rate trace", "taxi", "trips", operators, "report",
        lambda args: Report(args.counts_dir, args.latency_window_s),
    )  # fmt: skip


if __name__ == "__main__":
    main()
