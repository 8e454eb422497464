"""Django admin for operators of the service. Every resource is edited as its YAML manifest, validated by the
same ``autoscaler.schemas`` layer as the CLI and the API; the stored rows are shown read-only."""

from __future__ import annotations

from typing import Any

import yaml
from django import forms
from django.contrib import admin

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


class ManifestAdmin(admin.ModelAdmin):
    kind = ""
    form = ManifestAdminForm

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        form.kind = self.kind
        form.request_user = request.user
        return form

    def get_inlines(self, request, obj):
        """Inlines only show stored rows, so there are none on the add page."""
        return self.inlines if obj is not None else []

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


class NodeTypeInline(admin.TabularInline):
    model = m.NodeType
    extra = 0
    can_delete = False
    fields = readonly_fields = ("name", "cores", "memory_mib", "speedup", "price_per_hour")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(m.NodeTypeCatalog)
class NodeTypeCatalogAdmin(ManifestAdmin):
    kind = "NodeTypeCatalog"
    list_display = ("name", "description", "updated_at")
    inlines = [NodeTypeInline]


@admin.register(m.Region)
class RegionAdmin(ManifestAdmin):
    kind = "Region"
    list_display = ("name", "catalog", "max_nodes", "max_new_nodes_per_period", "provisioning_delay_s")


class OperatorInline(admin.TabularInline):
    model = m.Operator
    extra = 0
    can_delete = False
    fields = readonly_fields = ("name", "kind", "max_parallelism", "selectivity", "engine_object")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(m.Application)
class ApplicationAdmin(ManifestAdmin):
    kind = "Application"
    list_display = ("name", "owner", "engine", "state", "dry_run", "r_max_ms", "updated_at")
    list_filter = ("engine", "state", "dry_run")
    inlines = [OperatorInline]


class HistoryInline(admin.TabularInline):
    model = m.DeploymentHistory
    extra = 0
    can_delete = False
    fields = readonly_fields = ("changed_at", "region", "replicas", "source")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(m.Deployment)
class DeploymentAdmin(ManifestAdmin):
    kind = "Deployment"
    list_display = ("name", "owner", "operator", "region", "replicas", "updated_at")
    inlines = [HistoryInline]
