"""The deployment index shared by tabular policies: lazy dense ids, cached feasibility/successors, round trip."""

from __future__ import annotations

import numpy as np
import pytest

from policies.base import apply_action, feasible_actions
from policies.om.tabular import DeploymentIndex
from policies.operator_model import OperatorSpec, infrastructure


def _index(n_res: int = 3, k_max: int = 4) -> tuple[DeploymentIndex, OperatorSpec]:
    spec = OperatorSpec(infrastructure("A", n_res), k_max=k_max)
    return DeploymentIndex(n_res, k_max, spec.prices, spec.k_min), spec


def test_ids_are_dense_in_order_of_first_use_and_lookup_does_not_assign() -> None:
    index, _ = _index()
    assert index.lookup((1, 0, 0)) is None
    assert len(index) == 0
    assert index.id_of((0, 2, 0)) == 0
    assert index.id_of((1, 0, 0)) == 1
    assert index.id_of((0, 2, 0)) == 0
    assert index.lookup((1, 0, 0)) == 1
    assert index.keys == [(0, 2, 0), (1, 0, 0)]
    assert index.totals == [2, 1]


def test_price_is_bit_identical_to_the_spec() -> None:
    index, spec = _index(n_res=3, k_max=10)
    for key in [(1, 0, 0), (3, 2, 5), (0, 7, 1), (2, 2, 2)]:
        d = index.id_of(key)
        assert index.price[d] == spec.price(np.array(key, dtype=np.int64))


@pytest.mark.parametrize("key", [(1, 0, 0), (0, 0, 1), (2, 1, 1), (0, 4, 0), (1, 1, 1)])
def test_feasible_and_successors_match_the_base_rules(key: tuple[int, ...]) -> None:
    index, spec = _index(n_res=3, k_max=4)
    d = index.id_of(key)
    k = np.array(key)
    assert index.feasible(d) == feasible_actions(k, spec.k_max, spec.k_min)
    succ = index.successors(d)
    assert len(succ) == 7
    for a in range(7):
        if a in index.feasible(d):
            assert index.keys[succ[a]] == tuple(apply_action(k, a).tolist())
        else:
            assert succ[a] == -1


def test_feasibility_at_one_replica_and_at_k_max() -> None:
    index, _ = _index(n_res=2, k_max=3)
    one = index.id_of((0, 1))
    assert index.feasible(one) == [0, 3, 4]  # no removal below one replica
    full = index.id_of((2, 1))
    assert index.feasible(full) == [0, 1, 2]  # no addition above K_max


def test_listener_sees_every_new_id() -> None:
    index, _ = _index()
    seen: list[int] = []
    index.add_listener(seen.append)
    index.id_of((1, 0, 0))
    index.successors(0)  # assigns the 3 neighbours reachable by adding
    assert seen == [0, 1, 2, 3]


def test_keys_round_trip_reproduces_ids() -> None:
    index, spec = _index(n_res=3, k_max=5)
    for key in [(1, 0, 0), (2, 1, 0), (0, 0, 3)]:
        index.successors(index.id_of(key))
    other = DeploymentIndex(3, 5, spec.prices)
    other.load_keys(index.keys_array())
    assert other.keys == index.keys
    assert other.price == index.price
    assert other.id_of((4, 0, 0)) == index.id_of((4, 0, 0)) == len(index) - 1


def test_bad_deployments_are_rejected_with_the_reason() -> None:
    index, _ = _index(n_res=3, k_max=4)
    with pytest.raises(ValueError, match="sum to 1..4"):
        index.id_of((3, 1, 1))
    with pytest.raises(ValueError, match="sum to 1..4"):
        index.id_of((0, 0, 0))
    with pytest.raises(ValueError, match="3 entries"):
        index.id_of((1, 0))
    with pytest.raises(ValueError, match="shape"):
        index.load_keys(np.zeros((2, 2), dtype=np.int16))
