"""Extreme values get clear errors, never a silent NaN model (issue 12, numerics)."""

import sys
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone

from cakernels import (BKRR2, BKRR2CV, CASVC, CASVCCV, CPSVC, DCKRR, DCSVC, DKRR, AsyGCDSVC,
                       CascadeSVC, DCFilterSVC, DisSMOSVC, PartitionedKernelRidge)
from cakernels.partition import KBalancePartitioner, KMeansPartitioner
from cakernels._kernels import (check_kernel_diagonal, check_magnitude, magnitude_stats,
                                tiny_features_error)
from cakernels._solvers import local


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    return X, np.where(X[:, 0] + 0.3 * rng.standard_normal(n) > 0, 1, -1)


ESTIMATORS = [
    lambda **kw: CASVC(2, solver="smo", random_state=0, **kw),
    lambda **kw: CASVC(2, solver="libsvm", random_state=0, **kw),
    lambda **kw: AsyGCDSVC(**kw),
    lambda **kw: CascadeSVC(2, random_state=0, **kw),
    # the trees check their leaves once (every node's rows come from them)
    lambda **kw: DCSVC(2, random_state=0, **kw),
    lambda **kw: DCFilterSVC(2, solver="libsvm", random_state=0, **kw),
    lambda **kw: DisSMOSVC(**kw),
]


@pytest.mark.parametrize("make", ESTIMATORS + [lambda **kw: BKRR2(2, random_state=0, **kw),
                                               lambda **kw: DCKRR(2, random_state=0, **kw)])
@pytest.mark.parametrize("sparse", [False, True])
def test_features_whose_norms_overflow_are_refused(make, sparse):
    X, y = _data()
    X = X * 1e160  # ||x||^2 overflows: distances and RBF kernels would be NaN
    est = make()
    target = y if hasattr(est, "C") else X[:, 0] / 1e160
    Xin = sp.csr_matrix(X) if sparse else X
    before = Xin.copy()
    with pytest.raises(ValueError, match="feature values too large.*scale the features"):
        est.fit(Xin, target)
    # nothing the user gave is modified
    assert (abs(Xin - before)).max() == 0


@pytest.mark.parametrize("make", ESTIMATORS + [
    lambda **kw: BKRR2(2, random_state=0, **kw), lambda **kw: DCKRR(2, random_state=0, **kw),
    lambda **kw: DKRR(**kw), lambda **kw: CPSVC(2, random_state=0, **kw),
    lambda **kw: CASVCCV(n_partitions=2, Cs=[1.0], cv=2, random_state=0, **kw),
    lambda **kw: BKRR2CV(n_partitions=2, cv=2, random_state=0, **kw),
    lambda **kw: KMeansPartitioner(2, random_state=0, **kw),
    lambda **kw: KBalancePartitioner(2, random_state=0, **kw)])
@pytest.mark.parametrize("sparse", [False, True])
def test_features_whose_squares_underflow_are_refused(make, sparse):
    # every squared distance below 2.2e-308: K-means made one partition of four
    # clusters, the balanced partitioners random ones, without an error
    X, y = _data()
    est = make()
    target = X[:, 0] if "KRR" in type(est).__name__ else y
    def fit(Z, t=target):
        return est.fit(Z) if "Partitioner" in type(est).__name__ else est.fit(Z, t)

    for scale in (1e-160, 1e-170, 1e-300):
        Z = sp.csr_matrix(X * scale) if sparse else X * scale
        with pytest.raises(ValueError, match="feature values too small.*scale the features"):
            fit(Z)
    fit(sp.csr_matrix(X * 1e-150) if sparse else X * 1e-150)  # (squares 1e-300: fine)
    tiny_rows = X[:5] * 1e-170  # a tiny row is fine next to others, and to predict
    fit(np.vstack([X, tiny_rows]), np.concatenate([target, target[:5]]))
    if hasattr(est, "predict"):
        assert np.all(np.isfinite(est.predict(tiny_rows).astype(float)))
    # all zero: no scale to lose (the partitioners' own errors for identical rows follow)
    assert tiny_features_error(*magnitude_stats(np.zeros_like(X))) is None


@pytest.mark.parametrize("make", [KMeansPartitioner, KBalancePartitioner])
@pytest.mark.parametrize("sparse", [False, True])
def test_partitioner_fit_sharded_refuses_features_whose_squares_underflow(make, sparse):
    # fit refused them, fit_sharded partitioned them (K-means: one partition of all)
    from cakernels.backends import CollectiveError, SelfCommunicator

    X, _ = _data()
    part = make(2, random_state=0)
    Z = sp.csr_matrix(X * 1e-170) if sparse else X * 1e-170
    with pytest.raises(CollectiveError, match="feature values too small.*scale the features"):
        part.fit_sharded(SelfCommunicator(), Z)
    part.fit_sharded(SelfCommunicator(), sp.csr_matrix(X * 1e-150) if sparse else X * 1e-150)


@pytest.mark.parametrize("make", ESTIMATORS)
def test_svm_polynomial_kernel_overflow(make):
    X, y = _data()
    est = make(kernel="poly", gamma=1e200)
    with pytest.raises(FloatingPointError, match="kernel values overflow.*reduce gamma"):
        est.fit(X, y)


def test_libsvm_kernel_values_beyond_float32_are_a_clear_error():
    """LIBSVM caches the kernel in float32: K ~ 1e40 fits float64 but made
    scikit-learn's SVC fail with "dual coefficients are not finite"."""
    from cakernels import CascadeSVC as Cascade

    X, y = _data()
    for est in (CASVC(2, solver="libsvm", kernel="poly", degree=3, gamma=1e13,
                      random_state=0),
                Cascade(2, solver="libsvm", kernel="poly", degree=3, gamma=1e13,
                        random_state=0)):
        with pytest.raises(FloatingPointError, match="overflow float32 .*LIBSVM"):
            est.fit(X, y)


def test_krr_polynomial_kernel_overflow():
    X, y = _data()
    with pytest.raises(FloatingPointError, match="kernel values overflow"):
        PartitionedKernelRidge(n_partitions=2, kernel="poly", sigma=1e-120,
                               random_state=0).fit(X, X[:, 0])


def test_large_but_finite_values_still_fit():
    """The guards only catch overflow: scaled data that fits in float64 trains as before."""
    X, y = _data()
    a = CASVC(2, solver="smo", random_state=0, gamma=1.0).fit(X, y)
    b = CASVC(2, solver="smo", random_state=0, gamma=1e-100).fit(X * 1e50, y)
    assert np.mean(a.predict(X) == b.predict(X * 1e50)) > 0.95


@pytest.mark.parametrize("solver", ["smo", "asygcd"])
def test_a_nan_gradient_is_a_floating_point_error(monkeypatch, solver):
    """A native solve that returns non-finite dual variables (its gradient overflowed)
    raises FloatingPointError naming C, instead of returning a NaN model."""
    X, y = _data(40)
    name = "smo_fit" if solver == "smo" else "asygcd_fit"
    module = __import__(f"cakernels._solvers.{'smo' if solver == 'smo' else 'asygcd'}",
                        fromlist=[name])
    real = getattr(module, name)

    def broken(*args, **kwargs):
        res = dict(real(*args, **kwargs))
        res["alpha"] = np.full_like(res["alpha"], np.nan)
        return res

    monkeypatch.setattr(module, name, broken)
    with pytest.raises(FloatingPointError, match="non-finite coefficients.*C may be too large"):
        local.solve_binary_svm(X, y.astype(float), 1e300,
                               kernel_params={"kernel": "rbf", "gamma": 0.5, "degree": 3,
                                              "coef0": 0.0}, solver=solver)


def test_krr_nan_solution_is_a_floating_point_error(monkeypatch):
    import cakernels._solvers.krr as krr

    monkeypatch.setattr(krr, "solve_krr", lambda K, y, reg, rebuild=None, n_threads=1,
                        report=None: y * np.nan)
    X, y = _data(30)
    with pytest.raises(FloatingPointError, match="kernel ridge.*non-finite"):
        local.solve_kernel_ridge(X, X[:, 0], 1e-3,
                                 kernel_params={"kernel": "rbf", "gamma": 0.5, "degree": 3,
                                                "coef0": 0.0})


def test_a_ridge_shift_that_overflows_is_a_clear_error(capfd):
    """lam * m beyond float64 (lam = 1e307 on 60 rows): a FloatingPointError
    naming lam from the estimators, DKRR and the searches (both solvers), before
    LAPACK prints its own errors on an infinite matrix."""
    from cakernels import BKRR2CV, DKRR

    X, _ = _data(60)
    y = X[:, 0].copy()
    fits = [lambda: BKRR2(1, lam=1e307).fit(X, y),
            lambda: DKRR(lam=1e307).fit(X, y),
            lambda: DKRR(lam=1e307).fit(X, y, sample_weight=np.full(60, 10.0)),
            lambda: BKRR2CV(2, sigmas=[1.0], lams=[1e-3, 1e307], cv=3, solver="cholesky",
                            random_state=0).fit(X, y),
            lambda: BKRR2CV(2, sigmas=[1.0], lams=[1e-3, 1e307], cv=3, solver="eigh",
                            random_state=0).fit(X, y)]
    for fit in fits:
        with pytest.raises(FloatingPointError, match=r"lam \* m .* overflows float64"):
            fit()
    assert "DLASCL" not in capfd.readouterr().err
    BKRR2(1, lam=1e300).fit(X, y)  # large but finite: a model of almost zero


def test_check_helpers():
    X = np.array([[1.0, 2.0], [1e200, 0.0]])
    with pytest.raises(ValueError, match="1 of 2 rows"):
        check_magnitude(X)
    sq = check_magnitude(X[:1])
    assert sq.tolist() == [5.0]
    check_kernel_diagonal(np.array([1e300]), "rbf", 1e300, 3, 0.0)  # bounded kernels pass
    with pytest.raises(FloatingPointError):
        check_kernel_diagonal(np.array([1e300]), "poly", 1e10, 3, 0.0)


# ------------------------------------------------------------------ kernel ridge conditioning
def _spectrum_matrix(m, eigenvalues, seed=0):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((m, m)))
    return np.ascontiguousarray((q * eigenvalues) @ q.T)


def test_krr_warns_when_the_factor_is_ill_conditioned():
    """A factor that succeeds but with cond * eps > 1e-4 warns (the answer has lost
    more than 12 digits); its solution is still the Cholesky one."""
    from scipy.linalg import LinAlgWarning

    from cakernels._solvers.krr import RCOND_WARN, solve_krr

    m = 60
    w = np.geomspace(1.0, 1e-13, m)  # cond 1e13: factorable, rcond < RCOND_WARN
    K = _spectrum_matrix(m, w)
    y = np.random.default_rng(1).standard_normal(m)
    with pytest.warns(LinAlgWarning, match="ill-conditioned.*relative errors up to"):
        alpha = solve_krr(K.copy(), y, 0.0)
    # still the Cholesky answer (backward stable: a small residual), not the fallback
    assert np.linalg.norm(K @ alpha - y) < 1e-3 * np.linalg.norm(y)
    assert RCOND_WARN < 1e-11
    # a well-conditioned system does not warn (warnings are errors in this suite)
    solve_krr(_spectrum_matrix(m, np.geomspace(1.0, 1e-3, m)), y, 0.0)


@pytest.mark.skipif(
    sys.version_info < (3, 11),
    reason="CPython 3.10 keeps the argument solve_krr(make_K(), ...) alive on the caller's "
           "stack for the whole call, so solve_krr's `del K` frees nothing and the peak is "
           "two m x m matrices (3.11+ moves a call's arguments into the callee's frame)")
def test_krr_fallback_holds_one_matrix_at_a_time(peak_bytes):
    """A singular system falls back to least squares; with ``rebuild`` the factor is
    released before K is rebuilt, so the peak is about one m x m matrix."""
    from scipy.linalg import LinAlgWarning

    from cakernels._solvers.krr import solve_krr

    m = 500  # every sample twice: exactly singular; distinct samples well separated
    X = np.repeat(np.random.default_rng(0).uniform(0, 40, (m // 2, 2)), 2, axis=0)

    def make_K():  # one m x m allocation
        sq = (X * X).sum(1)
        G = X @ X.T
        G *= 2.0
        G -= sq[:, None]
        G -= sq[None, :]
        return np.exp(G, out=G)

    y = np.random.default_rng(1).standard_normal(m)
    expected = np.linalg.lstsq(make_K(), y, rcond=None)[0]  # the same cutoff
    matrix = m * m * 8
    with pytest.warns(LinAlgWarning, match="not numerically positive definite"):
        alpha, peak = peak_bytes(lambda: solve_krr(make_K(), y, 0.0, rebuild=make_K))
    assert np.allclose(alpha, expected, rtol=1e-6, atol=1e-9 * np.abs(expected).max())
    assert peak < 1.5 * matrix, (peak / matrix)


def test_predict_and_partitioners_refuse_rows_whose_norm_overflows():
    """fit refused features near 1e154 and beyond; predict (a silent constant) and
    the public partitioners (NaN centres, an empty partition) did not."""
    from sklearn.datasets import make_classification

    from cakernels import DCSVC, DKRR, AsyGCDSVC, BKRR2, CASVC
    from cakernels.partition import BKMPartitioner, KBalancePartitioner

    X, y = make_classification(200, 5, random_state=0)
    big = X.copy()
    big[3] = 1e200
    # a finite squared norm (1.69e308) whose distances to centres overflowed: NaN
    # predictions (KRR), NaN decisions predicted as the first class (SVMs)
    near = X[:2].copy()
    near[1] = [1.3e154, 0, 0, 0, 0]
    ok = X[:2].copy()
    ok[1] = [6e153, 0, 0, 0, 0]  # 3.6e307: within the limit, finite predictions
    for est in (CASVC(n_partitions=4, random_state=0).fit(X, y),
                DCSVC(n_partitions=4, random_state=0).fit(X, y), AsyGCDSVC().fit(X, y),
                BKRR2(n_partitions=4, random_state=0).fit(X, y.astype(float)),
                DKRR().fit(X, y.astype(float))):
        for rows in (big, near):
            with pytest.raises(ValueError, match="feature values too large"):
                est.predict(rows)
        est.predict(X)  # fine rows still predict
        values = (est.decision_function(ok) if hasattr(est, "decision_function")
                  else est.predict(ok))
        assert np.all(np.isfinite(values))
    for cls in (KBalancePartitioner, BKMPartitioner):
        with pytest.raises(ValueError, match="feature values too large"):
            cls(n_partitions=4, random_state=0).fit(X * 1e160)
        part = cls(n_partitions=4, random_state=0).fit(X)
        with pytest.raises(ValueError, match="feature values too large"):
            part.assign(big)


def test_a_kernel_that_overflows_on_test_rows_only_is_an_error_not_a_class():
    # rows of 1e80 pass the norm check (1e160 < 1e308) but (x.x' / 3)^5 overflows: the
    # decision values were NaN, which predict turned into classes_[0] (SVC: [1]) and
    # the KRR estimators returned as predictions, with NumPy's RuntimeWarning only
    from cakernels import DCFilterSVC, CascadeSVC, DisSMOSVC, KKRR2

    rng = np.random.RandomState(0)
    X = rng.randn(120, 3)
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
    Xt = np.vstack([X[:3], np.full((1, 3), 1e80)])
    kw = dict(kernel="poly", degree=5)
    models = [CASVC(2, random_state=0, **kw), CASVC(2, solver="libsvm", random_state=0, **kw),
              DCSVC(2, random_state=0, **kw), DCFilterSVC(2, random_state=0, **kw),
              CascadeSVC(2, random_state=0, **kw), DisSMOSVC(**kw), AsyGCDSVC(**kw)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # (NumPy's only word before)
        for est in models:
            for labels in (y > 0, y):  # binary and three classes
                est.fit(X, labels)
                for method in (est.predict, est.decision_function):
                    with pytest.raises(FloatingPointError, match=r"\d+ of \d+ kernel sums .* "
                                                                 r"are NaN or inf: kernel values "
                                                                 r"overflow float64 on these rows"):
                        method(Xt)
                assert np.all(np.isfinite(est.decision_function(X[:3])))
        for est in (BKRR2(2, random_state=0, **kw), DCKRR(2, random_state=0, **kw),
                    KKRR2(2, random_state=0, **kw), DKRR(**kw)):
            est.fit(X, y.astype(float))
            with pytest.raises(FloatingPointError, match="kernel values overflow float64"):
                est.predict(Xt)
            assert np.all(np.isfinite(est.predict(X[:3])))


@pytest.mark.parametrize("make", ESTIMATORS + [
    lambda **kw: __import__("cakernels").CASVCCV(n_partitions=2, Cs=[1.0, 10.0], cv=2,
                                                 random_state=0, **kw)])
@pytest.mark.parametrize("how", ["sample_weight", "class_weight"])
def test_bounds_that_overflow_are_a_clear_error(make, how):
    """C * sample_weight * class_weight beyond float64: one ValueError naming it
    (the solvers refused 'upper bounds' without the cause; Dis-SMO iterated on
    NaN for its whole iteration limit and returned a model)."""
    X, y = _data()
    kw, fit = {}, {}
    if how == "class_weight":
        kw["class_weight"] = {-1: 1e308, 1: 1.0}
    else:
        fit["sample_weight"] = np.full(y.size, 1e308)
    est = make(**kw)
    if "C" in est.get_params():
        est.set_params(C=10.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warnings on the way
        with pytest.raises(ValueError, match=r"C \* sample_weight \* class_weight overflows "
                                             r"float64 for \d+ samples \(C=10\)"):
            est.fit(X, y, **fit)


@pytest.mark.parametrize("bad", ["large-index", "negative-index", "indptr"])
def test_csr_matrices_with_invalid_structure_are_refused(bad):
    """csr_matrix((data, indices, indptr)) checks neither index bounds nor the
    order of indptr: a column index past n_features crashed the process (SciPy
    and the kernels read out of bounds), a negative one wrapped around to another
    column silently; fit and predict now refuse them with one ValueError."""
    X, y = _data()
    A = sp.csr_matrix(X)
    data, indices, indptr = A.data.copy(), A.indices.copy(), A.indptr.copy()
    if bad == "large-index":
        indices[3] = 1_000_000
    elif bad == "negative-index":
        indices[3] = -5
    else:
        indptr[5], indptr[6] = indptr[6], indptr[5]
    B = sp.csr_matrix((data, indices, indptr), shape=A.shape)
    match = "invalid CSR matrix: " + ("indptr" if bad == "indptr" else "column index")
    for est in (CASVC(2, random_state=0), CASVC(2, solver="libsvm", random_state=0),
                DisSMOSVC(), BKRR2(2, random_state=0), DCKRR(2, random_state=0)):
        target = y if hasattr(est, "C") else X[:, 0]
        with pytest.raises(ValueError, match=match):
            est.fit(B, target)
        fitted = est.fit(A, target)
        with pytest.raises(ValueError, match=match):
            fitted.predict(B)


def test_fit_refuses_rows_near_the_overflow_and_an_overflowing_scale_gamma():
    """Rows whose squared norms were finite but whose sums overflowed (0.8e154-0.9e154:
    a LAPACK 'illegal value' message and a misleading least-squares error for BKRR2);
    and gamma='scale' where 1 / (n_features * X.var()) is not finite (a NaN or
    constant kernel, one class predicted, at most NumPy's RuntimeWarning)."""
    from cakernels import BKRR2, CASVC

    rng = np.random.default_rng(0)
    X = rng.uniform(0.8e154, 0.9e154, size=(60, 1))
    y = np.where(np.arange(60) % 2 == 0, 1, -1)
    for est, target in ((BKRR2(n_partitions=2, random_state=0), y.astype(float)),
                        (CASVC(n_partitions=2, random_state=0), y)):
        with pytest.raises(ValueError, match="feature values too large"):
            est.fit(X, target)
    # features so small that X.var() is subnormal: 1 / (n_features * var) is inf (a NaN
    # kernel); an error naming gamma='scale', where a given gamma fits (one row's
    # squared norm, 4e-308, is a normal number: not the error of features too small)
    Xv = rng.standard_normal((200, 4)) * 1e-160
    Xv[0] = [2e-154, 0, 0, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow RuntimeWarning on the way
        with pytest.raises(ValueError, match=r"gamma='scale'.*too large or too small"):
            CASVC(n_partitions=2, random_state=0).fit(Xv, np.where(Xv[:, 0] > 0, 1, -1))
    CASVC(n_partitions=2, gamma=1.0, random_state=0).fit(Xv, np.where(Xv[:, 0] > 0, 1, -1))


def _offdiagonal_overflow():
    """Unit rows and their negatives under a polynomial kernel with K(x, x) = 1 but
    K(x, -x) = (-199)^140 = inf."""
    rng = np.random.RandomState(0)
    Z = rng.randn(60, 3)
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    X = np.vstack([Z, -Z])
    return X, np.r_[np.zeros(60), np.ones(60)], dict(kernel="poly", gamma=100.0, coef0=-99.0,
                                                     degree=140)


@pytest.mark.parametrize("make", [
    lambda kw: CASVC(n_partitions=1, **kw), lambda kw: CASVC(n_partitions=1, solver="asygcd",
                                                             **kw),
    lambda kw: CASVC(n_partitions=1, solver="libsvm", **kw),
    lambda kw: CascadeSVC(n_partitions=2, solver="libsvm", random_state=0, **kw),
    lambda kw: CascadeSVC(n_partitions=2, random_state=0, **kw),
    lambda kw: DCSVC(n_partitions=2, random_state=0, **kw),
    lambda kw: __import__("cakernels").DisSMOSVC(**kw), lambda kw: AsyGCDSVC(**kw),
    lambda kw: BKRR2(n_partitions=1, lam=1e-3, **{k: v for k, v in kw.items() if k != "gamma"},
                     sigma=0.0707),
    lambda kw: __import__("cakernels").BKRR2CV(
        n_partitions=1, sigmas=[0.0707], lams=[1e-3], solver="eigh", cv=2, random_state=0,
        **{k: v for k, v in kw.items() if k != "gamma"}),
    lambda kw: __import__("cakernels").DKRR(
        sigma=0.0707, lam=1e-3, **{k: v for k, v in kw.items() if k != "gamma"})],
    ids=["smo", "asygcd-solver", "libsvm", "cascade-libsvm", "cascade", "dcsvc", "dissmo", "AsyGCDSVC", "bkrr2",
         "bkrr2cv-eigh", "dkrr"])
def test_kernel_values_that_overflow_off_the_diagonal_are_an_error(make):
    """The diagonal check passed (K(x, x) = 1): the native SMO reported convergence on a
    NaN gradient, Dis-SMO and Asy-GCD returned NaN/inf decision values (only
    RuntimeWarnings), kernel ridge failed in LAPACK ('SVD did not converge') and LIBSVM
    with scikit-learn's ValueError 'dual coefficients or intercepts are not finite'."""
    X, y, kw = _offdiagonal_overflow()
    est = make(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (NumPy's overflow, Asy-GCD's ConvergenceWarning)
        with pytest.raises(FloatingPointError, match="kernel values overflow"):
            est.fit(X, y)


def test_parameters_beyond_the_solvers_integers_and_floats():
    """max_iter >= 2**63 (no limit, as -1) raised OverflowError in the native solvers'
    int64 and LIBSVM's int; degree >= 2**31 with solver='libsvm' too; Asy-GCD's
    intercept_scaling**2 overflowed a Python float (OverflowError)."""
    X, y = _data()
    for est in (CASVC(n_partitions=1, max_iter=2**63), CASVC(n_partitions=1, solver="libsvm",
                                                             max_iter=2**63),
                CascadeSVC(n_partitions=2, max_iter=2**70, random_state=0),
                AsyGCDSVC(max_iter=2**63, n_threads=1, random_state=0)):
        est.fit(X, y)
        ref = clone(est).set_params(max_iter=-1).fit(X, y)  # (both converge)
        np.testing.assert_array_equal(est.decision_function(X), ref.decision_function(X))
    with pytest.raises(ValueError, match=r"solver='libsvm' takes degree <= 2\*\*31 - 1"):
        CASVC(n_partitions=1, solver="libsvm", kernel="poly", degree=2**31, gamma=1e-3).fit(X, y)
    with pytest.raises(ValueError, match=r"intercept_scaling\*\*2 overflows float64"):
        AsyGCDSVC(fit_intercept=True, intercept_scaling=1e155).fit(X, y)


def test_scale_gamma_on_features_whose_squares_overflow_in_the_sums():
    """Features of +-6e153 (within the magnitude limit, variance 3.6e307): X.var()'s
    sums overflowed (gamma 0: an error) where the variance is finite; the sparse path
    gave the finite gamma. Exact on X / 2^k."""
    from cakernels._kernels import resolve_gamma

    rng = np.random.default_rng(0)
    X = np.where(rng.random((300, 1)) > 0.5, 6e153, -6e153)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow RuntimeWarning
        dense = resolve_gamma("scale", X)
        sparse = resolve_gamma("scale", sp.csr_matrix(X))
    expected = 1.0 / ((X / 2.0**511).var() * 2.0**511 * 2.0**511)
    assert dense == expected and abs(sparse - dense) <= 1e-15 * dense
    CASVC(n_partitions=2, random_state=0).fit(X, np.where(X[:, 0] > 0, 1, -1))
    # ordinary data: scikit-learn's value, bit for bit
    Y = rng.standard_normal((200, 5))
    assert resolve_gamma("scale", Y) == 1.0 / (5 * Y.var())
