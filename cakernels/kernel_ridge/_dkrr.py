"""DKRR: exact kernel ridge regression, distributed by ScaLAPACK (the reference's
baseline, Table 3.3)."""

import contextlib
import numbers
import time
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.linalg import LinAlgWarning
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from .._engine import (
    _pack_rows,
    _unpack_rows,
    check_same_params,
    keeps_state_on_failure,
    validate_params_for,
)
from .._kernels import (
    KERNELS,
    canonical_rows,
    check_magnitude,
    check_tiny_features,
    kernel_block,
    kernel_dot,
    row_sq_norms,
)
from .._params import N_JOBS, Count
from ._partitioned import PartitionedKernelRidge
from .._persist import VersionedState
from ..backends import BACKEND_NAMES, Backend, get_backend
from .. import _memory
from ..backends._comm import CollectiveError, comm_report


def _drop_zero_weights(X, y, w):
    """The rows of positive weight (all rows when ``w`` is None): a row of
    weight 0 has no term in the weighted problem (KernelRidge gives it a zero
    dual coefficient; here it is not kept)."""
    if w is None or np.all(w > 0):
        return X, y, w
    keep = w > 0
    return X[keep], y[keep], w[keep]


def _ranks_on_node(mpi_comm):
    if mpi_comm is None:
        return 1
    from ..backends._backend import ranks_on_node

    return ranks_on_node(mpi_comm)


def _rows_bytes(X):
    """The training rows' memory in the estimate, twice (the caller's and one
    copy): their stored bytes, not ``n x d`` doubles for CSR rows (a wide CSR
    matrix of 79 KB was refused as 298 GiB)."""
    if sp.issparse(X):
        return 2.0 * (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)
    return 16.0 * X.shape[0] * X.shape[1]


def _own_copy(X_fit, X_in):
    """``X_fit``, copied unless it is certainly not the caller's memory:
    validation keeps a float64, C-ordered array as it is, a DataFrame's values
    can be a view of its block (one column, or a frame made with
    ``copy=False``), and any other container's ``__array__`` may return its own
    buffer. Only an ndarray or a sparse matrix can be compared with it."""
    if X_in is None or isinstance(X_in, (list, tuple)):
        # (rows gathered from the ranks, or built from Python lists: nothing shares
        # them; a copy was another n x d array on every rank)
        return X_fit
    if X_fit is X_in:
        return X_fit.copy()
    if sp.issparse(X_fit) and sp.issparse(X_in):
        # (a DOK or LIL matrix has no such arrays: converted, so never shared)
        theirs = [getattr(X_in, a, None) for a in ("data", "indices", "indptr", "row", "col")]
        shared = any(isinstance(b, np.ndarray) and np.may_share_memory(a, b)
                     for a in (X_fit.data, X_fit.indices, X_fit.indptr) for b in theirs)
        return X_fit.copy() if shared else X_fit
    if isinstance(X_in, np.ndarray) and not sp.issparse(X_fit):
        return X_fit.copy() if np.may_share_memory(X_fit, X_in) else X_fit
    return X_fit.copy()  # a list, a DataFrame, another container: its own rows


class DKRR(RegressorMixin, VersionedState, BaseEstimator):
    """Exact kernel ridge regression, distributed over MPI ranks (DKRR).

    Solves ``(K + lam * n * I) alpha = y`` for the whole training set, the
    exact problem that the partitioned estimators approximate. On one
    process it is :class:`sklearn.kernel_ridge.KernelRidge` with
    ``kernel='rbf', gamma=1/(2 sigma^2), alpha=lam*n`` (a LAPACK Cholesky).
    Under MPI (``backend='mpi'`` or :class:`~cakernels.backends.MPIBackend`)
    the ``n x n`` kernel matrix is stored block-cyclically on a 2-D process
    grid (as square as the number of ranks allows) and factored by
    ScaLAPACK's ``pdpotrf``/``pdpotrs``: every rank computes its own blocks of
    ``K`` from the training rows, which every rank holds. ``pdpocon``
    estimates the condition number as LAPACK's ``dpocon`` does on one
    process: an ill-conditioned system warns (:class:`scipy.linalg.LinAlgWarning`)
    on every rank; a numerically singular one, where one process falls back to
    least squares, raises ``ValueError`` on every rank. This is the
    reference's baseline (Table 3.3): its memory and work do not shrink with
    partitions, which is why it scales poorly.

    Parameters
    ----------
    sigma : float, default=1.0
        Width of the Gaussian kernel ``exp(-||x - x'||^2 / (2 sigma^2))`` (the
        scale ``1 / (2 sigma^2)`` of the polynomial and sigmoid kernels).
    lam : float, default=1e-4
        Ridge parameter; the diagonal gets ``lam * n``.
    kernel : {'rbf', 'linear', 'poly', 'sigmoid'}, default='rbf'
        Kernel (Table 3.1), as for :class:`PartitionedKernelRidge`.
    degree : int, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Term ``r`` of the polynomial and sigmoid kernels.
    block_size : int, default=128
        ScaLAPACK's block size ``nb`` of the block-cyclic distribution.
    backend : {'serial', 'threads', 'mpi'} or Backend, default='serial'
        ``'serial'``/``'threads'``: one process (LAPACK); ``'mpi'`` or an
        :class:`~cakernels.backends.MPIBackend` (root or sharded input):
        ScaLAPACK over the ranks.
    n_jobs : int, default=None
        Threads of the ``'threads'`` backend (BLAS threads of the factorization).
    verbose : bool, default=False
        Unused (kept for the common backend parameters).

    Attributes
    ----------
    X_fit_ : ndarray or CSR matrix of shape (n_samples, n_features)
        The training rows (on every rank).
    dual_coef_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
    grid_ : tuple of int
        The process grid ``(nprow, npcol)`` (``(1, 1)`` on one process).
    memory_per_rank_ : int
        Bytes of the kernel matrix block held by the largest rank: about
        ``8 n^2 / P``.
    fit_stats_ : dict
        ``seconds`` (fit), ``factor_seconds`` (the factorisation and solve),
        ``kernel_seconds`` (forming the kernel matrix; the slowest rank's),
        ``memory_per_rank``, ``grid``, ``n_ranks`` and ``comm`` (bytes and
        messages by phase and rank, as the partitioned estimators report).
    n_samples_ : int
        Number of training rows.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        When ``X`` is a DataFrame with string column names.

    Raises
    ------
    ValueError
        When ``8 n^2 / P`` bytes (plus the training rows) do not fit in the
        memory available to every rank, before anything is allocated.
    ImportError
        Under MPI without ScaLAPACK (``pip install "cakernels[scalapack]"``).

    See Also
    --------
    BKRR2 : balanced partitions, ``(n/P)^2`` memory and ``(n/P)^3`` work per rank.

    Notes
    -----
    Memory per rank is ``8 n^2 / P`` bytes for the matrix (8,000 samples:
    512 MB in all; 128,000 samples on 64 ranks: 2 GB per rank), and the
    Cholesky costs ``n^3 / 3`` flops in all, with communication on every
    panel. ScaLAPACK is Intel MKL's, from the registry wheel ``mkl``, loaded
    with the MPI library that mpi4py uses (MPICH's ABI, or Open MPI's).

    There is no intercept (as in :class:`~sklearn.kernel_ridge.KernelRidge`):
    centre targets whose mean is far from 0 (see :class:`PartitionedKernelRidge`).

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.kernel_ridge import KernelRidge
    >>> from cakernels.kernel_ridge import DKRR
    >>> X, y = make_regression(n_samples=200, n_features=4, noise=1, random_state=0)
    >>> d = DKRR(sigma=3.0, lam=1e-4).fit(X, y)
    >>> ref = KernelRidge(kernel="rbf", gamma=1 / 18, alpha=1e-4 * 200).fit(X, y)
    >>> bool(abs(d.predict(X[:5]) - ref.predict(X[:5])).max() < 1e-8)
    True
    """

    _parameter_constraints = {
        "sigma": [Interval(numbers.Real, 0.0, None, closed="neither")],
        "lam": [Interval(numbers.Real, 0.0, None, closed="left")],
        "kernel": [StrOptions(set(KERNELS))],
        "degree": [Count(0)],
        "coef0": [Interval(numbers.Real, None, None, closed="neither")],
        "block_size": [Count(1)],
        "backend": [StrOptions(set(BACKEND_NAMES)), Backend],
        "n_jobs": N_JOBS,
        "verbose": ["verbose"],
    }

    def __init__(self, sigma=1.0, lam=1e-4, *, kernel="rbf", degree=3, coef0=1.0,
                 block_size=128, backend="serial", n_jobs=None, verbose=False):
        self.sigma = sigma
        self.lam = lam
        self.kernel = kernel
        self.degree = degree
        self.coef0 = coef0
        self.block_size = block_size
        self.backend = backend
        self.n_jobs = n_jobs
        self.verbose = verbose

    _kernel_params = PartitionedKernelRidge._kernel_params

    def _validate(self, X, y, sample_weight=None):
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, order="C",
                             multi_output=True, y_numeric=True)
        X = canonical_rows(X)
        w = None
        if sample_weight is not None:
            w = _check_sample_weight(sample_weight, X, dtype=np.float64,
                                     ensure_non_negative=True)
        return X, np.asarray(y, dtype=np.float64), w

    @keeps_state_on_failure
    def fit(self, X, y, sample_weight=None):
        """Solve the exact kernel ridge problem.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training samples. Under MPI in root mode rank 0's ``X`` is used
            (other ranks may pass None); in sharded mode every rank passes its
            own rows.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the squared errors (as ``X``: rank 0's in
            root mode, every rank's own in sharded mode): the problem
            ``S (S K S + lam sum(w) I)^-1 S y`` with ``S = diag(sqrt(w))``,
            :class:`sklearn.kernel_ridge.KernelRidge` with ``alpha = lam *
            sum(w)`` and the same weights (weights of one: the unweighted fit).
            Rows of weight 0 take no part (they are not kept in ``X_fit_``).

        Returns
        -------
        self : object
        """
        validate_params_for(self)  # under MPI: raised on every rank
        backend = get_backend(self.backend, self.n_jobs)
        t_start = time.perf_counter()
        X_in = X
        try:
            session = backend.session()
        except ImportError as exc:
            if backend.name != "mpi":
                raise
            raise ImportError(f"{exc}; DKRR on several ranks needs ScaLAPACK as well: pip "
                              "install \"cakernels[scalapack]\" (Linux x86_64; it includes the mpi extra)"
                              ) from None
        with session as s:
            if backend.name != "mpi":
                X, y, w = _drop_zero_weights(*self._validate(X, y, sample_weight))
                check_tiny_features(X)
                self._fit_local(s, X, y, w)
            else:
                X, y, w = _drop_zero_weights(*self._gather_rows(s, X, y, sample_weight))
                check_tiny_features(X)  # (every rank holds every row: the same error)
                self._fit_scalapack(s, X, y, w)
            # the model keeps its own rows: the caller's array changed in place later
            # changed the predictions (and disagreed with the cached row norms)
            self.X_fit_ = _own_copy(self.X_fit_, X_in)
            self.fit_stats_["seconds"] = time.perf_counter() - t_start
            report = comm_report(s.comm.allgather(s.comm.counter.summary()))
        self.fit_stats_.update(comm=report, comm_bytes=report["total"]["bytes"],
                               comm_messages=report["total"]["messages"])
        return self

    def _check_memory(self, comm, need):
        """Refuse, on every rank, a problem whose blocks do not fit in memory."""
        avail, room = _memory.available_bytes(), _memory.process_room()
        if avail is None and room is None:
            return
        # the node's memory shared by its ranks, within this rank's address space
        per_rank = min(v for v in (None if avail is None else
                                   avail / _ranks_on_node(getattr(comm, "comm", None)),
                                   room) if v is not None)
        error = None
        if need > _memory.MEMORY_FRACTION * per_rank:
            error = (f"DKRR needs about {_memory.fmt_bytes(need)} per rank (its part of the "
                     f"{self.n_samples_:,} x {self.n_samples_:,} kernel matrix, 8 n^2 / P "
                     "bytes, the training rows and the targets), but only "
                     f"{_memory.fmt_bytes(per_rank)} are available per rank: use more ranks "
                     "(or nodes), fewer samples, or a partitioned estimator such as BKRR2")
        comm.agree(error)

    def _fit_local(self, s, X, y, w=None):
        from .._solvers.local import solve_kernel_ridge

        n = X.shape[0]
        self.n_samples_ = n
        nrhs = 1 if y.ndim == 1 else y.shape[1]
        self._check_memory(s.comm, 8.0 * n * n + _rows_bytes(X) + 8.0 * 2 * n * nrhs)
        t0 = time.perf_counter()
        timings = {}
        sol = solve_kernel_ridge(X, y, self.lam, kernel_params=self._kernel_params(s.threads),
                                 sample_weight=w, timings=timings)
        t_kernel = timings["kernel_seconds"]
        self.X_fit_ = X
        self.dual_coef_ = sol.alpha
        self.grid_ = (1, 1)
        self.memory_per_rank_ = 8 * n * n
        self._sq_norms = row_sq_norms(X) if self.kernel == "rbf" else None
        self.fit_stats_ = {"factor_seconds": time.perf_counter() - t0 - t_kernel,
                           "kernel_seconds": t_kernel,
                           "memory_per_rank": self.memory_per_rank_, "grid": self.grid_,
                           "n_ranks": 1}

    def _gather_rows(self, s, X, y, sample_weight=None):
        """Every rank gets all training rows and weights (root mode: from rank 0;
        sharded: the shards stacked in rank order). Collective validation as the
        engine's."""
        comm = s.comm
        check_same_params(comm, self)
        error = result = failure = None
        if s.sharded or comm.rank == 0:
            try:
                if s.sharded and (X is None or getattr(X, "shape", (1,))[0] == 0):
                    raise ValueError("this rank's shard is empty: in sharded mode every rank "
                                     "passes at least one row")
                zero_shard = False
                if s.sharded and sample_weight is not None:
                    # a shard may weigh 0 everywhere (the rows are gathered): only
                    # all the weights together must not
                    # (a scalar 0 is every row's weight, as scikit-learn reads it)
                    sw = np.asarray(sample_weight)
                    zero_shard = sw.ndim <= 1 and sw.size > 0 and sw.dtype.kind in "biuf" \
                        and bool(np.all(sw == 0))
                result = self._validate(X, y, sample_weight if not zero_shard
                                        else 1.0 if sw.ndim == 0 else np.ones(len(sw)))
                if zero_shard:
                    result = result[:2] + (np.zeros(result[0].shape[0]),)
                if result[0].shape[0]:
                    # as the one-process fit: an overflowing row's kernel values would
                    # make the matrix look indefinite
                    check_magnitude(result[0])
            except (ValueError, TypeError) as exc:
                error = str(exc)
            except Exception as exc:  # any other: every rank raises, not a hang
                failure = exc
        comm.agree(error, failure=failure)
        with comm.phase("redistribution"):
            if s.sharded:
                X, y, w = result
                metas = comm.allgather((X.shape[1], bool(sp.issparse(X)), y.shape[1:],
                                        getattr(self, "feature_names_in_", None),
                                        w is not None))
                if len({(m[0], m[1], m[2]) for m in metas}) > 1:
                    raise CollectiveError("the shards differ in their number of features, storage "
                                          "or target shape")
                names = [None if m[3] is None else list(m[3]) for m in metas]
                for r, n in enumerate(names):  # as the partitioned estimators' check
                    if n != names[0]:
                        raise CollectiveError(f"the shards have different feature names "
                                              f"(rank 0 and rank {r})")
                if len({m[4] for m in metas}) > 1:
                    raise CollectiveError("sample_weight must be given on every rank (each its "
                                          "own rows' weights) or on none")
                packed = _pack_rows(X, np.arange(X.shape[0]))
                parts = {k: np.concatenate(comm.Allgatherv(v)) for k, v in sorted(packed.items())}
                Xall = _unpack_rows(parts, X.shape[1], sp.issparse(X))
                yall = np.concatenate(comm.Allgatherv(y))
                wall = None if w is None else np.concatenate(comm.Allgatherv(w))
                if wall is not None and not np.any(wall > 0):  # the same on every rank
                    raise CollectiveError("Sample weights must contain at least one non-zero "
                                          "number.")
                return Xall, yall, wall
            meta = comm.bcast_obj(None if comm.rank != 0 else (
                result[0].shape[1], bool(sp.issparse(result[0])),
                getattr(self, "feature_names_in_", None), result[2] is not None))
            d, sparse, names, weighted = meta
            if comm.rank != 0:
                self.n_features_in_ = d
                if names is not None:
                    self.feature_names_in_ = names
                elif hasattr(self, "feature_names_in_"):  # a refit on an array
                    del self.feature_names_in_
            if comm.rank == 0:
                X, y, _ = result
                packed = _pack_rows(X, np.arange(X.shape[0]))
            else:
                packed = None
            keys = comm.bcast_obj(sorted(packed) if comm.rank == 0 else None)
            got = {k: comm.Bcast(packed[k] if comm.rank == 0 else None) for k in keys}
            Xall = _unpack_rows(got, d, sparse)
            yall = comm.Bcast(y if comm.rank == 0 else None)
            wall = comm.Bcast(result[2] if comm.rank == 0 else None) if weighted else None
            return Xall, yall, wall

    def _fit_scalapack(self, s, X, y, w=None):
        from .._solvers.krr import RCOND_WARN, check_ridge_shift, shift_weights
        from .._solvers.local import (
            KRR_NONFINITE_CAUSE,
            LocalSolution,
            _check_numerics_before,
            _check_solution,
        )
        from .._solvers.scalapack import Grid, cholesky_solve, grid_shape

        comm = s.comm
        n = X.shape[0]
        self.n_samples_ = n
        total = n
        if w is not None:  # (every rank holds every weight: the same scaling everywhere,
            # and the same model as the one-process fit's)
            w, total = shift_weights(w, self.lam)
        check_ridge_shift(self.lam, total)  # the same on every rank
        shift = "lam*n" if w is None else "lam*sum(sample_weight)"  # (for the errors)
        # every rank holds every row: the one-process fit's checks, the same on
        # every rank (a polynomial diagonal that overflows was reported as an
        # overflow "though K(x, x) is finite" by the norm check of the factorisation)
        _check_numerics_before(X, self._kernel_params(1))
        # a block larger than n is one block (np.arange(block_size) and the
        # norm's work array grew with it: 74.5 GiB for block_size=10**10)
        nb = max(1, min(int(self.block_size), n))
        nprow, npcol = grid_shape(comm.size)
        rows_max = -(-n // (nb * nprow)) * nb
        cols_max = -(-n // (nb * npcol)) * nb
        nrhs = 1 if y.ndim == 1 else y.shape[1]
        # the kernel block, the training rows, and the targets: every rank's copy,
        # its block of right-hand sides, the coefficients and their reduction
        need = 8.0 * min(n, rows_max) * min(n, cols_max) + _rows_bytes(X) \
            + 8.0 * nrhs * (3 * n + min(n, rows_max))
        self._check_memory(comm, need)
        error = None
        try:
            from .._solvers.scalapack import load

            load()
        except ImportError as exc:
            error = str(exc)
        comm.agree(error)
        yy = y.reshape(n, -1)
        params = self._kernel_params(s.threads)
        sw = None if w is None else np.sqrt(w)
        with Grid(comm.comm) as grid:
            rows, cols = grid.rows(n, nb), grid.cols(n, nb)
            failure = None
            try:
                t0 = time.perf_counter()
                A = self._kernel_part(X, rows, cols, params, w, sw, total)
                t_kernel = time.perf_counter() - t0
                B = np.zeros((max(rows.size, 1), nrhs), order="F")
                if grid.mycol == 0 and rows.size:
                    B[:rows.size] = yy[rows] if sw is None else yy[rows] * sw[rows][:, None]
            except Exception as exc:  # one rank's (out of memory, say): before the
                failure = exc  # collective solve, every rank raises, not a hang
            comm.raise_failures(failure, counted=False)
            t0 = time.perf_counter()
            with comm.phase("training"):
                info, rcond = cholesky_solve(grid, A, B, n, nrhs, nb)
            t_factor = time.perf_counter() - t0
            mem = A.nbytes
        # ScaLAPACK returns the same info and rcond on every process
        if info != 0:
            raise CollectiveError(f"the kernel matrix + {shift}*I is not positive definite "
                                  f"(leading minor {info} of {n}); increase lam or check the "
                                  "kernel")
        if not rcond > np.finfo(np.float64).eps:
            # the one-process fit falls back to least squares here (LAPACK's dgelsd);
            # ScaLAPACK has no distributed minimum-norm least squares
            raise CollectiveError(
                f"the kernel matrix + {shift}*I is numerically singular (reciprocal condition "
                f"number {rcond:.2g}, below machine precision): its Cholesky factor is rounding "
                "noise. Increase lam (the one-process DKRR returns the least-squares "
                "solution with a LinAlgWarning; under MPI there is no distributed fallback)")
        if rcond < RCOND_WARN:  # the one-process solve's warning, on every rank
            warnings.warn(
                f"kernel matrix + {shift}*I is ill-conditioned (reciprocal condition number "
                f"{rcond:.2g}): the coefficients may carry relative errors up to "
                f"{np.finfo(np.float64).eps / rcond:.1g}. Increase lam for a trustworthy "
                "answer.", LinAlgWarning, stacklevel=3)
        failure = None
        try:  # this rank's part of the coefficients, and the model's row norms
            alpha = np.zeros((n, nrhs))
            if grid.mycol == 0 and rows.size:
                alpha[rows] = B[:rows.size]
            sq_norms = row_sq_norms(X) if self.kernel == "rbf" else None
        except Exception as exc:  # as above: before the next collective call
            failure = exc
        comm.raise_failures(failure, counted=False)
        with comm.phase("model_gather"):
            alpha = comm.Allreduce(alpha)
        if sw is not None:
            alpha *= sw[:, None]
        # the same alpha on every rank: every rank raises the one-process error
        _check_solution(LocalSolution(np.arange(n), alpha, None, 0.0, 0.0, 1),
                        f"kernel ridge (lam={self.lam:.3g})", KRR_NONFINITE_CAUSE)
        mems, factors, kernels = zip(*comm.allgather((int(mem), t_factor, t_kernel)))
        self.X_fit_ = X
        self.dual_coef_ = alpha if y.ndim > 1 else alpha[:, 0]
        self.grid_ = (grid.nprow, grid.npcol)
        self.memory_per_rank_ = int(max(mems))
        self._sq_norms = sq_norms
        self.fit_stats_ = {"factor_seconds": float(max(factors)),
                           "kernel_seconds": float(max(kernels)),
                           "memory_per_rank": self.memory_per_rank_, "grid": self.grid_,
                           "n_ranks": comm.size}

    def _kernel_part(self, X, rows, cols, params, w, sw, total):
        """This process's block ``K[rows][:, cols] (+ lam * total on the diagonal)``
        of the (weighted) system, in Fortran order."""
        # K[rows][:, cols] in Fortran order: the transpose of K[cols][:, rows]
        KT = kernel_block(X[cols], X[rows], **params) if rows.size and cols.size \
            else np.zeros((max(cols.size, 1), max(rows.size, 1)))
        A = KT.T
        if sw is not None and rows.size and cols.size:  # S K S, block by block
            A *= sw[rows][:, None]
            A *= sw[cols][None, :]
        diag_r = np.flatnonzero(np.isin(rows, cols))
        if diag_r.size:
            diag_c = np.searchsorted(cols, rows[diag_r])
            if self.kernel == "rbf":  # K(x, x) = 1 exactly, as kernel_block(X, X)
                A[diag_r, diag_c] = 1.0 if sw is None else w[rows[diag_r]]
            A[diag_r, diag_c] += self.lam * total
        return A

    def predict(self, X):
        """Predictions ``K(X, X_fit_) @ dual_coef_`` (local: every rank holds the model).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        """
        check_is_fitted(self)
        X = canonical_rows(validate_data(self, X, accept_sparse="csr", dtype=np.float64,
                                     order="C", reset=False))
        check_magnitude(X)  # as fit: an overflowing row would give a silent constant
        if sp.issparse(self.X_fit_) and not sp.issparse(X):
            X = sp.csr_matrix(X)
        elif not sp.issparse(self.X_fit_) and sp.issparse(X):
            X = X.toarray()
        from .._kernels import wants_one_blas_thread
        from ..backends import blas_limits, cpu_count

        # the kernel rows share their blocks among the threads themselves, on one
        # BLAS thread each; a small batch too when OpenBLAS would thread its
        # product (on two BLAS threads it waited for a busy core at every call:
        # 3x the time next to one busy process)
        one = wants_one_blas_thread(X.shape[0], self.X_fit_.shape[0])
        with blas_limits(1) if one else contextlib.nullcontext():
            return kernel_dot(X, self.X_fit_, self.dual_coef_, Y_sq_norms=self._sq_norms,
                              **self._kernel_params(cpu_count()))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.multi_output = True
        return tags
