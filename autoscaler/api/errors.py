"""One error body for every API failure: ``{"errors": [{"loc": "spec.streams[2]", "msg": "..."}]}``.

``loc`` names the field (a dotted path into the body), the query parameter, ``Content-Type`` or the URL ``path``;
it is ``""`` when the error concerns the request as a whole (authentication, permission, throttling).
The DRF exception handler below is global (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``), so every DRF view of the
project answers in this format; :func:`api_not_found` does the same for URLs under ``/api/`` that match no route.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from autoscaler.schemas import FieldError, ManifestError

API_PREFIX = "/api/"


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


def error_body(errors: list[FieldError]) -> dict[str, list[dict[str, str]]]:
    return {"errors": [e.as_dict() for e in errors]}


def errors_response(errors: list[FieldError], status_code: int = status.HTTP_400_BAD_REQUEST) -> Response:
    return Response(error_body(errors), status=status_code)


#: where a request-level DRF error points (the rest point at the whole request, ``""``)
_LOC_OF = {
    exceptions.UnsupportedMediaType: "Content-Type",
    exceptions.ParseError: "body",
    exceptions.NotAcceptable: "Accept",
}


def exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF exception handler: ManifestError -> 400; every other API error keeps its status, same body shape."""
    if isinstance(exc, ManifestError):
        return errors_response(exc.errors)
    response = drf_exception_handler(exc, context)
    if response is not None:
        loc = next((loc for cls, loc in _LOC_OF.items() if isinstance(exc, cls)), "")
        response.data = error_body(flatten(response.data, loc))
    return response


def api_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler404``: JSON in the API's error format under ``/api/``, Django's HTML page elsewhere."""
    if request.path.startswith(API_PREFIX):
        return JsonResponse(
            error_body([FieldError("path", f"no API endpoint at {request.path!r}")]),
            status=status.HTTP_404_NOT_FOUND,
        )
    return defaults.page_not_found(request, exception)
