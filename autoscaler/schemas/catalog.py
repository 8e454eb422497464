"""NodeTypeCatalog manifests: a named list of node types (cores, memory, relative speedup, price)."""

from __future__ import annotations

from pydantic import Field

from .common import DB_INT_MAX, Name, SpecModel
from .errors import FieldError


class NodeTypeSpec(SpecModel):
    """One node type. ``speedup``: relative to the reference node (1.0), > 0; ``pricePerHour``: currency/h, >= 0."""

    name: Name
    cores: int = Field(ge=1, le=DB_INT_MAX, description="vCPU cores")
    memory_mib: int = Field(ge=1, le=DB_INT_MAX, alias="memoryMiB", description="memory (MiB)")
    speedup: float = Field(gt=0, description="relative speedup, 1.0 = reference node")
    price_per_hour: float = Field(ge=0, description="price (currency per hour)")


class NodeTypeCatalogSpec(SpecModel):
    """``spec`` of a NodeTypeCatalog: at least one node type, names unique within the catalog."""

    description: str = ""
    node_types: list[NodeTypeSpec] = Field(min_length=1)

    def semantic_errors(self) -> list[FieldError]:
        errors = []
        seen: dict[str, int] = {}
        for i, node_type in enumerate(self.node_types):
            if node_type.name in seen:
                errors.append(
                    FieldError(
                        f"spec.nodeTypes[{i}].name",
                        f"duplicate node type name {node_type.name!r} (also nodeTypes[{seen[node_type.name]}])",
                    )
                )
            else:
                seen[node_type.name] = i
        return errors
