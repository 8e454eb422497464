"""Deterministic trace-driven record schedule (pure Python: imported by the PyFlink jobs and by the tests).

A bounded ``datagen`` sequence emits ticks ``0, 1, ...`` at ``ticks_per_s`` per second; tick ``i`` stands for the
time ``t = i / ticks_per_s`` (s) since the start of the replay. The trace gives a rate (tuples/s) per step; one
step lasts ``step_s`` seconds of replay time (``60 / compression`` for a one-minute trace), rates are multiplied
by ``rate_scale``. ``count(i)`` is how many records tick ``i`` emits: ``floor(C(t_{i+1})) - floor(C(t_i))`` with
``C`` the cumulative number of records the trace asks for by time ``t``. Because the schedule is a function of
the tick number only, a replay from a checkpoint re-emits exactly the same records, so counts are exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

VOCABULARY = 200


def load_rates(path: str, start: int = 0, steps: int = 0) -> list[float]:
    """Rates (tuples/s) of lines ``start .. start+steps`` of a trace file (all remaining when ``steps`` is 0)."""
    rates: list[float] = []
    with open(path) as fh:
        for i, line in enumerate(fh):
            if i < start or not line.strip():
                continue
            rates.append(float(line.split()[0]))
            if steps and len(rates) >= steps:
                break
    if not rates:
        raise ValueError(f"trace {path}: no rate from line {start}")
    return rates


@dataclass
class Schedule:
    """When the trace emits records: ``rates`` (tuples/s per step), ``step_s`` (s), ``rate_scale``, ticks/s."""

    rates: list[float]
    step_s: float
    rate_scale: float = 1.0
    ticks_per_s: float = 100.0
    _prefix: list[float] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._prefix = [0.0]
        for r in self.rates:
            self._prefix.append(self._prefix[-1] + r * self.rate_scale * self.step_s)

    @property
    def duration_s(self) -> float:
        return len(self.rates) * self.step_s

    def rate_at(self, t: float) -> float:
        """Trace rate (tuples/s) at replay time ``t`` (s); the last step's rate holds afterwards."""
        k = min(max(int(t // self.step_s), 0), len(self.rates) - 1)
        return self.rates[k] * self.rate_scale

    def cumulative(self, t: float) -> float:
        """Records the trace asks for during ``[0, t)`` (real number)."""
        if t <= 0:
            return 0.0
        k = min(int(t // self.step_s), len(self.rates))
        extra = t - k * self.step_s
        rate = self.rates[min(k, len(self.rates) - 1)] * self.rate_scale
        return self._prefix[k] + rate * extra

    def count(self, tick: int) -> int:
        """Records emitted by tick ``tick``."""
        a = self.cumulative(tick / self.ticks_per_s)
        b = self.cumulative((tick + 1) / self.ticks_per_s)
        return int(math.floor(b) - math.floor(a))

    def first_index(self, tick: int) -> int:
        """Global index of the first record of tick ``tick``."""
        return int(math.floor(self.cumulative(tick / self.ticks_per_s)))


def _mix(x: int) -> int:
    """A cheap deterministic 32-bit hash."""
    x = (x ^ 61) ^ (x >> 16)
    x = (x * 9) & 0xFFFFFFFF
    x ^= x >> 4
    x = (x * 0x27D4EB2D) & 0xFFFFFFFF
    return x ^ (x >> 15)


def word(index: int) -> str:
    """Word ``index`` of the vocabulary; every tenth word is a stop word (``w0``, ``w10``, ...)."""
    return f"w{index % VOCABULARY}"


def is_stop_word(w: str) -> bool:
    """Words the WordCount filter drops."""
    return w.endswith("0")


def sentence(record: int, words: int = 5) -> str:
    """The sentence of record number ``record`` (``words`` words separated by spaces)."""
    return " ".join(word(_mix(record * 31 + j)) for j in range(words))


def expected_counts(schedule: Schedule, ticks: int, words: int = 5) -> dict[str, int]:
    """Count per non-stop word over the records of ticks ``0 .. ticks-1`` (what WordCount must end with)."""
    out: dict[str, int] = {}
    n = schedule.first_index(ticks)
    for r in range(n):
        for w in sentence(r, words).split():
            if not is_stop_word(w):
                out[w] = out.get(w, 0) + 1
    return out


def taxi_trip(record: int) -> tuple[str, float, float]:
    """A synthetic trip of record ``record``: (pickup zone, distance km, fare $)."""
    h = _mix(record)
    zone = f"z{h % 50}"
    distance = 0.5 + (h >> 8) % 200 / 10.0
    fare = round(2.5 + distance * 1.8 + (h >> 16) % 10 / 2.0, 2)
    return zone, distance, fare


def counts_path(directory: str, subtask: int) -> str:
    """The counts log of sink subtask ``subtask`` under ``directory`` (see ``common.CountsFile``)."""
    return f"{directory}/counts-{subtask}.log"


def read_counts(directory: str) -> dict[str, int]:
    """The final count per key written by the sink subtasks under ``directory``: the largest count each key was
    given in any ``counts-<n>.log`` (``key<TAB>count`` lines; a torn last line of a killed process is skipped)."""
    import glob

    out: dict[str, int] = {}
    for path in sorted(glob.glob(f"{directory}/counts-*.log")):
        with open(path) as fh:
            for line in fh:
                key, sep, count = line.rstrip("\n").partition("\t")
                if sep and count.isdigit():
                    out[key] = max(out.get(key, 0), int(count))
    return out
