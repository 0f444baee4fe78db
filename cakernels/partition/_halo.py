"""Halo partitions: every partition also trains on the nearest samples of its
neighbours (overlapping domain decomposition; beyond the reference).

A partitioned model errs most near its partition's border, on the samples its
local model never saw. With ``halo=h`` partition ``j`` keeps its own samples
(the owner routes, predicts and is counted in ``sizes_``) and trains also on
the ``k_j`` outside samples closest to its border:

* the margin of an outside sample ``x`` (owned by partition ``o``) for
  partition ``j`` is its signed Euclidean distance to the bisecting
  hyperplane of the two centres, ``(|x - c_j|^2 - |x - c_o|^2) / (2 |c_j -
  c_o|)``: the width of the slab of the Voronoi face between ``o`` and ``j``
  that holds ``x``, negative when ``x`` lies on ``j``'s side. Nearest-centre
  owners (K-means) have no such samples (but for rounding); balanced and
  random partitions do (their owner is not always the nearest centre). They
  come first, since ``j``'s model predicts there, in the order of a hash of
  their values (:func:`_row_keys`): an even sample of them when there are
  more than ``k_j``, whatever the order of the rows or their labels (a clamp
  at 0 tied them all and took the first rows of the file: one class of a
  label-sorted file; deepest-first or nearest-the-border-first samples were
  up to 0.4 and 0.6 points less accurate on ijcnn1 than an even one);
* ``k_j = round(h * m / P)`` (halves rounded up) for the balanced partitioners (every partition
  the same halo, so training sets still differ by at most one sample) and
  ``round(h * sizes_[j])`` for unbalanced ones (K-means), at most the number
  of outside samples;
* ties go to the lower sample index, so the halo is a function of the data,
  the labels and the centres only (the distributed selection gives the
  serial one, up to the last bits of the distances, on which exact ties of
  duplicate rows may then break differently: a shard of one row computes its
  distances as a matrix-vector product).

A sample may be in several halos, never twice in one partition: its weight
counts once per partition that trains on it.
"""

import numpy as np
import scipy.sparse as sp

from ._storage import canonical_csr, squared_distances

__all__ = ["halo_sizes", "halo_indices", "halo_indices_sharded"]


def halo_sizes(sizes, halo, balanced):
    """Halo size ``k_j`` of every partition (see the module docstring)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n, P = int(sizes.sum()), sizes.size
    if halo <= 0.0 or P < 2:
        return np.zeros(P, dtype=np.int64)
    base = np.full(P, n / P) if balanced else sizes.astype(np.float64)
    # capped in floating point before the cast (halo=1e300: an int64 overflow made
    # every halo empty)
    with np.errstate(over="ignore"):
        want = np.floor(halo * base + 0.5)
    return np.minimum(want, n - sizes).astype(np.int64)


_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9),
        np.uint64(0x94D049BB133111EB))


def _mix(h):
    """splitmix64's finaliser (uint64 arrays, wrapping arithmetic)."""
    h = (h ^ (h >> np.uint64(30))) * _MIX[1]
    h = (h ^ (h >> np.uint64(27))) * _MIX[2]
    return h ^ (h >> np.uint64(31))


#: rows of a block of :func:`_row_keys` (dense: ``rows x d`` uint64 temporaries)
KEY_BLOCK_ENTRIES = 1 << 20


def _row_keys(X):
    """A pseudo-random key in ``[0, 1)`` of every row, a function of its values
    only: the sum over its non-zero entries of a hash of (column, value bits),
    in exact integer arithmetic, so that dense and CSR rows (duplicate entries
    summed first), shards and the whole data give every row the same key
    (equal rows: equal keys). Dense rows go in blocks of about
    :data:`KEY_BLOCK_ENTRIES` entries."""
    n, d = X.shape
    col_hash = _mix((np.arange(d, dtype=np.uint64) + np.uint64(1)) * _MIX[0])

    def entry_hash(vals, cols_h):
        vals = np.ascontiguousarray(vals, dtype=np.float64)
        h = _mix(vals.view(np.uint64) ^ cols_h)
        h[vals == 0.0] = 0  # zeros (explicit ones, -0.0) are absent entries
        return h

    acc = np.zeros(n, dtype=np.uint64)
    if sp.issparse(X):
        X = canonical_csr(X)  # an entry stored in parts: the hash of its sum
        h = entry_hash(X.data, col_hash[X.indices])
        filled = np.flatnonzero(np.diff(X.indptr) > 0)
        if filled.size:  # sums modulo 2^64 over each row's entries
            acc[filled] = np.add.reduceat(h, X.indptr[filled])
    else:
        X = np.asarray(X, dtype=np.float64)
        step = max(1, KEY_BLOCK_ENTRIES // max(d, 1))
        for a in range(0, n, step):
            acc[a:a + step] = entry_hash(X[a:a + step], col_hash[None, :]).sum(
                axis=1, dtype=np.uint64)
    return (_mix(acc) >> np.uint64(11)).astype(np.float64) / 2.0 ** 53


def _shared_centres(centers):
    """Whether each centre equals another one (random partitions whose means
    coincide, ``distinct_means=False``): rows of equal :func:`_row_keys` compared
    exactly (O(P d); a P x P x d comparison took 3.4 GB at P=128, d=200,000)."""
    centers = np.asarray(centers)
    keys = _row_keys(centers)
    out = np.zeros(centers.shape[0], dtype=bool)
    order = np.argsort(keys, kind="stable")
    starts = np.flatnonzero(np.r_[True, keys[order][1:] != keys[order][:-1]])
    for group in np.split(order, starts[1:]):
        if group.size < 2:
            continue
        classes = []  # the group's rows by value (one class, but for a hash collision)
        for i in group:
            for members in classes:
                if np.array_equal(centers[i], centers[members[0]]):
                    members.append(i)
                    break
            else:
                classes.append([i])
        for members in classes:
            if len(members) > 1:
                out[members] = True
    return out


def _keys_where_needed(X, D, labels, centers):
    """:func:`_row_keys` of the rows that lie on another centre's side of their
    owner's border (nearer another centre than their owner), or whose owner's
    centre is another partition's too, 0 elsewhere: only those rows' keys are
    used (none for nearest-centre owners)."""
    keys = np.zeros(X.shape[0])
    if not D.shape[0]:
        return keys
    own = D[np.arange(D.shape[0]), labels]
    needs = np.flatnonzero((own > D.min(axis=1)) | _shared_centres(centers)[labels])
    if needs.size:
        keys[needs] = _row_keys(X[needs])
    return keys


def _margins(D, labels, centers, j, keys):
    """Signed distance of every row to the border of partition ``j`` (``inf``
    for its own rows), from the squared distances ``D`` to every centre; rows
    on ``j``'s side of it (negative) get ``-2 + keys`` instead: first, in the
    order of their keys (:func:`_row_keys`). So do the rows of a partition
    whose centre is ``j``'s too (no border between them: every such row is as
    near ``j`` as its owner; their margin was 0/0, and they were no
    candidates)."""
    diff = centers[j][None, :] - centers
    gap = 2.0 * np.sqrt(np.einsum("ij,ij->i", diff, diff))  # 2 |c_j - c_o|
    own = D[np.arange(D.shape[0]), labels]
    with np.errstate(divide="ignore", invalid="ignore"):
        m = (D[:, j] - own) / gap[labels]
    inside = (m < 0.0) | (gap[labels] == 0.0)
    m[inside] = keys[inside] - 2.0
    m[labels == j] = np.inf
    return m


#: columns of the squared distances copied contiguous at a time (:func:`_each_margin`)
MARGIN_BLOCK = 64


def _each_margin(D, labels, centers, keys):
    """``(j, margins)`` for every partition ``j``: :func:`_margins`'s values (the
    same operations on the same numbers: the same bits), with the work shared
    between the partitions: every row's distance to its own centre and the rows of
    every partition once, and the distances to ``MARGIN_BLOCK`` centres at a time
    copied contiguous (a column of the row-major ``D`` is read with a stride of
    ``P`` doubles). The yielded array is reused: use it before the next."""
    n, P = D.shape
    own = D[np.arange(n), labels]
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(P + 1))
    m, g = np.empty(n), np.empty(n)
    inside, flat = np.empty(n, dtype=bool), np.empty(n, dtype=bool)
    for a in range(0, P, MARGIN_BLOCK):
        columns = np.ascontiguousarray(D[:, a:a + MARGIN_BLOCK].T)
        for j in range(a, min(P, a + MARGIN_BLOCK)):
            diff = centers[j][None, :] - centers
            gap = 2.0 * np.sqrt(np.einsum("ij,ij->i", diff, diff))  # 2 |c_j - c_o|
            np.take(gap, labels, out=g)
            with np.errstate(divide="ignore", invalid="ignore"):
                np.subtract(columns[j - a], own, out=m)
                np.divide(m, g, out=m)
            np.less(m, 0.0, out=inside)
            np.equal(g, 0.0, out=flat)
            inside |= flat
            m[inside] = keys[inside] - 2.0
            m[order[bounds[j]:bounds[j + 1]]] = np.inf
            yield j, m


def _smallest_in_order(margin, k, n_finite):
    """:func:`_smallest` for margins whose index increases with their position
    (``n_finite`` of them finite, the others ``inf``): positions of the ``k``
    smallest, ties to the lower position, in increasing order."""
    if k >= n_finite:
        return np.flatnonzero(np.isfinite(margin))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    thr = np.partition(margin, k - 1)[k - 1]  # (finite: k <= n_finite)
    less = np.flatnonzero(margin < thr)
    eq = np.flatnonzero(margin == thr)[:k - less.size]  # (in position order)
    return np.sort(np.concatenate([less, eq]))


def _smallest(margin, index, k):
    """Positions of the ``k`` smallest ``(margin, index)`` pairs (``margin``
    finite), in increasing ``index`` order."""
    cand = np.flatnonzero(np.isfinite(margin))
    if k >= cand.size:
        return cand
    if k <= 0:
        return cand[:0]
    mc = margin[cand]
    thr = np.partition(mc, k - 1)[k - 1]
    less = cand[mc < thr]
    eq = cand[mc == thr]
    eq = eq[np.argsort(index[eq], kind="stable")][:k - less.size]
    sel = np.concatenate([less, eq])
    return sel[np.argsort(index[sel], kind="stable")]


def halo_indices(X, labels, centers, sizes, halo, balanced):
    """The halo of every partition: a list of ``P`` sorted index arrays.

    Parameters
    ----------
    X : {ndarray, CSR matrix} of shape (n_samples, n_features)
        The rows the partition was computed on (the partitioner's storage).
    labels : ndarray of shape (n_samples,)
        Owner partition of every row.
    centers : ndarray of shape (P, n_features)
        Distinct partition centres.
    sizes : ndarray of shape (P,)
        Rows per partition.
    halo : float
        The fraction ``h >= 0``.
    balanced : bool
        Whether the partitioner balances the partitions.
    """
    P = centers.shape[0]
    k = halo_sizes(sizes, halo, balanced)
    if not k.any():
        return [np.zeros(0, dtype=np.int64) for _ in range(P)]
    labels = np.asarray(labels, dtype=np.int64)
    D = squared_distances(X, centers)
    keys = _keys_where_needed(X, D, labels, centers)
    outside = X.shape[0] - np.bincount(labels, minlength=P)
    return [_smallest_in_order(m, int(k[j]), int(outside[j])).astype(np.int64)
            for j, m in _each_margin(D, labels, centers, keys)]


def halo_indices_sharded(comm, X, labels, offset, centers, sizes, halo, balanced):
    """:func:`halo_indices` of data spread over MPI ranks, with the same result.

    Collective. Every rank passes its rows (global indices ``offset ..
    offset + n_local``) and their owners; it selects its own ``k_j`` best
    candidates of every partition (a superset of its share of the global
    halo), one allgather of their margins and indices (no data rows) gives
    every rank the same global selection. Returns global indices.
    """
    P = centers.shape[0]
    k = halo_sizes(sizes, halo, balanced)
    if not k.any():
        return [np.zeros(0, dtype=np.int64) for _ in range(P)]
    labels = np.asarray(labels, dtype=np.int64)
    index = offset + np.arange(X.shape[0], dtype=np.int64)
    parts, margins, indices = [], [], []
    if X.shape[0]:
        D = squared_distances(X, centers)
        keys = _keys_where_needed(X, D, labels, centers)
        outside = X.shape[0] - np.bincount(labels, minlength=P)
        for j, m in _each_margin(D, labels, centers, keys):
            sel = _smallest_in_order(m, int(k[j]), int(outside[j]))
            parts.append(np.full(sel.size, j, dtype=np.int64))
            margins.append(m[sel])
            indices.append(index[sel])
    packed = np.zeros((0, 3))
    if parts:
        packed = np.column_stack([np.concatenate(parts).astype(np.float64),
                                  np.concatenate(margins),
                                  np.concatenate(indices).astype(np.float64)])
    every = np.concatenate([a.reshape(-1, 3) for a in comm.Allgatherv(packed)])
    out = []
    for j in range(P):
        rows = every[every[:, 0] == j]
        idx = rows[:, 2].astype(np.int64)
        sel = _smallest(rows[:, 1], idx, int(k[j]))
        out.append(np.sort(idx[sel]))
    return out
