"""Partitioners: the thesis' worked example, brute-force references, balance."""

import numpy as np
import pytest
import scipy.sparse as sp

from cakernels.partition import (
    PARTITIONERS,
    BKMPartitioner,
    FCFSPartitioner,
    KBalancePartitioner,
    KMeansPartitioner,
    RandomPartitioner,
    _Capacity,
    greedy_capacity_assign,
    make_partitioner,
    squared_distances,
)

# Figure 2.3 of the reference: dist[center][sample], 4 centres, 8 samples.
FIG_2_3 = np.array([
    [5, 7, 3, 8, 2, 0, 8, 0],
    [4, 1, 6, 3, 7, 3, 9, 4],
    [1, 2, 8, 4, 4, 7, 6, 1],
    [3, 0, 4, 1, 6, 1, 4, 9],
], dtype=float)


def test_fcfs_worked_example_figure_2_3():
    # 2.3.2-2.3.9: S0->C2, S1->C3, S2->C0, S3->C3, S4->C0, S5->C1, S6->C2, S7->C1
    labels = greedy_capacity_assign(FIG_2_3.T, _Capacity(8, 4))
    assert labels.tolist() == [2, 3, 0, 3, 0, 1, 2, 1]


# --------------------------------------------------------------------------
# literal transcriptions of the pseudo-code (one sample at a time), with the
# documented rule for m not divisible by P: the first m mod P partitions to
# reach ceil(m/P) keep it, then every cap is floor(m/P)
# --------------------------------------------------------------------------
class _Caps:
    def __init__(self, m, P):
        self.lo, self.r = m // P, m % P
        self.hi = self.lo + (self.r > 0)
        self.n_hi = 0

    @property
    def cap(self):
        return self.hi if self.n_hi < self.r else self.lo

    def grew(self, size):
        if self.r > 0 and self.n_hi < self.r and size == self.hi:
            self.n_hi += 1


def fcfs_reference(D):
    """Algorithm 3 / 9, lines 'for i in 1:m ... if dist < mindis and CS[j] < balanced'."""
    m, P = D.shape
    caps, CS, MB = _Caps(m, P), np.zeros(P, int), np.zeros(m, int)
    for i in range(m):
        mindis, minind = np.inf, -1
        for j in range(P):
            if D[i, j] < mindis and CS[j] < caps.cap:
                mindis, minind = D[i, j], j
        CS[minind] += 1
        MB[i] = minind
        caps.grew(CS[minind])
    return MB


def bkm_reference(D):
    """Algorithm 4 lines 9-26: move the farthest members of over-full clusters."""
    m, P = D.shape
    MB = np.argmin(D, axis=1)
    CS = np.bincount(MB, minlength=P)
    caps = _Caps(m, P)
    over = [j for j in range(P) if CS[j] > caps.lo]
    for j in over:
        keep = caps.cap if caps.r > 0 else caps.lo
        if CS[j] >= keep:
            caps.grew(keep) if keep == caps.hi else None
        while CS[j] > keep:
            maxdist, maxind = -1.0, -1
            for i in range(m):
                if D[i, j] > maxdist and MB[i] == j:
                    maxdist, maxind = D[i, j], i
            mindist, minind = np.inf, j
            for k in range(P):
                if k in over and over.index(k) >= over.index(j):
                    continue  # not processed yet (still over-full) or itself
                if D[maxind, k] < mindist and CS[k] < caps.cap:
                    mindist, minind = D[maxind, k], k
            MB[maxind] = minind
            CS[j] -= 1
            CS[minind] += 1
            caps.grew(CS[minind])
    return MB


@pytest.mark.parametrize("m,P", [(8, 4), (40, 4), (41, 4), (103, 7), (17, 16), (5, 5)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_assignment_equals_literal_loop(m, P, seed):
    rng = np.random.RandomState(seed)
    D = rng.rand(m, P)
    labels = greedy_capacity_assign(D, _Capacity(m, P))
    np.testing.assert_array_equal(labels, fcfs_reference(D))


@pytest.mark.parametrize("m,P", [(40, 4), (41, 4), (103, 7), (30, 3)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bkm_rebalance_equals_literal_loop(m, P, seed):
    rng = np.random.RandomState(seed)
    # skewed clusters: most samples are nearest to centre 0 or 1
    D = rng.rand(m, P) + np.r_[0.0, 0.2, 0.6, 0.9, 1.0, 1.1, 1.2][:P]
    labels = BKMPartitioner._rebalance(D, np.argmin(D, axis=1))
    np.testing.assert_array_equal(labels, bkm_reference(D))


@pytest.mark.parametrize("name", sorted(PARTITIONERS))
@pytest.mark.parametrize("m,P", [(100, 4), (103, 8), (16, 16)])
def test_partitioners_cover_every_sample(name, m, P):
    X = np.random.RandomState(0).randn(m, 3)
    part = make_partitioner(name, P, 0).fit(X)
    assert part.labels_.shape == (m,)
    assert part.sizes_.sum() == m
    assert part.centers_.shape == (part.n_partitions_, 3)
    assert np.all(part.sizes_ > 0)
    if part.balanced:
        assert part.n_partitions_ == P
        assert set(part.sizes_.tolist()) <= {m // P, -(-m // P)}


@pytest.mark.parametrize("cls", [RandomPartitioner, KBalancePartitioner, FCFSPartitioner,
                                 BKMPartitioner])
def test_recomputed_centers_are_partition_means(cls):
    X = np.random.RandomState(1).randn(90, 4)
    part = cls(n_partitions=3, random_state=0).fit(X)
    for j in range(3):
        np.testing.assert_allclose(part.centers_[j], X[part.labels_ == j].mean(axis=0))


def test_fcfs_uses_random_samples_as_centres_in_data_order():
    X = np.random.RandomState(2).randn(60, 2)
    part = FCFSPartitioner(n_partitions=4, recompute_centers=False, random_state=3).fit(X)
    # the initial centres are samples of X
    d = squared_distances(part.initial_centers_, X)
    assert np.all(d.min(axis=1) < 1e-12)
    np.testing.assert_array_equal(part.labels_,
                                  fcfs_reference(squared_distances(X, part.initial_centers_)))


def test_kbalance_follows_kmeans_then_data_order():
    X = np.random.RandomState(4).randn(120, 3)
    km = KMeansPartitioner(n_partitions=5, random_state=7).fit(X)
    kb = KBalancePartitioner(n_partitions=5, random_state=7, recompute_centers=False).fit(X)
    np.testing.assert_allclose(kb.centers_, km.centers_)
    np.testing.assert_array_equal(kb.labels_, fcfs_reference(squared_distances(X, km.centers_)))


def test_kbalance_regret_order_is_balanced_and_closer():
    rng = np.random.RandomState(5)
    X = np.r_[rng.randn(300, 2), rng.randn(60, 2) + 6]
    data = KBalancePartitioner(n_partitions=4, random_state=0).fit(X)
    regret = KBalancePartitioner(n_partitions=4, random_state=0, assign_order="regret").fit(X)
    assert set(regret.sizes_.tolist()) == {90}
    D_data = squared_distances(X, data.centers_)
    cost = lambda p: squared_distances(X, p.centers_)[np.arange(len(X)), p.labels_].sum()
    assert D_data.shape == (360, 4)
    assert cost(regret) <= cost(data) * 1.05


def test_assign_is_nearest_centre_brute_force():
    rng = np.random.RandomState(6)
    X, T = rng.randn(200, 5), rng.randn(50, 5)
    for name in PARTITIONERS:
        part = make_partitioner(name, 6, 0).fit(X)
        brute = np.array([np.argmin(((part.centers_ - t) ** 2).sum(axis=1)) for t in T])
        np.testing.assert_array_equal(part.assign(T), brute)


def test_random_state_is_honoured():
    X = np.random.RandomState(7).randn(100, 3)
    for name in PARTITIONERS:
        a = make_partitioner(name, 4, 11).fit(X).labels_
        b = make_partitioner(name, 4, 11).fit(X).labels_
        np.testing.assert_array_equal(a, b)
    a = RandomPartitioner(4, random_state=1).fit(X).labels_
    b = RandomPartitioner(4, random_state=2).fit(X).labels_
    assert not np.array_equal(a, b)


def test_sparse_and_dense_agree():
    rng = np.random.RandomState(8)
    X = rng.rand(80, 10) * (rng.rand(80, 10) > 0.6)
    for name in ["random", "fcfs", "kbalance", "bkm", "kmeans"]:
        dense = make_partitioner(name, 4, 0).fit(X)
        sparse = make_partitioner(name, 4, 0).fit(sp.csr_matrix(X))
        if name in ("random", "fcfs"):
            np.testing.assert_array_equal(dense.labels_, sparse.labels_)
        assert sparse.sizes_.sum() == 80
        np.testing.assert_array_equal(sparse.assign(sp.csr_matrix(X[:5])),
                                      sparse.assign(X[:5]))


def test_kmeans_never_returns_empty_partitions():
    # 3 distinct points, 5 clusters requested
    X = np.repeat(np.eye(3), 10, axis=0)
    part = KMeansPartitioner(n_partitions=5, random_state=0).fit(X)
    assert part.n_partitions_ == 3
    assert np.all(part.sizes_ == 10)
    # the balanced variants still give 5 balanced partitions
    assert BKMPartitioner(n_partitions=5, random_state=0).fit(X).sizes_.tolist() == [6] * 5
    assert KBalancePartitioner(n_partitions=5, random_state=0).fit(X).sizes_.tolist() == [6] * 5


def test_bad_input():
    X = np.random.RandomState(0).randn(10, 2)
    with pytest.raises(ValueError, match="n_partitions=11 is larger"):
        RandomPartitioner(n_partitions=11).fit(X)
    with pytest.raises(ValueError):
        RandomPartitioner(n_partitions=0).fit(X)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        FCFSPartitioner(n_partitions=2).fit(Xn)
    part = FCFSPartitioner(n_partitions=2).fit(X)
    with pytest.raises(ValueError, match="features"):
        part.assign(np.ones((3, 5)))
    with pytest.raises(ValueError, match="partitioner must be"):
        make_partitioner("nope", 2, 0)


def test_balanced_on_larger_data():
    X = np.random.RandomState(0).randn(20000, 8)
    part = KBalancePartitioner(n_partitions=16, random_state=0).fit(X)
    assert set(part.sizes_.tolist()) == {1250}
