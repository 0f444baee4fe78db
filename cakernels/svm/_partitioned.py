"""Partitioned kernel SVMs: PartitionedSVC and its front doors CASVC, FCFSSVC,
BKMSVC and CPSVC (see :mod:`cakernels.svm`)."""

import numbers
import threading
import weakref

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassifierMixin
from sklearn.svm import SVC
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .._engine import (
    PartitionedEstimator,
    check_predict_params,
    check_weighted_classes,
    draw_seed,
    drop_zero_weight_rows,
    global_class_weight,
    global_classes,
    global_gamma,
    keeps_state_on_failure,
    validate_params_for,
)
from .._kernels import KERNELS, check_magnitude, kernel_dot
from .._params import Count
from ..partition import _int32_indices
from .._solvers.local import _check_numerics_before, libsvm_errors_named, libsvm_max_iter
from .._solvers.native_svc import NATIVE_SOLVERS, NativeKernelSVC, ovr_from_ovo

SOLVERS = ("libsvm",) + NATIVE_SOLVERS


_NATIVE_VIEWS = weakref.WeakKeyDictionary()
_NATIVE_VIEWS_LOCK = threading.Lock()


def _native_view(model, kernel_params):
    """A local model that predicts through the package's kernel blocks: a
    multiclass LIBSVM model (:class:`sklearn.svm.SVC`) as the equal
    :class:`NativeKernelSVC` (:meth:`NativeKernelSVC.from_libsvm`: its
    support vectors' kernel rows once per test sample for all pairs, on the
    prediction's threads, instead of LIBSVM's one-thread loop), built once per
    model and kept while the model lives; any other model as it is."""
    if not isinstance(model, SVC):
        return model
    with _NATIVE_VIEWS_LOCK:
        view = _NATIVE_VIEWS.get(model)
    if view is None:
        view = NativeKernelSVC.from_libsvm(model, kernel_params)
        with _NATIVE_VIEWS_LOCK:
            _NATIVE_VIEWS[model] = view
    return view


class _SingleClassModel:
    """Local model of a partition that holds one class only: predicts it."""

    def __init__(self, label):
        self.classes_ = np.array([label])
        self.n_iter_ = np.zeros(1, dtype=np.int64)
        self.support_ = np.zeros(0, dtype=np.intp)

    def predict(self, X, n_threads=1):
        return np.full(X.shape[0], self.classes_[0])


#: hyper-parameters every SVM here shares with sklearn.svm.SVC
_SVM_CONSTRAINTS = {
    "C": [Interval(numbers.Real, 0.0, None, closed="neither")],
    "kernel": [StrOptions(set(KERNELS))],
    "degree": [Count(0)],
    "gamma": [StrOptions({"scale", "auto"}), Interval(numbers.Real, 0.0, None, closed="left")],
    "coef0": [Interval(numbers.Real, None, None, closed="neither")],
    "tol": [Interval(numbers.Real, 0.0, None, closed="neither")],
    "cache_size": [Interval(numbers.Real, 0, None, closed="neither")],
    "class_weight": [StrOptions({"balanced"}), dict, None],
    "max_iter": [Count(-1)],
}


#: what needs CSR with 32-bit indices (named in the error when they cannot
#: hold the matrix); the native solvers take 64-bit indices as they are
_LIBSVM = "solver='libsvm' (scikit-learn's SVC)"


def _validate_training_data(est, X, y):
    """Validated float64 (dense or CSR, indices as given) ``X`` and labels ``y``
    of a classifier's ``fit``; sets ``est.classes_`` (at least two classes)."""
    X, y = validate_data(est, X, y, accept_sparse="csr", dtype=np.float64, order="C")
    check_classification_targets(y)
    est.classes_ = np.unique(y)
    if est.classes_.size < 2:
        raise ValueError(
            "The number of classes has to be greater than one; got "
            f"{est.classes_.size} class"
        )
    return X, y


class _ClassifierInput:
    """Input handling of the classifiers on the engine: validation of one process's
    rows, and what the ranks must agree on about the labels."""

    def _kernel_params(self):
        """The kernel of every local model (``gamma_`` resolved at fit)."""
        return {"kernel": self.kernel, "gamma": self.gamma_, "degree": self.degree,
                "coef0": self.coef0}

    def _validate_local(self, X, y, sample_weight):
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, order="C")
        check_classification_targets(y)
        w = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        return X, y, w

    def _y_meta(self, y):
        return {"classes": np.unique(y), "kind": np.asarray(y).dtype.kind}

    def _merge_y_meta(self, metas):
        kinds = {"text" if m["kind"] in "USO" else "number" for m in metas}
        if len(kinds) > 1:
            return "the ranks' labels have different types (text on some, numbers on others)"
        return None

    def _empty_y(self, meta):
        return meta["classes"][:0]

    def _placement_costs(self, s, y, labels, sizes):
        """Estimated work of every partition's local SVMs, for placing them on
        ranks: over the one-vs-one pairs, the pair's samples times its smaller
        class (a support-vector bound), so that one-class partitions, which are
        trivial, weigh little. ``y`` holds class indices; in root mode only rank
        0 has rows and the counts travel in one allreduce."""
        k = self.classes_.size
        local = np.zeros(sizes.size * k, dtype=np.int64)
        if labels.size and y is not None and len(y) == labels.size:
            local = np.bincount(np.asarray(labels) * k + np.asarray(y),
                                minlength=sizes.size * k).astype(np.int64)
        counts = s.comm.Allreduce(local).reshape(sizes.size, k).astype(np.float64)
        cost = sizes.astype(np.float64)  # kernel rows and set-up of every partition
        for a in range(k):
            for b in range(a + 1, k):
                cost += (counts[:, a] + counts[:, b]) * np.minimum(counts[:, a], counts[:, b])
        return cost


class PartitionedSVC(ClassifierMixin, _ClassifierInput, PartitionedEstimator):
    """Partitioned kernel SVM with a choice of partitioner.

    The training set is split into ``n_partitions`` parts, an SVM is trained
    on every part independently (no communication), and every test sample is
    classified by the model of its nearest partition centre. The named
    classes :class:`CASVC`, :class:`FCFSSVC`, :class:`BKMSVC` and
    :class:`CPSVC` fix the partitioner; use this class to pass a configured
    partitioner instance.

    Parameters
    ----------
    partitioner : str or partitioner instance, default='random'
        ``'random'``, ``'kmeans'``, ``'kbalance'``, ``'fcfs'``, ``'bkm'``, or
        an object from :mod:`cakernels.partition` (cloned at fit; its own
        ``n_partitions`` and ``random_state`` are used, and its ``halo``
        unless the estimator's ``halo`` is positive).
    n_partitions : int, default=8
        Number of partitions P (ignored when ``partitioner`` is an instance).
    C : float, default=1.0
        Regularisation parameter, as in :class:`sklearn.svm.SVC`.
    kernel : {'rbf', 'linear', 'poly', 'sigmoid'}, default='rbf'
        Kernel (Table 2.1 of the reference).
    degree : int, default=3
        Degree of the polynomial kernel.
    gamma : {'scale', 'auto'} or float, default='scale'
        Kernel coefficient as in :class:`~sklearn.svm.SVC`. ``'scale'`` and
        ``'auto'`` are resolved once on the whole training set, so that every
        partition uses the same kernel.
    coef0 : float, default=0.0
        Independent term of the polynomial and sigmoid kernels.
    tol : float, default=1e-3
        Stopping tolerance of the local solver (below 1 for ``'asygcd'`` and
        ``'pscd'``: see :class:`AsyGCDSVC`).
    cache_size : float, default=200
        Kernel cache of every local solver, in MB (a cache too small for two
        kernel columns of a partition is rounded up to them, as LIBSVM does).
    class_weight : dict or 'balanced', default=None
        Class weights as in :class:`~sklearn.svm.SVC`; ``'balanced'`` is
        computed on the whole training set.
    max_iter : int, default=-1
        Iteration limit of every local solver; -1 (or 0): LIBSVM's limit for
        the native SMO (100 iterations per sample, at least 10**7), none for
        ``'libsvm'`` (as :class:`~sklearn.svm.SVC`'s -1), 1,000 updates per
        variable for Asy-GCD and PSCD (see :class:`AsyGCDSVC`). 0 means the
        same for every solver (scikit-learn's SVC runs no iteration at 0).
    break_ties : bool, default=False
        As in :class:`~sklearn.svm.SVC`: when True (multiclass only),
        ``predict`` returns the argmax of ``decision_function``; otherwise
        the one-vs-one vote of the local model.
    solver : {'smo', 'libsvm', 'asygcd', 'pscd'}, default='smo'
        Local solver: ``'smo'`` is the native SMO of this package (LIBSVM's
        algorithm, the dual with bias: the same model to ``tol``, faster than
        LIBSVM at every cache size of ``benchmarks/bench_smo.py``);
        ``'libsvm'`` is scikit-learn's :class:`~sklearn.svm.SVC` (the default
        until 2026-11-25; the local models are then scikit-learn's, bit for
        bit); ``'asygcd'`` the OpenMP asynchronous greedy
        coordinate descent of chapter 4 and ``'pscd'`` its random-selection
        variant (the dual *without* bias, so a different model). The native
        solvers take dense or CSR input and solve more classes one-vs-one;
        Asy-GCD uses ``cpu_count // workers`` threads inside every partition
        (use :class:`AsyGCDSVC` for its intercept and shrinking options).
    halo : float, default=0.0
        Halo partitions (beyond the reference; README "Halo partitions"):
        every partition also trains on the ``round(halo * m / P)`` samples of
        the other partitions nearest to its border (proportional to its size
        for unbalanced K-means partitions); prediction stays with the owner's
        model (nearest centre). ``0`` is the reference's method, bit for bit;
        a halo multiplies every local problem's size by ``1 + halo``.
        ``fit_stats_['halo_sizes']`` gives the halo of every partition.
    routing : {'nearest', 'vote'}, default='nearest'
        Soft routing at prediction (beyond the reference; README "Soft
        routing"): ``'nearest'`` is Algorithm 5, the model of the nearest
        centre; ``'vote'`` gives every sample the mean of the decision values
        of the models of its ``n_voters`` nearest centres, weighted by the
        inverse squared distance to each centre, and ``predict`` follows
        that mean (sign, or argmax over classes). Costs ``n_voters`` model
        evaluations per sample; training is unchanged.
    n_voters : int, default=3
        Models that vote per sample when ``routing='vote'`` (more than P: all of them).
    backend : {'serial', 'threads', 'mpi'} or Backend, default='serial'
        How the independent partitions are run (see
        :mod:`cakernels.backends`).
    n_jobs : int, default=None
        Workers of the ``'threads'`` backend (None: every core).
    random_state : int, RandomState instance or None, default=None
        Seed of the partitioner.
    verbose : bool, default=False
        Show a progress bar over the partitions.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        All class labels of the training set.
    partitioner_ : partitioner
        The fitted partitioner; ``partitioner_.n_partitions_`` is the number
        of partitions (``n_partitions``, or fewer when the data have fewer
        distinct rows, e.g. CPSVC's K-means).
    centers_ : ndarray of shape (partitioner_.n_partitions_, n_features)
        Partition centres used to route test samples.
    partition_sizes_ : ndarray of shape (partitioner_.n_partitions_,)
        Training samples per partition.
    estimators_ : list
        The local models: with ``solver='libsvm'`` scikit-learn's
        :class:`~sklearn.svm.SVC`; with the native solvers
        :class:`~cakernels._solvers.native_svc.NativeKernelSVC` (``classes_``,
        ``support_``, ``n_iter_``, ``objective_``, ``models_``: one
        ``(support vectors, dual coefficients, intercept)`` per binary
        problem, ``decision_function``, ``predict``); a constant model for a
        partition that holds one class.
    gamma_ : float
        The resolved kernel coefficient.
    fit_stats_ : dict
        ``partition_seconds``, per-partition ``solve_seconds``, ``n_iter``
        and ``n_support``, ``partition_sizes``, ``comm_bytes`` and
        ``comm_messages`` (zero on one machine), ``backend``, ``n_ranks``,
        ``n_workers`` (the workers that solved partitions, over all ranks:
        threads on one process, ranks under MPI) and ``threads_per_worker``
        (the BLAS/OpenMP threads of each); the README lists the rest.
    n_iter_ : ndarray of shape (partitioner_.n_partitions_,)
        Solver iterations of every partition (summed over the one-vs-one
        problems; 0 for a single-class partition).
    n_support_total_ : int
        Support vectors over all partitions.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit. Defined only when ``X`` has
        feature names that are all strings (a pandas DataFrame); ``predict``
        then warns on input without names and refuses other names, as
        scikit-learn's estimators do.

    See Also
    --------
    CASVC, FCFSSVC, BKMSVC, CPSVC : the named methods of the reference.

    Notes
    -----
    Follows Algorithm 5 of the reference: independent training, then
    prediction by the model of the nearest centre. Binary local models are
    evaluated as ``K(X, SV) @ dual_coef_ + intercept_`` with BLAS and the
    native kernels instead of LIBSVM's per-sample loop (same function,
    rounding aside, several times faster). A partition that holds a
    single class predicts that class. ``decision_function`` has the shape of
    :class:`~sklearn.svm.SVC`'s (``'ovr'`` for more than two classes, with
    classes missing from a partition scored -1).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import PartitionedSVC
    >>> from cakernels.partition import KBalancePartitioner
    >>> X, y = make_classification(n_samples=400, random_state=0)
    >>> clf = PartitionedSVC(partitioner=KBalancePartitioner(4, random_state=0))
    >>> clf.fit(X, y).partition_sizes_
    array([100, 100, 100, 100])
    >>> float(clf.score(X, y)) > 0.8
    True
    """

    _parameter_constraints = {
        **PartitionedEstimator._parameter_constraints,
        **_SVM_CONSTRAINTS,
        "break_ties": ["boolean"],
        "solver": [StrOptions(set(SOLVERS))],
        "routing": [StrOptions({"nearest", "vote"})],
        "n_voters": [Count(1)],
        "partitioner": [str, object],
    }

    def __init__(self, partitioner="random", n_partitions=8, *, C=1.0, kernel="rbf", degree=3,
                 gamma="scale", coef0=0.0, tol=1e-3, cache_size=200, class_weight=None,
                 max_iter=-1, break_ties=False, solver="smo", halo=0.0, routing="nearest",
                 n_voters=3, backend="serial", n_jobs=None, random_state=None, verbose=False):
        self.partitioner = partitioner
        self.n_partitions = n_partitions
        self.halo = halo
        self.routing = routing
        self.n_voters = n_voters
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.break_ties = break_ties
        self.solver = solver
        self.backend = backend
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ fit
    @keeps_state_on_failure
    def fit(self, X, y, sample_weight=None):
        """Partition the training set and fit one SVM per partition.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training samples; float32 and non-contiguous input are copied to
            float64, never modified. Under MPI in root mode only rank 0's
            ``X`` is used (other ranks may pass None); in sharded mode every
            rank passes its own rows.
        y : array-like of shape (n_samples,)
            Class labels (two or more classes over all ranks).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample weights (rescale C per sample, as in SVC). Rows of
            weight 0 take no part (as in LIBSVM, where their bound C_i = 0
            keeps them out of every model): they are left out of the
            partitions (``partitioner_`` is fitted on the other rows), but
            ``gamma='scale'`` is computed on all rows and
            ``class_weight='balanced'`` counts them, as SVC does.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        validate_params_for(self)  # under MPI: raised on every rank
        with self._session() as s:
            X, y, w, index = self._collect(s, X, y, sample_weight)
            self.classes_ = global_classes(s, y)
            y_idx = np.searchsorted(self.classes_, y).astype(np.int64)
            self.gamma_ = global_gamma(s, self.gamma, X)
            # the kernel every local model is fitted with, and predicts with:
            # kernel, degree or coef0 set after fit do not change the fitted
            # model (as the KRR estimators' local models; a failed refit leaves
            # it as it was: keeps_state_on_failure)
            self._fit_kernel = self._kernel_params()
            ctx = {"class_weight": global_class_weight(s, self.class_weight, self.classes_,
                                                       y_idx),
                   "n_threads": s.threads,
                   "seed": draw_seed(s.comm, self.random_state),
                   "kernel": self._fit_kernel}
            if check_weighted_classes(s, self.classes_, y_idx, w, ctx["class_weight"],
                                      C=self.C):
                X, y_idx, w, index, _ = drop_zero_weight_rows(s, X, y_idx, w, index,
                                                             self._partition_count())
            self._fit_partitioned(s, X, y_idx, w, index, ctx)
        self.n_iter_ = np.asarray(self.fit_stats_["n_iter"])
        return self

    def __setstate__(self, state):
        # models pickled before _fit_kernel existed (2026-11-27) were fitted with
        # the kernel parameters they hold
        if "gamma_" in state and "_fit_kernel" not in state:
            state["_fit_kernel"] = {"kernel": state.get("kernel", "rbf"),
                                    "gamma": state["gamma_"],
                                    "degree": state.get("degree", 3),
                                    "coef0": state.get("coef0", 0.0)}
        super().__setstate__(state)

    def _fit_partition(self, p, ctx):
        """The local model of one partition: ``(model, n_iter, n_support)``."""
        # samples with zero weight have C_i = 0 and so alpha_i = 0: they
        # cannot affect the local model, and LIBSVM drops them anyway
        keep = p.sample_weight > 0
        if not keep.any():
            raise ValueError(
                "a partition has no sample with positive sample_weight; use fewer partitions")
        Xp = p.X[keep] if not keep.all() else p.X
        yp = self.classes_[p.y[keep]]
        wp = p.sample_weight[keep]
        labels = np.unique(yp)
        if labels.size == 1:
            return _SingleClassModel(labels[0]), 0, 0
        class_weight, kp = ctx["class_weight"], ctx["kernel"]
        if self.solver in NATIVE_SOLVERS:
            w = wp if class_weight is None else wp * np.array(
                [class_weight[c] for c in yp.tolist()])
            model = NativeKernelSVC(
                self.solver, kp, self.C, self.tol, self.max_iter,
                self.cache_size, n_threads=ctx["n_threads"], random_state=ctx["seed"])
            model.fit(Xp, yp, w)
            return model, int(model.n_iter_.sum()), int(model.support_.size)
        # LIBSVM: the native solvers' numerical checks first (clear errors instead of
        # SVC's "dual coefficients are not finite")
        _check_numerics_before(Xp, kp, np.float32)  # LIBSVM's Qfloat
        cw = None if class_weight is None else {c: class_weight[c] for c in labels.tolist()}
        svc = SVC(C=self.C, kernel=kp["kernel"], degree=kp["degree"], gamma=kp["gamma"],
                  coef0=kp["coef0"], tol=self.tol, cache_size=self.cache_size,
                  class_weight=cw, break_ties=False,
                  max_iter=libsvm_max_iter(self.max_iter, kp["kernel"], kp["degree"]),
                  decision_function_shape="ovo")
        with libsvm_errors_named(self.C):
            svc.fit(_int32_indices(Xp, purpose=_LIBSVM, canonical=True), yp, sample_weight=wp)
        return svc, int(np.sum(svc.n_iter_)), int(svc.support_.size)

    # -------------------------------------------------------------- predict
    def _check_X(self, X, allow_empty=False):
        # a rank of a collective prediction may hold no test row
        check_is_fitted(self)
        check_predict_params(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, order="C",
                          reset=False, ensure_min_samples=0 if allow_empty else 1)
        if X.shape[0]:  # as fit: an overflowing row would give a silent constant
            check_magnitude(X)
        # CSR keeps its index width: only LIBSVM's own predict needs 32 bits
        return self._as_fit_format(X)

    def _binary_decision(self, model, Xg, n_threads):
        """Decision values of a binary local SVC, positive for ``model.classes_[1]``.

        ``K(X, support vectors) @ dual_coef + intercept`` through BLAS and
        the native kernel transform, in bounded blocks: the same function
        LIBSVM evaluates, several times faster than its per-sample loop.
        """
        coef = model.dual_coef_
        coef = coef.toarray() if sp.issparse(coef) else np.asarray(coef)
        dec = kernel_dot(Xg, model.support_vectors_, coef[0], n_threads=n_threads,
                         **self._fit_kernel)
        return dec + model.intercept_[0]

    def _local_predict(self, model, Xg, n_threads):
        if model.classes_.size == 2 and hasattr(model, "dual_coef_"):
            # a decision of exactly 0 is classes_[1]'s, as in SVC.predict
            return model.classes_[(self._binary_decision(model, Xg, n_threads) >= 0).astype(int)]
        return _native_view(model, self._fit_kernel).predict(Xg, n_threads)

    def _local_decision(self, model, Xg, n_threads):
        """Decision values of one local model, in the global class layout.

        Multiclass: the local model's one-vs-rest scores (votes plus squashed
        confidences, as SVC's), each raised by the classes the partition lacks,
        as if its classes won every duel against them; those get -1, below any
        score. So every partition's scores are on the scale of the whole
        problem's (a clear winner about ``n_classes - 1``): the winner of a
        partition of two classes scored about 1 and a loser of one of ten up to
        8, and tools that compare scores across rows (calibration, thresholds,
        the weighted vote of ``routing='vote'``) read them wrong. With every
        class present (one partition) they are SVC's.
        """
        n_classes = self.classes_.size
        n = Xg.shape[0]
        cls = np.searchsorted(self.classes_, model.classes_)
        if isinstance(model, _SingleClassModel):
            if n_classes == 2:
                return np.full(n, 1.0 if cls[0] == 1 else -1.0)
            out = np.full((n, n_classes), -1.0)
            out[:, cls[0]] = n_classes - 1.0
            return out
        k = model.classes_.size
        if k == 2:
            dec = self._binary_decision(model, Xg, n_threads)
            if n_classes == 2:
                return dec
            # a binary SVC reports positive for classes_[1]; one-vs-one
            # values are positive for the first class of the pair
            ovr = ovr_from_ovo(-dec.reshape(n, -1), k)
        else:  # in blocks of rows (see NativeKernelSVC.ovr_decision)
            ovr = _native_view(model, self._fit_kernel).ovr_decision(Xg, n_threads)
        out = np.full((n, n_classes), -1.0)
        out[:, cls] = ovr + (n_classes - k)
        return out

    def _n_voters(self):
        return min(self.n_voters, len(self.estimators_)) if self.routing == "vote" else 1

    def decision_function(self, X):
        """Decision values of the nearest partition's model (or, with
        ``routing='vote'``, the weighted mean of the nearest models').

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        dec : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Binary: positive means ``classes_[1]``. Multiclass: one-vs-rest
            scores as :class:`~sklearn.svm.SVC` with
            ``decision_function_shape='ovr'`` of the partition's model, raised
            by the number of classes the partition lacks (which get -1), so
            that the scores of every partition share one scale.
        """
        X = self._check_X(X)
        n_classes = self.classes_.size
        shape = (X.shape[0],) if n_classes == 2 else (X.shape[0], n_classes)
        return self._apply_routed(
            X, lambda t: lambda m, Xg: self._local_decision(m, Xg, t), np.empty(shape))

    def predict(self, X):
        """Class of every sample, by the model of its nearest partition centre.

        Local on every rank (each holds every model); for a test set sharded
        over MPI ranks see :meth:`predict_sharded`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        return self._predict(X)

    def _predict(self, X, session=None, checked=False):
        if not checked:
            X = self._check_X(X, allow_empty=session is not None)
        if self._n_voters() > 1:
            # soft routing: the class of the weighted mean decision
            n = self.classes_.size
            shape = (X.shape[0],) if n == 2 else (X.shape[0], n)
            dec = self._apply_routed(
                X, lambda t: lambda m, Xg: self._local_decision(m, Xg, t), np.empty(shape),
                session=session)
            return self.classes_[(dec >= 0).astype(np.intp) if n == 2
                                 else np.argmax(dec, axis=1)]
        if self.break_ties and self.classes_.size > 2:
            n = self.classes_.size
            dec = self._apply_routed(
                X, lambda t: lambda m, Xg: self._local_decision(m, Xg, t),
                np.empty((X.shape[0], n)), session=session)
            return self.classes_[np.argmax(dec, axis=1)]
        out = np.empty(X.shape[0], dtype=self.classes_.dtype)
        return self._apply_routed(
            X, lambda t: lambda m, Xg: self._local_predict(m, Xg, t), out,
            encode=lambda labels: np.searchsorted(self.classes_, labels).astype(np.float64),
            session=session)

    def _decode(self, codes):
        return self.classes_[np.asarray(codes).astype(np.intp)]

    @property
    def n_support_total_(self):
        """Total number of support vectors over all partitions."""
        check_is_fitted(self)
        return int(sum(self.fit_stats_["n_support"]))


class CASVC(PartitionedSVC):
    """Communication-Avoiding SVM (CA-SVM): random balanced partitions.

    The training set is shuffled and split evenly into ``n_partitions``
    parts; each part trains its own SVM with no communication, and a test
    sample is classified by the model whose partition mean is nearest.
    The cheapest partitioning and perfectly load balanced, but the least
    accurate of the family, because random parts are not local in feature
    space: in the README's SVM family table 2.8 points below ``SVC`` on
    average (up to 8.1), and, keeping the most support vectors, not the
    fastest fit (the thesis' "fastest" counts the communication it saves).

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    C, kernel, degree, gamma, coef0, tol, cache_size, class_weight, max_iter, break_ties
        As in :class:`sklearn.svm.SVC` (see :class:`PartitionedSVC`).
    solver : {'smo', 'libsvm', 'asygcd', 'pscd'}, default='smo'
        Local solver (see :class:`PartitionedSVC`).
    halo : float, default=0.0
        Halo fraction (see :class:`PartitionedSVC`).
    routing : {'nearest', 'vote'}, default='nearest'
        Nearest-centre prediction or a weighted vote of the ``n_voters``
        nearest centres' models (see :class:`PartitionedSVC`).
    n_voters : int, default=3
        Models that vote per sample when ``routing='vote'``.
    backend : {'serial', 'threads', 'mpi'} or Backend, default='serial'
        How the independent partitions are run (see
        :mod:`cakernels.backends`).
    n_jobs : int, default=None
        Workers of the ``'threads'`` backend (None: every core).
    random_state : int, RandomState instance or None, default=None
        Seed of the random partition.
    verbose : bool, default=False
        Progress bar over the partitions.

    Attributes
    ----------
    classes_, partitioner_, centers_, partition_sizes_, estimators_, gamma_, fit_stats_, \
n_iter_, n_support_total_, n_features_in_, feature_names_in_
        See :class:`PartitionedSVC`.

    See Also
    --------
    FCFSSVC, BKMSVC, CPSVC : clustered partitions, more accurate.

    Notes
    -----
    Algorithm 5 of the reference (casvm2). With ``n_partitions=1`` and
    ``solver='libsvm'`` it is exactly :class:`sklearn.svm.SVC`; with the
    default native SMO it solves the same problem, its decision values
    agreeing with ``SVC``'s to ``tol``.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import CASVC
    >>> X, y = make_classification(n_samples=400, random_state=0)
    >>> clf = CASVC(n_partitions=4, C=10, random_state=0).fit(X, y)
    >>> clf.partition_sizes_
    array([100, 100, 100, 100])
    >>> clf.predict(X[:3]).shape
    (3,)
    """

    _default_partitioner = "random"
    _parameter_constraints = {
        k: v for k, v in PartitionedSVC._parameter_constraints.items() if k != "partitioner"
    }

    def __init__(self, n_partitions=8, *, C=1.0, kernel="rbf", degree=3, gamma="scale",
                 coef0=0.0, tol=1e-3, cache_size=200, class_weight=None, max_iter=-1,
                 break_ties=False, solver="smo", halo=0.0, routing="nearest", n_voters=3,
                 backend="serial", n_jobs=None, random_state=None, verbose=False):
        self.n_partitions = n_partitions
        self.halo = halo
        self.routing = routing
        self.n_voters = n_voters
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.break_ties = break_ties
        self.solver = solver
        self.backend = backend
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose


class FCFSSVC(CASVC):
    """FCFS-SVM: first-come-first-served balanced partitions (Algorithm 3).

    P random samples act as centres and every sample, in data order, joins
    its nearest centre that is not yet full; the partition means then route
    test samples. Balanced like CA-SVM, but the partitions are local in
    feature space, which recovers part of CA-SVM's loss (README's SVM family
    table: 2.1 points below ``SVC`` on average against CA-SVM's 2.8, with a
    wide spread between seeds).

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    C, kernel, degree, gamma, coef0, tol, cache_size, class_weight, max_iter, break_ties
        As in :class:`sklearn.svm.SVC` (see :class:`PartitionedSVC`).
    solver, halo, routing, n_voters, backend, n_jobs, random_state, verbose
        See :class:`CASVC`.

    Attributes
    ----------
    classes_, partitioner_, centers_, partition_sizes_, estimators_, gamma_, fit_stats_, \
n_iter_, n_support_total_, n_features_in_, feature_names_in_
        See :class:`PartitionedSVC`.

    See Also
    --------
    cakernels.partition.FCFSPartitioner : the partitioning step.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import FCFSSVC
    >>> X, y = make_classification(n_samples=400, random_state=0)
    >>> FCFSSVC(n_partitions=4, random_state=0).fit(X, y).partition_sizes_
    array([100, 100, 100, 100])
    """

    _default_partitioner = "fcfs"


class BKMSVC(CASVC):
    """BKM-SVM: balanced K-means partitions (Algorithm 4).

    K-means clusters the training set; the farthest samples of over-full
    clusters move to the nearest under-full centre until the partitions are
    balanced: CA-SVM's load balance with partitions local in feature space
    (README's SVM family table: 2.0 points below ``SVC`` on average, CP-SVM
    1.2, CA-SVM 2.8).

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    C, kernel, degree, gamma, coef0, tol, cache_size, class_weight, max_iter, break_ties
        As in :class:`sklearn.svm.SVC` (see :class:`PartitionedSVC`).
    solver, halo, routing, n_voters, backend, n_jobs, random_state, verbose
        See :class:`CASVC`.

    Attributes
    ----------
    classes_, partitioner_, centers_, partition_sizes_, estimators_, gamma_, fit_stats_, \
n_iter_, n_support_total_, n_features_in_, feature_names_in_
        See :class:`PartitionedSVC`.

    See Also
    --------
    cakernels.partition.BKMPartitioner : the partitioning step.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import BKMSVC
    >>> X, y = make_classification(n_samples=400, random_state=0)
    >>> BKMSVC(n_partitions=4, random_state=0).fit(X, y).partition_sizes_
    array([100, 100, 100, 100])
    """

    _default_partitioner = "bkm"


class CPSVC(CASVC):
    """CP-SVM: clustering-partition SVM, K-means partitions.

    K-means clusters the training set and every cluster trains its own SVM;
    a test sample is classified by the model of its nearest centre. The most
    accurate of the family, but cluster sizes (and so the work per
    partition) are unbalanced.

    Parameters
    ----------
    n_partitions : int, default=8
        Number of clusters P (fewer when K-means leaves clusters empty).
    C, kernel, degree, gamma, coef0, tol, cache_size, class_weight, max_iter, break_ties
        As in :class:`sklearn.svm.SVC` (see :class:`PartitionedSVC`).
    solver, halo, routing, n_voters, backend, n_jobs, random_state, verbose
        See :class:`CASVC`.

    Attributes
    ----------
    classes_, partitioner_, centers_, partition_sizes_, estimators_, gamma_, fit_stats_, \
n_iter_, n_support_total_, n_features_in_, feature_names_in_
        See :class:`PartitionedSVC`.

    See Also
    --------
    cakernels.partition.KMeansPartitioner : the partitioning step.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from cakernels import CPSVC
    >>> X, y = make_blobs(n_samples=300, centers=3, random_state=0)
    >>> clf = CPSVC(n_partitions=3, random_state=0).fit(X, y)
    >>> int(clf.partition_sizes_.sum())
    300
    """

    _default_partitioner = "kmeans"
