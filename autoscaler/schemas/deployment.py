"""Deployment manifests: replicas per node type (the vector k of paper 001) of one operator in one region."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from .common import DB_INT_MAX, Name, SpecModel


class DeploymentSpec(SpecModel):
    """``spec`` of a Deployment: ``replicas`` maps node-type name -> number of replicas (>= 0, total >= 1)."""

    application: Name
    operator: Name
    region: Name
    replicas: dict[Name, Annotated[int, Field(ge=0, le=DB_INT_MAX)]] = Field(min_length=1)

    def total(self) -> int:
        return sum(self.replicas.values())
