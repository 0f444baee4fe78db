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

from .._kernels import BLOCK_BYTES, MIN_BLOCK_ROWS, kernel_dot
from .local import _check_numerics_before, solve_binary_svm

NATIVE_SOLVERS = ("smo", "asygcd", "pscd")
#: a problem-by-support-vector coefficient matrix up to this size is kept dense
_DENSE_COEF_ENTRIES = 2**20


def _distinct_rows(blocks):
    """The distinct rows of the stacked ``blocks`` (dense arrays or CSR
    matrices with the same columns) and, for every stacked row, the index of
    its distinct row. Rows are equal when their stored bytes are (a CSR row by
    its column indices and values, in its stored order)."""
    if not any(sp.issparse(b) for b in blocks):
        rows = np.ascontiguousarray(np.vstack(blocks), dtype=np.float64)
        if rows.shape[0] == 0:
            return rows, np.zeros(0, dtype=np.intp)
        keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1])))
        _, first, inverse = np.unique(keys.ravel(), return_index=True, return_inverse=True)
        # keep the rows in their order of first appearance
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        return rows[first[order]], rank[inverse.ravel()]
    stacked = sp.vstack([sp.csr_matrix(b) for b in blocks], format="csr")
    index, inverse = {}, np.empty(stacked.shape[0], dtype=np.intp)
    ptr, ind, dat = stacked.indptr, stacked.indices, stacked.data
    for r in range(stacked.shape[0]):
        lo, hi = ptr[r], ptr[r + 1]
        key = (ind[lo:hi].tobytes(), dat[lo:hi].tobytes())
        inverse[r] = index.setdefault(key, len(index))
    first = np.unique(inverse, return_index=True)[1]  # ids count up from 0 in order
    return stacked[first], inverse


def _coef_matrix(vals, rows, cols, n_rows, n_problems):
    """The support-vector-by-problem coefficient matrix (duplicates added), CSR:
    the stored form (a one-vs-one model's support vector has coefficients in at
    most k - 1 of its k (k - 1) / 2 problems)."""
    coef = sp.csr_matrix((vals, (rows, cols)), shape=(n_rows, n_problems))
    coef.sum_duplicates()
    return coef


def _computing_coef(coef):
    """``coef`` as the kernel products take it: dense when small or mostly
    filled, else CSR."""
    n_rows, n_problems = coef.shape
    if sp.issparse(coef) and (n_rows * n_problems <= _DENSE_COEF_ENTRIES
                              or coef.nnz >= 0.1 * n_rows * n_problems):
        return coef.toarray()
    return coef


class _PairModels:
    """``models_`` of a model kept in its stacked form: the distinct support
    vectors of every problem once, their coefficients (CSR, a column per
    problem) and the intercepts. The p-th item is problem p's ``(support
    vectors, dual_coef (1, s), intercept (1,))``, made on demand."""

    def __init__(self, sv, coef, b):
        self._sv, self._coef, self._b = sv, coef, b

    def __len__(self):
        return self._coef.shape[1]

    def __getitem__(self, p):
        if isinstance(p, slice):
            return [self[q] for q in range(*p.indices(len(self)))]
        p = range(len(self))[p]  # a negative index as a list's (IndexError beyond)
        col = self._coef[:, [p]]
        col = col.toarray().ravel() if sp.issparse(col) else np.asarray(col).ravel()
        rows = np.flatnonzero(col)
        return self._sv[rows], col[rows][None, :], self._b[p:p + 1].copy()

    def __iter__(self):
        return (self[p] for p in range(len(self)))


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
                               asygcd_options=self.asygcd_options, check_numerics=False)
        self._objectives.append(sol.objective)
        sv = sol.support
        sv_X = X[sv] if sp.issparse(X) else np.ascontiguousarray(X[sv])
        model = (sv_X, (sol.alpha[sv] * sol.y[sv])[None, :], np.array([sol.intercept]))
        return model, sol.n_iter, sv

    def fit(self, X, y, weight):
        """Fit on ``X`` (dense or CSR) with labels ``y`` (two or more classes) and
        per-sample weights multiplying C."""
        self.classes_ = np.unique(y)
        k = self.classes_.size
        # every problem's rows are rows of X: one overflow check for all of them
        _check_numerics_before(X, self.kernel_params)
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
        self._store_stacked()
        return self

    def _store_stacked(self):
        """Keep several problems' models in the stacked form (:class:`_PairModels`):
        a support vector of several one-vs-one problems was stored once per
        problem, in memory and in saved models (10 classes: 4 times SVC's)."""
        if len(self.models_) > 1 and not isinstance(self.models_, _PairModels):
            self.models_ = _PairModels(*self._stack(self.models_))

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
        model._store_stacked()
        return model

    @classmethod
    def from_libsvm(cls, svc, kernel_params):
        """The one-vs-one model of a fitted multiclass :class:`sklearn.svm.SVC`,
        predicting what it predicts with the kernel rows computed through BLAS
        as for the binary models.

        Built directly in the stacked form (:meth:`_stacked`) from LIBSVM's
        layout, the support vectors grouped by class, ``dual_coef_[j - 1]``
        holding the coefficients of class i's in pair (i, j) and
        ``dual_coef_[i]`` those of class j's: no support vector is copied per
        pair (``models_`` gives a pair's model on demand).
        """
        classes = svc.classes_
        k = classes.size
        dual = svc.dual_coef_.toarray() if sp.issparse(svc.dual_coef_) else svc.dual_coef_
        ends = np.cumsum(svc.n_support_)
        starts = ends - svc.n_support_
        problems = [(i, j) for i in range(k) for j in range(i + 1, k)]
        rows, cols, vals = [], [], []
        for p, (i, j) in enumerate(problems):
            for c, other in ((i, j - 1), (j, i)):
                rows.append(np.arange(starts[c], ends[c]))
                cols.append(np.full(ends[c] - starts[c], p))
                # LIBSVM's value is positive for i; a model here is positive for j
                vals.append(-dual[other, starts[c]:ends[c]])
        n_sv = svc.support_vectors_.shape[0]
        coef = _coef_matrix(np.concatenate(vals), np.concatenate(rows), np.concatenate(cols),
                            n_sv, len(problems))
        model = cls.__new__(cls)
        model.solver = "libsvm"
        model.kernel_params = kernel_params
        model.multi_class = "ovo"
        model.classes_ = np.asarray(classes)
        model.problems_ = problems
        model.n_iter_ = np.asarray(svc.n_iter_)
        model.objective_ = np.full(len(problems), np.nan)
        model.support_ = np.asarray(svc.support_, dtype=np.intp)
        model.models_ = _PairModels(svc.support_vectors_, coef, -np.asarray(svc.intercept_, float))
        return model

    def _raw(self, X, n_threads=1):
        """``K(X, SV_p) @ coef_p + b_p`` for every problem p, as columns."""
        if len(self.models_) == 1:
            sv_X, coef, b = self.models_[0]
            return (kernel_dot(X, sv_X, coef[0], n_threads=n_threads, **self.kernel_params)
                    + b[0])[:, None]
        sv_X, coef, b = self._stacked()
        return kernel_dot(X, sv_X, coef, n_threads=n_threads, **self.kernel_params) + b

    def _stacked(self):
        """All problems as one: the distinct support vectors of every problem
        (a sample is a support vector of up to k - 1 one-vs-one problems, or of
        all k one-vs-rest ones), a coefficient matrix with a column per problem
        (dense, or CSR when mostly zero) and the intercepts. Each support
        vector's kernel row is then computed once per test sample, as LIBSVM
        does, instead of once per problem. Built on first use, not pickled."""
        cached = getattr(self, "_stacked_cache", None)
        if cached is not None:
            return cached
        models = self.models_
        # (a list of per-problem models: a binary model, or one saved before the
        # stacked form was stored)
        unique, coef, b = ((models._sv, models._coef, models._b)
                           if isinstance(models, _PairModels) else self._stack(models))
        self._stacked_cache = (unique, _computing_coef(coef), b)
        return self._stacked_cache

    @staticmethod
    def _stack(models):
        """``(distinct support vectors, CSR coefficients, intercepts)`` of a list
        of per-problem models."""
        svs = [m[0] for m in models]
        sizes = np.array([sv.shape[0] for sv in svs])
        unique, inverse = _distinct_rows(svs)
        n_problems = len(models)
        cols = np.repeat(np.arange(n_problems), sizes)
        vals = np.concatenate([np.asarray(m[1]).reshape(-1) for m in models])
        coef = _coef_matrix(vals, inverse, cols, unique.shape[0], n_problems)
        b = np.array([float(np.asarray(m[2]).reshape(-1)[0]) for m in models])
        return unique, coef, b

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_stacked_cache", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        # a model saved before the stacked form was stored (a list of per-problem
        # models): stacked now, so that saving it again stores each vector once
        if "models_" in state:
            self._store_stacked()

    def decision_function(self, X, n_threads=1):
        """Binary: (n,), positive for ``classes_[1]``. One-vs-one: (n, n_pairs),
        positive for the first class of a pair. One-vs-rest: (n, n_classes).
        ``n_threads``: threads of the kernel evaluation."""
        raw = self._raw(X, n_threads)
        if self.classes_.size == 2:
            return raw[:, 0]
        if self.problems_[0][1] is not None:
            np.negative(raw, out=raw)
        return raw

    def _row_blocks(self, n):
        """Test rows in blocks whose decision values (rows x problems, a few
        temporaries of that size) stay within the kernel blocks' byte budget:
        with many classes, n_pairs values per row made prediction's memory grow
        as n x k^2 / 2 (780 pairs: 2.4 GB for 200,000 rows)."""
        step = max(MIN_BLOCK_ROWS, BLOCK_BYTES // (8 * 4 * max(1, len(self.models_))))
        return [(s, min(s + step, n)) for s in range(0, n, step)] or [(0, 0)]

    def ovr_decision(self, X, n_threads=1):
        """(n, n_classes) scores whose argmax is the predicted class (multiclass)."""
        if self.problems_[0][1] is None:
            return self.decision_function(X, n_threads)
        out = np.empty((X.shape[0], self.classes_.size))
        for lo, hi in self._row_blocks(X.shape[0]):
            out[lo:hi] = ovr_from_ovo(self.decision_function(X[lo:hi], n_threads),
                                      self.classes_.size)
        return out

    def predict(self, X, n_threads=1):
        if self.classes_.size == 2:
            dec = self.decision_function(X, n_threads)
            # 0 is classes_[1]'s, as LIBSVM's (its value is -dec) in SVC
            return self.classes_[(dec >= 0).astype(int)]
        if self.problems_[0][1] is None:
            return self.classes_[np.argmax(self.decision_function(X, n_threads), axis=1)]
        out = np.empty(X.shape[0], dtype=np.intp)
        for lo, hi in self._row_blocks(X.shape[0]):
            dec = self.decision_function(X[lo:hi], n_threads)
            votes = np.zeros((hi - lo, self.classes_.size), dtype=np.int64)
            for col, (i, j) in enumerate(self.problems_):
                first = dec[:, col] > 0
                votes[first, i] += 1
                votes[~first, j] += 1
            out[lo:hi] = np.argmax(votes, axis=1)  # ties: lowest class, as LIBSVM
        return self.classes_[out]
