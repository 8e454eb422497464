"""What this worker process saw of database and broker outages, for the dispatcher's best guess at why a slot was
missed (``autoscaler.control.slots.infer_reason``).

In-process memory only: a process that was not running cannot have seen anything, and its absence is itself the
inference (``worker_down``). Times are seconds since the epoch.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

#: intervals kept per kind (older ones are forgotten; a gap older than that is labelled from what is left)
KEPT = 64


@dataclass
class _Outage:
    intervals: list[list[float]] = field(default_factory=list)  # [first seen, last seen] pairs
    open: bool = False

    def seen(self, now: float) -> None:
        if self.open and self.intervals:
            self.intervals[-1][1] = now
        else:
            self.intervals.append([now, now])
            del self.intervals[:-KEPT]
            self.open = True

    def ended(self, now: float) -> None:
        if self.open and self.intervals:
            self.intervals[-1][1] = now
        self.open = False

    def overlaps(self, start: float, end: float) -> bool:
        return any(a < end and b >= start for a, b in self.intervals)


DATABASE = _Outage()
BROKER = _Outage()


def database_failed(now: float | None = None) -> None:
    """A database operation failed (connection refused, terminated, closed)."""
    DATABASE.seen(time.time() if now is None else now)


def database_ok(now: float | None = None) -> None:
    DATABASE.ended(time.time() if now is None else now)


def broker_failed(now: float | None = None) -> None:
    """Publishing a task failed (broker unreachable)."""
    BROKER.seen(time.time() if now is None else now)


def broker_ok(now: float | None = None) -> None:
    BROKER.ended(time.time() if now is None else now)


#: a worker that received no dispatch for this long (s, and 5 dispatch intervals) while it was up infers that the
#: broker (or beat) was down in between
SILENCE_S = 10.0
_last_dispatch_s: float | None = None
#: the first dispatch this process ran (s since the epoch): before it, this worker was not consuming (down or
#: starting), so it cannot tell what happened then
first_dispatch_s: float | None = None


def dispatch_seen(now: float, interval_s: float) -> None:
    """A dispatch ran in this process: a long silence before it is recorded as a broker outage."""
    global _last_dispatch_s, first_dispatch_s
    if first_dispatch_s is None:
        first_dispatch_s = now
    prev, _last_dispatch_s = _last_dispatch_s, now
    if prev is not None and now - prev > max(SILENCE_S, 5 * interval_s):
        BROKER.intervals.append([prev, now])
        del BROKER.intervals[:-KEPT]


def reset() -> None:
    """Forget everything (tests)."""
    DATABASE.intervals.clear()
    DATABASE.open = False
    BROKER.intervals.clear()
    BROKER.open = False
    global _last_dispatch_s, first_dispatch_s
    _last_dispatch_s = first_dispatch_s = None
