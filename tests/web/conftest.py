"""Fixtures of the web-app tests: logged-in Django clients for the users of ``tests/conftest.py``, a helper
applying example manifests, and (for ``tests/web/browser``) a headless Chromium driven by Playwright against
pytest-django's ``live_server``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.test import Client

from autoscaler import manifests

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests" / "examples"


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
    """Apply the example manifests ``names`` (files of ``manifests/examples``) for ``owner``; the applied objects."""
    docs = []
    for name in names:
        docs += manifests.parse_documents((EXAMPLES / name).read_text())
    return manifests.apply_documents(docs, owner)


# ---- browser tests: Playwright (Python) driving Debian's Chromium headless -----------------------------------
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session (``/usr/bin/chromium``; ``scripts/test.sh`` installs it).

    Playwright's sync API runs an event loop in this thread, so Django's ORM calls from the tests need
    ``DJANGO_ALLOW_ASYNC_UNSAFE`` while it is active (set here, restored at the end)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: run scripts/test.sh (installs it) or `apt-get install -y chromium`"
        )
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    args = ["--no-sandbox"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser, live_server):
    """A fresh browser page (1280x800) with ``page.base_url`` = the live server; JS errors fail the test."""
    context = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    context.set_default_timeout(15_000)
    pg = context.new_page()
    pg.base_url = live_server.url
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def login(pg, username: str, password: str) -> None:
    """Log in through the login form and land on the fleet overview."""
    pg.goto(pg.base_url + "/accounts/login/")
    pg.get_by_label("Username").fill(username)
    pg.get_by_label("Password").fill(password)
    pg.get_by_role("button", name="Log in").click()
    pg.wait_for_url(pg.base_url + "/")


@pytest.fixture
def browser_user(django_user_model):
    """A staff user (may write catalogs and regions) for browser tests; password ``pw-web-1``."""
    return django_user_model.objects.create_user("webuser", password="pw-web-1", is_staff=True)


@pytest.fixture
def logged_in_page(page, browser_user):
    """``page`` logged in as ``browser_user`` (through the login form), showing the fleet overview."""
    login(page, "webuser", "pw-web-1")
    return page


def screenshot(pg, name: str) -> list[Path]:
    """Save the current page at 1280x800 and at phone width 390x844 under ``test-artifacts/screenshots/``.

    The viewport is restored afterwards. Returns the two files."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    before = pg.viewport_size or DESKTOP
    files = []
    for size in (DESKTOP, PHONE):
        pg.set_viewport_size(size)
        path = SCREENSHOTS / f"{name}-{size['width']}x{size['height']}.png"
        pg.screenshot(path=str(path), full_page=True)
        files.append(path)
    pg.set_viewport_size(before)
    return files


def horizontal_overflow(pg, width: int = PHONE["width"]) -> int:
    """Pixels by which the page is wider than a ``width`` viewport (0 = no sideways scrolling)."""
    before = pg.viewport_size or DESKTOP
    pg.set_viewport_size({"width": width, "height": PHONE["height"]})
    extra = pg.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    pg.set_viewport_size(before)
    return int(extra)


def unlabelled_fields(pg) -> list[str]:
    """Names of visible form controls of the page that have neither a <label> nor an aria-label."""
    return pg.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
            .filter(el => !el.closest('template') && el.labels.length === 0 && !el.getAttribute('aria-label'))
            .map(el => el.name || el.id || el.outerHTML.slice(0, 60))"""
    )
