"""Validated query parameters of API views: unknown, repeated, malformed or out-of-range values are a 400
naming the parameter (``{"errors": [{"loc": "limit", "msg": "..."}]}``), never a 500."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request

from autoscaler.schemas import FieldError, ManifestError

#: accepted on every view: DRF's format override (``?format=json``, ``?format=api``)
ALWAYS_ALLOWED = frozenset({"format"})
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"


@dataclass(frozen=True)
class QueryParam:
    """One query parameter. ``kind``: "int" (bounded by ``minimum``/``maximum``) or "name" (a resource name);
    ``many``: may be repeated (``?operator=a&operator=b``), the value is then a list."""

    name: str
    kind: str = "int"
    default: Any = None
    minimum: int = 0
    maximum: int = 2_147_483_647
    many: bool = False
    description: str = ""

    def parse(self, raw: list[str]) -> tuple[Any, list[FieldError]]:
        if not raw:
            return ([] if self.many else self.default), []
        if len(raw) > 1 and not self.many:
            return None, [FieldError(self.name, "given more than once")]
        values, errors = [], []
        for text in raw:
            value, error = self._parse_one(text)
            values.append(value)
            if error:
                errors.append(FieldError(self.name, error))
        return (values if self.many else values[0]), errors

    def _parse_one(self, text: str) -> tuple[Any, str | None]:
        if self.kind == "name":
            if not re.match(NAME_PATTERN, text):
                return None, (
                    f"{text[:80]!r} is not a name (letters, digits, '.', '_', '-'; at most 63 characters)"
                )
            return text, None
        if not re.fullmatch(r"[+-]?\d{1,19}", text.strip()):
            return None, f"must be an integer, got {text[:80]!r}"
        value = int(text)
        if not self.minimum <= value <= self.maximum:
            return None, f"must be between {self.minimum} and {self.maximum}, got {value}"
        return value, None

    def openapi(self) -> OpenApiParameter:
        if self.kind == "int":
            schema_type: Any = {"type": "integer", "minimum": self.minimum, "maximum": self.maximum}
        else:
            schema_type = {"type": "string", "pattern": NAME_PATTERN}
        if self.many:
            schema_type = {"type": "array", "items": schema_type}
        return OpenApiParameter(
            self.name,
            type=schema_type,
            location=OpenApiParameter.QUERY,
            required=False,
            many=None,
            explode=True if self.many else None,
            description=self.description,
            default=self.default if not self.many else None,
        )


def parse_query(query: Mapping[str, Any], params: Sequence[QueryParam]) -> dict[str, Any]:
    """The values of ``params`` in ``query`` (a QueryDict); ManifestError listing every bad parameter."""
    known = {p.name: p for p in params}
    errors = [
        FieldError(key, f"unknown query parameter: accepted here: {', '.join(sorted(known)) or 'none'}")
        for key in query
        if key not in known and key not in ALWAYS_ALLOWED
    ]
    values = {}
    for param in params:
        value, param_errors = param.parse(query.getlist(param.name))
        values[param.name] = value
        errors += param_errors
    if errors:
        raise ManifestError(errors)
    return values


class ValidatedQueryMixin:
    """For APIViews: ``query_spec`` maps a lower-case HTTP method to its QueryParams; after authentication and
    permission checks every request's query string is validated against it and the values are in ``self.query``.
    """

    query_spec: Mapping[str, Sequence[QueryParam]] = {}

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        self.query = parse_query(request.query_params, self.query_spec.get(request.method.lower(), ()))
