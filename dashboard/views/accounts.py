"""The HTML login pages with failed-attempt throttling (``dashboard.login_throttle``): ``/accounts/login/``, the
browsable API's ``/api-auth/login/`` and the admin's ``/admin/login/`` share one count per (username, address),
so that moving to another login page does not start guessing afresh.

A locked pair gets the form back with an error that says how long to wait (status 429 on the first two pages);
the password is not even checked then.
"""

from __future__ import annotations

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpResponse

from dashboard import login_throttle


class ThrottleMixin:
    """``clean()`` of an ``AuthenticationForm``, refusing attempts while the (username, address) pair is locked
    and counting failed ones."""

    def clean(self) -> dict:
        username = self.cleaned_data.get("username") or ""
        address = login_throttle.client_address(self.request)
        wait_s = login_throttle.locked_for_s(username, address)
        if username and wait_s:
            raise throttled_error(wait_s)
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            if username and login_throttle.record_failure(username, address):
                raise throttled_error(login_throttle.locked_for_s(username, address)) from None
            raise
        login_throttle.clear(username, address)
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


class ThrottledLoginView(LoginView):
    """``LoginView`` with ``ThrottledAuthenticationForm``; a refused attempt answers 429."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        response = super().form_invalid(form)
        if any(e.code == "throttled" for e in form.errors.as_data().get("__all__", [])):
            response.status_code = 429
        return response
