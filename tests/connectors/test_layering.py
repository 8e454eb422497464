"""connectors/ knows no Django and no control plane: no module imports ``autoscaler`` (not even inside a function),
and every module imports without Django settings configured."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONNECTORS = ROOT / "connectors"


def modules() -> list[Path]:
    return sorted(CONNECTORS.rglob("*.py"))


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports (top level, inside functions, under TYPE_CHECKING)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_no_connector_module_imports_the_control_plane_or_django():
    found = []
    for path in modules():
        rel = str(path.relative_to(ROOT))
        for name in imported(path):
            top = name.split(".")[0]
            if top in ("autoscaler", "django"):
                found.append(f"{rel}: import {name}")
    assert not found, "\n".join(found)
    assert len(modules()) > 20  # the walk found the package


def test_every_connector_module_imports_without_django_settings():
    names = [
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in modules()
        if "pipelines" not in p.parts  # job-side code, run inside Spark or PyFlink
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('autoscaler', 'django'))\n"
        "assert not loaded, loaded\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
