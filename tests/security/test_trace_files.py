"""A simulated application's trace: a shipped name or a file under a directory the installation allows.

A user must not make the server read an arbitrary file (``spec.connector.trace: /etc/passwd``), and no error may
quote a line of a file the server read. Through the REST API (a non-staff user): an undeclared path, a relative
path and a ``..`` escape from an allowed directory are refused at ``spec.connector.trace`` and nothing is stored;
a file under ``AUTOSCALER_TRACE_DIRS`` is accepted and its rates drive the simulated engine; a file there that is
not a trace gives an error naming the file, not its content.
"""

from __future__ import annotations

import pytest

from autoscaler.control.simulated_engine import load_trace_rates
from autoscaler.models import Application
from connectors.traces import TraceNotAllowed, read_rates, resolve_trace

from .test_ssrf import api_for, app, locs, pool  # noqa: F401 (pool: the staff-declared region, used below)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("pool")]

SECRET = "root:TOP-SECRET-4b1d:0:0"


@pytest.fixture
def secret_file(tmp_path):
    path = tmp_path / "outside" / "passwd"
    path.parent.mkdir()
    path.write_text(f"{SECRET}\n")
    return path


@pytest.fixture
def trace_dir(tmp_path, settings):
    directory = tmp_path / "traces"
    directory.mkdir()
    settings.AUTOSCALER_TRACE_DIRS = [str(directory)]
    return directory


def post_simulated(user, trace: str):
    return api_for(user).post("/api/v1/applications/", app("simulated", {"trace": trace}), format="json")


def test_a_path_outside_the_allowed_directories_is_refused_and_nothing_is_stored(
    alice, secret_file, trace_dir
):
    escape = str(trace_dir / ".." / "outside" / "passwd")
    for trace in (str(secret_file), "outside/passwd", escape, "../../etc/passwd"):
        response = post_simulated(alice, trace)
        assert response.status_code == 400, trace
        errors = locs(response)
        assert "AUTOSCALER_TRACE_DIRS" in errors["spec.connector.trace"]
        assert SECRET not in response.content.decode()
    assert not Application.objects.exists()


def test_without_allowed_directories_only_shipped_traces_are_accepted(alice, secret_file, settings):
    settings.AUTOSCALER_TRACE_DIRS = []
    assert post_simulated(alice, str(secret_file)).status_code == 400
    assert post_simulated(alice, "taxi_last_month").status_code == 201


def test_a_file_under_an_allowed_directory_drives_the_engine(alice, trace_dir):
    trace = trace_dir / "steps.txt"
    trace.write_text("100\n250.5\n")
    assert post_simulated(alice, str(trace)).status_code == 201
    assert load_trace_rates(str(trace), (str(trace_dir),)) == (100.0, 250.5)


def test_reading_a_file_that_is_not_a_trace_never_quotes_it(trace_dir):
    bogus = trace_dir / "bogus.txt"
    bogus.write_text(f"10\n{SECRET}\n")
    with pytest.raises(TraceNotAllowed) as caught:
        read_rates(resolve_trace(str(bogus), [trace_dir]))
    assert "bogus.txt" in str(caught.value) and SECRET not in str(caught.value)
    with pytest.raises(ValueError) as caught:
        load_trace_rates(str(bogus), (str(trace_dir),))
    assert str(caught.value).startswith("connector.trace:") and SECRET not in str(caught.value)


def test_a_symlink_out_of_an_allowed_directory_is_refused(trace_dir, secret_file):
    link = trace_dir / "link.txt"
    link.symlink_to(secret_file)
    with pytest.raises(TraceNotAllowed):
        resolve_trace(str(link), [trace_dir])
