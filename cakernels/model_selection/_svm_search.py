"""The fast grid search of the partitioned SVMs over C and gamma:
:class:`PartitionedSVCCV` and its front doors CASVCCV, FCFSSVCCV, BKMSVCCV and
CPSVCCV (the search engine of :mod:`._search`)."""

import numbers
import threading
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassifierMixin
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    f1_score,
    get_scorer,
    jaccard_score,
    matthews_corrcoef,
    precision_score,
    recall_score,
)
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.metaestimators import available_if

from .._engine import (
    Partition,
    PartitionedEstimator,
    _bcast_from_root,
    check_weighted_classes,
    global_class_weight,
    global_classes,
    keeps_state_on_failure,
)
from .._kernels import centered_sq_sum, resolve_gamma, scale_gamma, variance_from_moments
from .._solvers.local import solve_binary_svm
from .._solvers.native_svc import NativeKernelSVC
from ..backends import CollectiveError
from ..backends._pool import run_graph
from ..svm import BKMSVC, CASVC, CPSVC, FCFSSVC, PartitionedSVC
from ..svm._partitioned import _SVM_CONSTRAINTS, SOLVERS, _ClassifierInput, _SingleClassModel
from ._results import check_grid
from ._search import (
    _PartitionedSearchCV,
    _refit_check,
    allreduce_parts,
    check_training_rows,
    split_columns,
)

#: solvers that take a warm start (the dual variables of the previous C)
WARM_SOLVERS = ("smo", "asygcd", "pscd")


def _label_scorings():
    """scikit-learn's scorers that depend only on the (true, predicted) label
    pairs, as ``name -> (metric, keyword arguments)``: the search scores them
    from every split's confusion counts summed over the partitions (one
    reduction), with the counts as sample weights, which equals the metric on
    the split's validation rows."""
    out = {"accuracy": (accuracy_score, {}),
           "balanced_accuracy": (balanced_accuracy_score, {}),
           "matthews_corrcoef": (matthews_corrcoef, {})}
    for name, func in (("f1", f1_score), ("precision", precision_score),
                       ("recall", recall_score), ("jaccard", jaccard_score)):
        out[name] = (func, {"average": "binary"})
        for average in ("micro", "macro", "weighted"):
            out[f"{name}_{average}"] = (func, {"pos_label": None, "average": average})
    return out


#: the SVM searches' scorings (scikit-learn's names)
SCORINGS = _label_scorings()


def _check_scoring(scoring, classes):
    """A clear error up front where scikit-learn's scorer would fail on every
    split (``GridSearchCV`` then warns and reports NaN scores): a binary
    scoring (``'f1'``, ``'precision'``...: the positive class is 1) on more
    than two classes, or on classes without 1."""
    if SCORINGS[scoring][1].get("average") != "binary":
        return
    other = ", ".join(f"'{scoring}_{a}'" for a in ("macro", "weighted", "micro"))
    if classes.size > 2:
        raise ValueError(f"scoring={scoring!r} scores the positive class of a binary "
                         f"problem; these data have {classes.size} classes: use {other}")
    if 1 not in classes.tolist():
        raise ValueError(f"scoring={scoring!r} scores the class 1 as positive (scikit-learn's "
                         f"pos_label=1), which is not among the classes "
                         f"{classes.tolist()}: relabel the positive class 1, or use {other}")


def _confusion_score(scoring, classes, counts, weights):
    """The metric ``scoring`` of the label pairs counted in ``counts`` (k x k:
    true class index, predicted class index) with the summed sample weights
    ``weights`` of each pair (the counts decide which labels are present, as
    every validation row does for the scorer); NaN without a row of positive
    weight."""
    true, pred = np.nonzero(counts)
    if true.size == 0 or not np.any(weights[true, pred] > 0):
        return np.nan
    func, kwargs = SCORINGS[scoring]
    return float(func(classes[true], classes[pred], sample_weight=weights[true, pred],
                      **kwargs))


def _check_gammas(values):
    """Validate ``gammas``: positive floats and the strings 'scale' and 'auto'."""
    if isinstance(values, str):
        values = [values]
    if isinstance(values, np.ndarray) and values.ndim != 1:
        # (a 0-d array failed in list(): a TypeError)
        raise ValueError(f"gammas must be a non-empty one-dimensional sequence, got shape "
                         f"{values.shape}")
    values = list(values) if not isinstance(values, numbers.Real) else [values]
    strings = [v for v in values if isinstance(v, str)]
    bad = [v for v in strings if v not in ("scale", "auto")]
    if bad:
        raise ValueError(f"gammas may hold positive numbers, 'scale' and 'auto'; got {bad}")
    if len(set(strings)) != len(strings):
        raise ValueError(f"gammas has repeated values: {values}")
    numbers_ = [v for v in values if not isinstance(v, str)]
    if numbers_:
        check_grid("gammas", numbers_)
    elif not values:
        raise ValueError("gammas must be a non-empty sequence")
    return [str(v) if isinstance(v, str) else float(v) for v in values]  # (not np.str_)


class PartitionedSVCCV(ClassifierMixin, _ClassifierInput, _PartitionedSearchCV):
    """Fast grid search of :class:`~cakernels.PartitionedSVC` over C and gamma.

    Equivalent to ``GridSearchCV(PartitionedSVC(...), {'C': Cs, 'gamma':
    gammas}, cv=cv)`` with the protocol of the KRR search
    (:class:`PartitionedKernelRidgeCV`): the data are partitioned once, on all
    rows; every split trains each partition on its rows of the split's training
    set and predicts the split's validation rows routed by nearest centre.
    For every partition, gamma and split, the Cs are solved in increasing
    order, each from the dual variables of the previous one (a feasible start:
    ``0 <= alpha_i <= C_prev w_i <= C w_i`` and ``y^T alpha = 0`` hold) and,
    for the SMO, its gradient: up to 20% fewer iterations and about the time
    of cold starts on ijcnn1 and a9a with Cs tenfold apart
    (``benchmarks/bench_svm_search.py``).

    Parameters
    ----------
    partitioner : str or partitioner instance, default='random'
        As in :class:`~cakernels.PartitionedSVC`.
    n_partitions : int, default=8
        Number of partitions P.
    Cs : array-like of float, default=(0.1, 1, 10, 100)
        Values of C to try (> 0).
    gammas : array-like of float or {'scale', 'auto'}, default=('scale',)
        Values of gamma to try (numbers > 0: a gamma of 0 is a constant kernel,
        which no search should select); ``'scale'`` and ``'auto'`` are resolved on each
        split's training rows, as a refit on them would.
    cv : int, cross-validation splitter, iterable or None, default=5
        Validation splits, as ``GridSearchCV``'s ``cv`` (None: 5), except that
        an int is a *shuffled* :class:`~sklearn.model_selection.StratifiedKFold`
        (its seed drawn from ``random_state``; see
        :class:`PartitionedKernelRidgeCV`).
    scoring : str or None, default=None
        Score of all validation rows of a split (weighted by their
        ``sample_weight`` when ``fit`` gets one, as ``GridSearchCV`` does
        since scikit-learn 1.7), by scikit-learn's scorer of that name: None
        (accuracy, ``GridSearchCV``'s default), ``'accuracy'``,
        ``'balanced_accuracy'``, ``'matthews_corrcoef'``, or ``'f1'``,
        ``'precision'``, ``'recall'``, ``'jaccard'`` (binary, positive class
        1) and their ``'_micro'``, ``'_macro'`` and ``'_weighted'`` averages.
        Scorers that need decision values (``'roc_auc'``...) are not offered:
        every split would gather the decision values of all rows instead of
        one reduction of label counts; use ``GridSearchCV`` over the estimator.
    warm_start : bool, default=True
        Start every C from the previous C's solution (native solvers; not the
        indefinite sigmoid kernel, and not with a positive ``max_iter``, which
        would stop each C after its own iterations on top of the earlier Cs':
        see Notes).
    refit : bool, default=True
        Refit the best (C, gamma) on all rows as ``best_estimator_``.
    kernel, degree, coef0, tol, cache_size, class_weight, max_iter
        As in :class:`~cakernels.PartitionedSVC` (:class:`sklearn.svm.SVC`'s,
        with -1 or 0 for no limit other than LIBSVM's).
    solver : {'smo', 'asygcd', 'pscd', 'libsvm'}, default='smo'
        Local solver; ``'libsvm'`` solves every C from scratch.
    halo : float, default=0.0
        Halo fraction, as in :class:`~cakernels.PartitionedSVC` (fixed for the
        search; compare halos with ``GridSearchCV`` or one search per value).
    backend, n_jobs, random_state, verbose
        As in :class:`~cakernels.PartitionedSVC`; ``verbose`` shows a progress
        bar over the (partition, gamma) steps.

    Attributes
    ----------
    best_params_ : dict
        ``{'C': ..., 'gamma': ...}``.
    best_score_, best_index_, cv_results_, best_estimator_, refit_time_, scorer_, \
n_splits_
        As in :class:`PartitionedKernelRidgeCV` (candidates in ``GridSearchCV``'s
        order: ``C`` outer, ``gamma`` inner).
    classes_ : ndarray
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        When ``X`` is a DataFrame with string column names.
    partitioner_, centers_, partition_sizes_
        The search's partitioning (of the rows of positive ``sample_weight``).
    fit_stats_ : dict
        ``n_iter`` (solver iterations of the whole search), ``solver``,
        ``warm_start`` (whether the path over ``C`` was warm-started),
        ``partition_seconds``, ``redistribution_seconds``, ``search_seconds``,
        ``n_candidates``, ``partition_sizes``, ``owners``, ``comm`` (with
        ``comm_bytes``, ``comm_messages``), ``backend``, ``n_ranks``.

    See Also
    --------
    CASVCCV, FCFSSVCCV, BKMSVCCV, CPSVCCV : the front doors.

    Notes
    -----
    With ``warm_start=False`` (or ``solver='libsvm'``, ``kernel='sigmoid'``,
    or a positive ``max_iter``) every score equals a refit of the estimator on the
    split's training rows with the same partitions. A warm start converges to
    the same optimum within ``tol``, so the validation predictions of the two
    may differ on a few samples near a decision boundary. The sigmoid kernel
    is never warm-started: it is indefinite, its dual has no unique optimum,
    and a warm start settled elsewhere than a refit (12 of 100 validation
    rows in a test).

    Threads. Every (gamma, split) path over the Cs is a task on the worker's
    threads (:func:`~cakernels.backends._pool.run_graph`), its solves and
    predictions on one thread: the paths run concurrently instead of one
    solver team at a time (a partition's solves are mostly too small for a
    team), and the scores do not depend on the thread count (the native SMO
    gives the same bits on any team; Asy-GCD on one thread is deterministic).
    A worker then holds up to one solver cache of ``cache_size`` per thread, as
    the ``'threads'`` backend with as many workers does.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import CASVCCV
    >>> X, y = make_classification(n_samples=400, random_state=0)
    >>> search = CASVCCV(n_partitions=2, Cs=[0.1, 1, 10], gammas=[0.01, 0.1], cv=3,
    ...                  random_state=0).fit(X, y)
    >>> sorted(search.best_params_)
    ['C', 'gamma']
    >>> search.predict(X[:3]).shape
    (3,)
    """

    _parameter_constraints = {
        **PartitionedEstimator._parameter_constraints,
        **{k: v for k, v in _SVM_CONSTRAINTS.items() if k not in ("C", "gamma")},
        "partitioner": [str, object],
        "Cs": ["array-like", Interval(numbers.Real, 0.0, None, closed="neither")],
        "gammas": ["array-like", str, Interval(numbers.Real, 0.0, None, closed="neither")],
        "cv": ["cv_object"],
        "scoring": [StrOptions(set(SCORINGS)), None],
        "warm_start": ["boolean"],
        "refit": ["boolean"],
        "solver": [StrOptions(set(SOLVERS))],
    }
    _estimator_class = PartitionedSVC
    _default_partitioner = "random"

    def __init__(self, partitioner="random", n_partitions=8, *, Cs=(0.1, 1.0, 10.0, 100.0),
                 gammas=("scale",), cv=5, scoring=None, warm_start=True, refit=True,
                 kernel="rbf", degree=3, coef0=0.0, tol=1e-3, cache_size=200,
                 class_weight=None, max_iter=-1, solver="smo", halo=0.0, backend="serial",
                 n_jobs=None, random_state=None, verbose=False):
        self.partitioner = partitioner
        self.n_partitions = n_partitions
        self.halo = halo
        self.Cs = Cs
        self.gammas = gammas
        self.cv = cv
        self.scoring = scoring
        self.warm_start = warm_start
        self.refit = refit
        self.kernel = kernel
        self.degree = degree
        self.coef0 = coef0
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.solver = solver
        self.backend = backend
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _make_estimator(self, C, gamma):
        names = ("n_partitions", "kernel", "degree", "coef0", "tol", "cache_size",
                 "class_weight", "max_iter", "solver", "halo", "backend", "n_jobs",
                 "random_state", "verbose")
        params = {k: getattr(self, k) for k in names}
        if self._estimator_class is PartitionedSVC:
            params["partitioner"] = self.partitioner
        return self._estimator_class(C=float(C), gamma=gamma, **params)

    @keeps_state_on_failure
    def fit(self, X, y, sample_weight=None, *, groups=None):
        """Search the (C, gamma) grid, then refit the best on all rows.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training samples (never modified).
        y : array-like of shape (n_samples,)
            Class labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample weights (rescale C per sample), for the search and the
            refit, and the weights of the validation rows in their scores (as
            ``GridSearchCV`` passes them to its scorer since scikit-learn 1.7;
            1.6 scored unweighted). As in the estimators' fit, rows of weight 0
            are left out of the partitions and never train (nor count in a
            score); they count in the splits, in ``gamma='scale'`` and in
            ``class_weight='balanced'``.
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

    @available_if(lambda self: _refit_check(self, "decision_function"))
    def decision_function(self, X):
        """Decision values of ``best_estimator_`` (needs ``refit=True``), as
        ``GridSearchCV.decision_function``: for ``roc_auc`` scoring,
        ``cross_val_predict(method='decision_function')`` and
        ``CalibratedClassifierCV`` on the search.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        decision : ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        return self._best().decision_function(X)

    # the search's scorer, not ClassifierMixin.score (first in the bases: accuracy)
    score = _PartitionedSearchCV.score

    # ------------------------------------------------------------------ engine hooks
    def _grid(self):
        return {"Cs": check_grid("Cs", self.Cs), "gammas": _check_gammas(self.gammas)}

    def _prepare(self, s, X, y, w, index, masks):
        """Class indices and weights as columns; the gammas and class weights of
        every split, resolved on its training rows as a refit would."""
        self.classes_ = global_classes(s, y)
        y_idx = np.searchsorted(self.classes_, y).astype(np.int64)
        # the estimators' errors (every rank): class_weight, and a class without a
        # sample of positive weight (before any split or partition is drawn)
        Cs = check_grid("Cs", self.Cs)
        n_zero = check_weighted_classes(s, self.classes_, y_idx, w, global_class_weight(
            s, self.class_weight, self.classes_, y_idx), C=float(np.max(Cs)),
            C_min=float(np.min(Cs)))
        self.scorer_ = get_scorer(self.scoring or "accuracy")
        try:
            _check_scoring(self.scoring or "accuracy", self.classes_)
        except ValueError as exc:  # the same global classes on every rank: its error
            raise (CollectiveError if s.size > 1 else ValueError)(str(exc)) from None
        n_splits = masks.shape[1] // 2
        train = masks[:, :n_splits].astype(bool)
        k = self.classes_.size
        # per split: class counts and the moments of X (for 'scale'), summed over ranks
        counts = np.stack([np.bincount(y_idx[train[:, f]], minlength=k)
                           for f in range(n_splits)]).astype(np.float64)
        moments = np.zeros((n_splits, 3))
        sharded_scale = s.size > 1 and s.sharded and "scale" in self._grid()["gammas"]
        for f in range(n_splits if sharded_scale else 0):  # (needed there only)
            Xf = X[train[:, f]]
            with np.errstate(over="ignore", invalid="ignore"):  # (scale_gamma's error)
                sq = (Xf.multiply(Xf).sum() if sp.issparse(Xf)
                      else np.einsum("ij,ij->", Xf, Xf))
                moments[f] = (Xf.sum(), sq, Xf.shape[0] * Xf.shape[1])
        def exact_gammas():
            """SVC's own formula on every split's training rows: only 'scale' reads
            them, once per split (every gamma of the grid copied each split's rows)."""
            scaled = {}

            def one(g, f):
                if not (isinstance(g, str) and g == "scale"):
                    return resolve_gamma(g, X[:1])  # (a number, or 'auto': no rows read)
                if f not in scaled:
                    scaled[f] = resolve_gamma(g, X[train[:, f]])
                return scaled[f]

            return [[one(g, f) for f in range(n_splits)] for g in self._grid()["gammas"]]

        exact = None
        if s.size == 1:  # every row here: SVC's own formula
            exact = exact_gammas()
        if s.size > 1:
            counts, moments = allreduce_parts(s.comm, [counts, moments])
            if not s.sharded:  # every row on rank 0: SVC's own formula, rank 0's error
                exact = _bcast_from_root(s.comm, exact_gammas)  # (every rank's: no hang)
        gammas = np.zeros((len(self._grid()["gammas"]), n_splits))
        if exact is None and "scale" in self._grid()["gammas"]:  # sharded: from moments
            with np.errstate(over="ignore", invalid="ignore"):
                var = variance_from_moments(moments, lambda splits, means: s.comm.Allreduce(
                    np.array([centered_sq_sum(X[train[:, f]], mu)
                              for f, mu in zip(splits, means)])))
        for a, g in enumerate(self._grid()["gammas"]):
            for f in range(n_splits):
                if exact is not None:
                    gammas[a, f] = exact[a][f]
                elif g == "scale":
                    try:
                        gammas[a, f] = scale_gamma(X.shape[1], var[f])
                    except ValueError as exc:  # the same reduced moments on every rank
                        raise CollectiveError(str(exc)) from None
                else:
                    gammas[a, f] = resolve_gamma(g, X[:1])
        class_weights = [self._class_weight(counts[f]) for f in range(n_splits)]
        cols = np.column_stack([y_idx.astype(np.float64), w])
        # rows of zero weight validate but are not partitioned (as in the fit)
        return cols, {"placement_y": y_idx, "gammas": gammas, "class_weights": class_weights,
                      "n_zero_weight": n_zero}

    def _class_weight(self, counts):
        """``class_weight`` as a weight per class index, for one split's counts
        (``'balanced'``: n / (n_classes * count), as scikit-learn's)."""
        k = self.classes_.size
        if self.class_weight is None:
            return np.ones(k)
        if isinstance(self.class_weight, str):
            present = counts > 0
            out = np.ones(k)
            out[present] = counts.sum() / (present.sum() * counts[present])
            return out
        return np.array([float(self.class_weight.get(c, 1.0)) for c in self.classes_.tolist()])

    def _make_job(self, s, grid, n_splits, loo, facts, n_cols, n_partitions):
        return _SVMSearchJob(self, grid, n_splits, facts, s.threads)


class _SVMSearchJob:
    """Per-partition work of the SVM search: every gamma and split, the Cs in
    increasing order (warm started), nearest-centre validation."""

    progress_label = "partition, gamma"

    def __init__(self, search, grid, n_splits, facts, n_threads):
        self.search = search
        self.Cs = grid["Cs"]
        self.gamma_values = grid["gammas"]
        self.gammas = facts["gammas"]  # (n_gammas, n_splits), resolved
        self.class_weights = facts["class_weights"]
        self.n_splits = int(n_splits)
        self.n_threads = int(n_threads)
        self.n_steps = len(self.gamma_values)
        self.scoring = search.scoring or "accuracy"
        # accuracy needs (correct, total) per split; the other scorings the
        # confusion counts (true class x predicted class)
        # confusion counts (true class x predicted class), then their summed weights
        self.n_counts = 2 if self.scoring == "accuracy" else 2 * search.classes_.size ** 2
        # the sigmoid kernel is indefinite: its dual has several stationary points,
        # and a warm start from the previous C may settle in another than a refit's
        # an iteration limit stops every C after max_iter iterations of its own,
        # on top of the earlier Cs' when warm-started: the scores would describe
        # solutions a refit with that limit never reaches
        self.warm = (bool(search.warm_start) and search.solver in WARM_SOLVERS
                     and search.kernel != "sigmoid" and search.max_iter <= 0)
        self.seed = check_random_state(search.random_state).randint(np.iinfo(np.int32).max)
        # GridSearchCV's order: ParameterGrid sorts the keys, 'C' outer, 'gamma' inner
        self.order = [(a, c) for c in range(self.Cs.size) for a in range(len(self.gamma_values))]
        self.params = [{"C": float(self.Cs[c]), "gamma": self.gamma_values[a]}
                       for a, c in self.order]

    def stats(self, n_iter):
        return {"solver": self.search.solver, "warm_start": self.warm,
                "n_iter": int(n_iter)}

    def run(self, p, q, progress):
        S, nC = self.n_splits, self.Cs.size
        Xq, rows_q, _ = q
        tr, _ = split_columns(p.y, 2, S)
        _, val = split_columns(rows_q, 2, S)
        y_idx, w = p.y[:, 0].astype(np.int64), p.y[:, 1]
        yq = rows_q[:, 0].astype(np.int64)
        wq = rows_q[:, 1]  # the validation rows' weights (ones without sample_weight)
        # per (gamma, C, split): correct, total (or the confusion counts); seconds
        # fit, score; iterations
        out = np.zeros((len(self.gamma_values), nC, S, self.n_counts))
        times = np.zeros((len(self.gamma_values), nC, S, 2))
        classes = self.search.classes_
        # (the splits where it predicts rows; the others' went elsewhere: _query_rows)
        check_training_rows(p.j, tr, self.fold_hint, val.any(axis=0))
        order = np.argsort(self.Cs, kind="stable")  # the warm-start path: increasing C
        n_gam = len(self.gamma_values)
        its = np.zeros((n_gam, S), dtype=np.int64)
        left = [S] * n_gam
        lock = threading.Lock()

        def task(i):  # the C path of gamma a in split f, on one thread
            a, f = divmod(i, S)
            T = np.flatnonzero(tr[:, f])
            V = np.flatnonzero(val[:, f])
            # (no training row in split f: its validation rows went to another
            # partition, see _query_rows; nothing to train)
            for c, model, it, secs in (self._path(p, T, y_idx, w, a, f, order) if T.size
                                       else ()):
                its[a, f] += it
                times[a, c, f, 0] += secs
                if V.size:
                    t = time.perf_counter()
                    est = self._estimator(a, f, c)
                    pred = est._local_predict(model, Xq[V], 1)
                    if self.n_counts == 2:
                        out[a, c, f, 0] += np.sum(wq[V][pred == classes[yq[V]]])
                        out[a, c, f, 1] += np.sum(wq[V])
                    else:
                        k2 = classes.size ** 2
                        cell = yq[V] * classes.size + np.searchsorted(classes, pred)
                        out[a, c, f, :k2] += np.bincount(cell, minlength=k2)
                        out[a, c, f, k2:] += np.bincount(cell, weights=wq[V], minlength=k2)
                    times[a, c, f, 1] += time.perf_counter() - t
            with lock:
                left[a] -= 1
                done = left[a] == 0
            if done:
                progress.tick()
            return None

        n_tasks = n_gam * S
        run_graph(task, [[] for _ in range(n_tasks)], list(range(n_tasks)), self.n_threads)
        return out, times, int(its.sum())

    def _estimator(self, a, f, c):
        """An unfitted estimator with the candidate's parameters and the facts of
        split ``f`` (its local fit and prediction are the estimator's own)."""
        est = self.search._make_estimator(self.Cs[c], self.gammas[a, f])
        est.classes_ = self.search.classes_
        est.gamma_ = float(self.gammas[a, f])
        est._fit_kernel = est._kernel_params()
        return est

    def _path(self, p, T, y_idx, w, a, f, order):
        """``(c, model, n_iter, seconds)`` for every C of the grid on the rows
        ``T`` of partition ``p`` in split ``f``."""
        classes = self.search.classes_
        cw = self.class_weights[f]
        if not self.warm:
            for c in order:
                est = self._estimator(a, f, c)
                ctx = {"class_weight": None if self.search.class_weight is None
                       else dict(zip(classes.tolist(), cw.tolist())),
                       "n_threads": 1, "seed": self.seed, "kernel": est._fit_kernel}
                t = time.perf_counter()
                model, it, _ = est._fit_partition(
                    Partition(p.j, p.X[T], y_idx[T], w[T], p.index[T]), ctx)
                yield c, model, it, time.perf_counter() - t
            return
        labels = np.unique(y_idx[T])
        if labels.size == 1:
            for c in order:
                yield c, _SingleClassModel(classes[labels[0]]), 0, 0.0
            return
        s = self.search
        kp = {"kernel": s.kernel, "gamma": float(self.gammas[a, f]), "degree": s.degree,
              "coef0": s.coef0}
        pairs = [(i, j) for ii, i in enumerate(labels) for j in labels[ii + 1:]]
        problems = []
        for i, j in pairs:  # SVC's one-vs-one order; +1 for the pair's second class
            members = T[(y_idx[T] == i) | (y_idx[T] == j)]
            y_pm = np.where(y_idx[members] == j, 1.0, -1.0)
            problems.append((members, y_pm, w[members] * cw[y_idx[members]], None, None))
        for c in order:
            t = time.perf_counter()
            models, its, objs, support = [], 0, [], set()
            for n, (members, y_pm, weight, alpha0, grad0) in enumerate(problems):
                Xm = p.X[members]
                # the SMO starts from the previous C's alpha and its gradient (the
                # gradient Q alpha - 1 does not depend on C: computing it again
                # from alpha's kernel columns cost what the warm start saved)
                sol = solve_binary_svm(Xm, y_pm, float(self.Cs[c]), kernel_params=kp,
                                       solver=s.solver, sample_weight=weight, tol=s.tol,
                                       max_iter=s.max_iter, cache_size=s.cache_size,
                                       n_threads=1, random_state=self.seed,
                                       alpha0=alpha0, grad0=grad0)
                problems[n] = (members, y_pm, weight, sol.alpha, sol.grad)
                sv = sol.support
                sv_X = Xm[sv] if sp.issparse(Xm) else np.ascontiguousarray(Xm[sv])
                models.append((sv_X, sol.dual_coef[None, :], np.array([sol.intercept])))
                its += sol.n_iter
                objs.append(sol.objective)
                support.update(members[sv].tolist())
            model = NativeKernelSVC.from_models(classes[labels], kp, models,
                                                n_iter=[its], objectives=objs,
                                                support=sorted(support), solver=s.solver)
            yield c, model, its, time.perf_counter() - t

    def combine(self, comm, results, queries):
        shape = (len(self.gamma_values), self.Cs.size, self.n_splits)
        out, times = np.zeros(shape + (self.n_counts,)), np.zeros(shape + (2,))
        n_iter = np.zeros(1)
        for o, t, it in results:
            out += o
            times += t
            n_iter += it
        allreduce_parts(comm, [out, times, n_iter])  # the one reduction of the search
        weight = out[..., 1] if self.n_counts == 2 else out[..., self.n_counts // 2:].sum(-1)
        # splits whose validation rows all weigh 0: NaN for every candidate
        self.empty_splits = np.flatnonzero(np.all(weight <= 0, axis=(0, 1)))
        if self.n_counts == 2:
            with np.errstate(invalid="ignore", divide="ignore"):
                score = out[..., 0] / out[..., 1]
        else:
            classes, k = self.search.classes_, self.search.classes_.size
            score = np.array([_confusion_score(self.scoring, classes, counts[:k * k].reshape(k, k),
                                               counts[k * k:].reshape(k, k))
                              for counts in out.reshape(-1, 2 * k * k)]).reshape(shape)
        pick = lambda arr: np.array([arr[a, c] for a, c in self.order])  # noqa: E731
        return pick(score), pick(times[..., 0]), pick(times[..., 1]), int(n_iter[0])


# --------------------------------------------------------------------------- front doors


class CASVCCV(PartitionedSVCCV):
    """Fast (C, gamma) search of :class:`~cakernels.CASVC`: random balanced
    partitions, nearest-centre prediction, warm-started path over C.

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    Cs, gammas, cv, scoring, warm_start, refit, kernel, degree, coef0, tol, \
cache_size, class_weight, max_iter, solver, halo, backend, n_jobs, random_state, verbose
        See :class:`PartitionedSVCCV`.

    Attributes
    ----------
    best_params_, best_score_, best_index_, cv_results_, best_estimator_, refit_time_, \
scorer_, n_splits_, classes_, partitioner_, centers_, partition_sizes_, fit_stats_, \
n_features_in_, feature_names_in_
        See :class:`PartitionedSVCCV`.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import CASVCCV
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> CASVCCV(n_partitions=2, Cs=[1, 10], gammas=[0.1], cv=3,
    ...         random_state=0).fit(X, y).best_estimator_.n_partitions
    2
    """

    _parameter_constraints = {k: v for k, v in PartitionedSVCCV._parameter_constraints.items()
                              if k != "partitioner"}
    _estimator_class = CASVC
    _default_partitioner = CASVC._default_partitioner

    def __init__(self, n_partitions=8, *, Cs=(0.1, 1.0, 10.0, 100.0), gammas=("scale",), cv=5,
                 scoring=None, warm_start=True, refit=True, kernel="rbf", degree=3,
                 coef0=0.0, tol=1e-3, cache_size=200, class_weight=None, max_iter=-1,
                 solver="smo", halo=0.0, backend="serial", n_jobs=None, random_state=None,
                 verbose=False):
        self.n_partitions = n_partitions
        self.halo = halo
        self.Cs = Cs
        self.gammas = gammas
        self.cv = cv
        self.scoring = scoring
        self.warm_start = warm_start
        self.refit = refit
        self.kernel = kernel
        self.degree = degree
        self.coef0 = coef0
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.solver = solver
        self.backend = backend
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose


class FCFSSVCCV(CASVCCV):
    """Fast (C, gamma) search of :class:`~cakernels.FCFSSVC` (FCFS partitions).

    Parameters and attributes as :class:`CASVCCV`.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import FCFSSVCCV
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> FCFSSVCCV(n_partitions=2, Cs=[1, 10], cv=3, random_state=0).fit(X, y).n_splits_
    3
    """

    _estimator_class = FCFSSVC
    _default_partitioner = FCFSSVC._default_partitioner


class BKMSVCCV(CASVCCV):
    """Fast (C, gamma) search of :class:`~cakernels.BKMSVC` (balanced K-means
    partitions).

    Parameters and attributes as :class:`CASVCCV`.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import BKMSVCCV
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> BKMSVCCV(n_partitions=2, Cs=[1, 10], cv=3, random_state=0).fit(X, y).n_splits_
    3
    """

    _estimator_class = BKMSVC
    _default_partitioner = BKMSVC._default_partitioner


class CPSVCCV(CASVCCV):
    """Fast (C, gamma) search of :class:`~cakernels.CPSVC` (K-means partitions).

    Parameters and attributes as :class:`CASVCCV`.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import CPSVCCV
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> CPSVCCV(n_partitions=2, Cs=[1, 10], cv=3, random_state=0).fit(X, y).n_splits_
    3
    """

    _estimator_class = CPSVC
    _default_partitioner = CPSVC._default_partitioner

