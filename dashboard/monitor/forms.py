"""Forms of the monitoring pages: the decision explorer's filters. (The what-if page's fields are checked by
``dashboard.monitor.whatif.validate``, next to the simulation they parametrise.)"""

from __future__ import annotations

from django import forms

from autoscaler.control.models import Decision


class DecisionFilter(forms.Form):
    """Filters of the decision table; times are UTC and bound the period a decision is about."""

    application = forms.ChoiceField(required=False, label="Application")
    operator = forms.CharField(required=False, max_length=63, label="Operator")
    granted = forms.ChoiceField(
        required=False,
        label="Granted or denied",
        choices=[("", "any"), ("granted", "granted"), ("denied", "denied"), ("proposed", "any proposal")],
    )
    outcome = forms.ChoiceField(required=False, label="Outcome")
    since = forms.DateTimeField(
        required=False,
        label="From (UTC)",
        help_text="time of the period a decision is about, as on the charts",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    until = forms.DateTimeField(
        required=False, label="Until (UTC)", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )

    def __init__(self, *args, apps: list[str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["application"].choices = [("", "all")] + [(a, a) for a in apps]
        self.fields["outcome"].choices = [("", "any")] + list(Decision.Outcome.choices)

    def clean(self):
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and until <= since:
            self.add_error("until", "must be after From")
        return data
