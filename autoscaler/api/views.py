"""REST API v1: one viewset per kind; bodies and answers are manifests (apiVersion, kind, metadata, spec).

Applications and deployments belong to the requesting user (others' are 404). Catalogs and regions are
shared: every authenticated user reads them, staff users write them.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from autoscaler import manifests
from autoscaler.schemas import FieldError, ManifestError
from autoscaler.schemas.documents import MANIFEST_MODELS, MANIFEST_RESPONSE_MODELS

from .errors import errors_response
from .openapi import ERRORS  # noqa: F401  (re-exported: ingest documents its errors with it)
from .params import ValidatedQueryMixin
from .serializers import HistorySerializer, ManifestSerializer, without_read_only
from .status_schemas import RESOURCE_MODELS


class StaffWritesShared(permissions.BasePermission):
    """Reads for every authenticated user; writes only for staff (shared resources)."""

    def has_permission(self, request: Request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in permissions.SAFE_METHODS or request.user.is_staff


class ManifestViewSet(ValidatedQueryMixin, viewsets.ViewSet):
    """List, read, create (POST), create-or-update (PUT) and delete resources of one kind by name.

    No query parameter is accepted (``?format=`` aside): any other is a 400 naming it."""

    kind = ""
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}"
    serializer_class = ManifestSerializer

    def get_queryset(self):
        return manifests.queryset(self.kind, self.request.user)

    def get_object(self, name: str):
        obj = self.get_queryset().filter(name=name).first()
        if obj is None:
            raise NotFound(f"no {self.kind} named {name!r}")
        return obj

    def _represent(self, obj, code: int = status.HTTP_200_OK, warnings: list[str] | None = None) -> Response:
        data = ManifestSerializer(obj).data
        if warnings:  # e.g. a Flink binding that could not be checked yet (cluster unreachable)
            data = {**data, "warnings": warnings}
        return Response(data, status=code)

    def list(self, request: Request) -> Response:
        return Response([ManifestSerializer(obj).data for obj in self.get_queryset()])

    def retrieve(self, request: Request, name: str) -> Response:
        return self._represent(self.get_object(name))

    def create(self, request: Request) -> Response:
        doc = without_read_only(request.data, self.kind)  # a "status" is the control plane's: ignored
        name = (
            doc.get("metadata", {}).get("name")
            if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict)
            else None
        )
        if isinstance(name, str) and self.get_queryset().filter(name=name).exists():
            return errors_response(
                [FieldError("metadata.name", f"{self.kind} {name!r} already exists: use PUT to update it")],
                status.HTTP_409_CONFLICT,
            )
        (result,) = manifests.apply_documents([doc], request.user, expected_kind=self.kind)
        return self._represent(result.obj, status.HTTP_201_CREATED, result.warnings)

    def update(self, request: Request, name: str) -> Response:
        (result,) = manifests.apply_documents(
            [without_read_only(request.data, self.kind)],
            request.user,
            expected_kind=self.kind,
            expected_name=name,
        )
        return self._represent(
            result.obj,
            status.HTTP_201_CREATED if result.action == "created" else status.HTTP_200_OK,
            result.warnings,
        )

    def destroy(self, request: Request, name: str) -> Response:
        self.get_object(name)
        manifests.delete(self.kind, name, request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _documented(kind: str):
    """Attach the kind's pydantic manifest models to the OpenAPI description of a viewset (error statuses are
    added to every operation by ``autoscaler.api.openapi.document_error_responses``)."""
    request = MANIFEST_MODELS[kind]
    response = RESOURCE_MODELS.get(kind, MANIFEST_RESPONSE_MODELS[kind])  # with a read-only status
    return extend_schema_view(
        list=extend_schema(responses={200: response}),  # a list action: an array of them
        retrieve=extend_schema(responses={200: response}),
        create=extend_schema(request=request, responses={201: response}),
        update=extend_schema(request=request, responses={200: response, 201: response}),
        destroy=extend_schema(responses={204: None}),
    )


@_documented("NodeTypeCatalog")
class NodeTypeCatalogViewSet(ManifestViewSet):
    kind = "NodeTypeCatalog"
    permission_classes = [StaffWritesShared]


@_documented("Region")
class RegionViewSet(ManifestViewSet):
    kind = "Region"
    permission_classes = [StaffWritesShared]


@_documented("Application")
class ApplicationViewSet(ManifestViewSet):
    kind = "Application"


@_documented("Deployment")
class DeploymentViewSet(ManifestViewSet):
    kind = "Deployment"

    @extend_schema(responses={200: HistorySerializer(many=True)})
    @action(detail=True, methods=["get"])
    def history(self, request: Request, name: str) -> Response:
        """Past replicas of the deployment, newest first."""
        return Response(HistorySerializer(self.get_object(name).history.all(), many=True).data)


class ApplyView(ValidatedQueryMixin, APIView):
    """POST a list of manifests (or ``{"items": [...]}``): applied all or nothing, like ``manage.py apply``.

    Catalogs and regions in the list need a staff user.
    """

    @extend_schema(
        request=inline_serializer(
            "ManifestList", {"items": serializers.ListField(child=serializers.DictField())}
        ),
        responses={
            200: inline_serializer(
                "ApplyResults", {"results": serializers.ListField(child=serializers.CharField())}
            ),
        },
    )
    def post(self, request: Request) -> Response:
        docs = request.data.get("items") if isinstance(request.data, dict) else request.data
        if not isinstance(docs, list):
            raise ManifestError([FieldError("items", "expected a list of manifest documents")])
        if not request.user.is_staff:
            shared = [
                FieldError(f"documents[{i}].kind", "only staff users may write catalogs and regions")
                for i, doc in enumerate(docs)
                if isinstance(doc, dict) and doc.get("kind") in ("NodeTypeCatalog", "Region")
            ]
            if shared:
                return errors_response(shared, status.HTTP_403_FORBIDDEN)
        docs = [without_read_only(doc) for doc in docs]  # the status of applications and deployments: ignored
        results = manifests.apply_documents(docs, request.user)  # one transaction, all or nothing
        warnings = [f"{r.kind.lower()}/{r.name}: {w}" for r in results for w in r.warnings]
        return Response(
            {"results": [str(r) for r in results], **({"warnings": warnings} if warnings else {})}
        )
