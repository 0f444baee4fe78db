"""The backend seams without MPI: placement of partitions on ranks, the
one-process communicator, and the classifiers' work estimate used to place
their partitions."""

from types import SimpleNamespace

import numpy as np
import pytest

from cakernels import BKMSVC
from cakernels.backends import SelfCommunicator
from cakernels.backends._backend import lpt_placement


@pytest.mark.parametrize("n_tasks, n_ranks", [(16, 2), (7, 3), (3, 4), (10, 10)])
def test_equal_costs_spread_evenly(n_tasks, n_ranks):
    owners = lpt_placement(np.ones(n_tasks), n_ranks)
    counts = np.bincount(owners, minlength=n_ranks)
    assert counts.max() - counts.min() <= 1 and counts.sum() == n_tasks


def test_lpt_balances_unequal_costs():
    costs = np.array([5.0, 4, 3, 3, 2, 2, 1])
    owners = lpt_placement(costs, 2)
    loads = np.bincount(owners, weights=costs, minlength=2)
    # LPT: the largest task first to the least loaded rank
    assert owners[0] == 0 and owners[1] == 1
    assert sorted(loads.tolist()) == [10.0, 10.0]


def test_self_communicator_allgather_stacks_one_rank():
    comm = SelfCommunicator()
    a = np.arange(4)
    out = comm.Allgather(a)
    assert out.shape == (1, 4) and np.array_equal(out[0], a)
    out[0, 0] = 99
    assert a[0] == 0  # a copy, never the caller's array


def test_classifier_placement_costs_weigh_one_class_partitions_little():
    est = BKMSVC(n_partitions=3)
    est.classes_ = np.array(["a", "b", "c"])
    s = SimpleNamespace(comm=SelfCommunicator())
    # partition 0: one class only; 1: 10 vs 10 of two classes; 2: 18 vs 2
    labels = np.repeat([0, 1, 1, 2, 2], [20, 10, 10, 18, 2])
    y = np.repeat([0, 0, 1, 2, 1], [20, 10, 10, 18, 2])
    sizes = np.bincount(labels)
    costs = est._placement_costs(s, y, labels, sizes)
    # one-vs-one: sum over pairs of (n_a + n_b) * min(n_a, n_b), plus the size
    assert costs.tolist() == [20.0, 20 + 20 * 10, 20 + 20 * 2]
    # without this rank's rows (root mode on another rank) only the sizes count
    assert est._placement_costs(s, None, np.zeros(0, np.intp), sizes).tolist() == [20, 20, 20]
