"""One error body for every API failure: ``{"errors": [{"loc": "spec.streams[2]", "msg": "..."}]}``."""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from autoscaler.schemas import FieldError, ManifestError


def flatten(detail: Any, loc: str = "") -> list[FieldError]:
    """DRF error details (nested dicts/lists of strings) as FieldErrors."""
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            sub = "" if key in ("detail", "non_field_errors") else str(key)
            out += flatten(value, f"{loc}.{sub}" if loc and sub else loc or sub)
        return out
    if isinstance(detail, list):
        return [e for item in detail for e in flatten(item, loc)]
    return [FieldError(loc, str(detail))]


def errors_response(errors: list[FieldError], status_code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    return Response({"errors": [e.as_dict() for e in errors]}, status=status_code)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF exception handler: ManifestError -> 400; every other API error keeps its status, same body shape."""
    if isinstance(exc, ManifestError):
        return errors_response(exc.errors)
    response = drf_exception_handler(exc, context)
    if response is not None:
        response.data = {"errors": [e.as_dict() for e in flatten(response.data)]}
    return response
