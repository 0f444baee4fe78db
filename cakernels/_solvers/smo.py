"""Thin wrapper of the native SMO solver (``cakernels._native.smo_solve``).

:func:`smo_fit` solves the binary C-SVC dual with bias,

    min_a  0.5 a^T Q a - sum(a)   s.t.  y^T a = 0,  0 <= a_i <= C_i,

with ``Q_ij = y_i y_j K(x_i, x_j)`` and per-sample bounds
``C_i = C * sample_weight[i] * class_weight[y_i]``, exactly the problem
LIBSVM (:class:`sklearn.svm.SVC`) solves, by LIBSVM's algorithm (second-order
working-set selection, kernel column cache, shrinking).
"""

import contextlib
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from .. import _native
from .._kernels import _KIND, check_csr_pointers, resolve_gamma  # noqa: F401 (re-export)
from ..backends._pool import cancellable, solve_cancel_flag

__all__ = ["smo_fit", "check_dual_problem", "native_matrix"]



#: the largest iteration limit the native solvers take (int64)
_MAX_INT64 = 2**63 - 1

def native_matrix(X):
    """``X`` in the form the native solvers take.

    A dense array is returned C-contiguous float64; a sparse matrix becomes
    the tuple ``(values, indices, indptr, n_features)`` of its canonical CSR
    form (float64 values, int64 indices sorted within rows, no duplicates).
    The caller's data are never modified (copies are made when needed).
    """
    if not sp.issparse(X):
        return np.ascontiguousarray(X, dtype=np.float64)
    X = check_csr_pointers(sp.csr_matrix(X, dtype=np.float64, copy=True))
    X.sum_duplicates()  # also sorts the indices
    return (np.ascontiguousarray(X.data, dtype=np.float64),
            np.ascontiguousarray(X.indices, dtype=np.int64),
            np.ascontiguousarray(X.indptr, dtype=np.int64), int(X.shape[1]))


def check_dual_problem(X, y, C, *, kernel, tol, sample_weight=None, class_weight_vector=None,
                       alpha0=None):
    """Validate a binary dual problem for the native solvers.

    Returns ``(X, y, upper, keep, alpha)``: C-contiguous float64 data (or a
    float64 CSR matrix for sparse input), labels in {-1, +1}, per-sample
    upper bounds ``C * class weight * sample_weight``, the mask of samples
    with a positive bound (the others are left out, their alpha is 0, as in
    scikit-learn) and the warm start (zeros by default).
    """
    if sp.issparse(X):
        X = check_csr_pointers(sp.csr_matrix(X, dtype=np.float64))
        if not np.all(np.isfinite(X.data)):
            raise ValueError("X must not contain NaN or infinity")
    else:
        X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    n = X.shape[0]
    if n < 1:
        raise ValueError("X must have at least one sample")
    y = np.ascontiguousarray(y, dtype=np.float64)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    if not np.all((y == 1.0) | (y == -1.0)):
        raise ValueError("y must contain only -1 and +1")
    C = float(C)
    if not (C > 0.0 and np.isfinite(C)):
        raise ValueError(f"C must be positive and finite, got {C}")
    if kernel not in _KIND:
        raise ValueError(f"kernel must be one of {sorted(_KIND)}, got {kernel!r}")
    if not (float(tol) > 0.0):
        raise ValueError(f"tol must be positive, got {tol}")

    upper = np.full(n, C)
    if class_weight_vector is not None:
        cw = np.asarray(class_weight_vector, dtype=np.float64)
        if cw.shape != (2,) or not np.all(cw > 0) or not np.all(np.isfinite(cw)):
            raise ValueError("class_weight_vector must hold 2 positive finite "
                             "weights (for classes -1, +1)")
        upper *= np.where(y > 0, cw[1], cw[0])
    if sample_weight is not None:
        sw = np.asarray(sample_weight, dtype=np.float64)
        if sw.shape != (n,):
            raise ValueError(f"sample_weight must have shape ({n},), got {sw.shape}")
        if not np.all(np.isfinite(sw)) or np.any(sw < 0):
            raise ValueError("sample_weight must be non-negative and finite")
        upper = upper * sw
    keep = upper > 0.0
    if not np.any(keep):
        raise ValueError("all samples have zero weight")

    alpha = np.zeros(n)
    if alpha0 is not None:
        a0 = np.asarray(alpha0, dtype=np.float64)
        if a0.shape != (n,):
            raise ValueError(f"alpha0 must have shape ({n},), got {a0.shape}")
        # the native solvers' box check (tiny violations are clipped), here in the
        # caller's numbering and before the rows of bound 0 are left out
        slack = 1e-8 * upper
        bad = np.flatnonzero(~np.isfinite(a0) | (a0 < -slack) | (a0 > upper + slack))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"infeasible warm start: alpha0 must lie in [0, upper] with "
                             f"upper = C * sample_weight * class weight (alpha0[{i}] = "
                             f"{float(a0[i])!r}, upper = {float(upper[i])!r}; {bad.size} "
                             "such entries)")
        alpha[:] = a0

    return X, y, upper, keep, alpha


@contextlib.contextmanager
def kernel_errors_named(X, keep, kernel, gamma, degree, coef0):
    """Name the cause when a native solve refuses its problem: the solvers
    report a non-finite kernel diagonal (a polynomial kernel overflowing, rows
    whose norms overflow) as an invalid argument, which the checks here then
    explain; only on failure, so that a solve pays nothing for them."""
    try:
        yield
    except ValueError:
        from .._kernels import check_kernel_diagonal, check_magnitude

        rows = X if keep.all() else X[keep]
        check_kernel_diagonal(check_magnitude(rows), kernel, float(gamma), degree, coef0)
        raise


#: LIBSVM's iteration limit per variable (``max(10000000, 100*l)`` in its
#: ``Solver::Solve``; scikit-learn's copy has no limit)
LIBSVM_ITER_PER_VARIABLE = 100


def default_max_iter(n_variables, at_least=10**7):
    """The iteration limit of ``max_iter=-1``: LIBSVM's own, 100 per variable,
    at least ``at_least`` (LIBSVM: 10**7). Converged fits take 0.1-10 per
    variable on the benchmark data; ``tol=1e-300`` never converged."""
    return max(at_least, LIBSVM_ITER_PER_VARIABLE * int(n_variables))


def smo_fit(X, y, C, *, sample_weight=None, class_weight_vector=None,
            kernel="rbf", gamma="scale", degree=3, coef0=0.0, tol=1e-3,
            max_iter=-1, cache_size=200, alpha0=None, grad0=None, n_threads=1,
            min_parallel_work=None, collapse_at=None, page_size=None):
    """Train a binary kernel SVM (dual with bias) by native SMO.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Training data, dense or sparse (CSR); both give the same solution,
        bit for bit.
    y : array-like of shape (n_samples,)
        Labels, each -1 or +1.
    C : float
        Regularisation parameter, > 0.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative per-sample weights multiplying C.  Samples of weight 0
        are left out of the problem (their alpha is 0), as in scikit-learn.
    class_weight_vector : array-like of shape (2,), optional
        Positive weights of the classes (-1, +1), in that order (the
        ``class_weight_`` of a scikit-learn classifier with ``classes_ ==
        [-1, 1]``), multiplying C.
    kernel : {'rbf', 'linear', 'poly', 'sigmoid'}
    gamma : float, 'scale' or 'auto'
        Resolved on X as :class:`sklearn.svm.SVC` does.
    degree, coef0 : float
        Kernel parameters (poly / sigmoid).
    tol : float
        Stop when the maximal violating pair gap is < tol (LIBSVM's test).
    max_iter : int
        Maximum number of SMO steps; <= 0: :func:`default_max_iter` of the
        problem's variables (LIBSVM's limit).
    cache_size : float
        Kernel column cache in MiB (must hold two columns); ``np.inf`` for
        unlimited.
    alpha0 : array-like of shape (n_samples,), optional
        Feasible warm start (``0 <= alpha0 <= C_i``, ``y @ alpha0 == 0``).
    grad0 : array-like of shape (n_samples,), optional
        With ``alpha0``: its gradient ``Q alpha0 - 1``, the ``grad`` of the
        fit that returned ``alpha0`` on the same X, y, kernel and samples of
        positive weight (the gradient does not depend on C, so a path over C
        passes it on), used instead of computing it from ``alpha0``'s kernel
        columns; its entries at samples of weight 0 are ignored, and a
        non-finite entry elsewhere (a sample that was no variable of the
        previous fit) makes the gradient computed from ``alpha0``.
    n_threads : int, default=1
        OpenMP threads of one solve: the kernel columns, the two passes of
        the working-set selection and the gradient update are split over
        the threads when they are long enough (a selection pass from 4,096
        active variables, a kernel column from about 32,768 multiply-adds;
        shorter passes run on the calling thread, so small problems run on
        one thread whatever ``n_threads``). The solution is the same
        bit for bit for every ``n_threads``. When the threads keep waiting
        for each other (other programs hold the cores) the passes go back to
        the calling thread for a while (``collapses`` in the result), and the
        process remembers it: solves that start before the team's retry time
        run on the calling thread from the start (a multiclass fit's short
        pair solves each paid the waits again).
    min_parallel_work : int, optional
        Smallest pass run on several threads, in multiply-adds of a kernel
        column (default 32,768; ``benchmarks/bench_smo.py --parts
        threads``). For tests and tuning (1 splits every pass).
    collapse_at : int, optional
        Tests only: hand the passes to one thread after that many parallel
        regions (-1: never), whatever the timing; such a solve ignores the
        process's memory of earlier collapses, but its own collapse is
        remembered as any other (the solves of the next 0.25 s start on one
        thread).
    page_size : int, optional
        Tests only: doubles per page of the kernel column cache (rounded up
        to a power of two; default n/64 as a power of two in [256, 2048]).
        The solution is the same for every page size.

    Returns
    -------
    dict with keys ``alpha`` (n_samples,), ``grad`` (n_samples,: ``Q alpha -
    1`` at the solution; NaN at samples of weight 0, which are no variables),
    ``intercept`` (decision function
    ``sum_i alpha_i y_i K(x_i, x) + intercept``), ``n_iter``, ``objective``
    (dual value ``0.5 a^T Q a - sum(a)``), ``converged``, ``support``
    (indices with ``alpha > 0``), ``threads_used`` (the largest team a pass
    ran on; 1 when every pass was short), ``parallel_regions``,
    ``collapses`` and ``stats`` (the native counters: kernel columns
    computed, their entries, multiply-adds and seconds, the active
    variables summed over the steps, the cache's ``page_doubles`` and the
    ``pool_bytes`` of pages it allocated; ``benchmarks/bench_smo.py --parts
    profile``).

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` was reached before the tolerance.
    """
    X, y, upper, keep, alpha = check_dual_problem(
        X, y, C, kernel=kernel, tol=tol, sample_weight=sample_weight,
        class_weight_vector=class_weight_vector, alpha0=alpha0)
    if alpha0 is not None:  # the native check of the equality, with a clear message
        a = np.clip(alpha, 0.0, upper)
        r = float(y @ a)
        if abs(r) > 1e-6 * max(float(a.sum()), 1.0):
            raise ValueError(f"infeasible warm start: y^T alpha0 = {r:.6g}, where the "
                             "dual with a bias needs 0")
    n_threads = int(n_threads)
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    min_work = 0 if min_parallel_work is None else int(min_parallel_work)
    if min_parallel_work is not None and min_work < 1:
        raise ValueError(f"min_parallel_work must be >= 1, got {min_parallel_work}")
    g = resolve_gamma(gamma, X)
    Xk = native_matrix(X if keep.all() else X[keep])
    ak = np.ascontiguousarray(alpha[keep])
    gk = np.empty(ak.size)
    if grad0 is not None:
        if alpha0 is None:
            raise ValueError("grad0 is the gradient of alpha0: pass both")
        grad0 = np.asarray(grad0, dtype=np.float64)
        if grad0.shape != (X.shape[0],):
            raise ValueError(f"grad0 has shape {grad0.shape}, expected ({X.shape[0]},)")
        gk[:] = grad0[keep]
        if not np.all(np.isfinite(gk)):
            # a sample without a variable in the previous solve (NaN there: its
            # C * weight was 0, as at a smaller C with a subnormal weight): the
            # gradient is computed from alpha0
            grad0 = None
    # (a limit beyond int64 is no limit: the C solver counts in int64)
    budget = min(int(max_iter), _MAX_INT64) if max_iter > 0 else default_max_iter(ak.size)
    cancel = solve_cancel_flag()
    with cancellable(cancel), kernel_errors_named(X, keep, kernel, g, degree, coef0):
        rho, objective, n_iter, converged, stats = _native.smo_solve(
            Xk, np.ascontiguousarray(y[keep]), np.ascontiguousarray(upper[keep]),
            ak, _KIND[kernel], float(g), float(coef0), float(degree), float(tol),
            budget, float(cache_size), n_threads=n_threads, min_work=min_work,
            collapse_at=int(collapse_at or 0), return_stats=True,
            page_doubles=int(page_size or 0), cancel=cancel, grad=gk,
            grad_in=grad0 is not None)
    alpha = np.zeros(X.shape[0])
    alpha[keep] = ak
    grad = np.full(X.shape[0], np.nan)
    grad[keep] = gk
    if not converged:
        limit = (f"max_iter={max_iter} iterations" if max_iter > 0 else
                 f"{budget:,} iterations (max_iter=-1: LIBSVM's limit, 100 per sample, "
                 "at least 10,000,000)")
        warnings.warn(f"SMO did not converge within {limit} (tol={tol}); consider "
                      "raising max_iter or tol", ConvergenceWarning, stacklevel=2)
    return {
        "alpha": alpha,
        "grad": grad,
        "intercept": 0.0 - rho,  # (not -0.0 when rho is 0: a constant kernel, balanced labels)
        "n_iter": int(n_iter),
        "objective": objective,
        "converged": bool(converged),
        "support": np.flatnonzero(alpha > 0.0),
        "threads_used": int(stats["threads_used"]),
        "parallel_regions": int(stats["regions"]),
        "collapses": int(stats["collapses"]),
        "stats": stats,
    }
