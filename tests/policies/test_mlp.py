"""The numpy MLP and the replay buffer of the deep policies: gradients, fitting, Adam, ring-buffer semantics."""

from __future__ import annotations

import numpy as np
import pytest

from policies.om.mlp import MLP, hidden_widths
from policies.om.replay import ReplayBuffer


def _loss(net: MLP, x: np.ndarray, y: np.ndarray, mask: np.ndarray | None) -> float:
    diff = net.predict(x) - y
    if mask is not None:
        diff = diff * mask
    return 0.5 * float(np.sum(diff * diff)) / len(x)


@pytest.mark.parametrize("use_mask", [False, True])
def test_gradients_match_finite_differences(use_mask: bool) -> None:
    rng = np.random.default_rng(3)
    net = MLP([5, 7, 6, 4, 3], rng)
    for b in net.biases:  # non-zero biases so every bias gradient is exercised
        b[...] = rng.normal(0.0, 0.3, size=b.shape)
    x = rng.normal(size=(9, 5))
    y = rng.normal(size=(9, 3))
    mask = (rng.random((9, 3)) < 0.5).astype(float) if use_mask else None
    loss, grads = net.gradients(x, y, mask)
    assert loss == pytest.approx(_loss(net, x, y, mask), rel=1e-12)
    h = 1e-6
    for p, g in zip(net.params(), grads, strict=True):
        assert g.shape == p.shape
        num = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + h
            up = _loss(net, x, y, mask)
            p[idx] = old - h
            down = _loss(net, x, y, mask)
            p[idx] = old
            num[idx] = (up - down) / (2 * h)
        np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("optimizer,lr", [("sgd", 0.05), ("adam", 0.01)])
def test_fits_a_smooth_regression(optimizer: str, lr: float) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(256, 2))
    y = np.sin(2 * x[:, :1]) + x[:, 1:] ** 2  # (256, 1)
    net = MLP([2, 32, 24, 1], np.random.default_rng(1), optimizer, lr)
    before = _loss(net, x, y, None)
    for _ in range(3000):
        idx = rng.integers(0, len(x), 32)
        net.train_step(x[idx], y[idx])
    after = _loss(net, x, y, None)
    baseline = 0.5 * float(np.var(y))  # loss of the best constant predictor
    assert after < 0.05 * baseline
    assert after < before


def test_adam_step_matches_hand_computation() -> None:
    net = MLP([2, 1], np.random.default_rng(0), "adam", lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8)
    net.weights[0][...] = [[0.5], [-0.25]]
    net.biases[0][...] = [0.1]
    x = np.array([[1.0, 2.0]])
    y = np.array([[1.0]])
    w, b = net.weights[0].copy(), net.biases[0].copy()
    m_w = np.zeros_like(w)
    v_w = np.zeros_like(w)
    m_b = np.zeros_like(b)
    v_b = np.zeros_like(b)
    for t in (1, 2):
        out = float((x @ w + b)[0, 0])  # one linear output, batch of one
        g_w = (out - 1.0) * x.T
        g_b = np.array([out - 1.0])
        m_w = 0.9 * m_w + 0.1 * g_w
        v_w = 0.999 * v_w + 0.001 * g_w**2
        m_b = 0.9 * m_b + 0.1 * g_b
        v_b = 0.999 * v_b + 0.001 * g_b**2
        w = w - 0.1 * (m_w / (1 - 0.9**t)) / (np.sqrt(v_w / (1 - 0.999**t)) + 1e-8)
        b = b - 0.1 * (m_b / (1 - 0.9**t)) / (np.sqrt(v_b / (1 - 0.999**t)) + 1e-8)
        net.train_step(x, y)
        np.testing.assert_allclose(net.weights[0], w, rtol=1e-12)
        np.testing.assert_allclose(net.biases[0], b, rtol=1e-12)
    assert net.updates == 2


def test_sgd_step_is_lr_times_gradient() -> None:
    net = MLP([3, 4, 2], np.random.default_rng(5), "sgd", lr=0.2)
    x = np.random.default_rng(6).normal(size=(4, 3))
    y = np.zeros((4, 2))
    before = [p.copy() for p in net.params()]
    _, grads = net.gradients(x, y)
    net.train_step(x, y)
    for p, p0, g in zip(net.params(), before, grads, strict=True):
        np.testing.assert_allclose(p, p0 - 0.2 * g, rtol=1e-13, atol=1e-15)


def test_state_round_trip_is_exact_and_continues_identically() -> None:
    rng = np.random.default_rng(2)
    a = MLP([4, 3, 2], np.random.default_rng(7), "adam", 0.01)
    x, y = rng.normal(size=(8, 4)), rng.normal(size=(8, 2))
    for _ in range(5):
        a.train_step(x, y)
    meta, arrays = a.state()
    b = MLP([4, 3, 2], np.random.default_rng(99), "adam", 0.01)
    b.load(meta, arrays)
    for _ in range(5):
        a.train_step(x, y)
        b.train_step(x, y)
    for p, q in zip(a.params(), b.params(), strict=True):
        assert np.array_equal(p, q)


def test_hidden_widths_are_three_quarters_of_each_input() -> None:
    assert hidden_widths(67) == [50, 38, 28]
    assert hidden_widths(4, layers=2) == [3, 2]


def test_bad_arguments_name_the_field() -> None:
    with pytest.raises(ValueError, match="optimizer"):
        MLP([2, 1], np.random.default_rng(0), "rmsprop")
    with pytest.raises(ValueError, match="lr"):
        MLP([2, 1], np.random.default_rng(0), "sgd", lr=0.0)
    with pytest.raises(ValueError, match="sizes"):
        MLP([2], np.random.default_rng(0))


# ---- replay buffer ------------------------------------------------------------------------------------


def _buffer(capacity: int) -> ReplayBuffer:
    return ReplayBuffer(capacity, {"k": ((2,), np.int16), "r": ((), np.float64)})


def test_replay_wraps_around_overwriting_the_oldest() -> None:
    buf = _buffer(3)
    for i in range(5):
        buf.add(k=[i, i + 1], r=float(i))
    assert len(buf) == 3
    assert buf.pos == 2
    # slots 0, 1 hold entries 3, 4; slot 2 still holds entry 2
    assert buf.data["r"].tolist() == [3.0, 4.0, 2.0]
    assert buf.data["k"][1].tolist() == [4, 5]


def test_replay_samples_only_filled_slots_and_is_seeded() -> None:
    buf = _buffer(100)
    for i in range(10):
        buf.add(k=[i, 0], r=float(i))
    s1 = buf.sample(np.random.default_rng(4), 500)
    s2 = buf.sample(np.random.default_rng(4), 500)
    assert np.array_equal(s1["r"], s2["r"])
    assert set(s1["r"].tolist()) <= set(range(10))
    assert len(set(s1["r"].tolist())) == 10  # 500 draws over 10 slots reach them all
    assert np.array_equal(s1["k"][:, 0], s1["r"].astype(np.int16))


def test_replay_state_round_trip() -> None:
    buf = _buffer(4)
    for i in range(6):
        buf.add(k=[i, -i], r=i / 3)
    meta, arrays = buf.state()
    other = _buffer(4)
    other.load(meta, arrays)
    assert (other.pos, other.size) == (buf.pos, buf.size)
    for name in buf.data:
        assert np.array_equal(other.data[name], buf.data[name])
    with pytest.raises(ValueError, match="missing fields"):
        buf.add(k=[1, 1])
    with pytest.raises(ValueError, match="capacity"):
        ReplayBuffer(0, {"r": ((), float)})
