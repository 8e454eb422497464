"""What the tests count in a run's replicas per period (shared by the policy and closed-loop tests)."""

from __future__ import annotations

from collections.abc import Sequence


def reversed_scale_ins(replicas: Sequence[int], within: int = 5) -> int:
    """Scale-ins of ``replicas`` (one count per period) followed by a scale-out within ``within`` periods."""
    ks = list(replicas)
    return sum(
        1
        for i in range(1, len(ks))
        if ks[i] < ks[i - 1] and any(ks[j] > ks[j - 1] for j in range(i + 1, min(len(ks), i + within + 1)))
    )
