"""Kernel functions evaluated block-wise through matrix products.

Every kernel in the package is computed from the Gram matrix ``X @ Y.T``
(one BLAS call, dense or CSR) followed by an element-wise transform done in
place by the native module (``cakernels._native``, OpenMP when built in):

* ``'linear'``  : ``<x, y>``
* ``'rbf'``     : ``exp(-gamma * ||x - y||^2)`` with
  ``||x - y||^2 = ||x||^2 + ||y||^2 - 2 <x, y>`` (clipped at 0)
* ``'poly'``    : ``(gamma <x, y> + coef0) ** degree``
* ``'sigmoid'`` : ``tanh(gamma <x, y> + coef0)``

These are Table 2.1 / 3.1 of the reference; for kernel ridge regression the
thesis writes the Gaussian kernel with ``sigma``, i.e.
``gamma = 1 / (2 sigma^2)``.

Large products are never formed at once: :func:`kernel_dot` walks over row
blocks whose size keeps the temporary kernel block under a byte budget.
"""

import numpy as np
import scipy.sparse as sp

from . import _native
from .backends._pool import row_blocks, run_blocks

KERNELS = ("rbf", "linear", "poly", "sigmoid")
_KIND = {"linear": 0, "rbf": 1, "poly": 2, "sigmoid": 3}

#: default byte budget for one temporary kernel block (64 MiB)
BLOCK_BYTES = 64 * 2**20
#: kernel blocks of fewer entries are computed in one piece (see kernel_block)
PARALLEL_ENTRIES = 2**16
#: entries of one row block of a larger kernel block (512 KiB) ...
BLOCK_ENTRIES = 2**16
#: ... and its fewest rows (and at least 4 per feature, see _shared_blocks)
MIN_BLOCK_ROWS = 64
#: entries of a batch-by-model product (``rows x stored rows``) from which OpenBLAS
#: may run it on several threads (its matrix-vector threshold, 2,304 x
#: GEMM_MULTITHREAD_THRESHOLD = 4; its matrix products start later)
BLAS_THREADED_ENTRIES = 9216


def wants_one_blas_thread(rows_per_model, stored_rows):
    """Whether a prediction of ``rows_per_model`` rows per model against
    ``stored_rows`` rows of a model should hold BLAS to one thread: when
    :func:`kernel_dot` shares row blocks among threads itself, or when
    OpenBLAS would thread the product (on two BLAS threads a small batch
    waited for a busy core at every call). Smaller products are left alone:
    changing BLAS's threads and back costs 40-100 us."""
    return (rows_per_model >= 2 * MIN_BLOCK_ROWS
            or rows_per_model * stored_rows >= BLAS_THREADED_ENTRIES)
#: a sparse right operand of a product may be copied dense up to this size
DENSE_RIGHT_BYTES = 64 * 2**20


def sigma_to_gamma(sigma):
    """Return ``1 / (2 sigma^2)``, the ``gamma`` of a Gaussian kernel of width ``sigma``.

    A ValueError when it is not a positive finite float64 (``sigma`` below about
    1e-154 or above about 1e154)."""
    try:
        gamma = 1.0 / (2.0 * float(sigma) ** 2)
    except (ZeroDivisionError, OverflowError):
        gamma = float("nan")
    if not (0.0 < gamma < float("inf")):
        raise ValueError(f"sigma={float(sigma):g} gives gamma = 1/(2 sigma^2) outside the positive "
                         "float64 range; choose sigma between 1e-150 and 1e150")
    return gamma


#: the one-pass variance ``E[x^2] - E[x]^2`` of ``gamma='scale'`` (scikit-learn's
#: for sparse X, and of sharded data) is kept when it is above this fraction of
#: ``E[x^2]``; below it may have cancelled (one constant feature of 0.0025 gave
#: -5e-21, a negative gamma and NaN decisions), and the two-pass sum replaces it
SCALE_CANCEL = 1e-6


def canonical_csr(X):
    """``X`` if it is a CSR matrix in canonical format (sorted indices, no
    duplicate entries), else a canonical CSR copy (duplicates summed): the
    caller's matrix is not modified, and the same matrix stored either way
    gives the same bits downstream."""
    if X.format == "csr" and X.has_canonical_format:
        return X
    X = sp.csr_matrix(X, copy=True)
    X.sum_duplicates()
    return X


def canonical_rows(X):
    """A validated ``X``: a CSR matrix in canonical format (:func:`canonical_csr`:
    unsorted or repeated indices gave kernel values, and so predictions, a few
    units in the last place apart from the same matrix stored canonically), a
    dense array as it is."""
    # (the pointers first: SciPy's sorting of the indices writes out of bounds on
    # row pointers that decrease)
    return canonical_csr(check_csr_pointers(X)) if sp.issparse(X) else X


def centered_sq_sum(X, mean, block_rows=65536):
    """``sum((x - mean)^2)`` over all ``n x d`` entries of ``X`` (the implicit
    zeros of a sparse matrix too), by blocks of rows."""
    total = 0.0
    if sp.issparse(X):
        X = canonical_csr(X)  # duplicates add before squaring
        zeros = X.shape[0] * X.shape[1] - X.nnz
        return float(np.sum((X.data - mean) ** 2) + zeros * mean ** 2)
    for a in range(0, X.shape[0], block_rows):
        total += float(np.sum((np.asarray(X[a:a + block_rows], dtype=np.float64) - mean) ** 2))
    return total


def variance_from_moments(moments, centered):
    """The variances of ``k`` sets of values from their summed moments
    ``(k, 3)``: sum, sum of squares, count. The one-pass ``E[x^2] - E[x]^2`` where
    it keeps more than :data:`SCALE_CANCEL` of ``E[x^2]``; for the other sets
    ``centered(sets, means)`` gives the (global) sums of ``(x - mean)^2``, called
    only when one cancelled (collective under MPI: the moments, and so the
    decision, are the same on every rank)."""
    moments = np.asarray(moments, dtype=np.float64).reshape(-1, 3)
    cnt = moments[:, 2]
    var = moments[:, 1] / cnt - (moments[:, 0] / cnt) ** 2
    cancelled = np.flatnonzero(~(var > SCALE_CANCEL * moments[:, 1] / cnt))
    if cancelled.size:
        var[cancelled] = (np.asarray(centered(cancelled, moments[cancelled, 0] / cnt[cancelled]),
                                     dtype=np.float64) / cnt[cancelled])
    return var


def scale_gamma(n_features, var):
    """``gamma='scale'`` from the variance: ``1 / (n_features * var)``, 1 for a
    variance of 0 (as :class:`sklearn.svm.SVC`). ``ValueError`` when the variance
    overflows float64 (features near 1e153 and beyond) or ``gamma`` would: the
    kernel would be constant (``gamma`` 0) or NaN (``gamma`` inf), and the model
    would predict one class without an error."""
    if var == 0:
        return 1.0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        gamma = 1.0 / (n_features * var)
    if not (np.isfinite(var) and 0.0 < gamma < np.inf):
        raise ValueError(
            f"gamma='scale' is 1 / (n_features * X.var()), and X.var() = {float(var):.3g} "
            f"gives gamma = {float(gamma):.3g}: the features are too large or too small for "
            "float64; scale them (e.g. StandardScaler) or give gamma as a number")
    return gamma


def _dense_var(X):
    """``X.var()`` (scikit-learn's value, bit for bit), and where its sums of
    squares overflow although the variance does not (features near 1e153), the
    variance of ``X / 2^k`` times ``2^k`` twice: a power of two scales every
    operation exactly."""
    var = X.var()
    if np.isfinite(var) or X.size == 0:
        return var
    big = float(np.max(np.abs(X)))
    if not (np.isfinite(big) and big > 0):
        return var
    scale = 2.0 ** float(np.ceil(np.log2(big)))
    return float((X / scale).var() * scale * scale)


def resolve_gamma(gamma, X):
    """Resolve scikit-learn's ``gamma`` (``'scale'``, ``'auto'`` or a float) on ``X``.

    ``'scale'`` is ``1 / (n_features * X.var())`` and ``'auto'`` is
    ``1 / n_features``, computed exactly as :class:`sklearn.svm.SVC` does so
    that a single partition reproduces ``SVC`` (for sparse X, where SVC's
    one-pass variance cancels, below :data:`SCALE_CANCEL`, the two-pass one:
    SVC's would be negative or noise, and SVC refuses a negative gamma). A
    float must be finite and ``>= 0``, as ``SVC`` requires (the low-level
    solvers took a negative one and reported a meaningless solve as converged).
    """
    if isinstance(gamma, str):
        if gamma == "scale":
            # (an overflowing variance is scale_gamma's clear error, not NumPy's warning)
            with np.errstate(over="ignore", invalid="ignore"):
                if sp.issparse(X):
                    ex2 = X.multiply(X).mean()
                    X_var = ex2 - X.mean() ** 2
                    if not X_var > SCALE_CANCEL * ex2:
                        X_var = centered_sq_sum(X, X.mean()) / (X.shape[0] * X.shape[1])
                else:
                    X_var = _dense_var(X)
            return scale_gamma(X.shape[1], X_var)
        if gamma == "auto":
            return 1.0 / X.shape[1]
        raise ValueError(f"gamma must be 'scale', 'auto' or a float, got {gamma!r}")
    value = float(gamma)
    if not (np.isfinite(value) and value >= 0):  # (as SVC; exp(+gamma d^2) is no kernel)
        raise ValueError(f"gamma must be a finite float >= 0, 'scale' or 'auto', got {gamma!r}")
    return value


#: rows of a CSR matrix squared at a time by :func:`row_sq_norms`
SQ_NORM_BLOCK_ROWS = 65536


def row_sq_norms(X):
    """Squared Euclidean norm of every row of a dense array or CSR matrix.

    CSR: the squares of the stored values summed per row, in blocks of
    :data:`SQ_NORM_BLOCK_ROWS` rows (``X.multiply(X)`` gives the same bits but
    makes about twice the matrix in temporaries); a matrix with duplicate or
    unsorted entries is summed on a canonical copy, never in place."""
    if not sp.issparse(X):
        return np.einsum("ij,ij->i", X, X)
    X = canonical_csr(X)  # duplicates add before squaring
    n = X.shape[0]
    out = np.empty(n, dtype=np.float64)
    for a in range(0, n, SQ_NORM_BLOCK_ROWS):
        b = min(a + SQ_NORM_BLOCK_ROWS, n)
        lo, hi = X.indptr[a], X.indptr[b]
        sq = np.square(X.data[lo:hi], dtype=np.float64)
        block = sp.csr_matrix((sq, X.indices[lo:hi], X.indptr[a:b + 1] - lo),
                              shape=(b - a, X.shape[1]))
        out[a:b] = np.asarray(block.sum(axis=1)).ravel()
    return out


def check_csr_pointers(X):
    """``X`` (CSR) when its row pointers and the column indices they cover are
    valid, else ``ValueError``: SciPy's ``sum_duplicates`` (and anything that
    sorts the indices) writes out of bounds and aborts the process on row
    pointers that decrease or pass the stored entries, and products with a
    column index outside ``[0, n_features)`` read out of bounds (a crash) or,
    negative, wrap around to other columns. ``csr_matrix((data, indices,
    indptr))`` checks neither."""
    p = X.indptr
    if (p.size != X.shape[0] + 1 or p[0] != 0 or p[-1] > min(X.indices.size, X.data.size)
            or np.any(p[1:] < p[:-1])):
        raise ValueError("invalid CSR matrix: indptr must start at 0, never decrease and "
                         "end within the stored entries (X.check_format(full_check=True) "
                         "says more)")
    used = X.indices[:p[-1]]
    if used.size and (used.min() < 0 or used.max() >= X.shape[1]):
        bad = int(used.min()) if used.min() < 0 else int(used.max())
        raise ValueError(f"invalid CSR matrix: column index {bad} is outside [0, "
                         f"{X.shape[1]}) (X.check_format(full_check=True) says more)")
    return X


#: the largest squared row norm accepted: ``||x||^2 + ||c||^2 - 2 x.c`` (distances
#: to centres, RBF kernels) stays finite for two such rows (the sum and
#: ``2 |x.c| <= 2 ||x|| ||c||`` are each at most half of float64's largest value)
MAX_SQ_NORM = float(np.finfo(np.float64).max) / 4


def check_magnitude(X, sq_norms=None):
    """Raise ``ValueError`` when a row's squared norm passes :data:`MAX_SQ_NORM`.

    Distances to centres and every kernel need ``||x||^2 + ||c||^2 - 2 x.c``;
    with features near 7e153 or beyond it overflows (``inf - inf``), distances
    become NaN and a solver would return a meaningless model, or a prediction
    NaN, without an error.

    Parameters
    ----------
    X : {ndarray, CSR matrix} of shape (n_rows, n_features)
    sq_norms : ndarray of shape (n_rows,), default=None
        ``row_sq_norms(X)`` when already computed.

    Returns
    -------
    sq_norms : ndarray of shape (n_rows,)

    A CSR matrix's structure is checked first (:func:`check_csr_pointers`):
    every fit, predict and assign path calls this before it computes with ``X``.
    """
    if sp.issparse(X) and X.format == "csr":
        check_csr_pointers(X)
    if sq_norms is None:
        with np.errstate(over="ignore", invalid="ignore"):
            sq_norms = row_sq_norms(X)
    bad = ~(sq_norms <= MAX_SQ_NORM)
    if np.any(bad):
        data = X.data if sp.issparse(X) else X
        big = float(np.max(np.abs(data))) if data.size else 0.0
        raise ValueError(
            f"feature values too large: the squared norm of {int(bad.sum())} of "
            f"{bad.size} rows passes {MAX_SQ_NORM:.2g} (largest |value| {big:.3g}); "
            "distances and kernels need ||x||^2 + ||c||^2 to stay within float64 "
            "(1.8e308): scale the features (e.g. StandardScaler)")
    return sq_norms


def magnitude_stats(X, sq_norms=None):
    """``(largest |value|, largest squared row norm)`` of ``X`` (zeros when empty),
    for :func:`tiny_features_error` (summed over MPI shards by ``max``)."""
    data = X.data if sp.issparse(X) else X
    if not data.size:
        return 0.0, 0.0
    if sq_norms is None:
        sq_norms = row_sq_norms(X)
    return float(np.max(np.abs(data))), float(np.max(sq_norms))


#: the smallest largest squared row norm a training set may have: a subnormal
#: float64 number below it (features below about 1.8e-158) keeps fewer than 26 of
#: the 53 bits of its significand
MIN_SQ_NORM = float(np.finfo(np.float64).tiny) * 2.0**-26


def tiny_features_error(max_abs, max_sq_norm):
    """The error message for training data whose features are non-zero but so
    small that every row's squared norm is below :data:`MIN_SQ_NORM`, or None.

    Squared norms, distances and kernel products of such rows are subnormal
    numbers with few digits left, or 0: every row is as near to every centre
    as any other (K-means made one partition of four clusters near 1e-162, the
    balanced partitioners random ones) and every kernel value the same, without
    an error. The training set as a whole is checked (a fit's data, all ranks'
    shards): a few tiny rows among others, at training or prediction, are fine.
    """
    if max_abs > 0 and max_sq_norm < MIN_SQ_NORM:
        return (f"feature values too small: the largest |value| is {max_abs:.3g}, and the "
                f"rows' squared norms (at most {max_sq_norm:.3g}) are subnormal float64 "
                "numbers with fewer than 26 of their 53 bits left, so distances and kernels "
                "lose their digits and cannot tell the rows apart; scale the features "
                "(e.g. StandardScaler)")
    return None


def check_tiny_features(X, sq_norms=None):
    """Raise :func:`tiny_features_error`'s ``ValueError`` for the training data ``X``."""
    error = tiny_features_error(*magnitude_stats(X, sq_norms))
    if error is not None:
        raise ValueError(error)


#: the error of a solve whose kernel values (not only the diagonal) overflow
KERNEL_OVERFLOW = (
    "kernel values overflow float64 (K(x, x') is inf or NaN for some pair of rows, though "
    "K(x, x) is finite: a polynomial kernel with a negative coef0, or a large gamma or "
    "degree, on these features); scale the features or lower gamma or degree")


def check_kernel_diagonal(sq_norms, kernel, gamma, degree, coef0, dtype=np.float64):
    """Raise ``FloatingPointError`` when ``K(x, x)`` is not finite in ``dtype``
    for some row (a polynomial or linear kernel overflowing for large gamma,
    degree or features), naming the likely cause. ``dtype=np.float32`` is
    LIBSVM's kernel cache (``Qfloat``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if kernel == "linear":
            diag = sq_norms
        elif kernel == "poly":
            diag = (gamma * sq_norms + coef0) ** degree
        else:  # rbf: 1; sigmoid: tanh, bounded
            return
    limit = np.finfo(dtype).max
    bad = ~(np.abs(diag) <= limit)
    if np.any(bad):
        name = np.dtype(dtype).name
        where = " (LIBSVM, solver='libsvm', caches the kernel in float32)" \
            if dtype == np.float32 else ""
        raise FloatingPointError(
            f"kernel values overflow {name}{where}: K(x, x) is not finite for "
            f"{int(bad.sum())} of {bad.size} rows (kernel={kernel!r}, gamma={gamma:.3g}, "
            f"degree={degree}, largest ||x||^2 {float(np.max(sq_norms)):.3g}); reduce gamma "
            "or degree, or scale the features")


def _gram(X, Y):
    """``X @ Y.T`` as a C-contiguous float64 ndarray (dense or CSR operands)."""
    return _gram_t(X, _right_operand(X, Y))


def _right_operand(X, Y):
    """``Y.T``, prepared for the products ``X[rows] @ Y.T``.

    Both sparse: SciPy's sparse-sparse product builds a sparse result that is
    mostly filled when the rows share features (a9a's 123 features at 11%:
    1,000 x 886 rows 17 ms, then a dense copy), while CSR times a dense
    ``Y.T`` writes dense rows directly (2.3 ms there). The dense copy is taken
    when that is cheaper by a cost model measured on both products (the
    sparse product pays per multiply-add and per non-zero of its result, the
    dense one per non-zero of ``X`` and row of ``Y``) and the copy takes at
    most ``DENSE_RIGHT_BYTES``. Every product adds the same terms in the same
    order either way, so the values are the same.
    """
    if not (sp.issparse(X) and sp.issparse(Y)):
        return Y.T
    n_x, d = X.shape
    n_y = Y.shape[0]
    if d > X.nnz + Y.nnz + n_x + n_y:
        return _UsedColumns(Y)
    if n_x == 0 or n_y == 0 or d == 0 or 8 * n_y * d > DENSE_RIGHT_BYTES:
        return Y.T
    rho_x, rho_y = X.nnz / (n_x * d), Y.nnz / (n_y * d)
    row_nnz = max(X.nnz / n_x, 1.0)
    filled = -np.expm1(-d * rho_x * rho_y)  # expected fraction of non-zeros of X @ Y.T
    # ns per (non-zero of X) x (row of Y): dense 0.25; sparse 2.5 per multiply-add
    # (a fraction rho_y of them) and 18 per non-zero of its result
    if 2.5 * rho_y + 18.0 * filled / row_nnz > 0.25:
        return np.ascontiguousarray(Y.toarray().T, dtype=np.float64)
    return Y.T


class _UsedColumns:
    """``Y.T`` over the columns ``Y`` uses only, for a feature space much wider
    than the operands' non-zeros (one large LIBSVM index): SciPy's sparse
    product converts ``Y.T`` to CSR, whose index pointer has one entry per
    feature (2^31 features: 16 GiB and seconds per product). The other
    operand's columns are mapped to the same narrow space by :meth:`narrow`;
    its entries in other columns meet no entry of ``Y`` and are dropped. The
    products add the same terms in the same order, so the values are the
    same as the wide product's."""

    def __init__(self, Y):
        Y = sp.csr_matrix(Y)
        self.cols = np.unique(Y.indices)
        Yn = sp.csr_matrix((Y.data, np.searchsorted(self.cols, Y.indices), Y.indptr),
                           shape=(Y.shape[0], self.cols.size))
        self.T = Yn.T

    def narrow(self, X):
        """``X`` (CSR) restricted to the used columns, renumbered."""
        X = sp.csr_matrix(X)
        if self.cols.size == 0:
            return sp.csr_matrix((X.shape[0], 0))
        pos = np.searchsorted(self.cols, X.indices)
        keep = self.cols[np.minimum(pos, self.cols.size - 1)] == X.indices
        kept = np.concatenate(([0], np.cumsum(keep)))
        return sp.csr_matrix((X.data[keep], pos[keep], kept[X.indptr]),
                             shape=(X.shape[0], self.cols.size))


def _gram_t(X, Yt):
    """``X @ Yt`` as a C-contiguous float64 ndarray (``Yt`` from :func:`_right_operand`)."""
    if isinstance(Yt, _UsedColumns):
        X, Yt = Yt.narrow(X), Yt.T
    G = X @ Yt
    if sp.issparse(G):
        G = G.toarray()
    return np.ascontiguousarray(G, dtype=np.float64)


def kernel_block(X, Y, *, kernel="rbf", gamma=1.0, degree=3, coef0=0.0,
                 X_sq_norms=None, Y_sq_norms=None, n_threads=1):
    """Evaluate the kernel matrix ``K(X, Y)`` of shape ``(len(X), len(Y))``.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_x, n_features)
    Y : {ndarray, sparse matrix} of shape (n_y, n_features)
    kernel : {'rbf', 'linear', 'poly', 'sigmoid'}, default='rbf'
    gamma, degree, coef0 : float
        Kernel parameters, with scikit-learn's meaning.
    X_sq_norms, Y_sq_norms : ndarray, default=None
        Precomputed squared row norms (RBF only); computed when omitted.
    n_threads : int, default=1
        Threads. A block of at least ``PARALLEL_ENTRIES`` entries is computed
        in row blocks that depend only on its shape, each by one thread with
        BLAS limited to one thread, on up to ``n_threads`` threads
        (:func:`cakernels.backends._pool.run_blocks`): the values do not
        depend on ``n_threads``. A smaller block is one product (BLAS's own
        threads) and a one-thread transform.

    Returns
    -------
    K : ndarray of shape (n_x, n_y)
    """
    if kernel not in _KIND:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    xn = yn = None
    if kernel == "rbf":
        xn = row_sq_norms(X) if X_sq_norms is None else X_sq_norms
        yn = row_sq_norms(Y) if Y_sq_norms is None else Y_sq_norms
        xn = np.ascontiguousarray(xn, dtype=np.float64)
        yn = np.ascontiguousarray(yn, dtype=np.float64)
    n_x, n_y = X.shape[0], Y.shape[0]
    Yt = _right_operand(X, Y)
    blocks = _shared_blocks(n_x, n_y, X.shape[1])
    if blocks is None:
        K = _kernel_rows(X, Yt, xn, yn, kernel, gamma, degree, coef0)
    else:
        K = np.empty((n_x, n_y), dtype=np.float64)

        def fill(start, stop):
            _kernel_rows(X[start:stop], Yt, None if xn is None else xn[start:stop], yn,
                         kernel, gamma, degree, coef0, out=K[start:stop])

        run_blocks(fill, blocks, n_threads)
    if kernel == "rbf" and X is Y:
        # K(x, x) = 1 exactly, as scikit-learn's euclidean_distances zeroes the
        # distances of X to itself: ||x||^2 + ||x||^2 - 2 x.x, summed in other
        # orders, is not 0 for rows far from the origin (gamma ||x||^2 ~ 1e13
        # turned the diagonal to 0 there)
        np.fill_diagonal(K, 1.0)
    return K


def _kernel_rows(X, Yt, xn, yn, kernel, gamma, degree, coef0, out=None):
    """``K(X, Y)`` on the calling thread, ``Yt`` from :func:`_right_operand`
    (norms given for 'rbf'); into ``out`` (C-contiguous rows of the result)
    when given, without a temporary for dense operands."""
    if out is None:
        G = _gram_t(X, Yt)
    elif sp.issparse(X) or sp.issparse(Yt):
        G = out
        G[...] = _gram_t(X, Yt)
    else:
        G = np.matmul(X, Yt, out=out)
    if kernel != "linear":
        _native.kernel_from_gram(G, xn, yn, _KIND[kernel], float(gamma), float(coef0),
                                 float(degree), 1)
    return G


def _shared_blocks(n_x, n_y, n_features, block_bytes=BLOCK_BYTES):
    """The row blocks of a kernel block of ``n_x`` x ``n_y`` entries that
    :func:`run_blocks` shares among threads, or None for a block too small to
    share. They depend on the shape only (never on a thread count), so that
    the values do not either: BLAS's results depend on how rows are blocked.

    At least ``4 * n_features`` rows: every block's product packs all of
    ``Y`` again, which cost 15% of the product with 64-row blocks of a
    4,096 x 4,096 block at 256 features on one core (7.5% with 256 rows, 1%
    with 1,024)."""
    if n_x < 2 * MIN_BLOCK_ROWS or n_x * n_y < PARALLEL_ENTRIES:
        return None
    rows = max(MIN_BLOCK_ROWS, BLOCK_ENTRIES // max(n_y, 1), 4 * int(n_features))
    # at most a quarter of the byte budget per block (temporaries of kernel_dot)
    rows = min(rows, block_rows(n_y, block_bytes // 4))
    return row_blocks(n_x, rows)


def block_rows(n_cols, block_bytes=BLOCK_BYTES):
    """Number of rows of an ``n_cols``-wide float64 block that fit in ``block_bytes``."""
    return int(max(1, block_bytes // (8 * max(int(n_cols), 1))))


def kernel_dot(X, Y, coef, *, kernel="rbf", gamma=1.0, degree=3, coef0=0.0,
               block_bytes=BLOCK_BYTES, Y_sq_norms=None, n_threads=1):
    """Compute ``K(X, Y) @ coef`` without forming ``K(X, Y)`` at once.

    Rows of ``X`` are processed in blocks so that each temporary kernel block
    stays under ``block_bytes`` (a quarter of it when the work is shared
    among ``n_threads`` threads, each computing a block's kernel and product on
    one core, as :func:`kernel_block`; the values do not depend on
    ``n_threads``).

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_x, n_features)
    Y : {ndarray, sparse matrix} of shape (n_y, n_features)
    coef : ndarray of shape (n_y,) or (n_y, k), or sparse matrix of shape (n_y, k)
    kernel, gamma, degree, coef0
        As in :func:`kernel_block`.
    block_bytes : int, default=BLOCK_BYTES
    Y_sq_norms : ndarray of shape (n_y,), default=None
        ``row_sq_norms(Y)`` when already computed (RBF).
    n_threads : int, default=1

    Returns
    -------
    out : ndarray of shape (n_x,) + coef.shape[1:]
    """
    if kernel not in _KIND:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    sparse_coef = sp.issparse(coef)
    coef = (sp.csr_matrix(coef, dtype=np.float64) if sparse_coef
            else np.asarray(coef, dtype=np.float64))
    n_x, n_y = X.shape[0], Y.shape[0]
    xn = yn = None
    if kernel == "rbf":
        yn = np.ascontiguousarray(row_sq_norms(Y) if Y_sq_norms is None else Y_sq_norms,
                                  dtype=np.float64)
        xn = row_sq_norms(X)
    Yt = _right_operand(X, Y)

    def rows_dot(start, stop):
        K = _kernel_rows(X[start:stop], Yt, None if xn is None else xn[start:stop], yn,
                         kernel, gamma, degree, coef0)
        with np.errstate(over="ignore", invalid="ignore"):  # (_finite_dot's error)
            return (coef.T @ K.T).T if sparse_coef else K @ coef

    blocks = _shared_blocks(n_x, n_y, X.shape[1], block_bytes)
    if blocks is None:  # small: one thread, BLAS as it is
        step = block_rows(n_y, block_bytes)
        if n_x <= step:
            return _finite_dot(np.asarray(rows_dot(0, n_x), dtype=np.float64))
        blocks, n_threads = row_blocks(n_x, step), 0
    out = np.empty((n_x,) + coef.shape[1:], dtype=np.float64)

    def one(start, stop):
        out[start:stop] = rows_dot(start, stop)

    if n_threads == 0:
        for start, stop in blocks:
            one(start, stop)
    else:
        run_blocks(one, blocks, n_threads)
    return _finite_dot(out)


def _finite_dot(out):
    """``out`` of :func:`kernel_dot`, or the fit's ``FloatingPointError`` when a
    value is NaN or inf: the coefficients and rows are finite (checked), so the
    kernel overflowed on rows the fit never saw (a polynomial kernel on large test
    rows), and a NaN decision value predicted a class silently."""
    if not np.all(np.isfinite(out)):
        raise FloatingPointError(
            f"{int(np.sum(~np.isfinite(out)))} of {out.size} kernel sums K(x, .) @ coef are "
            "NaN or inf: kernel values overflow float64 on these rows (a polynomial "
            "kernel of large feature values, a large gamma or degree, or a negative "
            "coef0); scale the features as for the fit, or lower gamma or degree")
    return out
