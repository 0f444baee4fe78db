"""The one engine behind every partitioned estimator.

Partition, solve every partition independently through a backend, combine:

1. ``partitioner_`` (see :mod:`cakernels.partition`) splits the training set;
2. :func:`cakernels._backends.run_tasks` fits one local model per partition
   (serially or concurrently, the solvers release the GIL);
3. the subclass combines the local models at prediction time (nearest-centre
   routing, Algorithm 5, or averaging, Algorithm 8).
"""

import numbers
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions

from ._backends import BACKENDS, effective_n_jobs, run_tasks
from .partition import _int32_indices, make_partitioner  # noqa: F401 (re-exported)


def _group_by(labels, n_groups):
    """Sample indices of every group ``0..n_groups-1``, each in increasing order."""
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(n_groups + 1))
    return [order[bounds[j]:bounds[j + 1]] for j in range(n_groups)]


class _PartitionedEstimator(BaseEstimator):
    """Shared fit/predict driver: subclasses validate their input, call
    ``_partition`` and ``_fit_engine`` with their local solver, and combine the
    local models in ``predict``."""

    _parameter_constraints = {
        "n_partitions": [Interval(numbers.Integral, 1, None, closed="left")],
        "backend": [StrOptions(set(BACKENDS))],
        "n_jobs": [numbers.Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    #: partitioner used by a named front door (``partitioner`` parameter otherwise)
    _default_partitioner = "random"

    def _get_partitioner(self):
        spec = getattr(self, "partitioner", self._default_partitioner)
        return make_partitioner(spec, self.n_partitions, self.random_state)

    def _partition(self, X):
        """Fit the partitioner; return the sorted sample indices of every partition."""
        t0 = time.perf_counter()
        part = self._get_partitioner().fit(X)
        # data order is kept inside a partition (one partition = the plain solver)
        groups = _group_by(np.asarray(part.labels_), part.centers_.shape[0])
        empty = [j for j, g in enumerate(groups) if g.size == 0]
        if empty:
            raise ValueError(
                f"partitions {empty} are empty; use fewer partitions or another partitioner"
            )
        self.partitioner_ = part
        self.centers_ = part.centers_
        self.partition_sizes_ = np.array([g.size for g in groups])
        return groups, time.perf_counter() - t0

    def _run(self, func, tasks, desc):
        return run_tasks(func, tasks, backend=self.backend, n_jobs=self.n_jobs,
                         verbose=self.verbose, desc=desc)

    def _fit_engine(self, X, groups, partition_seconds, fit_one):
        """Fit every partition with ``fit_one(indices) -> (model, n_iter, n_sv)``."""
        def timed(idx):
            t0 = time.perf_counter()
            model, n_iter, n_sv = fit_one(idx)
            return model, n_iter, n_sv, time.perf_counter() - t0

        t0 = time.perf_counter()
        results = self._run(timed, groups, "fit partitions")
        self.estimators_ = [r[0] for r in results]
        self.fit_stats_ = {
            "partition_seconds": float(partition_seconds),
            "solve_seconds": [float(r[3]) for r in results],
            "solve_wall_seconds": float(time.perf_counter() - t0),
            "n_iter": [int(r[1]) for r in results],
            "n_support": [int(r[2]) for r in results],
            "partition_sizes": self.partition_sizes_.tolist(),
            "comm_bytes": 0,
            "comm_messages": 0,
            "backend": self.backend,
            "n_workers": min(effective_n_jobs(self.backend, self.n_jobs), len(groups)),
        }

    def _route(self, X):
        """Nearest-centre partition of every row of ``X`` and the groups per partition."""
        groups = _group_by(self.partitioner_.assign(X), len(self.estimators_))
        return [(j, idx) for j, idx in enumerate(groups) if idx.size]

    def _apply_routed(self, X, local, out):
        """Evaluate ``local(model, X_group)`` on every nearest-centre group of ``X``
        (through the backend) and scatter the results into ``out``."""
        groups = self._route(X)
        results = self._run(lambda item: local(self.estimators_[item[0]], X[item[1]]),
                            groups, "predict partitions")
        for (_, idx), res in zip(groups, results):
            out[idx] = res
        return out

    def _as_fit_format(self, X):
        """Give test data the storage (dense or CSR) the partitions were fitted on."""
        if self._fit_sparse and not sp.issparse(X):
            return sp.csr_matrix(X)
        if not self._fit_sparse and sp.issparse(X):
            return X.toarray()
        return X

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
