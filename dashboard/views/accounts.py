"""The login page (``/accounts/login/``) with failed-attempt throttling (``dashboard.login_throttle``).

A locked (username, address) pair gets the form back with an error that says how long to wait, and status 429;
the password is not even checked then.
"""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpResponse

from dashboard import login_throttle


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's login form, refusing attempts while the (username, address) pair is locked."""

    def clean(self) -> dict:
        username = self.cleaned_data.get("username") or ""
        address = login_throttle.client_address(self.request)
        wait_s = login_throttle.locked_for_s(username, address)
        if username and wait_s:
            raise self.throttled_error(wait_s)
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            if username and login_throttle.record_failure(username, address):
                raise self.throttled_error(login_throttle.locked_for_s(username, address)) from None
            raise
        login_throttle.clear(username, address)
        return cleaned

    @staticmethod
    def throttled_error(wait_s: int) -> forms.ValidationError:
        minutes = max(1, -(-wait_s // 60))
        return forms.ValidationError(
            "Too many failed login attempts for this username from your address. "
            f"Try again in {minutes} minute{'s' if minutes != 1 else ''}.",
            code="throttled",
        )


class ThrottledLoginView(LoginView):
    """``LoginView`` with ``ThrottledAuthenticationForm``; a refused attempt answers 429."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        response = super().form_invalid(form)
        if any(e.code == "throttled" for e in form.errors.as_data().get("__all__", [])):
            response.status_code = 429
        return response
