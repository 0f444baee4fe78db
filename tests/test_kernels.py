"""Kernel blocks against scikit-learn's pairwise kernels, and the row blocks
they share among threads."""

import threading

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import pairwise_kernels

from cakernels._kernels import (
    PARALLEL_ENTRIES,
    block_rows,
    kernel_block,
    kernel_dot,
    resolve_gamma,
)
from cakernels.backends import _pool as _pool_module
from cakernels.backends import blas_limits
from cakernels.backends._pool import row_blocks, run_blocks


@pytest.fixture(scope="module")
def xy():
    rng = np.random.RandomState(0)
    return rng.randn(37, 9), rng.randn(23, 9)


PARAMS = [("rbf", {"gamma": 0.3}), ("linear", {}), ("poly", {"gamma": 0.2, "degree": 3,
                                                             "coef0": 1.0}),
          ("sigmoid", {"gamma": 0.05, "coef0": -0.5})]


@pytest.mark.parametrize("kernel,params", PARAMS)
@pytest.mark.parametrize("sparse", [False, True])
def test_kernel_block_matches_sklearn(xy, kernel, params, sparse):
    X, Y = xy
    ref = pairwise_kernels(X, Y, metric=kernel, **params)
    if sparse:
        X, Y = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0)), sp.csr_matrix(Y)
        ref = pairwise_kernels(X, Y, metric=kernel, **params)
    K = kernel_block(X, Y, kernel=kernel, gamma=params.get("gamma", 1.0),
                     degree=params.get("degree", 3), coef0=params.get("coef0", 0.0),
                     n_threads=2)
    np.testing.assert_allclose(K, ref, rtol=1e-12, atol=1e-12)


def test_rbf_is_stable_for_large_norms(xy):
    # ||x||^2 + ||y||^2 - 2 x.y cancels badly for large norms: the squared
    # distance is clipped at 0, so the kernel never exceeds 1
    X, _ = xy
    K = kernel_block(X * 1e3, X * 1e3, kernel="rbf", gamma=1e-7)
    np.testing.assert_allclose(np.diag(K), 1.0, rtol=1e-9)
    assert np.all(K <= 1.0)


def test_rbf_diagonal_of_x_with_itself_is_one_far_from_the_origin():
    # gamma ||x||^2 ~ 1e17: the product form's self-distance came out as a few
    # units of rounding (K(x, x) = 0 on some rows); X with itself is 1, as
    # scikit-learn's euclidean_distances zeroes that diagonal
    X = np.random.RandomState(0).randn(24, 20) * 1e8
    for n_threads in (1, 2):
        K = kernel_block(X, X, kernel="rbf", gamma=1.0, n_threads=n_threads)
        assert np.array_equal(np.diag(K), np.ones(24))
    Xs = sp.csr_matrix(X)
    assert np.array_equal(np.diag(kernel_block(Xs, Xs, kernel="rbf", gamma=1.0)), np.ones(24))


def test_scale_gamma_leaves_a_non_canonical_csr_alone():
    # the two-pass variance summed duplicates in place: the caller's CSR changed
    from cakernels import CASVC

    rng = np.random.RandomState(0)
    indices = np.tile([1, 0, 1], 20)  # unsorted, column 1 twice per row
    data = np.tile([0.001, 1000.0, 0.001], 20) + 1e-9 * rng.rand(60)
    X = sp.csr_matrix((data, indices, np.arange(0, 61, 3)), shape=(20, 2))
    copies = X.data.copy(), X.indices.copy(), X.indptr.copy()
    g = resolve_gamma("scale", X)  # the one-pass variance cancels here
    assert g > 0 and np.isfinite(g)
    CASVC(n_partitions=1, random_state=0).fit(X, np.tile([0, 1], 10))
    for got, before in zip((X.data, X.indices, X.indptr), copies):
        assert np.array_equal(got, before)


def test_dissmo_and_krr_fit_rows_far_from_the_origin():
    # a row disagreeing with the RBF diagonal kept Dis-SMO from converging (and
    # DKRR/KKRR solved a kernel whose diagonal was 0 on some rows)
    from sklearn.svm import SVC

    from cakernels import DKRR, KKRR, DisSMOSVC

    rng = np.random.RandomState(0)
    X = rng.randn(60, 20) * 1e8
    y = np.repeat(np.arange(5), 12)
    ref = SVC(C=1e6, gamma=1.0).fit(X, y)
    est = DisSMOSVC(C=1e6, gamma=1.0, max_iter=20000).fit(X, y)
    assert np.all(est.n_iter_ < 1000)
    assert est.score(X, y) == ref.score(X, y) == 1.0
    yr = rng.randn(60)
    for reg in (DKRR(sigma=np.sqrt(0.5), lam=1e-10), KKRR(n_partitions=1, sigma=np.sqrt(0.5),
                                                           lam=1e-10, random_state=0)):
        reg.fit(X, yr)
        # the kernel is the identity: alpha = y / (1 + lam m)
        alpha = reg.dual_coef_ if hasattr(reg, "dual_coef_") else reg.estimators_[0].alpha
        np.testing.assert_allclose(np.abs(alpha), np.abs(yr) / (1 + 60e-10), rtol=1e-12)


def test_kernel_dot_blocks(xy):
    X, Y = xy
    coef = np.random.RandomState(1).randn(len(Y), 2)
    full = pairwise_kernels(X, Y, metric="rbf", gamma=0.1) @ coef
    # a tiny budget forces one row per block
    out = kernel_dot(X, Y, coef, kernel="rbf", gamma=0.1, block_bytes=8)
    np.testing.assert_allclose(out, full, rtol=1e-12)
    assert block_rows(1000, 8000) == 1 and block_rows(10, 8000) == 100


def test_resolve_gamma_matches_svc():
    X = np.random.RandomState(2).rand(20, 4)
    assert resolve_gamma("scale", X) == 1.0 / (4 * X.var())
    assert resolve_gamma("scale", sp.csr_matrix(X)) == pytest.approx(1.0 / (4 * X.var()))
    assert resolve_gamma("auto", X) == 0.25
    assert resolve_gamma(0.5, X) == 0.5
    assert resolve_gamma("scale", np.ones((3, 2))) == 1.0
    # one constant feature as CSR: the one-pass variance cancelled to -5e-21, a
    # negative gamma and NaN decisions; the two-pass one is (nearly) 0
    C = sp.csr_matrix(np.full((60, 1), 0.0025))
    g = resolve_gamma("scale", C)
    assert g > 0 and np.isfinite(g)
    with pytest.raises(ValueError):
        resolve_gamma("wide", X)
    with pytest.raises(ValueError):
        kernel_block(X, X, kernel="laplacian")


# ----------------------------------------------------------------- shared row blocks
@pytest.fixture(scope="module")
def big_xy():
    # above PARALLEL_ENTRIES: computed in row blocks shared among threads
    rng = np.random.RandomState(3)
    X, Y = rng.randn(700, 6), rng.randn(300, 6)
    assert X.shape[0] * Y.shape[0] >= PARALLEL_ENTRIES
    return X, Y


@pytest.mark.parametrize("kernel,params", PARAMS)
@pytest.mark.parametrize("sparse", [False, True])
def test_shared_blocks_match_sklearn_and_not_the_thread_count(big_xy, kernel, params, sparse):
    X, Y = big_xy
    if sparse:
        X, Y = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0)), sp.csr_matrix(Y)
    ref = pairwise_kernels(X, Y, metric=kernel, **params)
    kp = {"kernel": kernel, "gamma": params.get("gamma", 1.0),
          "degree": params.get("degree", 3), "coef0": params.get("coef0", 0.0)}
    blocks = [kernel_block(X, Y, n_threads=t, **kp) for t in (1, 2, 3)]
    np.testing.assert_allclose(blocks[0], ref, rtol=1e-12, atol=1e-12)
    for other in blocks[1:]:
        np.testing.assert_array_equal(other, blocks[0])
    rng = np.random.RandomState(4)
    for coef in (rng.randn(Y.shape[0]), rng.randn(Y.shape[0], 3),
                 sp.random(Y.shape[0], 4, density=0.2, format="csr", random_state=5)):
        dense = coef.toarray() if sp.issparse(coef) else coef
        outs = [kernel_dot(X, Y, coef, n_threads=t, **kp) for t in (1, 2, 3)]
        np.testing.assert_allclose(outs[0], ref @ dense, rtol=1e-10, atol=1e-10)
        for other in outs[1:]:
            np.testing.assert_array_equal(other, outs[0])
        # a small byte budget: more, smaller blocks, the same values up to rounding
        np.testing.assert_allclose(kernel_dot(X, Y, coef, n_threads=2, block_bytes=2**14,
                                              **kp), outs[0], rtol=1e-12, atol=1e-12)


def test_shared_blocks_leave_blas_and_the_input_as_they_were(big_xy):
    X, Y = big_xy
    X0, Y0 = X.copy(), Y.copy()
    kernel_block(X, Y, gamma=0.1, n_threads=2)
    kernel_dot(X, Y, np.ones(Y.shape[0]), gamma=0.1, n_threads=2)
    assert blas_limits.current is None
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(Y, Y0)


def test_run_blocks_reraises_and_stops():
    done = []

    def func(start, stop):
        if start == 3:
            raise ValueError("block 3")
        done.append(start)

    with pytest.raises(ValueError, match="block 3"):
        run_blocks(func, row_blocks(100, 1), 2)
    assert blas_limits.current is None
    done.clear()
    with pytest.raises(ValueError, match="block 3"):
        run_blocks(func, row_blocks(100, 1), 1)
    assert done == [0, 1, 2]


def test_run_blocks_nested_and_concurrent_calls_finish():
    # a block that runs blocks itself (on the shared pool, which is then busy),
    # and several callers at once: every block runs exactly once, nobody waits
    # for a pool worker that cannot start
    counts = np.zeros(64, dtype=np.int64)
    lock = threading.Lock()

    def inner(start, stop):
        with lock:
            counts[start:stop] += 1

    def outer(start, stop):
        run_blocks(inner, row_blocks(64, 4), 3)

    callers = [threading.Thread(target=run_blocks, args=(outer, row_blocks(8, 1), 2))
               for _ in range(3)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in callers)
    np.testing.assert_array_equal(counts, 3 * 8)
    assert blas_limits.current is None


def test_growing_the_shared_pool_under_other_callers_loses_no_block():
    # a caller that grew the pool shut the old one down while another had fetched
    # it and not yet submitted: "cannot schedule new futures after shutdown"
    errors, stop = [], threading.Event()

    def small():
        while not stop.is_set():
            try:
                run_blocks(lambda a, b: None, row_blocks(8, 1), 2)
            except RuntimeError as exc:
                errors.append(exc)

    callers = [threading.Thread(target=small) for _ in range(3)]
    for t in callers:
        t.start()
    try:
        for n in range(3, 40):  # the pool grows 38 times
            run_blocks(lambda a, b: None, row_blocks(n, 1), n)
    finally:
        stop.set()
        for t in callers:
            t.join(timeout=60)
    assert not errors, errors[:3]
    assert _pool_module._POOL["size"] >= 38


def test_run_blocks_after_fork_makes_a_new_pool(monkeypatch):
    run_blocks(lambda a, b: None, row_blocks(4, 1), 2)
    first = _pool_module._POOL["pool"]
    # a forked child sees another pid: its inherited pool has no threads
    monkeypatch.setitem(_pool_module._POOL, "pid", -1)
    out = np.zeros(4)

    def fill(start, stop):
        out[start:stop] = 1

    run_blocks(fill, row_blocks(4, 1), 2)
    assert _pool_module._POOL["pool"] is not first
    np.testing.assert_array_equal(out, 1)


@pytest.mark.parametrize("kernel, params", PARAMS)
def test_wide_sparse_products_use_only_the_columns_in_use(kernel, params, peak_bytes):
    """One LIBSVM feature index of 2^31 made every sparse product build an index
    pointer over all features (SciPy converts Y.T to CSR: 16 GiB, seconds per
    call). Products over the columns in use add the same terms in the same
    order: the same bits as the narrow matrices' products."""
    rng = np.random.RandomState(3)
    X = sp.random(60, 40, density=0.15, format="csr", random_state=rng)
    Y = sp.random(25, 40, density=0.15, format="csr", random_state=rng)
    cols = np.unique(rng.randint(0, 2**31 - 1, size=100))[:40]  # sorted, distinct
    cols[-1] = 2**31 - 2

    def wide(A):
        return sp.csr_matrix((A.data, cols[A.indices], A.indptr), shape=(A.shape[0], 2**31 - 1))

    K, peak = peak_bytes(kernel_block, wide(X), wide(Y), kernel=kernel, **params)
    assert peak < 50 * 2**20  # not an array over the 2^31 features
    out, peak = peak_bytes(kernel_dot, wide(X), wide(Y), np.arange(25.0), kernel=kernel,
                           **params)
    assert peak < 50 * 2**20
    np.testing.assert_array_equal(K, kernel_block(X, Y, kernel=kernel, **params))
    np.testing.assert_array_equal(out, kernel_dot(X, Y, np.arange(25.0), kernel=kernel,
                                                  **params))
    # rows of Y with no entry, and an X whose entries all miss Y's columns
    empty = sp.csr_matrix((3, 2**31 - 1))
    np.testing.assert_array_equal(kernel_block(wide(X), empty, kernel=kernel, **params),
                                  kernel_block(X, sp.csr_matrix((3, 40)), kernel=kernel,
                                               **params))
