# Sourced by demo.sh and test.sh: create .venv (Python 3.11+) if missing and install the project with its
# dev and spark extras (pyspark, pyarrow, pandas: the Spark demo and tests) when pyproject.toml changed since the
# last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
STAMP=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$STAMP" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e '.[dev,spark]'
    rm -f .venv/.installed-* && touch "$STAMP"
fi
