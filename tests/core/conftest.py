"""Fixtures of the control-plane tests: API clients with tokens for the users of ``tests/conftest.py``, and
the example manifests' folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def alice_api(alice) -> APIClient:
    return token_client(alice)


@pytest.fixture
def bob_api(bob) -> APIClient:
    return token_client(bob)


@pytest.fixture
def staff_api(staff) -> APIClient:
    return token_client(staff)
