"""DRF serializers that delegate validation to ``autoscaler.schemas`` and representation to manifest export.

Deployments and Applications are answered with a read-only ``status`` beside their ``spec`` (see
``autoscaler.control.resource_status``); a ``status`` sent in a write is ignored, as DRF does with read-only
fields (``READ_ONLY_FIELDS``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from autoscaler.control.resource_status import decision_summary, with_status
from autoscaler.manifests import DatabaseReferences, export_resource
from autoscaler.schemas import validate_document

#: top-level fields that only the control plane writes, by kind: dropped from request bodies
READ_ONLY_FIELDS = {"Application": ("status",), "Deployment": ("status",)}


def without_read_only(doc: Any, kind: str | None = None) -> Any:
    """A request body without the read-only fields of ``kind`` (default: the document's own ``kind``); any
    other JSON value, or a kind without read-only fields, is returned as it is."""
    if not isinstance(doc, dict):
        return doc
    dropped = READ_ONLY_FIELDS.get(kind if kind is not None else str(doc.get("kind", "")), ())
    return {k: v for k, v in doc.items() if k not in dropped} if dropped else doc


class ManifestSerializer(serializers.BaseSerializer):
    """A resource as its manifest. Context: ``kind`` (required), ``name`` (from the URL, optional), ``owner``.

    ``validated_data`` is a ``schemas.ValidDocument``; invalid input raises ManifestError (answered as 400).
    """

    def to_internal_value(self, data: Any):
        return validate_document(
            without_read_only(data, self.context["kind"]),
            DatabaseReferences(self.context.get("owner")),
            expected_kind=self.context["kind"],
            expected_name=self.context.get("name"),
        )

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return with_status(export_resource(instance), instance)


class HistoryDecisionSerializer(serializers.Serializer):
    """The control decision whose apply made a change."""

    id = serializers.IntegerField()
    slot = serializers.IntegerField()
    outcome = serializers.CharField()
    reason = serializers.CharField()


class HistorySerializer(serializers.Serializer):
    """One past value of a deployment's replicas (``source``: manifest, control or observed)."""

    changed_at = serializers.DateTimeField()
    region = serializers.CharField()
    replicas = serializers.DictField(child=serializers.IntegerField())
    source = serializers.CharField()
    decision = serializers.SerializerMethodField()

    @extend_schema_field(HistoryDecisionSerializer(allow_null=True))
    def get_decision(self, row) -> dict[str, Any] | None:
        return decision_summary(row.decision)
