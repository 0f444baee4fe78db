"""Asynchronous greedy coordinate descent (Asy-GCD) for the SVM dual without bias.

:func:`asygcd_fit` solves the box-constrained binary SVM dual (thesis
chapter 4, eq. 4.9),

    min_a  0.5 a^T Q a - sum(a)   s.t.  0 <= a_i <= C_i,

with ``Q_ij = y_i y_j K(x_i, x_j)`` and ``C_i = C * sample_weight[i]``: the
SVM without bias term, whose decision function is
``f(x) = sum_i alpha_i y_i K(x_i, x)``.  The native solver
(``cakernels._native.asygcd_solve``) runs one OpenMP thread per block of
variables (Algorithm 14): each thread repeatedly updates the variable of its
block with the largest projected gradient (``selection='greedy'``) or a
random one (``selection='random'``, PSCD), keeps its own LRU kernel column
cache, and updates the shared gradient with atomic adds.

:func:`variable_blocks` builds the blocks as section 4.4 ("Variable
Partitioning") suggests: K-means centres on a subsample, every variable to
its nearest centre, then balanced to equal sizes so that threads get equal
work.
"""

import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from . import _native
from ._smo import check_dual_problem
from ._kernels import _KIND, resolve_gamma
from .partition import _Capacity, greedy_capacity_assign, squared_distances

__all__ = ["asygcd_fit", "variable_blocks"]


def variable_blocks(X, n_threads, random_state=None):
    """Balanced K-means partition of the variables into ``n_threads`` blocks.

    K-means (``n_threads`` centres) runs on a random subsample of at most
    ``20 * n_threads * 50`` rows; every row then goes, in data order, to its
    nearest centre that still has room, so every block gets
    ``floor(n / n_threads)`` or ``ceil(n / n_threads)`` variables.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    n_threads : int
        Number of blocks, >= 1.
    random_state : int, RandomState instance or None

    Returns
    -------
    block : ndarray of shape (n_samples,), dtype int64
        Block (thread) of every variable, in ``[0, n_threads)``.
    """
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    n_threads = int(n_threads)
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    if n_threads == 1:
        return np.zeros(n, dtype=np.int64)
    rng = check_random_state(random_state)
    if n <= n_threads:
        # fewer variables than threads: one variable per block, some empty
        return rng.permutation(n_threads)[:n].astype(np.int64)
    n_sub = min(n, 20 * n_threads * 50)
    sub = rng.choice(n, n_sub, replace=False) if n_sub < n else np.arange(n)
    km = KMeans(n_clusters=n_threads, n_init=1,
                random_state=rng.randint(np.iinfo(np.int32).max))
    with warnings.catch_warnings():
        # fewer distinct points than clusters: the balancing below still
        # gives every block its share
        warnings.simplefilter("ignore", ConvergenceWarning)
        km.fit(X[sub])
    centers = np.asarray(km.cluster_centers_, dtype=np.float64)
    D = squared_distances(X, centers)
    labels = greedy_capacity_assign(D, _Capacity(n, n_threads))
    return np.ascontiguousarray(labels, dtype=np.int64)


def asygcd_fit(X, y, C, *, sample_weight=None, kernel="rbf", gamma="scale",
               degree=3, coef0=0.0, tol=1e-3, max_iter=-1, cache_size=200,
               n_threads=None, selection="greedy", random_state=None,
               alpha0=None):
    """Train a binary kernel SVM without bias by native Asy-GCD.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Dense training data (converted to C-contiguous float64).
    y : array-like of shape (n_samples,)
        Labels, each -1 or +1.
    C : float
        Regularisation parameter, > 0.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative per-sample weights multiplying C.  Samples of weight 0
        are left out of the problem (their alpha is 0).
    kernel : {'rbf', 'linear', 'poly', 'sigmoid'}
    gamma : float, 'scale' or 'auto'
        Resolved on X as :class:`sklearn.svm.SVC` does.
    degree, coef0 : float
        Kernel parameters (poly / sigmoid).
    tol : float
        Stop when the largest absolute projected gradient is <= tol.
    max_iter : int
        Maximum number of coordinate updates (all threads together); <= 0
        means no limit.
    cache_size : float
        Total kernel column cache in MiB, split evenly between the threads
        (each must hold one column); ``np.inf`` for unlimited.
    n_threads : int, optional
        Number of threads (= blocks); ``cakernels._native.max_threads()``
        when None.
    selection : {'greedy', 'random'}
        'greedy' is Asy-GCD (largest projected gradient of the block);
        'random' is asynchronous stochastic coordinate descent (PSCD).
    random_state : int, RandomState instance or None
        Seeds the K-means block partition and the random selection.
    alpha0 : array-like of shape (n_samples,), optional
        Warm start in the box ``0 <= alpha0 <= C_i``.

    Returns
    -------
    dict with keys ``alpha`` (n_samples,), ``objective`` (dual value
    ``0.5 a^T Q a - sum(a)``), ``n_updates``, ``converged``, ``support``
    (indices with ``alpha > 0``) and ``grad`` (``Q a - 1``, zeros for
    samples of weight 0).  The decision function is
    ``f(x) = sum_i alpha_i y_i K(x_i, x)`` (no intercept).

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` was reached before the tolerance.
    """
    X, y, upper, keep, alpha = check_dual_problem(
        X, y, C, kernel=kernel, tol=tol, sample_weight=sample_weight, alpha0=alpha0)
    if selection not in ("greedy", "random"):
        raise ValueError(f"selection must be 'greedy' or 'random', got {selection!r}")
    if n_threads is None:
        n_threads = _native.max_threads()
    n_threads = int(n_threads)
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")

    rng = check_random_state(random_state)
    g = resolve_gamma(gamma, X)
    Xk = X if keep.all() else np.ascontiguousarray(X[keep])
    block = variable_blocks(Xk, n_threads, rng)
    seed = int(rng.randint(np.iinfo(np.int32).max))
    ak = np.ascontiguousarray(alpha[keep])
    objective, n_updates, converged, grad_k = _native.asygcd_solve(
        Xk, np.ascontiguousarray(y[keep]), np.ascontiguousarray(upper[keep]),
        block, ak, _KIND[kernel], float(g), float(coef0), float(degree),
        n_threads, selection == "greedy", seed, float(tol), int(max_iter),
        float(cache_size))
    alpha = np.zeros(X.shape[0])
    alpha[keep] = ak
    grad = np.zeros(X.shape[0])
    grad[keep] = np.asarray(grad_k)
    if not converged:
        warnings.warn(
            f"Asy-GCD did not converge within max_iter={max_iter} updates "
            f"(tol={tol}); consider raising max_iter", ConvergenceWarning,
            stacklevel=2)
    return {
        "alpha": alpha,
        "objective": objective,
        "n_updates": int(n_updates),
        "converged": bool(converged),
        "support": np.flatnonzero(alpha > 0.0),
        "grad": grad,
    }
