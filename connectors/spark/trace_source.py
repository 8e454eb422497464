"""A trace-driven, replayable streaming source: records arrive at the rates of an arrival-rate trace.

The trace holds one arrival rate per line (tuples/s), one line per trace minute (``policies.paths.taxi_trace()``;
a month of it ships as ``connectors/traces/taxi_last_month.txt``). The schedule:

- ``compress``: trace minutes per wall minute (a day = 1440 trace minutes in 20 wall minutes is ``compress=72``);
  one trace step lasts ``d = 60 / compress`` wall seconds;
- ``rateScale``: step ``i`` delivers ``rate_i * rateScale`` records per wall second, i.e.
  ``n_i = floor(S_{i+1}) - floor(S_i)`` records with ``S_i = rateScale * d * sum_{j<i} rate_j``;
- record ``k`` (the ``m``-th of step ``i``) is created at ``t0 + (i + m / n_i) * d`` (epoch s); ``t0`` is fixed when
  the query first starts (or by the ``startTime`` option) and is kept in the query's offsets, so a query restarted
  from its checkpoint replays exactly the same records with the same creation times.

Offsets are record indices: ``{"index": k, "t0": t0}``; the latest offset is the number of records created by
now. ``read`` generates the records of an index range deterministically from the index and ``seed`` (a
splitmix64 hash), so any record can be regenerated later to check a sink for loss or duplication
(``sentence_records`` / ``expected_word_counts``).

Record kinds (``kind`` option): ``sentences`` (``id long, created double, sentence string``: six words of a
skewed vocabulary whose most frequent words are stop words) and ``taxi`` (``id long, created double, zone int,
fare double, distance double, passengers int, payment string``).

Usage::

    from connectors.spark.trace_source import register
    register(spark)
    df = (spark.readStream.format("trace").option("kind", "sentences").option("compress", 72)
          .option("rateScale", 0.1).option("seed", 7).load())

The ``TraceSchedule`` and the record generators are plain Python/numpy (no Spark needed): tests and the
benchmark use them to compute what a sink must contain.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SHIPPED_TRACES = Path(__file__).resolve().parent.parent / "traces"

SENTENCE_SCHEMA = "id long, created double, sentence string"
TAXI_SCHEMA = (
    "id long, created double, zone int, fare double, distance double, passengers int, payment string"
)
WORDS_PER_SENTENCE = 6
STOP_WORDS = ("the", "a", "of", "and", "to", "in", "is", "it")
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "qu", "da")
#: the vocabulary: stop words first (the most frequent), then 500 two/three-syllable words
VOCABULARY: tuple[str, ...] = STOP_WORDS + tuple(
    (_SYLLABLES[i % 12] + _SYLLABLES[(i // 12) % 12] + (_SYLLABLES[i // 144] if i >= 144 else ""))
    for i in range(500)
)
N_ZONES = 40
PAYMENTS = ("card", "cash", "app", "voucher")
_MASK = (1 << 64) - 1


def trace_path(trace: str) -> Path:
    """Resolve a trace name: ``taxi`` (the full shared trace), a name shipped in ``connectors/traces``
    (``taxi_last_month``) or a file path."""
    if trace == "taxi":
        from policies.paths import taxi_trace

        return taxi_trace()
    shipped = SHIPPED_TRACES / f"{trace}.txt"
    if shipped.is_file():
        return shipped
    path = Path(trace)
    if not path.is_file():
        raise ValueError(f"trace: {trace!r} is neither a shipped trace ({SHIPPED_TRACES}) nor a file")
    return path


def load_trace(trace: str, start: int = 0, minutes: int | None = None) -> np.ndarray:
    """The rates (tuples/s) of trace steps ``start .. start + minutes`` (all remaining when ``minutes`` is None)."""
    rates = np.loadtxt(trace_path(trace), dtype=float, ndmin=1)
    if start < 0 or start >= len(rates):
        raise ValueError(f"traceStart: {start} is outside the trace (0..{len(rates) - 1})")
    rates = rates[start:] if minutes is None else rates[start : start + minutes]
    if minutes is not None and minutes < 1:
        raise ValueError("traceMinutes: must be at least 1")
    return np.clip(rates, 0.0, None)


@dataclass
class TraceSchedule:
    """When each record is created (wall seconds after ``t0``) for a trace slice, compression and scale."""

    rates: np.ndarray
    compress: float = 1.0
    rate_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.compress <= 0:
            raise ValueError("compress: must be > 0 (trace minutes per wall minute)")
        if self.rate_scale <= 0:
            raise ValueError("rateScale: must be > 0")
        self.rates = np.asarray(self.rates, dtype=float)
        self.step_s = 60.0 / self.compress
        cum = np.floor(np.concatenate([[0.0], np.cumsum(self.rates)]) * self.rate_scale * self.step_s + 1e-9)
        self.cum = cum.astype(np.int64)  # records created before step i
        self.per_step = np.diff(self.cum)

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> TraceSchedule:
        """From data source options (case-insensitive names; Spark passes them lower-cased)."""
        options = CaseInsensitive(options)
        minutes = options.get("traceMinutes")
        rates = load_trace(
            str(options.get("trace", "taxi_last_month")),
            int(options.get("traceStart", 0)),
            int(minutes) if minutes not in (None, "") else None,
        )
        return cls(rates, float(options.get("compress", 1.0)), float(options.get("rateScale", 1.0)))

    @property
    def total(self) -> int:
        """Records in the whole slice."""
        return int(self.cum[-1])

    @property
    def duration_s(self) -> float:
        """Wall seconds the slice lasts."""
        return len(self.rates) * self.step_s

    def count_at(self, elapsed_s: float) -> int:
        """Records created at or before ``elapsed_s`` wall seconds after ``t0``."""
        if elapsed_s < 0:
            return 0
        i = int(elapsed_s // self.step_s)
        if i >= len(self.rates):
            return self.total
        n = int(self.per_step[i])
        if n == 0:
            return int(self.cum[i])
        frac = (elapsed_s - i * self.step_s) / self.step_s
        return int(self.cum[i]) + min(n, int(math.floor(n * frac)) + 1)

    def created(self, index: np.ndarray | Sequence[int]) -> np.ndarray:
        """Creation times (wall seconds after ``t0``) of record indices."""
        k = np.asarray(index, dtype=np.int64)
        i = np.searchsorted(self.cum, k, side="right") - 1
        i = np.clip(i, 0, len(self.rates) - 1)
        m = k - self.cum[i]
        n = np.maximum(self.per_step[i], 1)
        return (i + m / n) * self.step_s

    def rate_at(self, elapsed_s: float) -> float:
        """Arrival rate (records per wall second) at ``elapsed_s``."""
        i = int(elapsed_s // self.step_s)
        if i < 0 or i >= len(self.rates):
            return 0.0
        return float(self.per_step[i] / self.step_s)


# ---- deterministic record contents ----------------------------------------------------------------------------
def _mix(x: int) -> int:
    """splitmix64 finaliser."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _uniform(seed: int, index: int, j: int) -> float:
    return _mix((seed * 0x100000001B3 + index * 64 + j) & _MASK) / 2.0**64


def sentence_of(index: int, seed: int) -> str:
    """The sentence of record ``index``: six words, the lower vocabulary indices most frequent."""
    v = len(VOCABULARY)
    return " ".join(VOCABULARY[int(v * _uniform(seed, index, j) ** 3)] for j in range(WORDS_PER_SENTENCE))


def taxi_of(index: int, seed: int) -> tuple[int, float, float, int, str]:
    """(zone, fare $, distance km, passengers, payment) of trip ``index``."""
    zone = 1 + int(N_ZONES * _uniform(seed, index, 0) ** 2)
    distance = round(0.5 + 15.0 * _uniform(seed, index, 1) ** 2, 2)
    fare = round(3.0 + 2.1 * distance + 4.0 * _uniform(seed, index, 2), 2)
    passengers = 1 + int(4 * _uniform(seed, index, 3) ** 3)
    payment = PAYMENTS[int(len(PAYMENTS) * _uniform(seed, index, 4))]
    return zone, fare, distance, passengers, payment


def keep_word(word: str) -> bool:
    """The WordCount filter: stop words are dropped."""
    return word not in STOP_WORDS


def sentence_records(schedule: TraceSchedule, t0: float, start: int, end: int, seed: int) -> Iterator[tuple]:
    """Records ``start .. end - 1`` of kind ``sentences`` as (id, created epoch s, sentence)."""
    created = schedule.created(np.arange(start, end)) + t0
    for k, c in zip(range(start, end), created.tolist(), strict=True):
        yield (k, c, sentence_of(k, seed))


def taxi_records(schedule: TraceSchedule, t0: float, start: int, end: int, seed: int) -> Iterator[tuple]:
    """Records ``start .. end - 1`` of kind ``taxi`` (see ``TAXI_SCHEMA``)."""
    created = schedule.created(np.arange(start, end)) + t0
    for k, c in zip(range(start, end), created.tolist(), strict=True):
        yield (k, c, *taxi_of(k, seed))


def expected_word_counts(indices: Iterable[int], seed: int) -> Counter:
    """Word counts after the filter over the sentences of ``indices``: what an exact WordCount sink holds."""
    counts: Counter = Counter()
    for k in indices:
        counts.update(w for w in sentence_of(k, seed).split(" ") if keep_word(w))
    return counts


def expected_zone_trips(indices: Iterable[int], seed: int) -> Counter:
    """Trips per zone over ``indices``."""
    return Counter(taxi_of(k, seed)[0] for k in indices)


# ---- the Spark Python data source ----------------------------------------------------------------------------
KINDS = {"sentences": (SENTENCE_SCHEMA, sentence_records), "taxi": (TAXI_SCHEMA, taxi_records)}


class CaseInsensitive(dict):
    """Options looked up case-insensitively (Spark hands a data source its options with lower-cased names)."""

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__({str(k).lower(): v for k, v in dict(options).items()})

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        return super().get(key.lower(), default)

    def __getitem__(self, key: str) -> Any:
        return super().__getitem__(key.lower())


def _check_options(options: dict[str, Any]) -> None:
    options = CaseInsensitive(options)
    kind = options.get("kind", "sentences")
    if kind not in KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {sorted(KINDS)}")
    parts = int(options.get("numPartitions", 4))
    if parts < 1:
        raise ValueError("numPartitions: must be at least 1")


try:  # the data source classes need pyspark (and pyarrow at run time); the schedule above does not
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
except ImportError:  # pragma: no cover - pyspark is a project dependency
    DataSource = object  # type: ignore[assignment,misc]
    DataSourceStreamReader = object  # type: ignore[assignment,misc]
    InputPartition = None  # type: ignore[assignment,misc]


class TraceStreamReader(DataSourceStreamReader):  # type: ignore[misc,valid-type]
    """Offsets ``{"index": k, "t0": epoch s}``; see the module docstring."""

    def __init__(self, options: dict[str, Any]) -> None:
        _check_options(options)
        options = CaseInsensitive(options)
        self.kind = options.get("kind", "sentences")
        self.seed = int(options.get("seed", 0))
        self.partitions_n = int(options.get("numPartitions", 4))
        self.start_time = float(options["startTime"]) if options.get("startTime") else None
        self.schedule = TraceSchedule.from_options(options)

    def initialOffset(self) -> dict:
        t0 = self.start_time if self.start_time is not None else round(time.time(), 3)
        return {"index": 0, "t0": str(t0)}

    def _latest(self, start: dict) -> dict:
        t0 = float(start["t0"])
        return {
            "index": max(int(start["index"]), self.schedule.count_at(time.time() - t0)),
            "t0": start["t0"],
        }

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if start is None:  # older signature: no start offset given
            start = self.initialOffset()
        return self._latest(start)

    def partitions(self, start: dict, end: dict) -> Sequence[Any]:
        a, b = int(start["index"]), int(end["index"])
        if b <= a:
            return []
        n = min(self.partitions_n, b - a)
        bounds = [a + (b - a) * p // n for p in range(n + 1)]
        return [InputPartition((bounds[p], bounds[p + 1], float(end["t0"]))) for p in range(n)]

    def read(self, partition: Any) -> Iterator[tuple]:
        a, b, t0 = partition.value
        return KINDS[self.kind][1](self.schedule, t0, a, b, self.seed)

    def commit(self, end: dict) -> None:
        pass


class TraceDataSource(DataSource):  # type: ignore[misc,valid-type]
    """``spark.readStream.format("trace")``: options ``kind``, ``trace``, ``traceStart``, ``traceMinutes``,
    ``compress``, ``rateScale``, ``seed``, ``numPartitions`` (tasks per micro-batch), ``startTime`` (epoch s)."""

    @classmethod
    def name(cls) -> str:
        return "trace"

    def schema(self) -> str:
        _check_options(self.options)
        return KINDS[CaseInsensitive(self.options).get("kind", "sentences")][0]

    def streamReader(self, schema: Any) -> TraceStreamReader:
        return TraceStreamReader(dict(self.options))


def register(spark: Any) -> None:
    """Make ``format("trace")`` available in ``spark`` (once per session)."""
    spark.dataSource.register(TraceDataSource)


# ---- fallback: a generator thread writing the same records as JSON-lines files ---------------------------------
class FileTraceGenerator:
    """Writes the records of the schedule as JSON-lines files into ``directory`` for Spark's file source.

    The fallback to the Python data source when the machine is too loaded for Spark's Python source runner to
    connect back within Spark's fixed 10 s. Every ``chunk_s`` seconds the records created since the last file
    are written to ``part-<first index>-<end index>.json`` (via a hidden temporary file and a rename, so the file
    source never sees half a file). ``t0`` is kept in ``directory/_t0`` and the next index is found from the
    file names, so a restarted generator continues the same sequence: the files are immutable and the
    records are the same as the data source's (``sentence_records`` / ``taxi_records``).
    """

    def __init__(self, directory: str | Path, options: dict[str, Any], chunk_s: float = 2.0) -> None:
        import threading

        _check_options(options)
        opts = CaseInsensitive(options)
        self.directory = Path(directory)
        self.kind = opts.get("kind", "sentences")
        self.seed = int(opts.get("seed", 0))
        self.schedule = TraceSchedule.from_options(opts)
        self.chunk_s = chunk_s
        self.directory.mkdir(parents=True, exist_ok=True)
        t0_file = self.directory / "_t0"
        if t0_file.exists():
            self.t0 = float(t0_file.read_text())
        else:
            self.t0 = float(opts["startTime"]) if opts.get("startTime") else round(time.time(), 3)
            tmp = self.directory / ".t0.tmp"
            tmp.write_text(str(self.t0))
            tmp.rename(t0_file)
        ends = [int(p.stem.split("-")[2]) for p in self.directory.glob("part-*.json")]
        self.next_index = max(ends, default=0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="trace-files", daemon=True)

    def write_available(self, now: float | None = None) -> int:
        """Write the records created up to ``now`` (epoch s); the number written."""
        import json

        end = self.schedule.count_at((time.time() if now is None else now) - self.t0)
        if end <= self.next_index:
            return 0
        rows = KINDS[self.kind][1](self.schedule, self.t0, self.next_index, end, self.seed)
        names = [f.split(" ")[0] for f in KINDS[self.kind][0].split(", ")]
        name = f"part-{self.next_index:012d}-{end:012d}.json"
        tmp = self.directory / f".{name}.tmp"
        with open(tmp, "w") as fh:
            for row in rows:
                fh.write(json.dumps(dict(zip(names, row, strict=True))) + "\n")
        tmp.rename(self.directory / name)
        written, self.next_index = end - self.next_index, end
        return written

    def _loop(self) -> None:
        while not self._stop.wait(self.chunk_s):
            self.write_available()
            if self.next_index >= self.schedule.total:
                break

    def start(self) -> FileTraceGenerator:
        self.write_available()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


_GENERATORS: dict[str, FileTraceGenerator] = {}


def warm_up(spark: Any, partitions: int) -> float:
    """Run a tiny pandas job on every executor so that their Python workers exist before the trace starts
    (their start-up would otherwise be a backlog of the first batch); returns its duration (s)."""
    t = time.monotonic()

    def ident(batches):  # noqa: ANN001, ANN202
        yield from batches

    spark.range(0, partitions * 4, 1, partitions).mapInPandas(ident, "id long").count()
    return time.monotonic() - t


def read_trace(
    spark: Any, options: dict[str, str], source: str = "python", directory: str | None = None
) -> Any:
    """The trace as a streaming DataFrame: ``source="python"`` = the Python data source ``format("trace")``;
    ``source="files"`` = a ``FileTraceGenerator`` (one per directory and process, started on first use) read
    by Spark's JSON file source from ``directory``."""
    kind = CaseInsensitive(options).get("kind", "sentences")
    if source == "python":
        register(spark)
        return spark.readStream.format("trace").options(**options).load()
    if source != "files":
        raise ValueError(f"source: {source!r} is not one of python, files")
    if not directory:
        raise ValueError("source: files needs a directory")
    gen = _GENERATORS.get(str(directory))
    if gen is None or not gen._thread.is_alive() and gen.next_index < gen.schedule.total:
        warm_up(spark, int(CaseInsensitive(options).get("numPartitions", 4)))
        gen = _GENERATORS[str(directory)] = FileTraceGenerator(directory, options).start()
    return spark.readStream.schema(KINDS[kind][0]).json(str(directory))


def stop_generators() -> None:
    """Stop every generator thread of this process."""
    for gen in _GENERATORS.values():
        gen.stop()
    _GENERATORS.clear()
