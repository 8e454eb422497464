"""WordCount of paper 004 on PyFlink: sentences -> splitter (+ filter) -> counter -> top.

Vertices (operator names, as a manifest names them): ``sentences`` (trace-driven source, parallelism 1),
``splitter`` (sentence -> words, per-record cost; the stop-word ``filter`` is chained into it), ``counter``
(keyed running count per word, per-record cost, state checkpointed) and ``top`` (top words; end-to-end latency
gauges ``e2eLatencyMeanMs``/``e2eLatencyP95Ms``; parallelism 1).

Run: ``flink run -d -py wordcount.py -pyfs trace_source.py,common.py -- --trace taxi.txt --step-s 2 ...``
(``FlinkCluster.submit_python`` does it; see ``connectors.flink.jobs``).
"""

from __future__ import annotations

import heapq

from common import CountingSink, run_trace_job, spend
from pyflink.common import Types
from pyflink.datastream import DataStream, FlatMapFunction, KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor
from trace_source import is_stop_word, sentence

WORD = Types.TUPLE([Types.STRING(), Types.LONG()])
COUNT = Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])


class Splitter(FlatMapFunction):
    def __init__(self, cost_ms: float, kind: str) -> None:
        self.cost_ms, self.kind = cost_ms, kind

    def flat_map(self, value):
        record, created = value
        spend(self.cost_ms, self.kind)
        for w in sentence(record).split():
            yield w, created


class Counter(KeyedProcessFunction):
    """Running count per word (keyed ValueState): emits ``(word, count, created ms)``."""

    def __init__(self, cost_ms: float, kind: str) -> None:
        self.cost_ms, self.kind = cost_ms, kind

    def open(self, runtime_context: RuntimeContext) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        spend(self.cost_ms, self.kind)
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield value[0], n, value[1]


class Top(CountingSink):
    """Keeps the top-10 words by count; measures the end-to-end latency of every record, appends the counts."""

    def __init__(self, counts_dir: str, window_s: float) -> None:
        super().__init__(counts_dir, window_s)
        self.top: dict[str, int] = {}

    def map(self, value):
        w, n, _ = value
        self.top[w] = n
        if len(self.top) > 50:
            self.top = dict(heapq.nlargest(10, self.top.items(), key=lambda kv: kv[1]))
        return super().map(value)


def operators(records: DataStream, args) -> DataStream:
    """splitter (+ filter) -> counter, at the initial parallelism ``args.parallelism``."""
    words = (
        records.rebalance()
        .flat_map(Splitter(args.cost_ms, args.cost_kind), output_type=WORD)
        .name("splitter")
        .set_parallelism(args.parallelism)
        .filter(lambda r: not is_stop_word(r[0]))
        .name("filter")
        .set_parallelism(args.parallelism)
    )
    return (
        words.key_by(lambda r: r[0], key_type=Types.STRING())
        .process(Counter(args.cost_ms, args.cost_kind), output_type=COUNT)
        .name("counter")
        .set_parallelism(args.parallelism)
    )


def main() -> None:
    run_trace_job(
        "WordCount (paper 004) driven by a rate trace", "wordcount", "sentences", operators, "top",
        lambda args: Top(args.counts_dir, args.latency_window_s),
    )  # fmt: skip


if __name__ == "__main__":
    main()
