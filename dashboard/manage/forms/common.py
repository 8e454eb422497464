"""Shared pieces of the web forms: loose text fields, YAML mapping fields, and the mapping of validation errors.

The forms do no validation of their own beyond parsing text: they build a manifest document and hand it to
``autoscaler.manifests.apply_documents`` (the one validation layer of the CLI, API and admin). Its errors come
back as ``{loc, msg}`` pairs; :class:`ErrorRouter` puts each one next to the form field ``loc`` names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from django import forms

from autoscaler.schemas import FieldError


def text(label: str, help_text: str = "", **attrs: Any) -> forms.CharField:
    """An optional text input whose value goes to the validation layer unchanged (no Django-side checks)."""
    return forms.CharField(
        label=label, required=False, help_text=help_text, widget=forms.TextInput(attrs=attrs or None)
    )


def number(label: str, help_text: str = "", step: str = "any", **attrs: Any) -> forms.CharField:
    """An optional numeric input (``inputmode=decimal``); the validation layer parses and checks the number."""
    return text(label, help_text, inputmode="decimal", step=step, **attrs)


def select(label: str, choices: Sequence[tuple[str, str]], help_text: str = "") -> forms.CharField:
    """A drop-down whose value is not checked by Django: the validation layer names an unknown choice."""
    return forms.CharField(
        label=label, required=False, help_text=help_text, widget=forms.Select(choices=list(choices))
    )


class LooseMultipleChoiceField(forms.MultipleChoiceField):
    """Checkboxes whose values are checked by the validation layer, not against the offered choices."""

    def valid_value(self, value: str) -> bool:
        return True


class YamlMappingField(forms.CharField):
    """A textarea holding a YAML (or JSON) mapping; empty means ``{}``. Only the YAML syntax is checked here."""

    def __init__(self, *, label: str, help_text: str = "", rows: int = 3) -> None:
        super().__init__(
            label=label, required=False, help_text=help_text, widget=forms.Textarea(attrs={"rows": rows})
        )

    def to_python(self, value: Any) -> Any:
        value = super().to_python(value)
        if not value.strip():
            return {}
        try:
            return yaml.safe_load(value)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise forms.ValidationError(f"not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return yaml.safe_dump(value, sort_keys=False, default_flow_style=False).strip() if value else ""
        return value


def put(target: dict[str, Any], key: str, value: str) -> None:
    """Set ``target[key]`` to a form value unless it is blank (a blank optional field keeps its default)."""
    if value is not None and str(value).strip() != "":
        target[key] = value.strip() if isinstance(value, str) else value


def filled_rows(formset: forms.BaseFormSet) -> tuple[list[dict[str, Any]], list[int]]:
    """Cleaned data of the rows with any value, and each kept row's index in the formset."""
    rows, index = [], []
    for i, form in enumerate(formset.forms):
        data = getattr(form, "cleaned_data", None) or {}
        if any(str(v).strip() for v in data.values() if v not in (None, False)):
            rows.append(data)
            index.append(i)
    return rows, index


_ROW = re.compile(r"^(?P<list>[\w.]+)\[(?P<row>\d+)\](?:\[(?P<pos>\d+)\])?(?:\.(?P<rest>.+))?$")


@dataclass
class RowList:
    """A repeated part of a document (``spec.operators``) shown as a formset: the manifest-key -> form-field
    map of its rows, the formset, and the formset index of every document row."""

    formset: forms.BaseFormSet
    fields: dict[str, str]
    rows: list[int] = field(default_factory=list)
    positions: tuple[str, ...] = ()  # field names of tuple items (streams: ("source", "target"))


@dataclass
class ErrorRouter:
    """Puts validation errors next to form fields.

    ``fields`` maps a document path (``spec.slo.rMaxMs``) to a field of the main form; the longest matching
    path wins (``spec.connector.master`` goes to the ``spec.connector`` field). ``lists`` maps the path of a
    list (``spec.operators``) to its formset. Errors of no known field are shown above the form with their path.
    """

    form: forms.Form
    fields: dict[str, str]
    lists: dict[str, RowList] = field(default_factory=dict)

    def add(self, errors: Iterable[FieldError]) -> None:
        for error in errors:
            self._add_one(error)

    def _add_one(self, error: FieldError) -> None:
        loc = error.loc
        match = _ROW.match(loc)
        if match and match["list"] in self.lists:
            self._add_row(self.lists[match["list"]], match, error)
            return
        if loc in self.lists:
            self.lists[loc].formset._non_form_errors.append(error.msg)  # noqa: SLF001 (Django's own list)
            return
        best = max((p for p in self.fields if _under(loc, p)), key=len, default=None)
        if best is not None:
            name = self.fields[best]
            detail = loc[len(best) :].lstrip(".")
            if detail.startswith("["):  # an item of a list field: the message names it
                detail = ""
            self._field_error(self.form, name, f"{detail}: {error.msg}" if detail else error.msg)
            return
        self.form.add_error(None, str(error))

    def _add_row(self, rows: RowList, match: re.Match, error: FieldError) -> None:
        i = int(match["row"])
        if i >= len(rows.rows):
            self.form.add_error(None, str(error))
            return
        form = rows.formset.forms[rows.rows[i]]
        name = None
        if match["pos"] is not None and int(match["pos"]) < len(rows.positions):
            name = rows.positions[int(match["pos"])]
        elif match["rest"]:
            key = match["rest"].split(".")[0].split("[")[0]
            name = rows.fields.get(key)
            if name is None:
                self._field_error(form, None, f"{match['rest']}: {error.msg}")
                return
            rest = match["rest"][len(key) :].lstrip(".")
            if rest:
                self._field_error(form, name, f"{rest}: {error.msg}")
                return
        self._field_error(form, name, error.msg)

    @staticmethod
    def _field_error(form: forms.Form, name: str | None, msg: str) -> None:
        if name is not None and name not in form.fields:
            name = None
        form.add_error(name, msg)


def _under(loc: str, prefix: str) -> bool:
    return loc == prefix or loc.startswith(prefix + ".") or loc.startswith(prefix + "[")
