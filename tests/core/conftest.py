"""Fixtures of the control-plane tests: users, API clients with tokens, the example manifests."""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from autoscaler import manifests

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-1")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob-1")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("ops", password="pw-ops-1", is_staff=True)


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


@pytest.fixture
def shared(db):
    """The example catalogs and regions, applied as they ship."""
    docs = []
    for name in ("catalog-vm-example.yaml", "catalog-infra-a.yaml", "catalog-infra-b.yaml", "regions.yaml"):
        docs += manifests.parse_documents((EXAMPLES / name).read_text())
    return manifests.apply_documents(docs, None)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Tests create users with passwords; the production hasher is deliberately slow."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
