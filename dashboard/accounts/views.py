"""The HTML login page ``/accounts/login/`` (also the browsable API's ``/api-auth/login/``) with failed-attempt
throttling (``dashboard.accounts.forms``): a refused attempt answers 429."""

from __future__ import annotations

from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpResponse

from dashboard.accounts.forms import ThrottledAuthenticationForm


class ThrottledLoginView(LoginView):
    """``LoginView`` with ``ThrottledAuthenticationForm``; a refused attempt answers 429."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        response = super().form_invalid(form)
        if any(e.code == "throttled" for e in form.errors.as_data().get("__all__", [])):
            response.status_code = 429
        return response
