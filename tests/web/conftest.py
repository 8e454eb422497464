"""Fixtures of the web-app tests: users, logged-in Django clients, the example catalogs and regions, and
(for ``tests/web/browser``) a headless Chromium driven by Playwright against pytest-django's ``live_server``."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from autoscaler import manifests

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests" / "examples"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Tests create users with passwords; the production hasher is deliberately slow."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-1")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob-1")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("ops", password="pw-ops-1", is_staff=True)


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def alice_client(alice) -> Client:
    return client_for(alice)


@pytest.fixture
def bob_client(bob) -> Client:
    return client_for(bob)


@pytest.fixture
def staff_client(staff) -> Client:
    return client_for(staff)


def apply_examples(*names: str, owner=None) -> list:
    docs = []
    for name in names:
        docs += manifests.parse_documents((EXAMPLES / name).read_text())
    return manifests.apply_documents(docs, owner)


@pytest.fixture
def shared(db):
    """The example catalog ``vm-example`` and the example regions, applied as they ship."""
    return apply_examples(
        "catalog-vm-example.yaml", "catalog-infra-a.yaml", "catalog-infra-b.yaml", "regions.yaml"
    )
