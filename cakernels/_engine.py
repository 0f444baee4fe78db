"""The one engine behind every partitioned estimator.

A fit opens a :class:`~cakernels.backends.Session` on the estimator's
backend and runs the same steps whatever the backend (serial, threads or
MPI, root or sharded data):

1. **setup** -- validate the input collectively (bad input on any rank is the
   same ``ValueError`` on every rank) and agree on the global facts
   (``classes_``, ``n_features_in_``, the resolved ``gamma``...);
2. **partitioning** -- rank 0 runs the serial partitioner on all rows (root
   mode, and one process), or the partitioner runs distributed over the
   shards (sharded mode, :mod:`cakernels.partition._distributed`);
3. **placement and redistribution** -- every partition gets an owner rank
   (:meth:`~cakernels.backends.Session.place`); its rows move there: a
   scatter from rank 0 in root mode, one all-to-all in sharded mode, nothing
   on one process (partitions are sliced lazily by the worker that solves
   them);
4. **training** -- every rank solves its partitions with the local solver
   (:meth:`Session.map`, the thread budget of the session); a failure on one
   rank is raised on every rank;
5. **model gather** -- the local models are allgathered, so that every rank
   holds the same complete estimator, which predicts, scores and pickles
   without MPI.

Prediction is local by default (every rank holds every model); with a
sharded MPI backend and several ranks it follows Algorithm 5: test samples
are routed to their nearest centre locally, the rank owning the partition
predicts, and the results return to their rows.
"""

import contextlib
import hashlib
import numbers
import pickle
import re
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions

from ._kernels import (
    check_magnitude,
    check_tiny_features,
    magnitude_stats,
    tiny_features_error,
    wants_one_blas_thread,
)
from ._own_init import OwnInitName
from ._state import keeps_state_on_failure  # noqa: F401 (the estimators import it here)
from ._persist import VersionedState
from ._params import N_JOBS, Count
from .backends import (
    BACKEND_NAMES,
    Backend,
    SerialBackend,
    blas_limits,
    get_backend,
    lpt_placement,
)
from .backends._comm import (
    CollectiveError,
    comm_report,
    failure_text,
    raise_if_any_failed,
)
from .partition import make_partitioner
from .partition._partitioners import _BasePartitioner



def _halo_of(part):
    """The fitted partitioner's halos (``halo_indices_``), or None when there is none."""
    halo = getattr(part, "halo_indices_", None)
    if halo is None or not any(np.asarray(h).size for h in halo):
        return None
    return [np.asarray(h, dtype=np.int64) for h in halo]


def _shard_halos(halo, index):
    """Every halo's rows held by this shard, as positions in it (``index``: the
    shard's contiguous global range of rows, sharded mode)."""
    start, stop = int(index[0]), int(index[-1]) + 1
    return [h[(h >= start) & (h < stop)] - start for h in halo]


def _halo_sizes(part, sizes):
    """Halo rows of every partition: the package's partitioners' ``halo_sizes_``;
    for a user's object, counted from its (checked) ``halo_indices_`` (its own
    ``halo_sizes_`` was trusted: missing counted zeros, wrong values passed)."""
    if isinstance(part, _BasePartitioner):
        return np.asarray(getattr(part, "halo_sizes_", np.zeros_like(sizes)), dtype=np.int64)
    halo = getattr(part, "halo_indices_", None)
    if halo is None:
        return np.zeros_like(sizes, dtype=np.int64)
    return np.array([np.asarray(h).size for h in halo], dtype=np.int64)


def _own_layout(part):
    """Whether ``owners_`` and ``rows_stay_local_`` are the package's own: a
    subclass that relabels after ``super().fit_sharded`` keeps the base class's
    (the rows then stayed on ranks that no longer own their partitions: a silent
    wrong model), and a user's object's are not checked."""
    return _own_method(part, "fit") and _own_method(part, "fit_sharded")


def _group_by(labels, n_groups):
    """Sample indices of every group ``0..n_groups-1``, each in increasing order."""
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(n_groups + 1))
    return [order[bounds[j]:bounds[j + 1]] for j in range(n_groups)]


# --------------------------------------------------------------------------- fingerprints


def _fingerprint(value):
    """A string that is equal on two ranks exactly when the parameter values are."""
    if isinstance(value, (np.random.RandomState, np.random.Generator)):
        # not its state: the package draws from it on rank 0 only where rank 0
        # works alone (root mode's partitioning, the searches' splits), so the
        # states part after a first fit although the ranks passed the same seed
        return type(value).__name__ + " instance"
    if isinstance(value, type):
        return value.__qualname__
    if isinstance(value, BaseEstimator):
        params = value.get_params(deep=False)
        return f"{type(value).__name__}(" + ",".join(
            f"{k}={_fingerprint(v)}" for k, v in sorted(params.items())) + ")"
    if isinstance(value, Backend):
        return repr(value)
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:  # (its bytes are pointers: other on every rank)
            return f"ndarray{value.shape}object:" + hashlib.sha256(
                repr([_fingerprint(v) for v in value.ravel().tolist()]).encode()).hexdigest()
        return f"ndarray{value.shape}{value.dtype}:" + hashlib.sha256(
            np.ascontiguousarray(value).tobytes()).hexdigest()
    if isinstance(value, dict):
        return "{" + ",".join(f"{k!r}:{_fingerprint(v)}" for k, v in sorted(
            value.items(), key=lambda kv: repr(kv[0]))) + "}"
    # an object without a repr of its own (a generator of splits, a user's splitter
    # or callable) shows its address, which differs between ranks: compared by type
    return _ADDRESS.sub("", repr(value))


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def draw_seed(comm, random_state):
    """One int seed drawn from ``random_state`` (as ``check_random_state``'s
    ``randint``), the same on every rank: an int gives it on every rank without
    a message; with None or a ``RandomState`` instance rank 0 draws it and
    broadcasts it (every rank's own draw differed: None is each process's own
    global state, and an instance's state parts between the ranks after a
    first fit, rank 0's alone drawing the partitions in root mode)."""
    if isinstance(random_state, numbers.Integral) or comm.size == 1:
        return int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    seed = (int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
            if comm.rank == 0 else None)
    return comm.bcast_obj(seed)


def params_fingerprint(est):
    """sha256 of the estimator's class and parameters (for the ranks to compare)."""
    params = est.get_params(deep=False)
    text = type(est).__qualname__ + ":" + ",".join(
        f"{k}={_fingerprint(v)}" for k, v in sorted(params.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def _is_mpi(backend):
    from .backends import MPIBackend

    return (isinstance(backend, str) and backend == "mpi") or isinstance(backend, MPIBackend)


def validate_params_for(est):
    """``est._validate_params()``. Under an MPI backend an invalid parameter is
    kept for :func:`check_same_params`, which raises it on every rank: raised
    here, on one rank only, it left the others waiting for that rank forever
    (without ``-m mpi4py``)."""
    est.__dict__.pop("_param_error", None)  # (a fit that stopped before using it)
    try:
        est._validate_params()
    except (ValueError, TypeError) as exc:  # InvalidParameterError is both
        if not _is_mpi(getattr(est, "backend", None)):
            raise
        est._param_error = exc


def defer_param_error(est, func):
    """``func()``, an error of which (a bad grid...) joins the parameter errors
    of :func:`validate_params_for` under an MPI backend; returns its value or None."""
    try:
        return func()
    except (ValueError, TypeError) as exc:
        if not _is_mpi(getattr(est, "backend", None)):
            raise
        if getattr(est, "_param_error", None) is None:
            est._param_error = exc
        return None


def check_same_params(comm, est):
    """Collective: every rank must have called ``fit`` with valid and the same
    parameters (and the same estimator); otherwise the same
    :class:`~cakernels.backends.CollectiveError` on every rank (a rank's
    invalid parameter: its own error there)."""
    failure = est.__dict__.pop("_param_error", None)
    if comm.size == 1 and failure is not None:
        raise failure
    # (ranks in other calls than fit ended the job when the session opened)
    got = comm.allgather((None if failure is not None else params_fingerprint(est),
                          None if failure is None else " ".join(str(failure).split())))
    bad = [(r, g[1]) for r, g in enumerate(got) if g[1] is not None]
    if bad:  # as comm.agree: the same one-line error on every rank
        raise CollectiveError(f"rank {bad[0][0]}: {bad[0][1]}")
    fingerprints = [g[0] for g in got]
    if any(f != fingerprints[0] for f in fingerprints):
        bad = [r for r, f in enumerate(fingerprints) if f != fingerprints[0]]
        # every rank computes this same message from the same data
        raise CollectiveError(f"ranks {bad} were given other parameters than rank 0 (or "
                              "another estimator); every rank must call fit with the same "
                              "estimator and parameters (a search that scored each rank's "
                              "own rows may have chosen others on each rank: score with "
                              "score_sharded)")


# --------------------------------------------------------------------------- row exchange


def _pack_rows(X, rows):
    """Arrays of the rows ``rows`` of ``X`` for transport: dense values, or CSR
    row lengths, column indices and values."""
    if sp.issparse(X):
        sub = X[rows]
        return {"nnz": np.diff(sub.indptr).astype(np.int64),
                "indices": sub.indices.astype(np.int64), "data": sub.data.astype(np.float64)}
    return {"dense": np.ascontiguousarray(X[rows], dtype=np.float64)}


def _pack_block(X, y, w, index, part, rows):
    """The rows ``rows`` (their X, targets, weights, global indices and partition
    ids ``part``) as one byte buffer, for one message of a scatter or all-to-all."""
    packed = _pack_rows(X, rows)
    packed["y"] = np.asarray(y[rows])
    if w is not None:
        packed["w"] = np.asarray(w[rows], dtype=np.float64)
    packed["index"] = np.asarray(index[rows], dtype=np.int64)
    packed["part"] = part
    return np.frombuffer(pickle.dumps(packed, protocol=5), dtype=np.uint8)


def _unpack_block(buf):
    return pickle.loads(np.asarray(buf, dtype=np.uint8).tobytes())


def _unpack_rows(packed, n_features, sparse):
    if not sparse:
        return packed["dense"].reshape(-1, n_features)
    indptr = np.concatenate([[0], np.cumsum(packed["nnz"])]).astype(np.int64)
    return sp.csr_matrix((packed["data"], packed["indices"], indptr),
                         shape=(packed["nnz"].size, n_features))


class Partition:
    """One partition's training rows, materialised on the rank that solves it.

    Attributes
    ----------
    j : int
        Partition index.
    X : ndarray or CSR matrix
    y : ndarray
        Targets (regression) or class indices into ``classes_`` (classifiers).
    sample_weight : ndarray
    index : ndarray of int64
        Global sample indices of the rows (increasing).
    """

    def __init__(self, j, X, y, sample_weight, index):
        self.j = j
        self.X = X
        self.y = y
        self.sample_weight = sample_weight
        self.index = index


class _LazyPartition:
    """A partition of data held by this process, sliced when a worker needs it."""

    def __init__(self, j, X, y, w, idx, index):
        self.j = j
        self._args = (X, y, w, idx, index)

    def materialize(self):
        X, y, w, idx, index = self._args
        return Partition(self.j, X[idx], y[idx], None if w is None else w[idx], index[idx])


class _ReadyPartition:
    def __init__(self, part):
        self.j = part.j
        self._part = part

    def materialize(self):
        return self._part


# --------------------------------------------------------------------------- global facts


def global_classes(s, y):
    """The classes of all ranks' labels (the union over the shards), the same
    on every rank; at least two (collective ValueError otherwise)."""
    comm = s.comm
    if s.size == 1:
        classes = np.unique(y)
    elif not s.sharded:
        classes = comm.bcast_obj(np.unique(y) if comm.rank == 0 else None)
    else:
        classes = np.unique(np.concatenate(comm.allgather(np.unique(y))))
    if classes.size < 2:
        comm.agree("The number of classes has to be greater than one; got "
                   f"{classes.size} class")
    return classes


def global_class_weight(s, class_weight, classes, y_idx):
    """``class_weight`` resolved on all ranks' labels, as a dict ``label -> weight``
    (None when ``class_weight`` is None); ``'balanced'`` counts the classes of
    every shard."""
    if class_weight is None:
        return None
    from sklearn.utils.class_weight import compute_class_weight

    comm = s.comm
    if class_weight == "balanced":
        counts = np.bincount(y_idx, minlength=classes.size).astype(np.float64)
        if s.size > 1:
            counts = comm.Allreduce(counts) if s.sharded else comm.Bcast(
                counts if comm.rank == 0 else None)
        weights = counts.sum() / (classes.size * counts)
    else:
        error = None
        try:
            weights = compute_class_weight(class_weight, classes=classes,
                                           y=classes[np.zeros(1, dtype=np.intp)])
        except ValueError as exc:
            error, weights = str(exc), None
        if s.size > 1:
            comm.agree(error)
        elif error is not None:
            raise ValueError(error)
    return dict(zip(classes.tolist(), check_class_weights(classes, weights).tolist()))


def check_class_weights(classes, weights):
    """``weights`` (one per class, from ``compute_class_weight``) as float64,
    or a ValueError when one is negative, NaN or infinite."""
    weights = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(weights) & (weights >= 0)):
        raise ValueError(f"class_weight must be finite and non-negative, got "
                         f"{dict(zip(classes.tolist(), weights.tolist()))}")
    return weights


def check_weighted_classes(s, classes, y_idx, w, class_weight=None, C=None, C_min=None):
    """A ValueError, on every rank, when a class has no sample of positive weight
    (``sample_weight`` times ``class_weight``): its samples' bounds ``C_i`` are all
    0 (or underflow to 0 with ``C_min``, default ``C``: the smallest ``C`` the fit
    uses), so no model could predict it (scikit-learn's SVC refuses it too); or
    when a bound ``C * sample_weight * class_weight`` overflows float64 (``C``: the
    largest the fit uses). ``y_idx`` are class codes, ``w`` the per-sample weights
    and ``class_weight`` the dict of :func:`global_class_weight` (None: already in
    ``w``). Returns the number of samples of zero ``sample_weight`` over all ranks
    (the same reduction)."""
    pos = weight_counts(classes, y_idx, w, class_weight, C, C_min)
    if s.size > 1:
        pos = s.comm.Allreduce(pos) if s.sharded else s.comm.Bcast(
            pos if s.comm.rank == 0 else None)
    return check_weight_counts(pos, classes, C, C_min)


def weight_counts(classes, y_idx, w, class_weight=None, C=None, C_min=None):
    """This process's counts for :func:`check_weight_counts`: samples of positive
    bound per class, samples of zero ``sample_weight``, and bounds ``C * w``
    that overflow (``(n_classes + 2,)``, summed over the ranks by the caller).
    A bound is positive when ``C_min * w`` (default ``C``) does not underflow
    to 0: a class whose bounds all do would be left out of the model."""
    pos = np.zeros(classes.size + 2)
    if y_idx is not None and len(y_idx):
        y_idx = np.asarray(y_idx)
        eff = np.asarray(w, dtype=np.float64)
        with np.errstate(over="ignore", under="ignore"):
            if class_weight is not None:
                eff = eff * np.array([class_weight[c] for c in classes.tolist()])[y_idx]
            bound = eff if C is None else float(C) * eff
            low = eff if C is None and C_min is None else (
                float(C if C_min is None else C_min) * eff)
        pos[:-2] = np.bincount(y_idx[(eff > 0) & (low > 0)], minlength=classes.size)
        pos[-2] = np.count_nonzero(np.asarray(w) <= 0)
        pos[-1] = np.count_nonzero(~np.isfinite(bound))
    return pos


def check_weight_counts(pos, classes, C=None, C_min=None):
    """Raise the errors of :func:`check_weighted_classes` from the (summed)
    :func:`weight_counts`; return the number of samples of zero weight."""
    if pos[-1]:  # (the solvers refused it without naming the cause; Dis-SMO iterated on NaN)
        n_bad = int(pos[-1])
        raise ValueError(f"C * sample_weight * class_weight overflows float64 for {n_bad} "
                         f"sample{'s' if n_bad > 1 else ''}"
                         f"{'' if C is None else f' (C={float(C):.3g})'}: use smaller weights "
                         "or a smaller C")
    missing = classes[np.asarray(pos[:-2]) == 0]
    if missing.size:
        # (a class whose bounds C * weight all underflow to 0 was left out silently)
        times_c = ("" if C is None else
                   f", and times C={float(C if C_min is None else C_min):.3g} not below "
                   "float64's smallest number, 5e-324, where it underflows to 0")
        raise ValueError("every class needs a sample with positive weight (sample_weight "
                         f"times class_weight{times_c}); class{'es' if missing.size > 1 else ''} "
                         f"{', '.join(map(str, missing.tolist()))} ha"
                         f"{'ve' if missing.size > 1 else 's'} none")
    return int(pos[-2])


def count_zero_weights(s, w):
    """Rows of zero weight over all ranks (collective: one reduction in sharded
    mode, rank 0's count in root mode)."""
    n = int(np.count_nonzero(np.asarray(w) <= 0)) if w is not None else 0
    if s.size == 1:
        return n
    if s.sharded:
        return int(s.comm.allreduce(n))
    return int(s.comm.bcast_obj(n if s.comm.rank == 0 else None))


def _check_shard_weights(sample_weight):
    """Sharded mode: a shard whose weights are all 0 would be empty once its
    rows of weight 0 are left out (scikit-learn's own message, "Sample weights
    must contain at least one non-zero number", would blame the whole data)."""
    if sample_weight is None or np.ndim(sample_weight) > 1:
        return  # (the validation's own errors follow)
    try:
        w = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError):
        return
    if w.size and np.all(w == 0):
        raise ValueError("every sample_weight of this rank's shard is 0: in sharded mode "
                         "every rank needs a row of positive weight (rows of weight 0 are "
                         "left out, and a shard may not be empty); move some rows of "
                         "positive weight to this rank")


def drop_zero_weight_rows(s, X, y, w, index, n_partitions=None):
    """This rank's rows of positive ``sample_weight``: ``(X, y, w, compact,
    index)`` with ``compact`` their global numbering among the kept rows (what
    the partitioners take; contiguous per shard) and ``index`` their global
    indices in the caller's data (collective in sharded mode; call it on every
    rank when :func:`check_weighted_classes` counted a zero weight anywhere).
    A row of zero weight has the bound ``C_i = 0``, so ``alpha_i = 0`` in every
    solve (LIBSVM drops it too); left in, it shaped the partitions and could
    leave a partition without a row to train on (a ``BaggingClassifier``'s
    bootstrap passes zero weights). With ``n_partitions``: a ``ValueError``
    on every rank when fewer rows than partitions are left (the partitioners'
    own message would count only the rows they see)."""
    keep = np.asarray(w) > 0
    n_given = int(keep.size)
    X, y, w, index = X[keep], y[keep], w[keep], index[keep]
    counts = [(int(X.shape[0]), n_given)]
    if s.size > 1 and s.sharded:
        # (never empty: the validation refuses a shard whose weights are all 0)
        counts = s.comm.allgather(counts[0])
    elif s.size > 1 and n_partitions is not None:  # root mode: rank 0 holds every row
        counts = [s.comm.bcast_obj(counts[0] if s.comm.rank == 0 else None)]
    if n_partitions is not None:
        kept, given = (sum(c[i] for c in counts) for i in (0, 1))
        if n_partitions > kept:
            raise ValueError(
                f"n_partitions={n_partitions} is larger than the number of samples of "
                f"positive sample_weight ({kept} of {given}); every partition needs at "
                "least one of them (rows of weight 0 take no part)")
    if s.size == 1 or not s.sharded:
        return X, y, w, np.arange(X.shape[0], dtype=np.int64), index
    offset = int(sum(c[0] for c in counts[:s.comm.rank]))
    return X, y, w, np.arange(offset, offset + X.shape[0], dtype=np.int64), index


def _bcast_from_root(comm, compute):
    """``compute()`` on rank 0, broadcast to every rank; a ``ValueError`` there is
    the same :class:`~cakernels.backends.CollectiveError` on every rank (rank 0
    raised it alone and the others waited in the broadcast for ever)."""
    value = error = None
    if comm.rank == 0:
        try:
            value = compute()
        except ValueError as exc:
            error = str(exc)
    value, error = comm.bcast_obj((value, error))
    if error is not None:
        raise CollectiveError(error)
    return value


def global_gamma(s, gamma, X):
    """``gamma`` resolved on all ranks' rows as :class:`sklearn.svm.SVC` does
    (``'scale'``: ``1 / (n_features * X.var())``); exactly SVC's value on one
    process and in root mode, from summed moments over the shards otherwise."""
    from ._kernels import resolve_gamma

    comm = s.comm
    if not (isinstance(gamma, str) and gamma == "scale") or s.size == 1:
        return resolve_gamma(gamma, X)
    if not s.sharded:  # rank 0 holds every row; its error is every rank's (else a hang)
        return _bcast_from_root(comm, lambda: resolve_gamma(gamma, X))
    from ._kernels import centered_sq_sum, scale_gamma, variance_from_moments

    def variance(Z):
        with np.errstate(over="ignore", invalid="ignore"):  # (scale_gamma's error instead)
            sq = Z.multiply(Z).sum() if sp.issparse(Z) else np.einsum("ij,ij->", Z, Z)
            moments = comm.Allreduce(np.array([Z.sum(), sq, Z.shape[0] * Z.shape[1]],
                                              dtype=float))
            return variance_from_moments(moments, lambda _, means: comm.Allreduce(
                np.array([centered_sq_sum(Z, means[0])])))[0]

    var = variance(X)
    if not np.isfinite(var):  # sums of squares overflowed (features near 1e153): on
        # X / 2^k, which scales every operation exactly (the same on every rank)
        data = X.data if sp.issparse(X) else X
        big = comm.allreduce(float(np.max(np.abs(data))) if data.size else 0.0, "max")
        if np.isfinite(big) and big > 0:
            scale = 2.0 ** float(np.ceil(np.log2(big)))
            var = float(variance(X / scale) * scale * scale)
    try:
        return scale_gamma(X.shape[1], var)
    except ValueError as exc:  # from the same reduced moments on every rank
        from .backends import CollectiveError

        raise CollectiveError(str(exc)) from None


def _check_score_targets(est, X, y, sample_weight, classifier):
    """``(y, w, error)``: this rank's targets and weights for ``score_sharded``,
    checked as scikit-learn's ``score`` checks them (a column vector of labels
    is raveled; a regressor's ``y`` has its outputs), and the message of what
    is wrong with them (None when nothing is) for a collective check."""
    from sklearn.utils.validation import _num_samples

    try:
        n = _num_samples(X)
        if classifier:  # column_or_1d, which refuses a rank's empty shard
            y = np.asarray(y)
            if y.ndim == 2 and y.shape[1] == 1:
                y = y[:, 0]
            if y.ndim != 1:
                raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} "
                                 "instead")
            if y.size:  # accuracy_score's checks: NaN, continuous or mixed labels
                from sklearn.utils.multiclass import type_of_target, unique_labels

                kind = type_of_target(y, input_name="y")
                if kind not in ("binary", "multiclass"):
                    raise ValueError(f"y is {kind}, not class labels: classification "
                                     "metrics can't handle it")
                unique_labels(y, est.classes_)  # refuses strings against numbers
        else:
            y = np.asarray(y, dtype=np.float64)
            k = int(np.prod(est.estimators_[0].alpha.shape[1:]))
            got = y.reshape(y.shape[0], -1).shape[1] if y.ndim in (1, 2) and y.size else (
                k if y.ndim in (1, 2) else -1)
            if got != k:
                raise ValueError(f"y of shape {y.shape} does not have the model's {k} "
                                 f"output{'s' if k != 1 else ''}")
            if not np.all(np.isfinite(y)):
                raise ValueError("Input y contains NaN or infinity")
        if y.shape[0] != n:
            raise ValueError(f"X has {n} rows but y has {y.shape[0]}")
        # (scikit-learn's _check_sample_weight refuses a rank's empty shard)
        w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, np.float64)
        if w.ndim == 0:
            w = np.full(n, float(w))
        if w.shape != (n,):
            raise ValueError(f"sample_weight.shape == {w.shape}, expected {(n,)}!")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("sample_weight must be finite and non-negative")
    except (ValueError, TypeError) as exc:
        return None, None, str(exc)
    return y, w, None


#: the parameters that only act at prediction: set_params may change them after fit
PREDICT_PARAMS = ("routing", "combine", "n_voters")


def check_predict_params(est):
    """Validate the prediction parameters (:data:`PREDICT_PARAMS`) an estimator
    has: ``set_params(routing=...)`` after fit switches a fitted model, so its
    values are checked where they act, not only at fit (an invalid one was
    ignored or failed inside the routing; under MPI on the ranks with rows only)."""
    from sklearn.utils._param_validation import validate_parameter_constraints

    params = {k: getattr(est, k) for k in PREDICT_PARAMS
              if k in est._parameter_constraints and hasattr(est, k)}
    validate_parameter_constraints(
        {k: est._parameter_constraints[k] for k in params}, params,
        caller_name=type(est).__name__)


def _check_score_total(n_rows, weight):
    """``score_sharded``'s refusals of what every rank's rows sum to (the same
    values, so the same error, on every rank): no rows, or weights all 0."""
    if n_rows == 0:
        raise ValueError("no test rows on any rank: nothing to score")
    if not weight > 0:
        raise ValueError("Sample weights must contain at least one non-zero number (on "
                         "every rank together).")


def vote_weights(sq_dist):
    """Weights of soft routing: inverse squared distances to the ``k`` nearest
    centres (``sq_dist``, nearest first), normalised per row; a row on its
    nearest centre gives that model all the weight."""
    sq = np.asarray(sq_dist, dtype=np.float64)
    w = np.zeros_like(sq)
    if sq.size == 0:
        return w
    on_centre = sq[:, 0] <= 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        # d_0^2 / d_i^2 is in [0, 1] and never overflows
        w[~on_centre] = sq[~on_centre, :1] / sq[~on_centre]
    w[on_centre, 0] = 1.0
    w /= w.sum(axis=1, keepdims=True)
    return w


# --------------------------------------------------------------------------- the estimator base


def _custom_labels(part, labels, n_rows, n_parts, what):
    """``labels`` of a partitioner object of the user's (not one of the package's,
    which are right by construction) as partition indices, or a ``ValueError``:
    a label outside ``[0, n_parts)`` was dropped from every partition (a row
    trained on by none, or predicted by none: its output was uninitialised
    memory)."""
    name = type(part).__name__
    labels = np.asarray(labels)
    if labels.shape != (n_rows,) or (labels.size and labels.dtype.kind not in "iu"):
        raise ValueError(f"{name}.{what} must give one integer partition index per row "
                         f"({n_rows} rows), got an array of shape {labels.shape} and dtype "
                         f"{labels.dtype}")
    if labels.size and (labels.min() < 0 or labels.max() >= n_parts):
        raise ValueError(f"{name}.{what} must give partition indices in [0, {n_parts}), got "
                         f"values from {labels.min()} to {labels.max()}")
    return labels.astype(np.intp, copy=False)


def _own_method(part, name):
    """Whether ``part``'s method ``name`` is the package partitioners' own (not
    an object of the user's, nor a subclass that overrides it)."""
    return (isinstance(part, _BasePartitioner)
            and getattr(type(part), name, None) is getattr(_BasePartitioner, name))


def _set_partitions(est, part, sizes):
    """``partitioner_``, ``centers_`` and ``partition_sizes_`` of a fitted
    estimator or search.  The package's partitioners also get the
    estimator's ``feature_names_in_`` (they were fitted on the validated
    array), so that ``partitioner_.assign`` on a DataFrame checks its columns
    as a partitioner fitted on the DataFrame does; a user's partitioner is left
    as its own ``fit`` made it (its ``assign`` gets arrays from the package)."""
    est.partitioner_ = part
    est.centers_ = part.centers_
    est.partition_sizes_ = sizes
    if _own_method(part, "assign") and _own_method(part, "fit"):
        names = getattr(est, "feature_names_in_", None)
        if names is not None:
            part.feature_names_in_ = np.array(names, dtype=object)
        elif "feature_names_in_" in vars(part):
            del part.feature_names_in_


def _check_custom_partition(part, n_rows, n_features):
    """A user's partitioner (or a subclass overriding ``fit``) must hold
    ``labels_`` (one index per row), ``sizes_`` (their counts) and ``centers_``
    (one row of X's width per partition) that agree."""
    name = type(part).__name__
    missing = [a for a in ("labels_", "sizes_", "centers_") if not hasattr(part, a)]
    if missing:
        raise ValueError(f"{name}.fit must set labels_, sizes_ and centers_ (a partitioner "
                         f"object's protocol); {', '.join(missing)} missing")
    sizes = np.asarray(part.sizes_)
    labels = _custom_labels(part, part.labels_, n_rows, sizes.size, "fit's labels_")
    if not np.array_equal(np.bincount(labels, minlength=sizes.size), sizes):
        raise ValueError(f"{name}.sizes_ {sizes.tolist()} are not the counts of its labels_ "
                         f"{np.bincount(labels, minlength=sizes.size).tolist()}")
    if np.shape(part.centers_) != (sizes.size, n_features):
        raise ValueError(f"{name}.centers_ must have shape ({sizes.size}, {n_features}), got "
                         f"{np.shape(part.centers_)}")
    centers = np.asarray(part.centers_)
    if centers.dtype.kind not in "biuf" or not np.all(np.isfinite(centers)):
        # (NaN centres gave routing='vote' NaN decisions, silently)
        raise ValueError(f"{name}.centers_ must be finite real numbers")
    if not isinstance(part, _BasePartitioner) or not part._halo_is_this_class_s():
        # (a subclass's halos of the base class's fit are recomputed)
        _check_custom_halo(part, labels, sizes.size)


def _check_custom_halo(part, labels, n_parts):
    """A user's partitioner may set ``halo_indices_`` (one array of row indices per
    partition, the rows it trains on besides its own): within the rows, none of the
    partition's own, none twice (they would train twice, with double weight)."""
    halo = getattr(part, "halo_indices_", None)
    if halo is None:
        return
    name = type(part).__name__
    if len(halo) != n_parts:
        raise ValueError(f"{name}.halo_indices_ must hold one array per partition "
                         f"({n_parts}), got {len(halo)}")
    for j, rows in enumerate(halo):
        rows = np.asarray(rows)
        if rows.size == 0:
            continue
        if rows.ndim != 1 or rows.dtype.kind not in "iu" or rows.min() < 0 \
                or rows.max() >= labels.size:
            raise ValueError(f"{name}.halo_indices_[{j}] must be row indices in "
                             f"[0, {labels.size})")
        if np.unique(rows).size != rows.size:
            raise ValueError(f"{name}.halo_indices_[{j}] repeats rows (they would train "
                             "twice)")
        if np.any(labels[rows] == j):
            raise ValueError(f"{name}.halo_indices_[{j}] holds rows of partition {j} itself "
                             "(they would train twice)")


def _partition_digest(part):
    """A digest of a fitted partition (labels, sizes, centres, halos): equal on two
    ranks exactly when they hold the same partition."""
    h = hashlib.sha256()
    for value in (part.labels_, part.sizes_, part.centers_):
        a = np.ascontiguousarray(value)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    halo = getattr(part, "halo_indices_", None)
    for rows in (() if halo is None else halo):
        h.update(np.ascontiguousarray(rows, dtype=np.int64).tobytes() + b"|")
    return h.hexdigest()


def _partition_key(spec, X):
    """Equal for two fits exactly when the package's partitioner ``spec`` (unfitted)
    partitions the same rows ``X``: its parameters and the rows' bytes (a user's
    partitioner or subclass: None, never reused)."""
    if not (_own_method(spec, "fit") and _own_method(spec, "assign")):
        return None
    h = hashlib.sha256(_fingerprint(spec).encode())
    h.update(repr((type(X).__name__, X.shape, getattr(X, "dtype", None))).encode())
    for a in ((X.indptr, X.indices, X.data) if sp.issparse(X) else (X,)):
        # (the buffer itself: tobytes() copied all of X)
        h.update(memoryview(np.ascontiguousarray(a)).cast("B"))
    return h.hexdigest()


def _fit_custom_checked(part, X):
    """Fit a partitioner, checking a user's (:func:`_check_custom_partition`)."""
    part = part.fit(X)
    if not _own_method(part, "fit"):
        _check_custom_partition(part, X.shape[0], X.shape[1])
        if isinstance(part, _BasePartitioner):  # a subclass overriding fit
            part._halo_of_own_partition(X)
    return part


def _assign_rows(part, X):
    """The partition of every (checked) row: the package's partitioners skip a
    second validation; any other object with ``assign(X)`` (``make_partitioner``
    takes one) is asked through it."""
    if _own_method(part, "assign"):
        return part._assign_checked(X)
    return _custom_labels(part, part.assign(X), X.shape[0], np.asarray(part.sizes_).size,
                          "assign(X)")


def route_collectively(comm, part, route):
    """``route()`` (this rank's rows' partitions) before a collective exchange of
    rows: a user's ``assign`` (or ``centers_``) failing on one rank fails on every
    rank (the others waited in the exchange for good: collective predictions, the
    searches' validation rows). The package's partitioners cannot fail on rows that
    passed the checks: no message for them."""
    if _own_method(part, "assign") and _own_method(part, "nearest_partitions"):
        return route()
    try:
        result, failure = route(), None
    except Exception as exc:  # raised on every rank just below
        result, failure = None, exc
    comm.raise_failures(failure, counted=False)
    return result


def _nearest_rows(part, X, k):
    """``(order, sq_dist)`` of the ``k`` nearest centres of every row (soft
    routing): the package's partitioners', else from a custom partitioner's
    ``centers_``."""
    if _own_method(part, "assign") and _own_method(part, "nearest_partitions"):
        return part._nearest_partitions_checked(X, k)
    centers = getattr(part, "centers_", None)
    if centers is None:
        raise ValueError(f"routing='vote' needs the partitions' centres: "
                         f"{type(part).__name__} has no centers_")
    from .partition._storage import nearest_centers

    return nearest_centers(X, np.asarray(centers, dtype=np.float64), k)


class PartitionedEstimator(OwnInitName, VersionedState, BaseEstimator):
    """Shared fit/predict driver of the partitioned estimators.

    Subclasses implement ``_validate_local(X, y, sample_weight)`` (scikit-learn
    validation of one process's rows), ``_global_facts(session, X, y, w)``
    (attributes every rank must agree on) and ``_fit_partition(part, ctx)``
    (the local solver, returning ``(model, n_iter, n_support)``).
    """

    _parameter_constraints = {
        "n_partitions": [Count(1)],
        "halo": [Interval(numbers.Real, 0, None, closed="left")],
        "backend": [StrOptions(set(BACKEND_NAMES)), Backend],
        "n_jobs": N_JOBS,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    #: partitioner used by a named front door (``partitioner`` parameter otherwise)
    _default_partitioner = "random"
    #: work of a local solve grows like size ** _cost_exponent (placement)
    _cost_exponent = 2.0

    def _placement_costs(self, s, y, labels, sizes):
        """Estimated work of every partition's local solve, for placing the
        partitions on ranks (collective under MPI): ``size ** _cost_exponent``
        here; the classifiers refine it with the class counts."""
        return sizes.astype(np.float64) ** self._cost_exponent

    def _place_partitions(self, s, part, y, labels, sizes):
        """Owner rank of every partition: where the partitioner left its rows
        (sharded random partitions stay on their shards), else placed by the
        estimated work (collective under MPI)."""
        owners = getattr(part, "owners_", None) if _own_layout(part) else None
        if owners is None or len(owners) != sizes.size:
            with s.comm.phase("partitioning"):
                owners = s.place(self._placement_costs(s, y, labels, sizes) if s.size > 1
                                 else sizes.astype(np.float64))
        return np.asarray(owners, dtype=np.int64)

    def _get_partitioner(self):
        spec = getattr(self, "partitioner", self._default_partitioner)
        part = make_partitioner(spec, self.n_partitions, self.random_state,
                                getattr(self, "halo", 0.0))
        if isinstance(spec, str) and not self._routes_by_centre() and \
                "distinct_means" in part.get_params(deep=False):
            # nothing is routed by centre: coinciding means are no defect (DC-KRR)
            part.set_params(distinct_means=False)
        return part

    def _routes_by_centre(self):
        """Whether predictions go by the partitions' centres (else they average
        every partition's model)."""
        return True

    def _partition_count(self):
        """The partitions the partitioner is asked for (an instance's own
        ``n_partitions``, not the estimator's), or None when it has no such
        number (a custom partitioner object)."""
        n = getattr(self._get_partitioner(), "n_partitions", None)
        return int(n) if isinstance(n, numbers.Integral) else None

    def _backend(self):
        return get_backend(self.backend, self.n_jobs)

    def _session(self):
        return self._backend().session(verbose=self.verbose)

    # ------------------------------------------------------------------ setup
    def _validate_checked(self, X, y, sample_weight, whole=True):
        """``_validate_local`` plus the magnitude checks every distance and kernel
        needs (``ValueError`` when a row's squared norm overflows, or, for the
        ``whole`` training set, when every one underflows: a shard is checked
        with the others, in :meth:`_collect`)."""
        X, y, w = self._validate_local(X, y, sample_weight)
        if X.shape[0]:
            sq_norms = check_magnitude(X)
            if whole:
                check_tiny_features(X, sq_norms)
        return X, y, w

    def _collect(self, s, X, y, sample_weight):
        """This rank's validated rows (all of them on one process or rank 0 of
        root mode; none on the other ranks of root mode; the shard in sharded
        mode) with their global indices. Collective under MPI."""
        comm = s.comm
        if s.size == 1:
            failure = self.__dict__.pop("_param_error", None)  # (MPI on one rank)
            if failure is not None:
                raise failure
            X, y, w = self._validate_checked(X, y, sample_weight)
            return X, y, w, np.arange(X.shape[0], dtype=np.int64)
        error = None
        check_same_params(comm, self)
        if not s.sharded:
            result = failure = None
            if comm.rank == 0:
                try:
                    result = self._validate_checked(X, y, sample_weight)
                except (ValueError, TypeError) as exc:
                    error = str(exc)
                except Exception as exc:  # any other: every rank raises, not a hang
                    failure = exc
            comm.agree(error, failure=failure)
            meta = comm.bcast_obj(self._input_meta(*result) if comm.rank == 0 else None)
            if comm.rank == 0:
                X, y, w = result
                return X, y, w, np.arange(X.shape[0], dtype=np.int64)
            self._set_input_meta(meta)
            return self._empty_rows(meta)
        # sharded: every rank validates its own rows, then the ranks agree
        failure = None
        try:
            if X is None or (hasattr(X, "shape") and X.shape[0] == 0):
                raise ValueError("this rank's shard is empty: in sharded mode every rank "
                                 "passes at least one row")
            _check_shard_weights(sample_weight)
            result = self._validate_checked(X, y, sample_weight, whole=False)
        except (ValueError, TypeError) as exc:
            error = str(exc)
        except Exception as exc:  # any other: every rank raises, not a hang
            failure = exc
        comm.agree(error, failure=failure)
        X, y, w = result
        meta = self._input_meta(X, y, w)
        # given or not (the classifiers fill in ones: their w is never None)
        meta["weights"] = sample_weight is not None
        meta["magnitude"] = magnitude_stats(X)
        metas = comm.allgather(meta)
        error = self._merge_input_meta(metas, comm.rank) or tiny_features_error(
            *np.max([m["magnitude"] for m in metas], axis=0))
        if error is not None:  # the same message on every rank, from the same metadata
            raise CollectiveError(error)
        counts = comm.allgather(int(X.shape[0]))
        offset = int(sum(counts[:comm.rank]))
        return X, y, w, np.arange(offset, offset + X.shape[0], dtype=np.int64)

    def _input_meta(self, X, y, w):
        """What every rank must know about the training input (root mode: sent by
        rank 0; sharded mode: compared over the ranks)."""
        return {"n_features_in_": int(X.shape[1]),
                "feature_names_in_": getattr(self, "feature_names_in_", None),
                "sparse": bool(sp.issparse(X)), "y": self._y_meta(y), "weights": w is not None}

    def _set_input_meta(self, meta):
        self.n_features_in_ = meta["n_features_in_"]
        if meta["feature_names_in_"] is not None:
            self.feature_names_in_ = meta["feature_names_in_"]
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _merge_input_meta(self, metas, rank):
        """Check that the shards agree; returns this rank's error message or None."""
        first = metas[0]
        for r, m in enumerate(metas):
            if m["n_features_in_"] != first["n_features_in_"]:
                return (f"the shards have different numbers of features: rank 0 has "
                        f"{first['n_features_in_']}, rank {r} has {m['n_features_in_']}")
            names0, names = first["feature_names_in_"], m["feature_names_in_"]
            if (names0 is None) != (names is None) or (
                    names0 is not None and list(names0) != list(names)):
                return f"the shards have different feature names (rank 0 and rank {r})"
            if m["sparse"] != first["sparse"]:
                kinds = {True: "a sparse matrix", False: "a dense array"}
                return (f"the shards differ in storage: rank 0 passes {kinds[first['sparse']]}, "
                        f"rank {r} {kinds[m['sparse']]}; pass the same format on every rank")
            if m["weights"] != first["weights"]:
                return ("sample_weight must be given on every rank (each its own rows' "
                        f"weights) or on none: rank 0 and rank {r} differ")
        return self._merge_y_meta([m["y"] for m in metas])

    def _y_meta(self, y):
        return None

    def _merge_y_meta(self, metas):
        return None

    def _empty_rows(self, meta):
        d = meta["n_features_in_"]
        X = sp.csr_matrix((0, d)) if meta["sparse"] else np.zeros((0, d))
        w = np.zeros(0) if meta["weights"] else None
        return X, self._empty_y(meta["y"]), w, np.zeros(0, dtype=np.int64)

    # ------------------------------------------------------------------ partitioning
    def _partition_rows(self, s, X, index):
        """Fit the partitioner (collectively) and return it with this rank's labels."""
        comm = s.comm
        if s.size == 1:
            spec = self._get_partitioner()
            # a search's refit: the partition the search made of the same rows with
            # the same partitioner (its K-means ran twice)
            reuse = self.__dict__.pop("_search_partition", None)
            if reuse is not None and reuse[0] == _partition_key(spec, X):
                part = pickle.loads(reuse[1])
            else:
                part = _fit_custom_checked(spec, X)
            return part, np.asarray(part.labels_)
        if not s.sharded:
            part = comm.run_collectively(
                lambda: _fit_custom_checked(self._get_partitioner(), X) if comm.rank == 0
                else None)
            part = comm.bcast_obj(part)
            labels = np.asarray(part.labels_) if comm.rank == 0 else np.zeros(0, np.intp)
            return part, labels
        partitioner = self._get_partitioner()
        if not hasattr(partitioner, "fit_sharded"):
            comm.agree(f"{type(partitioner).__name__} cannot partition sharded data (it has "
                       "no fit_sharded); use root mode (MPIBackend(sharded=False))")
        if not _own_method(partitioner, "fit") and _own_method(partitioner, "fit_sharded"):
            comm.agree(f"{type(partitioner).__name__} overrides fit but not fit_sharded: "
                       "sharded mode would partition with the base class's algorithm; "
                       "use root mode (MPIBackend(sharded=False)) or override fit_sharded")
        # (a user's fit_sharded must fail on every rank before its collective calls,
        # as the package's do: README, custom partitioners)
        part = comm.run_collectively(partitioner.fit_sharded, comm, X)
        if not _own_method(part, "fit_sharded"):  # a user's: checked on every rank alike
            error = failure = None
            # (a check, not the algorithm's traffic: uncounted)
            n_rows = int(sum(comm._allgather_uncounted(int(X.shape[0]))))
            digest = None
            try:
                _check_custom_partition(part, n_rows, X.shape[1])
                digest = _partition_digest(part)
            except ValueError as exc:
                error = str(exc)
            except Exception as exc:  # any other: every rank raises, not a hang
                failure = exc
            # (the same partition on every rank: a rank's other seed gave the ranks
            # other models, another partition count an MPI error later)
            comm.agree(error, counted=False, failure=failure)
            comm.agree(None, counted=False, same=digest,
                       mismatch=f"got another partition than rank 0 from "
                                f"{type(part).__name__}.fit_sharded (labels_, sizes_ or "
                                "centers_ differ): it must give every rank the same one")
        start = int(index[0]) if index.size else 0
        if isinstance(part, _BasePartitioner) and not _own_method(part, "fit_sharded"):
            part._halo_of_own_partition(X, comm, start)  # (collective)
        return part, np.asarray(part.labels_[start:start + X.shape[0]])

    # ------------------------------------------------------------------ redistribution
    def _distribute(self, s, X, y, w, index, labels, owners, part):
        """This rank's partitions, as lazily materialised tasks."""
        P = owners.size
        groups = _group_by(labels, P)
        halo = _halo_of(part)
        if halo is not None and (s.size == 1 or not s.sharded) and labels.size:
            # one process, or rank 0 of root mode (all rows, index == arange):
            # a partition's rows are its own and its halo, in data order
            groups = [np.sort(np.concatenate([g, h])) for g, h in zip(groups, halo)]
        if s.size == 1:
            return [_LazyPartition(j, X, y, w, g, index) for j, g in enumerate(groups)]
        comm = s.comm
        mine = [j for j in range(P) if owners[j] == comm.rank]
        if not s.sharded:
            return self._scatter_partitions(s, X, y, w, index, groups, owners, mine)
        if halo is None and _own_layout(part) and getattr(part, "rows_stay_local_", False):
            # sharded random partitions: every row is already on its owner
            return [_LazyPartition(j, X, y, w, groups[j], index) for j in mine]
        return self._exchange_partitions(s, X, y, w, index, labels, owners, mine, halo)

    def _scatter_partitions(self, s, X, y, w, index, groups, owners, mine):
        """Root mode: one scatter from rank 0 sends every rank the rows of its
        partitions (rank 0 keeps its own as lazy slices)."""
        comm = s.comm
        blocks = None
        if comm.rank == 0:
            blocks = []
            for r in range(comm.size):
                js = [j for j in range(owners.size) if owners[j] == r] if r else []
                rows = np.concatenate([groups[j] for j in js]) if js else np.zeros(0, np.int64)
                part = np.repeat(js, [groups[j].size for j in js]).astype(np.int64)
                blocks.append(_pack_block(X, y, w, index, part, rows))
        got = _unpack_block(comm.Scatterv(blocks))
        if comm.rank == 0:
            return [_LazyPartition(j, X, y, w, groups[j], index) for j in mine]
        return self._received_partitions([got], mine)

    def _exchange_partitions(self, s, X, y, w, index, labels, owners, mine, halo=None):
        """Sharded mode: one all-to-all moves every row to its partition's owner
        (and a halo row also to the owners of the partitions whose halo holds it)."""
        comm = s.comm
        rows_of = np.arange(labels.size, dtype=np.int64)
        part_of = np.asarray(labels, dtype=np.int64)
        if halo is not None and labels.size:
            extra = [(h, j) for j, h in enumerate(_shard_halos(halo, index))]
            rows_of = np.concatenate([rows_of] + [r for r, _ in extra])
            part_of = np.concatenate([part_of] + [np.full(r.size, j, np.int64)
                                                  for r, j in extra])
        dest = owners[part_of] if part_of.size else np.zeros(0, np.int64)
        blocks = []
        for r in range(comm.size):
            sel = np.flatnonzero(dest == r)
            sel = sel[np.lexsort((index[rows_of[sel]], part_of[sel]))]
            blocks.append(_pack_block(X, y, w, index, part_of[sel], rows_of[sel]))
        return self._received_partitions([_unpack_block(b) for b in comm.Alltoallv(blocks)],
                                         mine)

    def _received_partitions(self, blocks, mine):
        """This rank's partitions from the blocks received (each sorted by the global
        index: the serial data order inside a partition)."""
        d, sparse = self.n_features_in_, self._fit_sparse
        got = {key: np.concatenate([b[key] for b in blocks]) for key in blocks[0]}
        Xr = _unpack_rows(got, d, sparse)
        yr, wr, ir, pr = got["y"], got.get("w"), got["index"], got["part"]
        tasks = []
        for j in mine:
            rows = np.flatnonzero(pr == j)
            rows = rows[np.argsort(ir[rows], kind="stable")]  # the global data order
            tasks.append(_ReadyPartition(Partition(j, Xr[rows], yr[rows],
                                                   None if wr is None else wr[rows], ir[rows])))
        return tasks

    # ------------------------------------------------------------------ the driver
    def _fit_partitioned(self, s, X, y, w, index, ctx):
        """Partition, place, move, solve and gather; sets ``partitioner_``,
        ``centers_``, ``partition_sizes_``, ``estimators_`` and ``fit_stats_``."""
        comm = s.comm
        self._fit_sparse = bool(sp.issparse(X))
        t0 = time.perf_counter()
        with comm.phase("partitioning"):
            part, labels = self._partition_rows(s, X, index)
        t_part = time.perf_counter() - t0
        sizes = np.asarray(part.sizes_, dtype=np.int64)
        empty = np.flatnonzero(sizes == 0)
        if empty.size:
            comm.agree(f"partitions {empty.tolist()} are empty; use fewer partitions or "
                       "another partitioner")
        halo_sizes = _halo_sizes(part, sizes)
        owners = self._place_partitions(s, part, y, labels, sizes + halo_sizes)
        # the solves this process runs at once (a memory check's factor)
        mine = (sizes + halo_sizes)[owners == comm.rank]
        ctx["concurrent"] = max(1, min(int(s.n_workers), mine.size))
        check = getattr(self, "_check_solve_memory", None)
        if check is not None:  # before any row moves (collective under MPI)
            check(comm, mine, ctx["concurrent"])
        t0 = time.perf_counter()
        with comm.phase("redistribution"):
            tasks = self._distribute(s, X, y, w, index, labels, owners, part)
        t_move = time.perf_counter() - t0

        # the local solves' warnings (kernel ridge's ill-conditioned systems): one per
        # fit for every partition of every rank, raised after the solves
        reports = ctx.setdefault("solve_reports", [])

        def solve(task):
            t = time.perf_counter()
            p = task.materialize()
            model, n_iter, n_sv = self._fit_partition(p, ctx)
            return p.j, model, int(n_iter), int(n_sv), time.perf_counter() - t

        t0 = time.perf_counter()
        with comm.phase("training"):  # no message: every rank solves its own partitions
            try:
                results, failure = s.map(solve, tasks, "fit partitions"), None
            except Exception as exc:  # raised on every rank just below
                results, failure = None, exc
        t_train = time.perf_counter() - t0
        t0 = time.perf_counter()
        with comm.phase("model_gather"):
            results = self._gather_results(comm, results, failure)
        t_gather = time.perf_counter() - t0
        # timings and counters of every rank in one collective (it is not counted)
        gathered = comm.allgather(((t_part, t_move, t_train, t_gather),
                                   comm.counter.summary(),
                                   min(s.n_workers, len(tasks)) if len(tasks) else 0,
                                   list(reports)))
        timings = [g[0] for g in gathered]
        solve_reports = [r for g in gathered for r in g[3]]
        if solve_reports:  # (the same on every rank)
            self._warn_solve_reports(solve_reports, int(sizes.size))
        _set_partitions(self, part, sizes)
        self.estimators_ = [r[1] for r in results]
        report = comm_report([g[1] for g in gathered])
        self.fit_stats_ = {
            "partition_seconds": float(max(t[0] for t in timings)),
            "redistribution_seconds": float(max(t[1] for t in timings)),
            "solve_seconds": [float(r[4]) for r in results],
            "solve_wall_seconds": float(max(t[2] for t in timings)),
            "gather_seconds": float(max(t[3] for t in timings)),
            "n_iter": [r[2] for r in results],
            "n_support": [r[3] for r in results],
            "partition_sizes": sizes.tolist(),
            "halo_sizes": halo_sizes.tolist(),
            "owners": owners.tolist(),
            "comm": report,
            "comm_bytes": int(report["total"]["bytes"]),
            "comm_messages": int(report["total"]["messages"]),
            "backend": s.backend.name,
            "sharded": s.sharded,
            "n_ranks": s.size,
            # the workers that solved partitions, over all ranks (as DisSMOSVC's)
            "n_workers": max(1, sum(int(g[2]) for g in gathered)),
            "threads_per_worker": s.threads,
        }

    @staticmethod
    def _gather_results(comm, results, failure):
        """Every rank's ``(j, model, ...)`` results, sorted by partition; one
        allgather, which also tells every rank whether any local solve failed
        (then every rank raises: the failing one its own exception)."""
        if comm.size == 1:
            if failure is not None:
                raise failure
            return sorted(results, key=lambda r: r[0])
        mine = (failure_text(failure), results if failure is None else None)
        blobs = comm.Allgatherv(np.frombuffer(pickle.dumps(mine, protocol=5), dtype=np.uint8))
        entries = [pickle.loads(blob.tobytes()) for blob in blobs]
        raise_if_any_failed(failure, [e[0] for e in entries])
        return sorted((r for e in entries for r in e[1]), key=lambda r: r[0])

    # ------------------------------------------------------------------ prediction
    def _route(self, X):
        """Nearest-centre partition of every row of ``X`` and the groups per partition."""
        # X was checked by predict (_check_X): routed without a second validation
        groups = _group_by(_assign_rows(self.partitioner_, X), len(self.estimators_))
        return [(j, idx) for j, idx in enumerate(groups) if idx.size]

    def predict_sharded(self, X, comm=None):
        """Predict a test set sharded over MPI ranks (Algorithm 5), collectively.

        Every rank passes its own test rows and gets their predictions back:
        each rank routes its rows to their nearest partition centre, sends
        them to the rank that owns the partition, which predicts them, and the
        predictions return to their rows. Every rank must call it (SPMD). The
        messages are added to ``fit_stats_['comm']`` (phase ``prediction``).
        :meth:`predict` needs no communication (every rank holds every model).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_local, n_features)
            This rank's test rows (none is allowed); rows that fail the
            checks of :meth:`predict` on any rank are the same ``ValueError``
            on every rank.
        comm : mpi4py.MPI.Comm or SelfCommunicator, default=None
            The communicator (default: the estimator's ``MPIBackend`` one, else
            ``COMM_WORLD``; without mpi4py, one process: :meth:`predict`'s
            predictions).

        Returns
        -------
        y_pred : ndarray of shape (n_local,) or (n_local, n_targets)

        Examples
        --------
        Under ``mpiexec -n 4 python -m mpi4py script.py``, with ``X_local`` every
        rank's rows:

        >>> y_local = model.predict_sharded(X_local)  # doctest: +SKIP
        """
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        return self._predict_sharded(X, comm)

    def _predict_sharded(self, X, comm, error=None, weighted=None):
        """:meth:`predict_sharded`, with the check of ``X`` and this rank's other
        ``error`` (of ``score_sharded``'s ``y``) agreed in one collective.
        ``weighted`` (``score_sharded``, on every rank): ``(rows, weights given)``,
        checked as ``fit`` checks them: weights on every rank that has rows, or on
        none (else some ranks' rows counted with weight 1: a score of neither)."""
        failure = None
        if error is None:
            try:  # bad rows on one rank: the same error on every rank, not a hang
                X = self._check_X(X, allow_empty=True)
            except (ValueError, TypeError) as exc:
                error = str(exc)
            except Exception as exc:  # any other: every rank raises too
                failure = exc
        session = self._sharded_session(comm)
        with session, session.comm.phase("prediction"):
            if weighted is not None and session.comm.size > 1:
                given = [(r, w) for r, (n, w) in enumerate(session.comm.allgather(weighted))
                         if n]
                odd = [r for r, w in given if w != given[0][1]]
                if odd and error is None:
                    error = ("sample_weight must be given on every rank that has rows (each "
                             f"its own rows' weights) or on none: rank {given[0][0]} and "
                             f"rank {odd[0]} differ")
            session.comm.agree(error, failure=failure, same=self._model_digest(), mismatch=(
                "hold another model than rank 0: predict_sharded needs the same fitted "
                "model on every rank (fit it collectively with backend='mpi', or with the "
                "same parameters and an int random_state on every rank)"))
        # (X checked above: a second check warned twice about feature names)
        return self._predict(X, session=session, checked=True)

    def _model_digest(self):
        """A short string equal on two ranks when they hold the same fitted model (as
        far as routing and prediction can tell cheaply): the class, the parameters,
        the centres, partition sizes, classes, the number of local models and a full
        model's support set."""
        parts = [type(self).__qualname__, _fingerprint(self.get_params(deep=False))]
        for name in ("n_features_in_", "classes_", "centers_", "partition_sizes_",
                     "support_"):
            value = getattr(self, name, None)
            if value is not None:
                parts.append(f"{name}={_fingerprint(np.asarray(value))}")
        models = getattr(self, "estimators_", None)
        if models is not None:
            parts.append(f"{len(models)} models")
        return hashlib.sha256("|".join(parts).encode()).hexdigest()

    def score_sharded(self, X, y, sample_weight=None, comm=None):
        """The score of a test set sharded over MPI ranks, on every rank.

        Accuracy (classifiers) or the coefficient of determination R^2
        (regressors, averaged over the outputs) of all ranks' rows together,
        from :meth:`predict_sharded` and one reduction (two for R^2: the
        weighted mean of ``y`` first, so that targets far from zero do not
        cancel), after one small allgather of whether each rank passed
        weights. Collective; a ``y`` or ``sample_weight`` that does not fit
        ``X`` on any rank is the same ``ValueError`` on every rank, and so is a
        ``sample_weight`` given on some of the ranks that have rows only (as
        ``fit``: every such rank passes its rows' weights, or none does).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_local, n_features)
        y : array-like of shape (n_local,) or (n_local, n_targets)
        sample_weight : array-like of shape (n_local,), default=None
        comm : mpi4py.MPI.Comm or SelfCommunicator, default=None

        Returns
        -------
        score : float
        """
        from sklearn.base import is_classifier

        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        classifier = is_classifier(self)
        y, w, error = _check_score_targets(self, X, y, sample_weight, classifier)
        pred = self._predict_sharded(X, comm, error,
                                     weighted=(0 if w is None else int(w.size),
                                               sample_weight is not None))
        with self._sharded_session(comm) as s:
            if classifier:
                hits = np.array([np.sum(w * (pred == y)), np.sum(w), w.size], dtype=float)
                hits = s.comm.Allreduce(hits)
                _check_score_total(hits[2], hits[1])  # the same on every rank
                return float(hits[0] / hits[1])
            k = 1 if np.ndim(pred) == 1 else pred.shape[1]
            yy = y.reshape(y.shape[0], k)
            pp = np.asarray(pred, dtype=np.float64).reshape(yy.shape)
            # two passes (the weighted mean first): the one-pass sum of squares
            # cancelled for targets far from zero (an offset of 1e9: R^2 0.9994
            # against 0.9819)
            first = s.comm.Allreduce(np.concatenate([[w.size, w.sum()], w @ yy]))
            _check_score_total(first[0], first[1])
            if first[0] < 2:  # as r2_score
                warnings.warn("R^2 score is not well-defined with less than two samples.",
                              UndefinedMetricWarning)
                return float("nan")
            first = first[1:]
            mean = first[1:] / first[0]
            second = s.comm.Allreduce(np.concatenate([w @ (yy - mean) ** 2,
                                                      w @ (yy - pp) ** 2]))
            tot, res = second[:k], second[k:]
            # scikit-learn's r2_score: a constant target scores 1 when predicted
            # exactly, else 0
            r2 = np.where(tot > 0, 1 - res / np.where(tot > 0, tot, 1),
                          np.where(res == 0, 1.0, 0.0))
            return float(np.mean(r2))

    def _sharded_session(self, comm=None):
        """The session of a collective (Algorithm 5) prediction: the estimator's MPI
        communicator, or ``comm``, or ``COMM_WORLD``."""
        from .backends import MPIBackend, SelfCommunicator

        if isinstance(comm, SelfCommunicator):  # one process, as fit_sharded takes it
            return SerialBackend().session()
        backend = self._backend()
        if comm is None and isinstance(backend, MPIBackend):
            comm = backend.comm
        if comm is None:
            try:
                import mpi4py  # noqa: F401
            except ImportError:  # no MPI: one process (a model loaded elsewhere)
                return SerialBackend().session()
        return MPIBackend(comm=comm, sharded=True).session(call="predict_sharded")

    @contextlib.contextmanager
    def _local_session(self, rows_per_model, stored_rows):
        """The session of a local prediction giving each model about
        ``rows_per_model`` rows against at most ``stored_rows`` rows of its
        own: the threads backend's pool, else one worker (under MPI every rank
        predicts its own rows). BLAS runs one thread for its length when
        :func:`~cakernels._kernels.wants_one_blas_thread` says so: when the
        kernels share their row blocks among the session's threads themselves
        (OpenBLAS threads left spinning by a multi-threaded product would slow
        them down several times on a machine with few cores), and when a
        model's products are large enough for OpenBLAS to thread them (a
        10-row batch against thousands of stored rows on two BLAS threads
        waited ~1 ms for a busy core at every call, 2-3.6x the time next to one
        busy process). Smaller products are left alone: changing BLAS's
        threads and back costs 40-100 us, 5-15% of a small prediction on a
        quiet machine."""
        backend = self._backend()
        session = backend.session() if backend.name == "threads" else SerialBackend().session()
        one = wants_one_blas_thread(rows_per_model, stored_rows)
        with session as s, blas_limits(1) if one else contextlib.nullcontext():
            yield s

    def _stored_rows(self):
        """The most training rows a local model holds (its partition's)."""
        return float(np.max(self.partition_sizes_)) if len(self.partition_sizes_) else 0.0

    def _n_voters(self):
        """Models that predict every test row: 1 (the nearest centre's, Algorithm
        5) unless the estimator routes softly (``routing='vote'``)."""
        return 1

    def _apply_routed(self, X, make_local, out, encode=None, session=None):
        """Evaluate ``make_local(threads)(model, X_group)`` on every nearest-centre
        group of ``X`` and scatter the results into ``out``; with an MPI
        ``session``, collectively over sharded rows (Algorithm 5). ``threads`` is
        the OpenMP/BLAS share of one worker. With soft routing
        (:meth:`_n_voters` > 1) ``out`` receives the weighted mean of the
        nearest models' values instead (``encode`` must then be None)."""
        k = self._n_voters()
        if k > 1:
            return self._apply_voted(X, make_local, out, session, k)
        if session is not None and session.size > 1:
            with session, blas_limits(1):
                labels = self._route_collectively(
                    session, lambda: _assign_rows(self.partitioner_, X) if X.shape[0]
                    else np.zeros(0, np.intp))
                vals = self._apply_routed_sharded(session, X, np.arange(X.shape[0]), labels,
                                                  make_local(session.threads),
                                                  out.shape[1:], encode)
                out[:] = vals if encode is None else self._decode(vals)
                return out
        with self._local_session(X.shape[0] / len(self.estimators_), self._stored_rows()) as s:
            groups = self._route(X)
            local = make_local(s.threads)
            results = s.map(lambda item: local(self.estimators_[item[0]], X[item[1]]), groups,
                            "predict partitions")
        for (_, idx), res in zip(groups, results):
            out[idx] = res
        return out

    def _route_collectively(self, session, route):
        """:func:`route_collectively` with this estimator's partitioner."""
        return route_collectively(session.comm, self.partitioner_, route)

    def _apply_voted(self, X, make_local, out, session, k):
        """Soft routing: every row's ``k`` nearest partitions' models evaluate it
        and ``out`` gets their mean weighted by the inverse squared distances to
        the centres (a row on a centre takes that model alone)."""
        n = X.shape[0]

        def nearest():
            if n:
                return _nearest_rows(self.partitioner_, X, k)
            return np.zeros((0, 1), np.intp), np.zeros((0, 1))

        sharded = session is not None and session.size > 1
        order, sq = self._route_collectively(session, nearest) if sharded else nearest()
        k = order.shape[1]
        rows = np.repeat(np.arange(n), k)
        parts = order.ravel()
        if session is not None and session.size > 1:
            with session, blas_limits(1):
                vals = self._apply_routed_sharded(session, X, rows, parts,
                                                  make_local(session.threads), out.shape[1:],
                                                  None)
        else:
            vals = np.empty((rows.size,) + out.shape[1:])
            groups = [(j, idx) for j, idx in enumerate(_group_by(parts, len(self.estimators_)))
                      if idx.size]
            with self._local_session(rows.size / len(self.estimators_),
                                     self._stored_rows()) as s:
                local = make_local(s.threads)
                results = s.map(
                    lambda item: local(self.estimators_[item[0]], X[rows[item[1]]]), groups,
                    "predict partitions")
            for (_, idx), res in zip(groups, results):
                vals[idx] = res
        w = vote_weights(sq)
        vals = vals.reshape((n, k) + out.shape[1:])
        out[:] = np.einsum("nk,nk...->n...", w, vals)
        return out

    def _apply_routed_sharded(self, s, X, rows, parts, local, shape, encode):
        """Algorithm 5 on sharded test data: item ``i`` (row ``rows[i]`` of this
        rank's ``X`` for partition ``parts[i]``) goes to the rank that owns the
        partition, which evaluates it, and the values return (encoded floats
        when ``encode`` is given)."""
        comm = s.comm
        values = np.zeros((rows.size,) + tuple(shape))
        with comm.phase("prediction"):
            sizes = np.asarray(self.partition_sizes_, dtype=np.float64)
            owners = lpt_placement(sizes ** self._cost_exponent, comm.size)
            dest = owners[parts] if parts.size else np.zeros(0, np.int64)
            send = {}
            for r in range(comm.size):
                items = np.flatnonzero(dest == r)
                packed = _pack_rows(X, rows[items])
                packed["part"] = parts[items].astype(np.int64)
                packed["row"] = items.astype(np.int64)
                for key, arr in packed.items():
                    send.setdefault(key, []).append(arr)
            got = {key: comm.Alltoallv(arrs) for key, arrs in sorted(send.items())}
            # evaluate what was received, source by source
            replies, failure = [], None
            try:
                for src in range(comm.size):
                    part_src = {key: got[key][src] for key in got}
                    Xs = _unpack_rows(part_src, self.n_features_in_, sp.issparse(X))
                    res = np.zeros((Xs.shape[0],) + tuple(shape))
                    for j in np.unique(part_src["part"]):
                        sel = np.flatnonzero(part_src["part"] == j)
                        vals = local(self.estimators_[j], Xs[sel])
                        res[sel] = encode(vals) if encode is not None else vals
                    replies.append(np.ascontiguousarray(res, dtype=np.float64))
            except Exception as exc:  # (a kernel that overflows on a row sent here)
                failure = exc
            # every rank raises when one failed (it skipped the Alltoallv below and the
            # others waited there for good); a control message, not counted
            comm.raise_failures(failure, counted=False)
            back = comm.Alltoallv(replies)
            for r in range(comm.size):
                items = send["row"][r]
                if items.size:
                    values[items] = back[r].reshape((items.size,) + tuple(shape))
        self._add_prediction_comm(comm)
        return values

    def _add_prediction_comm(self, comm):
        """Add this prediction's messages to ``fit_stats_['comm']`` (phase 'prediction')."""
        report = comm_report(comm.allgather(comm.counter.summary()))
        stats = getattr(self, "fit_stats_", None)
        if not stats or "comm" not in stats or stats["comm"]["n_ranks"] != report["n_ranks"]:
            return
        for mine, new in zip(stats["comm"]["ranks"] + [stats["comm"]["total"]],
                             report["ranks"] + [report["total"]]):
            # every message of the prediction's session, by phase and by operation,
            # so that the phases and the operations still add up to the totals
            for phase, v in new["by_phase"].items():
                for key in ("bytes", "messages"):
                    mine["by_phase"][phase][key] += v[key]
            for op, v in new["by_op"].items():
                o = mine["by_op"].setdefault(op, {"bytes": 0, "messages": 0, "calls": 0})
                for key in o:
                    o[key] += v[key]
            for key in ("bytes", "messages"):
                mine[key] += new[key]
        stats["comm_bytes"] = int(stats["comm"]["total"]["bytes"])
        stats["comm_messages"] = int(stats["comm"]["total"]["messages"])

    def _decode(self, codes):
        return codes

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
