"""Pieces shared by the PyFlink jobs: command-line options, the trace-driven source, per-record cost, the sink
(end-to-end latency gauges, latest count per key) and ``run_trace_job``, which wires source and sink around a
job's own operators. Runs inside ``.venv-flink`` (imports pyflink)."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import deque
from collections.abc import Callable

from pyflink.common import Configuration, Types
from pyflink.datastream import (
    DataStream,
    FlatMapFunction,
    MapFunction,
    RuntimeContext,
    StreamExecutionEnvironment,
)  # fmt: skip
from pyflink.table import StreamTableEnvironment
from trace_source import Schedule, counts_path, load_rates


def options(description: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--trace", required=True, help="trace file: tuples/s per line (one line per trace step)")
    p.add_argument("--trace-start", type=int, default=0, help="first trace line replayed")
    p.add_argument("--steps", type=int, default=0, help="trace lines replayed (0: all)")
    p.add_argument(
        "--step-s", type=float, default=1.0, help="replay seconds per trace line (time compression)"
    )
    p.add_argument("--rate-scale", type=float, default=1.0, help="multiplier of the trace rates")
    p.add_argument("--ticks-per-s", type=float, default=50.0, help="source ticks per second")
    p.add_argument(
        "--duration-s", type=float, default=0.0, help="replay length (s); 0: the whole trace slice"
    )
    p.add_argument("--cost-ms", type=float, default=0.0, help="per-record cost of the scaled operators (ms)")
    p.add_argument("--cost-kind", choices=("sleep", "cpu"), default="sleep", help="wait or CPU spin")
    p.add_argument("--parallelism", type=int, default=1, help="initial parallelism of the scaled operators")
    p.add_argument("--max-parallelism", type=int, default=32, help="max parallelism (key groups)")
    p.add_argument("--counts-dir", default="", help="the sink writes the latest count per key here (tests)")
    p.add_argument("--latency-window-s", type=float, default=10.0, help="window of the latency gauges (s)")
    p.add_argument("--job-name", default="", help="Flink job name")
    return p.parse_args()


def environment(args: argparse.Namespace) -> tuple[StreamExecutionEnvironment, StreamTableEnvironment]:
    conf = Configuration()
    conf.set_string("python.fn-execution.bundle.time", "100")
    conf.set_string("python.fn-execution.bundle.size", "1000")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_max_parallelism(args.max_parallelism)
    return env, StreamTableEnvironment.create(env)


def schedule_of(args: argparse.Namespace) -> Schedule:
    return Schedule(
        load_rates(args.trace, args.trace_start, args.steps), args.step_s, args.rate_scale, args.ticks_per_s
    )


def ticks(t_env: StreamTableEnvironment, args: argparse.Namespace, schedule: Schedule):
    """A bounded, checkpointed datagen sequence of ticks (``ticks_per_s`` per second) as a DataStream."""
    duration = args.duration_s or schedule.duration_s
    n = int(duration * args.ticks_per_s)
    t_env.execute_sql(
        "CREATE TEMPORARY TABLE ticks (seq BIGINT) WITH ('connector' = 'datagen', "
        f"'rows-per-second' = '{args.ticks_per_s:g}', 'fields.seq.kind' = 'sequence', "
        f"'fields.seq.start' = '0', 'fields.seq.end' = '{n - 1}')"
    )
    return t_env.to_data_stream(t_env.from_path("ticks"))


class TraceRecords(FlatMapFunction):
    """Tick ``i`` -> the records the schedule assigns to it: ``(record number, creation time ms)``.

    Gauge ``pendingRecords``: records the trace asked for by now (wall clock since the first tick) that were not
    emitted yet (the backlog in front of the source, tuples)."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.started = 0.0
        self.first_tick = -1
        self.emitted_upto = 0

    def open(self, runtime_context: RuntimeContext) -> None:
        runtime_context.get_metrics_group().gauge("pendingRecords", self._pending)

    def _pending(self) -> int:
        if self.first_tick < 0:
            return 0
        t = self.first_tick / self.schedule.ticks_per_s + time.time() - self.started
        return max(int(self.schedule.cumulative(t)) - self.emitted_upto, 0)

    def flat_map(self, value):
        tick = int(value[0])
        if self.first_tick < 0:
            self.first_tick, self.started = tick, time.time()
        first = self.schedule.first_index(tick)
        n = self.schedule.count(tick)
        now = int(time.time() * 1000)
        self.emitted_upto = first + n
        for r in range(first, first + n):
            yield r, now


RECORD = Types.TUPLE([Types.LONG(), Types.LONG()])


def spend(cost_ms: float, kind: str) -> None:
    """The per-record cost: sleep (an external lookup) or spin the CPU for ``cost_ms`` ms."""
    if cost_ms <= 0:
        return
    if kind == "sleep":
        time.sleep(cost_ms / 1000.0)
        return
    end = time.perf_counter() + cost_ms / 1000.0
    while time.perf_counter() < end:
        pass


class LatencyGauges:
    """Sink-side end-to-end latency (ms) of the records of the last ``window_s`` seconds: gauges
    ``e2eLatencyMeanMs``, ``e2eLatencyP95Ms`` and ``e2eRecordsInWindow`` on the operator's metric group."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.samples: deque[tuple[float, int]] = deque()

    def register(self, runtime_context: RuntimeContext) -> None:
        group = runtime_context.get_metrics_group()
        group.gauge("e2eLatencyMeanMs", self.mean)
        group.gauge("e2eLatencyP95Ms", self.p95)
        group.gauge("e2eRecordsInWindow", lambda: len(self._window()))

    def observe(self, created_ms: int) -> None:
        now = time.time()
        self.samples.append((now, int(now * 1000) - int(created_ms)))

    def _window(self) -> list[int]:
        cutoff = time.time() - self.window_s
        while self.samples and self.samples[0][0] < cutoff:
            self.samples.popleft()
        return [v for _, v in self.samples]

    def mean(self) -> int:
        w = self._window()
        return int(sum(w) / len(w)) if w else -1

    def p95(self) -> int:
        w = sorted(self._window())
        return w[min(int(0.95 * len(w)), len(w) - 1)] if w else -1


class CountsFile:
    """The counts a sink subtask emitted, appended to ``<dir>/counts-<n>.log`` as ``key<TAB>count`` lines, each
    written to the operating system at once (one ``write`` per update, about 2 us).

    A restart resumes from the last checkpoint, and a count the sink received before that checkpoint is not
    emitted again: counts the sink held only in memory (it used to write them every 0.5 s) would be lost if its
    process ended without ``close()`` (e.g. a TaskManager killed) and the word did not come back. An update
    written at once survives the process; readers take the largest count per key (``trace_source.read_counts``).
    ``counts-<n>.json`` keeps the latest counts as a readable snapshot, written every ``SNAPSHOT_S`` seconds and
    at close (not exact across restarts; older readers)."""

    SNAPSHOT_S = 0.5

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.fh = None
        self.latest: dict[str, int] = {}
        self.snapshot = ""
        self.last_snapshot = 0.0

    def open(self, subtask: int) -> None:
        if not self.directory:
            return
        os.makedirs(self.directory, exist_ok=True)
        self.snapshot = os.path.join(self.directory, f"counts-{subtask}.json")
        if os.path.exists(self.snapshot):  # every count in it was appended to the log before
            with open(self.snapshot) as fh:
                self.latest = json.load(fh)
        self.fh = open(counts_path(self.directory, subtask), "a", buffering=1)  # noqa: SIM115 - closed in close()

    def update(self, key: str, count: int) -> None:
        if self.fh is None or count <= self.latest.get(key, 0):
            return
        self.latest[key] = count
        self.fh.write(f"{key}\t{count}\n")
        self.fh.flush()
        if time.time() - self.last_snapshot > self.SNAPSHOT_S:
            self._write_snapshot()

    def _write_snapshot(self) -> None:
        tmp = self.snapshot + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(self.latest, fh)
        os.replace(tmp, self.snapshot)
        self.last_snapshot = time.time()

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None
            self._write_snapshot()


class CountingSink(MapFunction):
    """The sink vertex of a trace job: observes the end-to-end latency of every record (``LatencyGauges``) and
    appends the latest count per key (``CountsFile``). ``key_count_created(value)`` -> (key, count, created ms)."""

    def __init__(self, counts_dir: str, window_s: float) -> None:
        self.latency = LatencyGauges(window_s)
        self.counts = CountsFile(counts_dir)

    def open(self, runtime_context: RuntimeContext) -> None:
        self.latency.register(runtime_context)
        self.counts.open(runtime_context.get_index_of_this_subtask())

    def close(self) -> None:
        self.counts.close()

    def key_count_created(self, value) -> tuple[str, int, int]:
        return value[0], value[1], value[2]

    def map(self, value):
        key, count, created = self.key_count_created(value)
        self.latency.observe(created)
        self.counts.update(key, count)
        return 0


def run_trace_job(
    description: str,
    default_name: str,
    source: str,
    operators: Callable[[DataStream, argparse.Namespace], DataStream],
    sink: str,
    sink_function: Callable[[argparse.Namespace], MapFunction],
) -> None:
    """Parse the options, build and execute a trace-driven job:

    ticks -> ``TraceRecords`` (vertex ``source``, parallelism 1) -> ``operators(records, args)`` (the job's own
    operators) -> ``sink_function(args)`` (vertex ``sink``, parallelism 1, a chain of its own: at equal
    parallelism it would otherwise be fused into the upstream vertex) -> discard."""
    args = options(description)
    env, t_env = environment(args)
    schedule = schedule_of(args)
    records = (
        ticks(t_env, args, schedule)
        .flat_map(TraceRecords(schedule), output_type=RECORD)
        .name(source)
        .set_parallelism(1)
    )
    out = operators(records, args).map(sink_function(args), output_type=Types.INT()).name(sink)
    out.start_new_chain().set_parallelism(1).filter(lambda _: False).print().name("discard")
    env.execute(args.job_name or default_name)
