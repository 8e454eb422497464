"""Every model change has its migration (``makemigrations --check``), so a fresh database matches the models."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_model_change_lacks_a_migration():
    out = io.StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exit_:  # --check exits non-zero when a migration is missing
        pytest.fail(
            f"missing migration (run manage.py makemigrations):\n{out.getvalue()}", pytrace=exit_.code == 0
        )
