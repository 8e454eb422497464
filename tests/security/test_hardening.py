"""Production defaults and hardening (issue 18, item 6, and /metrics of item 2): ``check --deploy`` with the
documented production settings, HTTPS settings from the environment, /metrics access, login throttling, the
login redirect, API docs that load nothing from other hosts, and the demo's API token kept out of its log."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from django.core.cache import cache
from django.test import Client
from rest_framework.authtoken.models import Token

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.tick import run_tick

ROOT = Path(__file__).resolve().parents[2]
LOGIN = "/accounts/login/"


# ---- the documented production settings ------------------------------------------------------------------
def _env_example() -> dict[str, str]:
    lines = (ROOT / ".env.example").read_text().splitlines()
    pairs = [line.split("=", 1) for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return {k.strip(): v.strip() for k, v in pairs}


def _substitute(value: str, env: dict[str, str]) -> str:
    """docker compose's ``${VAR}`` and ``${VAR:-default}`` in ``value``, from ``env``."""

    def one(match: re.Match) -> str:
        name, _, default = match.group(1).partition(":-")
        return env.get(name) or default

    return re.sub(r"\$\{([^}]+)\}", one, value)


def production_env(tmp_path: Path, **override: str) -> dict[str, str]:
    """The web service's environment as docker compose builds it (.env.example, then the service's
    ``environment``), with a real SECRET_KEY instead of the placeholder and ``override`` on top."""
    example = _env_example()
    web = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]
    env = {"PATH": "/usr/bin:/bin", "AUTOSCALER_VAR_DIR": str(tmp_path / "var"), **example}
    env |= {k: _substitute(str(v), example) for k, v in (web.get("environment") or {}).items()}
    env["SECRET_KEY"] = secrets.token_urlsafe(50)
    return env | override


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_production_settings_refuse_the_placeholder_key(tmp_path):
    env = production_env(tmp_path, SECRET_KEY=_env_example()["SECRET_KEY"])
    run = manage(env, "check")
    assert run.returncode != 0 and "SECRET_KEY is a placeholder" in run.stderr, run.stderr[-2000:]


def test_check_deploy_has_no_security_warning_with_the_production_settings(tmp_path):
    run = manage(production_env(tmp_path), "check", "--deploy")
    issues = re.findall(r"\((security\.\w+)\)", run.stdout + run.stderr)
    assert issues == [], run.stderr[-3000:]
    assert run.returncode == 0, run.stderr[-3000:]


def test_check_deploy_is_clean_with_the_production_settings(tmp_path):
    """No warning at all (``--fail-level WARNING``): also the schema generator's, which ``check`` runs too."""
    run = manage(production_env(tmp_path), "check", "--deploy", "--fail-level", "WARNING")
    assert run.returncode == 0 and "System check identified no issues" in run.stdout, run.stderr[-3000:]


def test_production_settings_turn_https_on(tmp_path):
    code = (
        "from django.conf import settings as s; "
        "print(s.DEBUG, s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
        "s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER, s.SECURE_REDIRECT_EXEMPT)"
    )
    env = production_env(tmp_path, DJANGO_SETTINGS_MODULE="autoscaler.settings")
    run = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); " + code],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == (
        "False True True True 31536000 ('HTTP_X_FORWARDED_PROTO', 'https') ['^api/v1/ingest/', '^metrics$']"
    )


def test_malformed_https_settings_name_the_variable(tmp_path):
    bad = manage(production_env(tmp_path, SECURE_HSTS_SECONDS="a year"), "check")
    assert bad.returncode != 0 and "SECURE_HSTS_SECONDS: 'a year' is not an integer" in bad.stderr
    bad = manage(production_env(tmp_path, SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO"), "check")
    assert bad.returncode != 0 and "SECURE_PROXY_SSL_HEADER: expected 'HEADER,value'" in bad.stderr


@pytest.mark.django_db
def test_https_settings_act_on_requests(settings, alice):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_REDIRECT_EXEMPT = [r"^api/v1/ingest/", r"^metrics$"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    plain = Client().get(LOGIN)
    assert plain.status_code == 301 and plain["Location"] == "https://testserver/accounts/login/"
    assert Client().get("/metrics").status_code == 401  # exempt: answered over HTTP (and refused, no token)
    proxied = Client(headers={"X-Forwarded-Proto": "https"})
    page = proxied.get(LOGIN)
    assert page.status_code == 200 and page["Strict-Transport-Security"].startswith("max-age=31536000")
    assert page.cookies["csrftoken"]["secure"]
    login = proxied.post(LOGIN, {"username": "alice", "password": "pw-alice-1"})
    assert login.status_code == 302 and login.cookies["sessionid"]["secure"]


# ---- /metrics ----------------------------------------------------------------------------------------------
@pytest.fixture
def metered(db):
    """One application of user ``carol`` with four ticks behind it (it shows up in /metrics)."""
    app = simulated_pipeline("metered-app", n_operators=2, rate_scale=3.0, om_policy="ql", owner="carol")
    for slot in range(10, 14):
        run_tick(app.pk, slot)
    return app


SAMPLE = 'autoscaler_control_ticks_total{application="metered-app",owner="carol"} 4'


def _token(user) -> str:
    return Token.objects.get_or_create(user=user)[0].key


def test_metrics_answers_staff_users_only_without_a_scraper_token(metered, settings, alice, staff, client):
    settings.METRICS_TOKEN = ""
    anonymous = client.get("/metrics")
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"].startswith("Bearer")
    assert b"metered-app" not in anonymous.content and b"carol" not in anonymous.content
    assert client.get("/metrics", headers={"Authorization": "Bearer anything"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401
    for user, status in ((alice, 403), (metered.owner, 403), (staff, 200)):
        session = Client()
        session.force_login(user)
        assert session.get("/metrics").status_code == status, user
        by_token = client.get("/metrics", headers={"Authorization": f"Token {_token(user)}"})
        assert by_token.status_code == status, user
        assert (SAMPLE in by_token.content.decode()) == (status == 200)
    assert client.get("/metrics", headers={"Authorization": "Token not-a-token"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Basic b3BzOnB3LW9wcy0x"}).status_code == 401


def test_metrics_accepts_the_scraper_token(metered, settings, client):
    settings.METRICS_TOKEN = "scrape-" + "s3cr3t" * 8
    ok = client.get("/metrics", headers={"Authorization": f"Bearer {settings.METRICS_TOKEN}"})
    assert ok.status_code == 200 and SAMPLE in ok.content.decode()
    assert ok["Content-Type"].startswith("text/plain; version=0.0.4")
    wrong = client.get("/metrics", headers={"Authorization": f"Bearer {settings.METRICS_TOKEN}x"})
    assert wrong.status_code == 401 and b"metered-app" not in wrong.content
    assert client.get("/metrics").status_code == 401
    post = client.post("/metrics", headers={"Authorization": f"Bearer {settings.METRICS_TOKEN}"})
    assert post.status_code == 405


@pytest.mark.django_db(transaction=True)
def test_prometheus_style_scrape_over_http(live_server, settings):
    """What Prometheus does: a plain GET with the bearer token to the server's /metrics."""
    settings.METRICS_TOKEN = "scrape-" + "t0k3n" * 8
    app = simulated_pipeline("scraped-app", n_operators=1, rate_scale=1.0, om_policy="ql", owner="dora")
    run_tick(app.pk, 1)
    request = urllib.request.Request(
        f"{live_server.url}/metrics", headers={"Authorization": f"Bearer {settings.METRICS_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200
        assert 'application="scraped-app"' in response.read().decode()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{live_server.url}/metrics", timeout=60)
    assert refused.value.code == 401 and b"scraped-app" not in refused.value.read()


# ---- the login page --------------------------------------------------------------------------------------
@pytest.fixture
def throttle(settings):
    """Three failures within five minutes lock a (username, address) pair for ten minutes."""
    settings.LOGIN_THROTTLE_ATTEMPTS = 3
    settings.LOGIN_THROTTLE_WINDOW_S = 300
    settings.LOGIN_THROTTLE_LOCKOUT_S = 600
    cache.clear()
    yield settings
    cache.clear()


def _login(password: str, username: str = "alice", address: str = "10.0.0.1", client: Client | None = None):
    client = client or Client(REMOTE_ADDR=address)
    return client.post(LOGIN, {"username": username, "password": password})


def _logged_in(response) -> bool:
    return "sessionid" in response.cookies and response.cookies["sessionid"].value != ""


def test_login_is_throttled_per_username_and_address(throttle, alice, bob):
    for _ in range(2):
        wrong = _login("wrong")
        assert wrong.status_code == 200 and "Please enter a correct username and password" in wrong.text
    locked = _login("wrong")  # the third failure locks
    assert locked.status_code == 429 and "Too many failed login attempts" in locked.text
    assert "Try again in 10 minutes" in locked.text
    right = _login("pw-alice-1")  # refused although right: guessing gets nowhere while locked
    assert (
        right.status_code == 429 and not _logged_in(right) and "Too many failed login attempts" in right.text
    )
    # other usernames from that address, and the same username from another address, are not locked
    assert _logged_in(_login("pw-bob-1", username="bob"))
    assert _logged_in(_login("pw-alice-1", address="10.0.0.2"))
    assert (
        _login("pw-alice-1", username="ALICE ").status_code == 429
    )  # the username's spelling does not escape


@pytest.mark.parametrize("page", ["/admin/login/", "/api-auth/login/"])
def test_every_login_page_counts_and_honours_the_same_lock(throttle, staff, page):
    """Guessing cannot move to the admin's or the browsable API's login page: one count for all three."""
    for _ in range(2):
        assert _login("wrong", username="ops").status_code == 200
    client = Client(REMOTE_ADDR="10.0.0.1")
    locked = client.post(page, {"username": "ops", "password": "wrong"})  # the third failure, on this page
    assert "Too many failed login attempts" in locked.text
    right = Client(REMOTE_ADDR="10.0.0.1").post(page, {"username": "ops", "password": "pw-ops-1"})
    assert "Too many failed login attempts" in right.text and not _logged_in(right)
    assert _login("pw-ops-1", username="ops").status_code == 429  # and the lock holds on /accounts/login/
    assert _logged_in(Client(REMOTE_ADDR="10.0.0.2").post(page, {"username": "ops", "password": "pw-ops-1"}))


def test_lock_ends_after_the_lockout(throttle, alice):
    throttle.LOGIN_THROTTLE_LOCKOUT_S = 1
    for _ in range(3):
        _login("wrong")
    assert _login("pw-alice-1").status_code == 429
    deadline = time.monotonic() + 30  # the lock lasts 1 s; upper bound only
    while (response := _login("pw-alice-1")).status_code == 429 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _logged_in(response)


def test_successful_login_clears_the_failures(throttle, alice):
    for _ in range(2):
        _login("wrong")
    assert _logged_in(_login("pw-alice-1"))
    for _ in range(2):
        assert _login("wrong").status_code == 200  # counting starts again: two failures do not lock
    assert _logged_in(_login("pw-alice-1"))


def test_login_without_next_lands_on_the_fleet_page(throttle, alice):
    client = Client()
    response = client.post(LOGIN, {"username": "alice", "password": "pw-alice-1"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get(response["Location"]).status_code == 200


def test_login_keeps_a_local_next_only(throttle, alice):
    local = Client().post(f"{LOGIN}?next=/decisions/", {"username": "alice", "password": "pw-alice-1"})
    assert local["Location"] == "/decisions/"
    foreign = Client().post(
        LOGIN, {"username": "alice", "password": "pw-alice-1", "next": "https://evil.test/"}
    )
    assert foreign["Location"] == "/"


# ---- API docs: nothing from other hosts --------------------------------------------------------------------
DOCS = ("/api/v1/redoc/", "/api/v1/docs/")


@pytest.mark.parametrize("path", DOCS)
def test_docs_pages_reference_no_other_host(client, path):
    response = client.get(path)
    assert response.status_code == 200
    html = response.text
    hosts = {m.group(1) for m in re.finditer(r"(?:https?:)?//([A-Za-z0-9.\-\[\]:]+)", html)}
    assert hosts <= {"testserver"}, hosts
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert csp, "no content security policy"
    directives = dict(d.strip().split(" ", 1) for d in csp.group(1).split(";") if d.strip())
    for name in ("default-src", "script-src", "style-src", "img-src", "font-src", "connect-src"):
        assert "http" not in directives[name] and "*" not in directives[name], (name, directives[name])
    assert directives["default-src"] == "'self'"
    # every script, stylesheet and icon is served here
    for ref in re.findall(r'(?:src|href)="([^"]+)"', html):
        assert ref.startswith("/"), ref
        assert client.get(ref).status_code == 200, ref


def test_docs_pages_load_nothing_from_other_hosts_in_a_browser(live_server):
    """Chromium loads both pages; every request it makes is recorded, and any to another host is aborted
    (so a failure of this test sends nothing off the machine)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not Path(chromium).exists():
        pytest.skip(f"no Chromium at {chromium} (scripts/test.sh installs it)")
    requested: list[str] = []
    outside: list[str] = []
    local = re.compile(rf"^{re.escape(live_server.url)}/|^(data|blob):")

    def route(r) -> None:  # noqa: ANN001 - a playwright Route
        url = r.request.url
        requested.append(url)
        if local.match(url):
            r.continue_()
        else:
            outside.append(url)
            r.abort()

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                page = browser.new_page()
                page.route("**/*", route)
                page.goto(f"{live_server.url}/api/v1/redoc/", wait_until="networkidle", timeout=120_000)
                page.wait_for_selector("text=Autoscaler control plane API", timeout=120_000)
                page.goto(f"{live_server.url}/api/v1/docs/", wait_until="networkidle", timeout=120_000)
                page.wait_for_selector(".swagger-ui .info", timeout=120_000)
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
    assert any(u.endswith("redoc.standalone.js") for u in requested)
    assert outside == []


# ---- the demo's API token ----------------------------------------------------------------------------------
@pytest.mark.django_db
def test_demo_writes_the_api_token_to_a_private_file_not_to_its_log(tmp_path, monkeypatch, capsys, alice):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import demo_common
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    monkeypatch.setenv("AUTOSCALER_VAR_DIR", str(tmp_path))
    (tmp_path / "alice-api-token").write_text("stale")
    (tmp_path / "alice-api-token").chmod(0o644)
    assert demo_common.main(["save-token", "alice"]) == 0
    key = Token.objects.get(user=alice).key
    path = tmp_path / "alice-api-token"
    assert path.read_text().strip() == key
    assert path.stat().st_mode & 0o777 == 0o600
    out = capsys.readouterr()
    assert str(path) in out.out and key not in out.out + out.err
    assert demo_common.main(["save-token", "nobody"]) == 1
    assert "cannot save the API token of 'nobody'" in capsys.readouterr().err


def test_demo_script_prints_no_token():
    """demo.sh hands the admin token over in a file (the Spark stages' ingest token: helper branch "ingest")."""
    demo = (ROOT / "scripts" / "demo.sh").read_text()
    assert "drf_create_token" not in demo and "save-token admin" in demo


@pytest.mark.django_db
def test_no_password_reset_by_mail(client, alice):
    """No mail is set up: the reset pages do not exist (nothing to fail on SMTP, no reset token to leak)."""
    alice.email = "alice@example.org"
    alice.save()
    assert client.get("/accounts/password_reset/").status_code == 404
    assert client.post("/accounts/password_reset/", {"email": alice.email}).status_code == 404
    assert client.get(LOGIN).status_code == 200  # while the login page is there
