"""REST endpoints of the control plane under ``/api/v1/control/``: per-application summary (aggregates, O(1)),
decision log, safety rails, agent reset / export / import; per region (``regions/<name>/``): RM period, the
policies in force and who declared them, provisioned capacity, nodes, waiting scale-outs, recent RM/IM steps. Applications are addressed by name, scoped to the
requesting user (staff see all) exactly like ``/api/v1/applications/``."""

from __future__ import annotations

from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from autoscaler import manifests
from autoscaler.control import agents, aggregates, regions
from autoscaler.control.models import (
    ApplicationControl,
    Consolidation,
    Decision,
    RegionControl,
    RegionTick,
    WaitingRequest,
)
from autoscaler.control.nodes import active_nodes
from autoscaler.control.rails import RailsError, effective_rails_data, parse_rails
from autoscaler.models import Region

MAX_DECISIONS = 1000


def application_of(request: Request, name: str):
    app = manifests.queryset("Application", request.user).filter(name=name).first()
    if app is None:
        raise NotFound(f"no Application named {name!r}")
    return app


def error(field: str, message: str, code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    return Response({"errors": [{"field": field, "message": message}]}, status=code)


class ControlView(APIView):
    permission_classes = [IsAuthenticated]


class SummaryView(ControlView):
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
    def get(self, request: Request, name: str) -> Response:
        app = application_of(request, name)
        try:
            limit = min(int(request.query_params.get("limit", 100)), MAX_DECISIONS)
        except ValueError:
            return error("limit", "must be an integer")
        rows = (
            Decision.objects.filter(application=app)
            .select_related("operator")
            .order_by("-slot", "operator_id")
        )
        if "operator" in request.query_params:
            rows = rows.filter(operator__name=request.query_params["operator"])
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
            [{"operator": d.operator.name, **{f: getattr(d, f) for f in fields}} for d in rows[:limit]]
        )


class RailsView(ControlView):
    """The application's rails (``spec.rails`` of its manifest); PUT validates like a manifest and stores them
    on the Application (the next manifest export shows them)."""

    def get(self, request: Request, name: str) -> Response:
        app = application_of(request, name)
        control = ApplicationControl.objects.filter(application=app).first()
        return Response(parse_rails(effective_rails_data(app, control)).model_dump(by_alias=True))

    def put(self, request: Request, name: str) -> Response:
        app = application_of(request, name)
        limits = dict(app.operators.values_list("name", "max_parallelism"))
        try:
            rails = parse_rails(request.data, limits)
        except RailsError as exc:
            field, _, message = str(exc).partition(": ")
            return error(field, message)
        app.rails = rails.to_manifest_dict()
        app.save(update_fields=["rails", "updated_at"])
        ApplicationControl.objects.filter(application=app).update(rails={})  # retire the legacy store
        return Response(rails.model_dump(by_alias=True))


class AgentsView(ControlView):
    """GET: export; PUT: import an exported document; DELETE: reset (``?operator=a&operator=b`` to limit)."""

    def get(self, request: Request, name: str) -> Response:
        return Response(agents.export(application_of(request, name)))

    def put(self, request: Request, name: str) -> Response:
        app = application_of(request, name)
        try:
            n = agents.import_(app, request.data)
        except ValueError as exc:
            field, _, message = str(exc).partition(": ")
            return error(field, message)
        return Response({"imported": n})

    def delete(self, request: Request, name: str) -> Response:
        app = application_of(request, name)
        try:
            n = agents.reset(app, request.query_params.getlist("operator") or None)
        except ValueError as exc:
            field, _, message = str(exc).partition(": ")
            return error(field, message)
        return Response({"reset": n})


class RegionView(ControlView):
    """GET: the region's control state. PUT ``{"rmPeriodS": seconds | null}`` (staff): the region's RM period."""

    def get(self, request: Request, name: str) -> Response:
        region = Region.objects.filter(name=name).first()
        if region is None:
            raise NotFound(f"no Region named {name!r}")
        control = RegionControl.objects.filter(region=region).first()
        try:
            limit = min(int(request.query_params.get("limit", 20)), MAX_DECISIONS)
        except ValueError:
            return error("limit", "must be an integer")
        ticks = RegionTick.objects.filter(region=region).exclude(policy="").order_by("-slot")[:limit]
        return Response(
            {
                "region": region.name,
                "rm_period_s": regions.region_period_s(region, control),
                "rm_period_s_set": control.rm_period_s if control else None,
                "rm": {"policy": control.rm_policy, "params": control.rm_params} if control else None,
                "im": {"policy": control.im_policy, "params": control.im_params} if control else None,
                "policy_source": control.policy_source if control else "",
                "capacity": control.capacity if control else {},
                "last_error": control.last_error if control else "",
                "nodes": [
                    {
                        "node_id": n.node_id,
                        "node_type": n.node_type,
                        "state": n.state,
                        "provider": n.provider,
                        "acquired_slot": n.acquired_slot,
                        "ready_at_s": n.ready_at_s,
                        "reason": n.reason,
                        "replicas": n.replicas,
                    }
                    for n in active_nodes(region)
                ],
                "consolidations": [
                    {
                        "slot": c.slot,
                        "application": c.application.name,
                        "moves": c.moves,
                        "frees": c.frees,
                        "reason": c.reason,
                        "status": c.status,
                        "outcome": c.outcome,
                    }
                    for c in Consolidation.objects.filter(region=region).select_related("application")[:limit]
                ],
                "waiting": [
                    {
                        "application": w.application.name,
                        "operator": w.operator.name,
                        "node_type": w.node_type,
                        "slots": w.slots,
                        "since_slot": w.since_slot,
                        "reason": w.reason,
                    }
                    for w in WaitingRequest.objects.filter(region=region).select_related(
                        "application", "operator"
                    )
                ],
                "steps": [
                    {
                        "slot": t.slot,
                        "period_s": t.period_s,
                        "policy": t.policy,
                        "state": t.state,
                        "proposals": t.proposals,
                        "decisions": t.decisions,
                        "warnings": t.warnings,
                        "executed": t.executed,
                    }
                    for t in ticks
                ],
            }
        )

    def put(self, request: Request, name: str) -> Response:
        if not request.user.is_staff:
            return error(
                "rmPeriodS", "regions are shared: only staff can change them", status.HTTP_403_FORBIDDEN
            )
        region = Region.objects.filter(name=name).first()
        if region is None:
            raise NotFound(f"no Region named {name!r}")
        data = request.data if isinstance(request.data, dict) else {}
        unknown = [k for k in data if k != "rmPeriodS"]
        if unknown or "rmPeriodS" not in data:
            return error(unknown[0] if unknown else "rmPeriodS", "unknown field" if unknown else "required")
        value = data["rmPeriodS"]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return error("rmPeriodS", f"must be a number of seconds > 0 or null, got {value!r}")
        try:
            regions.set_rm_period(region, value)
        except ValueError as exc:
            return error("rmPeriodS", str(exc).partition(": ")[2])
        return self.get(request, name)
