"""Manifests: parse multi-document YAML/JSON, apply them all-or-nothing, export and delete resources.

``apply_documents`` validates every document with ``autoscaler.schemas`` (references are checked against the
database as it is inside the transaction, so a document may refer to one earlier in the same file) and writes
nothing unless every document is valid. Applying a manifest equal to the stored state changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError

from . import models as m
from .schemas import (
    KIND_ORDER,
    ApplicationSpec,
    DeploymentSpec,
    FieldError,
    ManifestError,
    NodeTypeCatalogSpec,
    RegionSpec,
    ValidDocument,
    manifest,
    resolve_kind,
    validate_document,
)
from .schemas.errors import prefixed


# ---- parsing ----------------------------------------------------------------------------------------------
def parse_documents(text: str) -> list[Any]:
    """Documents of a YAML stream (``---`` separated) or JSON (an object, a list of objects or ``{"items": []}``).

    Empty documents are skipped. Raises ManifestError on a syntax error.
    """
    try:
        loaded = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ManifestError(
            [FieldError("", f"not valid YAML or JSON: {where}{getattr(exc, 'problem', exc)}")]
        ) from None
    docs: list[Any] = []
    for item in loaded:
        if item is None:
            continue
        if isinstance(item, list):
            docs.extend(item)
        elif isinstance(item, dict) and set(item) == {"items"} and isinstance(item["items"], list):
            docs.extend(item["items"])
        else:
            docs.append(item)
    if not docs:
        raise ManifestError([FieldError("", "the manifest holds no document")])
    return docs


def dump_documents(docs: list[dict[str, Any]], fmt: str = "yaml") -> str:
    """Text of manifests in ``fmt`` ("yaml": ``---`` separated documents; "json": one object or a list)."""
    if fmt == "json":
        return json.dumps(docs[0] if len(docs) == 1 else docs, indent=2) + "\n"
    return "---\n".join(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None) for doc in docs)


# ---- references over the database -------------------------------------------------------------------------
class DatabaseReferences:
    """``schemas.References`` answered from the database; applications and deployments of ``owner`` only."""

    def __init__(self, owner: AbstractBaseUser | None) -> None:
        self.owner = owner

    def catalog_node_types(self, catalog: str) -> set[str] | None:
        found = m.NodeTypeCatalog.objects.filter(name=catalog).first()
        return None if found is None else set(found.node_types.values_list("name", flat=True))

    def region_node_types(self, region: str) -> set[str] | None:
        found = m.Region.objects.filter(name=region).select_related("catalog").first()
        return None if found is None else set(found.catalog.node_types.values_list("name", flat=True))

    def region_max_speedup(self, region: str) -> float | None:
        found = m.Region.objects.filter(name=region).select_related("catalog").first()
        if found is None:
            return None
        return max(found.catalog.node_types.values_list("speedup", flat=True), default=None)

    def application(self, name: str) -> ApplicationSpec | None:
        app = m.Application.objects.filter(owner=self.owner, name=name).first()
        return None if app is None else application_spec(app)

    def deployment_owner_of_operator(self, application: str, operator: str) -> str | None:
        found = m.Deployment.objects.filter(
            operator__application__owner=self.owner,
            operator__application__name=application,
            operator__name=operator,
        ).first()
        return None if found is None else found.name

    def deployments_of(self, application: str) -> dict[str, tuple[str, int, str]]:
        deps = m.Deployment.objects.filter(
            operator__application__owner=self.owner, operator__application__name=application
        ).select_related("operator", "region")
        return {d.operator.name: (d.name, d.total_replicas, d.region.name) for d in deps}

    def engine_endpoints(self, regions: list[str]) -> list[str]:
        return engine_endpoints(regions)

    def node_types_in_use(self, *, catalog: str | None = None, region: str | None = None) -> dict[str, str]:
        deps = m.Deployment.objects.all()  # every owner's: a shared catalog must stay consistent for all
        if catalog is not None:
            deps = deps.filter(region__catalog__name=catalog)
        if region is not None:
            deps = deps.filter(region__name=region)
        used: dict[str, str] = {}
        for dep in deps.order_by("name"):
            for node_type, count in dep.replicas.items():
                if count > 0:
                    used.setdefault(node_type, dep.name)
        return used


def engine_endpoints(regions: Iterable[str]) -> list[str]:
    """The engine endpoints staff declared on ``regions`` (by name) and in ``AUTOSCALER_ENGINE_ENDPOINTS``."""
    from django.conf import settings

    declared = [
        endpoint
        for endpoints in m.Region.objects.filter(name__in=list(regions)).values_list("endpoints", flat=True)
        for endpoint in endpoints or []
    ]
    return declared + list(getattr(settings, "AUTOSCALER_ENGINE_ENDPOINTS", []))


# ---- rows -> specs (export) ---------------------------------------------------------------------------------
def catalog_spec(catalog: m.NodeTypeCatalog) -> NodeTypeCatalogSpec:
    return NodeTypeCatalogSpec(
        description=catalog.description,
        node_types=[
            {
                "name": nt.name,
                "cores": nt.cores,
                "memory_mib": nt.memory_mib,
                "speedup": nt.speedup,
                "price_per_hour": nt.price_per_hour,
            }
            for nt in catalog.node_types.all()
        ],
    )


def region_spec(region: m.Region) -> RegionSpec:
    return RegionSpec(
        catalog=region.catalog.name,
        max_nodes=region.max_nodes,
        max_new_nodes_per_period=region.max_new_nodes_per_period,
        provisioning_delay_s=region.provisioning_delay_s,
        provider=region.provider or {},
        endpoints=region.endpoints or [],
    )


def application_spec(app: m.Application) -> ApplicationSpec:
    operators = list(app.operators.all())
    return ApplicationSpec(
        engine=app.engine,
        connector=app.connector,
        slo={"r_max_ms": app.r_max_ms, "eta_v": app.eta_v, "eta_r": app.eta_r, "paths": app.slo_paths},
        operators=[
            {
                "name": op.name,
                "kind": op.kind,
                "max_parallelism": op.max_parallelism,
                "selectivity": op.selectivity,
                "engine_object": op.engine_object,
                "service_time_ms": op.service_time_ms,
                "expected_peak_rate": op.expected_peak_rate,
            }
            for op in operators
        ],
        streams=[(s.source.name, s.target.name) for s in app.streams.select_related("source", "target")],
        policies=app.policies,
        periods={"om_s": app.om_period_s, "am_s": app.am_period_s},
        regions=app.region_order,
        dry_run=app.dry_run,
        state=app.state,
        rails=app.rails or {},
    )


def deployment_spec(dep: m.Deployment) -> DeploymentSpec:
    return DeploymentSpec(
        application=dep.operator.application.name,
        operator=dep.operator.name,
        region=dep.region.name,
        replicas=dep.replicas,
    )


def export_resource(obj: Any) -> dict[str, Any]:
    """The manifest of a stored resource (``apply`` accepts it back and changes nothing)."""
    if isinstance(obj, m.NodeTypeCatalog):
        return manifest("NodeTypeCatalog", obj.name, catalog_spec(obj))
    if isinstance(obj, m.Region):
        return manifest("Region", obj.name, region_spec(obj))
    if isinstance(obj, m.Application):
        return manifest("Application", obj.name, application_spec(obj))
    if isinstance(obj, m.Deployment):
        return manifest("Deployment", obj.name, deployment_spec(obj))
    raise TypeError(f"not a resource: {obj!r}")


def queryset(kind: str, owner: AbstractBaseUser | None):
    """Stored resources of ``kind`` visible to ``owner`` (catalogs and regions are shared)."""
    kind = resolve_kind(kind)
    if kind == "NodeTypeCatalog":
        return m.NodeTypeCatalog.objects.prefetch_related("node_types")
    if kind == "Region":
        return m.Region.objects.select_related("catalog")
    if kind == "Application":
        return m.Application.objects.filter(owner=owner).prefetch_related("operators")
    return m.Deployment.objects.filter(owner=owner).select_related("operator__application", "region")


def export(kind: str, name: str | None, owner: AbstractBaseUser | None) -> list[dict[str, Any]]:
    """Manifests of one resource (``name``) or of every resource of ``kind``; ManifestError if ``name`` is unknown.

    ``kind`` "all" (no name): every catalog and region and the owner's applications and deployments, in the
    order ``apply`` needs.
    """
    if kind.lower() == "all" and name is None:
        return [doc for each in KIND_ORDER for doc in export(each, None, owner)]
    kind = resolve_kind(kind)
    objects = queryset(kind, owner)
    if name is not None:
        objects = objects.filter(name=name)
        if not objects.exists():
            raise ManifestError([FieldError("metadata.name", f"no {kind} named {name!r}")])
    return [export_resource(obj) for obj in objects]


# ---- specs -> rows (apply) ----------------------------------------------------------------------------------
@dataclass
class ApplyResult:
    """What applying one document did: ``action`` is "created", "configured" or "unchanged"; ``warnings``: checks
    that could not be made (e.g. a Flink binding while its cluster is unreachable), the document is stored."""

    kind: str
    name: str
    action: str
    obj: Any
    warnings: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.kind.lower()}/{self.name} {self.action}"


def find(kind: str, name: str, owner: AbstractBaseUser | None) -> Any | None:
    return queryset(kind, owner).filter(name=name).first()


def _write_catalog(
    name: str, spec: NodeTypeCatalogSpec, obj: m.NodeTypeCatalog | None, owner
) -> m.NodeTypeCatalog:
    obj = obj or m.NodeTypeCatalog(name=name)
    obj.description = spec.description
    obj.save()
    obj.node_types.exclude(name__in=[nt.name for nt in spec.node_types]).delete()
    for position, nt in enumerate(spec.node_types):
        m.NodeType.objects.update_or_create(
            catalog=obj,
            name=nt.name,
            defaults={
                "position": position,
                "cores": nt.cores,
                "memory_mib": nt.memory_mib,
                "speedup": nt.speedup,
                "price_per_hour": nt.price_per_hour,
            },
        )
    return obj


def _write_region(name: str, spec: RegionSpec, obj: m.Region | None, owner) -> m.Region:
    obj = obj or m.Region(name=name)
    obj.catalog = m.NodeTypeCatalog.objects.get(name=spec.catalog)
    obj.max_nodes = spec.max_nodes
    obj.max_new_nodes_per_period = spec.max_new_nodes_per_period
    obj.provisioning_delay_s = spec.provisioning_delay_s
    obj.provider = spec.provider.model_dump(mode="json")
    obj.endpoints = list(spec.endpoints)
    obj.save()
    return obj


def _write_application(name: str, spec: ApplicationSpec, obj: m.Application | None, owner) -> m.Application:
    obj = obj or m.Application(name=name, owner=owner)
    obj.engine = spec.engine
    obj.connector = spec.connector
    obj.r_max_ms, obj.eta_v, obj.eta_r = spec.slo.r_max_ms, spec.slo.eta_v, spec.slo.eta_r
    obj.slo_paths = [p.model_dump(mode="json") for p in spec.slo.paths]
    obj.policies = spec.policies.model_dump(mode="json", exclude_none=True)
    obj.om_period_s, obj.am_period_s = spec.periods.om_s, spec.periods.am_s
    obj.region_order = list(spec.regions)
    obj.dry_run = spec.dry_run
    obj.state = spec.state
    obj.rails = spec.rails.to_manifest_dict()
    obj.save()
    obj.regions.set(m.Region.objects.filter(name__in=spec.regions))
    # Operators are matched by name so that their deployments survive updates; streams are rewritten.
    obj.streams.all().delete()
    obj.operators.exclude(name__in=[op.name for op in spec.operators]).delete()
    by_name = {}
    for position, op in enumerate(spec.operators):
        by_name[op.name], _ = m.Operator.objects.update_or_create(
            application=obj,
            name=op.name,
            defaults={
                "position": position,
                "kind": op.kind,
                "max_parallelism": op.max_parallelism,
                "selectivity": op.selectivity,
                "engine_object": op.engine_object,
                "service_time_ms": op.service_time_ms,
                "expected_peak_rate": op.expected_peak_rate,
            },
        )
    m.Stream.objects.bulk_create(
        m.Stream(application=obj, position=i, source=by_name[src], target=by_name[dst])
        for i, (src, dst) in enumerate(spec.streams)
    )
    return obj


def _write_deployment(name: str, spec: DeploymentSpec, obj: m.Deployment | None, owner) -> m.Deployment:
    obj = obj or m.Deployment(name=name, owner=owner)
    obj.operator = m.Operator.objects.get(
        application__owner=owner, application__name=spec.application, name=spec.operator
    )
    obj.region = m.Region.objects.get(name=spec.region)
    obj.replicas = dict(spec.replicas)
    obj.save()
    record_history(obj, source="manifest")
    return obj


def record_history(
    dep: m.Deployment,
    source: str,
    replicas: dict[str, int] | None = None,
    decision: Any = None,
) -> m.DeploymentHistory:
    """Append a change to the deployment's history: ``source`` "manifest" (its declared replicas were applied),
    "control" (the loop applied ``decision``, a ``control.Decision``) or "observed" (the engine first seen);
    ``replicas``: what changed to (default: the declared replicas)."""
    return m.DeploymentHistory.objects.create(
        deployment=dep,
        region=dep.region.name,
        replicas=dict(dep.replicas if replicas is None else replicas),
        source=source,
        decision=decision,
    )


WRITERS = {
    "NodeTypeCatalog": _write_catalog,
    "Region": _write_region,
    "Application": _write_application,
    "Deployment": _write_deployment,
}


def apply_valid(doc: ValidDocument, owner: AbstractBaseUser | None) -> ApplyResult:
    """Store one validated document (create or update); no write at all when it equals the stored state."""
    current = find(doc.kind, doc.name, owner)
    if current is not None and export_resource(current) == doc.to_manifest():
        return ApplyResult(doc.kind, doc.name, "unchanged", current)
    obj = WRITERS[doc.kind](doc.name, doc.spec, current, owner)
    return ApplyResult(doc.kind, doc.name, "configured" if current is not None else "created", obj)


def apply_documents(
    docs: Iterable[Any],
    owner: AbstractBaseUser | None,
    *,
    expected_kind: str | None = None,
    expected_name: str | None = None,
    dry_run: bool = False,
) -> list[ApplyResult]:
    """Validate and apply documents in one transaction: all of them, or none (ManifestError with every error).

    Documents are applied in dependency order (catalogs, regions, applications, deployments), each checked
    against the state left by the ones before it. Error paths start with ``documents[i].`` when there are
    several documents. ``dry_run``: validate as if applying, then roll back.
    """
    docs = list(docs)
    order = sorted(range(len(docs)), key=lambda i: KIND_ORDER.get(_kind_of(docs[i]), len(KIND_ORDER)))
    try:
        results = _apply_in_transaction(docs, order, owner, expected_kind, expected_name, dry_run)
    except IntegrityError:  # a concurrent apply created the same name between our check and our write
        raise ManifestError(
            [FieldError("metadata.name", "changed concurrently by another request: retry")]
        ) from None
    return [result for _, result in sorted(results, key=lambda pair: pair[0])]


def _apply_in_transaction(
    docs: list[Any],
    order: list[int],
    owner: AbstractBaseUser | None,
    expected_kind: str | None,
    expected_name: str | None,
    dry_run: bool,
) -> list[tuple[int, ApplyResult]]:
    multi = len(docs) > 1
    refs = DatabaseReferences(owner)
    errors: list[FieldError] = []
    results: list[tuple[int, ApplyResult]] = []
    seen: dict[tuple[str, str], int] = {}
    with transaction.atomic():
        for i in order:
            try:
                valid = validate_document(
                    docs[i], refs, expected_kind=expected_kind, expected_name=expected_name
                )
                key = (valid.kind, valid.name)
                if key in seen:
                    raise ManifestError(
                        [
                            FieldError(
                                "metadata.name", f"{valid.kind} {valid.name!r} also in documents[{seen[key]}]"
                            )
                        ]
                    )
                seen[key] = i
                warnings = engine_binding_warnings(valid)
                # Written even after another document failed (all is rolled back then), so that later
                # documents are checked against the state they expect and only root causes are reported.
                result = apply_valid(valid, owner)
                result.warnings = warnings
                results.append((i, result))
            except ManifestError as exc:
                errors += prefixed(exc.errors, f"documents[{i}]") if multi else exc.errors
        if errors:
            transaction.set_rollback(True)
            raise ManifestError(errors)
        if dry_run:
            transaction.set_rollback(True)
    return results


def engine_binding_warnings(valid: ValidDocument) -> list[str]:
    """The engine-side binding check of an Application (today ``engine: flink``: every operator must resolve to a
    vertex of the running job, see ``connectors.flink.apply_check``). Raises ManifestError naming the operator's
    field and listing the job's vertices; returns warnings when the check could not be made (cluster unreachable,
    job not running yet): the document is then stored as it is."""
    if valid.kind != "Application" or valid.spec.engine != "flink":
        return []
    from connectors.flink.apply_check import check_at_apply
    from connectors.flink.binding import BindingError

    spec: ApplicationSpec = valid.spec
    names = [op.name for op in spec.operators]
    try:
        return check_at_apply(dict(spec.connector), names)
    except BindingError as exc:
        mapped = (spec.connector or {}).get("vertices") or {}
        errors = []
        for op, reason in exc.problems.items():
            loc = (
                f"spec.connector.vertices.{op}" if op in mapped else f"spec.operators[{names.index(op)}].name"
            )
            errors.append(FieldError(loc, f"operator {op!r}: {reason}; vertices of the job: {exc.vertices}"))
        raise ManifestError(errors or [FieldError("spec.connector", str(exc))]) from None


def _kind_of(doc: Any) -> str:
    kind = doc.get("kind", "") if isinstance(doc, dict) else ""
    return kind if isinstance(kind, str) else ""  # any JSON value may be there (a list is unhashable)


def apply_text(text: str, owner: AbstractBaseUser | None, *, dry_run: bool = False) -> list[ApplyResult]:
    """Parse and apply a manifest file's text (see ``apply_documents``)."""
    return apply_documents(parse_documents(text), owner, dry_run=dry_run)


# ---- delete -------------------------------------------------------------------------------------------------
def delete(kind: str, name: str, owner: AbstractBaseUser | None) -> None:
    """Delete one resource; ManifestError if it does not exist or is still used (a region by deployments,
    a catalog by regions). Deleting an application deletes its operators, streams and deployments."""
    kind = resolve_kind(kind)
    obj = find(kind, name, owner)
    if obj is None:
        raise ManifestError([FieldError("metadata.name", f"no {kind} named {name!r}")])
    try:
        with transaction.atomic():
            obj.delete()
    except ProtectedError as exc:
        users = sorted({str(o) for o in exc.protected_objects})
        raise ManifestError(
            [FieldError("metadata.name", f"{kind} {name!r} is still used by {', '.join(users)}")]
        ) from None


def default_owner(username: str | None = None):
    """The user owning applications applied from the command line (created as a superuser if missing)."""
    from django.conf import settings

    username = username or settings.AUTOSCALER_DEFAULT_OWNER
    user_model = get_user_model()
    user = user_model.objects.filter(username=username).first()
    if user is None:
        user = user_model.objects.create_superuser(username=username, email="", password=None)
    return user
