"""Shared pieces of every manifest: base model configuration, names, metadata."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints
from pydantic.alias_generators import to_camel

API_VERSION = "autoscaler/v1"

#: largest value of the database's integer columns (PositiveIntegerField: 0..2**31-1 on every backend)
DB_INT_MAX = 2_147_483_647

#: Resource names: letters, digits, ".", "_" and "-", starting with a letter or digit, at most 63 characters.
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")]


class SpecModel(BaseModel):
    """Base of every manifest model: camelCase field names, unknown fields rejected, floats finite."""

    model_config = ConfigDict(
        extra="forbid", populate_by_name=True, alias_generator=to_camel, allow_inf_nan=False
    )

    def to_manifest_dict(self) -> dict:
        """The canonical manifest form (camelCase, unset optional fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class Metadata(SpecModel):
    """``metadata`` of a manifest: the resource's name (unique per kind; per owner for applications)."""

    name: Name
