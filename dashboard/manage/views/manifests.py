"""Manifest upload (YAML/JSON, several documents, applied all or nothing) and download (export) from the page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from autoscaler import manifests
from autoscaler.schemas import FieldError, ManifestError

from ..forms.manifests import UploadForm

MAX_UPLOAD_BYTES = 2 * 1024 * 1024


def _read(form: UploadForm) -> str:
    upload = form.cleaned_data.get("file")
    if upload is not None:
        if upload.size > MAX_UPLOAD_BYTES:
            raise ManifestError([FieldError("file", f"larger than {MAX_UPLOAD_BYTES // 1024} KiB")])
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise ManifestError([FieldError("file", "not UTF-8 text")]) from None
    text = form.cleaned_data.get("text") or ""
    if not text.strip():
        raise ManifestError([FieldError("file", "choose a file or paste manifests")])
    return text


@login_required
def manifest_page(request: HttpRequest) -> HttpResponse:
    """GET: the upload form; POST: apply the uploaded or pasted documents (all or none) and list what happened."""
    errors: list[FieldError] = []
    results: list[str] = []
    status = 200
    if request.method == "POST":
        form = UploadForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                docs = manifests.parse_documents(_read(form))
                if not request.user.is_staff:
                    shared = [
                        FieldError(f"documents[{i}].kind", "only staff users may write catalogs and regions")
                        for i, doc in enumerate(docs)
                        if isinstance(doc, dict) and doc.get("kind") in ("NodeTypeCatalog", "Region")
                    ]
                    if shared:
                        raise ManifestError(shared)
                dry_run = form.cleaned_data["dry_run"]
                done = manifests.apply_documents(docs, request.user, dry_run=dry_run)
            except ManifestError as exc:
                errors = exc.errors
                status = 400
            else:
                results = [f"{r}{' (dry run: nothing stored)' if dry_run else ''}" for r in done]
                if not dry_run:
                    messages.success(
                        request, f"applied {len(done)} document(s): " + ", ".join(map(str, done))
                    )
                    return redirect("dashboard:manifests")
        else:
            status = 400
    else:
        form = UploadForm()
    return render(
        request,
        "dashboard/manage/manifests.html",
        {"form": form, "errors": errors, "results": results, "nav_active": "manifests"},
        status=status,
    )


@login_required
def manifest_export(request: HttpRequest) -> HttpResponse:
    """Download every catalog and region and the user's applications and deployments (``?kind=`` narrows)."""
    kind = request.GET.get("kind", "all")
    try:
        docs = manifests.export(kind, None, request.user)
    except ValueError as exc:
        messages.error(request, f"kind: {exc}")
        return redirect("dashboard:manifests")
    fmt = "json" if request.GET.get("format") == "json" else "yaml"
    body = manifests.dump_documents(docs, fmt) if docs else ""
    response = HttpResponse(body, content_type=f"application/{fmt}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="streamscaler-{kind.lower()}.{fmt}"'
    return response
