"""The five partitioners and :func:`make_partitioner`."""

import contextlib
import copy
import numbers
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, clone
from sklearn.cluster import KMeans, MiniBatchKMeans
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import _memory
from .._kernels import (
    check_magnitude,
    check_tiny_features,
    magnitude_stats,
    tiny_features_error,
)
from .._own_init import OwnInitName
from .._persist import VersionedState
from .._state import keeps_state_on_failure
from .._params import Count
from ..backends._budget import blas_limits, forked, openmp_limits
from ..backends._comm import failure_text
from . import _storage
from ._greedy import _Capacity, greedy_capacity_assign
from ._halo import halo_indices, halo_indices_sharded
from ._storage import (
    _int32_indices,
    canonical_csr,
    count_nonzero,
    storage_for,
    nearest_center,
    nearest_centers,
    partition_means,
    partition_storage,
    squared_distances,
    to_partition_storage,
)

def _check_n_partitions(n_partitions, n_samples):
    if n_partitions > n_samples:
        raise ValueError(
            f"n_partitions={n_partitions} is larger than the number of samples "
            f"({n_samples}); every partition needs at least one sample"
        )


# ----------------------------------------------------------------------------
# distinct centres
# ----------------------------------------------------------------------------
# Two identical centres make a partition that nearest-centre routing can never
# reach (ties go to the lowest index, as scikit-learn's KMeans.predict): its
# model is trained and never used. The partitioners below therefore pick
# distinct rows as initial centres, replace K-means centres that collapsed
# onto each other by distinct samples, and route by the assignment's centres
# when the recomputed means of two partitions coincide.

#: mantissa bits two rows must share, value by value, to count as one point: K-means
#: returns centres such as 1.0000000000000002 for a cluster of samples at 1.0,
#: which compared bit for bit passed for a point of their own (the partition
#: was trained and never routed to)
_DISTINCT_BITS = 40


def _row_keys(rows):
    """A hashable key per row: its values to :data:`_DISTINCT_BITS` bits of
    the row's largest magnitude (about 12 significant digits of it; a value
    below that, such as K-means' -5.6e-17 next to 1, counts as 0)."""
    rows = np.asarray(rows, dtype=np.float64).reshape(np.shape(rows)[0], -1)
    top = _key_scale(np.max(np.abs(rows), axis=1) if rows.shape[1]
                     else np.zeros(rows.shape[0]))
    q = _key_values(rows, top[:, None])
    return [t.tobytes() + r.tobytes() for t, r in zip(top, np.ascontiguousarray(q))]


def _key_scale(top):
    """The rows' largest magnitudes, rounded to :data:`_DISTINCT_BITS` bits."""
    bits = float(2 ** _DISTINCT_BITS)
    m, e = np.frexp(top)
    return np.ldexp(np.round(m * bits) / bits, e)


def _key_values(values, scale):
    """``values`` in units of ``scale`` (of :func:`_key_scale`; 0: 1), rounded to
    :data:`_DISTINCT_BITS` bits, -0.0 made 0.0."""
    bits = float(2 ** _DISTINCT_BITS)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.round(values / np.where(scale > 0, scale, 1.0) * bits) + 0.0


def _duplicate_rows(C):
    """Mask of the rows of ``C`` equal to an earlier row to about 12
    significant digits (:func:`_row_keys`). Hashes the rows: O(rows x
    columns), where ``np.unique(axis=0)`` took 10 s on 4 rows of 10^6 columns."""
    keys = _row_keys(C)
    seen, dup = set(), np.zeros(len(keys), dtype=bool)
    for i, key in enumerate(keys):
        dup[i] = key in seen
        seen.add(key)
    return dup


#: rounds of random candidates tried for distinct centres before giving up
_DISTINCT_ROUNDS = 8

#: scikit-learn's K-means runs its Lloyd iterations on OpenMP threads that
#: wait for each other at every iteration's barrier by spinning. Below this
#: much work (samples x features x clusters) one thread is as fast on an idle
#: machine (measured on 2 cores, ``benchmarks/bench_contention.py --parts
#: kmeans``: cadata 16,000 x 8, 8 clusters, 16 ms against 20 ms on 2 threads;
#: ijcnn1 49,990 x 22, 16 clusters, 46 ms against 49 ms), while next to one
#: busy process the two threads took 1.8-16x longer (cadata: 597 ms against
#: 38 ms); one thread also makes the centres independent of the thread count.
#: Above it (200,000 x 22, 16 clusters: 1.6x faster on 2 idle cores) K-means
#: keeps the threads it is given.
KMEANS_ONE_THREAD_WORK = 1 << 25


def _make_distinct(centers, fetch, n, rng, what, scan):
    """Replace the rows of ``centers`` that repeat an earlier row by samples
    (``fetch(global_indices)`` gives them dense) equal to no centre.

    Candidates come in rounds of random samples; the same draws on every MPI
    rank (``rng`` is replicated and ``fetch`` collective) give the same
    centres everywhere. When the rounds find too few (rare distinct rows
    among many duplicates), ``scan(seen, need)`` (collective) passes over
    all rows for up to ``need`` rows whose keys are not in ``seen``, in data
    order. Raises ``ValueError`` only when X has fewer distinct samples than
    centres.
    """
    centers = np.array(centers, dtype=np.float64)
    dup = _duplicate_rows(centers)
    if not dup.any():
        return centers
    seen = set(_row_keys(centers[~dup]))
    todo = list(np.flatnonzero(dup))

    def take(rows):
        if len(rows) == 0:
            return False
        for key, row in zip(_row_keys(rows), rows):
            if key not in seen:
                seen.add(key)
                centers[todo.pop(0)] = row
                if not todo:
                    return True
        return False

    for _ in range(_DISTINCT_ROUNDS):
        if take(fetch(rng.choice(n, min(n, 8 * centers.shape[0]), replace=False))):
            return centers
    if take(scan(seen, len(todo))):
        return centers
    # the pass found every sample equal to no centre kept so far: X has fewer
    # distinct samples than centres (how many fewer is unknown when the kept
    # centres are K-means means, not samples)
    raise _too_few_distinct(what, centers.shape[0], centers.shape[0] - len(todo))


def _too_few_distinct(what, n_centers, found):
    return ValueError(
        f"{what} needs {n_centers} distinct centres but X has fewer than "
        f"{n_centers} distinct samples (to about 12 significant digits; found "
        f"{found} distinct centres); use fewer partitions or remove "
        "the duplicates (features with a large common offset, whose rows differ only beyond "
        "12 digits, count as duplicates: centre them, e.g. StandardScaler)")


#: most rows per block of the pass over all rows for distinct centres (fewer for
#: wide rows: a block's dense copy stays within DENSE_BUDGET_BYTES)
_SCAN_BLOCK_ROWS = 4096


def _scan_distinct(X, seen, need):
    """Up to ``need`` rows of ``X`` (dense, in data order) whose keys are in
    neither ``seen`` nor each other: one pass in blocks, stopping early."""
    found, keys = [], set(seen)
    rows = _storage.dense_block_rows(X.shape[1], _SCAN_BLOCK_ROWS)
    for start in range(0, X.shape[0], rows):
        block = X[start:start + rows]
        block = block.toarray() if sp.issparse(block) else np.asarray(block, np.float64)
        for key, row in zip(_row_keys(block), block):
            if key not in keys:
                keys.add(key)
                found.append(row)
                if len(found) == need:
                    return np.array(found)
    return np.array(found).reshape(len(found), X.shape[1])


def _sparse_row_keys(X):
    """:func:`_row_keys` of CSR rows without their dense copies: the scale and the
    rounded values of every stored entry that does not round to 0, with its column
    (canonical CSR: sorted columns, no duplicates). Two rows get equal keys exactly
    when their dense keys are equal."""
    keys = []
    for i in range(X.shape[0]):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        data = np.asarray(X.data[lo:hi], dtype=np.float64)
        top = float(_key_scale(np.max(np.abs(data)) if data.size else 0.0))
        q = _key_values(data, top)
        nz = q != 0
        keys.append(np.float64(top).tobytes()
                    + np.asarray(X.indices[lo:hi], dtype=np.int64)[nz].tobytes()
                    + q[nz].tobytes())
    return keys


def _count_distinct(X, need):
    """How many distinct rows (:func:`_row_keys`) ``X`` holds, counted up to
    ``need``: blocks that start at ``2 * need`` rows and double, so that data
    with ``need`` distinct rows among its first ones costs a few small blocks (the
    pass of :func:`_scan_distinct` densified 4,096 rows at once: 3 GiB of a
    100,000-column CSR matrix), and CSR rows are keyed without a dense copy."""
    keys, start, rows = set(), 0, max(2 * int(need), 64)
    cap = _storage.dense_block_rows(X.shape[1], _SCAN_BLOCK_ROWS)
    sparse = sp.issparse(X)
    while start < X.shape[0] and len(keys) < need:
        block = X[start:start + (rows if sparse else min(rows, cap))]
        keys.update(_sparse_row_keys(canonical_csr(block)) if sparse
                    else _row_keys(np.asarray(block, dtype=np.float64)))
        start += block.shape[0]
        rows *= 2
    return min(len(keys), int(need))


def _scan_sharded(comm, X):
    """:func:`_scan_distinct` over the rows of every rank (collective): each
    rank's own candidates, gathered in rank order."""
    def scan(seen, need):
        got = comm.allgather(_scan_distinct(X, seen, need))
        return np.concatenate(got) if got else np.zeros((0, X.shape[1]))
    return scan


def _dense_rows(X):
    def fetch(index):
        rows = X[np.asarray(index)]
        return rows.toarray() if sp.issparse(rows) else np.asarray(rows, dtype=np.float64)
    return fetch


def _routable(recomputed, assigned):
    """The partition means, or the centres the assignment used when two means
    coincide (a partition nearest-centre routing could never reach)."""
    return assigned if _duplicate_rows(recomputed).any() else recomputed


def _coinciding_means(partitioner):
    return ValueError(
        f"{type(partitioner).__name__}: the means of two random partitions coincided in "
        f"{_DISTINCT_ROUNDS} shuffles (X has few distinct values for "
        f"n_partitions={partitioner.n_partitions}, such as one binary feature, or a large "
        "common offset that hides the rows' differences), and nearest-centre routing could "
        "never reach one of them; use fewer partitions, more features, centred features "
        "(e.g. StandardScaler), another partitioner, or an estimator that routes nothing by "
        "centre (DCKRR, CascadeSVC)")


def _check_distinct(partitioner, centers):
    if _duplicate_rows(centers).any():  # pragma: no cover - a defect, never data
        raise RuntimeError(f"{type(partitioner).__name__} produced two identical centres")


#: dense P x n_features arrays the partitioners hold at once (centres, the next
#: centres and K-means' own copies), for the memory check below
CENTER_COPIES = 4
#: dense n x P arrays of distances to the centres a partitioner holds at once (the
#: distances, and their copy in a regret order; measured: 1.08 x for K-balance, FCFS
#: and BKM on 500,000 rows and 256 partitions)
DISTANCE_COPIES = 2


def _center_memory_error(n_partitions, n_features, n_rows=0, halo_only=False):
    """A message when the partitions' dense centres (``n_partitions x n_features``
    float64, :data:`CENTER_COPIES` arrays of it) and the distances of ``n_rows``
    rows to them (``n_rows x n_partitions``, :data:`DISTANCE_COPIES` arrays; 0 rows
    for partitioners that measure none; ``halo_only``: only their halo does) would not
    fit in the available memory - a
    LIBSVM file with one huge feature index makes ``n_features`` huge, millions of
    rows and thousands of partitions the distances, and the fit would be killed by
    the system - else None."""
    centres = CENTER_COPIES * 8.0 * n_partitions * n_features
    distances = DISTANCE_COPIES * 8.0 * n_rows * n_partitions
    avail = _memory.shortfall(centres + distances)
    if avail is None:
        return None
    if distances > centres:
        return (f"the distances of {n_rows:,} rows to the {n_partitions} partition centres "
                f"need about {_memory.fmt_bytes(centres + distances)} ({DISTANCE_COPIES} "
                f"dense {n_rows:,} x {n_partitions} arrays), but only "
                f"{_memory.fmt_bytes(avail)} are available; use fewer partitions, fewer "
                "rows per process (MPI's sharded mode divides them), or "
                + ("no halo (halo=0: random partitions measure no distances otherwise)"
                   if halo_only else "random partitions without a halo (CASVC, DCKRR), "
                   "which measure no distances"))
    return (f"the {n_partitions} partition centres are dense vectors of {n_features:,} "
            f"features: about {_memory.fmt_bytes(centres + distances)} with the copies the "
            f"partitioners hold, but only {_memory.fmt_bytes(avail)} are available; drop "
            "unused feature columns (a LIBSVM file with one very large feature index gives "
            "every row that many features) or use fewer partitions")


# ----------------------------------------------------------------------------
# partitioners
# ----------------------------------------------------------------------------
def _halo_digest(halo):
    """A digest of a list of halo index arrays (their values and lengths)."""
    import hashlib

    h = hashlib.sha256()
    for rows in halo:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        h.update(str(rows.size).encode() + b"|")
        h.update(memoryview(rows).cast("B"))
    return h.hexdigest()


class _BasePartitioner(OwnInitName, VersionedState, BaseEstimator):
    """Fit driver shared by the partitioners."""

    _parameter_constraints = {
        "n_partitions": [Count(1)],
        "halo": [Interval(numbers.Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    }
    #: whether every partition gets floor(m/P) or ceil(m/P) samples
    balanced = True

    @keeps_state_on_failure
    def fit(self, X, y=None):
        """Partition ``X``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training samples. Sparse input must be CSR (other formats are
            converted); the result does not depend on the storage format
            while ``8 * n_samples * n_features`` bytes fit
            :data:`DENSE_BUDGET_BYTES` (see :func:`dense_partitioning`).
        y : None
            Ignored.

        Returns
        -------
        self : object
            Fitted partitioner.
        """
        self._validate_params()
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, order="C")
        # distances to centres need every row's squared norm, above 0 for some row
        check_tiny_features(X, check_magnitude(X))
        _check_n_partitions(self.n_partitions, X.shape[0])
        measured = self._uses_distances or self._halo() > 0
        error = _center_memory_error(self.n_partitions, X.shape[1],
                                     X.shape[0] if measured else 0,
                                     halo_only=not self._uses_distances)
        if error:
            raise ValueError(error)
        rng = check_random_state(self.random_state)
        t0 = time.perf_counter()
        # the storage-independent path (see "Storage format" in the module
        # docstring): one canonical storage whenever the dense copy fits (not
        # made for random partitions without a halo, which use X only for
        # their means: the same bits from CSR or dense rows, and no dense copy
        # of sparse data)
        self._storage = partition_storage(X)
        if self._uses_distances or self._halo() > 0:
            X = to_partition_storage(X, self._storage)
        elif sp.issparse(X):  # the means' sums of a matrix stored with duplicates
            X = canonical_csr(X)
        self._owners = None
        self._rows_local = False
        labels, centers = self._partition(X, rng)
        if getattr(self, "distinct_means", True):
            _check_distinct(self, centers)
        for name in ("owners_", "rows_stay_local_", "n_assign_events_"):
            self.__dict__.pop(name, None)
        n_parts = centers.shape[0]
        self.labels_ = np.asarray(labels, dtype=np.intp)
        self.centers_ = np.ascontiguousarray(centers, dtype=np.float64)
        self.sizes_ = np.bincount(self.labels_, minlength=n_parts)
        self.n_partitions_ = n_parts
        self._set_halo(halo_indices(X, self.labels_, self.centers_, self.sizes_,
                                    self._halo(), self.balanced))
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    #: whether ``_partition`` computes distances (on the canonical storage)
    _uses_distances = True

    def _halo(self):
        h = float(getattr(self, "halo", 0.0))
        if not (h >= 0.0 and np.isfinite(h)):  # partitioners without _validate_params
            raise ValueError(f"halo must be a finite number >= 0, got {h!r}")
        return h

    def _set_halo(self, halo):
        #: the halo of every partition (sorted sample indices, none of its own)
        self.halo_indices_ = halo
        self.halo_sizes_ = np.array([h.size for h in halo], dtype=np.int64)
        self._halo_of = _halo_digest(halo)  # (this class's: see _halo_is_this_class_s)

    def _halo_is_this_class_s(self):
        """Whether ``halo_indices_`` is missing or the halos this class computed
        (a subclass that relabels after ``super().fit`` keeps them, stale), not
        halos a subclass set itself (a new list, or the same one edited: compared
        by content)."""
        halo = getattr(self, "halo_indices_", None)
        return halo is None or _halo_digest(halo) == getattr(self, "_halo_of", None)

    def _halo_of_own_partition(self, X, comm=None, offset=0):
        """The halos of a subclass whose ``fit`` (or ``fit_sharded``) overrides
        this class's: recomputed from ``labels_``, ``centers_`` and ``sizes_`` as
        they stand when they are this class's (they belong to its own partition:
        a subclass that relabels after ``super().fit`` trained rows of a partition
        in its own halo, twice) or missing (one that never calls it had none);
        halos the subclass set itself are kept (checked by the engine), their
        sizes counted. ``X``: the rows fitted (this rank's, from global row
        ``offset``, with ``comm`` under MPI: collective)."""
        if not self._halo_is_this_class_s():
            self._set_halo([np.asarray(h, dtype=np.int64) for h in self.halo_indices_])
            return
        labels = np.asarray(self.labels_, dtype=np.int64)
        centers = np.ascontiguousarray(self.centers_, dtype=np.float64)
        sizes = np.asarray(self.sizes_, dtype=np.int64)
        X = to_partition_storage(X, partition_storage(X))
        if comm is None:
            halo = halo_indices(X, labels, centers, sizes, self._halo(), self.balanced)
        else:
            halo = halo_indices_sharded(comm, X, labels[offset:offset + X.shape[0]], offset,
                                        centers, sizes, self._halo(), self.balanced)
        self._set_halo(halo)

    def training_indices(self, j):
        """Samples partition ``j`` trains on: its own and its halo, sorted.

        Parameters
        ----------
        j : int
            Partition index.

        Returns
        -------
        indices : ndarray of int64
            Indices into the rows this partitioner was fitted on, increasing
            (an estimator fitted with ``sample_weight`` zeros fits it on the
            rows of positive weight only: index those).
        """
        check_is_fitted(self)
        if (isinstance(j, (bool, np.bool_)) or not isinstance(j, (int, np.integer))
                or not 0 <= j < len(self.halo_indices_)):
            raise ValueError(f"j must be a partition index, an int in [0, "
                             f"{len(self.halo_indices_)}), got {j!r}")
        own = np.flatnonzero(self.labels_ == j).astype(np.int64)
        halo = self.halo_indices_[j]
        return np.sort(np.concatenate([own, halo])) if halo.size else own

    def assign(self, X):
        """Route every sample to the partition of its nearest centre.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples, dense or CSR. When the partition was computed on dense
            data (see :func:`dense_partitioning`) CSR rows are densified one
            block at a time and the result does not depend on the format.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Index of the nearest centre (Euclidean; equal computed distances to
            the lowest index: distances are ``|x|^2 + |c|^2 - 2 x.c``, as
            :meth:`sklearn.cluster.KMeans.predict`'s, so exact ties may round
            either way).
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        check_magnitude(X)
        return self._assign_checked(X)

    def _assign_checked(self, X):
        """:meth:`assign` of rows the caller has validated as :meth:`assign`
        does (the estimators' routing: their ``predict`` checked ``X``; a
        second ``validate_data`` was a tenth of a 100-row prediction)."""
        return _storage.nearest_center_stored(X, self.centers_,
                                              getattr(self, "_storage", "as_is"))

    def nearest_partitions(self, X, n_nearest):
        """The ``n_nearest`` nearest centres of every sample, nearest first.

        The routing of soft (``routing='vote'``) prediction; its first column
        is :meth:`assign`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Samples, dense or CSR (stored as in :meth:`assign`).
        n_nearest : int
            How many centres (at most ``n_partitions_``).

        Returns
        -------
        order : ndarray of shape (n_samples, min(n_nearest, n_partitions_))
            Partition indices, nearest first (ties to the lowest index).
        sq_dist : ndarray of the same shape
            Squared Euclidean distances to those centres.

        Examples
        --------
        >>> import numpy as np
        >>> from cakernels.partition import KBalancePartitioner
        >>> X = np.random.RandomState(0).randn(200, 3)
        >>> part = KBalancePartitioner(4, random_state=0).fit(X)
        >>> order, sq = part.nearest_partitions(X[:5], 2)
        >>> order.shape, bool(np.all(order[:, 0] == part.assign(X[:5])))
        ((5, 2), True)
        """
        check_is_fitted(self)
        if (not isinstance(n_nearest, numbers.Integral) or isinstance(n_nearest, bool)
                or n_nearest < 1):
            raise ValueError(f"n_nearest must be a positive integer, got {n_nearest!r}")
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        check_magnitude(X)
        return self._nearest_partitions_checked(X, n_nearest)

    def _nearest_partitions_checked(self, X, n_nearest):
        """:meth:`nearest_partitions` of rows and a count the caller has checked
        (soft routing at prediction, as :meth:`_assign_checked`)."""
        storage = getattr(self, "_storage", "as_is")
        if storage == "as_is":
            return nearest_centers(X, self.centers_, n_nearest)
        rows = _storage.dense_block_rows(X.shape[1])
        return nearest_centers(X, self.centers_, n_nearest, block_rows=rows, storage=storage)

    @keeps_state_on_failure
    def fit_sharded(self, comm, X):
        """Partition data spread over MPI ranks (every rank passes its own rows).

        Collective: every rank calls it with the same parameters. The global
        data order is the concatenation of the shards in rank order. Sets the
        same attributes as :meth:`fit` on every rank (``labels_`` of all rows,
        in that order); see the class docstring for what is exact and what
        is approximate.

        Parameters
        ----------
        comm : communicator
            An mpi4py intra-communicator (``MPI.COMM_WORLD``), a
            :class:`cakernels.backends.Communicator` or the one-process
            :class:`~cakernels.backends.SelfCommunicator`.
        X : {array-like, CSR matrix} of shape (n_local, n_features)
            This rank's rows (may be empty). Invalid parameters or rows on any
            rank, other parameters than rank 0's, or shards that differ in
            their number of features or storage are the same
            :class:`~cakernels.backends.CollectiveError` on every rank.

        Returns
        -------
        self : object

        Notes
        -----
        Besides :meth:`fit`'s attributes it sets two that describe where the
        rows are, which the estimators' MPI engine reads to skip moving rows:

        ``owners_`` : ndarray of shape (n_partitions_,) or None
            The rank that trains every partition when the partitioner fixes it
            (:class:`RandomPartitioner`: partition ``j`` on rank ``j mod R``),
            None when the engine may place partitions as it likes.
        ``rows_stay_local_`` : bool
            True when every row already sits on the rank that owns its
            partition (no rows move before the solves).

        :class:`KBalancePartitioner` (``sharded_assign='exact'``) and
        :class:`FCFSPartitioner` also set ``n_assign_events_``: the rounds
        (of two allgathers each) the distributed greedy assignment took, at
        most ``n_partitions + 1`` (0 with ``sharded_assign='local'``, which
        does not communicate). A later :meth:`fit` removes all three.
        """
        from . import _distributed as dist

        comm, X = self._check_sharded_call(comm, X)
        t0 = time.perf_counter()
        n, offset, _ = dist.n_global(comm, X)
        comm.agree(None if self.n_partitions <= n else
                   f"n_partitions={self.n_partitions} is larger than the number of samples "
                   f"({n}); every partition needs at least one sample")
        comm.agree(_center_memory_error(self.n_partitions, X.shape[1],
                                        X.shape[0] if self._uses_distances or self._halo() > 0
                                        else 0, halo_only=not self._uses_distances))
        nnz = comm.allreduce(count_nonzero(X))
        self._storage = storage_for(n, X.shape[1], nnz)
        X = to_partition_storage(X, self._storage)
        rng = check_random_state(self.random_state)
        if not isinstance(self.random_state, numbers.Integral):
            # None or a RandomState instance: every rank's own generator, but the
            # draws must be the same on every rank (gather_rows, the capacities):
            # rank 0 draws the seed for all
            seed = int(rng.randint(np.iinfo(np.int32).max)) if comm.rank == 0 else None
            rng = np.random.RandomState(comm.bcast_obj(seed))
        self._owners, self._rows_local = None, False
        local, centers = self._partition_sharded(comm, X, rng, n, offset)
        if getattr(self, "distinct_means", True):
            _check_distinct(self, centers)
        labels = np.concatenate(comm.Allgatherv(np.asarray(local, dtype=np.int64)))
        sizes = np.bincount(labels, minlength=centers.shape[0])
        if np.any(sizes == 0):  # (all rows' labels: the same error on every rank)
            raise ValueError(f"{type(self).__name__}.fit_sharded: partitions "
                             f"{np.flatnonzero(sizes == 0).tolist()} are empty: "
                             f"{self._empty_hint()}")
        #: owner rank of every partition, when the partitioner fixes it
        self.owners_ = self._owners
        #: True when every row is already on the rank that owns its partition
        self.rows_stay_local_ = bool(self._rows_local)
        n_parts = centers.shape[0]
        self.labels_ = labels.astype(np.intp)
        self.centers_ = np.ascontiguousarray(centers, dtype=np.float64)
        self.sizes_ = np.bincount(self.labels_, minlength=n_parts)
        self.n_partitions_ = n_parts
        self.n_features_in_ = X.shape[1]
        self._set_halo(halo_indices_sharded(comm, X, local, offset, self.centers_, self.sizes_,
                                            self._halo(), self.balanced))
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    def _check_sharded_call(self, comm, X):
        """``(comm, X)`` for :meth:`fit_sharded`: a raw mpi4py communicator wrapped,
        ``X`` validated; what is wrong on any rank (an invalid parameter or row,
        other parameters than rank 0's, shards of other widths or storage) is
        the same error on every rank, not one rank's error and the others
        waiting in the next collective. One uncounted allgather: a control
        message, not the partitioning's traffic."""
        from sklearn.utils import check_array
        from sklearn.utils.validation import _check_feature_names

        from .._engine import params_fingerprint
        from ..backends._comm import (
            CollectiveError,
            Communicator,
            _BaseCommunicator,
            check_in_step,
        )

        if not isinstance(comm, _BaseCommunicator):
            comm = Communicator(comm)  # TypeError for what is not a communicator
        error = shape = fingerprint = names = None
        magnitude = (0.0, 0.0)
        try:
            self._validate_params()
            fingerprint = params_fingerprint(self)
            # a DataFrame's column names, as fit records them (and forgets old ones)
            _check_feature_names(self, X, reset=True)
            names = getattr(self, "feature_names_in_", None)
            names = None if names is None else tuple(str(v) for v in names)
            X = check_array(X, accept_sparse="csr", dtype=np.float64, ensure_min_samples=0)
            if X.shape[0]:
                check_magnitude(X)
            if sp.issparse(X):  # (a copy only when it stores duplicates or is unsorted)
                X = canonical_csr(X)
            magnitude = magnitude_stats(X)
            # (an empty shard's storage is any: it holds no row to compute with)
            shape = (int(X.shape[1]), bool(sp.issparse(X)) if X.shape[0] else None)
        except (ValueError, TypeError) as exc:  # InvalidParameterError is both
            error = " ".join(str(exc).split())
        except Exception as exc:  # any other: every rank raises, not a hang
            error = " ".join(failure_text(exc).split())
        got = comm._allgather_uncounted(("fit_sharded", error, fingerprint, shape, magnitude,
                                         names))
        got = [g[1:] for g in check_in_step(comm, got, "fit_sharded")]
        bad = [(r, g[0]) for r, g in enumerate(got) if g[0] is not None]
        if bad:
            raise CollectiveError(f"rank {bad[0][0]}: {bad[0][1]}")
        other = [r for r, g in enumerate(got) if g[1] != got[0][1]]
        if other:
            raise CollectiveError(f"ranks {other} were given other parameters than rank 0; "
                                  f"every rank must call fit_sharded with the same "
                                  f"partitioner and parameters")
        kinds = {None: "no rows", True: "CSR", False: "dense"}
        ref = next((r for r, g in enumerate(got) if g[2][1] is not None), 0)
        for r, g in enumerate(got):
            # rank 0's number of features; the first non-empty rank's storage
            q = 0 if g[2][0] != got[0][2][0] else ref
            if g[2][0] != got[0][2][0] or g[2][1] not in (None, got[ref][2][1]):
                (d0, s0), (d1, s1) = got[q][2], g[2]
                raise CollectiveError(
                    f"the shards differ: rank {q} has {d0} features ({kinds[s0]}), rank {r} "
                    f"{d1} ({kinds[s1]}); every rank must pass rows of the same features and "
                    "storage")
        other = [r for r, g in enumerate(got) if g[4] != got[0][4]]
        if other:
            raise CollectiveError(f"ranks {other} passed other feature names than rank 0 "
                                  f"({'none' if got[0][4] is None else list(got[0][4])}); "
                                  "every rank must pass rows of the same columns")
        # all shards' rows together, as fit checks its rows (the same error everywhere)
        error = tiny_features_error(*np.max([g[3] for g in got], axis=0))
        if error is not None:
            raise CollectiveError(error)
        return comm, X

    def _partition_sharded(self, comm, X, rng, n, offset):
        raise NotImplementedError

    def _empty_hint(self):
        """What to change when a sharded fit left a partition without rows."""
        return "use fewer partitions or give every rank more rows"

    def _means_sharded(self, comm, X, labels, centers):
        from ._distributed import partition_means as dist_means

        if getattr(self, "recompute_centers", True):
            centers = _routable(dist_means(comm, X, labels, centers.shape[0])[0], centers)
        return centers

    def fit_assign(self, X, y=None):
        """Fit and return ``labels_`` (the training partition, not ``assign(X)``)."""
        return self.fit(X, y).labels_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class RandomPartitioner(_BasePartitioner):
    """Shuffle the samples and split them evenly (CA-SVM, DC-KRR).

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    halo : float, default=0.0
        Fraction h >= 0 of the mean partition size: every partition also
        trains on the ``round(h * m / P)`` (halves up) outside samples nearest to its
        border (``round(h * sizes_[j])`` for unbalanced partitioners), see
        :mod:`cakernels.partition._halo`. Ownership, ``labels_``, ``sizes_``
        and routing are unchanged; 0 is the reference's partition.
    distinct_means : bool, default=True
        Shuffle again (up to 8 times) while two partition means coincide:
        nearest-centre routing could never reach the second partition. The
        estimators that route nothing by centre (DC-KRR, the average-mode
        searches, Cascade SVM) take the first shuffle (False), as Algorithm 8
        does, so that data with few distinct values (one binary feature) are
        no error there.
    random_state : int, RandomState instance or None, default=None
        Seed of the shuffle.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Partition of every training sample.
    centers_ : ndarray of shape (n_partitions, n_features)
        Mean of every partition (used for nearest-centre routing; two may
        coincide with ``distinct_means=False``).
    sizes_ : ndarray of shape (n_partitions,)
        Samples per partition: ``floor(m/P)`` or ``ceil(m/P)`` (with
        :meth:`fit_sharded`, balanced within each rank's shard: partition
        ``j`` takes rows of rank ``j mod R`` only, as casvm2's, so uneven
        shards give uneven partitions).
    n_partitions_ : int
        Number of partitions.
    halo_indices_ : list of ndarray
        The halo of every partition: increasing indices of the outside samples
        it also trains on (empty arrays when ``halo=0``).
    halo_sizes_ : ndarray of shape (n_partitions_,)
        Halo samples per partition.
    fit_seconds_ : float
        Time spent partitioning.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit, when ``X`` is a DataFrame with
        string column names; ``assign`` then checks them as scikit-learn's
        ``predict`` does.

    See Also
    --------
    KMeansPartitioner : clustered, unbalanced partitions.

    Notes
    -----
    Algorithm 5 of the reference (casvm2) assumes the data arrive already
    split across nodes; this partitioner produces that split. Every partition
    gets a contiguous chunk of one random permutation.

    The partition is the same, bit for bit, for dense input and for CSR input
    with 32- or 64-bit indices holding the same values, as long as
    ``8 * n_samples * n_features`` bytes fit :data:`DENSE_BUDGET_BYTES`
    (1 GiB): CSR input is then densified for the fit. Above it CSR and dense
    input can give different partitions (see "Storage format" in
    :mod:`cakernels.partition`).

    Examples
    --------
    >>> import numpy as np
    >>> from cakernels.partition import RandomPartitioner
    >>> X = np.arange(20.0).reshape(10, 2)
    >>> part = RandomPartitioner(n_partitions=3, random_state=0).fit(X)
    >>> part.sizes_
    array([4, 3, 3])
    >>> part.assign(X[:2]).shape
    (2,)
    """

    #: random labels: X only gives the means
    _uses_distances = False

    _parameter_constraints = {
        **_BasePartitioner._parameter_constraints,
        "distinct_means": ["boolean"],
    }

    def __init__(self, n_partitions=8, *, halo=0.0, distinct_means=True, random_state=None):
        self.n_partitions = n_partitions
        self.halo = halo
        self.distinct_means = distinct_means
        self.random_state = random_state

    def _partition(self, X, rng):
        n, P = X.shape[0], self.n_partitions
        for _ in range(_DISTINCT_ROUNDS if self.distinct_means else 1):
            perm = rng.permutation(n)
            labels = np.empty(n, dtype=np.intp)
            for j, chunk in enumerate(np.array_split(perm, P)):
                labels[chunk] = j
            centers = partition_means(X, labels, P)
            if not self.distinct_means or not _duplicate_rows(centers).any():
                return labels, centers
            # else two means coincide: shuffle again
        raise _coinciding_means(self)

    def _partition_sharded(self, comm, X, rng, n, offset):
        from ._distributed import partition_means as dist_means

        P, R = self.n_partitions, comm.size
        seed = rng.randint(np.iinfo(np.int32).max)
        local_rng = np.random.RandomState(
            np.random.SeedSequence([seed, comm.rank]).generate_state(1)[0])
        # partition j belongs to rank j mod R, which splits its own rows among
        # its partitions: no row moves (a rank that owns none sends its rows
        # to all partitions, when there are more ranks than partitions)
        mine = np.arange(comm.rank, P, R)
        targets = mine if mine.size else np.arange(P)
        labels = np.empty(X.shape[0], dtype=np.intp)
        for _ in range(_DISTINCT_ROUNDS if self.distinct_means else 1):
            for j, chunk in zip(targets, np.array_split(local_rng.permutation(X.shape[0]),
                                                        targets.size)):
                labels[chunk] = j
            centers, sizes = dist_means(comm, X, labels, P)
            if np.any(sizes == 0):  # (the global sizes: the same error on every rank)
                raise ValueError(
                    f"{type(self).__name__}.fit_sharded: partitions "
                    f"{np.flatnonzero(sizes == 0).tolist()} would be empty: partition j "
                    f"takes rows of rank j mod {R} only, and a rank holds fewer rows than "
                    "the partitions it owns (an estimator leaves its rows of sample_weight "
                    "0 out first: they do not count); use fewer partitions or give every "
                    f"rank at least {-(-P // R)} rows")
            if not self.distinct_means or not _duplicate_rows(centers).any():
                self._owners = np.arange(P) % R
                self._rows_local = R <= P
                return labels, centers
            # else two means coincide (the same on every rank): shuffle again
        raise _coinciding_means(self)


class KMeansPartitioner(_BasePartitioner):
    """K-means clusters as partitions (CP-SVM, DC-SVM, KKRR).

    Parameters
    ----------
    n_partitions : int, default=8
        Number of clusters P.
    method : {'kmeans', 'minibatch'}, default='kmeans'
        :class:`sklearn.cluster.KMeans` (Lloyd) or
        :class:`sklearn.cluster.MiniBatchKMeans` (for very large data; its
        ``centers_`` are MiniBatchKMeans' centres, which route every sample,
        training rows included, but are not exactly their partitions' means).
    init : {'k-means++', 'random'}, default='k-means++'
        Initialisation of the centres.
    n_init : int, default=1
        Number of K-means runs; the best is kept.
    max_iter : int, default=100
        Maximum number of Lloyd iterations.
    tol : float, default=1e-4
        Relative tolerance of K-means (scikit-learn's: the centres' shift
        between iterations, relative to the data's variance; Algorithm 2
        stops instead when the fraction of samples that changed cluster
        falls below a threshold).
    halo : float, default=0.0
        Halo fraction, see :class:`RandomPartitioner`; K-means partitions are
        unbalanced, so partition ``j`` gets ``round(h * sizes_[j])`` samples.
    random_state : int, RandomState instance or None, default=None
        Seed of the initialisation.

    Attributes
    ----------
    labels_, centers_, sizes_, n_partitions_, fit_seconds_, halo_indices_, halo_sizes_, \
n_features_in_, feature_names_in_
        As in :class:`RandomPartitioner`. ``n_partitions_`` can be smaller
        than ``n_partitions`` when K-means leaves clusters empty (for example
        with fewer distinct points than clusters): empty clusters are dropped
        so they never reach a solver, and so is a centre equal to another to
        about 12 significant digits (values that differ in their last bits),
        whose rows go to the nearest centre left.
    n_iter_ : int
        K-means iterations run.
    inertia_ : float
        K-means objective, of K-means' own clusters (before empty clusters
        are dropped and coinciding centres merged).

    Notes
    -----
    The reference initialises K-means with P random samples (Algorithms 2,
    4 and 7); we use scikit-learn's K-means (k-means++ by default), which
    converges to better clusters in fewer iterations. K-means partitions are
    not balanced (Figures 2.4 and 3.6).

    The partition is the same, bit for bit, for dense input and for CSR input
    with 32- or 64-bit indices holding the same values, as long as
    ``8 * n_samples * n_features`` bytes fit :data:`DENSE_BUDGET_BYTES`
    (1 GiB): CSR input is then densified for the fit. Above it CSR and dense
    input can give different partitions (see "Storage format" in
    :mod:`cakernels.partition`).

    Examples
    --------
    >>> import numpy as np
    >>> from cakernels.partition import KMeansPartitioner
    >>> X = np.r_[np.zeros((5, 2)), np.ones((5, 2)) * 10]
    >>> part = KMeansPartitioner(n_partitions=2, random_state=0).fit(X)
    >>> sorted(part.sizes_.tolist())
    [5, 5]
    """

    balanced = False

    _parameter_constraints = {
        **_BasePartitioner._parameter_constraints,
        "method": [StrOptions({"kmeans", "minibatch"})],
        "init": [StrOptions({"k-means++", "random"})],
        "n_init": [Count(1)],
        "max_iter": [Count(1)],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
    }

    def __init__(self, n_partitions=8, *, method="kmeans", init="k-means++", n_init=1,
                 max_iter=100, tol=1e-4, halo=0.0, random_state=None):
        self.n_partitions = n_partitions
        self.halo = halo
        self.method = method
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _kmeans(self, X, rng):
        # scikit-learn's K-means takes CSR with 32-bit indices only (CSR
        # reaches it above DENSE_BUDGET_BYTES only)
        # (canonical: scikit-learn's row norms square every stored entry, so a
        # matrix that stores an entry in two parts gave other partitions)
        X = _int32_indices(X, purpose=f"{type(self).__name__} (scikit-learn's K-means)",
                           canonical=True)
        seed = rng.randint(np.iinfo(np.int32).max)
        # no more clusters than distinct rows (to about 12 digits, as
        # _one_of_equal merges centres): scikit-learn's K-means warns
        # (ConvergenceWarning) when it finds fewer distinct clusters than asked,
        # and a warnings.catch_warnings filter around it is not an option:
        # before Python 3.14 it swaps the process-wide filter list, and two
        # threads fitting at once left the "ignore" filter installed for good.
        # One pass over the rows in blocks that stops at n_partitions distinct
        # ones (at the first rows on most data).
        k = self._n_clusters(X)
        if self.method == "minibatch":
            km = MiniBatchKMeans(n_clusters=k, init=self.init,
                                 n_init=self.n_init, max_iter=self.max_iter, tol=self.tol,
                                 random_state=seed, batch_size=4096)
        else:
            km = KMeans(n_clusters=k, init=self.init, n_init=self.n_init,
                        max_iter=self.max_iter, tol=self.tol, random_state=seed)
        # one OpenMP thread on small data (as fast, and no spinning team next to
        # busy processes) and in a forked child (scikit-learn's GNU OpenMP
        # runtime may have run a team in the parent: see backends/_budget.py)
        one_thread = (X.shape[0] * X.shape[1] * self.n_partitions < KMEANS_ONE_THREAD_WORK
                      or forked())
        # scikit-learn limits BLAS to one thread inside K-means with its own
        # threadpoolctl context, which restores what it saw on entry: from
        # several threads at once that left BLAS at the wrong count (more
        # threads inside the package's one-thread regions, or one thread for
        # good). Holding the package's own limit of 1 around it makes every
        # such context see and restore 1.
        with blas_limits(1), (
                openmp_limits(1) if one_thread else contextlib.nullcontext()):
            km.fit(X)
        self.n_iter_ = int(km.n_iter_)
        self.inertia_ = float(km.inertia_)
        return np.asarray(km.cluster_centers_, dtype=np.float64)

    def _n_clusters(self, X):
        """``n_partitions``, or fewer when X has fewer distinct rows."""
        return max(1, _count_distinct(X, self.n_partitions))

    def _kmeans_sharded(self, comm, X, rng):
        """Distributed Lloyd K-means (``method='minibatch'`` runs it too); the
        best of ``n_init`` runs."""
        from ._distributed import kmeans

        best = None
        for _ in range(self.n_init):
            centers, n_iter, inertia = kmeans(comm, X, self.n_partitions, random_state=rng,
                                              init=self.init, max_iter=self.max_iter,
                                              tol=self.tol)
            if best is None or inertia < best[2]:
                best = (centers, n_iter, inertia)
        self.n_iter_ = int(best[1])
        self.inertia_ = float(best[2])
        return best[0]

    @staticmethod
    def _one_of_equal(centers):
        """The centres without those equal to an earlier one to about 12
        significant digits (:func:`_duplicate_rows`): scikit-learn's K-means
        separates values that differ in the last bits (24.299999999999997
        and 24.3), whose clusters count as one point; their rows then go to
        the nearest centre left, as every other row."""
        return centers[~_duplicate_rows(centers)]

    def _partition_sharded(self, comm, X, rng, n, offset):
        centers = self._one_of_equal(self._kmeans_sharded(comm, X, rng))
        D = squared_distances(X, centers)
        labels = np.argmin(D, axis=1).astype(np.intp)
        counts = comm.Allreduce(np.bincount(labels, minlength=centers.shape[0]))
        return self._drop_empty(labels, centers, counts)

    @staticmethod
    def _drop_empty(labels, centers, counts):
        keep = np.flatnonzero(counts)
        if keep.size < centers.shape[0]:
            remap = np.full(centers.shape[0], -1, dtype=np.intp)
            remap[keep] = np.arange(keep.size)
            labels = remap[labels]
            centers = centers[keep]
        return labels, centers

    def _partition(self, X, rng):
        centers = self._one_of_equal(self._kmeans(X, rng))
        labels = nearest_center(X, centers)
        return self._drop_empty(labels, centers,
                                np.bincount(labels, minlength=centers.shape[0]))


class _KMeansBasedBalanced(KMeansPartitioner):
    """K-means centres followed by a capacity-limited reassignment."""

    balanced = True

    _parameter_constraints = {
        **KMeansPartitioner._parameter_constraints,
        "recompute_centers": ["boolean"],
    }

    def _finish(self, X, labels, centers):
        if self.recompute_centers:
            centers = _routable(partition_means(X, labels, centers.shape[0]), centers)
        return labels, centers

    def _distinct_kmeans(self, X, rng):
        """K-means centres, those that collapsed onto another replaced by
        distinct samples (balanced partitions need all P)."""
        centers = self._kmeans(X, rng)
        if centers.shape[0] < self.n_partitions:  # (K-means asked for no more)
            raise _too_few_distinct(type(self).__name__, self.n_partitions, centers.shape[0])
        return _make_distinct(centers, _dense_rows(X), X.shape[0], rng,
                              type(self).__name__, lambda seen, need: _scan_distinct(X, seen,
                                                                                    need))

    def _distinct_kmeans_sharded(self, comm, X, rng, n):
        from ._distributed import gather_rows

        return _make_distinct(self._kmeans_sharded(comm, X, rng),
                              lambda index: gather_rows(comm, X, index), n, rng,
                              type(self).__name__, _scan_sharded(comm, X))


class KBalancePartitioner(_KMeansBasedBalanced):
    """K-balance clustering (Algorithm 9, BKRR and BKRR2).

    K-means gives P centres; then every sample, in turn, goes to its nearest
    centre that is not yet full, so every partition gets ``floor(m/P)`` or
    ``ceil(m/P)`` samples.

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    assign_order : {'data', 'regret'}, default='data'
        Order in which samples claim their centre. ``'data'`` is Algorithm 9
        (data order, so late samples lose their nearest centre). ``'regret'``
        lets the samples that lose most by not getting their nearest centre
        (largest gap between the second-nearest and the nearest *squared*
        distance) choose first.
    recompute_centers : bool, default=True
        Replace the K-means centres by the means of the balanced partitions
        (lines 15-19 of Algorithm 9); these are the centres used to route new
        samples.
    sharded_assign : {'exact', 'local'}, default='exact'
        Under MPI in sharded mode (README "Running under MPI"): ``'exact'``
        is Algorithm 9's assignment in the global data order (the serial
        result for the same centres); ``'local'`` is the reference's
        approximate parallel K-balance of section 3.4 (every rank fills each
        centre to its share of the capacity, no communication). Ignored on
        one process and in root mode.
    method, init, n_init, max_iter, tol
        Passed to K-means, see :class:`KMeansPartitioner`.
    halo : float, default=0.0
        Halo fraction, see :class:`RandomPartitioner` (``round(h * m / P)``
        samples for every partition: training sets stay balanced).
    random_state : int, RandomState instance or None, default=None
        Passed to K-means, see :class:`KMeansPartitioner`.

    Attributes
    ----------
    labels_, centers_, sizes_, n_partitions_, fit_seconds_, n_iter_, inertia_
        See :class:`KMeansPartitioner`. ``n_iter_`` and ``inertia_`` are the
        K-means step's, before the balanced assignment moves rows
        (``inertia_`` is not the objective of ``labels_`` and ``centers_``).
    halo_indices_, halo_sizes_, n_features_in_, feature_names_in_
        See :class:`RandomPartitioner`.

    Notes
    -----
    The partition is the same, bit for bit, for dense input and for CSR input
    with 32- or 64-bit indices holding the same values, as long as
    ``8 * n_samples * n_features`` bytes fit :data:`DENSE_BUDGET_BYTES`
    (1 GiB): CSR input is then densified for the fit. Above it CSR and dense
    input can give different partitions (see "Storage format" in
    :mod:`cakernels.partition`).

    Examples
    --------
    >>> import numpy as np
    >>> from cakernels.partition import KBalancePartitioner
    >>> X = np.random.RandomState(0).randn(103, 3)
    >>> KBalancePartitioner(n_partitions=4, random_state=0).fit(X).sizes_
    array([26, 26, 26, 25])
    """

    _parameter_constraints = {
        **_KMeansBasedBalanced._parameter_constraints,
        "assign_order": [StrOptions({"data", "regret"})],
        "sharded_assign": [StrOptions({"exact", "local"})],
    }

    def __init__(self, n_partitions=8, *, assign_order="data", recompute_centers=True,
                 sharded_assign="exact", method="kmeans", init="k-means++", n_init=1,
                 max_iter=100, tol=1e-4, halo=0.0, random_state=None):
        super().__init__(n_partitions, method=method, init=init, n_init=n_init,
                         max_iter=max_iter, tol=tol, halo=halo, random_state=random_state)
        self.assign_order = assign_order
        self.recompute_centers = recompute_centers
        self.sharded_assign = sharded_assign

    def _partition_sharded(self, comm, X, rng, n, offset):
        from ._distributed import greedy_assign, local_capacity_assign

        exact = self.sharded_assign == "exact"
        comm.agree(f"{type(self).__name__}(assign_order='regret', sharded_assign='exact') "
                   "needs every row on one rank; use sharded_assign='local' (regret order "
                   "within each shard) or root mode" if exact and self.assign_order == "regret"
                   else None)
        centers = self._distinct_kmeans_sharded(comm, X, rng, n)
        D = squared_distances(X, centers)
        if exact:
            stats = {}
            labels = greedy_assign(comm, D, _Capacity(n, centers.shape[0]), stats)
            self.n_assign_events_ = stats["events"]
        else:
            self.n_assign_events_ = 0
            labels = local_capacity_assign(D, regret=self.assign_order == "regret")
        return labels, self._means_sharded(comm, X, labels, centers)

    def _empty_hint(self):
        if self.sharded_assign == "local":
            return ("with sharded_assign='local' every rank gives each centre at most its "
                    "own share of its rows, and shards smaller than n_partitions leave some "
                    "centre without rows; use sharded_assign='exact', fewer partitions or "
                    "larger shards")
        return super()._empty_hint()

    def _partition(self, X, rng):
        centers = self._distinct_kmeans(X, rng)
        D = squared_distances(X, centers)
        order = None
        if self.assign_order == "regret" and centers.shape[0] > 1:
            two = np.partition(D, 1, axis=1)[:, :2].copy()  # (not a view keeping n x P alive)
            order = np.argsort(-(two[:, 1] - two[:, 0]), kind="stable")
        cap = _Capacity(X.shape[0], centers.shape[0])
        labels = greedy_capacity_assign(D, cap, order, overwrite=True)
        return self._finish(X, labels, centers)


class FCFSPartitioner(_BasePartitioner):
    """First-come-first-served partitioning (Algorithm 3, FCFS-SVM).

    P random samples become the centres; then every sample, in data order,
    goes to its nearest centre that is not yet full.

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    recompute_centers : bool, default=True
        Replace the random centres by the means of the partitions (lines
        16-22 of Algorithm 3, optional in the reference, which notes that it
        does not necessarily help). Which is better depends on the data: on
        ijcnn1 (16 partitions, 30 seeds) routing by the picked samples was
        0.36 points more accurate on average (see benchmarks/README.md).
    halo : float, default=0.0
        Halo fraction, see :class:`RandomPartitioner`.
    random_state : int, RandomState instance or None, default=None
        Seed of the choice of centres.

    Attributes
    ----------
    labels_, centers_, sizes_, n_partitions_, fit_seconds_, halo_indices_, halo_sizes_, \
n_features_in_, feature_names_in_
        See :class:`RandomPartitioner`.
    initial_centers_ : ndarray of shape (n_partitions, n_features)
        The randomly picked samples used as centres during the assignment.

    Notes
    -----
    The partition is the same, bit for bit, for dense input and for CSR input
    with 32- or 64-bit indices holding the same values, as long as
    ``8 * n_samples * n_features`` bytes fit :data:`DENSE_BUDGET_BYTES`
    (1 GiB): CSR input is then densified for the fit. Above it CSR and dense
    input can give different partitions (see "Storage format" in
    :mod:`cakernels.partition`).

    Examples
    --------
    >>> import numpy as np
    >>> from cakernels.partition import FCFSPartitioner
    >>> X = np.random.RandomState(0).randn(10, 2)
    >>> sorted(FCFSPartitioner(n_partitions=4, random_state=0).fit(X).sizes_.tolist())
    [2, 2, 3, 3]
    """

    _parameter_constraints = {
        **_BasePartitioner._parameter_constraints,
        "recompute_centers": ["boolean"],
    }

    def __init__(self, n_partitions=8, *, recompute_centers=True, halo=0.0, random_state=None):
        self.n_partitions = n_partitions
        self.recompute_centers = recompute_centers
        self.halo = halo
        self.random_state = random_state

    def _partition(self, X, rng):
        fetch = _dense_rows(X)
        centers = _make_distinct(fetch(rng.choice(X.shape[0], self.n_partitions,
                                                  replace=False)),
                                 fetch, X.shape[0], rng, type(self).__name__,
                                 lambda seen, need: _scan_distinct(X, seen, need))
        self.initial_centers_ = centers
        return self._assign_fcfs(X, centers)

    def _partition_sharded(self, comm, X, rng, n, offset):
        from ._distributed import gather_rows, greedy_assign

        # the same P global rows as the serial algorithm draws for n samples
        def fetch(index):
            return gather_rows(comm, X, index)

        centers = _make_distinct(fetch(rng.choice(n, self.n_partitions, replace=False)),
                                 fetch, n, rng, type(self).__name__, _scan_sharded(comm, X))
        self.initial_centers_ = centers
        D = squared_distances(X, centers)
        stats = {}
        labels = greedy_assign(comm, D, _Capacity(n, centers.shape[0]), stats)
        self.n_assign_events_ = stats["events"]
        return labels, self._means_sharded(comm, X, labels, centers)

    def _assign_fcfs(self, X, centers):
        D = squared_distances(X, centers)
        labels = greedy_capacity_assign(D, _Capacity(X.shape[0], centers.shape[0]),
                                        overwrite=True)
        if self.recompute_centers:
            centers = _routable(partition_means(X, labels, centers.shape[0]), centers)
        return labels, centers


class BKMPartitioner(_KMeansBasedBalanced):
    """Balanced K-means partitioning (Algorithm 4, BKM-SVM).

    K-means first; then, centre by centre, the farthest samples of every
    over-full cluster move to their nearest under-full centre until every
    partition holds ``floor(m/P)`` or ``ceil(m/P)`` samples.

    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P.
    recompute_centers : bool, default=True
        Replace the K-means centres by the partition means (lines 27-33 of
        Algorithm 4).
    method, init, n_init, max_iter, tol
        Passed to K-means, see :class:`KMeansPartitioner`.
    halo : float, default=0.0
        Halo fraction, see :class:`RandomPartitioner` (``round(h * m / P)``
        samples for every partition: training sets stay balanced).
    random_state : int, RandomState instance or None, default=None
        Passed to K-means, see :class:`KMeansPartitioner`.

    Attributes
    ----------
    labels_, centers_, sizes_, n_partitions_, fit_seconds_, n_iter_, inertia_
        See :class:`KMeansPartitioner`. ``n_iter_`` and ``inertia_`` are the
        K-means step's, before the balanced assignment moves rows
        (``inertia_`` is not the objective of ``labels_`` and ``centers_``).
    halo_indices_, halo_sizes_, n_features_in_, feature_names_in_
        See :class:`RandomPartitioner`.

    Notes
    -----
    Algorithm 4 rescans all m samples to find each farthest sample; here the
    members of an over-full cluster are sorted once by distance and moved
    farthest-first, and the moves are assigned with the same exact event
    simulation as FCFS, so the whole rebalancing costs O(m P). Members at the
    same computed distance (``|x|^2 + |c|^2 - 2 x.c``: exact ties may round
    either way) move lowest index first, members at distance 0 (duplicates
    of the centre) included: the pseudo-code's search starts at ``maxdist = 0``
    with a strict ``>``, which finds no member there and moves sample 0,
    whichever cluster it is in.
    When m is not divisible by P, ``m mod P`` partitions keep (or receive)
    ``ceil(m/P)`` samples, first come first served, in the order the clusters
    are processed.

    The partition is the same, bit for bit, for dense input and for CSR input
    with 32- or 64-bit indices holding the same values, as long as
    ``8 * n_samples * n_features`` bytes fit :data:`DENSE_BUDGET_BYTES`
    (1 GiB): CSR input is then densified for the fit. Above it CSR and dense
    input can give different partitions (see "Storage format" in
    :mod:`cakernels.partition`).

    Examples
    --------
    >>> import numpy as np
    >>> from cakernels.partition import BKMPartitioner
    >>> X = np.r_[np.zeros((8, 2)), np.ones((2, 2))]
    >>> BKMPartitioner(n_partitions=2, random_state=0).fit(X).sizes_
    array([5, 5])
    """

    def __init__(self, n_partitions=8, *, recompute_centers=True, method="kmeans",
                 init="k-means++", n_init=1, max_iter=100, tol=1e-4, halo=0.0,
                 random_state=None):
        super().__init__(n_partitions, method=method, init=init, n_init=n_init,
                         max_iter=max_iter, tol=tol, halo=halo, random_state=random_state)
        self.recompute_centers = recompute_centers

    def _partition(self, X, rng):
        centers = self._distinct_kmeans(X, rng)
        D = squared_distances(X, centers)
        km_labels = np.argmin(D, axis=1)
        return self._finish(X, self._rebalance(D, km_labels), centers)

    def _partition_sharded(self, comm, X, rng, n, offset):
        P = self.n_partitions
        centers = self._distinct_kmeans_sharded(comm, X, rng, n)
        D = squared_distances(X, centers)
        km = np.argmin(D, axis=1).astype(np.intp)
        counts = comm.Allreduce(np.bincount(km, minlength=P).astype(np.int64))
        # only members of over-full clusters can move: their distance rows go
        # to rank 0, which runs Algorithm 4's rebalancing exactly on them (in
        # the global order) and returns their new labels
        lo = n // P
        movable = np.flatnonzero(np.isin(km, np.flatnonzero(counts > lo)))
        rows = comm.Gatherv(np.ascontiguousarray(D[movable]).reshape(-1, P))
        kms = comm.Gatherv(km[movable].astype(np.int64))
        if comm.rank == 0:
            new = self._rebalance(np.vstack(rows), np.concatenate(kms), counts=counts)
            splits = np.cumsum([k.size for k in kms])[:-1]
            chunks = [c.astype(np.int64) for c in np.split(new, splits)]
        else:
            chunks = None
        labels = km.copy()
        labels[movable] = comm.Scatterv(chunks)
        return labels, self._means_sharded(comm, X, labels, centers)

    @staticmethod
    def _rebalance(D, km_labels, counts=None):
        """Algorithm 4's rebalancing of the K-means labels ``km_labels`` (rows of
        ``D``); ``counts`` are the global cluster sizes when ``D`` holds only
        the members of over-full clusters (sharded data)."""
        n, P = D.shape
        labels = km_labels.copy()
        if counts is None:
            counts = np.bincount(km_labels, minlength=P)
        counts = np.asarray(counts, dtype=np.int64)
        # every cluster starts with all its K-means members; an over-full one
        # has no room until it is processed (in index order, as Algorithm 4)
        cap = _Capacity(int(counts.sum()), P, sizes=counts)
        lo, hi, r = cap.lo, cap.hi, cap.r
        over = [j for j in range(P) if counts[j] > lo]
        for j in over:
            members = np.flatnonzero(km_labels == j)
            keep = hi if (r > 0 and cap.n_hi < r) else lo
            cap.sizes[j] = 0
            cap.reserve(j, keep)
            excess = members.size - keep
            if excess <= 0:
                continue
            far_first = members[np.argsort(-D[members, j], kind="stable")]
            movers = far_first[:excess]
            # the cluster itself is full now; only others with room accept
            labels[movers] = greedy_capacity_assign(D[movers], cap, overwrite=True)
        return labels


PARTITIONERS = {
    "random": RandomPartitioner,
    "kmeans": KMeansPartitioner,
    "kbalance": KBalancePartitioner,
    "fcfs": FCFSPartitioner,
    "bkm": BKMPartitioner,
}


def make_partitioner(partitioner, n_partitions, random_state, halo=0.0):
    """Resolve a partitioner given by name or instance (cloned, never modified).

    A name gets ``n_partitions``, ``random_state`` and ``halo``; an instance
    is cloned (deep-copied when it has no ``get_params``) and keeps its own
    settings, except that a ``halo`` > 0 (the estimator's) replaces the
    instance's.

    Parameters
    ----------
    partitioner : {'random', 'kmeans', 'kbalance', 'fcfs', 'bkm'} or object
        A name, or an object with ``fit(X)`` and ``assign(X)`` (one of the
        package's partitioners, a subclass, or an object of your own).
    n_partitions : int
        Number of partitions for a name (an instance keeps its own).
    random_state : int, RandomState instance or None
        Seed for a name (an instance keeps its own).
    halo : float, default=0.0
        Halo fraction for a name; when > 0 it also replaces an instance's.

    Returns
    -------
    partitioner : object
        A new, unfitted partitioner.

    Raises
    ------
    ValueError
        An unknown name, or an object without ``fit`` and ``assign``.
    TypeError
        A class instead of an instance, or an instance that cannot be copied.

    Examples
    --------
    >>> from cakernels.partition import KMeansPartitioner, make_partitioner
    >>> make_partitioner("kbalance", 4, 0).n_partitions
    4
    >>> mine = KMeansPartitioner(n_partitions=3, random_state=1)
    >>> part = make_partitioner(mine, 8, 0)
    >>> part is mine, part.n_partitions
    (False, 3)
    """
    if isinstance(partitioner, str):
        if partitioner not in PARTITIONERS:
            raise ValueError(
                f"partitioner must be one of {sorted(PARTITIONERS)} or a partitioner "
                f"instance, got {partitioner!r}"
            )
        return PARTITIONERS[partitioner](n_partitions=n_partitions, random_state=random_state,
                                         halo=halo)
    if not (hasattr(partitioner, "fit") and hasattr(partitioner, "assign")):
        raise ValueError(
            "partitioner must be a name or an object with fit(X) and assign(X), "
            f"got {partitioner!r}"
        )
    if isinstance(partitioner, type):
        raise TypeError(f"partitioner must be a name or an instance, got the class "
                        f"{partitioner.__name__}; pass {partitioner.__name__}(...)")
    # (an object without get_params is deep-copied, as scikit-learn's clone of a
    # parameter that is no estimator: fit and assign are all the protocol asks)
    try:
        part = clone(partitioner, safe=False)
    except (TypeError, copy.Error) as exc:
        what = ("one of its parameters cannot be deep-copied" if hasattr(partitioner,
                                                                          "get_params")
                else "it has no get_params and cannot be deep-copied")
        raise TypeError(f"partitioner {type(partitioner).__name__} cannot be cloned: {what} "
                        f"({exc}); every fit works on a copy of it: give it copyable "
                        "parameters (or, without get_params, copyable state)") from exc
    if halo:
        params = part.get_params(deep=False) if hasattr(part, "get_params") else {}
        if "halo" not in params:
            raise ValueError(f"halo={halo} needs a partitioner with a halo parameter; "
                             f"{type(part).__name__} has none")
        part.set_params(halo=halo)
    return part
