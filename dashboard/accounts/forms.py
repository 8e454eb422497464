"""The login forms with failed-attempt throttling (``dashboard.accounts.throttle``): the HTML login page's
(``/accounts/login/``, the browsable API's ``/api-auth/login/``) and the admin's (``/admin/login/``) share one
count per (username, address), so that moving to another login page does not start guessing afresh.

A locked pair gets the form back with an error that says how long to wait; the password is not even checked
then (``ThrottledLoginView`` answers it with status 429).
"""

from __future__ import annotations

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm

from dashboard.accounts import throttle


class ThrottleMixin:
    """``clean()`` of an ``AuthenticationForm``, refusing attempts while the (username, address) pair is locked
    and counting failed ones."""

    def clean(self) -> dict:
        username = self.cleaned_data.get("username") or ""
        address = throttle.client_address(self.request)
        wait_s = throttle.locked_for_s(username, address)
        if username and wait_s:
            raise throttled_error(wait_s)
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            if username and throttle.record_failure(username, address):
                raise throttled_error(throttle.locked_for_s(username, address)) from None
            raise
        throttle.clear(username, address)
        return cleaned


def throttled_error(wait_s: int) -> forms.ValidationError:
    """The form error of a locked pair; ``wait_s`` seconds left, shown in whole minutes (rounded up)."""
    minutes = max(1, -(-wait_s // 60))
    return forms.ValidationError(
        "Too many failed login attempts for this username from your address. "
        f"Try again in {minutes} minute{'s' if minutes != 1 else ''}.",
        code="throttled",
    )


class ThrottledAuthenticationForm(ThrottleMixin, AuthenticationForm):
    """Django's login form with throttling."""


class ThrottledAdminAuthenticationForm(ThrottleMixin, AdminAuthenticationForm):
    """The admin's login form (staff only) with throttling."""
