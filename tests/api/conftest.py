"""Fixtures of the API tests: token clients of a non-staff and a staff user (on top of ``tests/conftest.py``),
and an empty throttle cache (the login throttle counts in Django's cache, which outlives one test)."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


@pytest.fixture(autouse=True)
def empty_throttle_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def alice_api(alice) -> APIClient:
    return token_client(alice)


@pytest.fixture
def bob_api(bob) -> APIClient:
    return token_client(bob)


@pytest.fixture
def staff_api(staff) -> APIClient:
    return token_client(staff)
