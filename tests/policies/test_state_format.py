"""Agent state encoding: format 2 round-trips exactly; format-1 (npz) states written before stay readable."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from policies.base import STATE_FORMAT_VERSION, decode_state, encode_state


def _format1(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    header = json.dumps({"format": 1, "meta": meta}, sort_keys=True).encode()
    buf.write(len(header).to_bytes(4, "big"))
    buf.write(header)
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


ARRAYS = {
    "q": np.random.default_rng(1).normal(size=(7, 3, 5)),
    "counts": np.arange(12, dtype=np.int32).reshape(3, 4),
    "flag": np.array([True, False]),
    "scalar": np.array(3.5),
    "empty": np.zeros((0, 4)),
}


def test_format2_round_trip_is_exact():
    data = encode_state({"k": 1}, ARRAYS)
    assert json.loads(data[4 : 4 + int.from_bytes(data[:4], "big")])["format"] == STATE_FORMAT_VERSION == 2
    meta, arrays = decode_state(data)
    assert meta == {"k": 1} and set(arrays) == set(ARRAYS)
    for name, value in ARRAYS.items():
        assert arrays[name].dtype == value.dtype and arrays[name].shape == value.shape
        assert np.array_equal(arrays[name], value)
        assert arrays[name].flags.writeable


def test_format1_states_stay_readable():
    meta, arrays = decode_state(_format1({"old": True}, ARRAYS))
    assert meta == {"old": True}
    assert all(np.array_equal(arrays[k], v) for k, v in ARRAYS.items())


def test_unknown_format_is_refused():
    header = json.dumps({"format": 99, "meta": {}}).encode()
    with pytest.raises(ValueError, match="unsupported agent state format 99"):
        decode_state(len(header).to_bytes(4, "big") + header)
