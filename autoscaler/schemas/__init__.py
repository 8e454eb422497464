"""The single validation layer (pydantic v2) of manifests, the REST API and the admin."""

from .application import ApplicationSpec, OperatorSpec, PoliciesSpec, PolicyChoice, SLOSpec
from .catalog import NodeTypeCatalogSpec, NodeTypeSpec
from .common import API_VERSION, Metadata
from .deployment import DeploymentSpec
from .documents import (
    KIND_ORDER,
    KIND_SPECS,
    References,
    ValidDocument,
    manifest,
    resolve_kind,
    validate_document,
)
from .errors import FieldError, ManifestError
from .region import RegionSpec

__all__ = [
    "API_VERSION",
    "KIND_ORDER",
    "KIND_SPECS",
    "ApplicationSpec",
    "DeploymentSpec",
    "FieldError",
    "ManifestError",
    "Metadata",
    "NodeTypeCatalogSpec",
    "NodeTypeSpec",
    "OperatorSpec",
    "PoliciesSpec",
    "PolicyChoice",
    "References",
    "RegionSpec",
    "SLOSpec",
    "ValidDocument",
    "manifest",
    "resolve_kind",
    "validate_document",
]
