"""Django admin for operators of the service. Every resource is edited as its YAML manifest, validated by the
same ``autoscaler.schemas`` layer as the CLI and the API; the stored rows are shown read-only."""

from __future__ import annotations

from typing import Any

import yaml
from django import forms
from django.contrib import admin
from django.utils.html import format_html, format_html_join

from . import manifests
from . import models as m
from .schemas import ManifestError


class ManifestAdminForm(forms.ModelForm):
    """A form with one field, the resource's manifest (YAML); saving applies it like ``manage.py apply``."""

    manifest = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 30, "cols": 100, "style": "font-family: monospace"})
    )
    kind = ""

    class Meta:
        fields: list[str] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk and not self.is_bound:
            self.initial["manifest"] = manifests.dump_documents([manifests.export_resource(self.instance)])
        self.valid_document = None

    def owner(self):
        return getattr(self.instance, "owner", None) if self.instance.pk else self.request_user

    def clean_manifest(self) -> str:
        text = self.cleaned_data["manifest"]
        try:
            docs = manifests.parse_documents(text)
            if len(docs) != 1:
                raise forms.ValidationError("give exactly one manifest document")
            name = self.instance.name if self.instance.pk else None
            # Validation and the write happen in save_model; here we only check, inside a rolled-back apply.
            manifests.apply_documents(
                docs, self.owner(), expected_kind=self.kind, expected_name=name, dry_run=True
            )
        except ManifestError as exc:
            raise forms.ValidationError([str(e) for e in exc.errors]) from None
        except yaml.YAMLError as exc:
            raise forms.ValidationError(str(exc)) from None
        self.documents = docs
        return text


def table(headers: list[str], rows: list[tuple]) -> str:
    """A small read-only HTML table (values escaped)."""
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    body = format_html_join(
        "", "<tr>{}</tr>", ((format_html_join("", "<td>{}</td>", ((v,) for v in row)),) for row in rows)
    )
    return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, body)


class ManifestAdmin(admin.ModelAdmin):
    kind = ""
    form = ManifestAdminForm

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        form.kind = self.kind
        form.request_user = request.user
        return form

    def get_readonly_fields(self, request, obj=None):
        """The stored rows are shown below the manifest of an existing resource."""
        return self.readonly_fields if obj is not None else ()

    def get_fields(self, request, obj=None):
        return ["manifest", *self.get_readonly_fields(request, obj)]

    def save_model(self, request, obj, form, change) -> None:
        name = obj.name if change else None
        (result,) = manifests.apply_documents(
            form.documents, form.owner(), expected_kind=self.kind, expected_name=name
        )
        obj.pk = result.obj.pk
        obj.refresh_from_db()

    def save_related(self, request, form, formsets, change) -> None:
        """Nothing to save: the manifest was applied whole in save_model."""

    def delete_model(self, request, obj) -> None:
        manifests.delete(self.kind, obj.name, getattr(obj, "owner", None))


@admin.register(m.NodeTypeCatalog)
class NodeTypeCatalogAdmin(ManifestAdmin):
    kind = "NodeTypeCatalog"
    list_display = ("name", "description", "updated_at")
    readonly_fields = ("stored_rows",)

    @admin.display(description="node types")
    def stored_rows(self, obj):
        return table(
            ["name", "cores", "memory (MiB)", "speedup", "price ($/h)"],
            [(n.name, n.cores, n.memory_mib, n.speedup, n.price_per_hour) for n in obj.node_types.all()],
        )


@admin.register(m.Region)
class RegionAdmin(ManifestAdmin):
    kind = "Region"
    list_display = ("name", "catalog", "max_nodes", "max_new_nodes_per_period", "provisioning_delay_s")


@admin.register(m.Application)
class ApplicationAdmin(ManifestAdmin):
    kind = "Application"
    list_display = ("name", "owner", "engine", "state", "dry_run", "r_max_ms", "updated_at")
    list_filter = ("engine", "state", "dry_run")
    readonly_fields = ("stored_rows",)

    @admin.display(description="operators")
    def stored_rows(self, obj):
        return table(
            ["name", "kind", "K_max", "selectivity", "deployment"],
            [
                (
                    o.name,
                    o.kind,
                    o.max_parallelism,
                    o.selectivity,
                    getattr(getattr(o, "deployment", None), "name", ""),
                )
                for o in obj.operators.all()
            ],
        )


@admin.register(m.Deployment)
class DeploymentAdmin(ManifestAdmin):
    kind = "Deployment"
    list_display = ("name", "owner", "operator", "region", "replicas", "updated_at")
    readonly_fields = ("stored_rows",)

    @admin.display(description="history (newest first)")
    def stored_rows(self, obj):
        return table(
            ["changed at", "region", "replicas", "source"],
            [(h.changed_at, h.region, h.replicas, h.source) for h in obj.history.all()[:50]],
        )
