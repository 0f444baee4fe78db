"""The local-solver interface: one binary SVM or one kernel ridge problem.

Every layer of the package that solves a sub-problem -- a partition of the
single-level methods, a node of a multi-level method -- calls
:func:`solve_binary_svm` or :func:`solve_kernel_ridge` and gets a
:class:`LocalSolution`: the dual variables of every row with the rows'
*global* sample indices, the intercept, the dual objective and the
iterations. A solution's ``alpha`` can be passed back as the warm start
(``alpha0``) of a larger problem that contains its rows (SMO and Asy-GCD).
"""

import contextlib
import time

import numpy as np
import scipy.sparse as sp

from .._kernels import kernel_block

SVM_SOLVERS = ("smo", "asygcd", "pscd", "libsvm")


class LocalSolution:
    """The result of one local solve.

    Attributes
    ----------
    index : ndarray of int64, shape (n_rows,)
        Global sample indices of the problem's rows.
    alpha : ndarray of shape (n_rows,) or (n_rows, n_targets)
        Dual variables: ``0 <= alpha_i <= C_i`` for an SVM (the decision
        function is ``sum_i alpha_i y_i K(x_i, x) + intercept``), the
        coefficients of every row for kernel ridge regression.
    y : ndarray of shape (n_rows,) or None
        The rows' labels in {-1, +1} (SVM only).
    intercept : float
    objective : float
        Dual objective ``0.5 a^T Q a - sum(a)`` (SVM), NaN for KRR.
    n_iter : int
        Solver iterations (1 for a direct solve).
    converged : bool
    """

    def __init__(self, index, alpha, y, intercept, objective, n_iter, converged=True):
        self.grad = None  # the SMO's gradient at the solution (a warm start's)
        self.index = np.asarray(index, dtype=np.int64)
        self.alpha = alpha
        self.y = y
        self.intercept = float(intercept)
        self.objective = float(objective)
        self.n_iter = int(n_iter)
        self.converged = bool(converged)

    @property
    def support(self):
        """Positions (rows of the problem) with a non-zero dual variable."""
        a = self.alpha if self.alpha.ndim == 1 else np.abs(self.alpha).sum(axis=1)
        return np.flatnonzero(a != 0)

    @property
    def support_index(self):
        """Global sample indices of the support vectors."""
        return self.index[self.support]

    @property
    def dual_coef(self):
        """``alpha_i y_i`` of the support vectors (SVM), the coefficients (KRR)."""
        sv = self.support
        return self.alpha[sv] * self.y[sv] if self.y is not None else self.alpha[sv]

    def __repr__(self):
        return (f"LocalSolution(n_rows={self.index.size}, n_support={self.support.size}, "
                f"objective={self.objective:.6g}, n_iter={self.n_iter})")


@contextlib.contextmanager
def libsvm_errors_named(C):
    """scikit-learn's ``ValueError`` 'dual coefficients or intercepts are not
    finite' of a LIBSVM solve as this package's ``FloatingPointError`` (the
    native solvers' for the same cause): kernel values that overflow LIBSVM's
    float32 cache off the diagonal (the diagonal is checked before), or a C
    too large."""
    try:
        yield
    except ValueError as exc:
        if "not finite" not in str(exc):
            raise
        raise FloatingPointError(
            f"the libsvm solver (C={C:.3g}) produced non-finite dual coefficients "
            f"(scikit-learn: {exc}): kernel values overflow LIBSVM's float32 kernel cache "
            "(3.4e38) off the diagonal (a polynomial kernel with a negative coef0, or a "
            "large gamma or degree, on these features), or C is too large; scale the "
            "features, lower gamma or degree, or use solver='smo' (float64)") from exc


def libsvm_max_iter(max_iter, kernel, degree):
    """scikit-learn's ``SVC(max_iter=...)`` for this package's ``max_iter``: 0 (and
    -1) is "no limit" for every solver here, the native ones' rule (``SVC`` would
    run no iteration at 0), and so is a limit beyond LIBSVM's C int. ``ValueError``
    for a polynomial ``degree`` beyond that int (``SVC`` raised ``OverflowError``)."""
    if kernel == "poly" and degree > 2**31 - 1:
        raise ValueError(f"solver='libsvm' takes degree <= 2**31 - 1 (LIBSVM stores it in a "
                         f"C int), got {degree}; solver='smo' takes any degree")
    return -1 if max_iter <= 0 or max_iter > 2**31 - 1 else int(max_iter)


def _libsvm_objective(X, y_pm, alpha, kernel_params):
    """``0.5 a^T Q a - sum(a)`` over the support (LIBSVM does not report it)."""
    sv = np.flatnonzero(alpha)
    if sv.size == 0:
        return 0.0
    from .._kernels import kernel_dot

    Xs = X[sv]
    c = alpha[sv] * y_pm[sv]
    # K c in blocks of rows (kernel_block formed the n_sv x n_sv matrix: 7 GB at 30,000
    # support vectors, after LIBSVM had fitted within its cache)
    Kc = kernel_dot(Xs, Xs, c, **kernel_params)
    return float(0.5 * c @ Kc - alpha[sv].sum())


def solve_binary_svm(X, y_pm, C, *, kernel_params, solver="smo", sample_weight=None, tol=1e-3,
                     max_iter=-1, cache_size=200, n_threads=1, random_state=None, index=None,
                     alpha0=None, grad0=None, asygcd_options=None, check_numerics=True):
    """Solve one binary SVM dual on ``X`` (dense or CSR).

    Parameters
    ----------
    X : {ndarray, CSR matrix} of shape (n_rows, n_features)
    y_pm : ndarray of shape (n_rows,)
        Labels in {-1, +1}.
    C : float
        Regularisation; row i's bound is ``C * sample_weight[i]``.
    kernel_params : dict
        ``kernel``, ``gamma`` (a float), ``degree``, ``coef0``.
    solver : {'smo', 'asygcd', 'pscd', 'libsvm'}
        ``'smo'`` and ``'libsvm'`` solve the dual with bias; ``'asygcd'`` and
        ``'pscd'`` the dual without bias (chapter 4).
    sample_weight : ndarray of shape (n_rows,), default=None
    tol, max_iter, cache_size : float, int, float
    n_threads : int, default=1
        OpenMP threads of the solve (SMO: the same solution for every
        ``n_threads``; Asy-GCD / PSCD: one block of variables per thread).
    random_state : int, default=None
        Seed of Asy-GCD's blocks and PSCD's choices.
    index : ndarray of shape (n_rows,), default=None
        Global indices of the rows (default ``0..n_rows-1``).
    alpha0 : ndarray of shape (n_rows,), default=None
        Feasible warm start (SMO, Asy-GCD, PSCD; not LIBSVM).
    grad0 : ndarray of shape (n_rows,), default=None
        SMO only, with ``alpha0``: its gradient, the ``grad`` of the solution
        that gave ``alpha0`` on the same rows, kernel and weights (a path over
        C: see :func:`~cakernels._solvers.smo.smo_fit`).
    asygcd_options : dict, default=None
        ``shrinking``, ``fit_intercept``, ``intercept_scaling`` of Asy-GCD.
    check_numerics : bool, default=True
        Check the rows' norms and kernel diagonal for overflow first; False
        when the caller checked rows that include these (a multiclass fit
        checks its rows once, not once per pair of classes).

    Returns
    -------
    solution : LocalSolution
        With ``grad`` (SMO: ``Q alpha - 1``, NaN at rows of weight 0; other
        solvers: None).
    """
    if grad0 is not None and solver != "smo":
        raise ValueError(f"grad0 is a warm start of solver='smo', not {solver!r}")
    y_pm = np.asarray(y_pm, dtype=np.float64)
    index = np.arange(y_pm.size) if index is None else index
    kp = kernel_params
    if check_numerics:
        _check_numerics_before(X, kp, np.float32 if solver == "libsvm" else np.float64)
    sol = _solve_binary_svm(X, y_pm, C, kp, solver, sample_weight, tol, max_iter, cache_size,
                            n_threads, random_state, index, alpha0, asygcd_options, grad0)
    _check_solution(sol, f"the {solver} solver (C={C:.3g})",
                    "C may be too large for float64 (try a smaller C) or the features extreme")
    return sol


def _solve_binary_svm(X, y_pm, C, kp, solver, sample_weight, tol, max_iter, cache_size,
                      n_threads, random_state, index, alpha0, asygcd_options, grad0=None):
    # a cache too small for two kernel columns is rounded up to them, as LIBSVM's
    # (svm.cpp's Cache); the low-level smo_fit/asygcd_fit refuse it instead
    cache_size = max(float(cache_size), min_cache_mb(y_pm.size))
    common = dict(sample_weight=sample_weight, kernel=kp["kernel"], gamma=kp["gamma"],
                  degree=kp["degree"], coef0=kp["coef0"], tol=tol, max_iter=max_iter,
                  cache_size=cache_size)
    if solver == "smo":
        from .smo import smo_fit

        res = smo_fit(X, y_pm, C, alpha0=alpha0, grad0=grad0, n_threads=n_threads, **common)
        sol = LocalSolution(index, res["alpha"], y_pm, res["intercept"], res["objective"],
                            res["n_iter"], res["converged"])
        sol.grad = res["grad"]
        return sol
    if solver in ("asygcd", "pscd"):
        from .asygcd import asygcd_fit

        res = asygcd_fit(X, y_pm, C, n_threads=n_threads,
                         selection="greedy" if solver == "asygcd" else "random",
                         random_state=random_state, alpha0=alpha0,
                         **(asygcd_options or {}), **common)
        return LocalSolution(index, res["alpha"], y_pm, res["intercept"], res["objective"],
                             res["n_updates"], res.get("converged", True))
    if solver == "libsvm":
        if alpha0 is not None:
            raise ValueError("solver='libsvm' takes no warm start; use solver='smo'")
        from sklearn.svm import SVC

        from ..partition import _int32_indices

        # SVC drops rows of zero weight (bound 0: their alpha is 0) and numbers its
        # support_ among the rows it kept; drop them here and map the support back
        rows = None
        if sample_weight is not None and not np.all(np.asarray(sample_weight) > 0):
            rows = np.flatnonzero(np.asarray(sample_weight) > 0)
            if np.unique(y_pm[rows]).size < 2:
                # LIBSVM refuses one class among the positive weights; the dual's
                # solution is alpha = 0 (the equality constraint), which SMO gives
                # with its bias
                return _solve_binary_svm(X, y_pm, C, kp, "smo", sample_weight, tol, max_iter,
                                         cache_size, 1, random_state, index, None, None)
        svc = SVC(C=C, kernel=kp["kernel"], gamma=kp["gamma"], degree=kp["degree"],
                  coef0=kp["coef0"], tol=tol, cache_size=cache_size,
                  max_iter=libsvm_max_iter(max_iter, kp["kernel"], kp["degree"]))
        Xs = _int32_indices(X, canonical=True) if sp.issparse(X) else X
        with libsvm_errors_named(C):
            if rows is None:
                svc.fit(Xs, y_pm, sample_weight=sample_weight)
            else:
                svc.fit(Xs[rows], y_pm[rows], sample_weight=np.asarray(sample_weight)[rows])
        alpha = np.zeros(y_pm.size)
        # dual_coef_ = alpha_i * y_i for SVC's classes_ [-1, 1] (positive for +1)
        # (a sparse matrix when SVC was fitted on sparse input)
        dual = svc.dual_coef_.toarray() if sp.issparse(svc.dual_coef_) else svc.dual_coef_
        support = svc.support_ if rows is None else rows[svc.support_]
        alpha[support] = np.abs(np.asarray(dual).ravel())
        objective = _libsvm_objective(X, y_pm, alpha, kp)
        return LocalSolution(index, alpha, y_pm, svc.intercept_[0], objective,
                             int(np.sum(svc.n_iter_)), svc.fit_status_ == 0)
    raise ValueError(f"solver must be one of {SVM_SOLVERS}, got {solver!r}")


def solve_kernel_ridge(X, y, lam, *, kernel_params, index=None, sample_weight=None,
                       timings=None, report=None):
    """Solve ``(K + lam m I) alpha = y`` for one partition of ``m`` rows.

    With ``sample_weight`` ``w`` (positive), the weighted problem
    ``min (1/sum w) sum_i w_i (y_i - f(x_i))^2 + lam ||f||^2`` as
    :class:`sklearn.kernel_ridge.KernelRidge` solves it (with ``alpha = lam *
    sum(w)``): ``alpha = S (S K S + lam sum(w) I)^-1 S y`` with ``S =
    diag(sqrt(w))``, so that weights of one give the unweighted solution bit
    for bit and an integer weight acts as that many copies of the row.

    ``timings``, a dict when given, gets ``kernel_seconds``: the time spent
    forming the kernel matrix (twice when the solve falls back to least
    squares). ``report``: :func:`~cakernels._solvers.krr.solve_krr`'s.

    Returns
    -------
    solution : LocalSolution
        ``alpha`` are the coefficients of every row (``y`` is None).
    """
    from .krr import shift_weights, solve_krr

    params = {**kernel_params}
    m = X.shape[0]
    _check_numerics_before(X, params)
    if timings is not None:
        timings["kernel_seconds"] = 0.0
    sw = total = None
    if sample_weight is not None:
        # (scaled when lam * sum(w) overflows: the same model; the error blamed lam)
        w, total = shift_weights(sample_weight, lam)
        sw = np.sqrt(w)

    def kernel():
        t0 = time.perf_counter()
        K = kernel_block(X, X, **params)
        if sw is not None:
            K *= sw[:, None]
            K *= sw[None, :]
        if timings is not None:
            timings["kernel_seconds"] += time.perf_counter() - t0
        return K

    if sw is None:
        # no reference kept here: solve_krr frees the factor before its fallback
        # rebuilds K
        alpha = solve_krr(kernel(), y, lam * m, rebuild=kernel,
                          n_threads=params.get("n_threads", 1), report=report)
    else:
        col = sw.reshape((m,) + (1,) * (np.ndim(y) - 1))

        alpha = solve_krr(kernel(), np.asarray(y, dtype=np.float64) * col,
                          lam * total, rebuild=kernel,
                          n_threads=params.get("n_threads", 1), report=report)
        alpha *= col
    index = np.arange(m) if index is None else index
    sol = LocalSolution(index, alpha, None, 0.0, np.nan, 1)
    _check_solution(sol, f"kernel ridge (lam={lam:.3g})", KRR_NONFINITE_CAUSE)
    return sol


def min_cache_mb(n):
    """The smallest kernel cache (MiB) of the native solvers on ``n`` rows: two
    float64 columns (with a little room over the rounding of the MiB)."""
    return 2.0 * 8.0 * n / 1048576.0 * (1.0 + 1e-9) + 1e-9


#: the likely cause named by a kernel ridge solve's non-finite coefficients
KRR_NONFINITE_CAUSE = "lam may be too small for float64, or the targets or features extreme"


def _check_numerics_before(X, kp, dtype=np.float64):
    """Clear errors before a solve on rows whose norms or kernel diagonal overflow
    (``dtype``: of the solver's kernel values; float32 for LIBSVM)."""
    from .._kernels import check_kernel_diagonal, check_magnitude

    if X.shape[0] == 0:
        return
    sq = check_magnitude(X)
    gamma = kp.get("gamma")
    check_kernel_diagonal(sq, kp["kernel"], 1.0 if gamma is None else float(gamma),
                          kp.get("degree", 3), kp.get("coef0", 0.0), dtype=dtype)


def _check_solution(sol, what, cause):
    """A solution with NaN or inf coefficients is an error, not a model; so is an
    SVM whose dual objective is not finite (kernel values that overflow: the
    coefficients may stay finite, the decision values not)."""
    from .._kernels import KERNEL_OVERFLOW

    if sol.y is not None and not np.isfinite(sol.objective):
        raise FloatingPointError(f"{what} reached a non-finite dual objective: "
                                 f"{KERNEL_OVERFLOW}")
    alpha = np.asarray(sol.alpha)
    if not (np.all(np.isfinite(alpha)) and np.isfinite(sol.intercept)):
        n_bad = int(np.sum(~np.isfinite(alpha)))
        raise FloatingPointError(
            f"{what} produced non-finite coefficients ({n_bad} of {alpha.size} NaN or inf"
            f"{', and the intercept' if not np.isfinite(sol.intercept) else ''}): its "
            f"gradient overflowed; {cause}")
