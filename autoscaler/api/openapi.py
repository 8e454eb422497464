"""OpenAPI pieces shared by the API's views: the error schema and the hook that documents error statuses.

Every operation of the schema documents, with the ``Errors`` schema, the error statuses the API can answer:
400 (bad body or query parameter), 401 (not authenticated), 403 (not allowed, CSRF), 404 (no such resource or
URL), 405 (method not allowed); operations with a body add 409 (POST: already exists) and 415 (not JSON);
the token endpoint adds 429 (throttled). Documented statuses already declared by a view are kept.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

ERRORS_COMPONENT = "Errors"
ERRORS_SCHEMA = {
    "type": "object",
    "description": "Every API error: one entry per rejected field, parameter or request-level reason.",
    "properties": {
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "loc": {
                        "type": "string",
                        "description": "dotted path of the field, parameter name, or ''",
                    },
                    "msg": {"type": "string", "description": "why it was rejected"},
                },
                "required": ["loc", "msg"],
            },
        }
    },
    "required": ["errors"],
}

#: for ``@extend_schema(responses={400: ERRORS})`` in views that want to name an error status explicitly
ERRORS = inline_serializer(
    "Errors",
    {
        "errors": serializers.ListField(
            child=inline_serializer("Error", {"loc": serializers.CharField(), "msg": serializers.CharField()})
        )
    },
)

_ALWAYS = {
    "400": "invalid body or query parameter",
    "401": "not authenticated",
    "403": "not allowed (e.g. a shared resource written by a non-staff user, or a missing CSRF token)",
    "404": "no such resource, or no such URL",
    "405": "method not allowed",
}
_WITH_BODY = {"415": "the body is not JSON (Content-Type must be application/json)"}
_CREATE = {"409": "a resource of that name already exists"}
_THROTTLED = {"429": "too many requests: retry later"}
_THROTTLED_PATHS = ("/api/v1/token/",)


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ERRORS_COMPONENT}"}}},
    }


def document_error_responses(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: add the error statuses above to every operation."""
    result.setdefault("components", {}).setdefault("schemas", {})[ERRORS_COMPONENT] = ERRORS_SCHEMA
    for path, item in result.get("paths", {}).items():
        for method, operation in item.items():
            if method not in ("get", "put", "post", "patch", "delete"):
                continue
            statuses = dict(_ALWAYS)
            if method in ("put", "post", "patch"):
                statuses.update(_WITH_BODY)
            if method in ("put", "post"):
                statuses.update(_CREATE)
            if path in _THROTTLED_PATHS:
                statuses.update(_THROTTLED)
                statuses.pop("401")
            responses = operation.setdefault("responses", {})
            for code, description in statuses.items():
                responses.setdefault(code, _error_response(description))
    return result
