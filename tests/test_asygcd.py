"""Tests of the native Asy-GCD solver (``_native.asygcd_solve`` /
``cakernels._solvers.asygcd.asygcd_fit``) for the SVM dual without bias: KKT conditions,
agreement with serial GCD and with a brute-force box-QP solution."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import pairwise_kernels

import cakernels._native as _native
from cakernels._solvers.asygcd import asygcd_fit, variable_blocks

KIND = {"linear": 0, "rbf": 1, "poly": 2, "sigmoid": 3}


@pytest.fixture(autouse=True)
def every_thread_requested(monkeypatch):
    """These tests exercise the team itself on small problems: run the threads
    asked for (the default gives every thread at least 1,500 variables; that
    rule has tests of its own in tests/test_contention.py)."""
    monkeypatch.setattr("cakernels._solvers.asygcd.MIN_ROWS_PER_THREAD", 1)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def q_matrix(X, y, kernel="rbf", gamma=0.5, degree=3, coef0=0.0):
    K = pairwise_kernels(X, X, metric=kernel, filter_params=True,
                         gamma=gamma, degree=degree, coef0=coef0)
    return (y[:, None] * y[None, :]) * K


def objective(Q, alpha):
    return 0.5 * alpha @ Q @ alpha - alpha.sum()


def projected_gradient(alpha, grad, upper):
    return np.where(alpha <= 0.0, np.minimum(grad, 0.0),
                    np.where(alpha >= upper, np.maximum(grad, 0.0), grad))


def assert_kkt(alpha, grad, upper, tol):
    assert np.all(alpha >= 0.0) and np.all(alpha <= upper)
    free = (alpha > 0.0) & (alpha < upper)
    assert np.all(np.abs(grad[free]) <= tol)
    assert np.all(grad[alpha <= 0.0] >= -tol)
    assert np.all(grad[alpha >= upper] <= tol)


def reference_solution(Q, upper):
    """Box-constrained QP solved by L-BFGS-B (tiny problems only)."""
    n = Q.shape[0]
    res = minimize(lambda a: (objective(Q, a), Q @ a - 1.0), np.zeros(n),
                   jac=True, method="L-BFGS-B",
                   bounds=[(0.0, u) for u in upper],
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000})
    return res.x, res.fun


def data(n=300, d=5, seed=0):
    X, y = make_classification(n_samples=n, n_features=d, n_informative=3,
                               n_redundant=0, flip_y=0.05, random_state=seed)
    return X, 2.0 * y - 1.0


def solve(X, y, upper, block, alpha=None, kind=1, gamma=0.5, coef0=0.0,
          degree=3.0, n_threads=1, greedy=True, seed=0, tol=1e-3,
          max_iter=-1, cache_mb=200.0):
    n = X.shape[0]
    alpha = np.zeros(n) if alpha is None else alpha
    obj, n_upd, conv, grad = _native.asygcd_solve(
        np.ascontiguousarray(X, dtype=np.float64), y, upper,
        np.ascontiguousarray(block, dtype=np.int64), alpha, kind, gamma,
        coef0, degree, n_threads, greedy, seed, tol, max_iter, cache_mb)
    return alpha, obj, n_upd, conv, np.asarray(grad)


# --------------------------------------------------------------------------
# correctness
# --------------------------------------------------------------------------


def test_serial_matches_brute_force():
    X, y = data(60, 4)
    upper = np.full(60, 2.0)
    Q = q_matrix(X, y)
    a_ref, f_ref = reference_solution(Q, upper)
    alpha, obj, n_upd, conv, grad = solve(X, y, upper, np.zeros(60), tol=1e-6)
    assert conv and n_upd > 0
    assert obj == pytest.approx(f_ref, rel=1e-6, abs=1e-9)
    assert obj == pytest.approx(objective(Q, alpha), rel=1e-10)
    np.testing.assert_allclose(grad, Q @ alpha - 1.0, atol=1e-10)
    np.testing.assert_allclose(alpha, a_ref, atol=1e-3)
    assert_kkt(alpha, grad, upper, 1e-6)


@pytest.mark.parametrize("n_threads", [2, 3])
def test_threads_reach_serial_objective(n_threads):
    X, y = data(400, 6, seed=1)
    r1 = asygcd_fit(X, y, 4.0, gamma=0.3, n_threads=1, tol=1e-3,
                    random_state=0)
    rt = asygcd_fit(X, y, 4.0, gamma=0.3, n_threads=n_threads, tol=1e-3,
                    random_state=0)
    assert r1["converged"] and rt["converged"]
    assert rt["objective"] == pytest.approx(r1["objective"], rel=1e-3)
    upper = np.full(400, 4.0)
    for r in (r1, rt):
        assert_kkt(r["alpha"], r["grad"], upper, 1e-3)
        Q = q_matrix(X, y, gamma=0.3)
        np.testing.assert_allclose(r["grad"], Q @ r["alpha"] - 1.0, atol=1e-9)
        assert r["objective"] == pytest.approx(objective(Q, r["alpha"]),
                                               rel=1e-9)


@pytest.mark.parametrize("n_threads", [2, 3])
def test_threads_on_a_strongly_coupled_kernel(n_threads):
    # Small gamma (every kernel value >= ~0.5) and every point twice, the two
    # copies in different blocks: the hardest case for asynchronous steps
    # (simultaneous steps on coupled or identical variables overshoot) and
    # for per-block greedy selection.  Still the serial optimum and KKT.
    X, y = data(150, 4, seed=6)
    X, y = np.vstack([X, X]), np.concatenate([y, y])
    n = X.shape[0]
    block = np.arange(n) % n_threads  # copies i and i + 150 split up
    upper = np.full(n, 1.0)
    _, f1, _, c1, _ = solve(X, y, upper, np.zeros(n), gamma=0.02)
    for _ in range(3):  # asynchronous: a few runs
        at, ft, _, ct, gt = solve(X, y, upper, block, gamma=0.02,
                                  n_threads=n_threads)
        assert c1 and ct
        assert ft == pytest.approx(f1, rel=1e-3)
        assert_kkt(at, gt, upper, 1e-3)
        Q = q_matrix(X, y, gamma=0.02)
        np.testing.assert_allclose(gt, Q @ at - 1.0, atol=1e-9)


def test_one_column_cache_matches_unlimited():
    X, y = data(300, 5, seed=2)
    n = 300
    upper = np.full(n, 1.0)
    block = variable_blocks(X, 2, random_state=0)
    one_col = n * 8 / 2**20  # one column in total: each thread its slice
    a1, f1, _, c1, g1 = solve(X, y, upper, block, n_threads=2, cache_mb=one_col)
    a2, f2, _, c2, g2 = solve(X, y, upper, block, n_threads=2,
                              cache_mb=np.inf)
    assert c1 and c2
    assert f1 == pytest.approx(f2, rel=1e-3)
    assert_kkt(a1, g1, upper, 1e-3)
    # serial: deterministic, so the cache size cannot change anything
    s1 = solve(X, y, upper, np.zeros(n), cache_mb=n * 8 / 2**20)
    s2 = solve(X, y, upper, np.zeros(n), cache_mb=np.inf)
    np.testing.assert_array_equal(s1[0], s2[0])
    assert s1[1] == s2[1] and s1[2] == s2[2]
    with pytest.raises(ValueError, match="too small"):
        solve(X, y, upper, block, n_threads=2, cache_mb=0.99 * one_col)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_random_selection_converges(n_threads):
    X, y = data(200, 5, seed=3)
    rg = asygcd_fit(X, y, 1.0, gamma=0.5, n_threads=1, random_state=0)
    rr = asygcd_fit(X, y, 1.0, gamma=0.5, n_threads=n_threads,
                    selection="random", max_iter=10**7, random_state=0)
    assert rr["converged"]
    assert rr["objective"] == pytest.approx(rg["objective"], rel=1e-3)
    assert rr["n_updates"] > rg["n_updates"]
    assert_kkt(rr["alpha"], rr["grad"], np.full(200, 1.0), 1e-3)


def test_serial_random_is_reproducible():
    X, y = data(100, 3, seed=4)
    r1 = asygcd_fit(X, y, 1.0, n_threads=1, selection="random",
                    random_state=5, max_iter=10**6)
    r2 = asygcd_fit(X, y, 1.0, n_threads=1, selection="random",
                    random_state=5, max_iter=10**6)
    np.testing.assert_array_equal(r1["alpha"], r2["alpha"])
    assert r1["n_updates"] == r2["n_updates"]


@pytest.mark.parametrize("n_threads", [1, 2])
def test_warm_start_from_optimum(n_threads):
    X, y = data(300, 5, seed=5)
    r = asygcd_fit(X, y, 2.0, n_threads=n_threads, tol=1e-4, random_state=0)
    assert r["converged"]
    r2 = asygcd_fit(X, y, 2.0, n_threads=n_threads, tol=1e-3,
                    random_state=0, alpha0=r["alpha"])
    assert r2["converged"]
    assert r2["n_updates"] <= 5
    assert r2["objective"] == pytest.approx(r["objective"], rel=1e-9)


def test_sample_weight_is_per_sample_upper_bound():
    X, y = data(120, 4, seed=6)
    rng = np.random.RandomState(0)
    sw = rng.uniform(0.1, 3.0, 120)
    sw[:10] = 0.0  # left out
    r = asygcd_fit(X, y, 1.5, sample_weight=sw, gamma=0.5, n_threads=2,
                   tol=1e-6, random_state=0)
    assert r["converged"]
    assert np.all(r["alpha"][:10] == 0.0)
    keep = sw > 0
    upper = 1.5 * sw[keep]
    Q = q_matrix(X[keep], y[keep])
    _, f_ref = reference_solution(Q, upper)
    assert r["objective"] == pytest.approx(f_ref, rel=1e-5)
    assert_kkt(r["alpha"][keep], r["grad"][keep], upper, 1e-6)


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly", "sigmoid"])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_all_kernels(kernel, n_threads):
    X, y = data(80, 4, seed=7)
    X = X / np.abs(X).max()
    params = dict(gamma=0.5, degree=3, coef0=1.0)
    if kernel == "sigmoid":
        params["coef0"] = -0.5  # keeps Q close to positive semi-definite
    r = asygcd_fit(X, y, 1.0, kernel=kernel, n_threads=n_threads, tol=1e-5,
                   max_iter=10**6, random_state=0, **params)
    assert r["converged"]
    upper = np.ones(80)
    Q = q_matrix(X, y, kernel, **params)
    np.testing.assert_allclose(r["grad"], Q @ r["alpha"] - 1.0, atol=1e-9)
    assert_kkt(r["alpha"], r["grad"], upper, 1e-5)
    if kernel != "sigmoid":
        _, f_ref = reference_solution(Q, upper)
        assert r["objective"] == pytest.approx(f_ref, rel=1e-5, abs=1e-8)


def test_max_iter_warns_and_counts():
    X, y = data(200, 5, seed=8)
    with pytest.warns(ConvergenceWarning):
        r = asygcd_fit(X, y, 10.0, n_threads=2, max_iter=7, random_state=0)
    assert not r["converged"]
    assert r["n_updates"] == 7
    assert np.all(r["alpha"] >= 0) and np.all(r["alpha"] <= 10.0)


@pytest.mark.parametrize("selection, name", [("greedy", "Asy-GCD"), ("random", "PSCD")])
def test_default_limit_ends_a_crawl(monkeypatch, selection, name):
    """max_iter=-1 is 1,000 updates per variable, at least AUTO_MIN_UPDATES:
    two distinct points, each with both labels, and C=1e8 (the optimum puts
    the contradicting duplicates at C, and every coordinate step moves them
    by ~1) used to run for hours."""
    import cakernels._solvers.asygcd as agcd

    assert agcd.default_max_updates(10) == 10**6
    assert agcd.default_max_updates(5000) == 5 * 10**6
    monkeypatch.setattr(agcd, "AUTO_MIN_UPDATES", 20_000)
    rng = np.random.default_rng(0)
    X = np.repeat(np.array([[0.0, 0.0], [1.0, 1.0]]), 20, axis=0)
    y = np.where(rng.integers(0, 2, 40) == 1, 1.0, -1.0)
    with pytest.warns(ConvergenceWarning, match=f"{name} did not converge within 40,000 "
                      "updates .max_iter=-1.*lower C"):
        r = asygcd_fit(X, y, 1e8, n_threads=2, selection=selection, random_state=0)
    assert r["n_updates"] == 40_000 and not r["converged"]
    w = np.ones(40)
    w[:30] = 0.0  # ten variables left: the floor
    with pytest.warns(ConvergenceWarning, match="within 20,000 updates"):
        r = asygcd_fit(X, y, 1e8, n_threads=1, selection=selection, sample_weight=w)
    assert r["n_updates"] == 20_000


def test_a_given_max_iter_is_named_as_the_cause():
    # the warning blamed a large C and a nearly singular kernel at C=1, max_iter=5
    X, y = data(60, 3)
    with pytest.warns(ConvergenceWarning) as record:
        r = asygcd_fit(X, y, 1.0, max_iter=5, n_threads=1)
    message = str(record[0].message)
    assert "within max_iter=5 updates" in message and "raise max_iter" in message
    assert "nearly singular" not in message and r["n_updates"] == 5


def test_no_intercept_is_a_positive_zero():
    # without fit_intercept the intercept was shift * sum(a y) = -0.0 for some problems
    X, y = data(60, 3)
    for labels in (y, -y):
        assert not np.signbit(asygcd_fit(X, labels, 1.0, n_threads=1)["intercept"])
    from cakernels import AsyGCDSVC

    clf = AsyGCDSVC(n_threads=1).fit(X, np.arange(60) % 3)
    assert not np.any(np.signbit(clf.intercept_))


def test_more_threads_than_samples():
    X, y = data(30, 3, seed=9)
    X, y = X[:3], np.array([1.0, -1.0, 1.0])
    r = asygcd_fit(X, y, 1.0, n_threads=4, tol=1e-8, random_state=0)
    Q = q_matrix(X, y, gamma=1.0 / (3 * X.var()))
    _, f_ref = reference_solution(Q, np.ones(3))
    assert r["converged"]
    assert r["objective"] == pytest.approx(f_ref, rel=1e-6, abs=1e-10)


def test_variable_blocks_balanced():
    X, _ = data(1003, 4, seed=10)
    b = variable_blocks(X, 4, random_state=0)
    assert b.dtype == np.int64 and b.shape == (1003,)
    counts = np.bincount(b, minlength=4)
    assert counts.sum() == 1003 and counts.max() - counts.min() <= 1
    assert np.all(variable_blocks(X, 1) == 0)
    with pytest.raises(ValueError):
        variable_blocks(X, 0)


# --------------------------------------------------------------------------
# invalid input
# --------------------------------------------------------------------------


def test_bad_input_native():
    X, y = data(20, 3)
    u = np.ones(20)
    b = np.zeros(20, dtype=np.int64)
    ok = dict(X=X, y=y, upper=u, block=b, alpha=np.zeros(20), kind=1,
              gamma=0.5, coef0=0.0, degree=3.0, n_threads=1, greedy=True,
              seed=0, tol=1e-3, max_iter=-1, cache_size_mb=1.0)
    _native.asygcd_solve(**ok)

    def bad(**kw):
        args = dict(ok, alpha=np.zeros(20))
        args.update(kw)
        with pytest.raises(ValueError):
            _native.asygcd_solve(**args)

    bad(X=np.asfortranarray(np.c_[X, X]))
    bad(X=X.astype(np.float32))
    bad(X=X[:, 0].copy())
    bad(X=np.where(np.arange(60).reshape(20, 3) == 5, np.nan, X))
    bad(y=np.where(np.arange(20) == 3, 0.0, y))
    bad(y=y[:-1].copy())
    bad(upper=np.where(np.arange(20) == 3, 0.0, u))
    bad(upper=np.where(np.arange(20) == 3, np.inf, u))
    bad(block=b.astype(np.int32))
    bad(block=b.astype(np.float64))
    bad(block=np.where(np.arange(20) == 3, 1, b))  # id >= n_threads
    bad(block=np.where(np.arange(20) == 3, -1, b))
    bad(block=b[:-1].copy())
    bad(alpha=np.full(20, 2.0))
    bad(alpha=np.full(20, -0.1))
    bad(alpha=np.zeros(20)[::-1])  # not writable
    bad(kind=7)
    bad(gamma=np.nan)
    bad(kind=2, degree=-1.0)
    bad(tol=0.0)
    bad(tol=np.inf)
    bad(n_threads=0)
    bad(cache_size_mb=0.0)
    bad(cache_size_mb=1e-6)
    alpha = np.zeros(20)
    with pytest.raises(ValueError):
        _native.asygcd_solve(**dict(ok, alpha=alpha, upper=alpha))  # aliasing


@pytest.mark.parametrize("tol", [1.0, 5.0])
def test_a_tol_of_one_or_more_is_an_error_not_the_model_zero(tol):
    # every variable's projected gradient is 1 at alpha = 0: tol >= 1 stopped before
    # the first step and returned the model 0 (one class everywhere), silently
    from cakernels import CASVC, AsyGCDSVC

    X, y = data(60, 3)
    labels = np.where(y > 0, "a", "b")
    for fit in (lambda: asygcd_fit(X, y, 1.0, tol=tol),
                lambda: AsyGCDSVC(tol=tol).fit(X, labels),
                lambda: CASVC(n_partitions=2, solver="pscd", tol=tol,
                              random_state=0).fit(X, labels)):
        with pytest.raises(ValueError, match=r"tol=.* is not below 1: .* every variable's "
                                             r"is 1"):
            fit()
    # just below 1: it trains
    assert asygcd_fit(X, y, 1.0, tol=0.999)["n_updates"] >= 1


def test_bad_input_python():
    X, y = data(20, 3)
    with pytest.raises(ValueError):
        asygcd_fit(X, y, 0.0)
    with pytest.raises(ValueError):
        asygcd_fit(X, y * 2, 1.0)
    with pytest.raises(ValueError):
        asygcd_fit(X, y, 1.0, kernel="chi2")
    with pytest.raises(ValueError):
        asygcd_fit(X, y, 1.0, selection="cyclic")
    with pytest.raises(ValueError):
        asygcd_fit(X, y, 1.0, n_threads=0)
    with pytest.raises(ValueError):
        asygcd_fit(X, y, 1.0, sample_weight=np.zeros(20))
    with pytest.raises(ValueError):
        asygcd_fit(X, y, 1.0, alpha0=np.full(20, 5.0))


@pytest.mark.parametrize("gamma", [-1.0, np.nan, np.inf])
def test_low_level_fits_refuse_a_negative_or_non_finite_gamma(gamma):
    # exp(+d^2) is no kernel: both reported a meaningless solve as converged
    from cakernels._solvers.smo import smo_fit

    X, y = data(20, 3)
    for fit in (asygcd_fit, smo_fit):
        with pytest.raises(ValueError, match="gamma must be a finite float >= 0"):
            fit(X, y, 1.0, gamma=gamma)
    assert asygcd_fit(X, y, 1.0, gamma=0.0)["converged"]  # (as SVC: a constant kernel)


def test_default_threads():
    X, y = data(50, 3)
    r = asygcd_fit(X, y, 1.0, random_state=0)
    assert r["converged"]


# --------------------------------------------------------------------------
# property test
# --------------------------------------------------------------------------


@st.composite
def tiny_problems(draw):
    n = draw(st.integers(2, 20))
    d = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.RandomState(seed)
    X = rng.randn(n, d)
    if draw(st.booleans()):  # duplicated rows
        X[n // 2:] = X[: n - n // 2]
    y = rng.choice([-1.0, 1.0], n)
    C = draw(st.sampled_from([1e-6, 1e-2, 1.0, 100.0, 1e4]))
    kernel = draw(st.sampled_from(["rbf", "linear"]))
    n_threads = draw(st.integers(1, 3))
    greedy = draw(st.booleans())
    return X, y, C, kernel, n_threads, greedy, seed


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(tiny_problems())
def test_property_feasible_and_kkt(problem):
    X, y, C, kernel, n_threads, greedy, seed = problem
    n = X.shape[0]
    tol = 1e-3
    block = np.arange(n, dtype=np.int64) % n_threads
    upper = np.full(n, C)
    alpha, obj, n_upd, conv, grad = solve(
        X, y, upper, block, kind=KIND[kernel], gamma=0.5, n_threads=n_threads,
        greedy=greedy, seed=seed, tol=tol, max_iter=2 * 10**5)
    assert np.all(alpha >= 0.0) and np.all(alpha <= upper)
    Q = q_matrix(X, y, kernel, gamma=0.5)
    np.testing.assert_allclose(grad, Q @ alpha - 1.0,
                               atol=1e-9 * max(1.0, C * n))
    assert obj == pytest.approx(objective(Q, alpha), rel=1e-9,
                                abs=1e-9 * max(1.0, C * C * n))
    if conv:
        assert_kkt(alpha, grad, upper, tol)
    else:  # only possible when the update budget ran out
        assert n_upd == 2 * 10**5


def test_warnings_clean():
    X, y = data(100, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        asygcd_fit(X, y, 1.0, n_threads=2, random_state=0)


# --------------------------------------------------------------------------
# CSR input, shrinking, the regularised intercept (kernel shift)
# --------------------------------------------------------------------------


def sparse_data(n=250, d=12, seed=4):
    X, y = data(n, d, seed)
    rng = np.random.default_rng(seed)
    X[rng.random(X.shape) < 0.6] = 0.0  # ~60% zeros, some empty rows
    X[:3] = 0.0
    return X, y


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid"])
@pytest.mark.parametrize("shrinking", [False, True])
def test_csr_equals_dense_bit_for_bit(kernel, shrinking):
    import scipy.sparse as sp

    X, y = sparse_data()
    kw = dict(kernel=kernel, gamma=0.3, coef0=0.5, degree=2, n_threads=1,
              shrinking=shrinking, random_state=0)
    rd = asygcd_fit(X, y, 2.0, **kw)
    rs = asygcd_fit(sp.csr_matrix(X), y, 2.0, **kw)
    np.testing.assert_array_equal(rs["alpha"], rd["alpha"])
    np.testing.assert_array_equal(rs["grad"], rd["grad"])
    assert rs["objective"] == rd["objective"] and rs["n_updates"] == rd["n_updates"]


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("float_exact", [False, True])
def test_feature_major_slices_equal_row_slices(kernel, sparse, float_exact):
    # A budget of a few columns computes the kernel slices row by row; an
    # unlimited one from feature-major copies of the threads' rows (ck_fmajor),
    # kept in float when every value is a float exactly (multiples of 1/8).
    # Same products in the same order: the serial solutions agree bit for bit.
    import scipy.sparse as sp

    X, y = sparse_data()
    if float_exact:
        X = np.round(X * 8) / 8
    Xin = sp.csr_matrix(X) if sparse else X
    kw = dict(kernel=kernel, gamma=0.3, coef0=0.5, degree=2, n_threads=1,
              random_state=0)
    few_columns = 3 * X.shape[0] * 8 / 2**20  # copy (12 columns' worth) excluded
    rr = asygcd_fit(Xin, y, 2.0, cache_size=few_columns, **kw)
    rf = asygcd_fit(Xin, y, 2.0, cache_size=np.inf, **kw)
    np.testing.assert_array_equal(rf["alpha"], rr["alpha"])
    np.testing.assert_array_equal(rf["grad"], rr["grad"])
    assert rf["n_updates"] == rr["n_updates"]
    if kernel == "sigmoid":
        return  # not PSD: other threads counts may end in other stationary points
    # two threads, each its own copy: still the serial optimum
    r2 = asygcd_fit(Xin, y, 2.0, **{**kw, "n_threads": 2}, cache_size=np.inf)
    assert r2["converged"]
    assert r2["objective"] == pytest.approx(rr["objective"], rel=1e-3)


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid"])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("float_exact", [False, True])
@pytest.mark.parametrize("shrinking", [False, True])
def test_feature_major_switch_same_bits_same_slices(kernel, sparse, float_exact,
                                                    shrinking):
    # The private switch feature_major=False (for bench_feature_major.py)
    # computes every slice from the rows of X with the same cache budget and
    # the same number of cached slices: the serial solve must give the same
    # bits and compute the same slices, and only the default use the copy.
    # The budget holds the copy (a quarter at most) and 36 of 250 columns,
    # so slices are evicted and recomputed.
    import scipy.sparse as sp

    X, y = sparse_data()
    if float_exact:
        X = np.round(X * 8) / 8
    Xin = sp.csr_matrix(X) if sparse else X
    kw = dict(kernel=kernel, gamma=0.3, coef0=0.5, degree=2, n_threads=1,
              shrinking=shrinking, random_state=0, cache_size=100_000 / 2**20,
              return_stats=True)
    rf = asygcd_fit(Xin, y, 2.0, **kw)
    rr = asygcd_fit(Xin, y, 2.0, feature_major=False, **kw)
    np.testing.assert_array_equal(rf["alpha"], rr["alpha"])
    np.testing.assert_array_equal(rf["grad"], rr["grad"])
    assert rf["objective"] == rr["objective"]
    assert rf["n_updates"] == rr["n_updates"]
    sf, sr = rf["stats"], rr["stats"]
    assert (sf["fm_threads"], sr["fm_threads"]) == (1, 0)
    copy_bytes = X.size * (4 if float_exact else 8)
    assert sf["capacity"] == sr["capacity"] == (100_000 - copy_bytes) // (8 * X.shape[0])
    assert sf["n_slices"] == sr["n_slices"] > sf["capacity"]  # evictions happened
    assert sf["slice_seconds"] > 0 and sr["slice_seconds"] > 0
    # without return_stats the result has no "stats" and the same bits
    plain = asygcd_fit(Xin, y, 2.0, **{**kw, "return_stats": False})
    assert "stats" not in plain
    np.testing.assert_array_equal(plain["alpha"], rf["alpha"])


def test_feature_major_switch_two_threads():
    X, y = sparse_data()
    kw = dict(gamma=0.3, n_threads=2, random_state=0, cache_size=np.inf,
              return_stats=True)
    r1 = asygcd_fit(X, y, 2.0, **{**kw, "n_threads": 1})
    rf = asygcd_fit(X, y, 2.0, **kw)
    rr = asygcd_fit(X, y, 2.0, feature_major=False, **kw)
    # without OpenMP the team is one thread whatever n_threads asks for
    team = 2 if _native.openmp_enabled() else 1
    # a team that collapsed (other processes on the cores: the CPU share test) finishes
    # on one thread, whose worker reports its own copy
    expect = 1 if rf["stats"]["collapsed"] else team
    assert rf["stats"]["fm_threads"] == expect and rr["stats"]["fm_threads"] == 0
    for r in (rf, rr):
        assert r["converged"]
        assert r["objective"] == pytest.approx(r1["objective"], rel=1e-3)


def test_feature_major_switch_native_defaults():
    X, y = data(80, 4)
    args = (np.ascontiguousarray(X), y, np.full(80, 1.0), np.zeros(80, dtype=np.int64))
    tail = (1, 0.5, 0.0, 3.0, 1, True, 0, 1e-3, -1, 10.0)
    out = _native.asygcd_solve(*args, np.zeros(80), *tail)
    assert len(out) == 4  # no stats unless asked
    out = _native.asygcd_solve(*args, np.zeros(80), *tail, return_stats=True)
    assert len(out) == 5 and out[4]["fm_threads"] == 1
    out = _native.asygcd_solve(*args, np.zeros(80), *tail, feature_major=False,
                               return_stats=True)
    assert out[4]["fm_threads"] == 0


def test_csr_two_threads_and_unsorted_input():
    import scipy.sparse as sp

    X, y = sparse_data()
    Xs = sp.csr_matrix(X)
    # the same matrix with unsorted column indices and a duplicate entry
    coo = Xs.tocoo()
    order = np.random.default_rng(0).permutation(coo.nnz)
    rows = np.r_[coo.row[order], 5]
    cols = np.r_[coo.col[order], 0]
    vals = np.r_[coo.data[order], 0.0]
    messy = sp.csr_matrix((vals, (rows, cols)), shape=X.shape)
    messy.has_sorted_indices = False
    before = messy.copy()
    rd = asygcd_fit(X, y, 2.0, gamma=0.3, n_threads=1, random_state=0)
    r2 = asygcd_fit(messy, y, 2.0, gamma=0.3, n_threads=2, random_state=0)
    assert r2["objective"] == pytest.approx(rd["objective"], rel=1e-3)
    assert_kkt(r2["alpha"], r2["grad"], np.full(len(y), 2.0), 1e-3)
    # the caller's matrix is untouched
    np.testing.assert_array_equal(messy.indices, before.indices)
    np.testing.assert_array_equal(messy.data, before.data)


def test_bad_csr_native():
    X, y = sparse_data(20, 4)
    import scipy.sparse as sp

    S = sp.csr_matrix(X)
    good = (S.data, S.indices.astype(np.int64), S.indptr.astype(np.int64), 4)
    args = dict(y=y, upper=np.ones(20), block=np.zeros(20, dtype=np.int64), kind=1,
                gamma=0.5, coef0=0.0, degree=3.0, n_threads=1, greedy=True, seed=0,
                tol=1e-3, max_iter=-1, cache_size_mb=1.0)
    _native.asygcd_solve(good, alpha=np.zeros(20), **args)
    ind = good[1].copy()
    r = np.flatnonzero(np.diff(good[2]) >= 2)[0]
    lo = good[2][r]
    ind[lo], ind[lo + 1] = ind[lo + 1], ind[lo]  # unsorted within a row
    vals_nan = good[0].copy()
    vals_nan[0] = np.nan
    for bad in [(good[0], ind, good[2], 4),
                (good[0], good[1], good[2], 2),            # index >= n_cols
                (vals_nan, good[1], good[2], 4),
                (good[0][:-1].copy(), good[1], good[2], 4),  # lengths differ
                (good[0], good[1].astype(np.int32), good[2], 4),
                (good[0], good[1], good[2], -1),
                (good[0], good[1]),
                "not a matrix"]:
        with pytest.raises(ValueError):
            _native.asygcd_solve(bad, alpha=np.zeros(20), **args)


def test_shrinking_reaches_the_same_optimum():
    X, y = data(200, 5, seed=6)
    u = np.full(200, 5.0)
    Q = q_matrix(X, y)
    a_ref, f_ref = reference_solution(Q, u)
    for n_threads in (1, 2):
        for shrinking in (False, True):
            r = asygcd_fit(X, y, 5.0, gamma=0.5, tol=1e-4, n_threads=n_threads,
                           shrinking=shrinking, random_state=0)
            assert r["converged"]
            assert r["objective"] == pytest.approx(f_ref, rel=1e-5)
            # grad is Q a - 1 for every variable, shrunk or not
            np.testing.assert_allclose(r["grad"], Q @ r["alpha"] - 1.0, atol=1e-9)
            assert_kkt(r["alpha"], r["grad"], u, 1e-4)


def shrinking_problem(n=2400, seed=11):
    """Noisy labels and a small C: most support vectors at the upper bound
    (G_bar's case), the rest free; n > 1000 so that every thread shrinks
    several times."""
    X, y = make_classification(n_samples=n, n_features=6, n_informative=4,
                               n_redundant=0, flip_y=0.2, random_state=seed)
    return X, 2.0 * y - 1.0


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("shrinking", [False, True])
def test_page_sizes_give_the_same_bits(sparse, shrinking):
    # The slices live in pages (native/ck_qcache.c); every walk over them
    # (gradient steps, the rebuild's cached part, the shrinking's swaps)
    # must give the same bits for every page size, with a budget small
    # enough that slices are evicted, extended and dropped by the swaps.
    import scipy.sparse as sp

    X, y = shrinking_problem(1500)
    Xin = sp.csr_matrix(X) if sparse else X
    kw = dict(gamma=0.5, tol=1e-4, n_threads=1, shrinking=shrinking, random_state=0,
              cache_size=60 * 1500 * 8 / 2**20, return_stats=True)
    ref = asygcd_fit(Xin, y, 0.5, **kw)
    assert ref["converged"]
    for page in (1, 3, 64, 1 << 20):
        r = asygcd_fit(Xin, y, 0.5, page_size=page, **kw)
        assert r["stats"]["page_doubles"] == (1 << (int(page) - 1).bit_length())
        np.testing.assert_array_equal(r["alpha"], ref["alpha"])
        np.testing.assert_array_equal(r["grad"], ref["grad"])
        assert r["objective"] == ref["objective"]
        assert r["n_updates"] == ref["n_updates"]
    if shrinking:
        assert ref["stats"]["rebuilds"] >= 1
        # the mean active set is a fraction of the variables
        assert ref["stats"]["active_sum"] / ref["n_updates"] < 0.9 * 1500
    with pytest.raises(ValueError, match="page_doubles"):
        asygcd_fit(X, y, 0.5, page_size=-1)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("cache_size", [0.25, 200.0])
def test_shrinking_many_bounded_variables(n_threads, cache_size):
    """Shrinking by swaps with LIBSVM's G_bar: the gradient of every variable,
    shrunk or not, is Q a - 1 at the end, the optimum is the one without
    shrinking, and a warm start at bounded variables starts G_bar right."""
    X, y = shrinking_problem()
    C = 0.5
    u = np.full(len(y), C)
    Q = q_matrix(X, y)
    kw = dict(gamma=0.5, tol=1e-4, n_threads=n_threads, cache_size=cache_size,
              random_state=0, min_rows_per_thread=1, return_stats=True)
    plain = asygcd_fit(X, y, C, shrinking=False, **kw)
    r = asygcd_fit(X, y, C, shrinking=True, page_size=64, **kw)
    assert r["converged"] and plain["converged"]
    assert np.count_nonzero(r["alpha"] >= C) > 300  # G_bar carries most of them
    assert r["stats"]["rebuilds"] >= n_threads
    np.testing.assert_allclose(r["grad"], Q @ r["alpha"] - 1.0, atol=1e-9)
    assert_kkt(r["alpha"], r["grad"], u, 1e-4)
    assert r["objective"] == pytest.approx(plain["objective"], rel=1e-6)
    # warm start from a point with many variables at the bound
    a0 = np.where(plain["alpha"] >= C, C, 0.5 * plain["alpha"])
    w = asygcd_fit(X, y, C, shrinking=True, alpha0=a0, **kw)
    assert w["converged"]
    np.testing.assert_allclose(w["grad"], Q @ w["alpha"] - 1.0, atol=1e-9)
    assert w["objective"] == pytest.approx(plain["objective"], rel=1e-6)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_intercept_is_the_shifted_kernel(n_threads):
    """fit_intercept solves the dual with K + s^2 (a constant feature s)."""
    X, y = data(150, 4, seed=7)
    y[:110] = -1.0  # imbalanced, so that an intercept matters
    s = 1.5
    u = np.full(150, 3.0)
    Q = (y[:, None] * y[None, :]) * (pairwise_kernels(X, metric="rbf", gamma=0.5) + s * s)
    a_ref, f_ref = reference_solution(Q, u)
    r = asygcd_fit(X, y, 3.0, gamma=0.5, tol=1e-5, n_threads=n_threads,
                   fit_intercept=True, intercept_scaling=s, random_state=0)
    assert r["objective"] == pytest.approx(f_ref, rel=1e-6)
    np.testing.assert_allclose(r["alpha"], a_ref, atol=1e-3)
    assert r["intercept"] == pytest.approx(s * s * np.dot(r["alpha"], y))
    # linear kernel: exactly the no-bias problem on [X, s]
    r_lin = asygcd_fit(X, y, 3.0, kernel="linear", tol=1e-6, n_threads=1,
                       fit_intercept=True, intercept_scaling=s, random_state=0)
    r_aug = asygcd_fit(np.c_[X, np.full(150, s)], y, 3.0, kernel="linear", tol=1e-6,
                       n_threads=1, random_state=0)
    assert r_lin["objective"] == pytest.approx(r_aug["objective"], rel=1e-7)
    assert asygcd_fit(X, y, 3.0, gamma=0.5, random_state=0)["intercept"] == 0.0
    with pytest.raises(ValueError, match="intercept_scaling"):
        asygcd_fit(X, y, 3.0, fit_intercept=True, intercept_scaling=0.0)
    with pytest.raises(ValueError, match="shrinking"):
        asygcd_fit(X, y, 3.0, shrinking="auto")
    with pytest.raises(ValueError, match="shift"):
        _native.asygcd_solve(X, y, u, np.zeros(150, dtype=np.int64), np.zeros(150), 1,
                             0.5, 0.0, 3.0, 1, True, 0, 1e-3, -1, 10.0, shift=-1.0)


def test_cache_smaller_than_a_column_is_a_clear_error():
    X, y = data(300, 5)
    too_small = 0.99 * 300 * 8 / 2**20
    with pytest.raises(ValueError, match="too small"):
        asygcd_fit(X, y, 1.0, cache_size=too_small)
    # one column is enough, for any number of threads
    asygcd_fit(X, y, 1.0, cache_size=300 * 8 / 2**20, n_threads=2, random_state=0)


MEMORY_SCRIPT = """
import resource, sys
import numpy as np
resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))
import cakernels._native as nat
n = 16_000
rng = np.random.default_rng(0)
X = rng.standard_normal((n, 3))
y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
results = []
for cache_mb in (2100.0, 50.0):
    # a warm start with every alpha nonzero computes all 16,000 columns of
    # 16,000 doubles, which the 2,100 MB budget would keep: 2.05 GB, beyond
    # the 1.5 GB address-space limit
    alpha = np.full(n, 0.5)
    obj, n_upd, conv, grad = nat.asygcd_solve(
        X, y, np.ones(n), np.zeros(n, dtype=np.int64), alpha, 1, 1.0, 0.0, 3.0, 1,
        True, 0, 1e-3, 10, cache_mb, shrinking=True)
    results.append((obj, alpha.copy(), np.asarray(grad).copy()))
same = results[0][0] == results[1][0] and all(
    np.array_equal(a, b) for a, b in zip(results[0][1:], results[1][1:]))
print("same" if same else "different")
sys.exit(0 if same else 1)
"""


def test_cache_beyond_memory_stops_growing(tmp_path):
    """A cache budget beyond what the system gives is no error: the cache is
    allocated as the solve needs it and stops growing where an allocation
    fails (evicting from then on), with the same result as a small cache."""
    import os
    import subprocess
    import sys

    import cakernels

    if any(s in os.environ.get("LD_PRELOAD", "") for s in ("asan", "tsan", "msan")):
        pytest.skip("the sanitizers reserve terabytes of address space: "
                    "an address-space limit cannot be used under them")
    # the child imports the very cakernels under test (installed or built in place)
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(cakernels.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "same" in out.stdout


@pytest.mark.parametrize("C", [100.0, 0.01])
def test_one_update_is_the_exact_coordinate_step(C):
    # a mutation halving every coordinate step survived (it still converges, in more
    # updates): from alpha = 0 one update is the exact minimiser along its
    # coordinate, min(1 / Q_jj, C) (the gradient is -1), and the gradient follows it
    X, y = make_classification(n_samples=60, n_features=4, random_state=0)
    ypm = np.where(y == 1, 1.0, -1.0)
    with pytest.warns(ConvergenceWarning):
        res = asygcd_fit(X, ypm, C, kernel="linear", max_iter=1, n_threads=1, random_state=0)
    alpha = res["alpha"]
    (j,) = np.flatnonzero(alpha)
    Q = (ypm[:, None] * ypm[None, :]) * (X @ X.T)
    assert alpha[j] == pytest.approx(min(1.0 / Q[j, j], C), rel=1e-12)
    np.testing.assert_allclose(res["grad"], Q[:, j] * alpha[j] - 1.0, rtol=1e-12, atol=1e-12)
