"""A small fully connected neural network written with numpy: ReLU hidden layers, a linear output, mean squared
error, backpropagation, and SGD or Adam updates.

It is the function approximator of the deep Q-learning policies (:mod:`policies.om.deep`). Everything is float64
and every parameter lives in a plain numpy array, so the network (weights and optimiser moments) serialises
exactly and a restored network continues bit-identically.

Shapes: an input batch ``x`` is ``(B, n_in)``; layer ``i`` maps ``h @ W[i] + b[i]`` with ``W[i]`` of shape
``(n_i, n_{i+1})``. The loss of a batch with targets ``y`` (``B x n_out``) and an optional 0/1 ``mask`` (which
outputs carry a target) is ``L = 1/(2B) * sum_b sum_o mask[b, o] * (out[b, o] - y[b, o])^2``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

OPTIMIZERS = ("sgd", "adam")


def hidden_widths(n_in: int, layers: int = 3, ratio: float = 0.75) -> list[int]:
    """Widths of ``layers`` hidden layers, each ``ratio`` times its own input width (rounded, at least 1);
    paper 001, Appendix B.3: three layers, each 3/4 of its input."""
    widths: list[int] = []
    width = n_in
    for _ in range(layers):
        width = max(1, int(round(ratio * width)))
        widths.append(width)
    return widths


class MLP:
    """Fully connected network ``sizes[0] -> ... -> sizes[-1]`` with ReLU on every hidden layer.

    ``optimizer``: "sgd" (plain gradient step ``theta -= lr * g``) or "adam" (Kingma & Ba, bias-corrected with
    ``beta1``, ``beta2``, ``eps``). Weights are initialised with Xavier/Glorot normal (std ``sqrt(2 / (fan_in +
    fan_out))``, as Deeplearning4j's XAVIER) from ``rng``; biases start at zero.
    """

    def __init__(
        self,
        sizes: list[int],
        rng: np.random.Generator,
        optimizer: str = "sgd",
        lr: float = 0.01,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
    ) -> None:
        if len(sizes) < 2 or any(int(s) < 1 for s in sizes):
            raise ValueError(f"sizes: need at least input and output widths >= 1, got {sizes}")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer: must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
        if not lr > 0:
            raise ValueError(f"lr: must be > 0, got {lr}")
        self.sizes = [int(s) for s in sizes]
        self.optimizer = optimizer
        self.lr = float(lr)
        self.beta1, self.beta2, self.eps = float(beta1), float(beta2), float(eps)
        self.weights: list[np.ndarray] = []
        self.biases: list[np.ndarray] = []
        for n_in, n_out in zip(self.sizes[:-1], self.sizes[1:], strict=True):
            std = np.sqrt(2.0 / (n_in + n_out))
            self.weights.append(rng.normal(0.0, std, size=(n_in, n_out)))
            self.biases.append(np.zeros(n_out))
        self.updates = 0  # optimiser steps taken (Adam's bias correction uses it)
        self.m = [np.zeros_like(p) for p in self.params()]
        self.v = [np.zeros_like(p) for p in self.params()]

    # ---- parameters -----------------------------------------------------------------------------------
    def params(self) -> list[np.ndarray]:
        """All parameter arrays in a fixed order: W0, b0, W1, b1, ..."""
        out: list[np.ndarray] = []
        for w, b in zip(self.weights, self.biases, strict=True):
            out.extend((w, b))
        return out

    @property
    def n_layers(self) -> int:
        return len(self.weights)

    # ---- forward / backward ---------------------------------------------------------------------------
    def predict(self, x: np.ndarray) -> np.ndarray:
        """Outputs ``(B, n_out)`` for inputs ``x`` ``(B, n_in)``."""
        h = x
        last = self.n_layers - 1
        for i in range(self.n_layers):
            z = h @ self.weights[i]
            z += self.biases[i]
            if i < last:
                np.maximum(z, 0.0, out=z)
            h = z
        return h

    def forward(self, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Outputs and the activations of every layer (input first), kept for :meth:`gradients`."""
        acts = [x]
        h = x
        last = self.n_layers - 1
        for i in range(self.n_layers):
            z = h @ self.weights[i]
            z += self.biases[i]
            if i < last:
                np.maximum(z, 0.0, out=z)
            acts.append(z)
            h = z
        return h, acts

    def gradients(
        self, x: np.ndarray, y: np.ndarray, mask: np.ndarray | None = None
    ) -> tuple[float, list[np.ndarray]]:
        """Loss and its gradient with respect to every parameter (order of :meth:`params`)."""
        out, acts = self.forward(x)
        batch = x.shape[0]
        diff = out - y
        if mask is not None:
            diff = diff * mask
        loss = 0.5 * float(np.sum(diff * diff)) / batch
        delta = diff / batch
        grads: list[np.ndarray] = [np.empty(0)] * (2 * self.n_layers)
        for i in range(self.n_layers - 1, -1, -1):
            grads[2 * i] = acts[i].T @ delta
            grads[2 * i + 1] = delta.sum(axis=0)
            if i > 0:
                delta = delta @ self.weights[i].T
                delta *= acts[i] > 0.0  # ReLU derivative (0 at 0)
        return loss, grads

    def apply(self, grads: list[np.ndarray]) -> None:
        """One optimiser step with the given gradients (in place)."""
        self.updates += 1
        params = self.params()
        if self.optimizer == "sgd":
            for p, g in zip(params, grads, strict=True):
                p -= self.lr * g
            return
        b1, b2 = self.beta1, self.beta2
        corr1 = 1.0 - b1**self.updates
        corr2 = 1.0 - b2**self.updates
        step = self.lr * np.sqrt(corr2) / corr1
        for p, g, m, v in zip(params, grads, self.m, self.v, strict=True):
            m *= b1
            m += (1.0 - b1) * g
            v *= b2
            v += (1.0 - b2) * (g * g)
            p -= step * m / (np.sqrt(v) + self.eps * np.sqrt(corr2))

    def train_step(self, x: np.ndarray, y: np.ndarray, mask: np.ndarray | None = None) -> float:
        """One gradient step on the batch ``(x, y)``; returns the loss before the step."""
        loss, grads = self.gradients(x, y, mask)
        self.apply(grads)
        return loss

    # ---- durable state --------------------------------------------------------------------------------
    def state(self, prefix: str = "net") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """JSON-able metadata and the arrays (weights, biases, optimiser moments), for an exact round trip."""
        meta = {
            "sizes": self.sizes,
            "optimizer": self.optimizer,
            "lr": self.lr,
            "beta1": self.beta1,
            "beta2": self.beta2,
            "eps": self.eps,
            "updates": self.updates,
        }
        arrays: dict[str, np.ndarray] = {}
        for j, p in enumerate(self.params()):
            arrays[f"{prefix}_p{j}"] = p
        if self.optimizer == "adam":
            for j, (m, v) in enumerate(zip(self.m, self.v, strict=True)):
                arrays[f"{prefix}_m{j}"] = m
                arrays[f"{prefix}_v{j}"] = v
        return meta, arrays

    def load(self, meta: dict[str, Any], arrays: dict[str, np.ndarray], prefix: str = "net") -> None:
        """Restore what :meth:`state` returned (shapes must match this network's)."""
        if list(meta["sizes"]) != self.sizes:
            raise ValueError(f"network sizes differ: state has {meta['sizes']}, network has {self.sizes}")
        self.optimizer = meta["optimizer"]
        self.lr = float(meta["lr"])
        self.beta1, self.beta2, self.eps = float(meta["beta1"]), float(meta["beta2"]), float(meta["eps"])
        self.updates = int(meta["updates"])
        for j, p in enumerate(self.params()):
            p[...] = arrays[f"{prefix}_p{j}"]
        for j, (m, v) in enumerate(zip(self.m, self.v, strict=True)):
            if f"{prefix}_m{j}" in arrays:
                m[...] = arrays[f"{prefix}_m{j}"]
                v[...] = arrays[f"{prefix}_v{j}"]
            else:
                m[...] = 0.0
                v[...] = 0.0
