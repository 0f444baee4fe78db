"""Kernel SVM models trained by the package's native solvers.

:class:`NativeKernelSVC` is the local model of a partition for
``solver='smo'`` (the dual with bias, LIBSVM's algorithm), ``'asygcd'`` and
``'pscd'`` (the dual without bias of chapter 4, greedy or random coordinate
selection). More than two classes are solved one-vs-one (in
:class:`sklearn.svm.SVC`'s pair order) or one-vs-rest.

Binary models expose ``support_vectors_``, ``dual_coef_`` and ``intercept_``
with SVC's meaning: the decision ``K(x, SV) @ dual_coef_[0] + intercept_[0]``
is positive for ``classes_[1]``.
"""

import numpy as np
import scipy.sparse as sp

from .._kernels import kernel_dot
from .local import solve_binary_svm

NATIVE_SOLVERS = ("smo", "asygcd", "pscd")


def ovr_from_ovo(ovo, n_classes):
    """One-vs-rest scores from one-vs-one decision values, as scikit-learn's SVC.

    ``ovo[:, k]`` is positive for the first class of the k-th pair. The
    result is the vote count plus confidences squashed into (-1/3, 1/3), so
    that votes decide and confidences only break ties. A decision value of
    exactly 0 votes for the first class of its pair, as scikit-learn's
    ``_ovr_decision_function`` (``predict``'s one-vs-one vote, as LIBSVM's,
    gives it to the second).
    """
    n = ovo.shape[0]
    votes = np.zeros((n, n_classes))
    conf = np.zeros((n, n_classes))
    k = 0
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            d = ovo[:, k]
            votes[:, i] += d >= 0
            votes[:, j] += d < 0
            conf[:, i] += d
            conf[:, j] -= d
            k += 1
    return votes + conf / (3 * (np.abs(conf) + 1))


class NativeKernelSVC:
    """A kernel SVM trained by ``smo``, ``asygcd`` or ``pscd`` (not a public estimator).

    Parameters
    ----------
    solver : {'smo', 'asygcd', 'pscd'}
    kernel_params : dict
        ``kernel``, ``gamma`` (a float), ``degree``, ``coef0``.
    C, tol, max_iter, cache_size : float, float, int, float
        As in :class:`sklearn.svm.SVC`.
    multi_class : {'ovo', 'ovr'}, default='ovo'
    n_threads : int, default=1
        OpenMP threads of each binary solve (SMO's passes over long ranges
        of variables, Asy-GCD's blocks).
    random_state : int or None
        Seed of Asy-GCD's variable partitioning and of PSCD's choices.
    asygcd_options : dict, optional
        ``shrinking``, ``fit_intercept`` and ``intercept_scaling`` of
        :func:`cakernels._solvers.asygcd.asygcd_fit` (Asy-GCD / PSCD only).
    """

    def __init__(self, solver, kernel_params, C, tol, max_iter, cache_size, *,
                 multi_class="ovo", n_threads=1, random_state=None, asygcd_options=None):
        if solver not in NATIVE_SOLVERS:
            raise ValueError(f"solver must be one of {NATIVE_SOLVERS}, got {solver!r}")
        self.solver = solver
        self.kernel_params = kernel_params
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.cache_size = cache_size
        self.multi_class = multi_class
        self.n_threads = n_threads
        self.random_state = random_state
        self.asygcd_options = asygcd_options

    def _solve(self, X, y_pm, weight):
        sol = solve_binary_svm(X, y_pm, self.C, kernel_params=self.kernel_params,
                               solver=self.solver, sample_weight=weight, tol=self.tol,
                               max_iter=self.max_iter, cache_size=self.cache_size,
                               n_threads=self.n_threads, random_state=self.random_state,
                               asygcd_options=self.asygcd_options)
        self._objectives.append(sol.objective)
        sv = sol.support
        sv_X = X[sv] if sp.issparse(X) else np.ascontiguousarray(X[sv])
        model = (sv_X, sol.dual_coef[None, :], np.array([sol.intercept]))
        return model, sol.n_iter, sv

    def fit(self, X, y, weight):
        """Fit on ``X`` (dense or CSR) with labels ``y`` (two or more classes) and
        per-sample weights multiplying C."""
        self.classes_ = np.unique(y)
        k = self.classes_.size
        if k == 2 or self.multi_class == "ovo":
            self.problems_ = [(i, j) for i in range(k) for j in range(i + 1, k)]
        else:
            self.problems_ = [(i, None) for i in range(k)]
        self.models_, n_iter, support = [], [], set()
        self._objectives = []
        for i, j in self.problems_:
            if j is None:  # one-vs-rest: +1 for class i
                members = np.arange(len(y))
                y_pm = np.where(y == self.classes_[i], 1.0, -1.0)
            else:  # one-vs-one: +1 for the pair's second class, SVC's binary sign
                members = np.flatnonzero((y == self.classes_[i]) | (y == self.classes_[j]))
                y_pm = np.where(y[members] == self.classes_[j], 1.0, -1.0)
            # all rows (binary, one-vs-rest): no copy of X
            Xm = X if members.size == X.shape[0] else X[members]
            model, it, sv = self._solve(Xm, y_pm, weight[members])
            self.models_.append(model)
            n_iter.append(it)
            support.update(members[sv].tolist())
        self.n_iter_ = np.array(n_iter)
        self.objective_ = np.array(self._objectives)
        del self._objectives
        self.support_ = np.array(sorted(support), dtype=np.intp)
        if k == 2:
            self.support_vectors_, self.dual_coef_, self.intercept_ = self.models_[0]
        return self

    @classmethod
    def from_models(cls, classes, kernel_params, models, *, n_iter, objectives, support,
                    solver="smo"):
        """A one-vs-one model assembled from its binary models, one per pair of
        classes in :class:`sklearn.svm.SVC`'s order: ``(sv_X, dual_coef (1, s),
        intercept (1,))`` with the decision positive for the pair's second class
        (the multi-level methods solve every pair by their own tree)."""
        model = cls.__new__(cls)
        model.solver = solver
        model.kernel_params = kernel_params
        model.multi_class = "ovo"
        model.classes_ = np.asarray(classes)
        k = model.classes_.size
        model.problems_ = [(i, j) for i in range(k) for j in range(i + 1, k)]
        if len(models) != len(model.problems_):
            raise ValueError(f"{len(model.problems_)} pairs of classes, {len(models)} models")
        model.models_ = list(models)
        model.n_iter_ = np.asarray(n_iter)
        model.objective_ = np.asarray(objectives, dtype=np.float64)
        model.support_ = np.asarray(support, dtype=np.intp)
        if k == 2:
            model.support_vectors_, model.dual_coef_, model.intercept_ = model.models_[0]
        return model

    def _raw(self, X):
        return np.column_stack([kernel_dot(X, sv_X, coef[0], **self.kernel_params) + b[0]
                                for sv_X, coef, b in self.models_])

    def decision_function(self, X):
        """Binary: (n,), positive for ``classes_[1]``. One-vs-one: (n, n_pairs),
        positive for the first class of a pair. One-vs-rest: (n, n_classes)."""
        raw = self._raw(X)
        if self.classes_.size == 2:
            return raw[:, 0]
        return -raw if self.problems_[0][1] is not None else raw

    def ovr_decision(self, X):
        """(n, n_classes) scores whose argmax is the predicted class (multiclass)."""
        dec = self.decision_function(X)
        if self.problems_[0][1] is None:
            return dec
        return ovr_from_ovo(dec, self.classes_.size)

    def predict(self, X):
        dec = self.decision_function(X)
        if dec.ndim == 1:
            # 0 is classes_[1]'s, as LIBSVM's (its value is -dec) in SVC
            return self.classes_[(dec >= 0).astype(int)]
        if self.problems_[0][1] is None:
            return self.classes_[np.argmax(dec, axis=1)]
        votes = np.zeros((X.shape[0], self.classes_.size), dtype=np.int64)
        for col, (i, j) in enumerate(self.problems_):
            first = dec[:, col] > 0
            votes[first, i] += 1
            votes[~first, j] += 1
        return self.classes_[np.argmax(votes, axis=1)]  # ties: lowest class, as LIBSVM
