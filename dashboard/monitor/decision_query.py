"""The decision explorer's query: a user's decisions selected and ordered by the time of the period they are
about, ``slot * period_s`` (s since the epoch), the time the dashboard's charts place them at.

Decisions carry their slot; the period (s) is their tick's. An application keeps one period for long stretches,
so a time range is turned into a slot range per application (exact: the smallest slot whose ``slot * period_s``
reaches the bound, in the database's floating point), which the ``(application, slot)`` index answers; an
application whose ticks ran with several periods is filtered on the product itself. One application with one
period is ordered by slot (the index); several are ordered by the product. Pages are cut on a narrow id-only
query and only their rows are loaded in full."""

from __future__ import annotations

import math
from collections.abc import Sequence

from django.core.paginator import Page, Paginator
from django.db.models import ExpressionWrapper, F, FloatField, Q, QuerySet

from autoscaler.control.models import Decision, Tick

#: columns of a decision's tick the table does not show (large JSON)
HEAVY = ("observed", "tick__metrics", "tick__plan", "tick__before", "tick__result")


def period_time_expr() -> ExpressionWrapper:
    """``slot * tick.period_s`` (s since the epoch) as a database expression."""
    return ExpressionWrapper(F("slot") * F("tick__period_s"), output_field=FloatField())


def periods_by_application(app_ids: Sequence[int]) -> dict[int, list[float]]:
    """Application id -> the distinct control periods (s) of its ticks."""
    out: dict[int, list[float]] = {a: [] for a in app_ids}
    for app_id, period in (
        Tick.objects.filter(application_id__in=app_ids)
        .order_by()  # no default ordering: it would make every slot distinct
        .values_list("application_id", "period_s")
        .distinct()
    ):
        out[app_id].append(float(period))
    return out


def first_slot(t: float, period_s: float) -> int:
    """The smallest integer slot ``k`` with ``k * period_s >= t`` (``t`` and ``period_s`` in s, period > 0)."""
    k = math.ceil(t / period_s)
    while (k - 1) * period_s >= t:
        k -= 1
    while k * period_s < t:
        k += 1
    return k


def in_time_range(
    qs: QuerySet, periods: dict[int, list[float]], since: float | None, until: float | None
) -> QuerySet:
    """Decisions of ``qs`` about a period with ``since <= slot * period_s < until`` (s, epoch; None = open)."""
    if since is None and until is None:
        return qs
    cond = Q(pk__in=[])
    mixed = []
    for app_id, ps in periods.items():
        if len(ps) == 1 and ps[0] > 0:
            q = Q(application_id=app_id)
            if since is not None:
                q &= Q(slot__gte=first_slot(since, ps[0]))
            if until is not None:
                q &= Q(slot__lt=first_slot(until, ps[0]))
            cond |= q
        elif ps:
            mixed.append(app_id)
    if mixed:
        q = Q(application_id__in=mixed)
        if since is not None:
            q &= Q(period_t__gte=since)
        if until is not None:
            q &= Q(period_t__lt=until)
        cond |= q
        qs = qs.alias(period_t=period_time_expr())
    return qs.filter(cond)


def latest_period_first(qs: QuerySet, periods: dict[int, list[float]]) -> QuerySet:
    """``qs`` ordered by the time of the decisions' periods, latest first (ties: newest row first)."""
    if len(periods) == 1 and len(next(iter(periods.values()))) <= 1:
        return qs.order_by("-slot", "-id")
    return qs.alias(period_t=period_time_expr()).order_by("-period_t", "-id")


def page_of(qs: QuerySet, number: str | int | None, size: int) -> Page:
    """Page ``number`` of the ordered ``qs``: cut on ids, then only the page's decisions loaded (with their
    application, operator and tick), in order."""
    page = Paginator(qs.values_list("id", flat=True), size).get_page(number)
    ids = list(page.object_list)
    rows = Decision.objects.select_related("application", "operator", "tick").defer(*HEAVY).in_bulk(ids)
    page.object_list = [rows[i] for i in ids]
    return page
