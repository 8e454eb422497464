"""Forms of the other resources: node-type catalogs, regions and deployments. Like the application form, each
builds a manifest document and leaves every check to the validation layer (``ErrorRouter`` maps its errors)."""

from __future__ import annotations

from typing import Any

from django import forms

from autoscaler import models as m
from autoscaler.schemas.region import PROVIDER_KINDS

from .common import ErrorRouter, RowList, YamlMappingField, filled_rows, number, put, select, text

NAME_HELP = "letters, digits, '.', '_' or '-'"


def _doc(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "autoscaler/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


class NameForm(forms.Form):
    name = text("Name", NAME_HELP, autocomplete="off")

    def __init__(self, *args: Any, editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if editing:
            self.fields["name"].disabled = True
            self.fields["name"].help_text = "the name identifies the resource and cannot change"


class Editor:
    """One resource page: a main form (``form``), optional formsets, the manifest they make and error routing."""

    kind = ""
    fields: dict[str, str] = {}

    def __init__(self, data: Any = None, *, manifest: dict[str, Any] | None = None, user=None) -> None:
        self.editing = manifest is not None
        self.user = user
        self.formsets: list[forms.BaseFormSet] = []
        self.setup(data, manifest)

    def setup(self, data: Any, manifest: dict[str, Any] | None) -> None:
        raise NotImplementedError

    def is_valid(self) -> bool:
        return all(x.is_valid() for x in [self.form, *self.formsets])

    def name(self) -> str:
        return (self.form.cleaned_data.get("name") or "").strip()

    def spec(self) -> dict[str, Any]:
        raise NotImplementedError

    def build_document(self, name: str | None = None) -> dict[str, Any]:
        return _doc(self.kind, name if name is not None else self.name(), self.spec())

    def router(self) -> ErrorRouter:
        return ErrorRouter(self.form, {"metadata.name": "name", "metadata": "name", **self.fields})


# ---- node-type catalogs -----------------------------------------------------------------------------------------
class CatalogForm(NameForm):
    description = forms.CharField(
        label="Description", required=False, widget=forms.Textarea(attrs={"rows": 2})
    )


class NodeTypeRow(forms.Form):
    name = text("Node type", autocomplete="off")
    cores = number("vCPU cores", step="1")
    memory_mib = number("Memory (MiB)", step="1")
    speedup = number("Speedup", "1.0 = reference node")
    price_per_hour = number("Price per hour", "currency/h")


NodeTypeFormSet = forms.formset_factory(NodeTypeRow, extra=0)
NODE_TYPE_FIELDS = {
    "name": "name",
    "cores": "cores",
    "memoryMiB": "memory_mib",
    "speedup": "speedup",
    "pricePerHour": "price_per_hour",
}


class CatalogEditor(Editor):
    kind = "NodeTypeCatalog"
    fields = {"spec.description": "description"}

    def setup(self, data: Any, manifest: dict[str, Any] | None) -> None:
        initial, rows = {}, [{}]
        if manifest:
            spec = manifest["spec"]
            initial = {"name": manifest["metadata"]["name"], "description": spec.get("description", "")}
            rows = [
                {field: _fmt(nt.get(key)) for key, field in NODE_TYPE_FIELDS.items()}
                for nt in spec["nodeTypes"]
            ]
        self.form = CatalogForm(data, initial=initial, editing=self.editing)
        self.node_types = NodeTypeFormSet(
            data, initial=None if data is not None else rows, prefix="nodetypes"
        )
        self.formsets = [self.node_types]

    def spec(self) -> dict[str, Any]:
        rows, self.rows = filled_rows(self.node_types)
        node_types = []
        for row in rows:
            nt: dict[str, Any] = {}
            for key, field in NODE_TYPE_FIELDS.items():
                put(nt, key, row.get(field))
            node_types.append(nt)
        return {"description": self.form.cleaned_data.get("description", ""), "nodeTypes": node_types}

    def router(self) -> ErrorRouter:
        router = super().router()
        router.lists["spec.nodeTypes"] = RowList(self.node_types, NODE_TYPE_FIELDS, self.rows)
        return router


class LinesField(forms.CharField):
    """A textarea of one value per line; blank lines are dropped. The values are checked by the validation
    layer (an error quotes the value it is about)."""

    def __init__(self, *, label: str, help_text: str = "", rows: int = 3) -> None:
        super().__init__(
            label=label, required=False, help_text=help_text, widget=forms.Textarea(attrs={"rows": rows})
        )

    def to_python(self, value: Any) -> list[str]:
        return [line.strip() for line in (super().to_python(value) or "").splitlines() if line.strip()]

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list) else value


# ---- regions ------------------------------------------------------------------------------------------------------
class RegionForm(NameForm):
    catalog = select("Node-type catalog", [])
    max_nodes = number("Maximum nodes", "nodes the region holds in total", step="1")
    max_new_nodes_per_period = number(
        "New nodes per period", "quota of nodes started per control period", step="1"
    )
    provisioning_delay_s = number(
        "Provisioning delay (s)", "seconds until a new node is usable", placeholder="0"
    )
    provider_kind = select("Node provider", [(k, k) for k in PROVIDER_KINDS])
    provider_settings = YamlMappingField(label="Provider settings (YAML)", help_text="free-form per provider")
    endpoints = LinesField(
        label="Engine endpoints",
        help_text="one URL per line that applications in this region may use: a Flink REST URL "
        "(http://host:8081), a Spark master (spark://host:7077), Spark driver UIs (http://host:4040-4099)",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = m.NodeTypeCatalog.objects.values_list("name", flat=True)
        self.fields["catalog"].widget.choices = [("", "choose a catalog")] + [(c, c) for c in names]


class RegionEditor(Editor):
    kind = "Region"
    fields = {
        "spec.catalog": "catalog",
        "spec.maxNodes": "max_nodes",
        "spec.maxNewNodesPerPeriod": "max_new_nodes_per_period",
        "spec.provisioningDelayS": "provisioning_delay_s",
        "spec.provider.kind": "provider_kind",
        "spec.provider": "provider_settings",
        "spec.endpoints": "endpoints",
    }

    def setup(self, data: Any, manifest: dict[str, Any] | None) -> None:
        initial: dict[str, Any] = {}
        if manifest:
            spec = manifest["spec"]
            provider = spec.get("provider") or {}
            initial = {
                "name": manifest["metadata"]["name"],
                "catalog": spec["catalog"],
                "max_nodes": _fmt(spec.get("maxNodes")),
                "max_new_nodes_per_period": _fmt(spec.get("maxNewNodesPerPeriod")),
                "provisioning_delay_s": _fmt(spec.get("provisioningDelayS")),
                "provider_kind": provider.get("kind", "bookkeeping"),
                "provider_settings": provider.get("settings") or {},
                "endpoints": list(spec.get("endpoints") or []),
            }
        self.form = RegionForm(data, initial=initial, editing=self.editing)

    def spec(self) -> dict[str, Any]:
        d = self.form.cleaned_data
        spec: dict[str, Any] = {}
        for key, field in (
            ("catalog", "catalog"),
            ("maxNodes", "max_nodes"),
            ("maxNewNodesPerPeriod", "max_new_nodes_per_period"),
            ("provisioningDelayS", "provisioning_delay_s"),
        ):
            put(spec, key, d.get(field))
        spec["provider"] = {
            "kind": d.get("provider_kind") or "bookkeeping",
            "settings": d["provider_settings"],
        }
        if d.get("endpoints"):
            spec["endpoints"] = d["endpoints"]
        return spec


# ---- deployments ----------------------------------------------------------------------------------------------
class DeploymentForm(NameForm):
    application = select("Application", [])
    operator = text("Operator", "an operator of the application", list="operator-names", autocomplete="off")
    region = select("Region", [])
    replicas = YamlMappingField(
        label="Replicas per node type (YAML)", help_text="one 'node type: count' per line, e.g. 'vm.small: 2'"
    )

    def __init__(self, *args: Any, user=None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        apps = m.Application.objects.filter(owner=user).values_list("name", flat=True)
        self.fields["application"].widget.choices = [("", "choose an application")] + [(a, a) for a in apps]
        regions = m.Region.objects.values_list("name", flat=True)
        self.fields["region"].widget.choices = [("", "choose a region")] + [(r, r) for r in regions]


class DeploymentEditor(Editor):
    kind = "Deployment"
    fields = {
        "spec.application": "application",
        "spec.operator": "operator",
        "spec.region": "region",
        "spec.replicas": "replicas",
    }

    def setup(self, data: Any, manifest: dict[str, Any] | None) -> None:
        initial: dict[str, Any] = {}
        if manifest:
            spec = manifest["spec"]
            initial = {
                "name": manifest["metadata"]["name"],
                **{k: spec[k] for k in ("application", "operator", "region", "replicas")},
            }
        self.form = DeploymentForm(data, initial=initial, editing=self.editing, user=self.user)

    def spec(self) -> dict[str, Any]:
        d = self.form.cleaned_data
        spec: dict[str, Any] = {}
        for key in ("application", "operator", "region"):
            put(spec, key, d.get(key))
        spec["replicas"] = d["replicas"]
        return spec

    def operator_names(self) -> list[str]:
        return list(
            m.Operator.objects.filter(application__owner=self.user).values_list("name", flat=True).distinct()
        )


EDITORS: dict[str, type[Editor]] = {
    "NodeTypeCatalog": CatalogEditor,
    "Region": RegionEditor,
    "Deployment": DeploymentEditor,
}
