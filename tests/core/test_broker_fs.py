"""The embedded filesystem broker (``autoscaler.broker_fs``): a consumer never sees a message file that is still
being written, and ``filesystem://`` resolves to it; a message sent through it reaches a consumer whole."""

from __future__ import annotations

import os
from queue import Empty

import pytest
from kombu import Connection
from kombu.transport import resolve_transport

import autoscaler.celery  # noqa: F401 - registers the transport for filesystem://
from autoscaler import broker_fs


def _connection(tmp_path) -> Connection:
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder), "store_processed": False,
               "control_folder": str(tmp_path / "control")}  # fmt: skip
    return Connection("filesystem://", transport_options=options)


def test_filesystem_urls_use_the_atomic_transport():
    assert resolve_transport("filesystem") is broker_fs.Transport


def test_a_message_is_invisible_until_it_is_whole_and_then_read_whole(tmp_path, monkeypatch):
    with _connection(tmp_path) as conn:
        writer, reader = conn.channel(), conn.channel()
        seen_while_writing: list[object] = []
        renamed: list[str] = []
        real_replace = os.replace

        def replace_after_a_read(src, dst):  # noqa: ANN001, ANN202
            # the file is written in full but not renamed yet: a consumer polling now must find nothing
            assert os.path.getsize(src) > 0 and not os.path.exists(dst)
            try:
                seen_while_writing.append(reader._get("jobs"))
            except Empty:
                pass
            renamed.append(dst)
            return real_replace(src, dst)

        monkeypatch.setattr(broker_fs.os, "replace", replace_after_a_read)
        payload = {"body": "x" * 100_000, "headers": {"task": "control.tick"}}
        writer._put("jobs", payload)
        assert len(renamed) == 1 and seen_while_writing == []  # written aside, renamed once, unseen before
        assert reader._get("jobs") == payload
        with pytest.raises(Empty):
            reader._get("jobs")
        assert os.listdir(tmp_path / "in") == []
