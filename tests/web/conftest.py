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
PHONE = {"width": 375, "height": 812}  # the narrowest common phone screen


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


def screenshot(pg, name: str, settle=None) -> list[Path]:
    """Save the current page at 1280x800 and at phone width 375x812 under ``test-artifacts/screenshots/``.

    ``settle(size)``, when given, waits after each resize until the page has laid itself out for the new width.
    The viewport is restored afterwards. Returns the two files."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    before = pg.viewport_size or DESKTOP
    files = []
    for size in (DESKTOP, PHONE):
        pg.set_viewport_size(size)
        if settle is not None:
            settle(size)
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


def too_wide(pg, width: int = PHONE["width"]) -> list[str]:
    """The innermost elements reaching beyond the right edge of a ``width`` viewport (tag#id.class, px beyond):
    what makes a page scroll sideways. Elements inside a scrolling container that fits are not counted."""
    before = pg.viewport_size or DESKTOP
    pg.set_viewport_size({"width": width, "height": PHONE["height"]})
    found = pg.evaluate(
        """(w) => {
            const clipped = (el) => { for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
                if (getComputedStyle(p).overflowX !== 'visible' && p.getBoundingClientRect().right <= w + 0.5) return true;
            } return false; };
            const wide = [...document.body.querySelectorAll('*')]
                .filter(el => el.getBoundingClientRect().right > w + 0.5 && !clipped(el));
            return wide.filter(el => !wide.some(o => o !== el && el.contains(o)))
                .slice(0, 8).map(el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
                    + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\\s+/).join('.') : '')
                    + ' +' + Math.round(el.getBoundingClientRect().right - w) + 'px');
        }""",
        width,
    )
    pg.set_viewport_size(before)
    return found


def unlabelled_fields(pg) -> list[str]:
    """Names of the page's form controls (except hidden ones and row templates) without an accessible label:
    no <label> with text, no ``aria-label``, no ``aria-labelledby`` naming an element with text, and (submit,
    reset and button inputs) no value to show."""
    return pg.evaluate(
        """() => {
            const text = (el) => !!el && el.textContent.trim().length > 0;
            const named = (el) => [...el.labels].some(text)
                || (el.getAttribute('aria-label') || '').trim().length > 0
                || (el.getAttribute('aria-labelledby') || '').split(/\\s+/).filter(Boolean)
                       .some(id => text(document.getElementById(id)));
            // a submit/reset/button input is named by its value (its visible text)
            const byValue = (el) => ['submit', 'reset', 'button'].includes(el.type) && (el.value || '').trim().length > 0;
            return [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
                .filter(el => !el.closest('template') && !named(el) && !byValue(el))
                .map(el => el.name || el.id || el.outerHTML.slice(0, 60));
        }"""
    )


def chart_problems(pg) -> list[str]:
    """What the page's plotly charts lack: a title (the figure's, or one per subplot as bold annotations), a
    title with the unit on every y axis, a title on an x axis. Empty when every chart is complete."""
    return pg.evaluate(
        """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap((gd, n) => {
            // axes from the full layout, titles from the figure's own layout (the full one fills placeholders)
            const F = gd._fullLayout, L = gd.layout, name = gd.id || gd.dataset.operator || 'chart ' + n, out = [];
            const has = (o) => !!(o && o.title
                && String(typeof o.title === 'string' ? o.title : o.title.text || '').trim());
            const axes = Object.keys(F).filter(k => /^[xy]axis\\d*$/.test(k) && F[k].visible !== false);
            const ys = axes.filter(k => k[0] === 'y'), xs = axes.filter(k => k[0] === 'x');
            const subtitles = (L.annotations || []).filter(a => /<b>.+<\\/b>/.test(a.text || '')).length;
            // one title per plot area: an axis drawn over another one's plot (``overlaying``) adds none
            if (!has(L) && subtitles < ys.filter(k => !F[k].overlaying).length) out.push(name + ': no title');
            ys.filter(k => !has(L[k])).forEach(k => out.push(name + ': ' + k + ' without title/unit'));
            if (xs.length && !xs.some(k => has(L[k]))) out.push(name + ': no x-axis title');
            return out;
        })"""
    )


def chart_overlaps(pg) -> list[str]:
    """Text and legends of the page's plotly charts that overprint one another or are cut off by their chart:
    titles (figure titles and bold subplot-title annotations), legends, tick labels (those of one axis are not
    compared with one another) and axis titles, colour bars, and the plot areas (a legend over the data). Returns "a / b" descriptions of the pairs whose boxes intersect by more than 2 px
    both ways, and "a: clipped" for a box reaching outside its chart's SVG."""
    return pg.evaluate(
        """() => {
          const out = [];
          const box = (el) => { const r = el.getBoundingClientRect(); return {l: r.left, r: r.right, t: r.top, b: r.bottom}; };
          document.querySelectorAll('.js-plotly-plot').forEach((gd, n) => {
            const items = [];
            const add = (name, b, group) => { if (b && b.r - b.l > 0 && b.b - b.t > 0) { items.push([name, b, group]); } };
            gd.querySelectorAll('g.annotation').forEach((a, i) => add(`chart${n} title ${i} "${a.textContent.slice(0, 30)}"`, box(a)));
            gd.querySelectorAll('text.gtitle').forEach((t) => add(`chart${n} figure title`, box(t)));
            gd.querySelectorAll('g.legend, g[class^="legend"]').forEach((g) => {
              const bg = g.querySelector('rect.bg');
              if (g.querySelectorAll('g.traces').length) { add(`chart${n} ${g.getAttribute('class')}`, box(bg || g)); }
            });
            gd.querySelectorAll('g.xaxislayer-above, g.yaxislayer-above').forEach((g, i) => {
              g.querySelectorAll('text').forEach((t) => add(`chart${n} ${g.getAttribute('class')} ${i} tick "${t.textContent}"`, box(t), `ticks${i}`));
            });
            gd.querySelectorAll('g[class^="g-x"][class$="title"] text, g[class^="g-y"][class$="title"] text').forEach(
              (t) => add(`chart${n} ${t.parentNode.getAttribute('class')}`, box(t)));
            gd.querySelectorAll('g.colorbar').forEach((g) => add(`chart${n} colorbar`, box(g)));
            // plot areas: a legend or title must not cover the data (tick labels and axis titles sit beside them)
            gd.querySelectorAll('rect.nsewdrag').forEach((r, i) => add(`chart${n} plot area ${i}`, box(r), 'plots'));
            const svg = box(gd.querySelector('svg.main-svg'));
            items.forEach(([name, b]) => {
              if (b.l < svg.l - 1 || b.r > svg.r + 1 || b.t < svg.t - 1 || b.b > svg.b + 1) { out.push(`${name}: clipped`); }
            });
            for (let i = 0; i < items.length; i++) {
              for (let j = i + 1; j < items.length; j++) {
                if (items[i][2] && items[i][2] === items[j][2]) { continue; }  // one axis's labels: plotly spaces them
                const a = items[i][1], b = items[j][1];
                const w = Math.min(a.r, b.r) - Math.max(a.l, b.l), h = Math.min(a.b, b.b) - Math.max(a.t, b.t);
                if (w > 2 && h > 2) { out.push(`${items[i][0]} / ${items[j][0]}`); }
              }
            }
          });
          return out;
        }"""
    )


def text_overlaps(pg) -> list[str]:
    """Text and controls of the page (outside plotly charts, see :func:`chart_overlaps`) that overprint one
    another: the boxes of every visible line of text (each text node's client rects) and of every form control,
    image and drawing, compared pairwise; returns ``"a / b"`` for the pairs whose boxes intersect by more than
    2 px both ways. Text hidden the accessible way (a 1-px clip, ``.visually-hidden``) and boxes scrolled out
    of a scrolling container are not drawn, so not compared."""
    return pg.evaluate(
        """() => {
          const items = [];
          const seen = (el) => {
            for (let p = el; p && p !== document.body; p = p.parentElement) {
              const s = getComputedStyle(p);
              if (s.visibility === 'hidden' || s.opacity === '0' || p.classList.contains('visually-hidden')) return false;
              if (p.closest('.js-plotly-plot, template, noscript')) return false;
            }
            return true;
          };
          // the part of a box its scrolling ancestors show (null when none of it is shown)
          const shown = (el, r) => {
            let b = {l: r.left, r: r.right, t: r.top, b: r.bottom};
            for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
              const s = getComputedStyle(p);
              if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
              const q = p.getBoundingClientRect();
              b = {l: Math.max(b.l, q.left), r: Math.min(b.r, q.right), t: Math.max(b.t, q.top), b: Math.min(b.b, q.bottom)};
            }
            return b.r - b.l > 1 && b.b - b.t > 1 ? b : null;
          };
          const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '')
            + (typeof el.className === 'string' && el.className.trim() ? '.' + el.className.trim().split(/\\s+/)[0] : '');
          const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const text = node.textContent.trim();
            if (!text || !node.parentElement || !seen(node.parentElement)) continue;
            const range = document.createRange();
            range.selectNodeContents(node);
            [...range.getClientRects()].forEach((r) => {
              const b = shown(node.parentElement, r);
              if (b) items.push([`${name(node.parentElement)} "${text.slice(0, 25)}"`, b, node]);
            });
          }
          document.querySelectorAll('input:not([type=hidden]), select, textarea, button, img, svg, canvas, progress').forEach((el) => {
            if (!seen(el) || (el.tagName === 'svg' && el.closest('svg') !== el)) return;
            const r = el.getBoundingClientRect();
            const b = shown(el, r);
            if (b && r.width > 1 && r.height > 1) items.push([name(el), b, el]);
          });
          items.sort((a, b) => a[1].t - b[1].t);
          const out = [];
          for (let i = 0; i < items.length; i++) {
            for (let j = i + 1; j < items.length && items[j][1].t < items[i][1].b - 2; j++) {
              const [na, a, ea] = items[i], [nb, b, eb] = items[j];
              if (ea === eb || ea.contains(eb) || eb.contains(ea)) continue;  // a button's own label, one text's lines
              const w = Math.min(a.r, b.r) - Math.max(a.l, b.l), h = Math.min(a.b, b.b) - Math.max(a.t, b.t);
              if (w > 2 && h > 2) out.push(`${na} / ${nb}`);
            }
          }
          return out.slice(0, 20);
        }"""
    )
