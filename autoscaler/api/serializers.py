"""DRF serializers that delegate validation to ``autoscaler.schemas`` and representation to manifest export."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from autoscaler.manifests import DatabaseReferences, export_resource
from autoscaler.schemas import validate_document


class ManifestSerializer(serializers.BaseSerializer):
    """A resource as its manifest. Context: ``kind`` (required), ``name`` (from the URL, optional), ``owner``.

    ``validated_data`` is a ``schemas.ValidDocument``; invalid input raises ManifestError (answered as 400).
    """

    def to_internal_value(self, data: Any):
        return validate_document(
            data,
            DatabaseReferences(self.context.get("owner")),
            expected_kind=self.context["kind"],
            expected_name=self.context.get("name"),
        )

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return export_resource(instance)


class HistorySerializer(serializers.Serializer):
    """One past value of a deployment's replicas."""

    changed_at = serializers.DateTimeField()
    region = serializers.CharField()
    replicas = serializers.DictField(child=serializers.IntegerField())
    source = serializers.CharField()
