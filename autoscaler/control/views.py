"""REST endpoints of the control plane under ``/api/v1/control/``: per-application summary (aggregates, O(1)),
decision log, safety rails, agent reset / export / import; per region (``regions/<name>/``): RM period, the
policies in force and who declared them, provisioned capacity, nodes, waiting scale-outs, recent RM/IM steps.

Applications are addressed by name and scoped to the requesting user exactly like ``/api/v1/applications/``.
Regions are shared, their contents are not: a non-staff user sees only their own applications' replicas,
waiting scale-outs, consolidations and step details (staff see everything). Errors use the API's one format
(``{"errors": [{"loc", "msg"}]}``); query parameters are validated (``autoscaler.api.params``).
"""

from __future__ import annotations

import math
import re
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from pydantic import ValidationError
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from autoscaler import manifests
from autoscaler.api import control_schemas as answers
from autoscaler.api.errors import errors_response
from autoscaler.api.params import QueryParam, ValidatedQueryMixin
from autoscaler.control import agents, aggregates, capacity, regions
from autoscaler.control.models import (
    ApplicationControl,
    Consolidation,
    Decision,
    RegionControl,
    RegionTick,
    WaitingRequest,
)
from autoscaler.control.nodes import active_nodes
from autoscaler.control.rails import Rails, effective_rails_data, parse_rails
from autoscaler.models import Application, Region
from autoscaler.schemas import FieldError, ManifestError
from autoscaler.schemas.errors import from_pydantic

MAX_DECISIONS = 1000
NAME = OpenApiParameter("name", str, OpenApiParameter.PATH, description="name of the application or region")
LIMIT_DECISIONS = QueryParam(
    "limit", default=100, minimum=0, maximum=MAX_DECISIONS, description="newest decisions to list"
)
LIMIT_STEPS = QueryParam(
    "limit",
    default=20,
    minimum=0,
    maximum=MAX_DECISIONS,
    description="newest steps and consolidations to list",
)
OPERATOR = QueryParam("operator", kind="name", description="only this operator's decisions")
OPERATORS = QueryParam("operator", kind="name", many=True, description="only these operators (repeatable)")


def application_of(request: Request, name: str):
    app = manifests.queryset("Application", request.user).filter(name=name).first()
    if app is None:
        raise NotFound(f"no Application named {name!r}")
    return app


def field_error(text: str) -> ManifestError:
    """A ``"<field>: <reason>"`` message of the control modules as the API's error."""
    loc, _, msg = text.partition(": ")
    return ManifestError([FieldError(loc, msg) if msg else FieldError("", text)])


class ControlView(ValidatedQueryMixin, APIView):
    """A control-plane endpoint: authenticated users, validated query parameters."""

    permission_classes = [IsAuthenticated]


class SummaryView(ControlView):
    """The application's state, last tick and aggregates (cost per hour, violation and reconfiguration fractions)."""

    @extend_schema(parameters=[NAME], responses={200: answers.ControlSummary})
    def get(self, request: Request, name: str) -> Response:
        app = application_of(request, name)
        control, _ = ApplicationControl.objects.get_or_create(application=app)
        return Response(
            {
                "application": app.name,
                "state": app.state,
                "dry_run": app.dry_run,
                "last_tick_slot": control.last_tick_slot,
                "am_config": control.am_config,
                "aggregates": aggregates.summary(control),
                "last_error": control.last_error,
            }
        )


class DecisionsView(ControlView):
    """The OM decisions of the application, newest slot first (``?limit=``, ``?operator=``)."""

    query_spec = {"get": (LIMIT_DECISIONS, OPERATOR)}

    @extend_schema(
        parameters=[NAME, LIMIT_DECISIONS.openapi(), OPERATOR.openapi()],
        responses={200: answers.DecisionList},
    )
    def get(self, request: Request, name: str) -> Response:
        app = application_of(request, name)
        rows = (
            Decision.objects.filter(application=app)
            .select_related("operator")
            .order_by("-slot", "operator_id")
        )
        if self.query["operator"] is not None:
            rows = rows.filter(operator__name=self.query["operator"])
        fields = (
            "slot",
            "outcome",
            "observed",
            "deployment",
            "proposal",
            "granted",
            "reason",
            "applied",
            "finished_at",
            "downtime_s",
            "resource_cost",
            "violated",
            "reconfigured",
        )
        return Response(
            [
                {"operator": d.operator.name, **{f: getattr(d, f) for f in fields}}
                for d in rows[: self.query["limit"]]
            ]
        )


class RailsView(ControlView):
    """The application's rails (``spec.rails`` of its manifest); PUT validates like a manifest (every error in
    one answer, paths ``rails.<field>``) and stores them on the Application (the next manifest export shows them)."""

    @extend_schema(parameters=[NAME], responses={200: answers.RailsAnswer})
    def get(self, request: Request, name: str) -> Response:
        app = application_of(request, name)
        control = ApplicationControl.objects.filter(application=app).first()
        return Response(parse_rails(effective_rails_data(app, control)).model_dump(by_alias=True))

    @extend_schema(parameters=[NAME], request=Rails, responses={200: answers.RailsAnswer})
    def put(self, request: Request, name: str) -> Response:
        app = application_of(request, name)
        limits = dict(app.operators.values_list("name", "max_parallelism"))
        try:
            rails = Rails.model_validate(request.data)
        except ValidationError as exc:
            raise ManifestError(from_pydantic(exc, "rails")) from None
        errors = rails.operator_errors(limits, prefix="rails")
        if errors:
            raise ManifestError(errors)
        app.rails = rails.to_manifest_dict()
        app.save(update_fields=["rails", "updated_at"])
        ApplicationControl.objects.filter(application=app).update(rails={})  # retire the legacy store
        return Response(rails.model_dump(by_alias=True))


class AgentsView(ControlView):
    """GET: export; PUT: import an exported document; DELETE: reset (``?operator=a&operator=b`` to limit)."""

    query_spec = {"delete": (OPERATORS,)}

    @extend_schema(parameters=[NAME], responses={200: answers.AgentsExport})
    def get(self, request: Request, name: str) -> Response:
        return Response(agents.export(application_of(request, name)))

    @extend_schema(parameters=[NAME], request=answers.AgentsExport, responses={200: answers.AgentsImported})
    def put(self, request: Request, name: str) -> Response:
        app = application_of(request, name)
        try:
            n = agents.import_(app, request.data)
        except ValueError as exc:
            raise field_error(str(exc)) from None
        return Response({"imported": n})

    @extend_schema(parameters=[NAME, OPERATORS.openapi()], responses={200: answers.AgentsReset})
    def delete(self, request: Request, name: str) -> Response:
        app = application_of(request, name)
        try:
            n = agents.reset(app, self.query["operator"] or None)
        except ValueError as exc:
            raise field_error(str(exc)) from None
        return Response({"reset": n})


_APP_IN_TEXT = re.compile(r"application (['\"])([A-Za-z0-9._-]+)\1")
#: keys of a step's ``state`` that describe the region as a whole (no application in them)
_REGION_STATE_KEYS = (
    "node_types",
    "active",
    "pending",
    "idle",
    "used_replicas",
    "needed_nodes",
    "used_slots",
    "total_slots",
    "utilisation",
    "unsatisfied",
    "waiting_slots",
    "waiting",
    "free_slots",
    "nodes",
    "period_s",
    "provider",
)


class TenantView:
    """What of a region one user may see: all (staff) or only what concerns their own applications."""

    def __init__(self, user) -> None:
        self.all = bool(user.is_staff)
        owned = Application.objects.filter(owner=user).values_list("pk", "name")
        self.app_ids = {pk for pk, _ in owned}
        self.app_names = {name for _, name in owned}
        self._id_texts = {str(pk) for pk in self.app_ids}

    def text(self, value: Any) -> Any:
        """A text with other users' application names replaced (``application 'x'`` -> another user's)."""
        if self.all or not isinstance(value, str):
            return value
        return _APP_IN_TEXT.sub(
            lambda m: m.group(0) if m.group(2) in self.app_names else "another user's application", value
        )

    def replicas(self, entries: list[str]) -> list[str]:
        """A node's ``'<application id>/<operator>'`` entries of the user's applications."""
        if self.all:
            return list(entries)
        return [e for e in entries if str(e).partition("/")[0] in self._id_texts]

    def step_state(self, state: dict[str, Any]) -> dict[str, Any]:
        if self.all:
            return state
        out = {key: state[key] for key in _REGION_STATE_KEYS if key in state}
        for level in ("rm", "im"):
            if isinstance(state.get(level), dict):
                out[level] = {**state[level], "source": self.text(state[level].get("source", ""))}
        if isinstance(state.get("consolidation"), list):
            out["consolidation"] = [
                c
                for c in state["consolidation"]
                if isinstance(c, dict) and c.get("application") in self.app_ids
            ]
        return out


class RegionView(ControlView):
    """GET: the region's control state. PUT ``{"rmPeriodS": seconds | null}`` (staff): the region's RM period."""

    query_spec = {"get": (LIMIT_STEPS,)}

    @extend_schema(parameters=[NAME, LIMIT_STEPS.openapi()], responses={200: answers.RegionControlAnswer})
    def get(self, request: Request, name: str) -> Response:
        region = Region.objects.filter(name=name).first()
        if region is None:
            raise NotFound(f"no Region named {name!r}")
        return Response(
            self.state(region, TenantView(request.user), self.query.get("limit", LIMIT_STEPS.default))
        )

    def state(self, region: Region, view: TenantView, limit: int) -> dict[str, Any]:
        control = RegionControl.objects.filter(region=region).first()
        ticks = RegionTick.objects.filter(region=region).exclude(policy="").order_by("-slot")[:limit]
        consolidations = Consolidation.objects.filter(region=region).select_related("application")
        waiting = WaitingRequest.objects.filter(region=region).select_related("application", "operator")
        if not view.all:
            consolidations = consolidations.filter(application_id__in=view.app_ids)
            waiting = waiting.filter(application_id__in=view.app_ids)
        return {
            "region": region.name,
            "rm_period_s": regions.region_period_s(region, control),
            "rm_period_s_set": control.rm_period_s if control else None,
            "rm": {"policy": control.rm_policy, "params": control.rm_params} if control else None,
            "im": {"policy": control.im_policy, "params": control.im_params} if control else None,
            "policy_source": view.text(control.policy_source) if control else "",
            "capacity": capacity.for_viewer(
                control.capacity if control else {}, None if view.all else view.app_ids
            ),
            "node_counts": capacity.node_counts(control.capacity if control else {}),
            "last_error": view.text(control.last_error) if control else "",
            "nodes": [
                {
                    "node_id": n.node_id,
                    "node_type": n.node_type,
                    "state": n.state,
                    "provider": n.provider,
                    "acquired_slot": n.acquired_slot,
                    "ready_at_s": n.ready_at_s,
                    "reason": view.text(n.reason),
                    "replicas": view.replicas(n.replicas or []),
                }
                for n in active_nodes(region)
            ],
            "consolidations": [
                {
                    "slot": c.slot,
                    "application": c.application.name,
                    "moves": c.moves,
                    "frees": c.frees,
                    "reason": view.text(c.reason),
                    "status": c.status,
                    "outcome": view.text(c.outcome),
                }
                for c in consolidations[:limit]
            ],
            "waiting": [
                {
                    "application": w.application.name,
                    "operator": w.operator.name,
                    "node_type": w.node_type,
                    "slots": w.slots,
                    "since_slot": w.since_slot,
                    "reason": view.text(w.reason),
                }
                for w in waiting
            ],
            "steps": [
                {
                    "slot": t.slot,
                    "period_s": t.period_s,
                    "policy": t.policy,
                    "state": view.step_state(t.state or {}),
                    "proposals": t.proposals,
                    "decisions": t.decisions,
                    "warnings": [view.text(w) for w in t.warnings or []],
                    "executed": t.executed,
                }
                for t in ticks
            ],
        }

    @extend_schema(
        parameters=[NAME], request=answers.RegionPeriodRequest, responses={200: answers.RegionControlAnswer}
    )
    def put(self, request: Request, name: str) -> Response:
        if not request.user.is_staff:
            return errors_response(
                [FieldError("rmPeriodS", "regions are shared: only staff can change them")],
                status.HTTP_403_FORBIDDEN,
            )
        region = Region.objects.filter(name=name).first()
        if region is None:
            raise NotFound(f"no Region named {name!r}")
        data = request.data
        if not isinstance(data, dict):
            raise ManifestError(
                [FieldError("", 'the body must be a JSON object {"rmPeriodS": seconds | null}')]
            )
        errors = [FieldError(str(k), "unknown field") for k in data if k != "rmPeriodS"]
        if "rmPeriodS" not in data:
            errors.append(FieldError("rmPeriodS", "required"))
        value = data.get("rmPeriodS")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            errors.append(
                FieldError("rmPeriodS", f"must be a number of seconds > 0 or null, got {value!r:.80}")
            )
        elif value is not None and not math.isfinite(float(value)):
            errors.append(FieldError("rmPeriodS", "must be a finite number of seconds"))
        if errors:
            raise ManifestError(errors)
        try:
            regions.set_rm_period(region, None if value is None else float(value))
        except (ValueError, OverflowError) as exc:
            raise ManifestError([FieldError("rmPeriodS", str(exc).partition(": ")[2] or str(exc))]) from None
        return Response(self.state(region, TenantView(request.user), LIMIT_STEPS.default))
