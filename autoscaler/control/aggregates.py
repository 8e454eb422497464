"""Incremental per-application aggregates: totals and a sliding window of the last ``window`` observed periods.

The window is a ring buffer (flags byte + resource cost + period length per slot) with running sums, so adding a
period and reading cost per hour or violation/reconfiguration fractions are O(1) in the number of periods stored.
"""

from __future__ import annotations

import struct
from typing import Any

from autoscaler.control.models import ApplicationControl

VIOLATED, RECONFIGURED = 1, 2


def record_period(
    control: ApplicationControl, *, violated: bool, reconfigured: bool, cost: float, seconds: float
) -> None:
    """Add one observed period (resource ``cost`` in currency over ``seconds``) to the totals and the window."""
    control.periods += 1
    control.violated_periods += int(violated)
    control.reconfigured_periods += int(reconfigured)
    control.total_cost += cost
    control.observed_seconds += seconds
    w = control.window
    flags = bytearray(bytes(control.ring_flags or b""))
    costs = bytearray(bytes(control.ring_cost or b""))
    secs = bytearray(bytes(control.ring_seconds or b""))
    if len(flags) != w:
        flags, costs, secs = bytearray(w), bytearray(8 * w), bytearray(8 * w)
        control.ring_pos = control.ring_fill = 0
        control.window_violated = control.window_reconfigured = 0
        control.window_cost = control.window_seconds = 0.0
    pos = control.ring_pos
    if control.ring_fill == w:  # drop the oldest period
        old = flags[pos]
        control.window_violated -= old & VIOLATED
        control.window_reconfigured -= (old & RECONFIGURED) >> 1
        control.window_cost -= struct.unpack_from("<d", costs, 8 * pos)[0]
        control.window_seconds -= struct.unpack_from("<d", secs, 8 * pos)[0]
    else:
        control.ring_fill += 1
    flags[pos] = (VIOLATED if violated else 0) | (RECONFIGURED if reconfigured else 0)
    struct.pack_into("<d", costs, 8 * pos, cost)
    struct.pack_into("<d", secs, 8 * pos, seconds)
    control.window_violated += int(violated)
    control.window_reconfigured += int(reconfigured)
    control.window_cost += cost
    control.window_seconds += seconds
    control.ring_pos = (pos + 1) % w
    control.ring_flags, control.ring_cost, control.ring_seconds = bytes(flags), bytes(costs), bytes(secs)


def summary(control: ApplicationControl) -> dict[str, Any]:
    """Cost per hour and violation / reconfiguration fractions (all time and over the window) vs eta_V/eta_R."""
    app = control.application
    n, wn = control.periods, control.ring_fill

    def frac(a: int, b: int) -> float | None:
        return a / b if b else None

    return {
        "periods": n,
        "no_data_periods": control.no_data_periods,
        "cost_per_hour": control.total_cost * 3600.0 / control.observed_seconds
        if control.observed_seconds
        else None,
        "violation_fraction": frac(control.violated_periods, n),
        "reconfiguration_fraction": frac(control.reconfigured_periods, n),
        "window": {
            "periods": wn,
            "cost_per_hour": control.window_cost * 3600.0 / control.window_seconds
            if control.window_seconds
            else None,
            "violation_fraction": frac(control.window_violated, wn),
            "reconfiguration_fraction": frac(control.window_reconfigured, wn),
        },
        "eta_v": app.eta_v,
        "eta_r": app.eta_r,
        "within_eta_v": None if not wn else control.window_violated / wn <= app.eta_v,
        "within_eta_r": None if not wn else control.window_reconfigured / wn <= app.eta_r,
    }
