"""Validation of whole manifest documents: envelope, kind, spec, and references to stored resources.

This is the single validation layer: the ``apply`` command, the REST API and the admin all call
:func:`validate_document`. References to other resources are looked up through a :class:`References`
object so that this module needs no database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .application import ApplicationSpec
from .catalog import NodeTypeCatalogSpec
from .common import API_VERSION, Metadata
from .deployment import DeploymentSpec
from .endpoints import connector_endpoint_errors
from .errors import FieldError, ManifestError, from_pydantic
from .region import RegionSpec

#: Kinds in the order in which a multi-document manifest is applied (dependencies first).
KIND_SPECS: dict[str, type[BaseModel]] = {
    "NodeTypeCatalog": NodeTypeCatalogSpec,
    "Region": RegionSpec,
    "Application": ApplicationSpec,
    "Deployment": DeploymentSpec,
}
KIND_ORDER = {kind: i for i, kind in enumerate(KIND_SPECS)}
KIND_ALIASES = {
    **{kind.lower(): kind for kind in KIND_SPECS},
    **{kind.lower() + "s": kind for kind in KIND_SPECS},
    "catalog": "NodeTypeCatalog",
    "catalogs": "NodeTypeCatalog",
    "app": "Application",
    "apps": "Application",
}


def resolve_kind(name: str) -> str:
    """The kind named by ``name`` (case-insensitive, plural and short aliases accepted); ValueError if none."""
    kind = KIND_ALIASES.get(name.lower())
    if kind is None:
        raise ValueError(f"unknown kind {name!r}: choose one of {', '.join(KIND_SPECS)}")
    return kind


class References(Protocol):
    """What validation needs to know about stored resources (implemented over the database by the caller)."""

    def catalog_node_types(self, catalog: str) -> set[str] | None:
        """Node-type names of a catalog, None if there is no such catalog."""

    def region_node_types(self, region: str) -> set[str] | None:
        """Node-type names available in a region (those of its catalog), None if there is no such region."""

    def region_max_speedup(self, region: str) -> float | None:
        """Relative speed of the fastest node type of a region's catalog, None if there is no such region."""

    def application(self, name: str) -> ApplicationSpec | None:
        """The stored spec of one of the owner's applications, None if there is none."""

    def deployment_owner_of_operator(self, application: str, operator: str) -> str | None:
        """Name of the deployment of ``operator`` of ``application``, None if it has none."""

    def deployments_of(self, application: str) -> dict[str, tuple[str, int, str]]:
        """operator name -> (deployment name, total replicas, region) for one application's deployments."""

    def node_types_in_use(self, *, catalog: str | None = None, region: str | None = None) -> dict[str, str]:
        """node-type name -> a deployment using it, among deployments in ``region`` or regions of ``catalog``."""

    def engine_endpoints(self, regions: list[str]) -> list[str]:
        """Engine endpoints declared on ``regions`` (unknown ones ignored) and in the allow-list setting."""


@dataclass
class ValidDocument:
    """A validated manifest document."""

    kind: str
    name: str
    spec: Any

    def to_manifest(self) -> dict[str, Any]:
        return manifest(self.kind, self.name, self.spec)


def manifest(kind: str, name: str, spec: Any) -> dict[str, Any]:
    """The canonical manifest dict of a resource."""
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec.to_manifest_dict(),
    }


def validate_document(
    doc: Any, refs: References | None, *, expected_kind: str | None = None, expected_name: str | None = None
) -> ValidDocument:
    """Validate one manifest document; raise ManifestError listing every error found.

    ``refs`` = None skips the checks of references to stored resources. ``expected_kind`` / ``expected_name``
    (API paths) are filled in when the document leaves them out and must match when it gives them.
    """
    if not isinstance(doc, dict):
        raise ManifestError(
            [FieldError("", f"a manifest document must be a mapping, got {type(doc).__name__}")]
        )
    doc = dict(doc)
    errors: list[FieldError] = []
    if expected_kind is not None:
        doc.setdefault("apiVersion", API_VERSION)
        doc.setdefault("kind", expected_kind)
        if doc["kind"] != expected_kind:
            errors.append(
                FieldError("kind", f"must be {expected_kind!r} at this endpoint, got {doc['kind']!r}")
            )
    extra = sorted(set(doc) - {"apiVersion", "kind", "metadata", "spec"})
    errors += [FieldError(key, "unknown top-level field") for key in extra]
    if doc.get("apiVersion") != API_VERSION:
        errors.append(
            FieldError("apiVersion", f"unknown version {doc.get('apiVersion')!r}: expected {API_VERSION!r}")
        )
    kind = doc.get("kind")
    if kind not in KIND_SPECS:
        errors.append(FieldError("kind", f"unknown kind {kind!r}: choose one of {', '.join(KIND_SPECS)}"))
    metadata = doc.get("metadata")
    if expected_name is not None:
        metadata = {"name": expected_name, **(metadata if isinstance(metadata, dict) else {})}
    name = None
    try:
        name = Metadata.model_validate(metadata).name
        if expected_name is not None and name != expected_name:
            errors.append(FieldError("metadata.name", f"must be {expected_name!r} (the name in the URL)"))
    except ValidationError as exc:
        errors += from_pydantic(exc, "metadata")
    if "spec" not in doc:
        errors.append(FieldError("spec", "Field required"))
    if errors or kind not in KIND_SPECS:
        raise ManifestError(errors)
    try:
        spec = KIND_SPECS[kind].model_validate(doc["spec"])
    except ValidationError as exc:
        raise ManifestError(from_pydantic(exc, "spec")) from None
    errors = spec.semantic_errors() if hasattr(spec, "semantic_errors") else []
    if refs is not None:
        errors += reference_errors(kind, name, spec, refs)
    if errors:
        raise ManifestError(errors)
    return ValidDocument(kind, name, spec)


def reference_errors(kind: str, name: str, spec: Any, refs: References) -> list[FieldError]:
    """Errors of references from one validated spec to stored resources."""
    if kind == "NodeTypeCatalog":
        return _catalog_refs(name, spec, refs)
    if kind == "Region":
        return _region_refs(name, spec, refs)
    if kind == "Application":
        return _application_refs(name, spec, refs)
    return _deployment_refs(name, spec, refs)


def _catalog_refs(name: str, spec: NodeTypeCatalogSpec, refs: References) -> list[FieldError]:
    kept = {nt.name for nt in spec.node_types}
    return [
        FieldError("spec.nodeTypes", f"node type {node_type!r} cannot be removed: deployment {dep!r} uses it")
        for node_type, dep in sorted(refs.node_types_in_use(catalog=name).items())
        if node_type not in kept
    ]


def _region_refs(name: str, spec: RegionSpec, refs: References) -> list[FieldError]:
    available = refs.catalog_node_types(spec.catalog)
    if available is None:
        return [FieldError("spec.catalog", f"unknown node-type catalog {spec.catalog!r}")]
    return [
        FieldError(
            "spec.catalog",
            f"catalog {spec.catalog!r} lacks node type {node_type!r} used by deployment {dep!r}",
        )
        for node_type, dep in sorted(refs.node_types_in_use(region=name).items())
        if node_type not in available
    ]


def _application_refs(name: str, spec: ApplicationSpec, refs: References) -> list[FieldError]:
    errors = [
        FieldError(f"spec.regions[{i}]", f"unknown region {region!r}")
        for i, region in enumerate(spec.regions)
        if refs.region_node_types(region) is None
    ]
    index = spec.operator_index()
    for operator, (deployment, total, region) in sorted(refs.deployments_of(name).items()):
        i = index.get(operator)
        if i is not None and total > spec.operators[i].max_parallelism:
            errors.append(
                FieldError(
                    f"spec.operators[{i}].maxParallelism",
                    f"{spec.operators[i].max_parallelism} is below the {total} replicas of deployment {deployment!r}",
                )
            )
        if i is not None and spec.regions and region not in spec.regions:
            errors.append(FieldError("spec.regions", f"deployment {deployment!r} runs in region {region!r}"))
    speedups = [refs.region_max_speedup(region) for region in spec.regions]
    if speedups and not errors and all(v is not None and v > 0 for v in speedups):
        errors.extend(spec.unmeetable_path_errors(max(speedups)))  # an R_max that no node type can ever meet
    endpoints = refs.engine_endpoints(list(spec.regions))
    errors += connector_endpoint_errors(spec.engine, spec.connector, endpoints)
    return errors


def _deployment_refs(name: str, spec: DeploymentSpec, refs: References) -> list[FieldError]:
    errors = []
    if spec.total() < 1:
        errors.append(FieldError("spec.replicas", "a deployment needs at least one replica"))
    app = refs.application(spec.application)
    if app is None:
        errors.append(FieldError("spec.application", f"unknown application {spec.application!r}"))
    else:
        index = app.operator_index()
        if spec.operator not in index:
            errors.append(
                FieldError(
                    "spec.operator", f"application {spec.application!r} has no operator {spec.operator!r}"
                )
            )
        else:
            k_max = app.operators[index[spec.operator]].max_parallelism
            if spec.total() > k_max:
                errors.append(
                    FieldError(
                        "spec.replicas",
                        f"{spec.total()} replicas exceed maxParallelism {k_max} of operator {spec.operator!r}",
                    )
                )
            other = refs.deployment_owner_of_operator(spec.application, spec.operator)
            if other is not None and other != name:
                errors.append(
                    FieldError(
                        "spec.operator", f"operator {spec.operator!r} already has deployment {other!r}"
                    )
                )
        if app.regions and spec.region not in app.regions:
            errors.append(
                FieldError("spec.region", f"region {spec.region!r} is not one of the application's regions")
            )
    available = refs.region_node_types(spec.region)
    if available is None:
        errors.append(FieldError("spec.region", f"unknown region {spec.region!r}"))
    else:
        for node_type in spec.replicas:
            if node_type not in available:
                errors.append(
                    FieldError(
                        f"spec.replicas.{node_type}",
                        f"unknown node type {node_type!r} in region {spec.region!r}",
                    )
                )
    return errors


def manifest_model(kind: str) -> type[BaseModel]:
    """A pydantic model of a whole ``kind`` manifest (used to describe the API in its OpenAPI schema)."""
    return create_model(
        f"{kind}Manifest",
        __config__=ConfigDict(extra="forbid"),
        apiVersion=(Literal[API_VERSION], API_VERSION),  # type: ignore[valid-type]
        kind=(Literal[kind], kind),  # type: ignore[valid-type]
        metadata=(Metadata, ...),
        spec=(KIND_SPECS[kind], ...),
    )


MANIFEST_MODELS: dict[str, type[BaseModel]] = {kind: manifest_model(kind) for kind in KIND_SPECS}
