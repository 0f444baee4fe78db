"""Property-based tests of the native solvers (hypothesis).

Random small problems, with duplicate rows (also with opposite labels), tiny
and huge C, narrow and wide kernels, dense and CSR storage, one to four
Asy-GCD threads, go through the native SMO and Asy-GCD solvers. Every
solution is checked from scratch in NumPy, never against the solver's own
bookkeeping:

* feasibility: ``0 <= alpha <= C`` (and ``y @ alpha == 0`` for SMO);
* the KKT conditions at the requested ``tol``: SMO's maximal violating pair
  gap, Asy-GCD's largest projected gradient;
* the dual objective against an independent solver: scikit-learn's ``SVC``
  (LIBSVM) for SMO, SciPy's L-BFGS-B on the box-constrained dual for
  Asy-GCD. Both sides stop at a KKT gap ``eps``; for a convex QP over the box
  that bounds the objective's distance to the optimum by ``eps * sum(C_i)``,
  which is the tolerance of the comparison.

The examples are derandomised (the same every run) so that CI is
reproducible; CI also runs this file under AddressSanitizer.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import SVC

from cakernels import CPSVC
from cakernels._solvers.asygcd import asygcd_fit
from cakernels._solvers.smo import smo_fit

SETTINGS = dict(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])
TOL = 1e-6  # both sides of every objective comparison


@st.composite
def problems(draw, two_labels=True):
    """(X, y, C, gamma): values on a coarse grid (so rows repeat by chance)
    plus explicitly copied rows, labels in {-1, +1}."""
    n = draw(st.integers(2, 24))
    d = draw(st.integers(1, 4))
    X = np.array(draw(st.lists(st.lists(st.integers(-3, 3), min_size=d, max_size=d),
                               min_size=n, max_size=n)), dtype=np.float64) * 0.5
    for i, j in draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)),
                              max_size=n // 2)):
        X[i] = X[j]  # duplicate rows, whatever their labels
    y = np.array(draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=n, max_size=n)))
    if two_labels:
        y[0], y[1] = 1.0, -1.0
    C = draw(st.sampled_from([1e-3, 0.3, 1.0, 10.0, 1e3, 1e6]))
    gamma = draw(st.sampled_from([0.05, 1.0, 20.0]))
    return X, y, C, gamma


def q_matrix(X, y, gamma):
    return (y[:, None] * y[None, :]) * rbf_kernel(X, gamma=gamma)


def dual_objective(Q, alpha):
    return 0.5 * alpha @ Q @ alpha - alpha.sum()


def smo_gap(Q, y, alpha, C):
    """Maximal violating pair gap m(alpha) - M(alpha) of the dual with bias."""
    G = Q @ alpha - 1.0
    up = ((alpha < C) & (y > 0)) | ((alpha > 0) & (y < 0))
    low = ((alpha < C) & (y < 0)) | ((alpha > 0) & (y > 0))
    if not up.any() or not low.any():
        return 0.0
    return float(np.max(-y[up] * G[up]) - np.min(-y[low] * G[low]))


def projected_gradient(Q, alpha, C):
    G = Q @ alpha - 1.0
    pg = np.where(alpha <= 0.0, np.minimum(G, 0.0), np.where(alpha >= C, np.maximum(G, 0.0), G))
    return float(np.max(np.abs(pg)))


def slack(Q, alpha, C):
    """Rounding allowance of a float64 check at this scale."""
    return 1e-9 * (1.0 + C * np.abs(Q).sum(axis=1).max())


def svc_alpha(X, y, C, gamma):
    svc = SVC(C=C, gamma=gamma, tol=TOL, cache_size=10).fit(X, y)
    alpha = np.zeros(y.size)
    alpha[svc.support_] = np.abs(svc.dual_coef_.ravel())
    return alpha


def box_qp(Q, C):
    """The bias-free dual by L-BFGS-B (the independent reference of Asy-GCD)."""
    res = minimize(lambda a: (dual_objective(Q, a), Q @ a - 1.0), np.zeros(Q.shape[0]),
                   jac=True, method="L-BFGS-B", bounds=[(0.0, C)] * Q.shape[0],
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 20000, "maxcor": 50})
    return np.clip(res.x, 0.0, C)


# --------------------------------------------------------------------------
# SMO (dual with bias) against scikit-learn's SVC
# --------------------------------------------------------------------------
@settings(**SETTINGS)
@given(problems(), st.booleans())
def test_smo_kkt_and_objective_match_svc(problem, sparse):
    X, y, C, gamma = problem
    Xin = sp.csr_matrix(X) if sparse else X
    res = smo_fit(Xin, y, C, gamma=gamma, tol=TOL, cache_size=1)
    alpha = res["alpha"]
    Q = q_matrix(X, y, gamma)
    eps = slack(Q, alpha, C)
    assert np.all(alpha >= 0.0) and np.all(alpha <= C)
    assert abs(y @ alpha) <= 1e-9 * max(1.0, C * y.size)
    assert smo_gap(Q, y, alpha, C) <= TOL + eps
    # the solver's reported objective is the objective of its alpha
    assert res["objective"] == pytest.approx(dual_objective(Q, alpha), rel=1e-9, abs=eps)
    ref = svc_alpha(X, y, C, gamma)
    bound = 2 * TOL * C * y.size + eps
    assert abs(dual_objective(Q, alpha) - dual_objective(Q, ref)) <= bound
    # the decision function classifies as SVC's wherever SVC is not on the fence
    svc = SVC(C=C, gamma=gamma, tol=TOL).fit(X, y)
    ours = rbf_kernel(X, gamma=gamma) @ (alpha * y) + res["intercept"]
    theirs = svc.decision_function(X)
    sure = np.abs(theirs) > 1e-3 * max(1.0, np.abs(theirs).max())
    assert np.array_equal(np.sign(ours[sure]), np.sign(theirs[sure]))


@settings(**SETTINGS)
@given(problems(two_labels=False))
def test_smo_one_label_gives_zero_alpha(problem):
    X, y, C, gamma = problem
    y = np.full(y.size, y[0])
    res = smo_fit(X, y, C, gamma=gamma, tol=TOL)
    # y @ alpha == 0 with one label forces alpha == 0; the bias then decides
    assert np.all(res["alpha"] == 0.0)
    assert np.sign(res["intercept"]) == y[0]


# --------------------------------------------------------------------------
# Asy-GCD (dual without bias) against L-BFGS-B
# --------------------------------------------------------------------------
@settings(**SETTINGS)
@given(problems(two_labels=False), st.integers(1, 4), st.booleans(), st.booleans(),
       st.sampled_from([0, 1, 2, 64]))
def test_asygcd_kkt_and_objective_match_box_qp(problem, n_threads, shrinking, sparse,
                                               max_delay):
    X, y, C, gamma = problem
    Xin = sp.csr_matrix(X) if sparse else X
    # (an explicit limit: the automatic one, 10**6 updates here, stops problems that
    # need about C updates, duplicates of opposite labels at C = 1e6; this test is
    # about the optimum, which the solver reaches within this limit)
    res = asygcd_fit(Xin, y, C, gamma=gamma, tol=TOL, n_threads=n_threads, shrinking=shrinking,
                     cache_size=1, random_state=0, min_rows_per_thread=1, max_iter=10**9)
    assert res["converged"]
    alpha = res["alpha"]
    Q = q_matrix(X, y, gamma)
    eps = slack(Q, alpha, C)
    assert np.all(alpha >= 0.0) and np.all(alpha <= C)
    assert projected_gradient(Q, alpha, C) <= TOL + eps
    assert res["objective"] == pytest.approx(dual_objective(Q, alpha), rel=1e-9, abs=eps)
    ref = box_qp(Q, C)
    # ours is within the KKT bound of the optimum, and never below it by more
    # than the reference's own inexactness
    f_ours, f_ref = dual_objective(Q, alpha), dual_objective(Q, ref)
    assert f_ours - min(f_ours, f_ref) <= TOL * C * y.size + eps
    assert f_ref - f_ours <= projected_gradient(Q, ref, C) * C * y.size + eps


# --------------------------------------------------------------------------
# bad C and partitions with one label
# --------------------------------------------------------------------------
@pytest.mark.parametrize("fit", [smo_fit, asygcd_fit])
@pytest.mark.parametrize("C", [0.0, -1.0, np.inf, np.nan])
def test_native_solvers_reject_bad_C(fit, C):
    X, y = np.eye(4), np.array([1.0, -1.0, 1.0, -1.0])
    with pytest.raises(ValueError, match="C"):
        fit(X, y, C)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(2, 4), st.integers(3, 12), st.sampled_from(["smo", "asygcd"]),
       st.integers(0, 2**16))
def test_partitions_with_one_label_predict_it(n_clusters, per_cluster, solver, seed):
    # far-apart clusters, each of one label: K-means partitions get one label
    # each; the last cluster is mixed so that the problem has two classes
    rng = np.random.RandomState(seed)
    centers = np.arange(n_clusters)[:, None] * np.array([[100.0, 0.0]])
    X = np.vstack([c + rng.randn(per_cluster, 2) for c in centers])
    y = np.repeat(np.arange(n_clusters) % 2, per_cluster)
    y[-1] = 1 - y[-1]  # the last cluster is mixed
    est = CPSVC(n_partitions=n_clusters, solver=solver, C=1.0, gamma=0.5,
                random_state=0).fit(X, y)
    pure = np.arange(y.size) < (n_clusters - 1) * per_cluster
    assert np.array_equal(est.predict(X[pure]), y[pure])
