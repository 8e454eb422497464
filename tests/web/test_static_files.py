"""Static files in production: ``collectstatic`` with the compressed manifest storage, served by WhiteNoise (the
real middleware, through the Django test client) gzip-compressed with a far-future, immutable max-age under a
content-hashed name that the pages link; without ``collectstatic`` the pages still render and link the plain
names, which WhiteNoise serves from the apps."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import staticfiles_storage
from django.core.management import call_command
from django.test import Client

from autoscaler.control.builders import simulated_pipeline

pytestmark = pytest.mark.django_db

PRODUCTION = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "dashboard.staticfiles.CompressedManifestOrPlainStorage"},
}
PLOTLY = "dashboard/plotly-cartesian.min.js"
TEN_YEARS_S = 315360000


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_the_project_uses_the_compressed_manifest_storage_and_collects_it_under_debug(settings, tmp_path):
    """The image collects with DEBUG on: the manifest and the compressed copies are written all the same."""
    from autoscaler import settings as project_settings

    assert project_settings.STORAGES["staticfiles"] == PRODUCTION["staticfiles"]
    settings.DEBUG = True
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STORAGES = PRODUCTION
    call_command("collectstatic", "--noinput", verbosity=0)
    assert (settings.STATIC_ROOT / "staticfiles.json").exists()
    assert list((settings.STATIC_ROOT / "dashboard").glob("plotly-cartesian.min.*.js.gz"))
    assert staticfiles_storage.url(PLOTLY) == "/static/" + PLOTLY  # DEBUG: the plain name, edits show at once


def test_collected_plotly_is_served_compressed_with_a_long_max_age(settings, tmp_path, alice):
    settings.DEBUG = False
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STORAGES = PRODUCTION
    call_command("collectstatic", "--noinput", verbosity=0)
    original = Path(finders.find(PLOTLY)).read_bytes()
    hashed = staticfiles_storage.url(PLOTLY)
    assert hashed != "/static/" + PLOTLY and hashed.startswith("/static/dashboard/plotly-cartesian.min.")
    client = Client()  # a new handler: WhiteNoise scans the new STATIC_ROOT
    r = client.get(hashed, HTTP_ACCEPT_ENCODING="gzip, deflate")
    assert r.status_code == 200 and r["Content-Encoding"] == "gzip"
    data = body(r)
    assert len(data) < len(original) / 2 and gzip.decompress(data) == original
    assert f"max-age={TEN_YEARS_S}" in r["Cache-Control"] and "immutable" in r["Cache-Control"]
    assert "Accept-Encoding" in r["Vary"]
    # a client that accepts no compression gets the file itself
    plain = client.get(hashed)
    assert "Content-Encoding" not in plain and body(plain) == original
    # the dashboard links the hashed name (a new release changes it: browsers fetch the new file)
    simulated_pipeline("st", n_operators=1, om_policy="threshold", owner="alice")
    client.force_login(alice)
    page = client.get("/applications/st/")
    assert page.status_code == 200 and hashed in page.content.decode()


def test_without_collectstatic_pages_render_and_link_plain_names(settings, tmp_path, alice):
    settings.DEBUG = False
    settings.STATIC_ROOT = tmp_path / "empty"
    settings.STATIC_ROOT.mkdir()
    settings.STORAGES = PRODUCTION
    assert staticfiles_storage.url(PLOTLY) == "/static/" + PLOTLY
    simulated_pipeline("plain", n_operators=1, om_policy="threshold", owner="alice")
    client = Client()
    client.force_login(alice)
    page = client.get("/applications/plain/")
    assert page.status_code == 200 and "/static/" + PLOTLY in page.content.decode()
    r = client.get("/static/" + PLOTLY)  # served from the app's directory (WHITENOISE_USE_FINDERS)
    assert r.status_code == 200 and body(r) == Path(finders.find(PLOTLY)).read_bytes()
