"""Partitioned kernel ridge regression: invariants against KernelRidge and brute force."""

import os
import pickle
import re
import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.linalg import LinAlgWarning
from sklearn.datasets import make_regression
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from cakernels import (
    BKRR,
    BKRR2,
    DCKRR,
    DKRR,
    KKRR,
    KKRR2,
    PartitionedKernelRidge,
    oracle_predict,
    oracle_score,
)
from cakernels.kernel_ridge import solve_krr
from cakernels.partition import KBalancePartitioner

FRONT_DOORS = [DCKRR, KKRR, KKRR2, BKRR, BKRR2]
AVERAGE = {DCKRR, KKRR, BKRR}


@pytest.fixture(scope="module")
def data():
    X, y = make_regression(n_samples=500, n_features=6, noise=5.0, random_state=0)
    X = StandardScaler().fit_transform(X)
    y = (y - y.mean()) / y.std()
    return X[:360], y[:360], X[360:], y[360:]


def _relerr(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


@pytest.mark.parametrize("cls", FRONT_DOORS)
def test_one_partition_is_kernel_ridge(cls, data):
    X, y, Xt, _ = data
    sigma, lam = 1.7, 1e-3
    ours = cls(n_partitions=1, sigma=sigma, lam=lam).fit(X, y)
    ref = KernelRidge(kernel="rbf", gamma=1 / (2 * sigma**2), alpha=lam * len(X)).fit(X, y)
    assert _relerr(ours.predict(Xt), ref.predict(Xt)) < 1e-8
    np.testing.assert_allclose(ours.estimators_[0].alpha, ref.dual_coef_, rtol=1e-7)


@pytest.mark.parametrize("kernel,extra", [("linear", {}), ("poly", {"degree": 2}),
                                          ("sigmoid", {"coef0": 0.5})])
def test_other_kernels_match_kernel_ridge(kernel, extra, data):
    X, y, Xt, _ = data
    sigma, lam = 3.0, 1e-2
    ours = BKRR2(n_partitions=1, kernel=kernel, sigma=sigma, lam=lam, **extra).fit(X, y)
    params = {"gamma": 1 / (2 * sigma**2), "coef0": extra.get("coef0", 1.0),
              "degree": extra.get("degree", 3)}
    ref = KernelRidge(kernel=kernel, alpha=lam * len(X), **params).fit(X, y)
    assert _relerr(ours.predict(Xt), ref.predict(Xt)) < 1e-6


@pytest.mark.parametrize("cls", FRONT_DOORS)
def test_combination_is_brute_force(cls, data):
    X, y, Xt, _ = data
    sigma, lam = 1.5, 1e-3
    model = cls(n_partitions=4, sigma=sigma, lam=lam, random_state=0).fit(X, y)
    labels = model.partitioner_.labels_
    local = []
    for j in range(model.centers_.shape[0]):
        m = (labels == j).sum()
        ref = KernelRidge(kernel="rbf", gamma=1 / (2 * sigma**2), alpha=lam * m)
        local.append(ref.fit(X[labels == j], y[labels == j]).predict(Xt))
    local = np.array(local)
    np.testing.assert_allclose(model.local_predictions(Xt), local, rtol=1e-7, atol=1e-9)
    if cls in AVERAGE:
        expected = local.mean(axis=0)
    else:
        route = np.argmin(((Xt[:, None] - model.centers_[None]) ** 2).sum(-1), axis=1)
        expected = local[route, np.arange(len(Xt))]
    np.testing.assert_allclose(model.predict(Xt), expected, rtol=1e-7, atol=1e-9)
    # the oracle picks, per sample, the local prediction closest to the truth
    yt = np.sin(Xt[:, 0])
    brute = local[np.argmin((local - yt) ** 2, axis=0), np.arange(len(Xt))]
    np.testing.assert_allclose(oracle_predict(model, Xt, yt), brute)
    assert oracle_score(model, Xt, yt) == pytest.approx(np.mean((brute - yt) ** 2))
    assert oracle_score(model, Xt, yt) <= np.mean((model.predict(Xt) - yt) ** 2) + 1e-12


def test_nearest_beats_average_on_clustered_data():
    rng = np.random.RandomState(0)
    centers = rng.randn(4, 2) * 10
    X = np.vstack([c + rng.randn(150, 2) for c in centers])
    y = np.sin(X[:, 0]) + X[:, 1] * 0.1
    Xt = np.vstack([c + rng.randn(30, 2) for c in centers])
    yt = np.sin(Xt[:, 0]) + Xt[:, 1] * 0.1
    near = KKRR2(n_partitions=4, sigma=1.0, lam=1e-5, random_state=0).fit(X, y)
    avg = KKRR(n_partitions=4, sigma=1.0, lam=1e-5, random_state=0).fit(X, y)
    mse = lambda m: np.mean((m.predict(Xt) - yt) ** 2)
    assert mse(near) < mse(avg)


@pytest.mark.parametrize("halo", [0.0, 0.5])
def test_dckrr_takes_data_whose_random_partition_means_coincide(halo):
    # one binary feature: random partitions' means coincide, which nearest-centre
    # routing cannot use but DC-KRR's average never needs (Algorithm 8); it was
    # refused ("too few distinct samples")
    from sklearn.metrics.pairwise import rbf_kernel

    from cakernels import CASVC, DCKRRCV
    from cakernels.partition import RandomPartitioner

    rng = np.random.RandomState(0)
    X = rng.randint(0, 2, (400, 1)).astype(float)
    y = X[:, 0] + 0.1 * rng.randn(400)
    est = DCKRR(n_partitions=8, sigma=1.0, lam=1e-3, halo=halo, random_state=0).fit(X, y)
    labels = est.partitioner_.labels_
    assert not est.partitioner_.distinct_means and est.partition_sizes_.tolist() == [50] * 8
    Xq = np.array([[0.0], [1.0]])
    preds = []
    for j in range(8):  # Algorithm 8 on the estimator's partitions (and halos)
        T = np.sort(np.concatenate([np.flatnonzero(labels == j),
                                    est.partitioner_.halo_indices_[j]]))
        a = np.linalg.solve(rbf_kernel(X[T], gamma=0.5) + 1e-3 * T.size * np.eye(T.size), y[T])
        preds.append(rbf_kernel(Xq, X[T], gamma=0.5) @ a)
    np.testing.assert_allclose(est.predict(Xq), np.mean(preds, axis=0), rtol=1e-10)
    DCKRRCV(n_partitions=8, sigmas=[1.0], lams=[1e-3, 1e-2], cv=3, halo=halo,
            random_state=0).fit(X, y)
    # routing by centre still needs distinct means: a clear error
    with pytest.raises(ValueError, match="means of two random partitions coincided.*binary"):
        CASVC(n_partitions=8, random_state=0).fit(X, (y > 0.5).astype(int))
    with pytest.raises(ValueError, match="coincided"):
        RandomPartitioner(8, random_state=0).fit(X)
    assert RandomPartitioner(8, distinct_means=False, random_state=0).fit(X).sizes_.sum() == 400


def test_multi_output(data):
    X, y, Xt, _ = data
    Y = np.c_[y, -2 * y, np.cos(X[:, 0])]
    model = BKRR2(n_partitions=3, sigma=2.0, lam=1e-3, random_state=0).fit(X, Y)
    P = model.predict(Xt)
    assert P.shape == (len(Xt), 3)
    single = BKRR2(n_partitions=3, sigma=2.0, lam=1e-3, random_state=0).fit(X, Y[:, 2])
    np.testing.assert_allclose(P[:, 2], single.predict(Xt), rtol=1e-8, atol=1e-10)
    assert oracle_score(model, Xt, P) == pytest.approx(0.0, abs=1e-12)
    avg = DCKRR(n_partitions=3, sigma=2.0, random_state=0).fit(X, Y)
    assert avg.predict(Xt).shape == (len(Xt), 3)


@pytest.mark.parametrize("backend", ["serial", "threads"])
def test_ill_conditioned_partitions_warn_once_per_fit(backend):
    # every partition warned with its own numbers (sklearn's default filter shows
    # each distinct text: 8 lines for one fit, 27 for a search); now one line per kind
    import warnings

    rng = np.random.RandomState(0)
    X, y = rng.randn(400, 3), rng.randn(400)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        BKRR2(n_partitions=8, lam=1e-14, sigma=3.0, random_state=0, backend=backend,
              n_jobs=2).fit(X, y)
    ill = [str(r.message) for r in rec if issubclass(r.category, LinAlgWarning)]
    assert len(ill) == 1, ill
    assert re.search(r"is ill-conditioned in \d of 8 partitions \(reciprocal condition "
                     r"numbers down to [\d.e-]+\)", ill[0]), ill[0]
    # singular partitions: one line too (the least-squares fallback)
    Xd = np.repeat(rng.randn(40, 2), 4, axis=0)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        BKRR2(n_partitions=4, lam=0.0, sigma=1.0, random_state=0, backend=backend,
              n_jobs=2).fit(Xd, np.repeat(rng.randn(40), 4))
    lines = [str(r.message) for r in rec if issubclass(r.category, LinAlgWarning)]
    assert len([m for m in lines if "not numerically positive definite in" in m]) == 1, lines


def test_not_positive_definite_falls_back_with_warning():
    rng = np.random.RandomState(0)
    X = np.repeat(rng.randn(20, 2), 3, axis=0)  # duplicates: singular kernel
    y = np.repeat(rng.randn(20), 3)
    # (the shift is named for weighted fits too: it said lam*m*I for S K S + lam*sum(w) I)
    with pytest.warns(LinAlgWarning, match=r"lam\*m\*I \(lam\*sum\(w\)\*I when weighted\) "
                      "is not numerically positive definite"):
        model = BKRR2(n_partitions=1, sigma=1.0, lam=0.0).fit(X, y)
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 2)
    expected = np.linalg.lstsq(K, y, rcond=None)[0]
    np.testing.assert_allclose(model.estimators_[0].alpha, expected, rtol=1e-6, atol=1e-8)
    assert np.all(np.isfinite(model.predict(X)))
    # the fit on duplicated data still interpolates the targets
    np.testing.assert_allclose(model.predict(X), y, atol=1e-6)


def test_solve_krr_refuses_a_matrix_it_cannot_overwrite_before_writing_to_it():
    # the shift went into the caller's matrix, then the native check refused it
    rng = np.random.RandomState(1)
    A = rng.randn(6, 6)
    for K in (np.asfortranarray(A @ A.T + np.eye(6) * 0.1 + np.tril(A) * 1e-3),
              (A @ A.T).astype(np.float32)):
        before = K.copy()
        with pytest.raises(ValueError, match="K must be a writable C-contiguous square"):
            solve_krr(K, rng.randn(6), 10.0)
        np.testing.assert_array_equal(K, before)
    assert solve_krr(np.zeros((0, 0)), np.zeros(0), 1.0).shape == (0,)
    assert solve_krr(np.zeros((0, 0)), np.zeros((0, 2)), 1.0).shape == (0, 2)


def test_solve_krr_positive_definite_is_silent():
    rng = np.random.RandomState(1)
    A = rng.randn(30, 30)
    K = A @ A.T
    y = rng.randn(30)
    expected = np.linalg.solve(K + 0.5 * np.eye(30), y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        alpha = solve_krr(K.copy(), y, 0.5)
    np.testing.assert_allclose(alpha, expected, rtol=1e-10)


def test_threads_backend_equals_serial(data):
    X, y, Xt, _ = data
    for cls in FRONT_DOORS:
        s = cls(n_partitions=4, sigma=2.0, random_state=0).fit(X, y)
        t = cls(n_partitions=4, sigma=2.0, random_state=0, backend="threads", n_jobs=2).fit(X, y)
        np.testing.assert_allclose(s.predict(Xt), t.predict(Xt), rtol=1e-10, atol=1e-12)


def test_sparse_equals_dense(data):
    X, y, Xt, _ = data
    Xs = np.where(np.abs(X) > 0.8, X, 0.0)
    d = DCKRR(n_partitions=3, sigma=2.0, random_state=0).fit(Xs, y)
    s = DCKRR(n_partitions=3, sigma=2.0, random_state=0).fit(sp.csr_matrix(Xs), y)
    np.testing.assert_allclose(d.predict(Xt), s.predict(sp.csr_matrix(Xt)), rtol=1e-8,
                               atol=1e-10)
    np.testing.assert_allclose(s.predict(Xt), d.predict(Xt), rtol=1e-8, atol=1e-10)


def test_gridsearch_over_sigma_lam_pipeline_pickle(data):
    X, y, Xt, yt = data
    pipe = make_pipeline(StandardScaler(), BKRR2(n_partitions=3, random_state=0))
    grid = GridSearchCV(pipe, {"bkrr2__sigma": [0.5, 2.0], "bkrr2__lam": [1e-5, 1e-2]},
                        cv=3, scoring="neg_mean_squared_error").fit(X, y)
    assert set(grid.best_params_) == {"bkrr2__sigma", "bkrr2__lam"}
    restored = pickle.loads(pickle.dumps(grid.best_estimator_))
    np.testing.assert_array_equal(restored.predict(Xt), grid.predict(Xt))


def test_kbalance_regret_option(data):
    X, y, Xt, _ = data
    part = KBalancePartitioner(n_partitions=4, assign_order="regret", random_state=0)
    model = PartitionedKernelRidge(partitioner=part, combine="nearest", sigma=2.0).fit(X, y)
    assert model.partition_sizes_.tolist() == [90] * 4


def test_fit_stats(data):
    X, y, _, _ = data
    m = BKRR2(n_partitions=4, random_state=0).fit(X, y)
    assert m.fit_stats_["partition_sizes"] == [90] * 4
    assert m.fit_stats_["n_iter"] == [1] * 4
    assert len(m.fit_stats_["solve_seconds"]) == 4
    assert m.fit_stats_["comm_bytes"] == 0


def test_inputs_are_not_modified(data):
    X, y, Xt, _ = data
    X32 = np.asfortranarray(X, dtype=np.float32)
    X32c, yc = X32.copy(), y.copy()
    a = BKRR2(n_partitions=2, sigma=2.0, random_state=0).fit(X32, y)
    np.testing.assert_array_equal(X32, X32c)
    np.testing.assert_array_equal(y, yc)
    b = BKRR2(n_partitions=2, sigma=2.0, random_state=0).fit(X32.astype(np.float64), y)
    np.testing.assert_allclose(a.predict(Xt), b.predict(Xt))


@pytest.mark.parametrize("cls", FRONT_DOORS)
def test_bad_input(cls, data):
    X, y, _, _ = data
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        cls(n_partitions=2).fit(Xn, y)
    yn = y.copy()
    yn[1] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        cls(n_partitions=2).fit(X, yn)
    with pytest.raises(ValueError, match="n_partitions=1000 is larger"):
        cls(n_partitions=1000).fit(X, y)
    with pytest.raises(ValueError):
        cls(sigma=0).fit(X, y)
    with pytest.raises(ValueError):
        cls(lam=-1).fit(X, y)
    with pytest.raises(ValueError):
        cls(kernel="laplacian").fit(X, y)
    m = cls(n_partitions=2).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        m.predict(X[:, :2])
    with pytest.raises(TypeError, match="partitioned KRR"):
        oracle_score(object(), X, y)
    with pytest.raises(ValueError, match="shape"):
        oracle_score(m, X, y[:10])


def test_dkrr_on_one_process_is_kernel_ridge():
    from sklearn.kernel_ridge import KernelRidge

    from cakernels import DKRR

    rng = np.random.RandomState(0)
    X = rng.randn(250, 5)
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2])
    for target in (Y[:, 0], Y):
        for backend in ("serial", "threads"):
            d = DKRR(sigma=1.5, lam=1e-4, backend=backend).fit(X, target)
            ref = KernelRidge(kernel="rbf", gamma=1 / (2 * 1.5**2), alpha=1e-4 * 250).fit(X, target)
            np.testing.assert_allclose(d.predict(X), ref.predict(X), rtol=1e-10, atol=1e-12)
            assert d.grid_ == (1, 1) and d.fit_stats_["comm_bytes"] == 0
            # the kernel's time apart from the factorisation's, as under MPI
            # (it was None on one process)
            fs = d.fit_stats_
            assert isinstance(fs["kernel_seconds"], float) and fs["kernel_seconds"] > 0
            assert 0 <= fs["factor_seconds"] and (
                fs["kernel_seconds"] + fs["factor_seconds"] <= fs["seconds"])


def test_weighted_dkrr_on_one_process_is_weighted_kernel_ridge():
    """sample_weight: KernelRidge with alpha = lam * sum(w) and the same weights
    (zero weights included: such rows are not kept); weights of one are the
    unweighted fit; the weights are not modified."""
    from sklearn.kernel_ridge import KernelRidge

    from cakernels import DKRR

    rng = np.random.RandomState(1)
    X = rng.randn(240, 4)
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2])
    w = rng.uniform(0.1, 4.0, 240)
    w[::6] = 0.0
    before = w.copy()
    for target in (Y[:, 0], Y):
        d = DKRR(sigma=1.5, lam=1e-4).fit(X, target, sample_weight=w)
        ref = KernelRidge(kernel="rbf", gamma=1 / (2 * 1.5**2), alpha=1e-4 * w.sum()).fit(
            X, target, sample_weight=w)
        np.testing.assert_allclose(d.predict(X), ref.predict(X), rtol=1e-9, atol=1e-11)
        assert d.X_fit_.shape[0] == np.count_nonzero(w)
        plain = DKRR(sigma=1.5, lam=1e-4).fit(X, target)
        ones = DKRR(sigma=1.5, lam=1e-4).fit(X, target, sample_weight=np.ones(240))
        np.testing.assert_allclose(ones.predict(X), plain.predict(X), rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(w, before)
    with pytest.raises(ValueError, match="(?i)negative"):
        DKRR().fit(X, Y[:, 0], sample_weight=-w)


def test_dkrr_refuses_a_problem_that_cannot_fit(monkeypatch):
    import cakernels._memory as memory
    from cakernels import DKRR

    monkeypatch.setattr(memory, "available_bytes", lambda: 2**20)
    X = np.random.RandomState(0).randn(600, 3)
    with pytest.raises(ValueError, match=r"DKRR needs about .* per rank .* 8 n\^2 / P"):
        DKRR().fit(X, X[:, 0])


def test_dkrr_counts_the_targets_memory(monkeypatch):
    # the estimate counted the kernel matrix and the rows only: with many targets
    # (n x nrhs coefficients and their copies) a fit that passed it could exceed it
    import cakernels._memory as memory

    X = np.random.RandomState(0).randn(300, 3)
    Y = np.tile(X[:, :1], (1, 400))
    need = 8.0 * 300 * 300 + X.nbytes  # without the targets: 0.69 MiB
    monkeypatch.setattr(memory, "available_bytes", lambda: need / 0.8 * 1.5)
    DKRR().fit(X, Y[:, 0])
    with pytest.raises(ValueError, match=r"DKRR needs about 2\.5 MiB per rank .* targets"):
        DKRR().fit(X, Y)


def test_dkrr_counts_csr_rows_by_their_stored_bytes(monkeypatch):
    # the estimate counted n x d doubles: 200 rows with 10^7 columns (a few KB as
    # CSR) were refused as tens of GiB
    import cakernels._memory as memory
    from sklearn.kernel_ridge import KernelRidge

    monkeypatch.setattr(memory, "available_bytes", lambda: 64 * 2**20)
    rng = np.random.RandomState(0)
    cols = rng.randint(0, 10**7, size=(200, 3))  # three features per row
    X = sp.csr_matrix((np.ones(600), cols.ravel(), np.arange(0, 601, 3)), shape=(200, 10**7))
    X.sum_duplicates()
    y = rng.randn(200)
    model = DKRR(sigma=2.0, lam=1e-3).fit(X, y)
    ref = KernelRidge(kernel="rbf", gamma=1 / 8.0, alpha=1e-3 * 200).fit(X, y)
    np.testing.assert_allclose(model.predict(X[:20]), ref.predict(X[:20]), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_a_partition_whose_kernel_matrix_cannot_fit_is_refused(monkeypatch, n_jobs):
    # the partitioned estimators allocated m x m matrices without a check (one
    # partition of 50,000 rows: killed by the system partway through the fit)
    import cakernels._memory as memory

    X, y = make_regression(n_samples=1200, n_features=3, random_state=0)
    monkeypatch.setattr(memory, "available_bytes", lambda: 20 * 2**20)  # 1200^2 * 16 = 22 MB
    backend = "threads" if n_jobs else "serial"
    with pytest.raises(ValueError, match=r"a partition of 1,200 rows needs about .* kernel "
                                         r"matrix, 8 m\^2 bytes.*use more partitions"):
        BKRR2(n_partitions=1, backend=backend, n_jobs=n_jobs).fit(X, y)
    BKRR2(n_partitions=4).fit(X, y)  # 300-row partitions fit
    # the factor is the solves this process runs at once: one partition on two workers
    # is one solve (it was refused as two), two partitions on two workers are two
    monkeypatch.setattr(memory, "available_bytes", lambda: 40 * 2**20)
    BKRR2(n_partitions=1, backend="threads", n_jobs=2).fit(X, y)  # 23 MB of 32
    monkeypatch.setattr(memory, "available_bytes", lambda: 10 * 2**20)  # 8 MiB allowed
    BKRR2(n_partitions=2).fit(X, y)  # one 600-row solve at a time: 5.8 MB
    with pytest.raises(ValueError, match=r"for each of 2 partitions solved at once\), more "
                                         r"than 8.0 MiB \(80% of the 10.0 MiB available\)"):
        BKRR2(n_partitions=2, backend="threads", n_jobs=2).fit(X, y)


def test_dkrr_without_scalapack_names_the_extra(monkeypatch, requires):
    requires("mpi4py")
    from cakernels._solvers import scalapack

    monkeypatch.setattr(scalapack, "_find", lambda name: None)
    scalapack.load.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"cakernels\[scalapack\]"):
            scalapack.load()
    finally:
        scalapack.load.cache_clear()


def test_dkrr_scalapack_outside_linux_is_an_import_error(monkeypatch):
    # load() evaluated os.RTLD_GLOBAL (absent on Windows): an AttributeError, which
    # DKRR's fit (catching ImportError) passed on raw
    from cakernels._solvers import scalapack

    monkeypatch.setattr(scalapack.sys, "platform", "win32")
    scalapack.load.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"cakernels\[scalapack\].*Linux only"):
            scalapack.load()
    finally:
        scalapack.load.cache_clear()


def test_scalapack_finds_the_versioned_elf_library_not_a_linker_script(monkeypatch,
                                                                       tmp_path):
    # without /proc/self/maps the MPI library was the first of sorted(glob): the
    # MPICH wheel's lib/libmpi.so, a 20-byte linker script ("file too short")
    from cakernels._solvers import scalapack

    (tmp_path / "libmpi.so").write_text("INPUT(libmpi.so.12)\n")
    (tmp_path / "libmpi.so.12").write_bytes(b"\x7fELF" + bytes(60))
    (tmp_path / "libmkl_core.so.2").write_bytes(b"\x7fELF" + bytes(60))
    (tmp_path / "libmkl_junk.so").write_text("not a library")
    monkeypatch.setattr(scalapack, "_mkl_dirs", lambda: [str(tmp_path)])
    assert scalapack._find("libmpi.so") == str(tmp_path / "libmpi.so.12")
    assert scalapack._find("libmkl_core.so") == str(tmp_path / "libmkl_core.so.2")
    assert scalapack._find("libmkl_junk.so") is None
    assert scalapack._find("libmkl_absent.so") is None


@pytest.mark.parametrize("sigma", [1e-300, 1e-170, 1e160])
def test_sigma_beyond_float64_is_a_clear_error(sigma):
    """1/(2 sigma^2) underflows or overflows: a ValueError naming sigma, not
    Python's ZeroDivisionError or OverflowError."""
    from cakernels import DCKRR
    from cakernels.model_selection import BKRR2CV

    X, y = np.random.RandomState(0).rand(40, 3), np.random.RandomState(1).rand(40)
    with pytest.raises(ValueError, match=r"sigma=.* outside the positive float64 range"):
        DCKRR(n_partitions=2, sigma=sigma).fit(X, y)
    with pytest.raises(ValueError, match=r"sigma=.* outside the positive float64 range"):
        BKRR2CV(n_partitions=2, sigmas=[1.0, sigma], lams=[1e-3], cv=2).fit(X, y)


# --------------------------------------------------------------------------- sample_weight
def _weighted_problem():
    X, y = make_regression(n_samples=240, n_features=5, noise=2.0, random_state=0)
    y = y / y.std()
    w = np.random.RandomState(1).uniform(0.2, 3.0, size=y.size)
    return X, y, w


@pytest.mark.parametrize("multi_output", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
def test_one_weighted_partition_is_weighted_kernel_ridge(multi_output, sparse):
    """KernelRidge's weighted solve, S (S K S + alpha I)^-1 S y with S = sqrt(w),
    at alpha = lam * sum(w)."""
    X, y, w = _weighted_problem()
    Y = np.column_stack([y, 3 - 2 * y]) if multi_output else y
    Xf = sp.csr_matrix(X) if sparse else X
    ours = BKRR2(n_partitions=1, sigma=2.0, lam=1e-3).fit(Xf, Y, sample_weight=w)
    ref = KernelRidge(kernel="rbf", gamma=1 / 8.0, alpha=1e-3 * w.sum()).fit(
        X, Y, sample_weight=w)
    np.testing.assert_allclose(ours.predict(Xf), ref.predict(X), rtol=1e-8, atol=1e-10)
    unweighted = BKRR2(n_partitions=1, sigma=2.0, lam=1e-3).fit(Xf, Y)
    assert not np.allclose(ours.predict(Xf), unweighted.predict(Xf))


@pytest.mark.parametrize("cls", [DCKRR, KKRR, KKRR2, BKRR, BKRR2])
def test_weights_of_one_and_zero(cls):
    """Weights of one are the unweighted fit bit for bit; a weight of 0 is the
    same as leaving the row out (it is not partitioned either)."""
    X, y, _ = _weighted_problem()
    kw = dict(n_partitions=4, sigma=2.0, lam=1e-3, random_state=0)
    plain = cls(**kw).fit(X, y)
    ones = cls(**kw).fit(X, y, sample_weight=np.ones(y.size))
    np.testing.assert_array_equal(ones.predict(X), plain.predict(X))
    w = np.ones(y.size)
    w[::4], w[1::4] = 0.0, 2.5
    keep = w > 0
    a = cls(**kw).fit(X, y, sample_weight=w)
    b = cls(**kw).fit(X[keep], y[keep], sample_weight=w[keep])
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert a.partition_sizes_.sum() == keep.sum()


def test_weights_in_averaging_voting_halos_and_metadata_routing():
    from sklearn import config_context

    X, y, w = _weighted_problem()
    for est in (PartitionedKernelRidge("random", "average", 3, sigma=2.0, random_state=0),
                PartitionedKernelRidge("kbalance", "vote", 3, sigma=2.0, random_state=0),
                BKRR2(n_partitions=3, sigma=2.0, halo=0.3, random_state=0)):
        assert est.fit(X, y, sample_weight=w).score(X, y) > 0.9
    with pytest.raises(ValueError, match="(?i)negative values"):
        BKRR2(n_partitions=2).fit(X, y, sample_weight=-w)
    # GridSearchCV routes the weights to the fits and the scores (metadata routing)
    with config_context(enable_metadata_routing=True):
        est = BKRR2(n_partitions=2, sigma=2.0, random_state=0).set_fit_request(
            sample_weight=True).set_score_request(sample_weight=True)
        search = GridSearchCV(est, {"lam": [1e-4, 1e-2]}, cv=3).fit(X, y, sample_weight=w)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    direct = BKRR2(n_partitions=2, sigma=2.0, random_state=0,
                   lam=search.best_params_["lam"]).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(search.best_estimator_.predict(X), direct.predict(X))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_oracle_refuses_non_finite_targets(bad):
    # argmin over NaN errors chose local model 0 for that row without a word
    X, y = make_regression(n_samples=120, n_features=3, random_state=0)
    model = BKRR2(n_partitions=3, random_state=0).fit(X, y)
    y = y.copy()
    y[0] = bad
    for func in (oracle_predict, oracle_score):
        with pytest.raises(ValueError, match="y contains NaN or infinity"):
            func(model, X, y)


def test_oracle_takes_one_target_in_either_layout():
    # a (n, 1) y against a model fitted on (n,) (or the reverse) was refused, where
    # score and the metrics take it; the output keeps y's shape
    X, y = make_regression(n_samples=90, n_features=3, noise=5.0, random_state=0)
    flat = BKRR2(n_partitions=3, sigma=3.0, random_state=0).fit(X, y)
    column = BKRR2(n_partitions=3, sigma=3.0, random_state=0).fit(X, y[:, None])
    ref = oracle_predict(flat, X, y)
    assert ref.shape == y.shape
    for model in (flat, column):
        assert oracle_predict(model, X, y[:, None]).shape == (90, 1)
        np.testing.assert_array_equal(oracle_predict(model, X, y[:, None])[:, 0], ref)
        np.testing.assert_array_equal(oracle_predict(model, X, y), ref)
        assert oracle_score(model, X, y[:, None]) == oracle_score(flat, X, y)
    with pytest.raises(ValueError, match=r"y has shape \(90, 2\)"):
        oracle_predict(flat, X, np.c_[y, y])
    with pytest.raises(ValueError, match=r"y has shape \(89,\)"):
        oracle_predict(flat, X, y[:-1])


class _Holder:
    """A container whose ``__array__`` returns its own buffer (as xarray's)."""

    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return self.values


@pytest.mark.parametrize("kind", ["dense", "csr", "frame", "container"])
def test_dkrr_keeps_its_own_training_rows(kind, requires):
    # X_fit_ was the caller's float64 array (or a view of a one-column DataFrame's
    # block): changing it in place afterwards changed the predictions (and
    # disagreed with the cached row norms)
    X, y = make_regression(n_samples=80, n_features=1 if kind == "frame" else 3,
                           noise=1.0, random_state=0)
    Xt = np.array(X)
    if kind == "csr":
        X = sp.csr_matrix(X)
    elif kind == "frame":
        pd = requires("pandas")
        X = pd.DataFrame(X)  # (no column names: predict takes the array)
    elif kind == "container":
        X = _Holder(np.ascontiguousarray(X))
    model = DKRR(sigma=2.0, lam=1e-3).fit(X, y)
    before = model.predict(Xt)
    if kind == "csr":
        X.data *= 2.0
    elif kind == "frame":
        X.iloc[0, 0] = 1e3
    elif kind == "container":
        X.values *= 2.0
    else:
        X *= 2.0
    np.testing.assert_array_equal(model.predict(Xt), before)


def test_weights_whose_sum_overflows_give_the_model_of_scaled_weights():
    # weights all multiplied by one number give the same model; their sum past
    # float64 made lam * sum(w) overflow, and the error said "lam is too large"
    from cakernels import BKRR2, BKRR2CV, DKRR

    rng = np.random.RandomState(0)
    X, y = rng.randn(100, 3), rng.randn(100)
    w = rng.uniform(0.5, 2.0, 100)
    for lam, scale in ((1e-4, 1e307), (100.0, 1e305)):  # (the sum, or lam * sum, overflows)
        for make in (lambda: BKRR2(n_partitions=2, lam=lam, random_state=0),
                     lambda: DKRR(lam=lam)):
            big = make().fit(X, y, sample_weight=w * scale)
            ref = make().fit(X, y, sample_weight=w)
            np.testing.assert_allclose(big.predict(X), ref.predict(X), rtol=1e-9, atol=1e-9)
    with pytest.raises(FloatingPointError, match=r"sum\(sample_weight\) = inf.*scale the "
                       "weights down"):
        BKRR2CV(n_partitions=2, cv=2).fit(X, y, sample_weight=w * 1e307)


@pytest.mark.parametrize("tiny", [1e-310, 2.0 ** -1060, 2.0 ** -600])
def test_tiny_weights_give_the_model_of_scaled_weights(tiny):
    # the weighted kernel S K S of weights near 1e-310 is subnormal: its digits were
    # lost (predictions off by 3e-3 at 1e-320, a "not positive definite" warning at
    # 1e-310); weights all multiplied by one number give the same model (integer
    # weights: w * 2**-1060 is exact, a subnormal with 14 bits)
    import warnings

    from cakernels import BKRR2, DKRR
    from cakernels.model_selection import BKRR2CV

    rng = np.random.RandomState(0)
    X, y = rng.randn(100, 3), rng.randn(100)
    w = rng.randint(1, 9, 100).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for make in (lambda: BKRR2(n_partitions=2, lam=1e-3, random_state=0),
                     lambda: DKRR(lam=1e-3)):
            small = make().fit(X, y, sample_weight=w * tiny)
            ref = make().fit(X, y, sample_weight=w)
            np.testing.assert_allclose(small.predict(X), ref.predict(X), rtol=1e-9, atol=1e-9)
        grid = dict(n_partitions=2, sigmas=[0.5, 2.0], lams=[1e-3, 1e-1], cv=3, random_state=0)
        small = BKRR2CV(**grid).fit(X, y, sample_weight=w * tiny)
        ref = BKRR2CV(**grid).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(small.cv_results_["mean_test_score"],
                               ref.cv_results_["mean_test_score"], rtol=1e-9)
    np.testing.assert_allclose(small.predict(X), ref.predict(X), rtol=1e-9, atol=1e-9)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="cgroups and /proc: Linux")
def test_available_memory_counts_cgroup_and_address_space_limits(tmp_path):
    # the memory checks read MemAvailable only: in a container (a cgroup memory limit)
    # or under `ulimit -v` a problem that passed them was killed, or failed in numpy,
    # instead of being refused with the reason
    import subprocess

    from cakernels import _memory

    # cgroup v2, nested: the tightest limit of the cgroup and its parents counts, and
    # the inactive page cache (reclaimed before the kernel kills) is room
    root = tmp_path / "v2"
    (root / "job" / "step").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("memory\n")
    (root / "job" / "memory.max").write_text(f"{3 * 2**30}\n")
    (root / "job" / "memory.current").write_text(f"{2**30 + 2**29}\n")
    (root / "job" / "memory.stat").write_text(f"anon 1\ninactive_file {2**29}\nfile 3\n")
    (root / "job" / "step" / "memory.max").write_text("max\n")
    (root / "job" / "step" / "memory.current").write_text(f"{2**29}\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/job/step\n")
    assert _memory._cgroup_room(str(proc), str(root)) == 2 * 2**30
    # a container near its limit with page cache: the cache is room, not refused
    (root / "job" / "memory.current").write_text(f"{3 * 2**30 - 2**20}\n")
    (root / "job" / "memory.stat").write_text(f"inactive_file {2**31}\n")
    assert _memory._cgroup_room(str(proc), str(root)) == 2**31 + 2**20
    # cgroup v1's memory controller; v1 reports "no limit" as ~2^63
    v1 = tmp_path / "v1" / "memory" / "batch"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text(f"{2**30}\n")
    (v1 / "memory.usage_in_bytes").write_text(f"{2**28}\n")
    (v1 / "memory.stat").write_text(f"cache 9\ntotal_inactive_file {2**27}\n")
    (v1.parent / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (v1.parent / "memory.usage_in_bytes").write_text(f"{2**33}\n")
    proc.write_text("4:memory:/batch\n3:cpu:/other\n")
    assert _memory._cgroup_room(str(proc), str(tmp_path / "v1")) == 2**30 - 2**27
    proc.write_text("4:cpu:/batch\n")  # no memory controller: no limit
    assert _memory._cgroup_room(str(proc), str(tmp_path / "v1")) is None
    proc.write_bytes(b"0::/caf\xe9\n")  # not ASCII, not there: no limit, no error
    assert _memory._cgroup_room(str(proc), str(root)) is None


def test_memory_outside_linux_is_unknown_and_refuses_nothing(monkeypatch, tmp_path):
    # a resource module without RLIMIT_AS (not Linux) raised AttributeError; no
    # /proc/meminfo and no cgroup files: every figure is unknown (None), no refusal
    import types

    from cakernels import _memory

    monkeypatch.setitem(sys.modules, "resource", types.ModuleType("resource"))
    assert _memory._address_space_room() is None
    monkeypatch.setattr(_memory, "_meminfo_available", lambda: None)
    monkeypatch.setattr(_memory, "_cgroup_room", lambda: None)
    assert _memory.available_bytes() is None and _memory.process_room() is None
    assert _memory.shortfall(1e18) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc: Linux")
def test_available_memory_counts_the_address_space_limit_per_process():
    # ulimit -v: the address space left to this process, not the node's memory
    import subprocess

    if any(s in os.environ.get("LD_PRELOAD", "") for s in ("asan", "tsan", "msan")):
        pytest.skip("the sanitizers map terabytes of address space: an address-space "
                    "limit cannot be used under them")
    code = ("import resource; from cakernels import _memory as m; "
            "m._meminfo_available = lambda: 100 * 2**30; m._cgroup_room = lambda: None; "
            "resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, resource.RLIM_INFINITY)); "
            "room = m.process_room(); "
            "print(0 < room < 6 * 2**30, m.available_bytes() == 100 * 2**30, "
            "m.limit_bytes() == room)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.split() == ["True", "True", "True"], out.stderr


def test_a_solve_beyond_the_address_space_limit_is_refused_per_process(monkeypatch):
    # ulimit -v limits each process: a partition of one process is refused against it
    # (and, under MPI, the node's ranks together only against the node's memory)
    import cakernels._memory as memory

    X, y = make_regression(n_samples=1200, n_features=3, random_state=0)
    monkeypatch.setattr(memory, "available_bytes", lambda: 100 * 2**30)
    monkeypatch.setattr(memory, "process_room", lambda: 20 * 2**20)
    with pytest.raises(ValueError, match=r"a partition of 1,200 rows needs about .* of "
                                         r"address space this process may still map .*"
                                         r"ulimit -v\): use more partitions"):
        BKRR2(n_partitions=1).fit(X, y)
    BKRR2(n_partitions=4).fit(X, y)


@pytest.mark.parametrize("make", [lambda: BKRR2(3, random_state=0),
                                  lambda: DCKRR(3, random_state=0),
                                  lambda: DKRR(lam=1e-3)])
def test_a_csr_matrix_stored_out_of_order_gives_the_same_bits(make):
    # unsorted indices and an entry stored in two parts gave predictions a few units
    # in the last place apart from the same matrix in canonical form
    rng = np.random.RandomState(0)
    X = sp.random(150, 12, density=0.3, format="csr", random_state=rng)
    y = X @ rng.randn(12) + 0.1 * rng.randn(150)

    def scrambled(M):
        rows, data, cols, ptr = [], [], [], [0]
        for i in range(M.shape[0]):
            a, b = M.indptr[i], M.indptr[i + 1]
            idx, val = M.indices[a:b][::-1], M.data[a:b][::-1]  # unsorted
            if idx.size:  # the first entry stored as two halves (duplicates)
                idx, val = np.r_[idx, idx[0]], np.r_[val[:1] / 2, val[1:], val[0] / 2]
            cols.append(idx)
            data.append(val)
            ptr.append(ptr[-1] + idx.size)
        out = sp.csr_matrix((np.concatenate(data), np.concatenate(cols), ptr), shape=M.shape)
        assert not out.has_canonical_format
        return out

    Xs = scrambled(X)
    kept = (Xs.data.copy(), Xs.indices.copy(), Xs.indptr.copy())
    ref = make().fit(X, y).predict(X)
    np.testing.assert_array_equal(make().fit(Xs, y).predict(Xs), ref)
    np.testing.assert_array_equal(make().fit(X, y).predict(Xs), ref)
    for a, b in zip((Xs.data, Xs.indices, Xs.indptr), kept):  # the caller's, untouched
        np.testing.assert_array_equal(a, b)


def test_dkrr_copies_the_training_rows_only_when_the_caller_may_share_them():
    # rows gathered from the ranks (X_in None on root mode's other ranks) or built from
    # lists were copied once more: another n x d array on every rank
    from cakernels.kernel_ridge._dkrr import _own_copy

    X = np.arange(12.0).reshape(4, 3)
    assert _own_copy(X, None) is X
    assert _own_copy(X, X.tolist()) is X
    assert _own_copy(X, X) is not X and np.array_equal(_own_copy(X, X), X)
    view = X[:, :]
    assert not np.may_share_memory(_own_copy(view, X), X)
