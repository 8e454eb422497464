"""Register, edit, download and delete applications through the form of ``dashboard.manage.forms.application``.

Saving builds the Application manifest and applies it with ``autoscaler.manifests.apply_documents`` (the same
validation and all-or-nothing write as the CLI and the API); its errors are shown next to the fields.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from autoscaler import manifests
from autoscaler import models as m
from autoscaler.schemas import FieldError, ManifestError

from ..forms.application import ApplicationEditor
from .fleet import optional_url


def _save(request: HttpRequest, editor: ApplicationEditor, name: str | None) -> m.Application | None:
    """Apply the editor's manifest; on errors attach them to the fields and return None (nothing stored)."""
    if not editor.is_valid():
        return None
    doc = editor.build_document(name)
    router = editor.router()
    new_name = doc["metadata"]["name"]
    if name is None and m.Application.objects.filter(owner=request.user, name=new_name).exists():
        router.add([FieldError("metadata.name", f"you already have an application named {new_name!r}")])
        return None
    try:
        (result,) = manifests.apply_documents(
            [doc], request.user, expected_kind="Application", expected_name=name
        )
    except ManifestError as exc:
        router.add(exc.errors)
        return None
    for warning in result.warnings:  # e.g. the Flink binding could not be checked (cluster unreachable)
        messages.warning(request, warning)
    return result.obj


def _page(request: HttpRequest, editor: ApplicationEditor, app: m.Application | None, status: int = 200):
    return render(
        request,
        "dashboard/manage/app_form.html",
        {
            "editor": editor,
            "form": editor.form,
            "app": app,
            "nav_active": "register" if app is None else "fleet",
            "slo_text": editor.slo_text(),
            "has_errors": status == 400,
            "dashboard_url": optional_url("dashboard:app-dashboard", app.name) if app else None,
            "operators": _operators_with_deployments(app) if app else [],
        },
        status=status,
    )


def _operators_with_deployments(app: m.Application) -> list[tuple[m.Operator, m.Deployment | None]]:
    deployments = {
        d.operator_id: d
        for d in m.Deployment.objects.filter(operator__application=app).select_related("region")
    }
    return [(op, deployments.get(op.id)) for op in app.operators.all()]


@login_required
def app_create(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        editor = ApplicationEditor(request.POST)
        app = _save(request, editor, None)
        if app is not None:
            messages.success(request, f"application {app.name} registered")
            return redirect("dashboard:app-edit", name=app.name)
        return _page(request, editor, None, status=400)
    return _page(request, ApplicationEditor(), None)


@login_required
def app_edit(request: HttpRequest, name: str) -> HttpResponse:
    app = get_object_or_404(m.Application, owner=request.user, name=name)
    stored = manifests.export_resource(app)
    if request.method == "POST":
        editor = ApplicationEditor(request.POST, manifest=stored)
        saved = _save(request, editor, name)
        if saved is not None:
            messages.success(request, f"application {name} saved")
            return redirect("dashboard:app-edit", name=name)
        return _page(request, editor, app, status=400)
    return _page(request, ApplicationEditor(manifest=stored), app)


@login_required
def app_manifest(request: HttpRequest, name: str) -> HttpResponse:
    """Download the application's manifest (YAML) followed by its deployments."""
    app = get_object_or_404(m.Application, owner=request.user, name=name)
    docs = [manifests.export_resource(app)]
    docs += [
        manifests.export_resource(d)
        for d in m.Deployment.objects.filter(operator__application=app).select_related(
            "operator__application", "region"
        )
    ]
    response = HttpResponse(manifests.dump_documents(docs), content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.yaml"'
    return response


@login_required
def app_delete(request: HttpRequest, name: str) -> HttpResponse:
    """GET: ask for confirmation (what goes with it); POST: delete the application, operators and deployments."""
    app = get_object_or_404(m.Application, owner=request.user, name=name)
    if request.method == "POST":
        try:
            manifests.delete("Application", name, request.user)
        except ManifestError as exc:
            messages.error(request, "; ".join(str(e) for e in exc.errors))
            return redirect("dashboard:app-edit", name=name)
        messages.success(request, f"application {name} deleted")
        return redirect("dashboard:fleet")
    deployments = m.Deployment.objects.filter(operator__application=app).order_by("name")
    return render(
        request,
        "dashboard/manage/confirm_delete.html",
        {
            "kind": "application",
            "name": name,
            "consequences": [f"{app.operators.count()} operators and their streams"]
            + [f"deployment {d.name}" for d in deployments],
            "cancel_url": reverse("dashboard:app-edit", args=[name]),
            "nav_active": "fleet",
        },
    )
