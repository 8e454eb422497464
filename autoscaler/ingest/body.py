"""Reading an ingest request's JSON body with hard limits, before any schema validation.

Limits (each answered with ``{"errors": [{"loc", "msg"}]}`` and nothing stored):

- media type ``application/json`` only (415);
- at most ``INGEST_MAX_BODY_BYTES`` bytes (setting, default 1 MiB; 413), checked on ``Content-Length`` before
  anything is read, and on the bytes read;
- UTF-8, strict JSON: no ``NaN``/``Infinity`` literals, no number that overflows to infinity (``1e999``) (400);
- nesting at most ``MAX_DEPTH`` (32) objects/arrays deep (400, ``loc`` is where it got too deep);
- no string (value or key) holding a NUL character or a lone surrogate: PostgreSQL cannot store either (400).
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework.request import Request

from autoscaler.schemas.errors import FieldError, join_loc

MAX_DEPTH = 32
DEFAULT_MAX_BODY_BYTES = 1 << 20


class BodyError(Exception):
    """A body rejected before validation: the HTTP status to answer and the errors."""

    def __init__(self, status: int, errors: list[FieldError]) -> None:
        self.status = status
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def max_body_bytes() -> int:
    """The size limit of an ingest body (bytes)."""
    return int(getattr(settings, "INGEST_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def read_json(request: Request) -> Any:
    """The request's body parsed as JSON, within the limits above; raises :class:`BodyError`."""
    http = request._request
    limit = max_body_bytes()
    check_headers(http.META.get("CONTENT_TYPE"), http.META.get("CONTENT_LENGTH"), limit)
    try:
        raw = http.body
    except RequestDataTooBig:
        raise BodyError(413, [FieldError("body", f"the limit is {limit} bytes")]) from None
    return decode(raw, limit)


def check_headers(content_type: str | None, content_length: str | None, limit: int) -> None:
    """Refuse a body by its headers before reading it: not ``application/json`` (415), a ``Content-Length``
    that is no number (400) or over ``limit`` bytes (413); raises :class:`BodyError`."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media != "application/json":
        raise BodyError(415, [FieldError("body", f"media type {media or 'none'!r}: send application/json")])
    try:
        length = int(content_length or 0)
    except ValueError:
        raise BodyError(400, [FieldError("body", "Content-Length is not a number")]) from None
    if length > limit:
        raise BodyError(413, [FieldError("body", f"{length} bytes: the limit is {limit} bytes")])


def decode(raw: bytes, limit: int) -> Any:
    """``raw`` parsed as strict JSON within the limits above (at most ``limit`` bytes); raises
    :class:`BodyError`."""
    if len(raw) > limit:
        raise BodyError(413, [FieldError("body", f"{len(raw)} bytes: the limit is {limit} bytes")])
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise BodyError(400, [FieldError("body", "not UTF-8")]) from None
    except RecursionError:
        raise BodyError(400, [FieldError("body", f"nested deeper than {MAX_DEPTH} levels")]) from None
    except ValueError as exc:
        raise BodyError(400, [FieldError("body", f"not valid JSON: {exc}")]) from None
    problem = first_problem(data)
    if problem is not None:
        raise BodyError(400, [problem])
    return data


def _bad_string(s: str) -> str | None:
    if "\x00" in s:
        return "contains a NUL character"
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode)"
    return None


def first_problem(data: Any) -> FieldError | None:
    """The first place in parsed JSON deeper than ``MAX_DEPTH``, or holding a non-finite number or a string
    PostgreSQL cannot store; ``None`` when there is none. Iterative, so any depth is safe to inspect."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict | list):
            if len(path) >= MAX_DEPTH:
                return FieldError(join_loc(*path), f"nested deeper than {MAX_DEPTH} levels")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, child in items:
                if isinstance(key, str) and (why := _bad_string(key)):
                    return FieldError(join_loc(*path), f"a key {why}")
                stack.append((child, (*path, key)))
        elif isinstance(value, float) and not math.isfinite(value):
            return FieldError(join_loc(*path), "must be a finite number")
        elif isinstance(value, str) and (why := _bad_string(value)):
            return FieldError(join_loc(*path), why)
    return None
