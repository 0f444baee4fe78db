"""The shared base of the SVMs that end with one model of the whole training
set: the multi-level trees (:mod:`._multilevel`) and Dis-SMO (:mod:`._dissmo`).

It prepares the labels, weights and kernel width the same way on every rank
(one-vs-one over the global classes, ``class_weight`` folded into the sample
weights, ``gamma='scale'`` from the global variance) and predicts with the
final :class:`~cakernels._solvers.native_svc.NativeKernelSVC`, which every
rank holds.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._engine import (
    PartitionedEstimator,
    check_weighted_classes,
    global_class_weight,
    global_classes,
    global_gamma,
)
from .._kernels import check_magnitude
from ._partitioned import _ClassifierInput


class _FullModelSVC(ClassifierMixin, _ClassifierInput, PartitionedEstimator):
    """Fit preamble and prediction of an SVM with one final model (``model_``)."""

    def _prepare_classifier(self, s, X, y, sample_weight):
        """Collect the training set in session ``s`` and set ``classes_``, ``gamma_``
        and the input format; returns ``(X, y_idx, w, index)`` with ``y_idx`` the
        class codes and ``w`` the per-sample multipliers of C (``class_weight``
        included)."""
        X, y, w, index = self._collect(s, X, y, sample_weight)
        self.classes_ = global_classes(s, y)
        y_idx = np.searchsorted(self.classes_, y).astype(np.int64)
        self.gamma_ = global_gamma(s, self.gamma, X)
        cw = global_class_weight(s, self.class_weight, self.classes_, y_idx)
        if cw is not None:
            with np.errstate(over="ignore"):  # (an overflow: check_weighted_classes)
                w = w * np.array([cw[c] for c in self.classes_])[y_idx]
        # rows of zero weight, over all ranks (the multi-level trees leave them out)
        self._n_zero_weight = check_weighted_classes(s, self.classes_, y_idx, w, C=self.C)
        self._fit_sparse = bool(sp.issparse(X))
        return X, y_idx, w, index

    def __setstate__(self, state):
        # models pickled before break_ties existed (2026-11-26) predict by the vote
        state.setdefault("break_ties", False)
        super().__setstate__(state)

    # ------------------------------------------------------------------ predict
    def _check_X(self, X, allow_empty=False):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, order="C",
                          reset=False, ensure_min_samples=0 if allow_empty else 1)
        check_magnitude(X)  # as fit: an overflowing row would give a silent constant
        return self._as_fit_format(X)

    def decision_function(self, X):
        """Decision values: (n_samples,) for two classes (positive means
        ``classes_[1]``), else (n_samples, n_classes) one-vs-rest scores as
        :class:`~sklearn.svm.SVC`'s.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        dec : ndarray
        """
        return self._decision(self._check_X(X))

    def predict(self, X):
        """Class of every sample (for more than two classes: the one-vs-one
        vote, or the argmax of :meth:`decision_function` with ``break_ties``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
        """
        return self._predict_rows(self._check_X(X))

    def _predict_rows(self, X):
        if X.shape[0] == 0:  # a rank without test rows in a collective prediction
            return np.empty(0, dtype=self.classes_.dtype)
        if self.break_ties and self.classes_.size > 2:
            return self.classes_[np.argmax(self._decision(X), axis=1)]
        return self._predict_checked(X)

    def _decision(self, X):
        with self._local_session(X.shape[0], self.support_.size) as s:
            if self.classes_.size == 2:
                return self.model_.decision_function(X, s.threads)
            return self.model_.ovr_decision(X, s.threads)

    def _predict_checked(self, X):
        with self._local_session(X.shape[0], self.support_.size) as s:
            return self.model_.predict(X, s.threads)

    def _predict(self, X, session=None, checked=False):
        # the final model is complete on every rank: nothing to route between ranks
        return self._predict_rows(X if checked else
                                  self._check_X(X, allow_empty=session is not None))

    @property
    def n_support_total_(self):
        """Number of support vectors of the final model (over all pairs of classes)."""
        check_is_fitted(self)
        return int(self.support_.size)
