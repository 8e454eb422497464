"""Validation errors as (field path, reason) pairs, the one error format of manifests, API and admin."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError


@dataclass(frozen=True)
class FieldError:
    """One rejected field: ``loc`` is a dotted path such as ``spec.streams[2]``, ``msg`` the reason."""

    loc: str
    msg: str

    def as_dict(self) -> dict[str, str]:
        return {"loc": self.loc, "msg": self.msg}

    def __str__(self) -> str:
        return f"{self.loc}: {self.msg}" if self.loc else self.msg


class ManifestError(Exception):
    """Raised with every error found in one or more documents; nothing stored has changed."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors))

    def as_list(self) -> list[dict[str, str]]:
        return [e.as_dict() for e in self.errors]


def join_loc(*parts: str | int) -> str:
    """Join path parts: strings become ``.name``, integers ``[i]`` (``join_loc("spec", "streams", 2)``)."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part != "":
            out += f".{part}" if out else str(part)
    return out


_PREFIXES = ("Value error, ", "Assertion failed, ")


def from_pydantic(exc: ValidationError, *prefix: str | int) -> list[FieldError]:
    """Convert a pydantic ValidationError into FieldErrors whose paths start with ``prefix``."""
    errors = []
    for item in exc.errors(include_url=False):
        msg = item["msg"]
        for p in _PREFIXES:
            if msg.startswith(p):
                msg = msg[len(p) :]
        errors.append(FieldError(join_loc(*prefix, *item["loc"]), msg))
    return errors


_PARAM_MSG = re.compile(r"^(params(?:\.[\w-]+)*): (.*)$", re.S)


def from_policy_error(message: str, *prefix: str | int) -> FieldError:
    """Map a ``policies.registry.validate_params`` message ("params.alpha: must be ...") to a field path."""
    match = _PARAM_MSG.match(message)
    if match:
        return FieldError(join_loc(*prefix, *match.group(1).split(".")), match.group(2))
    return FieldError(join_loc(*prefix), message)


def prefixed(errors: Iterable[FieldError], *prefix: str | int) -> list[FieldError]:
    """The same errors with ``prefix`` put in front of each path."""
    return [FieldError(join_loc(*prefix, e.loc) if e.loc else join_loc(*prefix), e.msg) for e in errors]
