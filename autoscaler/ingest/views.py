"""``/api/v1/ingest/<application>/<operator>/{progress,desired,applied}`` (token of the application's owner).

- ``POST progress``: ``{"progress": [StreamingQueryProgress JSON...], "latency": [{timestamp, mean_s, p95_s, n}],
  "dropped": n, "driver": {uiUrl, appId, executors, profile, generation}}`` -> 201 ``{"stored": n}``;
- ``GET desired`` -> ``{"generation", "executors", "profile"}`` (generation 0: nothing desired yet);
- ``POST applied``: ``{"generation", "executors", "profile", "downtimeS", "durationS", "error"}`` -> 201.

Unknown (or someone else's) application or operator -> 404; malformed body -> 400 with
``{"errors": [{"loc", "msg"}]}`` and nothing stored.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from autoscaler import manifests
from autoscaler.api.errors import errors_response
from autoscaler.api.views import ERRORS
from autoscaler.ingest import store
from autoscaler.ingest.serializers import AppliedPayload, ProgressPayload, parse
from autoscaler.schemas import FieldError


def operator_of(request: Request, application: str, operator: str):
    app = manifests.queryset("Application", request.user).filter(name=application).first()
    if app is None:
        raise NotFound(f"no Application named {application!r}")
    op = app.operators.filter(name=operator).first()
    if op is None:
        raise NotFound(f"application {application!r} has no operator named {operator!r}")
    return op


class IngestView(APIView):
    permission_classes = [IsAuthenticated]


class ProgressView(IngestView):
    @extend_schema(request=ProgressPayload, responses={201: OpenApiTypes.OBJECT, 400: ERRORS, 404: ERRORS})
    def post(self, request: Request, application: str, operator: str) -> Response:
        op = operator_of(request, application, operator)
        payload, errors = parse(ProgressPayload, request.data)
        if errors:
            return errors_response(errors)
        stored = store.store_progress(op, payload)
        return Response({"stored": stored}, status=status.HTTP_201_CREATED)


class DesiredView(IngestView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT, 404: ERRORS})
    def get(self, request: Request, application: str, operator: str) -> Response:
        return Response(store.desired_of(operator_of(request, application, operator)))


class AppliedView(IngestView):
    @extend_schema(request=AppliedPayload, responses={201: OpenApiTypes.OBJECT, 400: ERRORS, 404: ERRORS})
    def post(self, request: Request, application: str, operator: str) -> Response:
        op = operator_of(request, application, operator)
        payload, errors = parse(AppliedPayload, request.data)
        if errors:
            return errors_response(errors)
        current = store.desired_of(op)["generation"]
        if payload.generation > current:
            return errors_response([FieldError("generation", f"unknown generation (latest is {current})")])
        ack = store.store_ack(op, payload)
        return Response({"id": ack.pk}, status=status.HTTP_201_CREATED)
