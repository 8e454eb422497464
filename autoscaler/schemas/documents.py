"""Validation of whole manifest documents: envelope, kind, spec, and references to stored resources.

This is the single validation layer: the ``apply`` command, the REST API and the admin all call
:func:`validate_document`. References to other resources are looked up through a :class:`References`
object so that this module needs no database.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .application import ApplicationSpec
from .catalog import NodeTypeCatalogSpec
from .common import API_VERSION, Metadata
from .deployment import DeploymentSpec
from .endpoints import connector_endpoint_errors
from .errors import FieldError, ManifestError, from_pydantic, join_loc
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

    Envelope, field, graph and reference checks all run, so that one answer lists every error of the
    document: a field that fails its own check is left at its default for the checks that need the whole spec
    (errors that would only follow from that default are not reported). Any JSON shape is accepted as input.

    ``refs`` = None skips the checks of references to stored resources. ``expected_kind`` / ``expected_name``
    (API paths) are filled in when the document leaves them out and must match when it gives them.
    """
    if not isinstance(doc, dict):
        raise ManifestError(
            [FieldError("", f"a manifest document must be a mapping, got {type(doc).__name__}")]
        )
    doc = dict(doc)
    errors: list[FieldError] = non_finite_numbers(doc)
    if expected_kind is not None:
        doc.setdefault("apiVersion", API_VERSION)
        doc.setdefault("kind", expected_kind)
        if doc["kind"] != expected_kind:
            errors.append(
                FieldError("kind", f"must be {expected_kind!r} at this endpoint, got {_shown(doc['kind'])}")
            )
    extra = sorted(str(key) for key in set(doc) - {"apiVersion", "kind", "metadata", "spec"})
    errors += [FieldError(key, "unknown top-level field") for key in extra]
    if doc.get("apiVersion") != API_VERSION:
        errors.append(
            FieldError(
                "apiVersion", f"unknown version {_shown(doc.get('apiVersion'))}: expected {API_VERSION!r}"
            )
        )
    kind = doc.get("kind") if isinstance(doc.get("kind"), str) else None
    if kind not in KIND_SPECS:
        errors.append(
            FieldError(
                "kind", f"unknown kind {_shown(doc.get('kind'))}: choose one of {', '.join(KIND_SPECS)}"
            )
        )
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
    if kind not in KIND_SPECS or "spec" not in doc or (expected_kind is not None and kind != expected_kind):
        raise ManifestError(errors)  # no spec to check, or checked as the wrong kind
    spec, spec_errors, defaulted = _validate_spec(KIND_SPECS[kind], doc["spec"])
    errors += spec_errors
    if spec is not None:
        later = spec.semantic_errors() if hasattr(spec, "semantic_errors") else []
        if refs is not None and name is not None:
            later += reference_errors(kind, name, spec, refs)
        errors += [e for e in later if not _under(e.loc, defaulted)]
    if errors:
        raise ManifestError(errors)
    return ValidDocument(kind, name, spec)


def _shown(value: Any) -> str:
    """A value quoted in an error message (at most 80 characters)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _under(loc: str, roots: set[str]) -> bool:
    return any(loc == root or loc.startswith((root + ".", root + "[")) for root in roots)


def non_finite_numbers(value: Any, loc: str = "") -> list[FieldError]:
    """A FieldError for every NaN or infinite number anywhere in a JSON-like document (JSON has none, and
    ``1e999`` parses as infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return [FieldError(loc, "must be a finite number")]
    if isinstance(value, dict):
        return [e for key, item in value.items() for e in non_finite_numbers(item, join_loc(loc, str(key)))]
    if isinstance(value, list):
        return [e for i, item in enumerate(value) for e in non_finite_numbers(item, join_loc(loc, i))]
    return []


def _validate_spec(model: type[BaseModel], data: Any) -> tuple[Any, list[FieldError], set[str]]:
    """(spec or None, field errors, locs of the fields left at their defaults).

    When fields fail their checks, they are removed and the rest validated again, so that the checks of the
    whole spec can still run; None when that is not possible (a required field or a list item is wrong)."""
    try:
        return model.model_validate(data), [], set()
    except ValidationError as exc:
        errors = from_pydantic(exc, "spec")
        pruned = copy.deepcopy(data)
        for item in exc.errors(include_url=False):
            if item["type"] == "missing" or not _remove(pruned, item["loc"]):
                return None, errors, set()
        try:
            spec = model.model_validate(pruned)
        except ValidationError:
            return None, errors, set()
        return spec, errors, {e.loc for e in errors}


def _remove(data: Any, loc: tuple[str | int, ...]) -> bool:
    """Delete the mapping entry at ``loc`` (a pydantic error location) from ``data``; False if it is not one."""
    if not loc:
        return False
    parent = data
    for part in loc[:-1]:
        if isinstance(parent, dict) and isinstance(part, str) and part in parent:
            parent = parent[part]
        elif isinstance(parent, list) and isinstance(part, int) and 0 <= part < len(parent):
            parent = parent[part]
        else:
            return False
    key = loc[-1]
    if isinstance(parent, dict) and isinstance(key, str):
        parent.pop(key, None)
        return True
    return False


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
    if speedups and all(v is not None and v > 0 for v in speedups):
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


def manifest_response_model(kind: str) -> type[BaseModel]:
    """A stored ``kind`` resource as the API answers it: its manifest, and ``warnings`` when a check could not
    be made (e.g. the engine was unreachable)."""
    return create_model(
        f"{kind}Resource",
        __base__=MANIFEST_MODELS[kind],
        warnings=(list[str] | None, None),
    )


MANIFEST_MODELS: dict[str, type[BaseModel]] = {kind: manifest_model(kind) for kind in KIND_SPECS}
MANIFEST_RESPONSE_MODELS: dict[str, type[BaseModel]] = {
    kind: manifest_response_model(kind) for kind in KIND_SPECS
}
