"""A compact Gaussian-process regressor (Matern 5/2 kernel) and expected improvement, numpy + scipy only.

Used by the Bayesian-optimisation AM (paper 001 Sec. 5.2: Matern nu = 5/2 surrogate, expected-improvement
acquisition). Inputs are points of the unit box; outputs are standardised internally (``normalize_y``).
Hyperparameters (an isotropic length scale, the signal variance and the noise variance) are fitted by maximising
the log marginal likelihood: a grid over length scale and noise-to-signal ratio, the signal variance in closed
form (L-BFGS-B over the same likelihood was ~50x slower on this machine for no better optima at <= 100 points).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cho_factor, cho_solve
from scipy.stats import norm

SQRT5 = math.sqrt(5.0)
LENGTHSCALE_GRID = tuple(float(v) for v in np.geomspace(0.03, 3.0, 12))
NOISE_RATIO_GRID = (1e-6, 1e-4, 1e-2, 1e-1)


def matern52(x1: np.ndarray, x2: np.ndarray, lengthscales: np.ndarray | float, variance: float) -> np.ndarray:
    """Matern 5/2 covariance ``variance * (1 + sqrt5 d + 5/3 d^2) exp(-sqrt5 d)``, ``d`` the distance scaled per
    dimension by ``lengthscales``. ``x1``: (n, dim), ``x2``: (m, dim); returns (n, m)."""
    a = np.atleast_2d(x1) / lengthscales
    b = np.atleast_2d(x2) / lengthscales
    sq = np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T, 0.0)
    d = np.sqrt(sq)
    return variance * (1.0 + SQRT5 * d + 5.0 / 3.0 * sq) * np.exp(-SQRT5 * d)


class GaussianProcess:
    """GP regression with a Matern 5/2 kernel.

    With ``optimize=False`` the given ``lengthscale``, ``variance`` and ``noise`` are used as they are.
    """

    def __init__(
        self,
        lengthscale: float | np.ndarray = 0.3,
        variance: float = 1.0,
        noise: float = 1e-6,
        optimize: bool = True,
        normalize_y: bool = True,
        seed: int = 0,
    ) -> None:
        self.lengthscale = lengthscale
        self.variance = float(variance)
        self.noise = float(noise)
        self.optimize = optimize
        self.normalize_y = normalize_y
        self.rng = np.random.default_rng(seed)
        self._x: np.ndarray | None = None

    def _concentrated_nll(
        self, x: np.ndarray, y: np.ndarray, lengthscale: float, ratio: float
    ) -> tuple[float, float]:
        """Negative log marginal likelihood with the signal variance profiled out (K = s2 (C + ratio I)):
        returns (nll, best s2)."""
        n = len(x)
        c = matern52(x, x, lengthscale, 1.0) + (ratio + 1e-10) * np.eye(n)
        try:
            chol = cho_factor(c, lower=True)
        except np.linalg.LinAlgError:
            return math.inf, 1.0
        s2 = max(float(y @ cho_solve(chol, y)) / n, 1e-12)
        nll = (
            0.5 * n * math.log(s2)
            + float(np.log(np.diag(chol[0])).sum())
            + 0.5 * n * (1 + math.log(2 * math.pi))
        )
        return nll, s2

    def fit(self, x: np.ndarray, y: np.ndarray) -> GaussianProcess:
        """Condition on observations ``x`` (n, dim) and ``y`` (n,)."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        y = np.asarray(y, dtype=float).ravel()
        if len(x) != len(y):
            raise ValueError(f"x and y: need as many points as values, got {len(x)} and {len(y)}")
        if not np.isfinite(y).all():
            raise ValueError("y: observations must be finite")
        self._mean, self._std = (float(y.mean()), float(y.std()) or 1.0) if self.normalize_y else (0.0, 1.0)
        yn = (y - self._mean) / self._std
        if self.optimize and len(x) >= 2:
            # maximum likelihood over a grid of (isotropic length scale, noise-to-signal ratio), signal variance
            # in closed form: robust and fast for the <= 100 points of an AM optimisation
            best = (math.inf, 0.3, 1.0, 1e-3)
            for ls in LENGTHSCALE_GRID:
                for ratio in NOISE_RATIO_GRID:
                    nll, s2 = self._concentrated_nll(x, yn, ls, ratio)
                    if nll < best[0]:
                        best = (nll, ls, s2, ratio)
            _, self.lengthscale, self.variance, ratio = best
            self.noise = ratio * self.variance
        k = matern52(x, x, self.lengthscale, self.variance) + (self.noise + 1e-10) * np.eye(len(x))
        self._chol = cho_factor(k, lower=True)
        self._alpha = cho_solve(self._chol, yn)
        self._x = x
        return self

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation (of the latent function) at ``x`` (m, dim)."""
        if self._x is None:
            raise ValueError("GaussianProcess.predict: call fit() first")
        x = np.atleast_2d(np.asarray(x, dtype=float))
        ks = matern52(x, self._x, self.lengthscale, self.variance)
        mean = ks @ self._alpha
        v = cho_solve(self._chol, ks.T)
        var = np.maximum(self.variance - (ks * v.T).sum(1), 1e-18)
        return mean * self._std + self._mean, np.sqrt(var) * self._std


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float, xi: float = 0.0) -> np.ndarray:
    """Expected improvement below ``best`` (minimisation): ``E[max(best - xi - f, 0)]`` for f ~ N(mean, std^2)."""
    std = np.maximum(std, 1e-12)
    gap = best - xi - mean
    z = gap / std
    return gap * norm.cdf(z) + std * norm.pdf(z)
