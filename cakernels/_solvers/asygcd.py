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
random one (``selection='random'``, PSCD) and keeps its own LRU cache of
kernel values.  Deviation from Algorithm 14: instead of atomic adds of every
step to one shared gradient, each step is published once in a lock-free log
and every thread applies it to the gradient entries of its own variables
("owner computes"); see ``native/ck_asygcd.c`` for why (atomic adds made
two threads no faster than one here) and why it is still Asy-GCD.  Second
deviation: a greedy thread steps only while its largest violation is at
least half of the team's largest (each thread publishes its own); on a
strongly coupled kernel (a9a) one block often holds all the large
violations, and letting the other thread step on its small ones made two
threads need up to 1.7x the updates of serial GCD (now about the same).

Two options go beyond the printed algorithm: ``shrinking`` (on by default,
as in LIBSVM: every thread drops variables stuck at a bound from its active
set by LIBLINEAR's rule, keeps the active ones contiguous by LIBSVM's swaps,
caches kernel slices at the active length and rebuilds the dropped gradient
entries with LIBSVM's G_bar before the final test; measured, 2-4.5x faster
full fits on ijcnn1, 1.2-1.3x faster on covtype_5000, 0.8-2.0x the time on a9a;
``shrinking=False`` is Algorithms 13/14 without it, choosing by LIBLINEAR's
projected gradient rather than equation 4.11's capped step: see
``native/ck_asygcd.c``, deviation 6) and
``fit_intercept``, the regularised bias of LIBLINEAR: the kernel becomes
``K + intercept_scaling**2`` (the feature map extended by a constant feature),
which restores the accuracy of the SVM with bias on imbalanced data such as
ijcnn1.

:func:`variable_blocks` builds the blocks as section 4.4 ("Variable
Partitioning") suggests: K-means centres on a subsample, every variable to
its nearest centre, then balanced to equal sizes so that threads get equal
work. Like the partitioners of :mod:`cakernels.partition`, it computes on
dense float64 data whenever the dense copy fits
:data:`~cakernels.partition.DENSE_BUDGET_BYTES`, so that CSR input and its
dense copy give the same blocks.
"""

import contextlib
import functools
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state
from .. import _memory, _native
from ..backends import blas_limits, threads_available
from ..backends._pool import cancellable, solve_cancel_flag
from .smo import check_dual_problem, kernel_errors_named, native_matrix
from .._kernels import _KIND, resolve_gamma
from ..partition import (
    _Capacity,
    _int32_indices,
    greedy_capacity_assign,
    partition_storage,
    squared_distances,
    to_partition_storage,
)

__all__ = ["asygcd_fit", "variable_blocks", "MIN_ROWS_PER_THREAD", "team_size"]

#: A thread of Asy-GCD gets at least this many variables (rows with a
#: positive weight). Below it a second thread did not pay, or not reliably
#: (``benchmarks/bench_contention.py``): 1,000 ijcnn1 rows took 10.7 ms on 1
#: thread and 13.7 ms on 2 on idle cores; 3,000 a9a rows (cheap sparse
#: columns) took 1.3-2x longer on 2 threads even on idle cores; and with
#: other processes on the cores, 3,000-4,500 rows on 2 threads took up to 3x
#: the 1-thread time in single runs (a team's start and its waits cost
#: milliseconds there). Dense ijcnn1 at 3,000-4,500 rows gives up a 0.55x
#: speed-up on idle cores for this.
MIN_ROWS_PER_THREAD = 5000


def team_size(n_rows, n_threads, min_rows_per_thread=None):
    """Threads Asy-GCD runs on ``n_rows`` variables when given ``n_threads``:
    ``min(n_threads, max(1, n_rows // min_rows_per_thread))``
    (default :data:`MIN_ROWS_PER_THREAD`)."""
    per = MIN_ROWS_PER_THREAD if min_rows_per_thread is None else int(min_rows_per_thread)
    if per < 1:
        raise ValueError(f"min_rows_per_thread must be >= 1, got {per}")
    return int(max(1, min(int(n_threads), int(n_rows) // per)))


def variable_blocks(X, n_threads, random_state=None):
    """Balanced K-means partition of the variables into ``n_threads`` blocks.

    K-means (``n_threads`` centres; k-means++ seeding and Lloyd's iterations
    in NumPy, no threads) runs on a random subsample of at most
    ``20 * n_threads * 50`` rows; every row then goes, in data order, to its
    nearest centre that still has room, so every block gets
    ``floor(n / n_threads)`` or ``ceil(n / n_threads)`` variables. CSR input
    is densified for this (a transient copy) when its dense copy fits
    :data:`~cakernels.partition.DENSE_BUDGET_BYTES`, so that it gives the
    blocks of its dense copy.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    n_threads : int
        Number of blocks, >= 1.
    random_state : int, RandomState instance or None

    Returns
    -------
    block : ndarray of shape (n_samples,), dtype int64
        Block (thread) of every variable, in ``[0, n_threads)``.
    """
    if not sp.issparse(X):
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
    # K-means' centres are dense (k-means++ and Lloyd hold a few copies): a
    # clear error where hashed features (2^31 columns) would not fit
    need = 4 * 8.0 * n_threads * X.shape[1]
    avail = _memory.shortfall(need)
    if avail is not None:
        raise MemoryError(
            f"Asy-GCD's {n_threads} blocks of variables are a K-means with dense centres "
            f"of {X.shape[1]:,} features: about {_memory.fmt_bytes(need)}, but only "
            f"{_memory.fmt_bytes(avail)} are available; use one thread (n_threads=1) or "
            "drop unused feature columns")
    # the blocks of one canonical storage, as the partitioners compute
    X = to_partition_storage(X, partition_storage(X))
    n_sub = min(n, 20 * n_threads * 50)
    sub = rng.choice(n, n_sub, replace=False) if n_sub < n else np.arange(n)
    # scikit-learn's k-means++ takes 32-bit indices only: the subsample (at
    # most 2,000 rows per thread) always fits them
    centers = _lloyd(_int32_indices(X[sub], canonical=True), n_threads,
                     rng.randint(np.iinfo(np.int32).max))
    D = squared_distances(X, centers)
    labels = greedy_capacity_assign(D, _Capacity(n, n_threads))
    return np.ascontiguousarray(labels, dtype=np.int64)


def _lloyd(X, k, seed, max_iter=100):
    """K-means centres of a small sample: k-means++ seeding (scikit-learn's
    :func:`~sklearn.cluster.kmeans_plusplus`), then Lloyd's iterations in
    NumPy until the labels stop changing.

    Not :class:`~sklearn.cluster.KMeans`: its OpenMP team (scikit-learn's own
    libgomp) keeps spinning after the fit, and with another process on the
    cores its start took 170-210 ms for these 2,000 rows against 4 ms idle
    (``benchmarks/bench_contention.py``); the blocks need no threads.
    """
    Xd = X if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    # fewer distinct points than clusters (duplicate centres: the balancing
    # after it still gives every block its share) warns of nothing; floating-
    # point warnings are muted per thread (np.errstate), not with a
    # warnings.catch_warnings filter: before Python 3.14 that swaps the
    # process-wide filter list, and two threads inside it at once left the
    # "ignore" filters installed for good
    with np.errstate(all="ignore"):
        centers, _ = kmeans_plusplus(Xd, n_clusters=k, random_state=seed)
    labels = None
    for _ in range(max_iter):
        new = np.argmin(squared_distances(Xd, centers), axis=1)
        if labels is not None and np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            members = labels == j
            if members.any():  # an empty cluster keeps its centre
                centers[j] = np.asarray(Xd[members].mean(axis=0)).ravel()
    return np.ascontiguousarray(centers, dtype=np.float64)


AUTO_UPDATES_PER_VARIABLE = 1000
AUTO_MIN_UPDATES = 10**6


def default_max_updates(n_variables):
    """The update limit of ``max_iter=-1``: 1,000 per variable (LIBLINEAR's
    default of 1,000 epochs of its dual coordinate descent, as
    :class:`sklearn.svm.LinearSVC`), at least 10**6.

    Converged fits take 2-130 updates per variable on the benchmark data;
    without a limit a large C on a nearly singular kernel (duplicate samples
    with opposite labels, C=1e8) ran for hours, every update lowering the
    objective by the same small amount.
    """
    return max(AUTO_MIN_UPDATES, AUTO_UPDATES_PER_VARIABLE * int(n_variables))


@functools.lru_cache(maxsize=64)
def _first_draw(seed):
    """The first seed a ``RandomState(seed)`` draws for the native solve."""
    return int(np.random.RandomState(seed).randint(np.iinfo(np.int32).max))


def asygcd_fit(X, y, C, *, sample_weight=None, kernel="rbf", gamma="scale",
               degree=3, coef0=0.0, tol=1e-3, max_iter=-1, cache_size=200,
               n_threads=None, selection="greedy", shrinking=True,
               fit_intercept=False, intercept_scaling=1.0, random_state=None,
               alpha0=None, feature_major=True, return_stats=False,
               min_rows_per_thread=None, page_size=None):
    """Train a binary kernel SVM without bias by native Asy-GCD.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Training data, dense or sparse (CSR); with one thread both give the
        same solution, bit for bit.
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
        Stop when the largest absolute projected gradient is <= tol; below 1
        (every variable's is 1 at ``alpha = 0``).
    max_iter : int
        Maximum number of coordinate updates (all threads together); <= 0:
        :func:`default_max_updates` of the problem's variables.
    cache_size : float
        Total kernel cache in MiB (at least one column of ``8 * n_samples``
        bytes); every thread caches the part of the columns over its own
        variables.  ``np.inf`` for unlimited.  When a dense feature-major
        copy of ``X`` (``8 * n_samples * n_features`` bytes, half that when
        every value is a float exactly) takes at most a quarter of it and
        no more than the whole kernel matrix (``8 * n_samples**2`` bytes), the
        copy is made and taken out of the budget: kernel columns then cost
        one vectorised pass per nonzero feature (3.1-3.5x less time per
        column on a9a, CSR, 2.1x per fit; 2.4-2.6x per column on dense
        ijcnn1, 1.3-1.4x per fit: ``benchmarks/bench_feature_major.py``),
        with bit-identical values.
    n_threads : int, optional
        Most threads (= blocks) to use; None: the threads this process may
        use that no open parallel region of it holds
        (:func:`cakernels.backends.threads_available`: CPU affinity, cgroup
        quota, ``OMP_NUM_THREADS``). The team is smaller on small problems:
        every thread gets at least ``min_rows_per_thread`` variables
        (:func:`team_size`); the result's ``n_threads`` is the team used.
    selection : {'greedy', 'random'}
        'greedy' is Asy-GCD (largest projected gradient of the block);
        'random' is asynchronous stochastic coordinate descent (PSCD).
    shrinking : bool, default=True
        Drop bounded variables from the threads' active sets (see the module
        docstring); False runs Algorithms 13/14 without shrinking (the
        selection measure aside: see the module docstring).
    fit_intercept : bool
        Solve with the kernel ``K + intercept_scaling**2`` (a regularised
        bias); the result's ``intercept`` is then
        ``intercept_scaling**2 * sum(alpha * y)``, else 0.
    intercept_scaling : float
        Value of the constant feature, > 0 (larger: weaker regularisation
        of the intercept, slower convergence).
    random_state : int, RandomState instance or None
        Seeds the K-means block partition and the random selection.
    alpha0 : array-like of shape (n_samples,), optional
        Warm start in the box ``0 <= alpha0 <= C_i``.
    feature_major : bool, default=True
        Private switch for benchmarks and tests: ``False`` never builds the
        feature-major copies and computes every kernel slice from the rows
        of ``X`` (dot products), with the same number of cached slices as
        the copy leaves, so that both settings compute the same slices and
        give the same bits (``benchmarks/bench_feature_major.py`` compares
        them).
    min_rows_per_thread : int, default=None
        Fewest variables per thread (None: :data:`MIN_ROWS_PER_THREAD`);
        1 runs ``n_threads`` threads whatever the problem's size.
    page_size : int, optional
        Tests only: doubles per page of the threads' slice caches (rounded
        up to a power of two; default: a thread's variables / 64 as a power
        of two in [256, 2048]). The solution is the same for every page
        size.
    return_stats : bool, default=False
        Private: add ``stats`` to the result, a dict with ``n_slices``
        (kernel slices computed or extended, all threads),
        ``slice_seconds`` (wall time spent computing them, summed over the
        threads), ``fm_threads`` (threads that used a feature-major copy),
        ``capacity`` (full-length slices a thread's budget holds; more
        while variables are shrunk), ``page_doubles`` (the caches' page
        size), ``rebuilds`` (gradient rebuilds of the shrinking, all
        threads), ``active_sum`` (active variables of the stepping thread
        at every update, summed: divided by ``n_updates`` the mean active
        set), ``max_delay`` (the delay bound used),
        ``forced_steps`` (steps taken while the team had stalled) and
        ``collapsed`` (True when the team handed the solve to one thread)
        and ``collapse_reason`` (None; ``'waits'``: its threads kept
        waiting for descheduled peers; ``'cpu_share'``: the OS ran them for
        less than 0.8 of their time, more runnable threads than cores;
        ``'on_demand'``: tests).

    Returns
    -------
    dict with keys ``alpha`` (n_samples,), ``intercept``, ``objective``
    (dual value ``0.5 a^T Q a - sum(a)``), ``n_updates``, ``converged``,
    ``support`` (indices with ``alpha > 0``), ``grad`` (``Q a - 1``,
    zeros for samples of weight 0) and ``n_threads`` (the team used).  The decision function is
    ``f(x) = sum_i alpha_i y_i K(x_i, x) + intercept``.

    Warns
    -----
    ConvergenceWarning
        When ``max_iter`` was reached before the tolerance.
    """
    X, y, upper, keep, alpha = check_dual_problem(
        X, y, C, kernel=kernel, tol=tol, sample_weight=sample_weight, alpha0=alpha0)
    if selection not in ("greedy", "random"):
        raise ValueError(f"selection must be 'greedy' or 'random', got {selection!r}")
    if not float(tol) < 1.0:
        # (it returned the model 0, predicting one class everywhere, without a word)
        raise ValueError(
            f"tol={tol} is not below 1: Asy-GCD stops when the largest projected gradient "
            "is at most tol, and at the start (every alpha 0) every variable's is 1, so it "
            "would take no step and return the model 0; use a tol below 1 (the default is "
            "1e-3)")
    if shrinking not in (True, False):
        raise ValueError(f"shrinking must be True or False, got {shrinking!r}")
    intercept_scaling = float(intercept_scaling)
    if not (intercept_scaling > 0.0 and np.isfinite(intercept_scaling)):
        raise ValueError(
            f"intercept_scaling must be positive and finite, got {intercept_scaling}")
    with np.errstate(over="ignore"):
        shift = float(np.float64(intercept_scaling) ** 2) if fit_intercept else 0.0
    if not np.isfinite(shift):  # (a Python float's square raised OverflowError)
        raise ValueError(f"intercept_scaling**2 overflows float64: intercept_scaling="
                         f"{intercept_scaling:g} is too large (the constant feature's kernel "
                         "term); scale it down")
    if n_threads is None:
        n_threads = threads_available()
    n_threads = int(n_threads)
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    n_threads = team_size(int(np.count_nonzero(keep)), n_threads, min_rows_per_thread)

    # (a limit beyond int64 is no limit: the C solver counts in int64)
    budget = (min(int(max_iter), 2**63 - 1) if max_iter > 0
              else default_max_updates(np.count_nonzero(keep)))
    if n_threads == 1 and isinstance(random_state, numbers.Integral):
        # one block, drawn from nothing: the solve's seed is the seed's first
        # draw (seeding a RandomState costs 0.1 ms: a multiclass fit's pairs share it)
        rng, seed = None, _first_draw(int(random_state))
    else:
        rng, seed = check_random_state(random_state), None
    g = resolve_gamma(gamma, X)
    Xk = X if keep.all() else X[keep]
    # BLAS on one thread from here on (the process's one BLAS policy: safe
    # inside a backend's worker threads).  Not only during the solve, which
    # uses no BLAS: OpenBLAS's idle threads spin for ~0.1 s after a
    # multithreaded call, so the blocks' K-means distances on 2 BLAS threads
    # left a spinner that took a core from the 2-thread team and made it
    # collapse on an idle machine (a9a 10,000 rows: 2 threads 540-650 ms,
    # 270-370 ms with one BLAS thread, against 490-600 ms for one thread)
    # (one thread: no K-means, no BLAS call; the limit's setting and restoring
    # cost 0.1 ms, a tenth of a small multiclass pair's solve)
    with blas_limits(1) if n_threads > 1 else contextlib.nullcontext():
        block = variable_blocks(Xk, n_threads, rng)
        if seed is None:
            seed = int(rng.randint(np.iinfo(np.int32).max))
        ak = np.ascontiguousarray(alpha[keep])
        yk = np.ascontiguousarray(y[keep])
        cancel = solve_cancel_flag()
        with cancellable(cancel), kernel_errors_named(X, keep, kernel, g, degree, coef0):
            objective, n_updates, converged, grad_k, *stats = _native.asygcd_solve(
                native_matrix(Xk), yk, np.ascontiguousarray(upper[keep]),
                block, ak, _KIND[kernel], float(g), float(coef0), float(degree),
                n_threads, selection == "greedy", seed, float(tol), budget,
                float(cache_size),
                shrinking=bool(shrinking),
                shift=shift,
                feature_major=bool(feature_major),
                return_stats=bool(return_stats),
                page_doubles=int(page_size or 0), cancel=cancel)
        intercept = float(shift * np.dot(ak, yk)) if shift else 0.0  # (not -0.0)
    alpha = np.zeros(X.shape[0])
    alpha[keep] = ak
    grad = np.zeros(X.shape[0])
    grad[keep] = np.asarray(grad_k)
    if not converged:
        name = "Asy-GCD" if selection == "greedy" else "PSCD"
        limit = (f"max_iter={max_iter} updates" if max_iter > 0 else
                 f"{budget:,} updates (max_iter=-1: {AUTO_UPDATES_PER_VARIABLE} per "
                 f"variable, at least {AUTO_MIN_UPDATES:,})")
        why = ("raise max_iter (or tol)" if max_iter > 0 else
               "coordinate descent crawls when C is large and the kernel nearly singular "
               "(duplicate samples with opposite labels): lower C, or raise max_iter")
        warnings.warn(f"{name} did not converge within {limit} (tol={tol}, C={C}); {why}",
                      ConvergenceWarning, stacklevel=2)
    result = {
        "alpha": alpha,
        "intercept": intercept,
        "objective": objective,
        "n_updates": int(n_updates),
        "converged": bool(converged),
        "support": np.flatnonzero(alpha > 0.0),
        "grad": grad,
        "n_threads": n_threads,
    }
    if return_stats:
        result["stats"] = stats[0]
    return result
