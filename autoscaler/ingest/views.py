"""``/api/v1/ingest/<application>/<operator>/{progress,desired,applied}``.

Authenticated with the application's ingest token (``manage.py ingest_token APP``; what the engine agents use)
or, for compatibility, its owner's API token or session. An ingest token works on its own application's three
endpoints only: another application is 403, every other API 401.

- ``POST progress``: ``{"progress": [StreamingQueryProgress JSON...], "latency": [{timestamp, mean_s, p95_s, n}],
  "dropped": n, "driver": {uiUrl, appId, executors, profile, generation}}`` -> 201 ``{"stored": n}``;
- ``GET desired`` -> ``{"generation", "executors", "profile"}`` (generation 0: nothing desired yet);
- ``POST applied``: ``{"generation", "executors", "profile", "downtimeS", "durationS", "error"}`` -> 201.

Unknown (or someone else's) application or operator -> 404; a body that is not ``application/json`` -> 415,
larger than 1 MiB -> 413, malformed or out of bounds (``autoscaler.ingest.body``, ``.serializers``) -> 400; each
with ``{"errors": [{"loc", "msg"}]}`` and nothing stored.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.parsers import JSONParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from autoscaler import manifests
from autoscaler.api.errors import errors_response
from autoscaler.api.views import ERRORS
from autoscaler.ingest import store
from autoscaler.ingest.authentication import IngestTokenAuthentication
from autoscaler.ingest.body import BodyError, read_json
from autoscaler.ingest.models import IngestToken
from autoscaler.ingest.serializers import AppliedPayload, ProgressPayload, parse
from autoscaler.schemas import FieldError

WRITE_ERRORS = {400: ERRORS, 401: ERRORS, 403: ERRORS, 404: ERRORS, 413: ERRORS, 415: ERRORS}


def application_of(request: Request, application: str):
    """The application named in the URL, as the credentials may see it (403 for another application's ingest
    token, 404 for an unknown or someone else's application)."""
    if isinstance(request.auth, IngestToken):
        app = request.auth.application
        if app.name != application:
            raise PermissionDenied(f"this ingest token writes only to application {app.name!r}")
        return app
    app = manifests.queryset("Application", request.user).filter(name=application).first()
    if app is None:
        raise NotFound(f"no Application named {application!r}")
    return app


def operator_of(request: Request, application: str, operator: str):
    app = application_of(request, application)
    op = app.operators.filter(name=operator).first()
    if op is None:
        raise NotFound(f"application {application!r} has no operator named {operator!r}")
    return op


class IngestView(APIView):
    authentication_classes = [IngestTokenAuthentication, *api_settings.DEFAULT_AUTHENTICATION_CLASSES]
    permission_classes = [IsAuthenticated]
    parser_classes = [JSONParser]  # documentation only: bodies are read by ``autoscaler.ingest.body``

    def validated(self, request: Request, model):
        """``(payload, None)``, or ``(None, error response)`` for a body rejected at any stage."""
        try:
            data = read_json(request)
        except BodyError as exc:
            return None, errors_response(exc.errors, exc.status)
        payload, errors = parse(model, data)
        return (payload, None) if not errors else (None, errors_response(errors))


class ProgressView(IngestView):
    @extend_schema(request=ProgressPayload, responses={201: OpenApiTypes.OBJECT, **WRITE_ERRORS})
    def post(self, request: Request, application: str, operator: str) -> Response:
        op = operator_of(request, application, operator)
        payload, rejected = self.validated(request, ProgressPayload)
        if rejected is not None:
            return rejected
        stored = store.store_progress(op, payload)
        return Response({"stored": stored}, status=status.HTTP_201_CREATED)


class DesiredView(IngestView):
    @extend_schema(responses={200: OpenApiTypes.OBJECT, 401: ERRORS, 403: ERRORS, 404: ERRORS})
    def get(self, request: Request, application: str, operator: str) -> Response:
        return Response(store.desired_of(operator_of(request, application, operator)))


class AppliedView(IngestView):
    @extend_schema(request=AppliedPayload, responses={201: OpenApiTypes.OBJECT, **WRITE_ERRORS})
    def post(self, request: Request, application: str, operator: str) -> Response:
        op = operator_of(request, application, operator)
        payload, rejected = self.validated(request, AppliedPayload)
        if rejected is not None:
            return rejected
        current = store.desired_of(op)["generation"]
        if payload.generation > current:
            return errors_response([FieldError("generation", f"unknown generation (latest is {current})")])
        ack = store.store_ack(op, payload)
        return Response({"id": ack.pk}, status=status.HTTP_201_CREATED)
