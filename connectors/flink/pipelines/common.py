"""Pieces shared by the PyFlink jobs: command-line options, the trace-driven source, per-record cost and the
sink-side end-to-end latency gauges. Runs inside ``.venv-flink`` (imports pyflink)."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import deque

from pyflink.common import Configuration, Types
from pyflink.datastream import FlatMapFunction, RuntimeContext, StreamExecutionEnvironment
from pyflink.table import StreamTableEnvironment
from trace_source import Schedule, load_rates


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
    """The latest (largest) count per key seen by a sink subtask, merged into ``<dir>/counts-<n>.json``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.counts: dict[str, int] = {}
        self.path = ""
        self.last_write = 0.0

    def open(self, subtask: int) -> None:
        if not self.directory:
            return
        os.makedirs(self.directory, exist_ok=True)
        self.path = os.path.join(self.directory, f"counts-{subtask}.json")
        if os.path.exists(self.path):
            with open(self.path) as fh:
                self.counts = json.load(fh)

    def update(self, key: str, count: int) -> None:
        if not self.path:
            return
        if count > self.counts.get(key, 0):
            self.counts[key] = count
        if time.time() - self.last_write > 0.5:
            self.flush()

    def flush(self) -> None:
        if not self.path:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(self.counts, fh)
        os.replace(tmp, self.path)
        self.last_write = time.time()
