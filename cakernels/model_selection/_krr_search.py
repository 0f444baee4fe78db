"""The fast grid search of the partitioned kernel ridge regressors over sigma
and lambda: :class:`PartitionedKernelRidgeCV` and its front doors (after
Algorithm 10 of the reference, with cross-validation).

One search engine serves every front door. It

1. validates the data and draws the validation splits once, on all rows;
2. partitions once (the estimator's partitioner, on all rows) and moves every
   partition to its worker or rank, as a fit does; the rows a partition must
   predict during validation travel with it (under ``combine='nearest'`` the
   rows whose nearest centre it is; under ``'average'`` every row);
3. on every partition, computes the Gram matrix of its rows (the squared
   distances, for the Gaussian kernel) once; for every sigma forms the kernel
   once; for every split factorises the training block once per lambda
   (Cholesky) or once for every lambda (an eigendecomposition, after which
   every lambda is an O(m^2) solve) and predicts that split's validation rows;
4. adds up the squared (and absolute) errors of every (sigma, lambda, split)
   over the partitions: one reduction under MPI, nothing else communicated
   during the search;
5. refits the best (sigma, lambda) on all rows, as ``GridSearchCV(refit=True)``.

Folds and partitions: the data are partitioned once, on all rows, and every
split trains partition ``j``'s local model on the rows of ``j`` in the split's
training set (ridge shift ``lam * m_jf`` with ``m_jf`` that count, as a fit on
those rows would use) and validates on the split's validation rows, routed by
nearest centre or averaged over the partitions (a partition with no training
row in a split has no model there: its validation rows go to the nearest
partition that has, and the average leaves it out). Algorithm 10 partitions once
too, but only its training rows, and routes its test rows to those centres;
with cross-validation every row trains in some split, so the partitions here
are drawn from all rows, validation rows included: a split's training rows are
balanced over the partitions only in expectation, and the routing centres
include the validation rows' features (a held-out set given as a
``PredefinedSplit`` is partitioned with the training rows; to score
Algorithm 10's way, fit the estimator on the training rows and score it on the
held-out rows). ``GridSearchCV`` instead re-partitions every split's training
set.
"""

import numbers
import threading
import time
import warnings

import numpy as np
from scipy import linalg
from sklearn.base import RegressorMixin
from sklearn.metrics import get_scorer
from sklearn.utils._param_validation import Interval, StrOptions

from .. import _native
from .._engine import PartitionedEstimator, count_zero_weights, keeps_state_on_failure
from .._kernels import (
    _KIND,
    KERNELS,
    check_kernel_diagonal,
    kernel_block,
    kernel_dot,
    row_sq_norms,
    sigma_to_gamma,
)
from .._params import Count
from .._solvers.eigh import eigh_in_place
from .._solvers.krr import (
    RCOND_WARN,
    SHIFTED_KERNEL,
    TINY_WEIGHT,
    check_ridge_shift,
    scale_by_power_of_4,
    solve_krr,
)
from ..backends._pool import run_graph
from ..kernel_ridge import BKRR, BKRR2, DCKRR, KKRR, KKRR2, PartitionedKernelRidge
from ..kernel_ridge._partitioned import check_solve_memory
from ._results import check_grid
from ._search import _PartitionedSearchCV, allreduce_parts, check_training_rows

#: the scorings computed from per-split sums (scikit-learn's names)
SCORINGS = ("r2", "neg_mean_squared_error", "neg_root_mean_squared_error",
            "neg_mean_absolute_error")

#: ``solver='auto'`` takes the eigendecomposition from this many lambdas on:
#: measured here on whole searches (cadata 8,000 and 16,000 rows, 8 partitions,
#: 3 folds: blocks of 667 and 1,333 rows; 1 and 2 threads), one split's
#: eigendecomposition and its O(m^2) work per lambda cost as much as 10 to 11
#: lambdas' Cholesky solves and predictions (a bare ``dsyevd`` costs 13 to 15
#: bare ``dpotrf`` of the same matrix)
EIGH_MIN_LAMS = 11

# per (sigma, lambda, split, output): count, sum (y - c), sum (y - c)^2,
# sum residual^2, sum |residual|   (c: the split's validation mean, against cancellation)
_N_STATS = 5


class PartitionedKernelRidgeCV(RegressorMixin, _PartitionedSearchCV):
    """Fast grid search of :class:`~cakernels.PartitionedKernelRidge` over sigma
    and lambda.

    Equivalent to ``GridSearchCV(PartitionedKernelRidge(...), {'sigma': sigmas,
    'lam': lams}, cv=cv, scoring=scoring)`` with one difference of protocol: the
    data are partitioned once, on all rows, and every split trains each
    partition on its rows in the split's training set (Algorithm 10 partitions
    its training rows only: see the module docstring); see Notes. The partitioning, the Gram matrices and, per sigma,
    the kernel matrices are computed once for the whole grid, and a partition's
    factorisation serves every lambda (``solver='eigh'``).

    Parameters
    ----------
    partitioner : str or partitioner instance, default='kbalance'
        As in :class:`~cakernels.PartitionedKernelRidge`.
    combine : {'nearest', 'average'}, default='nearest'
        Prediction by the nearest centre's model, or the mean of all models.
    n_partitions : int, default=8
        Number of partitions P.
    sigmas : array-like of float, default=(0.25, 0.5, 1, 2, 4, 8)
        Gaussian kernel widths to try (> 0). The grid suits standardised
        features (put a ``StandardScaler`` before the search).
    lams : array-like of float, default=(1e-8, 1e-6, 1e-4, 1e-2)
        Ridge parameters to try (>= 0); each partition of ``m`` training rows
        adds ``lam * m`` to its kernel diagonal.
    cv : int, cross-validation splitter, iterable, 'loo' or None, default=5
        Validation splits, as ``GridSearchCV``'s ``cv`` (None: 5), except that
        an int is a *shuffled* ``KFold(cv, shuffle=True)`` whose seed is drawn
        from ``random_state`` (not ``random_state`` itself: the random
        partitioner draws from it too, and would make every partition one
        fold): the partitions depend on the data order (K-balance fills its
        last partition with the last rows), so unshuffled folds could leave a
        partition without a training row (pass ``KFold(cv)`` for those). A held-out
        validation set is ``ShuffleSplit(n_splits=1, test_size=0.2)`` or a
        :class:`~sklearn.model_selection.PredefinedSplit`. ``'loo'`` is the
        closed-form leave-one-out error of every local model (one split
        column), at the cost of one eigendecomposition per partition and
        sigma; a candidate whose ``K + lam (m - 1) I`` is singular (``lam=0``
        on a linear or polynomial kernel) scores NaN with a warning, the
        closed form not holding there.
    scoring : {'r2', 'neg_mean_squared_error', 'neg_root_mean_squared_error', \
'neg_mean_absolute_error'}, default=None
        Validation score, greater is better (None: ``'r2'``, the estimator's
        ``score``). Every split is scored on all its validation rows together
        (averaged over the outputs of a multi-output ``y``); ``'r2'`` refuses
        a split of one validation row (undefined there; ``cv='loo'`` scores
        all rows' leave-one-out predictions together, and so does the RMSE:
        the root of their mean squared error, where ``LeaveOneOut()``'s
        one-row RMSEs average to the mean absolute error).
    solver : {'auto', 'cholesky', 'eigh'}, default='auto'
        ``'cholesky'``: one Cholesky factorisation per (sigma, lambda, split,
        partition), the arithmetic of a refit. ``'eigh'``: one symmetric
        eigendecomposition per (sigma, split, partition) shared by every
        lambda. ``'auto'``: ``'eigh'`` for ``cv='loo'`` or at least
        ``EIGH_MIN_LAMS`` (11) lambdas, ``'cholesky'`` otherwise.
    refit : bool, default=True
        Refit the best (sigma, lambda) on all rows as ``best_estimator_``.
    kernel : {'rbf', 'linear', 'poly', 'sigmoid'}, default='rbf'
        Kernel (Table 3.1); sigma sets ``1 / (2 sigma^2)`` as for the estimator.
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Term ``r`` of the polynomial and sigmoid kernels.
    halo : float, default=0.0
        Halo fraction, as in :class:`~cakernels.PartitionedKernelRidge`: the
        halo is computed once on all rows with the partition; a split trains
        partition ``j`` on its own and its halo rows that are in the split's
        training set, and every validation row is predicted by its nearest
        centre's model (not always its owner's: balanced partitions own rows
        nearer another centre), as the estimator predicts, or by all
        partitions (averaging). Leave-one-out leaves a row out of every
        partition that trains on it and scores it with its nearest centre's
        model. Fixed for the search (compare halos with one search per value).
    backend : {'serial', 'threads', 'mpi'} or Backend, default='serial'
        Where the partitions' searches run (MPI: every rank keeps its
        partitions for the whole search).
    n_jobs : int, default=None
        Workers of the ``'threads'`` backend.
    random_state : int, RandomState instance or None, default=None
        Seed of the partitioner (an int makes the refit partition exactly as
        the search did).
    verbose : bool, default=False
        Progress bar over the (partition, sigma) steps of the grid.

    Attributes
    ----------
    best_params_ : dict
        ``{'lam': ..., 'sigma': ...}`` of the best mean validation score.
    best_score_ : float
    best_index_ : int
        Index of the best candidate in ``cv_results_``.
    cv_results_ : dict of ndarray
        In :class:`~sklearn.model_selection.GridSearchCV`'s format and
        candidate order (``lam`` outer, ``sigma`` inner): ``params``,
        ``param_lam``, ``param_sigma``, ``split{i}_test_score``,
        ``mean_test_score``, ``std_test_score``, ``rank_test_score``,
        ``mean_fit_time``... (the times are each candidate's share of the
        shared work).
    best_estimator_ : PartitionedKernelRidge
        Refitted on all rows (only with ``refit=True``).
    refit_time_ : float
    scorer_ : callable
        The scikit-learn scorer of ``scoring``, used by :meth:`score`.
    n_splits_ : int
    partitioner_, centers_, partition_sizes_
        The search's partitioning.
    fit_stats_ : dict
        ``partition_seconds``, ``search_seconds``, ``solver``,
        ``n_factorizations``, ``comm`` (messages by phase: the search itself
        is phase ``training``, with none; the reduction is ``validation``)...
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Defined only when ``X`` has string feature names.

    See Also
    --------
    BKRR2CV, KKRR2CV, DCKRRCV, BKRRCV, KKRRCV : the front doors.
    sklearn.model_selection.GridSearchCV : the plain route, which works too.

    Notes
    -----
    Protocol. The partitions are drawn once from all rows; split ``f`` trains
    partition ``j`` on ``rows(j) & train(f)`` with shift ``lam * |rows(j) &
    train(f)|`` and predicts ``val(f)`` by nearest centre (or averages all
    partitions), which is what refitting the estimator on ``train(f)`` with the
    same partitions would give (the tests check 1e-8 agreement). A partition
    with no training row in a split (a K-means cluster of an outlier) has no
    model there: as K-means drops an empty cluster, its validation rows in that
    split go to the nearest centre of the partitions that have training rows,
    and the average is over those. ``cv='loo'`` leaves each row out of the
    partitions that train on it (shift ``lam * (m_j - 1)``; the others never
    saw it) and predicts it as ``cv=LeaveOneOut()`` would, by nearest centre
    (or the mean of all models); a partition of a single training row is an
    error there (``cv=LeaveOneOut()`` predicts that row by the nearest other
    partition).

    Cost. Per (sigma, split, partition), ``'eigh'`` costs one
    eigendecomposition (as much as the Cholesky solves of about
    ``EIGH_MIN_LAMS`` (11) lambdas) and then O(m^2) per lambda; ``'cholesky'``
    costs one factorisation per lambda. Against
    ``GridSearchCV`` the search saves the repeated partitioning, kernel
    formation and prediction set-up; the factorisations themselves remain
    (see the README's benchmark for the measured ratio).

    Threads. A partition's search is a graph of tasks on the worker's threads:
    per sigma one task forms the kernel, then every split is a task that
    factorises its block and predicts its validation rows, each on one thread
    with BLAS on one thread and without the GIL (also the eigendecompositions:
    LAPACK ``dsyevd`` called from the native module). Nothing waits for a
    thread team at a barrier, so a busy machine slows a search down by the
    cores it takes and no more, and the scores are the same bits for any
    number of threads and either backend.

    Memory. A worker holds one partition's Gram matrix (m x m) and at most
    ``max(2, ceil(threads / splits))`` of its kernels at a time, plus one
    split's block and its factor per thread: never more than the ``'threads'``
    backend with as many one-thread workers, and more sigmas or lambdas add
    nothing but the (sigma, lambda, split) score sums (and, for
    ``combine='average'``, one prediction per validation row and candidate).

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import BKRR2CV
    >>> X, y = make_regression(n_samples=400, n_features=4, noise=1, random_state=0)
    >>> search = BKRR2CV(n_partitions=4, sigmas=[1, 4, 16], lams=[1e-6, 1e-3], cv=3,
    ...                  random_state=0).fit(X, y)
    >>> sorted(search.best_params_)
    ['lam', 'sigma']
    >>> search.predict(X[:2]).shape
    (2,)
    """

    _parameter_constraints = {
        **PartitionedEstimator._parameter_constraints,
        "partitioner": [str, object],
        "combine": [StrOptions({"nearest", "average"})],
        "sigmas": ["array-like", Interval(numbers.Real, 0.0, None, closed="neither")],
        "lams": ["array-like", Interval(numbers.Real, 0.0, None, closed="left")],
        "cv": ["cv_object", StrOptions({"loo"})],
        "scoring": [StrOptions(set(SCORINGS)), None],
        "solver": [StrOptions({"auto", "cholesky", "eigh"})],
        "refit": ["boolean"],
        "kernel": [StrOptions(set(KERNELS))],
        "degree": [Count(0)],
        "coef0": [Interval(numbers.Real, None, None, closed="neither")],
    }
    _estimator_class = PartitionedKernelRidge
    _default_partitioner = "kbalance"
    _default_combine = "nearest"
    _cost_exponent = 3.0

    def __init__(self, partitioner="kbalance", combine="nearest", n_partitions=8, *,
                 sigmas=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0), lams=(1e-8, 1e-6, 1e-4, 1e-2),
                 cv=5, scoring=None, solver="auto", refit=True, kernel="rbf", degree=3,
                 coef0=1.0, halo=0.0, backend="serial", n_jobs=None, random_state=None,
                 verbose=False):
        self.partitioner = partitioner
        self.combine = combine
        self.n_partitions = n_partitions
        self.halo = halo
        self.sigmas = sigmas
        self.lams = lams
        self.cv = cv
        self.scoring = scoring
        self.solver = solver
        self.refit = refit
        self.kernel = kernel
        self.degree = degree
        self.coef0 = coef0
        self.backend = backend
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # the estimator's validation and target hooks (same data rules as its fit)
    _validate_local = PartitionedKernelRidge._validate_local
    _y_meta = PartitionedKernelRidge._y_meta
    _merge_y_meta = PartitionedKernelRidge._merge_y_meta
    _empty_y = PartitionedKernelRidge._empty_y

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    @property
    def _combine_mode(self):
        return getattr(self, "combine", self._default_combine)

    def _resolve_solver(self, loo, n_lams):
        if self.solver == "cholesky" and loo:
            raise ValueError("cv='loo' needs solver='eigh' (or 'auto'): the closed-form "
                             "leave-one-out error uses the eigendecomposition")
        if self.solver != "auto":
            return self.solver
        return "eigh" if loo or n_lams >= EIGH_MIN_LAMS else "cholesky"

    @property
    def _is_average(self):
        return self._combine_mode == "average"

    def _routes_by_centre(self):
        return not self._is_average

    def _make_estimator(self, sigma, lam):
        """The estimator this search tunes, with ``sigma`` and ``lam``."""
        params = {k: getattr(self, k) for k in ("n_partitions", "kernel", "degree", "coef0",
                                               "halo", "backend", "n_jobs", "random_state",
                                               "verbose")}
        if self._estimator_class is PartitionedKernelRidge:
            params.update(partitioner=self.partitioner, combine=self.combine)
        return self._estimator_class(sigma=float(sigma), lam=float(lam), **params)

    # ------------------------------------------------------------------ fit
    @keeps_state_on_failure
    def fit(self, X, y, sample_weight=None, *, groups=None):
        """Search the (sigma, lambda) grid, then refit the best on all rows.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training samples (never modified).
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the squared errors, for the search and the
            refit: every split trains each partition as the estimator's fit
            would on those rows (``S K S + lam sum(w) I``, ``sum(w)`` over the
            partition's training rows of the split), and the validation
            scores weigh every row by its weight, as ``GridSearchCV`` passes
            them to its scorer since scikit-learn 1.7 (1.6 scored
            unweighted). Rows of weight 0 are left out of the partitions. Not
            with ``cv='loo'`` (the refit without row ``i`` has the ridge shift
            ``lam (sum(w) - w_i)``, a different matrix for every row: no
            closed form).
        groups : array-like of shape (n_samples,), default=None
            Group labels for a group splitter as ``cv`` (``GroupKFold``...),
            as ``GridSearchCV.fit(..., groups=...)`` (under MPI in sharded
            mode: every rank's labels of its own rows).

        Returns
        -------
        self : object
            Fitted search.
        """
        return self._search_fit(X, y, sample_weight, groups)

    # the search's scorer, not RegressorMixin.score (first in the bases: always r2)
    score = _PartitionedSearchCV.score

    # ------------------------------------------------------------------ engine hooks
    def _grid(self):
        sigmas = check_grid("sigmas", self.sigmas)
        lams = check_grid("lams", self.lams, allow_zero=True)
        loo = isinstance(self.cv, str) and self.cv == "loo"
        return {"sigmas": sigmas, "lams": lams, "solver": self._resolve_solver(loo, lams.size)}

    def _prepare(self, s, X, y, w, index, masks):
        """The targets (and the weights) as columns, and every split's
        (weighted) mean of its validation targets: the score sums are taken
        about it, so that a split's total sum of squares does not cancel."""
        y2 = y.reshape(y.shape[0], int(np.prod(y.shape[1:])))
        # (whether weights were given is the same on every rank: the input checks)
        if w is not None and isinstance(self.cv, str) and self.cv == "loo":
            raise ValueError("cv='loo' takes no sample_weight: the refit without row i "
                             "has the ridge shift lam * (sum(w) - w_i), a different "
                             "matrix for every row (no closed form); use k-fold splits")
        wv = np.ones(y2.shape[0]) if w is None else np.asarray(w, dtype=np.float64)
        S = masks.shape[1] // 2
        val = masks[:, S:].astype(bool) if S else np.ones((y2.shape[0], 1), dtype=bool)
        # per split: the validation rows' weight and weighted target sums; then
        # the total weight (all rows)
        with np.errstate(over="ignore", invalid="ignore"):  # (check_ridge_shift's error)
            sums = np.concatenate([np.column_stack([(val * wv[:, None]).sum(axis=0),
                                                    (val * wv[:, None]).T @ y2]).ravel(),
                                   [np.sum(wv)]])
        if s.size > 1:
            sums = s.comm.Allreduce(sums)
        if w is not None and 0 < sums[-1] < TINY_WEIGHT:
            # all weights tiny (1e-320: the weighted kernels subnormal, their digits
            # lost): every weight, and the sums, times one power of 4 that makes the
            # total about 1 (the weights exactly; the sums, taken of the tiny weights,
            # only centre the scores), the same models and weighted scores
            wv = scale_by_power_of_4(wv, sums[-1])
            sums = scale_by_power_of_4(sums, sums[-1])
        # the largest diagonal shift any split can use, before any work
        check_ridge_shift(np.max(self._grid()["lams"]), sums[-1])
        per = sums[:-1].reshape(val.shape[1], 1 + y2.shape[1])
        self.scorer_ = get_scorer("r2" if self.scoring is None else self.scoring)
        facts = {"shift": per[:, 1:] / np.maximum(per[:, :1], np.finfo(np.float64).tiny),
                 "n_outputs": y2.shape[1],
                 "n_zero_weight": 0 if w is None else count_zero_weights(s, w)}
        return (y2 if w is None else np.column_stack([y2, wv])), facts

    def _min_validation_rows(self):
        if self.scoring not in (None, "r2"):
            return 1, None
        return 2, ("r2 is undefined on a single row (scikit-learn scores it NaN, and every "
                   "candidate ties); use scoring='neg_mean_squared_error', or cv='loo' "
                   "(the r2 of all rows' leave-one-out predictions together)")

    def _check_search_memory(self, comm, sizes, concurrent, n_threads, n_splits, loo, grid,
                             train=None):
        """Refuse the search before the rows move (collective), as the estimators'
        fit refuses partitions too large for the memory, with the search's own
        peak (:func:`_search_copies`; ``sizes`` with the halos, ``train`` the largest
        share of rows a split trains on)."""
        copies = _search_copies(n_threads, n_splits, loo, self._is_average,
                                len(grid["sigmas"]), train)
        check_solve_memory(comm, sizes, concurrent, copies, work="the search on a partition")

    def _make_job(self, s, grid, n_splits, loo, facts, n_cols, n_partitions):
        return _SearchJob(grid["sigmas"], grid["lams"], n_splits, facts["n_outputs"], loo,
                          self._is_average, grid["solver"], facts["shift"],
                          self._kernel_params(s.threads), n_partitions,
                          "r2" if self.scoring is None else self.scoring,
                          weighted=n_cols > facts["n_outputs"])

    def _kernel_params(self, n_threads):
        return {"kernel": self.kernel, "degree": self.degree, "coef0": self.coef0,
                "n_threads": int(n_threads)}


def _search_copies(n_threads, n_splits, loo, average, n_sigmas, train=None):
    """Peak memory of one partition's search (:meth:`_SearchJob.run`) in units of its
    m x m float64 kernel matrix, an upper bound: the Gram matrix, a temporary and the
    routing and result arrays, the kernels alive at once (``window``), every thread's
    training block with its factorisation (LAPACK dsyevd's workspace is two blocks; the
    Cholesky path copies the block and may rebuild it) or, for leave-one-out, the
    workspace of its kernel's eigendecomposition, and the routed rows' Gram block
    (``train``: the largest share of rows a split trains on, for splitters other than
    k folds).
    Measured on 4,000-row partitions: 5.8-8.3 on one process with 2 threads against
    7.7-9.8 here; two 4,000-row partitions on the threads backend, 8.2-9.3 against
    14-14.7; 1,000-row partitions (``benchmarks/bench_memory.py``), 7.8-8.5 against
    8.7."""
    n_fold = 1 if loo else max(1, int(n_splits))
    window = min(max(2, -(-n_threads // n_fold)), max(1, n_sigmas))
    if loo:
        per_task = 2.0
    else:  # a split's training block: (k - 1) / k of the rows for k folds, or ``train``
        share = train if train is not None else (n_fold - 1) / n_fold if n_fold > 1 else 1.0
        per_task = 3.0 * min(1.0, share) ** 2
    tasks = min(n_threads, max(1, n_sigmas) * n_fold)
    return 3.0 + window + tasks * per_task + (0.0 if loo or average else 1.0)


class _SearchJob:
    """The per-partition work of the search and the combination of its results."""

    progress_label = "partition, sigma"

    def __init__(self, sigmas, lams, n_splits, k, loo, average, solver, shift, kparams,
                 n_partitions, scoring, weighted=False):
        self.sigmas, self.lams = sigmas, lams
        # the row columns: k targets, the weight (when weighted), then the masks
        self.n_splits, self.k = int(n_splits), int(k)
        self.weighted = bool(weighted)
        self.nc = self.k + self.weighted
        self.loo, self.average, self.solver = loo, average, solver
        self.shift = shift
        self.kparams = kparams
        self.n_partitions = int(n_partitions)
        self.trained = None  # (set by the search: partitions with training rows per split)
        self.scoring = scoring
        self.n_steps = sigmas.size
        # GridSearchCV's candidate order: ParameterGrid sorts the keys, 'lam' outer
        self.order = [(isg, il) for il in range(lams.size) for isg in range(sigmas.size)]
        self.params = [{"lam": float(lams[il]), "sigma": float(sigmas[isg])}
                       for isg, il in self.order]
        # averaging: the partitions' predictions summed as they finish, in task order
        # (the same bits for every thread count), so that a worker holds one sum and
        # the partitions still out of order, not one array per partition
        self._preds, self._next, self._pending = None, 0, {}
        #: the solves' ill-conditioned or singular systems (solve_krr and
        #: _shifted_inverse reports), warned once per search (:meth:`warn`)
        self.reports = []
        self._lock = threading.Lock()

    def absorb(self, position, result):
        """Called with every task's ``run`` result and its position in the task
        list: averaging searches add the predictions to the running sum (in task
        order) and keep only the times."""
        if not self.average:
            return result
        out, times, nf = result
        with self._lock:
            self._pending[position] = out
            while self._next in self._pending:
                part = self._pending.pop(self._next)
                if self._preds is None:
                    self._preds = part
                else:
                    for acc, add in zip(self._preds, part):
                        acc += add
                self._next += 1
        return None, times, nf

    def warn(self, reports, n_solves):
        """One LinAlgWarning per kind for every rank's ill-conditioned or singular
        systems of the search (``reports``: ``(kind, value, lams)``), naming the
        lambdas: it was one per solve, each with its own numbers (25 lines for
        one search of 4 partitions)."""
        def lams_of(kind):
            return sorted({v for r in reports if r[0] == kind for v in r[2]})

        singular = [r for r in reports if r[0] == "singular"]
        ill = [r for r in reports if r[0] == "ill"]
        loo = [r for r in reports if r[0] == "loo_singular"]
        if loo:
            warnings.warn(
                f"cv='loo': kernel matrix + lam*(m-1)*I is singular for lam in "
                f"{lams_of('loo_singular')} in {len(loo)} (partition, sigma) pairs "
                f"(partitions {sorted({r[1][0] for r in loo})}, sigma in "
                f"{sorted({r[1][1] for r in loo})}): the closed-form leave-one-out error "
                "needs it invertible, so these candidates score NaN; use larger lams, or "
                "cv=LeaveOneOut() (refits)", linalg.LinAlgWarning, stacklevel=6)
        if singular:
            warnings.warn(
                f"{SHIFTED_KERNEL} is singular, or not numerically positive definite, in "
                f"{len(singular)} of the search's {n_solves} solves (lam in "
                f"{lams_of('singular')}): they use the least-squares solution. Increase lam "
                "or check the kernel.", linalg.LinAlgWarning, stacklevel=6)
        if ill:
            worst = min(r[1] for r in ill)
            warnings.warn(
                f"{SHIFTED_KERNEL} is ill-conditioned in {len(ill)} of the search's "
                f"{n_solves} solves (lam in {lams_of('ill')}; reciprocal condition numbers "
                f"down to {worst:.2g}): their scores may carry relative errors up to "
                f"{np.finfo(np.float64).eps / worst:.1g}, and differ from refits' (which "
                "warn too). Increase lam for a trustworthy answer.", linalg.LinAlgWarning,
                stacklevel=6)

    def stats(self, n_fact):
        return {"solver": self.solver, "n_factorizations": int(n_fact)}

    # ------------------------------------------------------------------ kernels
    def _kernel_from_gram(self, G, xn, yn, gamma):
        """The kernel from its Gram block ``G`` (overwritten and returned), with
        the arithmetic of :func:`cakernels._kernels.kernel_block`."""
        kp = self.kparams
        if kp["kernel"] == "linear":
            return G
        rbf = kp["kernel"] == "rbf"
        _native.kernel_from_gram(G, xn if rbf else None, yn if rbf else None,
                                 _KIND[kp["kernel"]], float(gamma), float(kp["coef0"]),
                                 float(kp["degree"]), 1)
        return G

    def _predict(self, Xq, Xt, xn_t, alpha, gamma):
        """``K(Xq, Xt) @ alpha`` in row blocks."""
        kp = self.kparams
        return kernel_dot(Xq, Xt, alpha, Y_sq_norms=xn_t if kp["kernel"] == "rbf" else None,
                          kernel=kp["kernel"], gamma=float(gamma), degree=kp["degree"],
                          coef0=kp["coef0"], n_threads=1)

    # ------------------------------------------------------------------ solves
    def _solve_all(self, KT, yT, shifts, times_fit):
        """Coefficients ``(m, n_lams * k)`` of every lambda for one kernel block
        ``KT`` (destroyed); adds the seconds per lambda to ``times_fit``."""
        m = KT.shape[0]
        L, k = self.lams.size, self.k
        if self.solver == "cholesky":
            out = np.empty((m, L, k))
            for i, reg in enumerate(shifts):
                t = time.perf_counter()
                got = []
                out[:, i, :] = solve_krr(KT.copy(), yT, float(reg), rebuild=KT.copy,
                                         n_threads=1, report=got).reshape(m, k)
                self.reports.extend((kind, value, [float(self.lams[i])])
                                    for kind, value in got)
                times_fit[i] += time.perf_counter() - t
            return out.reshape(m, L * k), 1 * L
        t = time.perf_counter()
        w, Q = eigh_in_place(KT)
        inv = _shifted_inverse(w, shifts, lams=self.lams, report=self.reports)
        Qty = Q.T @ yT
        alpha = Q @ (inv[:, :, None] * Qty[:, None, :]).reshape(m, L * k)
        times_fit += (time.perf_counter() - t) / L
        return alpha, 1

    # ------------------------------------------------------------------ one partition
    def run(self, p, q, progress):
        """The search on partition ``p`` with the validation rows ``q``.

        The work is a graph of tasks on the session's threads
        (:func:`~cakernels.backends._pool.run_graph`): per sigma one task forms
        the kernel, then one task per split factorises its training block and
        predicts its validation rows, each on one thread (BLAS on one thread),
        so that next to busy processes no thread team spins at a barrier and
        the results do not depend on the thread count. The kernel of sigma
        ``a`` starts only once the splits of sigma ``a - window`` are done:
        at most ``window = max(2, ceil(threads / splits))`` kernels are alive.

        Returns ``(stats or predictions, times, n_factorisations)``."""
        S, L, k, nc = self.n_splits, self.lams.size, self.k, self.nc
        n_threads = max(1, int(self.kparams["n_threads"]))
        Xj = p.X
        yj = p.y[:, :k]
        wj = p.y[:, k] if self.weighted else None
        mj = Xj.shape[0]
        tr = p.y[:, nc:nc + S].astype(bool)
        xn = row_sq_norms(Xj)
        G = kernel_block(Xj, Xj, kernel="linear", n_threads=n_threads)
        times = np.zeros((self.sigmas.size, L, S, 2))
        val = xq = Gq = None
        if not self.loo:  # the validation rows' mask of every split
            val = q[1][:, nc + S:].astype(bool)
            # where it predicts rows (nearest centre: the others' went elsewhere, see
            # _query_rows); averaging: where no partition has training rows
            check_training_rows(p.j, tr, self.fold_hint,
                                self.trained == 0 if self.average else val.any(axis=0))
        if self.average:
            out = [np.zeros((self.sigmas.size, L, int(val[:, f].sum()) if val is not None
                             else q[2].size, k)) for f in range(S)]
        else:
            out = np.zeros((self.sigmas.size, L, S, k, _N_STATS))
            if not self.loo:
                xq = row_sq_norms(q[0])
                # the routed rows' Gram block, once
                Gq = kernel_block(q[0], Xj, kernel="linear", n_threads=n_threads)
        n_sig = self.sigmas.size
        n_fold = 1 if self.loo else S
        window = max(2, -(-n_threads // n_fold))
        kernels, left = {}, [n_fold] * n_sig
        n_fact = np.zeros((n_sig, n_fold), dtype=np.int64)
        lock = threading.Lock()

        def task(i):
            a, r = divmod(i, n_fold + 1)
            gamma = sigma_to_gamma(self.sigmas[a])
            if r == 0:  # the kernel of sigma a
                check_kernel_diagonal(xn, self.kparams["kernel"], gamma,
                                      self.kparams["degree"], self.kparams["coef0"])
                kernels[a] = self._kernel_from_gram(G.copy(), xn, xn, gamma)
                if self.kparams["kernel"] == "rbf":  # K(x, x) = 1, as kernel_block(X, X)
                    np.fill_diagonal(kernels[a], 1.0)
                return None
            f = r - 1
            if self.loo:  # the only consumer: the eigendecomposition overwrites K
                n_fact[a, f] = self._loo(a, p, kernels[a], yj, xn, gamma, q, out, times)
            else:
                n_fact[a, f] = self._split(a, f, kernels[a], Xj, yj, wj, xn, tr[:, f],
                                           gamma, q, val, xq, Gq, out, times)
            with lock:
                left[a] -= 1
                done = left[a] == 0
                if done:
                    del kernels[a]
            if done:
                progress.tick()
            return None

        n_tasks = n_sig * (n_fold + 1)
        deps = [[] for _ in range(n_tasks)]
        for a in range(n_sig):
            base = a * (n_fold + 1)
            deps[base] = ([(a - window) * (n_fold + 1) + 1 + f for f in range(n_fold)]
                          if a >= window else [])
            for f in range(n_fold):
                deps[base + 1 + f] = [base]
        run_graph(task, deps, [divmod(i, n_fold + 1) for i in range(n_tasks)], n_threads)
        return out, times, int(n_fact.sum())

    def _split(self, a, f, K, Xj, yj, wj, xn, train, gamma, q, val, xq, Gq, out, times):
        """Split ``f`` of sigma number ``a`` (one thread): every lambda's local
        model on the split's training rows of the partition, scored on (or
        predicting) its validation rows. Returns the factorisations."""
        L, k = self.lams.size, self.k
        T = np.flatnonzero(train)
        if not T.size:  # its validation rows went to another partition (_query_rows)
            return 0
        KT, yT, total = K[np.ix_(T, T)], yj[T], T.size
        if wj is not None:  # the estimator's weighted solve: S (S K S + lam sum(w) I)^-1 S y
            sw = np.sqrt(wj[T])
            KT *= sw[:, None]
            KT *= sw[None, :]
            yT, total = yT * sw[:, None], float(np.sum(wj[T]))
        alpha, nf = self._solve_all(KT, yT, self.lams * total, times[a, :, f, 0])
        if wj is not None:
            alpha *= sw[:, None]
        t = time.perf_counter()
        V = np.flatnonzero(val[:, f])
        if self.average:
            Xq = q[0]
            pv = self._predict(Xq[V], Xj[T], xn[T], alpha, gamma)
            out[f][a] += pv.reshape(V.size, L, k).transpose(1, 0, 2)
        elif V.size:
            yq = q[1]
            C = self._kernel_from_gram(Gq[np.ix_(V, T)], xq[V], xn[T], gamma)
            pv = (C @ alpha).reshape(V.size, L, k).transpose(1, 0, 2)
            out[a, :, f] += _stats(yq[V, :k], pv, self.shift[f],
                                   yq[V, k] if self.weighted else None)
        times[a, :, f, 1] += (time.perf_counter() - t) / L
        return nf

    def _loo(self, a, p, K, yj, xn, gamma, q, out, times):
        """Closed-form leave-one-out of partition ``p`` for sigma number ``a``:
        residual ``alpha_i / (A^-1)_ii`` with ``A = K + lam (m - 1) I``
        (the shift of a refit on the other ``m - 1`` rows). A row is predicted
        as by ``cv=LeaveOneOut()`` on the same partitions: by the refit without
        it, routed by nearest centre (or averaged), so a row whose nearest
        centre is another partition's gets that partition's full model (which
        leaving the row out does not change)."""
        L, k = self.lams.size, self.k
        m = K.shape[0]
        if m == 1:
            raise ValueError(f"partition {p.j} has a single training row: leaving it out "
                             "leaves no row to train on (cv='loo' has no other model for "
                             "it); pass cv=LeaveOneOut(), whose split predicts it by the "
                             "nearest other partition, k folds, or fewer partitions")
        t = time.perf_counter()
        w, Q = eigh_in_place(K)
        inv, singular = _shifted_inverse(w, self.lams * (m - 1), return_singular=True,
                                         warn=False, lams=self.lams, report=self.reports)
        Qty = Q.T @ yj
        alpha = (Q @ (inv[:, :, None] * Qty[:, None, :]).reshape(m, L * k)).reshape(m, L, k)
        diag = (Q * Q) @ inv  # (A^-1)_ii for every lambda
        with np.errstate(divide="ignore", invalid="ignore"):
            loo_pred = yj[:, None, :] - alpha / diag[:, :, None]  # (m, L, k)
        if singular.any():
            # the closed form needs A invertible: with the pseudo-inverse it is
            # no leave-one-out refit (lam = 0 on a linear or polynomial kernel)
            loo_pred[:, singular] = np.nan
            # (one warning for the search: :meth:`warn`)
            self.reports.append(("loo_singular", (int(p.j), float(self.sigmas[a])),
                                 [float(v) for v in self.lams[singular]]))
        times[a, :, 0, 0] += (time.perf_counter() - t) / L
        t = time.perf_counter()
        if not self.average:
            # the rows routed here: those this partition trains on get their
            # leave-one-out prediction, the others its full model's
            Xq, yq, iq = q
            order = np.argsort(p.index, kind="stable")
            at = order[np.minimum(np.searchsorted(p.index[order], iq), m - 1)]
            inside = p.index[at] == iq
            pred = np.empty((L, iq.size, k))
            pred[:, inside] = loo_pred[at[inside]].transpose(1, 0, 2)
            if not np.all(inside):
                outside = np.flatnonzero(~inside)
                inv_full = _shifted_inverse(w, self.lams * m, lams=self.lams,
                                            report=self.reports)
                full = Q @ (inv_full[:, :, None] * Qty[:, None, :]).reshape(m, L * k)
                pv = self._predict(Xq[outside], p.X, xn, full, gamma)
                pred[:, outside] = pv.reshape(outside.size, L, k).transpose(1, 0, 2)
            out[a, :, 0] += _stats(yq[:, :k], pred, self.shift[0])
        else:
            Xq, yq, iq = q
            own = np.searchsorted(iq, p.index)
            others = np.setdiff1d(np.arange(iq.size), own, assume_unique=True)
            inv_full = _shifted_inverse(w, self.lams * m, lams=self.lams,
                                        report=self.reports)
            full = Q @ (inv_full[:, :, None] * Qty[:, None, :]).reshape(m, L * k)
            pv = self._predict(Xq[others], p.X, xn, full, gamma)
            out[0][a][:, others] += pv.reshape(others.size, L, k).transpose(1, 0, 2)
            out[0][a][:, own] += loo_pred.transpose(1, 0, 2)
        times[a, :, 0, 1] += (time.perf_counter() - t) / L
        return 1

    # ------------------------------------------------------------------ combine
    def combine(self, comm, results, queries):
        """Sum the partitions' contributions (one reduction under MPI) into
        ``stats[sigma, lam, split, output, stat]``; also the summed times and
        the number of factorisations."""
        shape_t = (self.sigmas.size, self.lams.size, self.n_splits, 2)
        times = np.zeros(shape_t)
        n_fact = 0
        if not self.average:
            stats = np.zeros((self.sigmas.size, self.lams.size, self.n_splits, self.k,
                              _N_STATS))
            for out, t, nf in results:
                stats += out
                times += t
                n_fact += nf
            parts = [stats, times, np.array([n_fact], dtype=np.float64)]
        else:
            preds = self._preds  # (summed by absorb)
            self._preds = None
            for _, t, nf in results:
                times += t
                n_fact += nf
            if preds is None:  # a rank without partitions
                _, yq, iq = queries(None)
                S, k, nc = self.n_splits, self.k, self.nc
                sizes = ([int(yq[:, nc + S + f].sum()) for f in range(S)] if not self.loo
                         else [iq.size])
                preds = [np.zeros((self.sigmas.size, self.lams.size, n, k)) for n in sizes]
            parts = preds + [times, np.array([n_fact], dtype=np.float64)]
        allreduce_parts(comm, parts)  # the one reduction of the search
        times, n_fact = parts[-2], int(parts[-1][0])
        if not self.average:
            stats = parts[0]
        else:
            _, yq, _ = queries(None)
            S, k, nc = self.n_splits, self.k, self.nc
            stats = np.zeros((self.sigmas.size, self.lams.size, S, k, _N_STATS))
            for f in range(S):
                V = (np.flatnonzero(yq[:, nc + S + f]) if not self.loo
                     else np.arange(yq.shape[0]))
                # (the partitions with training rows in the split: a K-means cluster
                # whose rows all validate it has no model there)
                mean = parts[f] / (self.n_partitions if self.trained is None
                                   else self.trained[f])
                for a in range(self.sigmas.size):
                    stats[a, :, f] = _stats(yq[V, :k], mean[a], self.shift[f],
                                            yq[V, k] if self.weighted else None)
        scores = _scores(stats, self.scoring)  # (n_sigma, n_lam, n_splits)
        # splits whose validation rows all weigh 0: NaN for every candidate
        self.empty_splits = np.flatnonzero(np.all(stats[..., 0] <= 0, axis=(0, 1, 3)))
        pick = lambda a: np.array([a[isg, il] for isg, il in self.order])  # noqa: E731
        return pick(scores), pick(times[..., 0]), pick(times[..., 1]), n_fact


def _scores(stats, scoring):
    """Scores ``(n_sigma, n_lam, n_splits)`` from the summed statistics,
    averaged over the outputs (scikit-learn's ``'uniform_average'``); NaN for
    a split whose validation rows all weigh 0 (scikit-learn's metrics refuse
    it: ``GridSearchCV``'s score is NaN there too)."""
    cnt, sy, syy, sres, sabs = (stats[..., i] for i in range(_N_STATS))
    with np.errstate(invalid="ignore", divide="ignore"):
        if scoring == "r2":
            raw = syy - sy ** 2 / cnt
            tot = np.where(raw > 1e-12 * np.maximum(syy, 1e-300), raw, 0.0)
            per = np.where(tot > 0, 1.0 - sres / np.where(tot > 0, tot, 1.0),
                           np.where(sres == 0, 1.0, 0.0))
            # (sums that overflowed: NaN, as scikit-learn's r2 of them; not 0)
            per = np.where(np.isnan(sres) | ~np.isfinite(raw), np.nan, per)
        elif scoring == "neg_mean_squared_error":
            per = -sres / cnt
        elif scoring == "neg_root_mean_squared_error":
            per = -np.sqrt(sres / cnt)
        else:
            per = -sabs / cnt
    per = np.where(cnt > 0, per, np.nan)  # r2 gave 1.0 (0 residual of 0 total)
    return per.mean(axis=-1)


def _stats(y, pred, shift, w=None):
    """Per-lambda sums ``(n_lams, k, 5)`` of the validation rows ``y (n, k)``
    against ``pred (n_lams, n, k)``, weighted by ``w (n,)`` when given (the
    count is then the sum of the weights: scikit-learn's weighted metrics)."""
    yc = y - shift
    res = y[None] - pred
    L = pred.shape[0]
    if w is None:
        base = np.stack([np.full(y.shape[1], float(y.shape[0])), yc.sum(axis=0),
                         (yc ** 2).sum(axis=0)], axis=-1)  # (k, 3)
        sq, ab = res ** 2, np.abs(res)
    else:
        wc = w[:, None]
        base = np.stack([np.full(y.shape[1], float(np.sum(w))), (wc * yc).sum(axis=0),
                         (wc * yc ** 2).sum(axis=0)], axis=-1)
        sq, ab = wc[None] * res ** 2, wc[None] * np.abs(res)
    out = np.empty((L, y.shape[1], _N_STATS))
    out[..., :3] = base[None]
    out[..., 3] = sq.sum(axis=1)
    out[..., 4] = ab.sum(axis=1)
    return out


def _shifted_inverse(w, shifts, return_singular=False, warn=True, lams=None, report=None):
    """``1 / (w_i + s)`` for every eigenvalue and shift, ``(m, n_shifts)``;
    terms whose magnitude is below the least-squares cutoff (``eps * m`` times
    the largest) count as zero with a :class:`~scipy.linalg.LinAlgWarning`, as
    the Cholesky route's fallback (minimum-norm least squares) does. A negative
    term of an indefinite kernel (sigmoid) is kept: it is no singular value
    below the cutoff. ``return_singular``: also the shifts ``(n_shifts,)``
    with a term counted as zero; ``warn=False``: the caller warns.

    ``lams`` (the lambdas of ``shifts``, for the message): also warn, as the
    Cholesky route and a refit do (:data:`~cakernels._solvers.krr.RCOND_WARN`),
    for the shifts whose matrix is ill-conditioned but not singular: its
    reciprocal condition number is ``min |w_i + s| / max |w_i + s|``, exactly
    (Cholesky's is LAPACK's estimate of it), and the scores of those
    candidates may differ from refits' beyond 1e-8."""
    denom = w[:, None] + np.asarray(shifts, dtype=np.float64)[None, :]
    mag = np.abs(denom)
    cutoff = np.finfo(np.float64).eps * w.size * np.max(mag, axis=0)
    bad = mag <= cutoff[None, :]
    if warn and np.any(bad) and report is not None:
        report.append(("singular", "a shifted eigenvalue below the least-squares cutoff",
                       [float(v) for v in np.asarray(lams)[bad.any(axis=0)]]
                       if lams is not None else []))
    elif warn and np.any(bad):
        warnings.warn(f"{SHIFTED_KERNEL} is singular for some lambda; using the "
                      "least-squares (pseudo-inverse) solution. Increase lam or check the "
                      "kernel.", linalg.LinAlgWarning, stacklevel=4)
    if lams is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            rcond = np.min(mag, axis=0) / np.max(mag, axis=0)
        ill = (rcond < RCOND_WARN) & ~bad.any(axis=0)
        if np.any(ill) and report is not None:
            report.append(("ill", float(np.min(rcond[ill])),
                           [float(v) for v in np.asarray(lams)[ill]]))
        elif np.any(ill):
            worst = float(np.min(rcond[ill]))
            warnings.warn(
                f"{SHIFTED_KERNEL} is ill-conditioned for lam in "
                f"{[float(v) for v in np.asarray(lams)[ill]]} (reciprocal condition number "
                f"down to {worst:.2g}): their scores may carry relative errors up to "
                f"{np.finfo(np.float64).eps / worst:.1g}, and differ from refits' (which "
                "warn too). Increase lam for a trustworthy answer.",
                linalg.LinAlgWarning, stacklevel=4)
    with np.errstate(divide="ignore"):
        inv = np.where(bad, 0.0, 1.0 / np.where(bad, 1.0, denom))
    return (inv, bad.any(axis=0)) if return_singular else inv


# --------------------------------------------------------------------------- front doors


def _front_init(self, n_partitions, sigmas, lams, cv, scoring, solver, refit, kernel, degree,
                coef0, halo, backend, n_jobs, random_state, verbose):
    self.n_partitions = n_partitions
    self.halo = halo
    self.sigmas = sigmas
    self.lams = lams
    self.cv = cv
    self.scoring = scoring
    self.solver = solver
    self.refit = refit
    self.kernel = kernel
    self.degree = degree
    self.coef0 = coef0
    self.backend = backend
    self.n_jobs = n_jobs
    self.random_state = random_state
    self.verbose = verbose


class DCKRRCV(PartitionedKernelRidgeCV):
    """Fast (sigma, lambda) search of :class:`~cakernels.DCKRR`: random balanced
    partitions, averaged predictions.

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    sigmas, lams, cv, scoring, solver, refit, kernel, degree, coef0, halo, \
backend, n_jobs, random_state, verbose
        See :class:`PartitionedKernelRidgeCV`.

    Attributes
    ----------
    best_params_, best_score_, best_index_, cv_results_, best_estimator_, refit_time_, \
scorer_, n_splits_, partitioner_, centers_, partition_sizes_, fit_stats_, \
n_features_in_, feature_names_in_
        See :class:`PartitionedKernelRidgeCV`.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import DCKRRCV
    >>> X, y = make_regression(n_samples=300, n_features=3, random_state=0)
    >>> DCKRRCV(n_partitions=3, sigmas=[2, 8], lams=[1e-6, 1e-3], cv=3,
    ...         random_state=0).fit(X, y).best_estimator_.n_partitions
    3
    """

    _parameter_constraints = {k: v for k, v in
                              PartitionedKernelRidgeCV._parameter_constraints.items()
                              if k not in ("partitioner", "combine")}
    _estimator_class = DCKRR
    _default_partitioner = DCKRR._default_partitioner
    _default_combine = DCKRR._default_combine

    def __init__(self, n_partitions=8, *, sigmas=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0),
                 lams=(1e-8, 1e-6, 1e-4, 1e-2), cv=5, scoring=None, solver="auto",
                 refit=True, kernel="rbf", degree=3, coef0=1.0, halo=0.0, backend="serial",
                 n_jobs=None, random_state=None, verbose=False):
        _front_init(self, n_partitions, sigmas, lams, cv, scoring, solver, refit, kernel,
                    degree, coef0, halo, backend, n_jobs, random_state, verbose)


class BKRR2CV(DCKRRCV):
    """Fast (sigma, lambda) search of :class:`~cakernels.BKRR2`: K-balance
    partitions, nearest-centre prediction (Algorithm 10).

    Parameters and attributes as :class:`DCKRRCV` (see
    :class:`PartitionedKernelRidgeCV`).

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import BKRR2CV
    >>> X, y = make_regression(n_samples=300, n_features=3, random_state=0)
    >>> BKRR2CV(n_partitions=3, sigmas=[2, 8], lams=[1e-6, 1e-3], cv=3,
    ...         random_state=0).fit(X, y).partition_sizes_
    array([100, 100, 100])
    """

    _estimator_class = BKRR2
    _default_partitioner = BKRR2._default_partitioner
    _default_combine = BKRR2._default_combine


class KKRR2CV(DCKRRCV):
    """Fast (sigma, lambda) search of :class:`~cakernels.KKRR2`: K-means
    partitions, nearest-centre prediction.

    Parameters and attributes as :class:`DCKRRCV` (see
    :class:`PartitionedKernelRidgeCV`).

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import KKRR2CV
    >>> X, y = make_regression(n_samples=300, n_features=3, random_state=0)
    >>> KKRR2CV(n_partitions=3, sigmas=[2, 8], lams=[1e-6, 1e-3], cv=3,
    ...         random_state=0).fit(X, y).best_estimator_.n_partitions
    3
    """

    _estimator_class = KKRR2
    _default_partitioner = KKRR2._default_partitioner
    _default_combine = KKRR2._default_combine


class BKRRCV(DCKRRCV):
    """Fast (sigma, lambda) search of :class:`~cakernels.BKRR`: K-balance
    partitions, averaged predictions.

    Parameters and attributes as :class:`DCKRRCV` (see
    :class:`PartitionedKernelRidgeCV`).

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import BKRRCV
    >>> X, y = make_regression(n_samples=300, n_features=3, random_state=0)
    >>> BKRRCV(n_partitions=3, sigmas=[2, 8], lams=[1e-6, 1e-3], cv=3,
    ...        random_state=0).fit(X, y).best_estimator_.n_partitions
    3
    """

    _estimator_class = BKRR
    _default_partitioner = BKRR._default_partitioner
    _default_combine = BKRR._default_combine


class KKRRCV(DCKRRCV):
    """Fast (sigma, lambda) search of :class:`~cakernels.KKRR`: K-means
    partitions, averaged predictions.

    Parameters and attributes as :class:`DCKRRCV` (see
    :class:`PartitionedKernelRidgeCV`).

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import KKRRCV
    >>> X, y = make_regression(n_samples=300, n_features=3, random_state=0)
    >>> KKRRCV(n_partitions=3, sigmas=[2, 8], lams=[1e-6, 1e-3], cv=3,
    ...        random_state=0).fit(X, y).best_estimator_.n_partitions
    3
    """

    _estimator_class = KKRR
    _default_partitioner = KKRR._default_partitioner
    _default_combine = KKRR._default_combine
