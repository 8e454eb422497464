"""Helpers of the monitoring views: owner-scoped lookups and JSON errors in the API's shape."""

from __future__ import annotations

from functools import wraps

from django.http import JsonResponse
from django.shortcuts import get_object_or_404

from autoscaler.models import Application


def owned_application(request, name: str) -> Application:
    """The signed-in user's application ``name``; 404 for an unknown or someone else's application."""
    return get_object_or_404(Application, owner=request.user, name=name)


def json_error(status: int, loc: str, msg: str) -> JsonResponse:
    return JsonResponse({"errors": [{"loc": loc, "msg": msg}]}, status=status)


def json_login_required(view):
    """Like ``login_required`` for JSON endpoints: 401 with an error body instead of a redirect."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return json_error(401, "auth", "authentication required")
        return view(request, *args, **kwargs)

    return wrapper


def parse_float(request, name: str) -> float | None:
    """Optional float query parameter ``name``; ValueError naming the field when it is not a finite number."""
    raw = request.GET.get(name)
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}: not a number: {raw!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{name}: must be finite")
    return value
