"""Node types from a ``NodeTypeCatalog`` manifest file (YAML, as in ``manifests/examples/catalog-*.yaml``), for the
simulator (``python -m policies.simulate --catalogue FILE``). Pure YAML reading: no Django, no database.

A file may hold several documents; the catalogue is the only ``kind: NodeTypeCatalog`` one, or the one named
``metadata.name`` (``FILE:NAME``). Each ``spec.nodeTypes`` entry needs ``name``, ``speedup`` (> 0, relative to the
reference node) and ``pricePerHour`` ($/h, >= 0); ``cores`` and ``memoryMiB`` are optional. Errors name the file and
the field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from policies.operator_model import NodeType


def _field(entry: dict[str, Any], key: str, where: str, positive: bool) -> float:
    value = entry.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}.{key}: must be a number, got {value!r}")
    if not math.isfinite(value) or (value <= 0 if positive else value < 0):
        raise ValueError(f"{where}.{key}: must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


def load_catalogue(path: str | Path, name: str | None = None) -> tuple[NodeType, ...]:
    """The node types of the catalogue in ``path`` (in file order), or of the catalogue ``name`` in it."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"catalogue {str(p)!r}: no such file")
    try:
        docs = [d for d in yaml.safe_load_all(p.read_text()) if d is not None]
    except yaml.YAMLError as exc:
        raise ValueError(f"catalogue {str(p)!r}: not valid YAML ({str(exc).splitlines()[0]})") from None
    cats = [d for d in docs if isinstance(d, dict) and d.get("kind") == "NodeTypeCatalog"]
    if name is not None:
        cats = [d for d in cats if (d.get("metadata") or {}).get("name") == name]
    if len(cats) != 1:
        what = f"named {name!r}" if name is not None else "of kind NodeTypeCatalog"
        hint = "" if name is not None or not cats else ": choose one with FILE:NAME"
        raise ValueError(f"catalogue {str(p)!r}: expected one catalogue {what}, found {len(cats)}{hint}")
    entries = (cats[0].get("spec") or {}).get("nodeTypes")
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"catalogue {str(p)!r}: spec.nodeTypes must be a non-empty list")
    out = []
    for i, entry in enumerate(entries):
        where = f"catalogue {str(p)!r}: spec.nodeTypes[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise ValueError(f"{where}.name: must be a non-empty string")
        out.append(
            NodeType(
                entry["name"],
                _field(entry, "speedup", where, positive=True),
                _field(entry, "pricePerHour", where, positive=False),
                int(entry.get("cores", 1)),
                int(entry.get("memoryMiB", 1024)),
            )
        )
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        raise ValueError(f"catalogue {str(p)!r}: spec.nodeTypes: duplicate names")
    return tuple(out)
