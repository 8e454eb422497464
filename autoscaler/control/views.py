"""REST endpoints of the control plane under ``/api/v1/control/``: per-application summary (aggregates, O(1)),
decision log, safety rails, agent reset / export / import. Applications are addressed by name, scoped to the
requesting user (staff see all) exactly like ``/api/v1/applications/``."""

from __future__ import annotations

from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from autoscaler import manifests
from autoscaler.control import agents, aggregates
from autoscaler.control.models import ApplicationControl, Decision
from autoscaler.control.rails import RailsError, effective_rails_data, parse_rails

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
