"""List, create, edit and delete node-type catalogs, regions and deployments (same validation as the API).

Catalogs and regions are shared: everyone reads them, only staff users write them (as in the REST API).
Deployments belong to their owner; another user's are 404.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from autoscaler import manifests
from autoscaler import models as m
from autoscaler.schemas import FieldError, ManifestError

from ..forms.resources import EDITORS


@dataclass(frozen=True)
class KindPage:
    kind: str
    slug: str  # URL part and name prefix: "catalog" -> dashboard:catalogs, dashboard:catalog-edit
    title: str
    shared: bool


PAGES = {
    "catalog": KindPage("NodeTypeCatalog", "catalog", "Node-type catalogs", True),
    "region": KindPage("Region", "region", "Regions", True),
    "deployment": KindPage("Deployment", "deployment", "Deployments", False),
}


def _can_write(request: HttpRequest, page: KindPage) -> bool:
    return not page.shared or request.user.is_staff


def _object(request: HttpRequest, page: KindPage, name: str):
    obj = manifests.find(page.kind, name, request.user)
    if obj is None:
        raise Http404(f"no {page.kind} named {name!r}")
    return obj


@login_required
def resource_list(request: HttpRequest, slug: str) -> HttpResponse:
    page = PAGES[slug]
    objects = list(manifests.queryset(page.kind, request.user))
    if page.kind == "NodeTypeCatalog":
        rows = [
            (
                o,
                [
                    f"{nt.name} ({nt.cores} cores, {nt.memory_mib} MiB, ×{nt.speedup:g}, {nt.price_per_hour:g}/h)"
                    for nt in o.node_types.all()
                ],
            )
            for o in objects
        ]
    elif page.kind == "Region":
        rows = [
            (
                o,
                [
                    f"catalog {o.catalog.name}",
                    f"max {o.max_nodes} nodes, {o.max_new_nodes_per_period} new per period",
                    f"delay {o.provisioning_delay_s:g} s",
                    f"provider {(o.provider or {}).get('kind', 'bookkeeping')}",
                    *_node_lines(o),
                ],
            )
            for o in objects
        ]
    else:
        rows = [
            (
                o,
                [
                    f"{o.operator.application.name} / {o.operator.name}",
                    f"region {o.region.name}",
                    "declared " + _replicas(o.replicas),
                    _running(o),
                ],
            )
            for o in objects
        ]
    return render(
        request,
        "dashboard/manage/resource_list.html",
        {"page": page, "rows": rows, "can_write": _can_write(request, page), "nav_active": page.slug + "s"},
    )


def _replicas(replicas: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(replicas.items()) if v) or "none"


def _running(dep: m.Deployment) -> str:
    """What the engine runs (the deployment's status), with since when and the decision that caused it."""
    if dep.status_replicas is None:
        return "running: not observed yet"
    why = f"decision {dep.status_decision_id}" if dep.status_decision_id else dep.status_source or "observed"
    since = dep.status_since.strftime("%Y-%m-%d %H:%M:%S") if dep.status_since else "?"
    return f"running {_replicas(dep.status_replicas)} (since {since} UTC, {why})"


@login_required
def resource_form(request: HttpRequest, slug: str, name: str | None = None) -> HttpResponse:
    page = PAGES[slug]
    obj = _object(request, page, name) if name is not None else None
    if request.method == "POST" and not _can_write(request, page):
        raise PermissionDenied("only staff users may write catalogs and regions")
    stored = manifests.export_resource(obj) if obj is not None else None
    editor_class = EDITORS[page.kind]
    status = 200
    if request.method == "POST":
        editor = editor_class(request.POST, manifest=stored, user=request.user)
        if editor.is_valid():
            doc = editor.build_document(name)
            router = editor.router()
            new_name = doc["metadata"]["name"]
            try:
                if name is None and manifests.find(page.kind, new_name, request.user) is not None:
                    raise ManifestError(
                        [FieldError("metadata.name", f"{page.kind} {new_name!r} already exists")]
                    )
                manifests.apply_documents([doc], request.user, expected_kind=page.kind, expected_name=name)
            except ManifestError as exc:
                router.add(exc.errors)
            else:
                messages.success(request, f"{page.kind} {new_name} saved")
                return redirect(f"dashboard:{slug}-edit", name=new_name)
        status = 400
    else:
        editor = editor_class(manifest=stored, user=request.user)
        if (
            stored is None
        ):  # links may prefill a new resource: /deployments/new/?application=wc&operator=split
            editor.form.initial.update({k: v for k, v in request.GET.items() if k in editor.form.fields})
    return render(
        request,
        f"dashboard/manage/{slug}_form.html",
        {
            "page": page,
            "editor": editor,
            "form": editor.form,
            "obj": obj,
            "can_write": _can_write(request, page),
            "nav_active": slug + "s",
            "history": obj.history.select_related("decision")[:20] if isinstance(obj, m.Deployment) else None,
            "running": _running(obj) if isinstance(obj, m.Deployment) else None,
            "node_counts": _node_counts(obj) if isinstance(obj, m.Region) else None,
            "has_errors": status == 400,
        },
        status=status,
    )


def _node_lines(region: m.Region) -> list[str]:
    """One line per node type: nodes ready (of which used), pending (booting), as the region page's table."""
    counts = _node_counts(region)
    if not counts:
        return ["nodes: no RM step yet"]
    return [
        f"{c['node_type']}: {c['ready']} ready ({c['used']} used), {c['pending']} pending"
        for c in counts
        if c["ready"] or c["pending"] or c["used"]
    ] or ["nodes: none acquired"]


def _node_counts(region: m.Region) -> list[dict]:
    """The region's nodes per type (ready = used + free; pending apart) as the API shows them."""
    from autoscaler.control.capacity import region_node_counts

    return [{"node_type": t, **c} for t, c in region_node_counts(region.pk).items()]


@login_required
def resource_delete(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    page = PAGES[slug]
    _object(request, page, name)
    if not _can_write(request, page):
        raise PermissionDenied("only staff users may delete catalogs and regions")
    if request.method == "POST":
        try:
            manifests.delete(page.kind, name, request.user)
        except ManifestError as exc:
            messages.error(request, "; ".join(e.msg for e in exc.errors))
            return redirect(f"dashboard:{slug}-edit", name=name)
        messages.success(request, f"{page.kind} {name} deleted")
        return redirect(f"dashboard:{slug}s")
    return render(
        request,
        "dashboard/manage/confirm_delete.html",
        {
            "kind": page.kind,
            "name": name,
            "consequences": [],
            "cancel_url": reverse(f"dashboard:{slug}-edit", args=[name]),
            "nav_active": slug + "s",
        },
    )
