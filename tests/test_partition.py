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


@pytest.mark.parametrize("m,P,ties", [(5000, 4, False), (2500, 200, False), (2500, 200, True),
                                      (1200, 1200, False), (1300, 700, True)])
def test_greedy_assignment_equals_literal_loop_at_scale(m, P, ties):
    """Beyond the first 1,024-sample prefix the earliest fill is searched in
    doubling prefixes, and more than SORT_FILLS partitions filling in one
    prefix are found by one sort (P near m): the literal loop's labels still."""
    rng = np.random.RandomState(m + P)
    D = rng.randint(0, 4, size=(m, P)).astype(float) if ties else rng.rand(m, P)
    D[: m // 3, 0] -= 10.0  # one popular centre: it fills early, its late samples re-route
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
    # the balanced variants need 5 distinct centres: two of their 5 partitions
    # could never be routed to (they passed K-means' 1 + 2e-16 for new points)
    for cls in (BKMPartitioner, KBalancePartitioner):
        with pytest.raises(ValueError, match="distinct"):
            cls(n_partitions=5, random_state=0).fit(X)


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


# --------------------------------------------------------------------------
# storage format: the same data give the same partition, bit for bit
# --------------------------------------------------------------------------
def _sparse_data(m, n, seed, kind="gauss"):
    """Sparse-ish data: non-round values, where every rounding shows in the
    centres, or 0/1 values (one-hot like mushrooms), where many distances tie
    and the rounding of CSR products used to flip the labels."""
    rng = np.random.RandomState(seed)
    if kind == "binary":
        return (rng.rand(m, n) < 0.3).astype(np.float64)
    X = rng.randn(m, n) * (rng.rand(m, n) < (0.02 if kind == "verysparse" else 0.35))
    X[:, 0] += 3.0 * (np.arange(m) % 3)  # some cluster structure
    return X


PARTITIONER_CONFIGS = [
    RandomPartitioner,
    KMeansPartitioner,
    lambda P, **kw: KMeansPartitioner(P, method="minibatch", max_iter=10, **kw),
    KBalancePartitioner,
    lambda P, **kw: KBalancePartitioner(P, assign_order="regret", **kw),
    lambda P, **kw: KBalancePartitioner(P, recompute_centers=False, **kw),
    FCFSPartitioner,
    lambda P, **kw: FCFSPartitioner(P, recompute_centers=False, **kw),
    BKMPartitioner,
]
CONFIG_IDS = ["random", "kmeans", "kmeans-minibatch", "kbalance", "kbalance-regret",
              "kbalance-kmeans-centres", "fcfs", "fcfs-picked-centres", "bkm"]


def _fitted_state(part, tests):
    state = {"labels_": part.labels_, "centers_": part.centers_, "sizes_": part.sizes_,
             "n_partitions_": np.array(part.n_partitions_)}
    for name, T in tests.items():
        state[f"assign({name})"] = part.assign(T)
    return state


def _assert_same_state(a, b, what):
    for key in a:
        assert a[key].dtype == b[key].dtype, (what, key)
        # bit for bit: array_equal on float64 is exact equality
        assert np.array_equal(a[key], b[key]), (what, key)


@pytest.mark.parametrize("make", PARTITIONER_CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("m,n,P,kind", [(103, 12, 7, "gauss"), (240, 30, 4, "gauss"),
                                        (301, 20, 4, "binary"), (200, 100, 4, "verysparse")])
def test_partition_independent_of_storage_format(make, seed, m, n, P, kind,
                                                 storage_formats):
    X = _sparse_data(m, n, seed, kind)
    tests = storage_formats(_sparse_data(57, n, seed + 100, kind))
    states = {name: _fitted_state(make(P, random_state=seed).fit(Xf), tests)
              for name, Xf in storage_formats(X).items()}
    for name in ("csr32", "csr64"):
        _assert_same_state(states["dense"], states[name], name)
    # and assign() of new data does not depend on the new data's format
    for name in ("csr32", "csr64"):
        np.testing.assert_array_equal(states["dense"]["assign(dense)"],
                                      states["dense"][f"assign({name})"])


@pytest.mark.parametrize("make", PARTITIONER_CONFIGS, ids=CONFIG_IDS)
def test_assign_blocks_are_the_same_for_every_format(make, monkeypatch, storage_formats):
    # blocks of 7 rows (the last one of 1 row, a matrix-vector product):
    # every format is split into the same dense blocks
    from cakernels import partition

    X = _sparse_data(120, 9, 3)
    T = _sparse_data(71, 9, 4)
    part = make(5, random_state=0).fit(X)
    whole = part.assign(T)
    monkeypatch.setattr(partition._storage, "ASSIGN_BLOCK_ROWS", 7)
    got = {name: part.assign(Tf) for name, Tf in storage_formats(T).items()}
    for name in ("csr32", "csr64"):
        np.testing.assert_array_equal(got["dense"], got[name])
    np.testing.assert_array_equal(got["dense"], whole)  # argmin, robust to the blocks
    brute = np.argmin(((T[:, None, :] - part.centers_[None]) ** 2).sum(axis=2), axis=1)
    np.testing.assert_array_equal(got["dense"], brute)


def test_dense_input_is_never_copied_to_csr_or_changed_by_the_budget(monkeypatch):
    # dense input computes on the same dense data whatever the budget
    from cakernels import partition

    X = _sparse_data(150, 10, 5)
    T = _sparse_data(40, 10, 6)
    below = {i: _fitted_state(make(4, random_state=0).fit(X), {"T": T})
             for i, make in enumerate(PARTITIONER_CONFIGS)}
    monkeypatch.setattr(partition._storage, "DENSE_BUDGET_BYTES", 0)
    assert not partition.dense_partitioning(150, 10)
    for i, make in enumerate(PARTITIONER_CONFIGS):
        _assert_same_state(below[i], _fitted_state(make(4, random_state=0).fit(X), {"T": T}),
                           CONFIG_IDS[i])


def test_partition_storage_is_chosen_from_the_values(monkeypatch, storage_formats):
    from cakernels import partition
    from cakernels.partition import partition_storage

    dense_ish = _sparse_data(200, 30, 0)          # about 35% non-zeros
    very_sparse = _sparse_data(200, 100, 0, "verysparse")  # about 3%
    for X, expected in ((dense_ish, "dense"), (very_sparse, "csr")):
        assert {partition_storage(Xf) for Xf in storage_formats(X).values()} == {expected}
    monkeypatch.setattr(partition._storage, "DENSE_BUDGET_BYTES", 0)
    assert partition_storage(dense_ish) == "as_is"


@pytest.mark.parametrize("make", PARTITIONER_CONFIGS, ids=CONFIG_IDS)
def test_explicit_zeros_and_unsorted_indices_do_not_change_the_partition(make):
    # the canonical CSR drops explicit zeros and sorts indices, on a copy
    X = _sparse_data(200, 100, 1, "verysparse")
    ref = make(4, random_state=0).fit(X)
    C = sp.csr_matrix(X)
    C.data[::5] = 0.0                   # explicit zeros...
    keep = C.copy()
    Xz = C.toarray()
    rows = [np.argsort(-C.indices[a:b]) + a for a, b in zip(C.indptr[:-1], C.indptr[1:])]
    C = sp.csr_matrix((C.data[np.concatenate(rows)], C.indices[np.concatenate(rows)],
                       C.indptr), shape=C.shape)  # ...and unsorted indices
    got = make(4, random_state=0).fit(C)
    want = make(4, random_state=0).fit(Xz)
    np.testing.assert_array_equal(got.labels_, want.labels_)
    np.testing.assert_array_equal(got.centers_, want.centers_)
    assert C.nnz == keep.nnz  # the caller's matrix keeps its explicit zeros
    assert ref.labels_.shape == got.labels_.shape


@pytest.mark.parametrize("halo", [0.0, 0.5])
@pytest.mark.parametrize("budget", [None, 0], ids=["canonical-storage", "as-is"])
@pytest.mark.parametrize("make", PARTITIONER_CONFIGS, ids=CONFIG_IDS)
def test_duplicate_entries_do_not_change_the_partition(make, budget, halo, monkeypatch):
    # a CSR matrix storing every value as two entries (legal: they add up) is the
    # same matrix: below the budget the same bits as its canonical form (random
    # partitions' means summed the halves apart), above it (as-is storage) the same
    # partition (scikit-learn's K-means squared every stored entry for its norms)
    from cakernels import partition

    X = _sparse_data(200, 100, 1, "verysparse")
    C = sp.csr_matrix(X)
    data, indices = [], []
    for a, b in zip(C.indptr[:-1], C.indptr[1:]):  # every entry twice, in one row each
        data += [0.25 * C.data[a:b], 0.75 * C.data[a:b]]
        indices += [C.indices[a:b], C.indices[a:b]]
    dup = sp.csr_matrix((np.concatenate(data), np.concatenate(indices), 2 * C.indptr),
                        shape=C.shape)
    assert not dup.has_canonical_format and np.allclose(dup.toarray(), X)
    before = (dup.data.copy(), dup.indices.copy())
    if budget is not None:
        monkeypatch.setattr(partition._storage, "DENSE_BUDGET_BYTES", budget)
    got = make(4, random_state=0).set_params(halo=halo).fit(dup)
    want = make(4, random_state=0).set_params(halo=halo).fit(C)
    np.testing.assert_array_equal(got.labels_, want.labels_)
    for j in range(4):  # (the halo's keys hash each entry's sum, not its parts)
        np.testing.assert_array_equal(got.halo_indices_[j], want.halo_indices_[j])
    if budget is None:
        np.testing.assert_array_equal(got.centers_, want.centers_)
    else:
        np.testing.assert_allclose(got.centers_, want.centers_, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(dup.data, before[0])  # the caller's matrix as it was
    np.testing.assert_array_equal(dup.indices, before[1])


def test_dense_partitioning_budget():
    from cakernels.partition import DENSE_BUDGET_BYTES, dense_partitioning

    assert DENSE_BUDGET_BYTES == 2**30
    assert dense_partitioning(2**27, 1)
    assert not dense_partitioning(2**27 + 1, 1)
    assert dense_partitioning(8124, 112)  # mushrooms
    assert not dense_partitioning(20_242, 47_236)  # rcv1: 7.6 GB dense


@pytest.mark.parametrize("make", PARTITIONER_CONFIGS, ids=CONFIG_IDS)
def test_csr_above_the_budget_stays_csr_and_takes_64_bit_indices(make, monkeypatch,
                                                                 storage_formats):
    from cakernels import partition

    monkeypatch.setattr(partition._storage, "DENSE_BUDGET_BYTES", 1000)  # 8 * 103 * 12 > 1000
    X = _sparse_data(103, 12, 7)
    X64 = storage_formats(X)["csr64"]
    before = (X64.data.copy(), X64.indices.copy(), X64.indptr.copy())
    densified = []
    real_toarray = sp.csr_matrix.toarray
    monkeypatch.setattr(sp.csr_matrix, "toarray",
                        lambda self, *a, **k: densified.append(self.shape)
                        or real_toarray(self, *a, **k))
    T = _sparse_data(30, 12, 8)
    p64 = make(5, random_state=0).fit(X64)
    s64 = _fitted_state(p64, {"csr": sp.csr_matrix(T)})
    # no (n_samples x n_features) dense copy on this path (FCFS densifies
    # only its P picked centres, BKM only padding rows)
    assert all(shape[0] < X.shape[0] for shape in densified), densified
    # the caller's matrix keeps its int64 indices and its contents
    assert X64.indices.dtype == np.int64 and X64.indptr.dtype == np.int64
    for a, b in zip(before, (X64.data, X64.indices, X64.indptr)):
        np.testing.assert_array_equal(a, b)
    # 64-bit indices give the partition of 32-bit ones
    _assert_same_state(s64, _fitted_state(make(5, random_state=0).fit(sp.csr_matrix(X)),
                                          {"csr": sp.csr_matrix(T)}), "csr32")
    # a valid partition, routed to the nearest centre
    assert p64.sizes_.sum() == 103 and np.all(p64.sizes_ > 0)
    if p64.balanced:
        assert set(p64.sizes_.tolist()) <= {103 // 5, -(-103 // 5)}
    brute = np.argmin(((T[:, None, :] - p64.centers_[None]) ** 2).sum(axis=2), axis=1)
    np.testing.assert_array_equal(s64["assign(csr)"], brute)
    np.testing.assert_array_equal(p64.assign(T), brute)


@pytest.mark.parametrize("cls", [KMeansPartitioner, KBalancePartitioner, BKMPartitioner])
def test_kmeans_on_csr_too_large_for_32_bit_indices_is_a_clear_error(cls, monkeypatch):
    # 2**31 columns (64 GiB dense): above the budget, and K-means needs 32-bit indices
    import cakernels._memory as memory

    X = sp.csr_matrix((np.ones(4), np.array([0, 5, 2**31 - 1, 7], dtype=np.int64),
                       np.arange(5, dtype=np.int64)), shape=(4, 2**31))
    # the dense centres (2 x 2**31 features, 4 copies: 128 GiB) do not fit 16 GiB
    monkeypatch.setattr(memory, "available_bytes", lambda: 16 * 2**30)
    with pytest.raises(ValueError, match="partition centres are dense vectors"):
        cls(n_partitions=2, random_state=0).fit(X)
    monkeypatch.setattr(memory, "available_bytes", lambda: None)  # memory unknown
    with pytest.raises(ValueError, match=r"K-means.*more than 2\*\*31 - 1 non-zeros or "
                                         r"columns is not supported"):
        cls(n_partitions=2, random_state=0).fit(X)


def test_variable_blocks_independent_of_storage_format(storage_formats):
    from cakernels._solvers.asygcd import variable_blocks

    for kind in ("gauss", "binary"):
        X = _sparse_data(600, 20, 0, kind)
        for seed in range(3):
            for n_threads in (3, 4):
                blocks = {name: variable_blocks(Xf, n_threads, seed)
                          for name, Xf in storage_formats(X).items()}
                np.testing.assert_array_equal(blocks["dense"], blocks["csr32"])
                np.testing.assert_array_equal(blocks["dense"], blocks["csr64"])


def test_small_kmeans_runs_one_thread_and_does_not_depend_on_the_thread_count(monkeypatch):
    """Below KMEANS_ONE_THREAD_WORK scikit-learn's K-means runs on one OpenMP
    thread (as fast there, and no spinning barriers next to busy processes):
    the centres are then the same bits whatever OpenMP threads the caller has.
    Without the rule they differ in the last bits on this data."""
    from sklearn.utils._openmp_helpers import _openmp_effective_n_threads
    from threadpoolctl import threadpool_limits

    import cakernels.partition._partitioners as partitioners

    rng = np.random.default_rng(0)
    X = rng.standard_normal((6000, 8)) + rng.integers(0, 4, (6000, 1))

    def centers(n_threads):
        with threadpool_limits(n_threads, user_api="openmp"):
            return KMeansPartitioner(8, random_state=0).fit(X).centers_

    assert 6000 * 8 * 8 < partitioners.KMEANS_ONE_THREAD_WORK
    np.testing.assert_array_equal(centers(1), centers(2))
    seen = []
    real_fit = partitioners.KMeans.fit

    def spy(self, *args, **kwargs):
        seen.append(_openmp_effective_n_threads())
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(partitioners.KMeans, "fit", spy)
    with threadpool_limits(2, user_api="openmp"):
        KMeansPartitioner(8, random_state=0).fit(X)
        monkeypatch.setattr(partitioners, "KMEANS_ONE_THREAD_WORK", 0)
        KMeansPartitioner(8, random_state=0).fit(X)
    with threadpool_limits(2, user_api="openmp"):
        expected = _openmp_effective_n_threads()
    assert seen == [1, expected]


def _non_canonical_csr(X):
    """X as a CSR matrix whose rows list their entries in reverse order, with each
    row's first value split into two duplicate entries (the same matrix)."""
    A = sp.csr_matrix(X)
    data, indices, indptr = [], [], [0]
    for r in range(A.shape[0]):
        lo, hi = A.indptr[r], A.indptr[r + 1]
        d, i = list(A.data[lo:hi][::-1]), list(A.indices[lo:hi][::-1])
        if d:
            d = [d[0] / 2, d[0] / 2] + d[1:]  # exact halves: the sum is the value
            i = [i[0], i[0]] + i[1:]
        data += d
        indices += i
        indptr.append(len(data))
    B = sp.csr_matrix((np.array(data), np.array(indices), np.array(indptr)), shape=A.shape)
    assert not B.has_canonical_format
    return B


def test_non_canonical_sparse_input_is_not_modified():
    """SciPy's count_nonzero sums duplicates and sorts indices in place; the
    partitioners and estimators must leave the caller's matrix as it was."""
    from cakernels import BKRR2, CASVC
    from cakernels.model_selection import BKRR2CV

    from sklearn.datasets import make_blobs

    X, y = make_blobs(n_samples=120, n_features=5, centers=3, random_state=0)
    X[X < 0] = 0  # some zeros: a sparse matrix
    yc = (y == 0).astype(int)
    B = _non_canonical_csr(X)
    snapshot = (B.data.copy(), B.indices.copy(), B.indptr.copy())
    runs = [
        lambda M: KBalancePartitioner(n_partitions=3, random_state=0).fit(M).labels_,
        lambda M: BKMPartitioner(n_partitions=3, random_state=0).fit(M).labels_,
        lambda M: CASVC(n_partitions=3, random_state=0).fit(M, yc).decision_function(M),
        lambda M: BKRR2(n_partitions=3, sigma=3.0, random_state=0).fit(M, y).predict(M),
        lambda M: BKRR2CV(n_partitions=2, sigmas=[3.0], lams=[1e-4], cv=2,
                          random_state=0).fit(M, y).best_score_,
    ]
    for run in runs:
        got = run(B)
        for before, now in zip(snapshot, (B.data, B.indices, B.indptr)):
            np.testing.assert_array_equal(before, now)
        np.testing.assert_allclose(got, run(sp.csr_matrix(X)), rtol=1e-12, atol=1e-12)


def test_centres_beyond_the_available_memory_are_refused(monkeypatch):
    """One huge feature index (a LIBSVM file with ``1 100000000:1``) makes every
    centre a dense vector of that many features: refused with the reason before
    anything is allocated, instead of the system killing the fit."""
    import cakernels._memory as memory
    from cakernels import CASVC

    X = sp.random(60, 10, density=0.5, format="csr", random_state=0)
    wide = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(60, 10**6))
    y = np.arange(60) % 2
    monkeypatch.setattr(memory, "available_bytes", lambda: 10 * 2**20)  # 10 MiB
    for fit in (lambda: KBalancePartitioner(n_partitions=4, random_state=0).fit(wide),
                lambda: CASVC(n_partitions=4, random_state=0).fit(wide, y)):
        with pytest.raises(ValueError, match="partition centres are dense vectors of "
                                             "1,000,000 features"):
            fit()
    KBalancePartitioner(n_partitions=4, random_state=0).fit(X)  # 10 features: fine


@pytest.mark.parametrize("cls", [KBalancePartitioner, FCFSPartitioner, BKMPartitioner,
                                 KMeansPartitioner])
def test_distances_beyond_the_available_memory_are_refused(cls, monkeypatch):
    # the distance-based partitioners hold the n x P distances to the centres (three
    # of them at once: 2.9 GiB for 500,000 rows and 256 partitions, one now) with no
    # check: millions of rows and thousands of partitions were killed by the system
    import cakernels._memory as memory

    X = np.random.RandomState(0).randn(2000, 3)
    need = 2 * 8.0 * 2000 * 64  # 2 MiB: DISTANCE_COPIES n x P arrays
    monkeypatch.setattr(memory, "available_bytes", lambda: need / 0.8 / 2)
    with pytest.raises(ValueError, match=r"the distances of 2,000 rows to the 64 partition "
                                         r"centres need about 2.0 MiB .*fewer partitions"):
        cls(n_partitions=64, random_state=0).fit(X)
    cls(n_partitions=8, random_state=0).fit(X)  # 8 partitions fit
    # random partitions measure no distances (and their halo does)
    RandomPartitioner(n_partitions=64, random_state=0).fit(X)
    with pytest.raises(ValueError, match="the distances of 2,000 rows"):
        RandomPartitioner(n_partitions=64, halo=0.5, random_state=0).fit(X)


def test_squared_distances_hold_one_n_by_p_array_with_the_same_bits(monkeypatch, peak_bytes):
    # ||x||^2 + ||c||^2 - 2 x.c was three n x P temporaries; now the product's own
    # array, block by block, with the same bits as the whole-array expression
    from cakernels.partition import _storage
    from cakernels.partition._storage import row_sq_norms, squared_distances

    monkeypatch.setattr(_storage, "DISTANCE_BLOCK_ELEMENTS", 64 * 1000)  # 40 blocks
    rng = np.random.RandomState(0)
    C = rng.randn(64, 5)
    for X in (rng.randn(40000, 5), sp.random(40000, 5, density=0.4, format="csr",
                                             random_state=0)):
        a, c = row_sq_norms(X), np.einsum("ij,ij->i", C, C)
        ref = np.maximum(a[:, None] + c[None, :] - 2.0 * np.asarray(X @ C.T), 0.0)
        D, peak = peak_bytes(squared_distances, X, C, a)
        np.testing.assert_array_equal(D, ref)
        assert peak < 1.5 * D.nbytes, peak / D.nbytes  # 3x before


def test_nearest_center_refuses_bad_storage_and_blocks():
    from cakernels.partition import nearest_center
    from cakernels.partition._storage import nearest_centers

    X, C = np.arange(12.0).reshape(6, 2), np.array([[0.0, 0.0], [10.0, 10.0]])
    for func, extra in ((nearest_center, ()), (nearest_centers, (1,))):
        with pytest.raises(ValueError, match="storage must be one of"):
            func(X, C, *extra, storage="foo")
        for bad in (0, -3, 2.5, True):
            with pytest.raises(ValueError, match="block_rows must be a positive integer"):
                func(X, C, *extra, block_rows=bad)
    np.testing.assert_array_equal(nearest_center(X, C, block_rows=np.int64(4)),
                                  [0, 0, 0, 1, 1, 1])


def test_a_large_common_offset_is_named_in_the_distinct_centre_errors():
    # rows that differ only beyond 12 digits count as duplicates: the errors said to
    # remove the duplicates, or blamed one binary feature
    from sklearn.datasets import make_classification

    from cakernels import CASVC
    from cakernels.partition import FCFSPartitioner

    X, y = make_classification(n_samples=400, n_features=6, random_state=0)
    with pytest.raises(ValueError, match="large common offset.*centre them"):
        FCFSPartitioner(4, random_state=0).fit(X + 1e14)
    with pytest.raises(ValueError, match="large common offset.*centred features"):
        CASVC(4, random_state=0).fit(X + 1e14, y)


def test_kbalance_regret_order_is_the_literal_loop():
    # assign_order='regret' was checked for balance and cost only: a mutation reversing
    # the order survived. The literal loop of Algorithm 9 over the rows in decreasing
    # regret (second-nearest minus nearest distance), as the data-order test does
    from sklearn.datasets import make_blobs

    from cakernels.partition._storage import squared_distances

    X, _ = make_blobs(n_samples=103, centers=4, n_features=2, cluster_std=3.0, random_state=0)
    P = 4
    part = KBalancePartitioner(P, assign_order="regret", recompute_centers=False,
                               random_state=0).fit(X)
    D = squared_distances(X, part.centers_)
    two = np.sort(D, axis=1)[:, :2]
    order = np.argsort(-(two[:, 1] - two[:, 0]), kind="stable")
    lo, r = X.shape[0] // P, X.shape[0] % P
    sizes, n_hi, labels = np.zeros(P, int), 0, np.empty(X.shape[0], int)
    for i in order:
        cap = lo + 1 if n_hi < r else lo
        best = min((j for j in range(P) if sizes[j] < cap), key=lambda j: (D[i, j], j))
        labels[i] = best
        sizes[best] += 1
        n_hi += sizes[best] == lo + 1
    np.testing.assert_array_equal(part.labels_, labels)


def test_regret_order_holds_one_distance_array_more_than_data_order(monkeypatch, peak_bytes):
    # the regret was a view of np.partition's whole n x P copy, which stayed alive
    # while the distances were permuted: 3 n x P arrays at the peak, 1 in data order
    from cakernels.partition import _storage

    monkeypatch.setattr(_storage, "DISTANCE_BLOCK_ELEMENTS", 64 * 1000)  # small blocks
    X = np.random.RandomState(0).randn(50000, 4)
    peaks = {}
    for order in ("data", "regret"):
        part = KBalancePartitioner(64, assign_order=order, random_state=0)
        peaks[order] = peak_bytes(part.fit, X)[1]
    # one more: the distances in the regret order (DISTANCE_COPIES = 2)
    assert peaks["regret"] < peaks["data"] + 1.2 * 8 * 50000 * 64, peaks


def test_training_indices_refuses_an_index_outside_the_partitions():
    # training_indices(-1) gave the last partition's halo without its own rows (halo=0:
    # nothing), j past the end a bare IndexError, True partition 1
    X = np.random.RandomState(0).randn(30, 2)
    part = KBalancePartitioner(3, halo=0.5, random_state=0).fit(X)
    assert part.training_indices(np.int64(2)).size == 10 + part.halo_sizes_[2]
    for j in (-1, 3, True, 1.0):
        with pytest.raises(ValueError, match=r"j must be a partition index, an int in "
                                             r"\[0, 3\)"):
            part.training_indices(j)


def test_fit_sharded_records_and_forgets_feature_names_as_fit(requires):
    # fit_sharded kept the names of an earlier fit (3 names next to 5 features: assign
    # then warned or refused) and recorded none of a DataFrame
    pd = requires("pandas")
    from cakernels.backends._comm import SelfCommunicator

    import warnings

    X = np.random.RandomState(0).randn(40, 5)
    part = FCFSPartitioner(2, random_state=0).fit(pd.DataFrame(X[:, :3], columns=list("abc")))
    part.fit_sharded(SelfCommunicator(), X)
    assert part.n_features_in_ == 5 and not hasattr(part, "feature_names_in_")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        part.assign(X)
    df = pd.DataFrame(X, columns=list("vwxyz"))
    part.fit_sharded(SelfCommunicator(), df)
    assert list(part.feature_names_in_) == list("vwxyz")
    brute = np.argmin(((X[:, None, :] - part.centers_[None]) ** 2).sum(axis=2), axis=1)
    np.testing.assert_array_equal(part.assign(df), brute)


def test_fit_sharded_sets_its_documented_placement_attributes_and_fit_removes_them():
    # owners_, rows_stay_local_ and n_assign_events_ were set but documented nowhere
    from cakernels.backends._comm import SelfCommunicator

    X = np.random.RandomState(0).randn(60, 3)
    rnd = RandomPartitioner(4, random_state=0).fit_sharded(SelfCommunicator(), X)
    np.testing.assert_array_equal(rnd.owners_, np.zeros(4, dtype=int))  # j mod 1 rank
    assert rnd.rows_stay_local_ is True
    assert not hasattr(rnd, "n_assign_events_")
    for part, events in ((KBalancePartitioner(4, random_state=0), (1, 5)),
                         (KBalancePartitioner(4, sharded_assign="local", random_state=0),
                          (0, 0)),
                         (FCFSPartitioner(4, random_state=0), (1, 5))):
        part.fit_sharded(SelfCommunicator(), X)
        assert part.owners_ is None and part.rows_stay_local_ is False
        assert events[0] <= part.n_assign_events_ <= events[1]
        part.fit(X)
        for name in ("owners_", "rows_stay_local_", "n_assign_events_"):
            assert not hasattr(part, name), name
    assert "``owners_``" in RandomPartitioner.fit_sharded.__doc__
    assert "``n_assign_events_``" in KBalancePartitioner.fit_sharded.__doc__


def test_a_halos_distances_beyond_memory_advise_a_smaller_halo(monkeypatch):
    # random partitions measure distances for their halo only: the refusal advised
    # "random partitions (CASVC, DCKRR), which measure no distances" to a CASVC
    import cakernels._memory as memory

    X = np.random.RandomState(0).randn(2000, 3)
    monkeypatch.setattr(memory, "available_bytes", lambda: 2 * 8.0 * 2000 * 64 / 0.8 / 2)
    with pytest.raises(ValueError, match=r"or no halo \(halo=0"):
        RandomPartitioner(n_partitions=64, halo=0.5, random_state=0).fit(X)
    with pytest.raises(ValueError, match=r"random partitions without a halo"):
        KBalancePartitioner(n_partitions=64, random_state=0).fit(X)


@pytest.mark.parametrize("cls", [RandomPartitioner, KMeansPartitioner, KBalancePartitioner,
                                 FCFSPartitioner, BKMPartitioner])
def test_a_failed_refit_leaves_the_partitioner_as_it_was(cls, requires):
    # the new data's n_features_in_ and feature names were set next to the old
    # centres: assign then refused the old data, and failed inside numpy on the new
    pd = requires("pandas")
    rng = np.random.RandomState(0)
    X = rng.randn(100, 6)
    frame = pd.DataFrame(X, columns=list("abcdef"))
    part = cls(3, random_state=0).fit(frame)
    before = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(part).items()}
    labels = part.assign(frame)
    with pytest.raises(ValueError):
        part.fit(X[:2, :4])  # 2 rows for 3 partitions
    assert part.n_features_in_ == 6 and list(part.feature_names_in_) == list("abcdef")
    assert set(vars(part)) == set(before)
    np.testing.assert_array_equal(part.centers_, before["centers_"])
    np.testing.assert_array_equal(part.assign(frame), labels)


@pytest.mark.parametrize("k", [1, 3, 16, 17, 40])
def test_nearest_centres_are_the_stable_sorts_first_k(k):
    # (chosen by rounds of argmin up to NEAREST_BY_ROUNDS centres, by a sort above):
    # ties to the lower index, as the stable sort, also among duplicated centres
    from cakernels.partition._storage import nearest_centers, squared_distances

    rng = np.random.RandomState(0)
    X = rng.randint(-2, 3, size=(500, 3)).astype(float)
    C = rng.randint(-2, 3, size=(30, 3)).astype(float)
    C[5] = C[2]
    for data in (X, sp.csr_matrix(X)):
        order, dist = nearest_centers(data, C, k, block_rows=128)
        D = squared_distances(X, C)
        ref = np.argsort(D, axis=1, kind="stable")[:, :min(k, 30)]
        np.testing.assert_array_equal(order, ref)
        np.testing.assert_array_equal(dist, np.take_along_axis(D, ref, axis=1))
