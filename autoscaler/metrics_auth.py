"""Who may scrape ``GET /metrics`` (it names every application, its owner, cost and SLO violations).

A request passes with ``Authorization: Bearer <METRICS_TOKEN>`` (the Prometheus scraper; compared in constant
time), or as a staff user (a session, or ``Authorization: Token <key>`` of a staff user's API token). With no
``METRICS_TOKEN`` configured only staff users pass: the safe default. Anyone else gets 401 (no credentials, or
credentials that do not match) or 403 (a non-staff user), with a one-line plain-text reason and nothing else.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
from rest_framework.authtoken.models import Token

View = Callable[[HttpRequest], HttpResponse]


def _authorization(request: HttpRequest) -> tuple[str, str]:
    """(scheme lower-cased, credentials) of the Authorization header; ("", "") without one."""
    scheme, _, credentials = request.headers.get("Authorization", "").strip().partition(" ")
    return scheme.lower(), credentials.strip()


def _token_user(key: str):  # noqa: ANN202 - a User or None
    token = Token.objects.select_related("user").filter(key=key).first()
    return token.user if token and token.user.is_active else None


def _refuse(status: int, reason: str) -> HttpResponse:
    response = HttpResponse(reason + "\n", status=status, content_type="text/plain; charset=utf-8")
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def metrics_access(view: View) -> View:
    """Wrap the metrics view: scraper token or staff user, else 401/403 (see the module docstring)."""

    @wraps(view)
    @csrf_exempt
    @require_safe  # GET and HEAD; anything else is 405
    def wrapper(request: HttpRequest) -> HttpResponse:
        scheme, credentials = _authorization(request)
        if scheme == "bearer":
            expected = settings.METRICS_TOKEN
            if expected and hmac.compare_digest(credentials.encode(), expected.encode()):
                return view(request)
            return _refuse(401, "metrics: the bearer token does not match METRICS_TOKEN")
        if scheme == "token":
            user = _token_user(credentials)
            if user is None:
                return _refuse(401, "metrics: invalid API token")
        elif scheme:
            return _refuse(401, f"metrics: unsupported authorization scheme {scheme!r} (use Bearer)")
        else:
            user = request.user if request.user.is_authenticated else None
        if user is None:
            return _refuse(401, "metrics: authentication required (Bearer METRICS_TOKEN or a staff user)")
        if not user.is_staff:
            return _refuse(403, "metrics: staff users only")
        return view(request)

    return wrapper
