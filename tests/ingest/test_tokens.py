"""Per-application ingest tokens: created, rotated and revoked by ``manage.py ingest_token``, stored hashed,
accepted on their own application's ingest endpoints only; owner API tokens keep working on ingest."""

from __future__ import annotations

import datetime as dt
import io
import stat

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from autoscaler import manifests
from autoscaler.ingest import store, tokens
from autoscaler.ingest.models import AppliedAck, DriverStatus, IngestToken, ProgressSample

from .conftest import SPARK_APP, token_client

pytestmark = pytest.mark.django_db
URL = "/api/v1/ingest/wc/counter"
OTHER_APP = """
apiVersion: autoscaler/v1
kind: Application
metadata: {name: other}
spec:
  engine: spark
  slo: {rMaxMs: 5000, etaV: 0.05, etaR: 0.1}
  operators:
    - {name: src, kind: source}
    - {name: counter, kind: operator, maxParallelism: 4}
    - {name: out, kind: sink}
  streams: [[src, counter], [counter, out]]
  regions: [ingest-region]
"""


def ingest_client(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {secret}")
    return client


def progress(batch: int) -> dict:
    ts = dt.datetime.now(dt.UTC).isoformat()
    return {"runId": "r1", "batchId": batch, "timestamp": ts, "numInputRows": 5, "batchDuration": 10}


def command(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("ingest_token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def apps(spark_app, alice, bob):
    """alice's ``wc`` and ``other``; bob's own ``wc`` (same names, other tenant)."""
    manifests.apply_documents(manifests.parse_documents(OTHER_APP), alice)
    manifests.apply_documents(manifests.parse_documents(SPARK_APP.split("---", 2)[2]), bob)
    return {
        "wc": spark_app,
        "other": alice.applications.get(name="other"),
        "bob-wc": bob.applications.get(name="wc"),
    }


def test_a_token_writes_its_application_progress_desired_and_acks(apps):
    secret = tokens.issue(apps["wc"])
    api = ingest_client(secret)
    r = api.post(f"{URL}/progress", {"progress": [progress(1)], "driver": {"executors": 1}}, format="json")
    assert r.status_code == 201, r.json()
    op = apps["wc"].operators.get(name="counter")
    assert ProgressSample.objects.get().operator == op
    store.set_desired(op, 2, {"name": "small", "cores": 1, "memoryMiB": 512})
    assert api.get(f"{URL}/desired").json()["executors"] == 2
    assert api.post(f"{URL}/applied", {"generation": 1, "executors": 2}, format="json").status_code == 201
    assert AppliedAck.objects.get().operator == op
    assert IngestToken.objects.get().last_used_at is not None


def test_a_token_cannot_touch_another_application_s_ingest(apps, alice):
    secret = tokens.issue(apps["wc"])
    api = ingest_client(secret)
    body = {"progress": [progress(1)], "driver": {"executors": 1}}
    for app in ("other", "nope"):  # the owner's other application, an unknown one: same answer
        base = f"/api/v1/ingest/{app}/counter"
        r = api.post(f"{base}/progress", body, format="json")
        assert r.status_code == 403 and "'wc'" in r.json()["errors"][0]["msg"], r.json()
        assert api.get(f"{base}/desired").status_code == 403
        assert (
            api.post(f"{base}/applied", {"generation": 1, "executors": 1}, format="json").status_code == 403
        )
    # bob's token for his own wc does not reach alice's wc (same name, other tenant)
    bob_secret = tokens.issue(apps["bob-wc"])
    r = ingest_client(bob_secret).post(f"{URL}/progress", body, format="json")
    assert r.status_code == 201
    assert {s.operator.application_id for s in ProgressSample.objects.all()} == {apps["bob-wc"].pk}
    assert DriverStatus.objects.get().operator.application_id == apps["bob-wc"].pk
    assert AppliedAck.objects.count() == 0


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/applications/"),
        ("get", "/api/v1/applications/wc/"),
        ("put", "/api/v1/applications/wc/"),
        ("delete", "/api/v1/applications/wc/"),
        ("get", "/api/v1/deployments/"),
        ("get", "/api/v1/catalogs/"),
        ("get", "/api/v1/regions/"),
        ("post", "/api/v1/apply/"),
        ("get", "/api/v1/schema/"),
        ("get", "/api/v1/control/applications/wc/summary/"),
        ("get", "/api/v1/control/applications/wc/decisions/"),
        ("get", "/api/v1/control/applications/wc/rails/"),
        ("get", "/api/v1/control/applications/wc/agents/"),
        ("get", "/api/v1/control/regions/ingest-region/"),
    ],
)
def test_a_token_is_refused_by_every_other_api(apps, method, path):
    api = ingest_client(tokens.issue(apps["wc"]))
    r = getattr(api, method)(path, {}, format="json")
    assert r.status_code == 401, (path, r.status_code, r.content[:200])
    assert apps["wc"].__class__.objects.filter(pk=apps["wc"].pk).exists()


@pytest.mark.parametrize(
    "page", ["/", "/applications/wc/", "/applications/wc/data.json", "/decisions/", "/admin/"]
)
def test_a_token_opens_no_page(apps, page):
    """Pages know sessions only: with an ingest token in the header they send to the login page (JSON: 401)."""
    r = ingest_client(tokens.issue(apps["wc"])).get(page)
    to_login = r.status_code == 302 and "login" in r["Location"]
    assert to_login or (r.status_code == 401 and page.endswith(".json")), (page, r.status_code)


def test_the_owner_api_token_keeps_working_on_ingest(apps, alice):
    r = token_client(alice).post(f"{URL}/progress", {"progress": [progress(1)]}, format="json")
    assert r.status_code == 201
    r = token_client(alice).post("/api/v1/ingest/other/counter/progress", {}, format="json")
    assert r.status_code == 201


def test_a_wrong_rotated_or_revoked_token_is_401(apps):
    old = tokens.issue(apps["wc"])
    new = tokens.issue(apps["wc"], rotate=True)
    body = {"progress": [progress(1)]}
    r = ingest_client(old).post(f"{URL}/progress", body, format="json")
    assert r.status_code == 401 and r.json()["errors"][0]["msg"] == "invalid ingest token"
    wrong = new[:-1] + ("A" if new[-1] != "A" else "B")
    assert ingest_client(wrong).post(f"{URL}/progress", body, format="json").status_code == 401
    assert ingest_client(new).post(f"{URL}/progress", body, format="json").status_code == 201
    assert tokens.revoke(apps["wc"])
    assert ingest_client(new).get(f"{URL}/desired").status_code == 401
    assert ProgressSample.objects.count() == 1


def test_only_the_hash_is_stored(apps):
    secret = tokens.issue(apps["wc"])
    row = IngestToken.objects.get()
    assert secret.startswith("ssi_") and len(secret) >= 40
    assert row.key_hash == tokens.digest(secret) and secret not in row.key_hash
    assert secret.startswith(row.prefix) and len(row.prefix) < len(secret) // 3
    with pytest.raises(ValueError, match="already has an ingest token"):
        tokens.issue(apps["wc"])
    assert IngestToken.objects.get().key_hash == row.key_hash


def test_the_command_prints_writes_rotates_and_revokes(apps, alice, tmp_path):
    out, err = command("wc", "--owner", "alice")
    assert "wc has no ingest token" in out and IngestToken.objects.count() == 0
    out, err = command("wc", "--owner", "alice", "--print")
    secret = out.strip()
    assert out == secret + "\n" and "created the ingest token of wc" in err and secret not in err
    assert tokens.lookup(secret).application == apps["wc"]
    status, _ = command("wc", "--owner", "alice")
    assert "ingest token ssi_" in status and secret not in status

    with pytest.raises(CommandError, match="already has an ingest token"):
        command("wc", "--owner", "alice", "--print")
    assert tokens.lookup(secret) is not None  # unchanged

    path = tmp_path / "wc.token"
    path.write_text("stale")
    path.chmod(0o644)
    out, _ = command("wc", "--owner", "alice", "--rotate", "--output", str(path))
    assert "rotated" in out and str(path) in out
    rotated = path.read_text().strip()
    assert rotated not in out and rotated != secret and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert tokens.lookup(secret) is None and tokens.lookup(rotated).application == apps["wc"]

    out, _ = command("wc", "--owner", "alice", "--revoke")
    assert "revoked" in out and IngestToken.objects.count() == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "--owner", "alice", "--print"], "application: alice has no application named 'nope'"),
        (["wc", "--owner", "nobody", "--print"], "--owner: no user named 'nobody'"),
        (["wc", "--owner", "alice", "--rotate"], "--rotate: give --print or --output"),
        (["wc", "--owner", "alice", "--output", "/nonexistent-dir/x"], "--output: cannot write"),
    ],
)
def test_the_command_rejects_bad_input_and_changes_nothing(apps, args, message):
    with pytest.raises(CommandError, match=message):
        command(*args)
    assert IngestToken.objects.count() == 0


def test_the_admin_lists_and_revokes_but_never_shows_or_creates_a_secret(apps, client, django_user_model):
    secret = tokens.issue(apps["wc"])
    row = IngestToken.objects.get()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-root-1"))
    listing = client.get("/admin/ingest/ingesttoken/")
    assert listing.status_code == 200 and row.prefix.encode() in listing.content
    detail = client.get(f"/admin/ingest/ingesttoken/{row.pk}/change/")
    assert detail.status_code == 200
    for page in (listing, detail):
        assert secret.encode() not in page.content and row.key_hash.encode() not in page.content
    assert client.get("/admin/ingest/ingesttoken/add/").status_code == 403
    r = client.post(f"/admin/ingest/ingesttoken/{row.pk}/delete/", {"post": "yes"})
    assert r.status_code == 302 and not IngestToken.objects.exists()
    assert tokens.lookup(secret) is None
