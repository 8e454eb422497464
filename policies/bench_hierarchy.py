"""Benchmarks of the control hierarchy, dispatched from ``python -m policies.bench``.

``main_am`` (Application Manager: naive vs BO on paper 001's applications) lives in :mod:`policies.bench_am`;
``main_multilevel`` (Region/Infrastructure Managers, paper 004 Tables 1-2) is appended below by its owner.
"""

from __future__ import annotations


def main_am(argv: list[str] | None = None) -> int:
    """``python -m policies.bench am``: see :func:`policies.bench_am.main_am`."""
    from policies.bench_am import main_am as run

    return run(argv)


def main_multilevel(argv: list[str] | None = None) -> int:
    """``python -m policies.bench multilevel``: see :func:`policies.bench_multilevel.main`."""
    from policies.bench_multilevel import main as run

    return run(argv)


def main_centralized(argv: list[str] | None = None) -> int:
    """``python -m policies.bench centralized``: see :func:`policies.bench_centralized.main`."""
    from policies.bench_centralized import main as run

    return run(argv)
