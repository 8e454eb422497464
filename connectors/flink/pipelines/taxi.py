"""Taxi-trip analytics on PyFlink: trips -> enrich -> aggregate -> report.

Vertices (operator names): ``trips`` (trace-driven source of synthetic trips, parallelism 1), ``enrich`` (fare per
km and a zone lookup, per-record cost), ``aggregate`` (keyed by pickup zone: running trip count, mean fare and
distance in keyed state, per-record cost) and ``report`` (latest statistics per zone; end-to-end latency gauges;
parallelism 1). Options as WordCount (``common.options``).
"""

from __future__ import annotations

from common import (
    RECORD,
    CountsFile,
    LatencyGauges,
    TraceRecords,
    environment,
    options,
    schedule_of,
    spend,
    ticks,
)  # fmt: skip
from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction, MapFunction, RuntimeContext
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


class Report(MapFunction):
    def __init__(self, counts_dir: str, window_s: float) -> None:
        self.latency = LatencyGauges(window_s)
        self.counts = CountsFile(counts_dir)

    def open(self, runtime_context: RuntimeContext) -> None:
        self.latency.register(runtime_context)
        self.counts.open(runtime_context.get_index_of_this_subtask())

    def close(self) -> None:
        self.counts.flush()

    def map(self, value):
        self.latency.observe(value[3])
        self.counts.update(value[0], value[1])
        return 0


def main() -> None:
    args = options("Taxi-trip analytics driven by a rate trace")
    env, t_env = environment(args)
    schedule = schedule_of(args)
    trips = (
        ticks(t_env, args, schedule)
        .flat_map(TraceRecords(schedule), output_type=RECORD)
        .name("trips")
        .set_parallelism(1)
    )
    enriched = (
        trips.rebalance()
        .map(Enrich(args.cost_ms, args.cost_kind), output_type=TRIP)
        .name("enrich")
        .set_parallelism(args.parallelism)
    )
    stats = (
        enriched.key_by(lambda r: r[0], key_type=Types.STRING())
        .process(Aggregate(args.cost_ms, args.cost_kind), output_type=STATS)
        .name("aggregate")
        .set_parallelism(args.parallelism)
    )
    sink = stats.map(Report(args.counts_dir, args.latency_window_s), output_type=Types.INT()).name("report")
    # a chain of its own: at equal parallelism it would otherwise be fused into the upstream vertex
    sink.start_new_chain().set_parallelism(1).filter(lambda _: False).print().name("discard")
    env.execute(args.job_name or "taxi")


if __name__ == "__main__":
    main()
