"""Fixtures shared by the test packages: users (alice, bob, a staff user), a fast password hasher, and the
example catalogs and regions as they ship.

Test packages add their own clients on top (``tests/core``: API clients with tokens; ``tests/web``: logged-in
Django clients and a browser). A package may still define a fixture of the same name (``tests/ingest`` has
password-less users): the nearer ``conftest.py`` wins. Helpers are fixtures here, not importable functions: this
file is imported as a top-level ``conftest`` module, which other modules cannot import reliably."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler import manifests

EXAMPLES = Path(__file__).resolve().parents[1] / "manifests" / "examples"
SHARED_EXAMPLES = ("catalog-vm-example.yaml", "catalog-infra-a.yaml", "catalog-infra-b.yaml", "regions.yaml")


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Tests create users with passwords; the production hasher is deliberately slow."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def alice(django_user_model):
    """A regular user ``alice`` (password ``pw-alice-1``)."""
    return django_user_model.objects.create_user("alice", password="pw-alice-1")


@pytest.fixture
def bob(django_user_model):
    """A regular user ``bob`` (password ``pw-bob-1``)."""
    return django_user_model.objects.create_user("bob", password="pw-bob-1")


@pytest.fixture
def staff(django_user_model):
    """A staff user ``ops`` (password ``pw-ops-1``): may write catalogs and regions."""
    return django_user_model.objects.create_user("ops", password="pw-ops-1", is_staff=True)


@pytest.fixture
def shared(db):
    """The example catalogs (``vm-example``, ``infra-a``, ``infra-b``) and regions, applied as they ship."""
    docs = []
    for name in SHARED_EXAMPLES:
        docs += manifests.parse_documents((EXAMPLES / name).read_text())
    return manifests.apply_documents(docs, None)
