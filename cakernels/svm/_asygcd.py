"""AsyGCDSVC: the chapter-4 multi-core kernel SVM (see :mod:`cakernels.svm`)."""

import numbers

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils import check_random_state
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .._engine import (
    check_class_weights,
    check_weight_counts,
    keeps_state_on_failure,
    weight_counts,
)
from .._params import Count
from .._persist import VersionedState
from ..backends import blas_limits, reserve_threads, threads_available
from .._kernels import check_magnitude, check_tiny_features, resolve_gamma
from .._solvers.native_svc import NativeKernelSVC
from ._partitioned import _SVM_CONSTRAINTS, _validate_training_data

class AsyGCDSVC(ClassifierMixin, VersionedState, BaseEstimator):
    """Multi-core kernel SVM by asynchronous greedy coordinate descent (chapter 4).

    Solves the SVM dual *without* bias term (eq. 4.9 of the reference),
    ``min 0.5 a^T Q a - sum(a)`` subject to ``0 <= a_i <= C_i``, with the
    native OpenMP solver of Algorithm 14: the variables are split into one
    block per thread by K-means on a subsample (section 4.4), every thread
    greedily updates the variable of its block with the largest projected
    gradient, and every thread keeps its own LRU cache of kernel values.
    Deviation: a step is not added to one shared gradient with atomic adds
    but published once in a lock-free log, and every thread applies it to
    the gradient entries of its own variables (owner computes; with atomic
    adds two threads were no faster than one, see ``native/ck_asygcd.c``),
    and a thread steps only while its largest violation is at least half of
    the team's largest (else, on strongly coupled kernels, half of the steps
    went to small violations in the other block). With
    ``selection='random'`` it is PSCD (asynchronous stochastic coordinate
    descent, the chapter's baseline); with one thread and greedy selection it
    is serial GCD (Algorithm 13). The greedy choice is LIBLINEAR's projected
    gradient, the stopping test's measure, rather than equation 4.11's step
    capped at the bounds: the two differ only where that step is clipped
    (``native/ck_asygcd.c``, deviation 6).

    Parameters
    ----------
    C : float, default=1.0
        Regularisation parameter.
    kernel : {'rbf', 'linear', 'poly', 'sigmoid'}, default='rbf'
        As in :class:`sklearn.svm.SVC`.
    degree : int, default=3
        As in :class:`sklearn.svm.SVC`.
    gamma : {'scale', 'auto'} or float, default='scale'
        As in :class:`sklearn.svm.SVC`.
    coef0 : float, default=0.0
        As in :class:`sklearn.svm.SVC`.
    tol : float, default=1e-3
        Stop when the largest projected gradient is at most ``tol``; below 1
        (at the start, every alpha 0, every variable's projected gradient is
        1: a larger ``tol`` is a ``ValueError``, not the model 0).
    max_iter : int, default=-1
        Limit on the total number of coordinate updates of each binary
        problem; reaching it raises a ConvergenceWarning. -1 (or 0): 1,000
        updates per variable, at least 10**6 (LIBLINEAR's 1,000 epochs, as
        :class:`sklearn.svm.LinearSVC`; converged fits take 2-130 per
        variable, a large C on a nearly singular kernel could take hours).
    cache_size : float, default=200
        Kernel-column cache in MB, split evenly between the threads. Up to a
        quarter of it may hold a feature-major copy of ``X`` (when
        ``8 * n_samples * n_features`` bytes, or 4 when every value is a
        float exactly, fit there and are no more than the whole kernel
        matrix's ``8 * n_samples**2``), which makes kernel columns several times
        cheaper to compute (bit-identical values). A cache smaller than two
        kernel columns is rounded up to them, as LIBSVM does.
    class_weight : dict or 'balanced', default=None
        Per-class multipliers of C.
    multi_class : {'ovo', 'ovr'}, default='ovo'
        One-vs-one or one-vs-rest for more than two classes.
    n_threads : int, default=None
        Most OpenMP threads to use (None: the cores this process may use --
        CPU affinity, cgroup quota, ``OMP_NUM_THREADS`` -- less those other
        parallel regions of the process hold, see
        :func:`cakernels.backends.threads_available`). Every thread gets at
        least :data:`cakernels._solvers.asygcd.MIN_ROWS_PER_THREAD` (5,000)
        variables, so small problems run on fewer threads; a team whose
        threads keep waiting for descheduled peers (more threads than free
        cores) hands the rest of the solve to one thread.
    selection : {'greedy', 'random'}, default='greedy'
        Asy-GCD or PSCD. PSCD draws a thread's variables uniformly at random
        but steps (and counts an update) only on a draw that violates the
        optimality conditions by more than ``tol``: the chapter's PSCD
        updates every draw, a step of nearly 0 that costs a kernel column
        (``native/ck_asygcd.c``, deviation 7).
    shrinking : bool, default=True
        Let every thread drop variables stuck at a bound from its active set
        (LIBLINEAR's rule; the active variables kept contiguous and their
        kernel slices cached at the active length, and the dropped
        gradient entries rebuilt with LIBSVM's G_bar before the final test).
        Measured (``benchmarks/README.md``): full fits on ijcnn1 2-4.5x
        faster, on covtype_5000 1.2-1.3x faster; on a9a 0.8-2.0x the time (two
        threads whose rebuilds keep finding violators on its coupled
        kernel). False runs Algorithms 13/14 without shrinking.
    fit_intercept : bool, default=False
        Add a regularised intercept, as LIBLINEAR does: the kernel becomes
        ``K(x, x') + intercept_scaling**2`` (the feature map extended by a
        constant feature). The thesis' model has none (False); on imbalanced
        data an intercept can matter (ijcnn1: 98.4% without, 98.7% with,
        the accuracy of :class:`sklearn.svm.SVC`).
    intercept_scaling : float, default=1.0
        Value of the constant feature (> 0).
    random_state : int, RandomState instance or None, default=None
        Seed of the variable partitioning (and of PSCD's choices).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    model_ : NativeKernelSVC
        The fitted SVM (one binary model per problem; its ``decision_function``
        answers for the estimator's with two classes, its ``ovr_decision``
        with more). The estimator's ``predict`` is the argmax of
        :meth:`decision_function` (:class:`~sklearn.svm.SVC` with
        ``break_ties=True``); ``model_.predict`` is the one-vs-one vote, which
        may differ from it where the vote ties.
    gamma_ : float
        The resolved kernel coefficient.
    support_ : ndarray
        Indices of the support vectors (over all binary problems).
    n_iter_ : ndarray of shape (n_problems,)
        Coordinate updates of every binary problem.
    intercept_ : ndarray of shape (n_problems,)
        Intercept of every binary problem (zeros unless ``fit_intercept``), in
        the sign of its decision values, as :class:`~sklearn.svm.SVC`'s: positive
        for ``classes_[1]`` when binary, for the first class of a one-vs-one pair
        and for the class of a one-vs-rest problem.
    objective_ : ndarray of shape (n_problems,)
        Dual objective ``0.5 a^T Q a - sum(a)`` reached by every binary
        problem (with ``fit_intercept``, ``Q_ij = y_i y_j (K(x_i, x_j) +
        intercept_scaling**2)``).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit (a DataFrame with string column
        names only).

    See Also
    --------
    sklearn.svm.SVC : the dual with bias, by LIBSVM.

    Notes
    -----
    Without the bias term the decision function is ``sum_i a_i y_i K(x_i, x)``;
    with ``fit_intercept`` it is ``sum_i a_i y_i K(x_i, x) + b`` with
    ``b = intercept_scaling**2 * sum_i a_i y_i``.
    Results with several threads are not bitwise reproducible: the order of
    the asynchronous updates varies from run to run, the objective reached
    does not (up to ``tol``).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import AsyGCDSVC
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> clf = AsyGCDSVC(C=10, n_threads=2, random_state=0).fit(X, y)
    >>> float(clf.score(X, y)) > 0.9
    True
    """

    _parameter_constraints = {
        **_SVM_CONSTRAINTS,
        "multi_class": [StrOptions({"ovo", "ovr"})],
        "n_threads": [Count(1), None],
        "selection": [StrOptions({"greedy", "random"})],
        "shrinking": ["boolean"],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(numbers.Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }

    def __init__(self, C=1.0, *, kernel="rbf", degree=3, gamma="scale", coef0=0.0, tol=1e-3,
                 max_iter=-1, cache_size=200, class_weight=None, multi_class="ovo",
                 n_threads=None, selection="greedy", shrinking=True, fit_intercept=False,
                 intercept_scaling=1.0, random_state=None):
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.multi_class = multi_class
        self.n_threads = n_threads
        self.selection = selection
        self.shrinking = shrinking
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.random_state = random_state

    @keeps_state_on_failure
    def fit(self, X, y, sample_weight=None):
        """Fit the SVM.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training samples, dense or CSR (copied to float64 when needed,
            never modified).
        y : array-like of shape (n_samples,)
            Class labels (two or more classes).
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample multipliers of C.

        Returns
        -------
        self : object
        """
        self._validate_params()
        X, y = _validate_training_data(self, X, y)
        check_tiny_features(X, check_magnitude(X))
        weight = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                      ensure_non_negative=True)
        y_idx = np.searchsorted(self.classes_, y)
        if self.class_weight is not None:
            cw = check_class_weights(self.classes_, compute_class_weight(
                self.class_weight, classes=self.classes_, y=y))
            with np.errstate(over="ignore"):  # (an overflow: check_weight_counts)
                weight = weight * cw[y_idx]
        # the other SVMs' checks: a class without a sample of positive weight, bounds
        # C * weight that overflow
        check_weight_counts(weight_counts(self.classes_, y_idx, weight, C=self.C),
                            self.classes_, self.C)
        keep = weight > 0
        self.gamma_ = resolve_gamma(self.gamma, X)
        seed = check_random_state(self.random_state).randint(np.iinfo(np.int32).max)
        # a parallel region of the process: hold its threads in the budget
        with reserve_threads(self.n_threads or threads_available()) as granted:
            self._fit_native(X, y, weight, keep, self.n_threads or granted, seed)
        return self

    def _fit_native(self, X, y, weight, keep, n_threads, seed):
        self.model_ = NativeKernelSVC(
            "asygcd" if self.selection == "greedy" else "pscd",
            {"kernel": self.kernel, "gamma": self.gamma_, "degree": self.degree,
             "coef0": self.coef0},
            self.C, self.tol, self.max_iter, self.cache_size, multi_class=self.multi_class,
            n_threads=n_threads, random_state=seed,
            asygcd_options={"shrinking": self.shrinking, "fit_intercept": self.fit_intercept,
                            "intercept_scaling": self.intercept_scaling},
        ).fit(X[keep], y[keep], weight[keep])
        self.support_ = np.flatnonzero(keep)[self.model_.support_]
        self.n_iter_ = self.model_.n_iter_
        intercepts = np.array(self.model_._stacked()[2] if len(self.model_.models_) > 1
                              else self.model_.models_[0][2], dtype=np.float64)
        # the one-vs-one problems are stored positive for a pair's second class;
        # their decision values (and SVC's intercept_) are positive for its first
        pairs = self.classes_.size > 2 and self.model_.problems_[0][1] is not None
        self.intercept_ = 0.0 - intercepts if pairs else intercepts  # (0.0, not -0.0)
        self.objective_ = self.model_.objective_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def decision_function(self, X):
        """Decision values of the samples in ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        dec : ndarray of shape (n_samples,) or (n_samples, n_classes)
            For two classes one value per sample (positive means
            ``classes_[1]``); else one score per class whose argmax is the
            prediction (with ``multi_class='ovo'`` the one-vs-one votes turned
            into one-vs-rest scores, as ``SVC``'s ``decision_function_shape='ovr'``).
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, order="C",
                          reset=False)
        check_magnitude(X)  # as fit: an overflowing row would give a silent constant
        # the kernel rows in blocks on the threads the fit could use, BLAS on
        # one (see cakernels._kernels.kernel_dot)
        with reserve_threads(self.n_threads or threads_available()) as granted, \
                blas_limits(1):
            if self.classes_.size == 2:
                return self.model_.decision_function(X, granted)
            return self.model_.ovr_decision(X, granted)

    def predict(self, X):
        """Class labels of the samples in ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
            The argmax of :meth:`decision_function` (its sign for two classes).
        """
        dec = self.decision_function(X)
        if dec.ndim == 1:
            return self.classes_[(dec >= 0).astype(int)]  # 0: classes_[1], as SVC
        return self.classes_[np.argmax(dec, axis=1)]
