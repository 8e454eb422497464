"""Prometheus text exposition (format 0.0.4) of the control plane, built from the per-application aggregates
(one row per application, O(applications) per scrape).

Names follow the Flink Kubernetes operator's autoscaler metrics style: a common prefix, per-application labels,
counters with ``_total``, gauges for the current values, and a latency histogram.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from autoscaler.control import aggregates, slots
from autoscaler.control.models import ApplicationControl
from autoscaler.control.tick import LATENCY_BUCKETS_S

PREFIX = "autoscaler_control"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _labels(**labels: str) -> str:
    inner = ",".join(
        f'{k}="{str(v).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in labels.items()
    )
    return "{" + inner + "}"


def render() -> str:
    """The whole exposition text."""
    series: dict[str, tuple[str, str, list[str]]] = {}

    def add(name: str, kind: str, help_text: str, labels: str, value: float | None) -> None:
        if value is None:
            return
        entry = series.setdefault(name, (kind, help_text, []))
        entry[2].append(f"{PREFIX}_{name}{labels} {float(value):.10g}")

    now = timezone.now()
    rows = ApplicationControl.objects.select_related("application__owner")
    for c in rows:
        app = c.application
        lab = _labels(application=app.name, owner=app.owner.username)
        add(
            "ticks_total", "counter", "Ticks completed (decided and, if needed, applied).", lab, c.ticks_total
        )
        add(
            "duplicate_ticks_total",
            "counter",
            "Redelivered ticks ignored by the ledger.",
            lab,
            c.duplicate_ticks_total,
        )
        add("tick_errors_total", "counter", "Connector or apply failures.", lab, c.tick_errors_total)
        add(
            "no_data_periods_total",
            "counter",
            "Periods with missing metrics (no action).",
            lab,
            c.no_data_periods,
        )
        add(
            "decisions_total",
            "counter",
            "Decision records written (one per operator and tick).",
            lab,
            c.decisions_total,
        )
        missed = c.missed_slots or {}
        for reason in sorted(set(slots.Reason.ALL) | set(missed)):
            add(
                "missed_slots_total",
                "counter",
                "Slots of a running application without a decision, by reason (stale, worker_down, broker_down, "
                "database_down, paused).",
                _labels(application=app.name, owner=app.owner.username, reason=reason),
                missed.get(reason, 0),
            )
        add(
            "early_ticks_total",
            "counter",
            "Ticks dropped because their slot had not begun.",
            lab,
            c.early_ticks_total,
        )
        if c.last_tick_at is not None:
            add(
                "last_tick_age_seconds",
                "gauge",
                "Seconds since the application's last tick finished (s).",
                lab,
                max((now - c.last_tick_at).total_seconds(), 0.0),
            )
        add("denied_total", "counter", "Proposals denied by the AM or a safety rail.", lab, c.denied_total)
        add(
            "reconfigurations_applied_total",
            "counter",
            "Scaling plans applied by the connector.",
            lab,
            c.reconfigurations_applied_total,
        )
        s = aggregates.summary(c)
        add(
            "cost_per_hour",
            "gauge",
            "Resource cost over the sliding window (currency/h).",
            lab,
            s["window"]["cost_per_hour"],
        )
        add(
            "violation_fraction",
            "gauge",
            "Fraction of periods violating R_max (sliding window).",
            lab,
            s["window"]["violation_fraction"],
        )
        add(
            "reconfiguration_fraction",
            "gauge",
            "Fraction of periods with a reconfiguration (sliding window).",
            lab,
            s["window"]["reconfiguration_fraction"],
        )
        add("eta_v", "gauge", "Tolerated violation fraction (SLO).", lab, app.eta_v)
        add("eta_r", "gauge", "Tolerated reconfiguration fraction (SLO).", lab, app.eta_r)
        add("dry_run", "gauge", "1 when the application only records decisions.", lab, int(app.dry_run))
        buckets = c.latency_buckets or {}
        for b in (*LATENCY_BUCKETS_S, "+Inf"):
            add(
                "tick_latency_seconds_bucket",
                "histogram",
                "Tick latency from dispatch to finish (s).",
                _labels(application=app.name, owner=app.owner.username, le=str(b)),
                buckets.get(str(b), 0),
            )
        add("tick_latency_seconds_sum", "histogram", "", lab, c.latency_sum_s)
        add("tick_latency_seconds_count", "histogram", "", lab, c.ticks_total)
    lines: list[str] = []
    for name, (kind, help_text, samples) in series.items():
        if name.startswith("tick_latency_seconds_") and name != "tick_latency_seconds_bucket":
            lines.extend(samples)
            continue
        metric = f"{PREFIX}_tick_latency_seconds" if kind == "histogram" else f"{PREFIX}_{name}"
        lines.append(f"# HELP {metric} {help_text}")
        lines.append(f"# TYPE {metric} {kind}")
        lines.extend(samples)
    return "\n".join(lines) + "\n"


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: Prometheus scrape endpoint (no authentication, as scrapers expect; no secrets inside)."""
    return HttpResponse(render(), content_type=CONTENT_TYPE)
