"""Tests of the native SMO solver (``_native.smo_solve`` / ``cakernels._solvers.smo.smo_fit``)
against scikit-learn's SVC (LIBSVM) and the KKT conditions."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import make_blobs, make_classification, make_moons
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

import cakernels._native as _native
from cakernels._solvers.smo import smo_fit

KIND = {"linear": 0, "rbf": 1, "poly": 2, "sigmoid": 3}


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def kernel_matrix(X, Y, kernel, gamma, degree, coef0):
    return pairwise_kernels(X, Y, metric=kernel, filter_params=True,
                            gamma=gamma, degree=degree, coef0=coef0)


def dual_objective(K, y, alpha):
    ay = alpha * y
    return 0.5 * ay @ K @ ay - alpha.sum()


def kkt_gap(K, y, alpha, upper):
    """m(a) - M(a): the maximal violating pair gap (<= 0 at an exact optimum)."""
    G = y * (K @ (alpha * y)) - 1.0
    yG = -y * G
    up = ((y > 0) & (alpha < upper)) | ((y < 0) & (alpha > 0))
    low = ((y > 0) & (alpha > 0)) | ((y < 0) & (alpha < upper))
    if not up.any() or not low.any():
        return -np.inf
    return yG[up].max() - yG[low].min()


def svc_alpha(svc, n):
    """alpha (>= 0) of an SVC fitted on labels -1/+1."""
    a = np.zeros(n)
    a[svc.support_] = np.abs(svc.dual_coef_[0])
    return a


def dataset(name):
    if name == "classification":
        X, y = make_classification(n_samples=300, n_features=6, n_informative=4,
                                   flip_y=0.05, random_state=0)
    elif name == "moons":
        X, y = make_moons(n_samples=400, noise=0.3, random_state=1)
    elif name == "blobs":
        X, y = make_blobs(n_samples=600, centers=[[0, 0], [1.5, 1.0]],
                          cluster_std=1.0, random_state=2)
    else:
        raise AssertionError(name)
    X = StandardScaler().fit_transform(X)
    return np.ascontiguousarray(X), 2.0 * y - 1.0


def compare_with_svc(X, y, C, kernel, gamma, degree=3, coef0=0.0, *,
                     sample_weight=None, class_weight=None, tol=1e-3):
    cwv = None
    if class_weight is not None:
        cwv = [class_weight[-1], class_weight[1]]
    res = smo_fit(X, y, C, sample_weight=sample_weight, class_weight_vector=cwv,
                  kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                  tol=tol, max_iter=-1, cache_size=np.inf)
    svc = SVC(C=C, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
              tol=tol, class_weight=class_weight)
    svc.fit(X, y, sample_weight=sample_weight)
    K = kernel_matrix(X, X, kernel, gamma, degree, coef0)
    n = len(y)

    upper = np.full(n, float(C))
    if cwv is not None:
        upper *= np.where(y > 0, cwv[1], cwv[0])
    if sample_weight is not None:
        upper *= sample_weight

    assert res["converged"]
    alpha = res["alpha"]
    # feasibility
    assert np.all(alpha >= 0) and np.all(alpha <= upper)
    assert abs(y @ alpha) <= 1e-8 * max(1.0, upper.max())
    # objective (ours as reported and recomputed) vs LIBSVM's
    obj = dual_objective(K, y, alpha)
    obj_svc = dual_objective(K, y, svc_alpha(svc, n))
    assert res["objective"] == pytest.approx(obj, rel=1e-9, abs=1e-9)
    assert obj == pytest.approx(obj_svc, rel=1e-3)
    # KKT at the returned alpha
    assert kkt_gap(K, y, alpha, upper) <= tol * (1 + 1e-6) + 1e-9 * upper.max()
    # intercept and predictions
    scale = max(1.0, abs(svc.intercept_[0]))
    assert res["intercept"] == pytest.approx(svc.intercept_[0], abs=2e-2 * scale)
    dec = K @ (alpha * y) + res["intercept"]
    dec_svc = svc.decision_function(X)
    differ = np.sign(dec) != np.sign(dec_svc)
    assert differ.sum() <= 5
    assert np.all(np.abs(dec_svc[differ]) < 0.05)
    np.testing.assert_array_equal(res["support"], np.flatnonzero(alpha > 0))
    return res, svc


# --------------------------------------------------------------------------
# against LIBSVM
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["classification", "moons", "blobs"])
@pytest.mark.parametrize("C", [0.1, 1.0, 30.0])
def test_rbf_matches_svc(name, C):
    X, y = dataset(name)
    compare_with_svc(X, y, C, "rbf", 0.5)


@pytest.mark.parametrize(
    "kernel, gamma, degree, coef0",
    [("linear", 1.0, 3, 0.0), ("rbf", "scale", 3, 0.0), ("poly", 0.3, 3, 1.0),
     ("poly", 0.5, 2, 0.0), ("sigmoid", 0.05, 3, -0.5)])
def test_all_kernels_match_svc(kernel, gamma, degree, coef0):
    X, y = dataset("classification")
    if gamma == "scale":
        gamma = 1.0 / (X.shape[1] * X.var())
    compare_with_svc(X, y, 1.0, kernel, gamma, degree, coef0)


def test_sample_weight_matches_svc():
    X, y = dataset("moons")
    rng = np.random.default_rng(0)
    sw = rng.uniform(0.1, 3.0, size=len(y))
    compare_with_svc(X, y, 2.0, "rbf", 1.0, sample_weight=sw)


def test_zero_sample_weight_leaves_sample_out():
    X, y = dataset("moons")
    rng = np.random.default_rng(1)
    sw = rng.uniform(0.5, 2.0, size=len(y))
    sw[::7] = 0.0
    res = smo_fit(X, y, 1.0, sample_weight=sw, kernel="rbf", gamma=1.0)
    assert np.all(res["alpha"][::7] == 0.0)
    keep = sw > 0
    sub = smo_fit(X[keep], y[keep], 1.0, sample_weight=sw[keep], kernel="rbf",
                  gamma=1.0)
    np.testing.assert_array_equal(res["alpha"][keep], sub["alpha"])
    # SVC drops zero-weight samples too (its support_ indexes the rest)
    compare_with_svc(X[keep], y[keep], 1.0, "rbf", 1.0, sample_weight=sw[keep])


def test_class_weight_matches_svc():
    X, y = dataset("blobs")
    compare_with_svc(X, y, 1.0, "rbf", 0.5, class_weight={-1: 2.0, 1: 0.5})


# --------------------------------------------------------------------------
# solver behaviour
# --------------------------------------------------------------------------


def test_warm_start_from_optimum():
    X, y = dataset("moons")
    cold = smo_fit(X, y, 10.0, kernel="rbf", gamma=1.0, tol=1e-6)
    assert cold["n_iter"] > 100
    warm = smo_fit(X, y, 10.0, kernel="rbf", gamma=1.0, tol=1e-3,
                   alpha0=cold["alpha"])
    assert warm["converged"] and warm["n_iter"] <= 5
    assert warm["objective"] == pytest.approx(cold["objective"], rel=1e-9)
    # from LIBSVM's solution at the same tolerance
    svc = SVC(C=10.0, gamma=1.0, tol=1e-4).fit(X, y)
    warm2 = smo_fit(X, y, 10.0, kernel="rbf", gamma=1.0, tol=1e-3,
                    alpha0=svc_alpha(svc, len(y)))
    assert warm2["converged"] and warm2["n_iter"] <= 5


def test_infeasible_warm_starts_name_the_entry_in_the_callers_numbering():
    """Rows of zero weight (bound 0) are left out before the native solve: the
    box check runs first, on every row, and names the caller's index; a
    positive alpha0 on such a row is infeasible (it was silently set to 0)."""
    from cakernels._solvers.asygcd import asygcd_fit

    X, y = dataset("classification")
    n = len(y)
    sw = np.ones(n)
    sw[:10] = 0.0
    a0 = np.zeros(n)
    a0[50] = 5.0
    for fit in (smo_fit, asygcd_fit):
        with pytest.raises(ValueError, match=r"alpha0\[50\] = 5\.0, upper = 1\.0"):
            fit(X, y, 1.0, gamma=0.3, sample_weight=sw, alpha0=a0)
    i, j = np.flatnonzero(y > 0)[0], np.flatnonzero(y < 0)[0]
    sw = np.ones(n)
    sw[[i, j]] = 0.0
    a0 = np.zeros(n)
    a0[[i, j]] = 0.7  # y^T a0 = 0, but above the rows' bound 0
    for fit in (smo_fit, asygcd_fit):
        with pytest.raises(ValueError, match=rf"alpha0\[{min(i, j)}\] = 0\.7, upper = 0\.0"):
            fit(X, y, 1.0, gamma=0.3, sample_weight=sw, alpha0=a0)
    a0 = np.zeros(n)
    a0[i] = 0.5
    with pytest.raises(ValueError, match=r"y\^T alpha0 = 0.5"):
        smo_fit(X, y, 1.0, gamma=0.3, alpha0=a0)


def test_warm_start_projection_and_rejection():
    X, y = dataset("classification")
    n = len(y)
    C = 1.0
    ref = smo_fit(X, y, C, kernel="rbf", gamma=0.5)
    # slightly off the box and the equality: projected, then solved
    a0 = ref["alpha"].copy()
    a0[a0 == C] += 1e-10
    a0[0] += 1e-12
    res = smo_fit(X, y, C, kernel="rbf", gamma=0.5, alpha0=a0)
    assert res["converged"] and np.all(res["alpha"] <= C)
    assert abs(y @ res["alpha"]) < 1e-8
    # clearly infeasible: rejected, alpha untouched
    Xc = np.ascontiguousarray(X)
    yc = np.ascontiguousarray(y)
    upper = np.full(n, C)
    bad = np.zeros(n)
    bad[0] = 0.5  # y^T a != 0
    before = bad.copy()
    with pytest.raises(ValueError, match="warm start"):
        _native.smo_solve(Xc, yc, upper, bad, 1, 0.5, 0.0, 3.0, 1e-3, -1, 100.0)
    np.testing.assert_array_equal(bad, before)
    bad = np.full(n, 2.0 * C)  # outside the box
    with pytest.raises(ValueError, match="warm start"):
        _native.smo_solve(Xc, yc, upper, bad, 1, 0.5, 0.0, 3.0, 1e-3, -1, 100.0)


def test_the_gradient_out_and_in_of_a_path_over_C():
    """``grad`` is Q alpha - 1 at the solution (NaN at rows of weight 0); given
    back with its alpha as the next C's warm start it replaces the gradient's
    kernel columns and reaches the same optimum; a repaired warm start (the
    repair moves alpha) computes the gradient instead of trusting it."""
    X, y = dataset("classification")
    n = len(y)
    w = np.ones(n)
    w[:7] = 0.0
    a = smo_fit(X, y, 1.0, gamma=0.3, sample_weight=w, tol=1e-6)
    Q = y[:, None] * y[None, :] * pairwise_kernels(X, metric="rbf", gamma=0.3)
    assert np.all(np.isnan(a["grad"][:7]))
    np.testing.assert_allclose(a["grad"][7:], (Q @ a["alpha"] - 1.0)[7:], rtol=0, atol=1e-12)
    kw = dict(gamma=0.3, sample_weight=w, tol=1e-6)
    plain = smo_fit(X, y, 10.0, alpha0=a["alpha"], **kw)
    given = smo_fit(X, y, 10.0, alpha0=a["alpha"], grad0=a["grad"], **kw)
    cold = smo_fit(X, y, 10.0, **kw)
    for res in (given, plain):
        assert res["converged"]
        assert res["objective"] == pytest.approx(cold["objective"], rel=1e-8)
        np.testing.assert_allclose(res["alpha"], cold["alpha"], atol=1e-3)
    # a gradient that is not alpha's gives another objective (it is used) ...
    wrong = smo_fit(X, y, 10.0, alpha0=a["alpha"], grad0=a["grad"] + 0.5, **kw)
    assert wrong["objective"] != pytest.approx(cold["objective"], rel=1e-6)
    # ... unless the repair of the warm start moved alpha: then it is computed
    i = np.flatnonzero((y > 0) & (a["alpha"] > 0) & (a["alpha"] < 1.0) & (w > 0))[0]
    moved = a["alpha"].copy()
    moved[i] += 1e-9  # y^T alpha off by more than rounding: repaired
    repaired = smo_fit(X, y, 10.0, alpha0=moved, grad0=a["grad"] + 0.5, **kw)
    assert repaired["objective"] == pytest.approx(cold["objective"], rel=1e-8)
    # bad gradients
    with pytest.raises(ValueError, match="pass both"):
        smo_fit(X, y, 10.0, grad0=a["grad"], **kw)
    with pytest.raises(ValueError, match="shape"):
        smo_fit(X, y, 10.0, alpha0=a["alpha"], grad0=a["grad"][1:], **kw)
    # a NaN where the previous fit had no variable (its bound underflowed to 0):
    # the gradient is computed from alpha0
    bad = a["grad"].copy()
    bad[10] = np.nan
    res = smo_fit(X, y, 10.0, alpha0=a["alpha"], grad0=bad, **kw)
    assert res["objective"] == pytest.approx(cold["objective"], rel=1e-8)
    Xc, yc, upper = np.ascontiguousarray(X), np.ascontiguousarray(y), np.full(n, 1.0)
    alpha = np.zeros(n)
    with pytest.raises(ValueError, match="grad_in=True needs grad"):
        _native.smo_solve(Xc, yc, upper, alpha, 1, 0.3, 0.0, 3.0, 1e-3, -1, 100.0,
                          grad_in=True)
    with pytest.raises(ValueError, match="grad must not share memory"):
        _native.smo_solve(Xc, yc, upper, alpha, 1, 0.3, 0.0, 3.0, 1e-3, -1, 100.0,
                          grad=alpha)
    # a non-finite gradient is named as such (it blamed a feasible alpha)
    for bad_value in (np.nan, np.inf):
        g = np.zeros(n)
        g[3] = bad_value
        with pytest.raises(ValueError, match=r"grad must be finite .*grad\[3\] = (nan|inf)"):
            _native.smo_solve(Xc, yc, upper, alpha, 1, 0.3, 0.0, 3.0, 1e-3, -1, 100.0,
                              grad=g, grad_in=True)
        assert not alpha.any()


def test_minimal_cache_same_result():
    X, y = dataset("blobs")
    n = len(y)
    big = smo_fit(X, y, 5.0, kernel="rbf", gamma=0.5, cache_size=np.inf)
    two_cols = 2 * n * 8 / 2**20
    small = smo_fit(X, y, 5.0, kernel="rbf", gamma=0.5, cache_size=two_cols)
    np.testing.assert_array_equal(small["alpha"], big["alpha"])
    assert small["intercept"] == big["intercept"]
    assert small["n_iter"] == big["n_iter"]
    mid = smo_fit(X, y, 5.0, kernel="rbf", gamma=0.5, cache_size=37 * n * 8 / 2**20)
    np.testing.assert_array_equal(mid["alpha"], big["alpha"])
    with pytest.raises(ValueError, match="too small"):
        smo_fit(X, y, 5.0, kernel="rbf", gamma=0.5, cache_size=0.99 * two_cols)


def test_default_limit_is_libsvms():
    """max_iter=-1 is LIBSVM's limit (100 iterations per sample, at least 10^7):
    tol=1e-300 never converges and ran forever (as scikit-learn's SVC does)."""
    from cakernels._solvers.smo import default_max_iter

    assert default_max_iter(10) == 10**7 and default_max_iter(200_000) == 2 * 10**7
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=40) > 0, 1.0, -1.0)
    with pytest.warns(ConvergenceWarning, match="10,000,000 iterations .max_iter=-1: LIBSVM"):
        res = smo_fit(X, y, 1.0, tol=1e-300)
    assert res["n_iter"] == 10**7 and not res["converged"]
    assert abs(y @ res["alpha"]) < 1e-10


def test_a_gap_equal_to_tol_is_not_optimal_as_in_libsvm():
    # at alpha = 0 the maximal violating pair's gap is exactly 2: with tol=2 the SMO
    # stopped before its first step ("gap <= tol") and predicted one class everywhere;
    # LIBSVM (SVC, solver='libsvm', DisSMOSVC) stops only below tol and trains
    from cakernels import CASVC

    X, y = dataset("moons")
    res = smo_fit(X, y, 1.0, kernel="rbf", gamma=1.0, tol=2.0)
    ref = SVC(C=1.0, gamma=1.0, tol=2.0).fit(X, y)
    assert res["n_iter"] >= 1 and ref.n_iter_[0] >= 1
    clf = CASVC(n_partitions=1, gamma=1.0, tol=2.0).fit(X, y)
    assert clf.score(X, y) > 0.8 and abs(clf.score(X, y) - ref.score(X, y)) < 0.05
    # just above the gap: no step, as LIBSVM
    assert smo_fit(X, y, 1.0, kernel="rbf", gamma=1.0, tol=2.0 + 1e-12)["n_iter"] == 0


def test_max_iter_not_converged():
    X, y = dataset("moons")
    with pytest.warns(ConvergenceWarning):
        res = smo_fit(X, y, 10.0, kernel="rbf", gamma=1.0, max_iter=5)
    assert not res["converged"] and res["n_iter"] == 5
    alpha = res["alpha"]
    assert np.all(alpha >= 0) and np.all(alpha <= 10.0)
    assert abs(y @ alpha) < 1e-10
    # the native call reports it without raising or warning
    a = np.zeros(len(y))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = _native.smo_solve(X, y, np.full(len(y), 10.0), a, 1, 1.0, 0.0, 3.0,
                                1e-3, 3, 10.0)
    assert out[2] == 3 and out[3] is False


def test_single_class_and_single_sample():
    X = np.random.default_rng(0).normal(size=(5, 2))
    res = smo_fit(X, np.ones(5), 1.0, kernel="rbf", gamma=1.0)
    assert res["converged"] and np.all(res["alpha"] == 0)
    assert res["intercept"] > 0  # everything predicted +1
    res = smo_fit(X, -np.ones(5), 1.0, kernel="rbf", gamma=1.0)
    assert res["intercept"] < 0
    res = smo_fit(X[:1], [1.0], 1.0, kernel="linear", gamma=1.0)
    assert res["converged"] and res["alpha"][0] == 0


def test_a_zero_intercept_is_a_positive_zero():
    # a constant kernel (gamma=0) with balanced labels gave rho = 0 and intercept -0.0
    X = np.random.default_rng(0).normal(size=(20, 3))
    y = np.r_[np.ones(10), -np.ones(10)]
    res = smo_fit(X, y, 1.0, kernel="rbf", gamma=0.0)
    assert res["intercept"] == 0.0 and not np.signbit(res["intercept"])


def test_releases_gil_and_is_reentrant():
    import threading
    X, y = dataset("moons")
    ref = smo_fit(X, y, 1.0, kernel="rbf", gamma=1.0)
    results = []

    def work():
        results.append(smo_fit(X, y, 1.0, kernel="rbf", gamma=1.0)["alpha"])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a in results:
        np.testing.assert_array_equal(a, ref["alpha"])


def shrinking_problem(n=2000):
    """Overlapping classes with many bounded alphas: long enough (n_iter well
    above min(n, 1000)) for shrinking and the one-time unshrinking to run."""
    X, y = make_classification(n_samples=n, n_features=8, n_informative=5,
                               flip_y=0.1, class_sep=0.8, random_state=3)
    X = StandardScaler().fit_transform(X)
    return np.ascontiguousarray(X), 2.0 * y - 1.0


@pytest.mark.parametrize("C, weighted", [(1.0, False), (20.0, False),
                                         (5.0, True)])
def test_shrinking_kkt_on_all_variables(C, weighted):
    X, y = shrinking_problem()
    n = len(y)
    sw = None
    if weighted:
        sw = np.random.default_rng(4).uniform(0.2, 3.0, size=n)
    res, _ = compare_with_svc(X, y, C, "rbf", 0.5, sample_weight=sw)
    # shrinking runs every min(n, 1000) = 1000 iterations
    assert res["n_iter"] > 1500
    alpha = res["alpha"]
    upper = C * (sw if sw is not None else np.ones(n))
    # most variables end at a bound (they are the ones shrinking removes)
    at_bound = (alpha == 0) | (alpha == upper)
    assert at_bound.sum() > n // 2 and (alpha == upper).any()
    # KKT on every variable, also the ones that were shrunk
    K = kernel_matrix(X, X, "rbf", 0.5, 3, 0.0)
    assert kkt_gap(K, y, alpha, upper) <= 1e-3 * (1 + 1e-6)
    # and per variable against the reported intercept (b = -rho): free
    # variables on the margin, bounded ones on their side of it (to tol)
    f = y * (K @ (alpha * y) + res["intercept"])
    free = ~at_bound
    assert np.all(np.abs(f[free] - 1.0) <= 2e-3)
    assert np.all(f[alpha == 0] >= 1.0 - 2e-3)
    assert np.all(f[alpha == upper] <= 1.0 + 2e-3)


@pytest.mark.parametrize("fmt", ["dense", "dense_float_exact", "csr", "csr_float_exact"])
def test_feature_major_columns_and_budget_bit_identical(fmt):
    """Kernel columns from the feature-major copy of X (built when it takes at
    most a quarter of cache_size, in float when that is exact, its bytes out
    of the budget) and from the rows of X (no room for the copy), with
    variable-length columns under shrinking: the same alpha, intercept and
    iterations bit for bit."""
    import scipy.sparse as sp

    X, y = shrinking_problem()
    n, d = X.shape
    if fmt.endswith("float_exact"):
        X = np.round(4 * X) / 4  # quarters: exact in float
    if fmt.startswith("csr"):
        X = np.where(np.abs(X) < 0.5, 0.0, X)
        X = sp.csr_matrix(X)
    col_mb = n * 8 / 2**20
    kw = dict(kernel="rbf", gamma=0.5, max_iter=100_000)  # wrong columns: stop, then differ
    ref = smo_fit(X, y, 5.0, cache_size=2 * col_mb, **kw)  # no room for the copy
    assert ref["converged"] and ref["n_iter"] > 1000
    copy_mb = n * d * 8 / 2**20
    for cache in (4 * copy_mb + 2 * col_mb, 4 * copy_mb + 5 * col_mb, 300 * col_mb, np.inf):
        got = smo_fit(X, y, 5.0, cache_size=cache, **kw)
        np.testing.assert_array_equal(got["alpha"], ref["alpha"])
        assert got["intercept"] == ref["intercept"]
        assert got["n_iter"] == ref["n_iter"]
        assert got["objective"] == ref["objective"]


@pytest.mark.parametrize("cache", [np.inf, 1e5])
def test_no_feature_major_copy_larger_than_the_matrix_it_serves(cache):
    """The copy is dense (n x n_features): with a budget past the whole kernel
    matrix (+inf, or 100 GB) it was built for wide sparse data at any width,
    tens of times the matrix's size for no gain. It is never larger than the
    matrix now (n_features <= n in double), in both solvers."""
    import scipy.sparse as sp

    from cakernels._solvers.asygcd import asygcd_fit

    rng = np.random.RandomState(0)
    n = 200
    y = np.where(rng.rand(n) > 0.5, 1.0, -1.0)
    X0 = sp.random(n, 40, density=0.3, random_state=1, format="csr")
    X0.data = rng.randn(X0.nnz) + 1e-3 * np.pi  # not floats exactly: a double copy
    for width, built in ((40, True), (200, True), (201, False), (20_000, False)):
        # the same 40 columns of values, padded: the copy is n x width doubles,
        # the matrix n x n
        X = sp.csr_matrix((X0.data, X0.indices, X0.indptr), shape=(n, width))
        r = smo_fit(X, y, 1.0, kernel="rbf", gamma=0.5, cache_size=cache)
        assert (r["stats"]["feature_major"] > 0) == built, width
        a = asygcd_fit(X, y, 1.0, gamma=0.5, cache_size=cache, n_threads=1,
                       random_state=0, return_stats=True)
        assert (a["stats"]["fm_threads"] == 1) == built, width
        if width == 40:
            ref_smo, ref_agcd = r, a
        else:  # the same problem: the same solution, copy or not
            np.testing.assert_array_equal(r["alpha"], ref_smo["alpha"])
            np.testing.assert_array_equal(a["alpha"], ref_agcd["alpha"])


def test_shrinking_cache_sizes_and_max_iter():
    """The shrunk problem with a small cache (columns dropped and extended
    as the active set changes) gives bit-identical results; stopping at
    max_iter while variables are shrunk reports the exact objective."""
    X, y = shrinking_problem()
    n = len(y)
    C = 20.0
    big = smo_fit(X, y, C, kernel="rbf", gamma=0.5, cache_size=np.inf)
    assert big["n_iter"] > 2000
    for cols in (2, 3, 37, 500):
        small = smo_fit(X, y, C, kernel="rbf", gamma=0.5,
                        cache_size=cols * n * 8 / 2**20)
        np.testing.assert_array_equal(small["alpha"], big["alpha"])
        assert small["intercept"] == big["intercept"]
        assert small["n_iter"] == big["n_iter"]
    K = kernel_matrix(X, X, "rbf", 0.5, 3, 0.0)
    for max_iter in (1001, 1500, big["n_iter"] - 1):
        a = np.zeros(n)
        rho, obj, n_iter, converged = _native.smo_solve(
            X, y, np.full(n, C), a, 1, 0.5, 0.0, 3.0, 1e-3, max_iter, 10.0)
        assert n_iter == max_iter and not converged
        assert np.all(a >= 0) and np.all(a <= C) and abs(y @ a) < 1e-8
        assert obj == pytest.approx(dual_objective(K, y, a), rel=1e-9)
        assert obj > big["objective"]
    # warm start from the shrunk run's solution: already optimal
    warm = smo_fit(X, y, C, kernel="rbf", gamma=0.5, alpha0=big["alpha"])
    assert warm["converged"] and warm["n_iter"] <= 5


# --------------------------------------------------------------------------
# input validation
# --------------------------------------------------------------------------


def test_wrapper_bad_input():
    X, y = dataset("classification")
    with pytest.raises(ValueError):
        smo_fit(X, y[:-1], 1.0)
    with pytest.raises(ValueError, match="-1 and \\+1"):
        smo_fit(X, (y > 0).astype(float), 1.0)
    with pytest.raises(ValueError, match="C must be positive"):
        smo_fit(X, y, -1.0)
    with pytest.raises(ValueError, match="C must be positive"):
        smo_fit(X, y, 0.0)
    with pytest.raises(ValueError):
        smo_fit(X, y, 1.0, sample_weight=np.ones(3))
    with pytest.raises(ValueError):
        smo_fit(X, y, 1.0, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError):
        smo_fit(X, y, 1.0, class_weight_vector=[1.0, -1.0])
    with pytest.raises(ValueError):
        smo_fit(X, y, 1.0, kernel="cosine")
    with pytest.raises(ValueError):
        smo_fit(X[0], y, 1.0)
    with pytest.raises(ValueError):
        smo_fit(X, y, 1.0, alpha0=np.zeros(3))


def test_native_bad_input():
    X, y = dataset("classification")
    n = len(y)
    u = np.ones(n)

    def call(X=X, y=y, u=u, a=None, kind=1, gamma=0.5, coef0=0.0, degree=3.0,
             tol=1e-3, max_iter=-1, cache=100.0):
        a = np.zeros(n) if a is None else a
        return _native.smo_solve(X, y, u, a, kind, gamma, coef0, degree, tol,
                                 max_iter, cache)

    call()  # sanity: the defaults are valid
    Xw = np.zeros((n, 2 * X.shape[1]))
    Xw[:, ::2] = X
    bad_cases = [
        dict(X=Xw[:, ::2]),                      # non-contiguous X
        dict(X=X.astype(np.float32)),            # wrong dtype
        dict(X=X[:, 0].copy()),                  # 1-D X
        dict(X=np.array(X, order="F")),          # Fortran order
        dict(y=y[:-1].copy()),                   # wrong length
        dict(y=(y > 0).astype(float)),           # labels 0/1
        dict(y=y.astype(np.int64)),              # wrong dtype
        dict(u=-u),                              # negative bound
        dict(u=np.zeros(n)),                     # zero bound
        dict(u=np.full(n, np.inf)),              # infinite bound
        dict(u=u[::2]),                          # wrong length / strided
        dict(a=np.zeros(n + 1)),                 # wrong alpha length
        dict(a=np.zeros(2 * n)[::2]),            # non-contiguous alpha
        dict(kind=7),
        dict(gamma=np.nan),
        dict(kind=2, degree=-1.0),
        dict(tol=0.0),
        dict(tol=np.nan),
        dict(cache=0.0),
        dict(cache=1e-9),                        # fewer than two columns
    ]
    for kw in bad_cases:
        with pytest.raises(ValueError):
            call(**kw)
    ro = np.zeros(n)
    ro.setflags(write=False)
    with pytest.raises(ValueError):
        call(a=ro)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError):
        call(X=Xn)
    with pytest.raises(ValueError):
        call(X=np.zeros((0, 3)), y=np.zeros(0), u=np.zeros(0), a=np.zeros(0))
    # alpha aliasing an input
    with pytest.raises(ValueError, match="share memory"):
        _native.smo_solve(X, y, u, u, 1, 0.5, 0.0, 3.0, 1e-3, -1, 100.0)
    with pytest.raises(TypeError):
        _native.smo_solve(X, y, u)


# --------------------------------------------------------------------------
# property test on tiny problems
# --------------------------------------------------------------------------


@st.composite
def tiny_problem(draw):
    n = draw(st.integers(2, 20))
    d = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if draw(st.booleans()):  # duplicate points (possibly with opposite labels)
        k = draw(st.integers(1, n - 1))
        X[rng.integers(0, n, size=k)] = X[rng.integers(0, n, size=k)]
    y = rng.choice([-1.0, 1.0], size=n)
    y[0], y[1] = 1.0, -1.0
    C = draw(st.sampled_from([1e-6, 1e-3, 0.1, 1.0, 10.0, 1e3, 1e6]))
    varying = draw(st.booleans())
    upper = C * (rng.uniform(0.1, 10.0, size=n) if varying else np.ones(n))
    kernel = draw(st.sampled_from(["rbf", "linear", "poly", "sigmoid"]))
    gamma = draw(st.sampled_from([0.1, 1.0, 5.0]))
    return np.ascontiguousarray(X), y, upper, kernel, gamma


@settings(max_examples=150, deadline=None)
@given(tiny_problem())
def test_property_feasible_and_kkt(problem):
    X, y, upper, kernel, gamma = problem
    tol = 1e-3
    alpha = np.zeros(len(y))
    # with C ~ 1e6 on a non-separable problem SMO legitimately needs ~C steps
    # (LIBSVM too); the iteration cap keeps the test fast, and the flag must
    # then tell the truth
    max_iter = 200_000
    rho, obj, n_iter, converged = _native.smo_solve(
        X, y, upper, alpha, KIND[kernel], gamma, 0.5, 3.0, tol, max_iter,
        np.inf)
    assert np.all(alpha >= 0) and np.all(alpha <= upper)
    assert abs(y @ alpha) <= 1e-8 * max(1.0, upper.max())
    K = kernel_matrix(X, X, kernel, gamma, 3, 0.5)
    slack = 1e-9 * max(1.0, upper.max()) * len(y)
    if converged:
        assert n_iter <= max_iter
        assert kkt_gap(K, y, alpha, upper) <= tol + slack
    else:
        assert n_iter == max_iter and upper.max() >= 10.0
        assert kkt_gap(K, y, alpha, upper) > tol - slack
    assert np.isfinite(rho)
    assert obj == pytest.approx(dual_objective(K, y, alpha), rel=1e-7,
                                abs=1e-9 * max(1.0, upper.max()) ** 2)
    # the objective never exceeds that of the start point (0)
    assert obj <= 1e-12


@pytest.mark.parametrize("kernel", ["rbf", "linear", "poly", "sigmoid"])
def test_csr_equals_dense_bit_for_bit(kernel):
    import scipy.sparse as sp

    X, y = make_classification(n_samples=250, n_features=12, n_informative=5,
                               random_state=3)
    y = 2.0 * y - 1.0
    X[np.random.default_rng(0).random(X.shape) < 0.6] = 0.0
    X[:2] = 0.0
    kw = dict(kernel=kernel, gamma=0.2, coef0=0.5, degree=2, cache_size=0.01)
    rd = smo_fit(X, y, 3.0, **kw)
    rs = smo_fit(sp.csr_matrix(X), y, 3.0, **kw)
    np.testing.assert_array_equal(rs["alpha"], rd["alpha"])
    assert rs["intercept"] == rd["intercept"] and rs["n_iter"] == rd["n_iter"]
    assert rs["objective"] == rd["objective"]
    ref = SVC(C=3.0, kernel=kernel, gamma=0.2, coef0=0.5, degree=2).fit(X, y)
    assert rs["objective"] == pytest.approx(
        dual_objective(kernel_matrix(X, X, kernel, 0.2, 2, 0.5), y, svc_alpha(ref, 250)),
        rel=1e-3)


@pytest.mark.parametrize("solver", ["smo", "asygcd"])
def test_wide_csr_rows_merge_their_dots_with_the_same_bits(solver):
    # a scratch of n_features doubles per thread: 2^31 - 1 hashed features and
    # 2 threads were a MemoryError (32 GiB) where one thread fitted; rows wider
    # than the scratch budget merge their sorted indices, with the same
    # products in the same order
    import scipy.sparse as sp

    from cakernels._solvers.asygcd import asygcd_fit

    X, y = make_classification(n_samples=120, n_features=40, random_state=2)
    y = 2.0 * y - 1.0
    X[np.random.default_rng(1).random(X.shape) < 0.7] = 0.0
    narrow = sp.csr_matrix(X)
    fit = smo_fit if solver == "smo" else asygcd_fit
    kw = dict(kernel="rbf", gamma=0.05, cache_size=1.0)
    if solver == "asygcd":
        kw.update(random_state=0, min_rows_per_thread=1, feature_major=False)
    # 2^22 + 1: a scratch for one thread, merged on 2 or 5
    for n_features in (2**22 + 1, 2**31 - 1):
        wide = sp.csr_matrix((narrow.data, narrow.indices.astype(np.int64)
                              * ((n_features - 1) // 40), narrow.indptr),
                             shape=(120, n_features))
        # (Asy-GCD: one thread, whose solution alone is the same bits for
        # every storage; its K-means blocks of several threads depend on it)
        for n_threads in (1, 2, 5) if solver == "smo" else (1,):
            ref = fit(narrow, y, 3.0, n_threads=n_threads, **kw)
            got = fit(wide, y, 3.0, n_threads=n_threads, **kw)
            np.testing.assert_array_equal(got["alpha"], ref["alpha"])
            assert got["objective"] == ref["objective"]


def test_asygcd_blocks_of_very_wide_data_are_a_clear_memory_error(monkeypatch):
    # the K-means of several threads' blocks holds dense centres: 2^31 hashed
    # features were numpy's "Unable to allocate 32.0 GiB"
    import scipy.sparse as sp

    import cakernels._memory as memory
    from cakernels._solvers.asygcd import asygcd_fit

    monkeypatch.setattr(memory, "available_bytes", lambda: 2**32)
    idx = np.arange(1000).reshape(100, 10) * 2_000_000
    X = sp.csr_matrix((np.ones(1000), idx.ravel(), np.arange(0, 1001, 10)),
                      shape=(100, 2**31 - 1))
    y = np.r_[np.ones(50), -np.ones(50)]
    with pytest.raises(MemoryError, match="dense centres of 2,147,483,647 features.*n_threads=1"):
        asygcd_fit(X, y, 1.0, gamma=0.1, n_threads=2, min_rows_per_thread=1)
    assert asygcd_fit(X, y, 1.0, gamma=0.1, n_threads=1)["converged"]


def test_csr_scratch_size_never_wraps():
    # n_features near 2^64 / 5: 5 threads' scratch size wrapped around size_t
    # to 32 bytes, indexed up to feature 10^9 (a heap overflow)
    import scipy.sparse as sp

    X = sp.csr_matrix((np.array([1.0, 2.0, 1.0, -1.0]), np.array([0, 10**9, 1, 10**9]),
                       np.array([0, 2, 4])), shape=(2, -(-2**64 // 5)))
    Xs = sp.csr_matrix((X.data, np.array([0, 2, 1, 2]), X.indptr), shape=(2, 3))
    y = np.array([-1.0, 1.0])
    for n_threads in (1, 5):
        got = smo_fit(X, y, 1.0, gamma=0.1, n_threads=n_threads)
        ref = smo_fit(Xs, y, 1.0, gamma=0.1, n_threads=n_threads)
        np.testing.assert_array_equal(got["alpha"], ref["alpha"])


def test_csr_row_pointers_are_checked_before_the_rows():
    import scipy.sparse as sp

    from cakernels._solvers.asygcd import asygcd_fit

    y = np.array([-1.0, 1.0])
    # the native check walked row 0 to indptr[1] = nnz + 88 before seeing that
    # indptr decreases (out of bounds; AddressSanitizer in CI sees the read)
    nnz = 16
    X = (np.ones(nnz), np.arange(nnz, dtype=np.int64), np.array([0, nnz + 88, nnz]), 100)
    with pytest.raises(ValueError, match="indptr must start at 0 and not decrease"):
        _native.smo_solve(X, y, np.ones(2), np.zeros(2), 1, 0.1, 0.0, 3.0, 1e-3, 100, 1.0)
    # SciPy's sum_duplicates aborted the process on such a matrix
    bad = sp.csr_matrix((np.ones(nnz), np.arange(nnz), np.array([0, nnz + 88, nnz])),
                        shape=(2, 100))
    for fit in (smo_fit, asygcd_fit):
        with pytest.raises(ValueError, match="invalid CSR matrix: indptr"):
            fit(bad, y, 1.0, gamma=0.1)


def test_a_kernel_diagonal_that_overflows_is_named():
    # the solvers refuse it as an invalid argument: was "infeasible warm start"
    from cakernels._solvers.asygcd import asygcd_fit

    X, y = dataset("classification")
    for fit in (smo_fit, asygcd_fit):
        with pytest.raises(FloatingPointError, match="kernel values overflow float64"):
            fit(X, y, 1.0, kernel="poly", gamma=1e200)


@pytest.mark.parametrize("C", [1e-6, 1e-2])
def test_a_warm_start_keeps_the_intercept_when_no_variable_is_free(C):
    # every alpha at a bound (small C, balanced classes): the optimal intercepts fill
    # an interval and LIBSVM takes its midpoint. The warm start's repair moved one
    # alpha by the rounding residual of y^T alpha (1e-21), an update can leave one at
    # C - 1 ulp: counted as the only free variable, its y G became rho (-1 for -8e-7)
    X, y01 = make_classification(n_samples=200, n_features=5, random_state=1)
    y = np.where(y01 == 1, 1.0, -1.0)
    gamma = 1 / (5 * X.var())
    svc = SVC(C=C, gamma=gamma).fit(X, y)
    cold = smo_fit(X, y, C, kernel="rbf", gamma=gamma)
    warm = smo_fit(X, y, C, kernel="rbf", gamma=gamma, alpha0=cold["alpha"].copy())
    assert np.all((cold["alpha"] == 0) | (cold["alpha"] == C))  # nothing free
    for res in (cold, warm):
        assert res["intercept"] == pytest.approx(svc.intercept_[0], rel=1e-6, abs=1e-12)
    np.testing.assert_array_equal(warm["alpha"], cold["alpha"])
    # a variable 1 ulp below C is at C for rho
    a0 = cold["alpha"].copy()
    i, j = np.flatnonzero(y > 0)[0], np.flatnonzero(y < 0)[0]
    a0[i] = a0[j] = np.nextafter(C, 0.0)
    nudged = smo_fit(X, y, C, kernel="rbf", gamma=gamma, alpha0=a0)
    assert nudged["intercept"] == pytest.approx(svc.intercept_[0], rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("C", [1e-8, 1e-6])
def test_alpha_stays_in_its_box_with_bounds_far_apart(C):
    # LIBSVM's step (aj = Ci - diff with Ci >> Cj) left alpha a rounding above its
    # bound C * w (8.6e-7 relative), and the solver's own answer was then refused as
    # a warm start (and by CASVCCV's warm path over close Cs)
    from cakernels import CASVCCV

    r = np.random.default_rng(0)
    n = 60
    X = r.normal(size=(n, 3))
    y = np.where(r.random(n) < 0.5, 1.0, -1.0)
    X[y > 0] += 0.7
    r.normal(size=n)
    w = np.where(r.random(n) < 0.5, 1e-5, 1e5)
    res = smo_fit(X, y, C, sample_weight=w, gamma=0.3)
    assert np.all(res["alpha"] <= C * w) and np.all(res["alpha"] >= 0)
    again = smo_fit(X, y, C, sample_weight=w, gamma=0.3, alpha0=res["alpha"])
    assert again["intercept"] == pytest.approx(res["intercept"], rel=1e-6)
    CASVCCV(n_partitions=1, Cs=[C, C * 1.0000001], gammas=[0.3],
            cv=[(np.arange(n), np.arange(n))], refit=False).fit(X, y, sample_weight=w)
