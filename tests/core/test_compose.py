"""docker-compose.yml and the Dockerfiles stay consistent with the code (no Docker daemon needed here).

Docker is not available on the CI machine, so these checks read the files: every package the project installs is
copied into each image, every service a service depends on exists, every module or management command a service
runs exists, every required variable has a line in .env.example, and the Spark stages name an example application.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import yaml
from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def _packages() -> list[str]:
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return sorted(p.rstrip("*") for p in include["include"])


def _dockerfiles() -> dict[str, str]:
    files = {"Dockerfile": (ROOT / "Dockerfile").read_text()}
    for name, service in SERVICES.items():
        inline = (
            (service.get("build") or {}).get("dockerfile_inline")
            if isinstance(service.get("build"), dict)
            else None
        )
        if inline:
            files[f"{name} (inline)"] = inline
    return files


def _command(service: dict) -> str:
    command = service.get("command", "")
    return " ".join(command) if isinstance(command, list) else str(command)


def test_every_installed_package_is_copied_into_every_image():
    for name, text in _dockerfiles().items():
        copied = set(re.findall(r"^\s*COPY\s+(\S+)\s", text, flags=re.M))
        missing = [p for p in _packages() if p not in copied]
        assert not missing, f"{name} does not COPY {missing}"


def test_dependencies_name_existing_services():
    for name, service in SERVICES.items():
        for dep in service.get("depends_on") or {}:
            assert dep in SERVICES, f"{name} depends on unknown service {dep!r}"


def test_commands_run_existing_modules_and_management_commands():
    commands = get_commands()
    for name, service in SERVICES.items():
        cmd = _command(service)
        tokens = cmd.split()
        for module in [tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t == "-m"]:
            assert importlib.util.find_spec(module) is not None, f"{name}: no module {module}"
        for sub in re.findall(r"manage\.py (\w+)", cmd):
            assert sub in commands, f"{name}: no management command {sub!r}"
        for path in re.findall(r"-f (\S+)", cmd):
            assert (ROOT / path).exists(), f"{name}: {path} does not exist"
        if tokens and tokens[0] == "celery":
            assert tokens[tokens.index("-A") + 1] == "autoscaler", f"{name}: celery app is not autoscaler"


def test_required_variables_are_in_env_example():
    text = (ROOT / "docker-compose.yml").read_text()
    required = set(re.findall(r"\$\{(\w+):\?", text))
    example = {
        line.split("=", 1)[0] for line in (ROOT / ".env.example").read_text().splitlines() if "=" in line
    }
    assert required and required <= example, required - example


def test_spark_stages_control_an_example_application():
    names = set()
    for path in (ROOT / "manifests" / "examples").glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "Application":
                names.add(doc["metadata"]["name"])
    stages = [s for s in SERVICES.values() if "connectors.spark.pipelines.run" in _command(s)]
    assert stages
    for service in stages:
        command = service["command"]
        assert command[command.index("--application") + 1] in names


def test_web_is_published_on_loopback_only_and_shares_its_cache():
    """Plain HTTP reaches the web service from this host's TLS proxy only; the gunicorn workers share one cache
    (login throttling counts across them)."""
    web = SERVICES["web"]
    assert all(str(p).startswith("127.0.0.1:") for p in web["ports"]), web["ports"]
    assert str(web["environment"]["CACHE_URL"]).startswith("redis://redis:")


def test_env_example_turns_debug_off_and_https_on():
    example = dict(
        line.split("=", 1) for line in (ROOT / ".env.example").read_text().splitlines() if "=" in line
        and not line.startswith("#")
    )  # fmt: skip
    assert example["DJANGO_DEBUG"] == "false" and "DEBUG" not in example
    for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE"):
        assert example[name] == "true", name
    assert int(example["SECURE_HSTS_SECONDS"]) >= 31536000


def test_hosts_the_services_call_the_web_service_by_are_allowed():
    """The Spark stages (and a Prometheus in the compose network) call http://web:8000: Django must accept that
    Host header with the production settings, or every agent call is a 400."""
    allowed = next(
        line.split("=", 1)[1].split(",")
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line.startswith("ALLOWED_HOSTS=")
    )
    called = set()
    for service in SERVICES.values():
        called |= set(re.findall(r"https?://([A-Za-z0-9.-]+):8000", _command(service)))
    assert called and called <= set(allowed), (called, allowed)


def test_prometheus_scrapes_the_web_service_with_the_metrics_token():
    service = SERVICES["prometheus"]
    assert service["profiles"] == ["monitoring"]
    mount = next(v for v in service["volumes"] if v.endswith(":/etc/prometheus/prometheus.yml:ro"))
    config = yaml.safe_load((ROOT / mount.split(":")[0]).read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics" and job["static_configs"][0]["targets"] == ["web:8000"]
    secret = service["secrets"][0]
    assert job["authorization"] == {"type": "Bearer", "credentials_file": f"/run/secrets/{secret}"}
    assert COMPOSE["secrets"][secret] == {"environment": "METRICS_TOKEN"}
    assert "METRICS_TOKEN" in (ROOT / ".env.example").read_text()
