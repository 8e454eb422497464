# Sourced by test.sh (or run directly): create .venv-flink (Python 3.11) with apache-flink when missing, then
# export FLINK_HOME (the pyflink directory, which holds bin/, lib/, conf/) and FLINK_PYTHON (the venv's python).
# apache-flink pins py4j/apache-beam/pandas versions that clash with pyspark in .venv, hence a separate venv.
# Idempotent: the install runs again only when FLINK_REQUIREMENT changes (stamp file).
set -euo pipefail
_FLINK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FLINK_REQUIREMENT="${FLINK_REQUIREMENT:-apache-flink==2.3.0}"
_FLINK_VENV="$_FLINK_ROOT/.venv-flink"
_FLINK_PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x "$_FLINK_VENV/bin/python" ]; then
    "$_FLINK_PY" -m venv "$_FLINK_VENV"
fi
_FLINK_STAMP="$_FLINK_VENV/.installed-$(echo "$FLINK_REQUIREMENT" | sha256sum | cut -c1-16)"
if [ ! -f "$_FLINK_STAMP" ]; then
    "$_FLINK_VENV/bin/python" -m pip install --quiet --upgrade pip
    "$_FLINK_VENV/bin/python" -m pip install --quiet "$FLINK_REQUIREMENT"
    rm -f "$_FLINK_VENV"/.installed-* && touch "$_FLINK_STAMP"
fi
FLINK_HOME="$("$_FLINK_VENV/bin/python" -c 'import os, pyflink; print(os.path.dirname(pyflink.__file__))')"
FLINK_PYTHON="$_FLINK_VENV/bin/python"
export FLINK_HOME FLINK_PYTHON
echo "FLINK_HOME=$FLINK_HOME"
