#!/usr/bin/env bash
# Set up .venv if needed and run the whole test suite. Exits non-zero when a test fails and when no test ran.
# Extra arguments go to pytest. DATABASE_URL selects the database (default: SQLite under var/).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
# Flink tests (tests/connectors/flink) start a real cluster from apache-flink in its own .venv-flink.
source "$(dirname "${BASH_SOURCE[0]}")/flink_env.sh"
# Browser tests (tests/web) drive Debian's Chromium through Playwright: install it when missing (no download
# by Playwright itself). CI runs as root; elsewhere sudo is used if it is available without a password.
if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
    echo "test.sh: installing chromium for the browser tests (apt-get)" >&2
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
# the static checks before the tests (also .pre-commit-config.yaml): lint, layout, static types of the policy
# library and the connector interface ([tool.mypy] in pyproject.toml), no model change without its migration,
# every option of the registry documented (docs/options.md up to date)
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/python -m mypy
.venv/bin/python manage.py makemigrations --check --dry-run
.venv/bin/python -m policies.options --check
status=0
# three workers (TEST_WORKERS; 0 runs in this process): tests/conftest.py groups the tests so that each worker
# starts with one group of live-engine tests (Flink's connector; Spark's connector; both engines end to end) and all
# share the rest; the 15 slowest tests are printed at the end (test time is watched: CI runs the whole suite on a
# loaded machine)
.venv/bin/python -m pytest -n "${TEST_WORKERS:-3}" --dist loadgroup --no-loadscope-reorder --durations=15 "$@" \
    || status=$?
if [ "$status" -eq 5 ]; then
    echo "test.sh: no test was collected: failing" >&2
    exit 1
fi
exit "$status"
