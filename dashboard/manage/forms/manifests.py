"""The manifest upload form: a file or pasted text (YAML/JSON, several documents), or only a dry run. Reading it
and applying the documents is the view's (``dashboard.manage.views.manifests``)."""

from __future__ import annotations

from django import forms


class UploadForm(forms.Form):
    file = forms.FileField(label="Manifest file (.yaml, .yml or .json)", required=False)
    text = forms.CharField(
        label="…or paste manifests",
        required=False,
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false"}),
    )
    dry_run = forms.BooleanField(label="Only validate (store nothing)", required=False)
