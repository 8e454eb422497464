"""Operator -> Flink job vertex mapping.

A job vertex is a chain of operators; its name joins the operator names with `` -> `` (Java chaining) and ``, ``
(fused Python operators), with prefixes such as ``Source: `` or ``Sink: `` (e.g. ``splitter, filter,
_stream_key_by_map_operator``). A manifest names a vertex by one of its operator names: the operator's own name,
or ``connector.vertices.<operator>`` when they differ. Resolution fails, listing the vertices that exist, when no
vertex contains the name (e.g. a typo) or when two controlled operators resolve to the same vertex (one was
chained into the other: they cannot be scaled separately).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from connectors.base import ConnectorError

_SPLIT = re.compile(r"\s*->\s*|\s*,\s*")
_PREFIX = re.compile(r"^(Source|Sink):\s*")


class BindingError(ConnectorError, ValueError):
    """A declared operator has no job vertex of its own; ``vertices`` lists the vertex names that exist and
    ``problems`` maps each such operator to the reason (without the listing)."""

    def __init__(self, message: str, vertices: list[str], problems: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.vertices = vertices
        self.problems = dict(problems or {})


@dataclass(frozen=True)
class Vertex:
    id: str
    name: str
    parallelism: int

    @property
    def operators(self) -> list[str]:
        """Operator names chained in this vertex (``ticks[1]`` -> ``ticks``)."""
        names = []
        for part in _SPLIT.split(self.name):
            part = _PREFIX.sub("", part.strip())
            names.append(re.sub(r"\[\d+\]$", "", part))
        return [n for n in names if n]


def vertices_of(job: dict) -> list[Vertex]:
    """The vertices of a ``GET /jobs/:id`` answer."""
    return [Vertex(v["id"], v["name"], int(v["parallelism"])) for v in job.get("vertices", [])]


def resolve(operators: dict[str, str], vertices: list[Vertex]) -> dict[str, Vertex]:
    """Map each declared operator (name -> vertex operator name to look for) to its vertex.

    Raises ``BindingError`` naming every operator without a vertex of its own and listing the vertices."""
    listing = [v.name for v in vertices]
    found: dict[str, Vertex] = {}
    problems: list[str] = []
    per_operator: dict[str, str] = {}
    for op, wanted in operators.items():
        matches = [v for v in vertices if wanted in v.operators]
        if not matches:
            per_operator[op] = f"no job vertex contains an operator named {wanted!r}"
            problems.append(f"operator {op!r}: {per_operator[op]}")
        elif len(matches) > 1:
            per_operator[op] = f"{len(matches)} vertices contain {wanted!r}"
            problems.append(f"operator {op!r}: {per_operator[op]}")
        else:
            found[op] = matches[0]
    by_vertex: dict[str, list[str]] = {}
    for op, v in found.items():
        by_vertex.setdefault(v.id, []).append(op)
    for vid, ops in by_vertex.items():
        if len(ops) > 1:
            name = next(v.name for v in vertices if v.id == vid)
            problems.append(
                f"operators {sorted(ops)} are chained into the same vertex {name!r} and cannot be scaled apart"
            )
            for op in ops:
                others = sorted(o for o in ops if o != op)
                per_operator[op] = (
                    f"chained into the same vertex {name!r} as {others}: cannot be scaled apart"
                )
    if problems:
        raise BindingError("; ".join(problems) + f". Vertices of the job: {listing}", listing, per_operator)
    return found
