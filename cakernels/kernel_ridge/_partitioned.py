"""Partitioned kernel ridge regression: PartitionedKernelRidge and the front
doors DCKRR, KKRR, KKRR2, BKRR and BKRR2 (see :mod:`cakernels.kernel_ridge`)."""

import numbers

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .. import _memory
from .._engine import (
    PartitionedEstimator,
    check_predict_params,
    count_zero_weights,
    drop_zero_weight_rows,
    keeps_state_on_failure,
    validate_params_for,
)
from .._kernels import KERNELS, canonical_rows, check_magnitude, sigma_to_gamma
from .._params import Count
from .._solvers.krr import _LocalKRR
from .._solvers.local import solve_kernel_ridge

#: peak memory of one partition's solve in units of its m x m float64 kernel matrix
#: (measured: 1.6 for m = 6,000; the fallback when the Cholesky fails rebuilds it)
PARTITION_COPIES = 2



def _partition_memory_error(m, concurrent, node_need=None, ranks=1, copies=PARTITION_COPIES,
                            work="a partition"):
    """The message refusing partitions of ``m`` rows (``concurrent`` solved at
    once by this process, ``node_need`` bytes by the ``ranks`` of its node), or
    None when they fit in ``MEMORY_FRACTION`` of the node's available memory (this
    process's within its address space, ``ulimit -v``); ``copies`` m x m float64
    matrices per solve (``work`` names the solve)."""
    avail, room = _memory.available_bytes(), _memory.process_room()
    need = copies * 8.0 * m * m * concurrent
    total = need if node_need is None else max(need, float(node_need))
    share = None if avail is None else _memory.MEMORY_FRACTION * avail
    own = None if room is None else _memory.MEMORY_FRACTION * room
    if (share is None or total <= share) and (own is None or need <= own):
        return None
    what = (f"{work} of {m:,} rows needs about {_memory.fmt_bytes(need)} "
            f"({copies:.3g} copies of its {m:,} x {m:,} kernel matrix, 8 m^2 bytes"
            + (f", for each of {concurrent} partitions solved at once"
               if concurrent > 1 else ""))
    fewer = ("use more partitions (m = n / P), fewer samples"
             + (", or fewer workers (n_jobs)" if concurrent > 1 else ""))
    if share is None or total <= share:  # this process's address space
        return (f"{what}), more than {_memory.fmt_bytes(own)} ({_memory.MEMORY_FRACTION:.0%} "
                f"of the {_memory.fmt_bytes(room)} of address space this process may still "
                f"map under its limit, ulimit -v): {fewer}, or raise the limit")
    whose = f"{_memory.MEMORY_FRACTION:.0%} of the {_memory.fmt_bytes(avail)} available"
    on_node = total > need and ranks > 1
    return (what
            + (f"; the {ranks} ranks of this node solve at the same time: "
               f"{_memory.fmt_bytes(total)} together" if on_node else "")
            + f"), more than {_memory.fmt_bytes(share)} ({whose}): {fewer}"
            + (", or fewer ranks per node" if on_node else ""))


def check_solve_memory(comm, sizes, concurrent, copies=PARTITION_COPIES, work="a partition"):
    """Before the rows move (collective): refuse the work when this rank's
    ``concurrent`` largest partitions (``sizes``: this rank's, halo included), of
    ``copies`` m x m float64 matrices each, added up over the ranks that share its
    node (they work at the same time, from the same memory), exceed
    ``MEMORY_FRACTION`` of the node's available memory. Every rank raises the same
    error."""
    m = int(np.max(sizes)) if np.size(sizes) else 0
    need = copies * 8.0 * m * m * concurrent
    node_need, ranks = need, 1
    mpi_comm = getattr(comm, "comm", None)
    if comm.size > 1 and mpi_comm is not None:
        from mpi4py import MPI

        node = mpi_comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            node_need, ranks = float(node.allreduce(need)), node.Get_size()
        finally:
            node.Free()
    comm.agree(_partition_memory_error(m, concurrent, node_need, ranks, copies, work)
               if m else None)


class PartitionedKernelRidge(RegressorMixin, PartitionedEstimator):
    """Partitioned kernel ridge regression with a choice of partitioner and combiner.

    The training set is split into ``n_partitions`` parts; every part solves
    its own kernel ridge problem ``(K + lam * m * I) alpha = y`` (``m`` the
    part's size) independently; predictions either average all local models
    or use the model of the nearest partition centre. The named classes
    :class:`DCKRR`, :class:`KKRR`, :class:`KKRR2`, :class:`BKRR` and
    :class:`BKRR2` fix both choices.

    Parameters
    ----------
    partitioner : str or partitioner instance, default='kbalance'
        ``'random'``, ``'kmeans'``, ``'kbalance'``, ``'fcfs'``, ``'bkm'`` or
        an object from :mod:`cakernels.partition` (cloned at fit; its own
        ``n_partitions`` and ``random_state`` are used, and its ``halo``
        unless the estimator's ``halo`` is positive).
    combine : {'nearest', 'average', 'vote'}, default='nearest'
        Prediction by the nearest centre's model, or the mean of all models,
        or (soft routing, beyond the reference; README "Soft routing") the
        mean of the models of the ``n_voters`` nearest centres weighted by
        the inverse squared distance to each centre.
    n_partitions : int, default=8
        Number of partitions P (ignored when ``partitioner`` is an instance).
    sigma : float, default=1.0
        Width of the Gaussian kernel ``exp(-||x - x'||^2 / (2 sigma^2))``.
        For the polynomial and sigmoid kernels ``1 / (2 sigma^2)`` is the
        scale ``a`` of Table 3.1.
    lam : float, default=1e-4
        Ridge parameter lambda; every partition adds ``lam * m`` to the
        diagonal, as in eq. (3.6) with its own size ``m`` (the boxes of
        Algorithms 8, 10 and 11; chapter 3's prose for DC-KRR writes
        ``lam * n``; ``lam * sum(sample_weight)`` when weighted).
    kernel : {'rbf', 'linear', 'poly', 'sigmoid'}, default='rbf'
        Kernel (Table 3.1).
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Term ``r`` of the polynomial and sigmoid kernels.
    halo : float, default=0.0
        Halo partitions (beyond the reference; README "Halo partitions"):
        every partition also trains on the ``round(halo * m / P)`` samples of
        the other partitions nearest to its border (proportional to its size
        for unbalanced K-means partitions), and its ``m`` (the ridge shift
        ``lam * m``) counts them. Predictions by the nearest centre stay with
        the owner; averaging averages as before. ``0`` is the reference's
        method, bit for bit; a halo multiplies the Cholesky's work by
        ``(1 + halo)^3`` and the kernel matrix by ``(1 + halo)^2``.
    n_voters : int, default=3
        Models per sample when ``combine='vote'`` (more than P: all of them).
    backend : {'serial', 'threads', 'mpi'} or Backend, default='serial'
        How the independent partitions are run (see
        :mod:`cakernels.backends`).
    n_jobs : int, default=None
        Workers of the ``'threads'`` backend (None: every core).
    random_state : int, RandomState instance or None, default=None
        Seed of the partitioner.
    verbose : bool, default=False
        Progress bar over the partitions.

    Attributes
    ----------
    partitioner_ : partitioner
        The fitted partitioner; ``partitioner_.n_partitions_`` is the number
        of partitions (``n_partitions``, or fewer when the data have fewer
        distinct rows, e.g. ``partitioner='kmeans'`` on data with duplicates).
    centers_ : ndarray of shape (partitioner_.n_partitions_, n_features)
        Partition centres.
    partition_sizes_ : ndarray of shape (partitioner_.n_partitions_,)
        Training samples per partition.
    estimators_ : list
        The local models (training samples ``X`` and coefficients ``alpha``).
    fit_stats_ : dict
        ``partition_seconds``, per-partition ``solve_seconds``, ``n_iter``
        (1 per direct solve), ``n_support`` (the partition's training rows,
        its halo included: every one carries a coefficient), ``comm_bytes``,
        ``comm_messages``, ``n_ranks``, ``n_workers`` and
        ``threads_per_worker``, as :class:`~cakernels.svm.PartitionedSVC`'s.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings (a pandas DataFrame); ``predict``
        then warns on input without names and refuses other names, as
        scikit-learn's estimators do.

    See Also
    --------
    oracle_score : the BKRR3/KKRR3 error lower bound.

    Notes
    -----
    Algorithms 8 (DC-KRR) and 10 (BKRR2) of the reference, with the
    hyper-parameter search loop left to
    :class:`~sklearn.model_selection.GridSearchCV`. If a regularised kernel
    matrix is not numerically positive definite the least-squares solution
    is used and a :class:`scipy.linalg.LinAlgWarning` is raised.

    There is no intercept (as in the reference and
    :class:`~sklearn.kernel_ridge.KernelRidge`): away from its training rows
    a model predicts 0, so centre (or standardize) targets whose mean is far
    from 0, e.g. ``TransformedTargetRegressor(BKRR2(),
    transformer=StandardScaler())`` from :mod:`sklearn.compose`.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import PartitionedKernelRidge
    >>> X, y = make_regression(n_samples=300, n_features=4, noise=1, random_state=0)
    >>> reg = PartitionedKernelRidge(combine="average", n_partitions=3, sigma=3.0,
    ...                              random_state=0).fit(X, y)
    >>> reg.partition_sizes_
    array([100, 100, 100])
    """

    _parameter_constraints = {
        **PartitionedEstimator._parameter_constraints,
        "partitioner": [str, object],
        "combine": [StrOptions({"nearest", "average", "vote"})],
        "n_voters": [Count(1)],
        "sigma": [Interval(numbers.Real, 0.0, None, closed="neither")],
        "lam": [Interval(numbers.Real, 0.0, None, closed="left")],
        "kernel": [StrOptions(set(KERNELS))],
        "degree": [Count(0)],
        "coef0": [Interval(numbers.Real, None, None, closed="neither")],
    }
    _default_partitioner = "kbalance"
    _default_combine = "nearest"

    def __init__(self, partitioner="kbalance", combine="nearest", n_partitions=8, *,
                 sigma=1.0, lam=1e-4, kernel="rbf", degree=3, coef0=1.0, halo=0.0,
                 n_voters=3, backend="serial", n_jobs=None, random_state=None, verbose=False):
        self.partitioner = partitioner
        self.combine = combine
        self.n_voters = n_voters
        self.n_partitions = n_partitions
        self.halo = halo
        self.sigma = sigma
        self.lam = lam
        self.kernel = kernel
        self.degree = degree
        self.coef0 = coef0
        self.backend = backend
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _kernel_params(self, n_threads=1):
        return {"kernel": self.kernel, "gamma": sigma_to_gamma(self.sigma),
                "degree": self.degree, "coef0": self.coef0, "n_threads": n_threads}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    @property
    def _combine_mode(self):
        return getattr(self, "combine", self._default_combine)

    def _routes_by_centre(self):
        return self._combine_mode != "average"

    def _n_voters(self):
        if self._combine_mode != "vote":
            return 1
        return min(self.n_voters, len(self.estimators_))

    @keeps_state_on_failure
    def fit(self, X, y, sample_weight=None):
        """Partition the training set and solve one kernel ridge problem per partition.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training samples; float32 and non-contiguous input are copied to
            float64, never modified.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the squared errors: every partition solves
            ``min (1/sum w) sum w_i (y_i - f(x_i))^2 + lam ||f||^2`` over its
            rows (with one partition, :class:`sklearn.kernel_ridge.KernelRidge`
            with ``alpha = lam * sum(w)`` and the same weights; weights of one
            are the unweighted fit, bit for bit). Rows of weight 0 take no part:
            they are left out before partitioning.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        validate_params_for(self)  # under MPI: raised on every rank
        with self._session() as s:
            X, y, w, index = self._collect(s, X, y, sample_weight)
            if w is not None and count_zero_weights(s, w):
                X, y, w, index, _ = drop_zero_weight_rows(s, X, y, w, index,
                                                         self._partition_count())
            ctx = {"params": self._kernel_params(n_threads=s.threads)}
            self._fit_partitioned(s, X, y, w, index, ctx)
        return self

    # ------------------------------------------------------------------ engine hooks
    _cost_exponent = 3.0  # a Cholesky of m rows

    def _validate_local(self, X, y, sample_weight):
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, order="C",
                             multi_output=True, y_numeric=True)
        X = canonical_rows(X)
        w = None
        if sample_weight is not None:
            w = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                     ensure_non_negative=True)
        return X, np.asarray(y, dtype=np.float64), w

    def _y_meta(self, y):
        return {"tail": tuple(y.shape[1:])}

    def _merge_y_meta(self, metas):
        odd = [r for r, m in enumerate(metas) if m["tail"] != metas[0]["tail"]]
        if odd:
            def shape(tail):
                return "one output (1-D y)" if not tail else f"y of shape (n_local, {tail[0]})"

            return (f"the shards' targets have different shapes: rank 0 passes "
                    f"{shape(metas[0]['tail'])}, rank {odd[0]} {shape(metas[odd[0]]['tail'])}")
        return None

    def _empty_y(self, meta):
        return np.zeros((0,) + tuple(meta["tail"]))

    def _fit_partition(self, p, ctx):
        self._check_partition_memory(p.X.shape[0], ctx.get("concurrent", 1))
        sol = solve_kernel_ridge(p.X, p.y, self.lam, kernel_params=ctx["params"],
                                 index=p.index, sample_weight=p.sample_weight,
                                 report=ctx["solve_reports"])
        return _LocalKRR(p.X, sol.alpha, ctx["params"]), 1, p.X.shape[0]

    @staticmethod
    def _warn_solve_reports(reports, n_partitions):
        """One LinAlgWarning per kind for every partition's ill-conditioned or
        singular system (it was one per partition, each with its own numbers:
        27 lines for one search)."""
        from .._solvers.krr import warn_solves

        warn_solves(reports, n_partitions, stacklevel=6)

    @staticmethod
    def _check_partition_memory(m, concurrent):
        """Refuse a partition of ``m`` rows whose kernel matrices, for the
        ``concurrent`` solves of this process, exceed ``MEMORY_FRACTION`` of the
        node's available memory, before anything is allocated (a kill
        otherwise). The fit checks every rank's largest solves first, the ranks
        of a node added up (:meth:`_check_solve_memory`); this is the check of
        one solve."""
        error = _partition_memory_error(m, concurrent)
        if error is not None:
            raise ValueError(error)

    def _check_solve_memory(self, comm, sizes, concurrent):
        """Before the rows move (collective): :func:`check_solve_memory` of this
        rank's ``concurrent`` largest partitions (``sizes``, halo included)."""
        check_solve_memory(comm, sizes, concurrent)

    # ------------------------------------------------------------------ predict
    def _check_X(self, X, allow_empty=False):
        # a rank of a collective prediction may hold no test row
        check_is_fitted(self)
        check_predict_params(self)
        X = canonical_rows(validate_data(self, X, accept_sparse="csr", dtype=np.float64,
                                     order="C", reset=False,
                                     ensure_min_samples=0 if allow_empty else 1))
        if X.shape[0]:  # as fit: an overflowing row would give a silent constant
            check_magnitude(X)
        return self._as_fit_format(X)

    def local_predictions(self, X):
        """Predictions of every local model on every sample.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        Y : ndarray of shape (P, n_samples) or (P, n_samples, n_targets)
            ``P = partitioner_.n_partitions_``.
        """
        return self._local_predictions(self._check_X(X))

    def _local_predictions(self, X):
        with self._local_session(X.shape[0], self._stored_rows()) as s:
            return np.stack(s.map(lambda est: est.predict(X, n_threads=s.threads),
                                  self.estimators_, "predict partitions"))

    def predict(self, X):
        """Predict with the nearest partition's model, or the mean of all models
        (or of the nearest ones, ``combine='vote'``).

        Local on every rank (each holds every model); for a test set sharded
        over MPI ranks see :meth:`predict_sharded`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        """
        return self._predict(X)

    def _predict(self, X, session=None, checked=False):
        if not checked:
            X = self._check_X(X, allow_empty=session is not None)
        out = np.empty((X.shape[0],) + self.estimators_[0].alpha.shape[1:])
        if self._combine_mode == "average":
            # every rank evaluates all models on its own rows: nothing to route
            return self._local_predictions(X).mean(axis=0) if X.shape[0] else out
        return self._apply_routed(
            X, lambda t: lambda est, Xg: est.predict(Xg, n_threads=t), out, session=session)


def _front_door_init(self, n_partitions, sigma, lam, kernel, degree, coef0, halo, backend,
                     n_jobs, random_state, verbose):
    self.n_partitions = n_partitions
    self.halo = halo
    self.sigma = sigma
    self.lam = lam
    self.kernel = kernel
    self.degree = degree
    self.coef0 = coef0
    self.backend = backend
    self.n_jobs = n_jobs
    self.random_state = random_state
    self.verbose = verbose


_FRONT_CONSTRAINTS = {
    k: v for k, v in PartitionedKernelRidge._parameter_constraints.items()
    if k not in ("partitioner", "combine")
}


class DCKRR(PartitionedKernelRidge):
    """Divide-and-conquer kernel ridge regression (DC-KRR, Algorithm 8).

    Random balanced partitions; the prediction is the average of all local
    models. Similar parts give similar models, so averaging works, but the
    accuracy improves slowly with more data.

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    sigma : float, default=1.0
        Gaussian kernel width, ``K = exp(-||x - x'||^2 / (2 sigma^2))``.
    lam : float, default=1e-4
        Ridge parameter: each partition solves ``(K + lam m I) alpha = y``.
    kernel, degree, coef0, halo, backend, n_jobs, random_state, verbose
        See :class:`PartitionedKernelRidge`.

    Attributes
    ----------
    partitioner_, centers_, partition_sizes_, estimators_, fit_stats_, n_features_in_, \
feature_names_in_
        See :class:`PartitionedKernelRidge`.

    See Also
    --------
    BKRR2, KKRR2 : partition by locality and predict with the nearest model.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import DCKRR
    >>> X, y = make_regression(n_samples=200, n_features=3, random_state=0)
    >>> DCKRR(n_partitions=4, sigma=5.0, random_state=0).fit(X, y).predict(X[:2]).shape
    (2,)
    """

    _default_partitioner = "random"
    _default_combine = "average"
    _parameter_constraints = _FRONT_CONSTRAINTS

    def __init__(self, n_partitions=8, *, sigma=1.0, lam=1e-4, kernel="rbf", degree=3,
                 coef0=1.0, halo=0.0, backend="serial", n_jobs=None, random_state=None,
                 verbose=False):
        _front_door_init(self, n_partitions, sigma, lam, kernel, degree, coef0, halo, backend,
                         n_jobs, random_state, verbose)


class KKRR(DCKRR):
    """K-means kernel ridge regression (KKRR): K-means partitions, averaged.

    Shown in the reference to be *less* accurate than DC-KRR (far-away
    models pollute the average); kept as the baseline of the KKRR family.

    Parameters
    ----------
    n_partitions : int, default=8
        Number of clusters P.
    sigma, lam, kernel, degree, coef0, halo, backend, n_jobs, random_state, verbose
        See :class:`DCKRR`.

    Attributes
    ----------
    partitioner_, centers_, partition_sizes_, estimators_, fit_stats_, n_features_in_, \
feature_names_in_
        See :class:`PartitionedKernelRidge`.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import KKRR
    >>> X, y = make_regression(n_samples=200, n_features=3, random_state=0)
    >>> KKRR(n_partitions=4, sigma=5.0, random_state=0).fit(X, y).predict(X[:2]).shape
    (2,)
    """

    _default_partitioner = "kmeans"
    _default_combine = "average"


class KKRR2(DCKRR):
    """KKRR2: K-means partitions, prediction by the nearest centre's model.

    Optimised for accuracy; the K-means partitions are unbalanced, so the
    largest partition dominates the fit time.

    Parameters
    ----------
    n_partitions : int, default=8
        Number of clusters P.
    sigma, lam, kernel, degree, coef0, halo, backend, n_jobs, random_state, verbose
        See :class:`DCKRR`.

    Attributes
    ----------
    partitioner_, centers_, partition_sizes_, estimators_, fit_stats_, n_features_in_, \
feature_names_in_
        See :class:`PartitionedKernelRidge`.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import KKRR2
    >>> X, y = make_regression(n_samples=200, n_features=3, random_state=0)
    >>> KKRR2(n_partitions=4, sigma=5.0, random_state=0).fit(X, y).predict(X[:2]).shape
    (2,)
    """

    _default_partitioner = "kmeans"
    _default_combine = "nearest"


class BKRR(DCKRR):
    """Balanced KRR (BKRR): K-balance partitions (Algorithm 9), averaged.

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    sigma, lam, kernel, degree, coef0, halo, backend, n_jobs, random_state, verbose
        See :class:`DCKRR`.

    Attributes
    ----------
    partitioner_, centers_, partition_sizes_, estimators_, fit_stats_, n_features_in_, \
feature_names_in_
        See :class:`PartitionedKernelRidge`.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import BKRR
    >>> X, y = make_regression(n_samples=200, n_features=3, random_state=0)
    >>> BKRR(n_partitions=4, sigma=5.0, random_state=0).fit(X, y).partition_sizes_
    array([50, 50, 50, 50])
    """

    _default_partitioner = "kbalance"
    _default_combine = "average"


class BKRR2(DCKRR):
    """BKRR2: K-balance partitions, nearest-centre prediction (Algorithm 10).

    Balanced like DC-KRR (equal work per partition) and local like KKRR2:
    the reference's recommendation when scaling matters most.

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    sigma, lam, kernel, degree, coef0, halo, backend, n_jobs, random_state, verbose
        See :class:`DCKRR`.

    Attributes
    ----------
    partitioner_, centers_, partition_sizes_, estimators_, fit_stats_, n_features_in_, \
feature_names_in_
        See :class:`PartitionedKernelRidge`.

    Notes
    -----
    With ``n_partitions=1`` this is
    ``KernelRidge(kernel='rbf', gamma=1/(2 sigma^2), alpha=lam*n)`` up to
    rounding (the tests: within 1e-8).
    To order the K-balance assignment by regret instead of data order use
    ``PartitionedKernelRidge(partitioner=KBalancePartitioner(P,
    assign_order='regret'), combine='nearest')``.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import BKRR2
    >>> X, y = make_regression(n_samples=200, n_features=3, random_state=0)
    >>> BKRR2(n_partitions=4, sigma=5.0, random_state=0).fit(X, y).partition_sizes_
    array([50, 50, 50, 50])
    """

    _default_partitioner = "kbalance"
    _default_combine = "nearest"
