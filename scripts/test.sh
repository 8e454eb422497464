#!/usr/bin/env bash
# Set up .venv if needed and run the whole test suite. Exits non-zero when a test fails and when no test ran.
# Extra arguments go to pytest. DATABASE_URL selects the database (default: SQLite under var/).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
status=0
.venv/bin/python -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "test.sh: no test was collected: failing" >&2
    exit 1
fi
exit "$status"
