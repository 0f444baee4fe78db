"""Storage, distances and nearest centres of the partitioning layer (see the
"Storage format" section of :mod:`cakernels.partition`)."""

import numbers

import numpy as np
import scipy.sparse as sp

from .._kernels import canonical_csr, row_sq_norms

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


def dense_block_rows(n_features, most=ASSIGN_BLOCK_ROWS):
    """Rows of a block whose dense float64 copy stays within
    :data:`DENSE_BUDGET_BYTES` (at least 1, at most ``most``): the blocks in which
    wide CSR rows are densified."""
    return max(1, min(int(most), DENSE_BUDGET_BYTES // (8 * max(int(n_features), 1))))


#: elements of the one temporary block of :func:`squared_distances` (32 MiB)
DISTANCE_BLOCK_ELEMENTS = 1 << 22


def dense_partitioning(n_samples, n_features):
    """Whether the partitioners compute on dense data for data of this shape.

    Parameters
    ----------
    n_samples, n_features : int
        The shape of the data.

    Returns
    -------
    dense : bool
        True when the dense float64 copy, ``8 * n_samples * n_features``
        bytes, fits :data:`DENSE_BUDGET_BYTES`; the partition then does not
        depend on the storage format of ``X``.

    Examples
    --------
    >>> from cakernels.partition import dense_partitioning
    >>> dense_partitioning(50_000, 123), dense_partitioning(10**7, 300)
    (True, False)
    """
    return 8 * int(n_samples) * int(n_features) <= DENSE_BUDGET_BYTES


def partition_storage(X):
    """The storage the partitioners compute on for ``X``.

    Decided from the shape and the number of non-zero values, which are the
    same for a dense array and its CSR copy: the same data give the same
    partition in either format.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The data to partition.

    Returns
    -------
    storage : {'dense', 'csr', 'as_is'}
        ``'csr'`` when fewer than :data:`SPARSE_DENSITY` of the values are
        non-zero, ``'dense'`` otherwise, ``'as_is'`` (the input's own format)
        when the dense copy would exceed :data:`DENSE_BUDGET_BYTES`.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from cakernels.partition import partition_storage
    >>> X = np.eye(100)
    >>> partition_storage(X), partition_storage(sp.csr_matrix(X))
    ('csr', 'csr')
    >>> partition_storage(np.ones((100, 3)))
    'dense'
    """
    n, d = X.shape
    if not dense_partitioning(n, d):
        return "as_is"
    return storage_for(n, d, count_nonzero(X))


def count_nonzero(X):
    """Non-zero values of a dense array or CSR matrix (explicit zeros not counted;
    duplicate entries summed first). SciPy's ``count_nonzero`` sums a sparse
    matrix's duplicates *in place*, sorting the caller's indices: it runs on a
    copy here unless the matrix is canonical already."""
    if not sp.issparse(X):
        return int(np.count_nonzero(X))
    if X.format in ("csr", "csc") and X.has_canonical_format:
        return int(np.count_nonzero(X.data))
    return int(X.copy().count_nonzero())


def storage_for(n_samples, n_features, nnz):
    """:func:`partition_storage` from the global shape and non-zero count (sharded data)."""
    if not dense_partitioning(n_samples, n_features):
        return "as_is"
    return "dense" if nnz >= SPARSE_DENSITY * n_samples * n_features else "csr"


def _canonical_csr(X):
    """CSR float64 with 32-bit, sorted indices and no explicit zeros (a copy
    when anything changes; the caller's matrix is never modified)."""
    if not sp.issparse(X):
        return _int32_indices(sp.csr_matrix(np.asarray(X, dtype=np.float64)))
    X = _int32_indices(sp.csr_matrix(X, dtype=np.float64), purpose=None)
    # (may share the caller's arrays: nothing below modifies X itself)
    if not X.has_canonical_format or np.count_nonzero(X.data) != X.nnz:
        X = X.copy()
        X.sum_duplicates()  # also sorts the indices
        X.eliminate_zeros()
    return X


_STORAGES = ("as_is", "dense", "csr")


def _check_blocks(block_rows, storage):
    if storage not in _STORAGES:
        raise ValueError(f"storage must be one of {_STORAGES}, got {storage!r}")
    if isinstance(block_rows, (bool, np.bool_)) or not isinstance(block_rows, numbers.Integral) \
            or block_rows < 1:
        raise ValueError(f"block_rows must be a positive integer, got {block_rows!r}")


def to_partition_storage(X, storage):
    """``X`` in the storage ``storage`` (see :func:`partition_storage`)."""
    if storage == "dense":
        return X.toarray() if sp.issparse(X) else np.ascontiguousarray(X, dtype=np.float64)
    if storage == "csr":
        return _canonical_csr(X)
    return X


#: the largest non-zero count (and column count) 32-bit CSR indices hold
#: (a module constant so that tests can lower it)
INT32_LIMIT = np.iinfo(np.int32).max


def _int32_indices(X, purpose=None, canonical=False):
    """CSR with 32-bit indices (what LIBSVM and scikit-learn's K-means take),
    sharing the values.

    ``load_svmlight_file`` and large ``scipy.sparse`` products give int64
    indices; they are narrowed here on a copy of the index arrays (the
    caller's matrix is not modified). ``purpose`` names the step that needs
    32-bit indices in the error raised when they cannot hold the matrix.
    ``canonical=True`` also sums duplicate entries and sorts the indices (on a
    copy): LIBSVM's sparse dot products take one entry per column, so a
    (legal) CSR matrix that stores an entry twice trained another SVM.
    """
    if not sp.issparse(X):
        return X
    if canonical:
        X = canonical_csr(X)
    limit = INT32_LIMIT
    if X.nnz > limit or X.shape[1] > limit:
        what = "sparse input" if purpose is None else f"{purpose}: sparse input"
        raise ValueError(
            f"{what} with more than 2**31 - 1 non-zeros or columns is not supported "
            f"(this one has {X.nnz} non-zeros and {X.shape[1]} columns)"
        )
    if X.indices.dtype == np.int32 and X.indptr.dtype == np.int32:
        return X
    return sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)),
                         shape=X.shape)


# ----------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------
def squared_distances(X, centers, X_sq_norms=None):
    """Squared Euclidean distances between rows of ``X`` and ``centers``.

    Computed as ``||x||^2 + ||c||^2 - 2 x.c`` (one matrix product, dense or
    CSR ``X``), clipped at zero, in the product's own n x P array (block by block
    of rows through one temporary block, not two more n x P arrays).
    """
    if X_sq_norms is None:
        X_sq_norms = row_sq_norms(X)
    c_sq = np.einsum("ij,ij->i", centers, centers)
    D = np.asarray(X @ centers.T, dtype=np.float64)
    if not (D.flags.writeable and D.flags.c_contiguous):
        D = np.array(D, dtype=np.float64, order="C")
    block = max(1, min(D.shape[0], DISTANCE_BLOCK_ELEMENTS // max(1, D.shape[1])))
    buf = np.empty((block, D.shape[1]))
    for start in range(0, D.shape[0], block):
        rows = slice(start, start + block)
        part, tmp = D[rows], buf[: min(block, D.shape[0] - start)]
        # (the same arithmetic, so the same bits, as the whole-array expression
        # (a + c) - 2 x.c: doubling is exact)
        np.add(X_sq_norms[rows, None], c_sq[None, :], out=tmp)
        part *= 2.0
        np.subtract(tmp, part, out=part)
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
    _check_blocks(block_rows, storage)
    n = X.shape[0]
    out = np.empty(n, dtype=np.intp)
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        # one block's copy at a time (a name kept across iterations held the
        # previous block while the next was made: two dense blocks at once)
        D = squared_distances(to_partition_storage(X[start:stop], storage), centers)
        out[start:stop] = np.argmin(D, axis=1)
    return out


def nearest_center_stored(X, centers, storage="as_is"):
    """:func:`nearest_center` as a partition computed on ``storage`` routes rows:
    blocks of at most DENSE_BUDGET_BYTES dense, the same blocks for every storage
    format (dense input up to 2048 features keeps the default blocks), each in
    that storage; ``'as_is'``: the rows as given."""
    if storage == "as_is":
        return nearest_center(X, centers)
    return nearest_center(X, centers, block_rows=dense_block_rows(X.shape[1]), storage=storage)


#: :func:`nearest_centers` selects up to this many centres by rounds of argmin
NEAREST_BY_ROUNDS = 16


def nearest_centers(X, centers, k, *, block_rows=ASSIGN_BLOCK_ROWS, storage="as_is"):
    """The ``k`` nearest centres of every row of ``X`` and their squared distances.

    Same blocks and arithmetic as :func:`nearest_center`, whose answer is the
    first column (ties to the lowest index, a stable sort).

    Returns
    -------
    order : ndarray of shape (n, k), intp
        Centre indices, nearest first.
    sq_dist : ndarray of shape (n, k)
        Their squared Euclidean distances.
    """
    _check_blocks(block_rows, storage)
    n = X.shape[0]
    k = min(int(k), centers.shape[0])
    order = np.empty((n, k), dtype=np.intp)
    dist = np.empty((n, k), dtype=np.float64)
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        D = squared_distances(to_partition_storage(X[start:stop], storage), centers)
        if k > NEAREST_BY_ROUNDS:
            o = np.argsort(D, axis=1, kind="stable")[:, :k]
            order[start:stop] = o
            dist[start:stop] = np.take_along_axis(D, o, axis=1)
            continue
        # k rounds of argmin (the first of equal values, as the stable sort's order)
        # with every chosen centre masked: O(k P) a row instead of the full sort's
        # O(P log P) (73% of routing='vote' predictions at P = 256)
        rows = np.arange(stop - start)
        for i in range(k):
            o = np.argmin(D, axis=1)
            order[start:stop, i] = o
            dist[start:stop, i] = D[rows, o]
            D[rows, o] = np.inf  # (distances are finite: a masked one sorts last)
    return order, dist


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
