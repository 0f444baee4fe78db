"""The shared partitioning layer.

Five partitioners, each a small estimator in the style of
:class:`sklearn.cluster.KMeans`: ``fit(X)`` sets ``labels_`` (the partition
of every sample), ``centers_`` (one row per partition) and ``sizes_``;
``assign(X)`` routes new samples to their nearest centre.

===========================  ===============================  =================
partitioner                  reference                        balanced
===========================  ===============================  =================
:class:`RandomPartitioner`   CA-SVM (Alg. 5), DC-KRR (Alg. 8)  yes
:class:`KMeansPartitioner`   CP-SVM, DC-SVM, KKRR              no
:class:`KBalancePartitioner` Algorithm 9 (BKRR)                yes
:class:`FCFSPartitioner`     Algorithm 3 (FCFS-SVM)            yes
:class:`BKMPartitioner`      Algorithm 4 (BKM-SVM)             yes
===========================  ===============================  =================

Balanced partitioners give every partition exactly ``floor(m/P)`` or
``ceil(m/P)`` samples (``m mod P`` of them get the ceiling, first come first
served). The capacity-limited greedy assignment of Algorithms 3, 4 and 9 is
computed exactly, but not one sample at a time: an event simulation assigns
every sample to its nearest open centre until the next centre fills, closes
that centre and re-routes only the samples that had chosen it. That costs
O(m P) work per closed centre, vectorised, instead of a Python loop over
samples (or the O(m) scan per move that Algorithm 4's pseudo-code suggests).

Storage format
--------------
The same data give the same partition whether it is stored dense or as CSR
(with 32- or 64-bit indices, as :func:`sklearn.datasets.load_svmlight_file`
returns), bit for bit, as long as its dense copy fits
:data:`DENSE_BUDGET_BYTES`. The partitioners then compute on one canonical
storage chosen from the data's values, never from how they are stored
(:func:`partition_storage`): C-contiguous float64 when at least
:data:`SPARSE_DENSITY` of the values are non-zero (CSR input is densified for
the fit, a transient copy, and ``assign`` densifies CSR rows one block at a
time), else CSR with 32-bit indices, sorted and without explicit zeros (dense
input is converted, which on such sparse data costs a fraction of its dense
size; on very sparse, wide data dense K-means was 75-230x slower than the CSR
one, see benchmarks/README.md). Above the budget CSR input stays CSR and dense
input stays dense (a CSR copy of large dense data would cost more memory
than it saves): K-means and the distances then round differently for the two
formats, so the partitions, and the models built on them, can differ.
K-means takes CSR with 32-bit indices only; 64-bit indices are narrowed on a
copy of the index arrays when the matrix allows it.
"""

import numbers
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, clone
from sklearn.cluster import KMeans, MiniBatchKMeans
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ._kernels import row_sq_norms

__all__ = [
    "DENSE_BUDGET_BYTES",
    "SPARSE_DENSITY",
    "dense_partitioning",
    "partition_storage",
    "RandomPartitioner",
    "KMeansPartitioner",
    "KBalancePartitioner",
    "FCFSPartitioner",
    "BKMPartitioner",
    "make_partitioner",
    "PARTITIONERS",
]


#: Largest dense copy of the training data, ``8 * n_samples * n_features``
#: bytes, for which the partitioners compute on dense float64 data whatever
#: the storage of ``X`` (1 GiB). A CSR training set of that shape is densified
#: for the fit (scikit-learn's dense K-means then takes its own centred copy,
#: so the peak is about twice this), which is small next to the 8 m^2 bytes of
#: one kernel-ridge partition of m > 12,000 samples; every LIBSVM benchmark set
#: used here that is stored sparse (a9a 32 MB, mushrooms 7 MB, webspam's
#: unigrams 0.7 GB dense) fits, while truly high-dimensional sparse data
#: (rcv1, news20, webspam trigrams: tens of GB dense) stays CSR.
DENSE_BUDGET_BYTES = 2**30

#: Fraction of non-zero values below which data whose dense copy fits the
#: budget is partitioned in CSR form (dense input converted): there sparse
#: products are cheaper than dense BLAS on the zeros (a9a: 11% non-zeros and
#: mushrooms 19% stay dense, as all the dense benchmark sets).
SPARSE_DENSITY = 0.05

#: rows per block of :func:`nearest_center`
ASSIGN_BLOCK_ROWS = 65536


def dense_partitioning(n_samples, n_features):
    """Whether the partitioners compute on dense data for data of this shape.

    True when the dense float64 copy, ``8 * n_samples * n_features`` bytes,
    fits :data:`DENSE_BUDGET_BYTES`; the partition then does not depend on
    the storage format of ``X``.
    """
    return 8 * int(n_samples) * int(n_features) <= DENSE_BUDGET_BYTES


def partition_storage(X):
    """The storage the partitioners compute on for ``X``: ``'dense'``, ``'csr'``
    or ``'as_is'`` (above :data:`DENSE_BUDGET_BYTES`, where it depends on the
    input's format). Decided from the shape and the number of non-zero values,
    which are the same for a dense array and its CSR copy."""
    n, d = X.shape
    if not dense_partitioning(n, d):
        return "as_is"
    nnz = X.count_nonzero() if sp.issparse(X) else int(np.count_nonzero(X))
    return "dense" if nnz >= SPARSE_DENSITY * n * d else "csr"


def _canonical_csr(X):
    """CSR float64 with 32-bit, sorted indices and no explicit zeros (a copy
    when anything changes; the caller's matrix is never modified)."""
    if not sp.issparse(X):
        return _int32_indices(sp.csr_matrix(np.asarray(X, dtype=np.float64)))
    X = _int32_indices(sp.csr_matrix(X, dtype=np.float64), purpose=None)
    if X.count_nonzero() != X.nnz or not X.has_sorted_indices:
        X = X.copy()
        X.eliminate_zeros()
        X.sort_indices()
    return X


def to_partition_storage(X, storage):
    """``X`` in the storage ``storage`` (see :func:`partition_storage`)."""
    if storage == "dense":
        return X.toarray() if sp.issparse(X) else np.ascontiguousarray(X, dtype=np.float64)
    if storage == "csr":
        return _canonical_csr(X)
    return X


def _int32_indices(X, purpose=None):
    """CSR with 32-bit indices (what LIBSVM and scikit-learn's K-means take),
    sharing the values.

    ``load_svmlight_file`` and large ``scipy.sparse`` products give int64
    indices; they are narrowed here on a copy of the index arrays (the
    caller's matrix is not modified). ``purpose`` names the step that needs
    32-bit indices in the error raised when they cannot hold the matrix.
    """
    if not sp.issparse(X) or (X.indices.dtype == np.int32 and X.indptr.dtype == np.int32):
        return X
    limit = np.iinfo(np.int32).max
    if X.nnz > limit or X.shape[1] > limit:
        what = "sparse input" if purpose is None else f"{purpose}: sparse input"
        raise ValueError(
            f"{what} with more than 2**31 - 1 non-zeros or columns is not supported "
            f"(this one has {X.nnz} non-zeros and {X.shape[1]} columns)"
        )
    return sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)),
                         shape=X.shape)


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------
def squared_distances(X, centers, X_sq_norms=None):
    """Squared Euclidean distances between rows of ``X`` and ``centers``.

    Computed as ``||x||^2 + ||c||^2 - 2 x.c`` (one matrix product, dense or
    CSR ``X``), clipped at zero.
    """
    if X_sq_norms is None:
        X_sq_norms = row_sq_norms(X)
    c_sq = np.einsum("ij,ij->i", centers, centers)
    XC = X @ centers.T
    XC = np.asarray(XC, dtype=np.float64)
    D = X_sq_norms[:, None] + c_sq[None, :] - 2.0 * XC
    np.maximum(D, 0.0, out=D)
    return D


def nearest_center(X, centers, *, block_rows=ASSIGN_BLOCK_ROWS, storage="as_is"):
    """Index of the nearest centre (Euclidean) of every row of ``X``.

    Ties go to the lowest centre index. Rows are processed in blocks of
    ``block_rows`` to bound memory. With ``storage='dense'`` (or ``'csr'``)
    every block is computed on a dense float64 (or canonical CSR) copy, so
    that the result does not depend on how ``X`` is stored; the blocks,
    hence the rounding, depend on ``block_rows`` and ``len(X)``.
    """
    n = X.shape[0]
    out = np.empty(n, dtype=np.intp)
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        Xb = to_partition_storage(X[start:stop], storage)
        out[start:stop] = np.argmin(squared_distances(Xb, centers), axis=1)
    return out


def partition_means(X, labels, n_partitions):
    """Mean of the samples of every partition, shape (n_partitions, n_features)."""
    n = X.shape[0]
    ind = sp.csr_matrix(
        (np.ones(n), (labels, np.arange(n))), shape=(n_partitions, n)
    )
    sums = ind @ X
    sums = sums.toarray() if sp.issparse(sums) else np.asarray(sums)
    counts = np.bincount(labels, minlength=n_partitions).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts[:, None]
    return np.ascontiguousarray(means, dtype=np.float64)


def balanced_sizes(n_samples, n_partitions):
    """The sizes a balanced partition may have: ``floor`` and ``ceil`` of m/P."""
    lo = n_samples // n_partitions
    return lo, lo + (n_samples % n_partitions > 0), n_samples % n_partitions


class _Capacity:
    """Capacity bookkeeping shared by the balanced greedy assignments.

    Every partition may hold ``floor(m/P)`` samples; the first ``m mod P``
    partitions to reach ``floor + 1`` keep it, after which the cap of every
    partition drops to ``floor``.
    """

    def __init__(self, n_samples, n_partitions, sizes=None):
        self.lo, self.hi, self.r = balanced_sizes(n_samples, n_partitions)
        self.sizes = (np.zeros(n_partitions, dtype=np.int64) if sizes is None
                      else np.asarray(sizes, dtype=np.int64).copy())
        self.n_hi = 0
        self.cap = self.hi if self.r > 0 else self.lo

    def room(self):
        return np.maximum(self.cap - self.sizes, 0)

    def add(self, j, count):
        self.sizes[j] += count
        if self.cap == self.hi and self.r > 0 and self.sizes[j] >= self.hi:
            self.n_hi += 1
            if self.n_hi >= self.r:
                self.cap = self.lo

    def reserve(self, j, count):
        """Partition ``j`` keeps ``count`` of its own samples (BKM)."""
        self.add(j, count)


def greedy_capacity_assign(D, cap, order=None):
    """Assign samples in order to their nearest partition that still has room.

    This is the loop of Algorithms 3, 4 and 9 (``if dist < mindis and
    CS[j] < balanced``), computed exactly by an event simulation.

    Parameters
    ----------
    D : ndarray of shape (n, P)
        Distances of the samples to the centres (any monotone transform of
        the Euclidean distance gives the same result).
    cap : _Capacity
        Capacity state, updated in place.
    order : ndarray of shape (n,), default=None
        Processing order of the rows; data order when None.

    Returns
    -------
    labels : ndarray of shape (n,)
        The partition of every row of ``D`` (in the original row order).
    """
    n, P = D.shape
    if order is None:
        order = np.arange(n)
    Dq = np.array(D[order], dtype=np.float64)  # a copy we may mask
    closed = cap.room() == 0
    Dq[:, closed] = np.inf
    choice = np.argmin(Dq, axis=1)
    labels_q = np.full(n, -1, dtype=np.intp)
    start = 0
    while start < n:
        room = cap.room()
        rest = choice[start:]
        counts = np.bincount(rest, minlength=P)
        # position (relative to ``start``) at which each partition fills up
        fill_at = np.full(P, n, dtype=np.int64)
        for j in np.flatnonzero((counts >= room) & (room > 0)):
            fill_at[j] = np.flatnonzero(rest == j)[room[j] - 1]
        j_first = int(np.argmin(fill_at))
        stop = n if fill_at[j_first] >= n else start + int(fill_at[j_first]) + 1
        seg = choice[start:stop]
        labels_q[start:stop] = seg
        seg_counts = np.bincount(seg, minlength=P)
        for j in np.flatnonzero(seg_counts):
            cap.add(j, int(seg_counts[j]))
        start = stop
        if start >= n:
            break
        newly_closed = (cap.room() == 0) & ~closed
        closed |= newly_closed
        if closed.all():
            raise RuntimeError("capacity exhausted before every sample was assigned")
        Dq[start:, newly_closed] = np.inf
        redo = np.flatnonzero(np.isin(choice[start:], np.flatnonzero(newly_closed))) + start
        if redo.size:
            choice[redo] = np.argmin(Dq[redo], axis=1)
    labels = np.empty(n, dtype=np.intp)
    labels[order] = labels_q
    return labels


def _check_n_partitions(n_partitions, n_samples):
    if n_partitions > n_samples:
        raise ValueError(
            f"n_partitions={n_partitions} is larger than the number of samples "
            f"({n_samples}); every partition needs at least one sample"
        )


# ----------------------------------------------------------------------------
# partitioners
# ----------------------------------------------------------------------------
class _BasePartitioner(BaseEstimator):
    """Fit driver shared by the partitioners."""

    _parameter_constraints = {
        "n_partitions": [Interval(numbers.Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }
    #: whether every partition gets floor(m/P) or ceil(m/P) samples
    balanced = True

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
        _check_n_partitions(self.n_partitions, X.shape[0])
        rng = check_random_state(self.random_state)
        t0 = time.perf_counter()
        # the storage-independent path (see "Storage format" in the module
        # docstring): one canonical storage whenever the dense copy fits
        self._storage = partition_storage(X)
        X = to_partition_storage(X, self._storage)
        labels, centers = self._partition(X, rng)
        n_parts = centers.shape[0]
        self.labels_ = np.asarray(labels, dtype=np.intp)
        self.centers_ = np.ascontiguousarray(centers, dtype=np.float64)
        self.sizes_ = np.bincount(self.labels_, minlength=n_parts)
        self.n_partitions_ = n_parts
        self.fit_seconds_ = time.perf_counter() - t0
        return self

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
            Index of the nearest centre (Euclidean; ties to the lowest index).
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        storage = getattr(self, "_storage", "as_is")
        if storage == "as_is":
            return nearest_center(X, self.centers_)
        # blocks of at most DENSE_BUDGET_BYTES dense, the same blocks for every
        # storage format (dense input up to 2048 features keeps the default
        # blocks), each in the storage the partition was computed on
        rows = min(ASSIGN_BLOCK_ROWS, max(1, DENSE_BUDGET_BYTES // (8 * X.shape[1])))
        return nearest_center(X, self.centers_, block_rows=rows, storage=storage)

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
    random_state : int, RandomState instance or None, default=None
        Seed of the shuffle.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Partition of every training sample.
    centers_ : ndarray of shape (n_partitions, n_features)
        Mean of every partition (used for nearest-centre routing).
    sizes_ : ndarray of shape (n_partitions,)
        Samples per partition: ``floor(m/P)`` or ``ceil(m/P)``.
    n_partitions_ : int
        Number of partitions.
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

    def __init__(self, n_partitions=8, *, random_state=None):
        self.n_partitions = n_partitions
        self.random_state = random_state

    def _partition(self, X, rng):
        n, P = X.shape[0], self.n_partitions
        perm = rng.permutation(n)
        labels = np.empty(n, dtype=np.intp)
        for j, chunk in enumerate(np.array_split(perm, P)):
            labels[chunk] = j
        return labels, partition_means(X, labels, P)


class KMeansPartitioner(_BasePartitioner):
    """K-means clusters as partitions (CP-SVM, DC-SVM, KKRR).

    Parameters
    ----------
    n_partitions : int, default=8
        Number of clusters P.
    method : {'kmeans', 'minibatch'}, default='kmeans'
        :class:`sklearn.cluster.KMeans` (Lloyd) or
        :class:`sklearn.cluster.MiniBatchKMeans` (for very large data).
    init : {'k-means++', 'random'}, default='k-means++'
        Initialisation of the centres.
    n_init : int, default=1
        Number of K-means runs; the best is kept.
    max_iter : int, default=100
        Maximum number of Lloyd iterations.
    tol : float, default=1e-4
        Relative tolerance of K-means.
    random_state : int, RandomState instance or None, default=None
        Seed of the initialisation.

    Attributes
    ----------
    labels_, centers_, sizes_, n_partitions_, fit_seconds_
        As in :class:`RandomPartitioner`. ``n_partitions_`` can be smaller
        than ``n_partitions`` when K-means leaves clusters empty (for example
        with fewer distinct points than clusters): empty clusters are dropped
        so they never reach a solver.
    n_iter_ : int
        K-means iterations run.
    inertia_ : float
        K-means objective.

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
        "n_init": [Interval(numbers.Integral, 1, None, closed="left")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
    }

    def __init__(self, n_partitions=8, *, method="kmeans", init="k-means++", n_init=1,
                 max_iter=100, tol=1e-4, random_state=None):
        self.n_partitions = n_partitions
        self.method = method
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _kmeans(self, X, rng):
        # scikit-learn's K-means takes CSR with 32-bit indices only (CSR
        # reaches it above DENSE_BUDGET_BYTES only)
        X = _int32_indices(X, purpose=f"{type(self).__name__} (scikit-learn's K-means)")
        seed = rng.randint(np.iinfo(np.int32).max)
        if self.method == "minibatch":
            km = MiniBatchKMeans(n_clusters=self.n_partitions, init=self.init,
                                 n_init=self.n_init, max_iter=self.max_iter, tol=self.tol,
                                 random_state=seed, batch_size=4096)
        else:
            km = KMeans(n_clusters=self.n_partitions, init=self.init, n_init=self.n_init,
                        max_iter=self.max_iter, tol=self.tol, random_state=seed)
        import warnings

        from sklearn.exceptions import ConvergenceWarning

        with warnings.catch_warnings():
            # fewer distinct points than clusters: handled below by dropping
            # the empty clusters
            warnings.simplefilter("ignore", ConvergenceWarning)
            km.fit(X)
        self.n_iter_ = int(km.n_iter_)
        self.inertia_ = float(km.inertia_)
        return np.asarray(km.cluster_centers_, dtype=np.float64)

    def _partition(self, X, rng):
        centers = self._kmeans(X, rng)
        labels = nearest_center(X, centers)
        counts = np.bincount(labels, minlength=centers.shape[0])
        keep = np.flatnonzero(counts)
        if keep.size < centers.shape[0]:
            remap = np.full(centers.shape[0], -1, dtype=np.intp)
            remap[keep] = np.arange(keep.size)
            labels = remap[labels]
            centers = centers[keep]
        return labels, centers


class _KMeansBasedBalanced(KMeansPartitioner):
    """K-means centres followed by a capacity-limited reassignment."""

    balanced = True

    _parameter_constraints = {
        **KMeansPartitioner._parameter_constraints,
        "recompute_centers": ["boolean"],
    }

    def _finish(self, X, labels, centers):
        if self.recompute_centers:
            centers = partition_means(X, labels, centers.shape[0])
        return labels, centers


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
        (largest gap between the second-nearest and the nearest distance)
        choose first.
    recompute_centers : bool, default=True
        Replace the K-means centres by the means of the balanced partitions
        (lines 15-19 of Algorithm 9); these are the centres used to route new
        samples.
    method, init, n_init, max_iter, tol, random_state
        Passed to K-means, see :class:`KMeansPartitioner`.

    Attributes
    ----------
    labels_, centers_, sizes_, n_partitions_, fit_seconds_, n_iter_, inertia_
        See :class:`KMeansPartitioner`.

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
    }

    def __init__(self, n_partitions=8, *, assign_order="data", recompute_centers=True,
                 method="kmeans", init="k-means++", n_init=1, max_iter=100, tol=1e-4,
                 random_state=None):
        super().__init__(n_partitions, method=method, init=init, n_init=n_init,
                         max_iter=max_iter, tol=tol, random_state=random_state)
        self.assign_order = assign_order
        self.recompute_centers = recompute_centers

    def _partition(self, X, rng):
        centers = self._kmeans(X, rng)
        D = squared_distances(X, centers)
        order = None
        if self.assign_order == "regret" and centers.shape[0] > 1:
            two = np.partition(D, 1, axis=1)[:, :2]
            order = np.argsort(-(two[:, 1] - two[:, 0]), kind="stable")
        cap = _Capacity(X.shape[0], centers.shape[0])
        labels = greedy_capacity_assign(D, cap, order)
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
    random_state : int, RandomState instance or None, default=None
        Seed of the choice of centres.

    Attributes
    ----------
    labels_, centers_, sizes_, n_partitions_, fit_seconds_
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

    def __init__(self, n_partitions=8, *, recompute_centers=True, random_state=None):
        self.n_partitions = n_partitions
        self.recompute_centers = recompute_centers
        self.random_state = random_state

    def _partition(self, X, rng):
        idx = rng.choice(X.shape[0], self.n_partitions, replace=False)
        centers = X[idx]
        centers = centers.toarray() if sp.issparse(centers) else np.array(centers)
        self.initial_centers_ = centers
        return self._assign_fcfs(X, centers)

    def _assign_fcfs(self, X, centers):
        D = squared_distances(X, centers)
        labels = greedy_capacity_assign(D, _Capacity(X.shape[0], centers.shape[0]))
        if self.recompute_centers:
            centers = partition_means(X, labels, centers.shape[0])
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
    method, init, n_init, max_iter, tol, random_state
        Passed to K-means, see :class:`KMeansPartitioner`.

    Attributes
    ----------
    labels_, centers_, sizes_, n_partitions_, fit_seconds_, n_iter_, inertia_
        See :class:`KMeansPartitioner`.

    Notes
    -----
    Algorithm 4 rescans all m samples to find each farthest sample; here the
    members of an over-full cluster are sorted once by distance and moved
    farthest-first, and the moves are assigned with the same exact event
    simulation as FCFS, so the whole rebalancing costs O(m P).
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
                 init="k-means++", n_init=1, max_iter=100, tol=1e-4, random_state=None):
        super().__init__(n_partitions, method=method, init=init, n_init=n_init,
                         max_iter=max_iter, tol=tol, random_state=random_state)
        self.recompute_centers = recompute_centers

    def _partition(self, X, rng):
        P = self.n_partitions
        centers = self._kmeans(X, rng)
        if centers.shape[0] < P:
            # K-means collapsed (duplicate points): pad with random samples so
            # that P balanced partitions still exist
            extra = rng.choice(X.shape[0], P - centers.shape[0], replace=False)
            pad = X[extra]
            pad = pad.toarray() if sp.issparse(pad) else np.asarray(pad)
            centers = np.vstack([centers, pad])
        D = squared_distances(X, centers)
        km_labels = np.argmin(D, axis=1)
        return self._finish(X, self._rebalance(D, km_labels), centers)

    @staticmethod
    def _rebalance(D, km_labels):
        n, P = D.shape
        labels = km_labels.copy()
        counts = np.bincount(km_labels, minlength=P)
        # every cluster starts with all its K-means members; an over-full one
        # has no room until it is processed (in index order, as Algorithm 4)
        cap = _Capacity(n, P, sizes=counts)
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
            labels[movers] = greedy_capacity_assign(D[movers], cap)
        return labels


PARTITIONERS = {
    "random": RandomPartitioner,
    "kmeans": KMeansPartitioner,
    "kbalance": KBalancePartitioner,
    "fcfs": FCFSPartitioner,
    "bkm": BKMPartitioner,
}


def make_partitioner(partitioner, n_partitions, random_state):
    """Resolve a partitioner given by name or instance (cloned, never modified).

    A name gets ``n_partitions`` and ``random_state``; an instance is cloned
    and keeps its own settings.
    """
    if isinstance(partitioner, str):
        if partitioner not in PARTITIONERS:
            raise ValueError(
                f"partitioner must be one of {sorted(PARTITIONERS)} or a partitioner "
                f"instance, got {partitioner!r}"
            )
        return PARTITIONERS[partitioner](n_partitions=n_partitions, random_state=random_state)
    if not (hasattr(partitioner, "fit") and hasattr(partitioner, "assign")):
        raise ValueError(
            "partitioner must be a name or an object with fit(X) and assign(X), "
            f"got {partitioner!r}"
        )
    return clone(partitioner)
