"""Distributed partitioning of sharded data (every rank holds some rows).

The global data order is the concatenation of the shards in rank order (for
a file read with :func:`cakernels.datasets.load_svmlight_shard`, the file's
order). Every function takes a communicator (``SelfCommunicator`` for one
process) and this rank's rows, and returns the labels of this rank's rows;
centres and sizes are the same on every rank.

* :func:`kmeans` -- Lloyd's K-means: per iteration one allreduce of the
  centre sums and counts (k x d + k numbers); k-means++ initial centres on a
  sample gathered to rank 0.
* :func:`greedy_assign` -- the capacity-limited greedy assignment of
  Algorithms 3, 4 and 9 (every sample, in the global data order, joins its
  nearest centre that still has room), *exactly*: the event simulation of
  :func:`cakernels.partition.greedy_capacity_assign` with prefix counts over
  the ranks. Each event (a centre filling up) costs two allgathers of
  O(P) integers per rank; there are at most P + 1 events.
* :func:`local_capacity_assign` -- the reference's approximate parallel
  K-balance (section 3.4): every rank assigns its own rows with a capacity of
  ``m_r / P`` per centre (``m / P^2`` for equal shards), no communication;
  partitions are then balanced to within a few samples per rank.
"""

import numpy as np
import scipy.sparse as sp

from .._kernels import row_sq_norms
from ._greedy import _Capacity, _kth_positions, greedy_capacity_assign
from ._storage import squared_distances

_INT_MAX = np.iinfo(np.int64).max


def n_global(comm, X):
    """Total number of rows over the ranks, and this rank's offset in the global order."""
    counts = comm.allgather(int(X.shape[0]))
    rank = comm.rank
    return int(sum(counts)), int(sum(counts[:rank])), counts


def partition_means(comm, X, labels, n_partitions):
    """Mean of every partition over all ranks (P x d) and the global sizes."""
    d = X.shape[1]
    sums = np.zeros((n_partitions, d))
    if X.shape[0]:
        ind = sp.csr_matrix((np.ones(X.shape[0]), (labels, np.arange(X.shape[0]))),
                            shape=(n_partitions, X.shape[0]))
        part = ind @ X
        sums = part.toarray() if sp.issparse(part) else np.asarray(part)
    counts = np.bincount(labels, minlength=n_partitions).astype(np.float64)
    packed = comm.Allreduce(np.concatenate([sums.ravel(), counts]))
    sums, counts = packed[:-n_partitions].reshape(n_partitions, d), packed[-n_partitions:]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts[:, None]
    return np.ascontiguousarray(means), counts.astype(np.int64)


def gather_rows(comm, X, global_index):
    """The rows with the given global indices (in that order), on every rank."""
    _, offset, counts = n_global(comm, X)
    global_index = np.asarray(global_index, dtype=np.int64)
    mine = (global_index >= offset) & (global_index < offset + X.shape[0])
    rows = X[global_index[mine] - offset]
    rows = rows.toarray() if sp.issparse(rows) else np.asarray(rows, dtype=np.float64)
    parts = comm.Allgatherv(np.ascontiguousarray(rows).reshape(-1, X.shape[1]))
    positions = comm.Allgatherv(np.flatnonzero(mine).astype(np.int64))
    out = np.empty((global_index.size, X.shape[1]))
    for pos, part in zip(positions, parts):
        out[pos] = part
    return out


def kmeans(comm, X, n_clusters, *, random_state, init="k-means++", max_iter=100, tol=1e-4,
           sample_size=None):
    """Distributed Lloyd K-means.

    Parameters
    ----------
    comm : communicator
    X : {ndarray, CSR matrix} of shape (n_local, n_features)
        This rank's rows.
    n_clusters : int
    random_state : numpy RandomState
        The same state on every rank (it draws the initial sample).
    init : {'k-means++', 'random'}, default='k-means++'
        k-means++ on a sample gathered to rank 0, or ``n_clusters`` random rows.
    max_iter : int, default=100
    tol : float, default=1e-4
        Relative tolerance as scikit-learn's: stop when the squared centre
        shift is at most ``tol`` times the mean feature variance.
    sample_size : int, default=None
        Rows gathered to rank 0 for the k-means++ initialisation (default
        ``min(n, max(1000, 50 k))``).

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features)
    n_iter : int
    inertia : float
    """
    from sklearn.cluster import kmeans_plusplus

    n, offset, counts = n_global(comm, X)
    d = X.shape[1]
    if init == "random":
        centers = gather_rows(comm, X, random_state.choice(n, n_clusters, replace=False))
    else:
        sample_size = min(n, sample_size or max(1000, 50 * n_clusters))
        seed = random_state.randint(np.iinfo(np.int32).max)
        sample = np.sort(random_state.choice(n, sample_size, replace=False))
        rows = gather_rows(comm, X, sample)
        if comm.rank == 0:
            centers, _ = kmeans_plusplus(rows, n_clusters, random_state=seed)
        else:
            centers = None
        centers = comm.Bcast(np.ascontiguousarray(centers) if comm.rank == 0 else None)
    # scikit-learn's tolerance: tol times the mean variance of the features
    Xd = X
    s1 = np.asarray(Xd.sum(axis=0)).ravel()
    s2 = np.asarray(Xd.multiply(Xd).sum(axis=0)).ravel() if sp.issparse(Xd) else \
        np.einsum("ij,ij->j", Xd, Xd)
    tot = comm.Allreduce(np.concatenate([s1, s2]))
    mean = tot[:d] / n
    var = np.maximum(tot[d:] / n - mean ** 2, 0.0)
    tol_abs = float(np.mean(var)) * tol
    sq = row_sq_norms(X)
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        D = squared_distances(X, centers, sq) if X.shape[0] else np.zeros((0, n_clusters))
        labels = np.argmin(D, axis=1) if X.shape[0] else np.zeros(0, dtype=np.intp)
        new, sizes = partition_means(comm, X, labels, n_clusters)
        empty = sizes == 0
        new[empty] = centers[empty]  # an empty cluster keeps its centre
        shift = float(np.sum((new - centers) ** 2))
        centers = new
        if shift <= tol_abs:
            break
    D = squared_distances(X, centers, sq) if X.shape[0] else np.zeros((0, n_clusters))
    inertia = comm.allreduce(float(D.min(axis=1).sum()) if X.shape[0] else 0.0)
    return centers, n_iter, inertia


def greedy_assign(comm, D, cap, stats=None):
    """Capacity-limited greedy assignment in the global data order, exactly.

    Equals :func:`cakernels.partition.greedy_capacity_assign` applied to the
    rows of all ranks stacked in rank order (ties to the lowest centre).

    An event simulation: every sample's choice is its nearest open centre; a
    round finds, with two fixed-size allgathers, the first sample (in global
    order) at which some centre fills up. The first allgather gives every rank
    the per-rank counts of the remaining choices (so each rank knows which
    rank holds the sample that fills each centre); the second gives each
    rank's earliest such sample with the counts of its choices up to it, so
    every rank can commit the segment before the event and re-route the
    samples whose centre closed. A centre closes at most once, so there are at
    most ``P + 1`` rounds.

    Parameters
    ----------
    comm : communicator
    D : ndarray of shape (n_local, P)
        Distances of this rank's rows to the centres (any monotone transform).
    cap : cakernels.partition._Capacity
        The capacity state for the global number of rows, identical on every
        rank; updated in place.
    stats : dict, default=None
        When given, ``stats['events']`` gets the number of rounds (of two
        allgathers each) the assignment took.

    Returns
    -------
    labels : ndarray of shape (n_local,)
    """
    n, P = D.shape
    stride = comm.allreduce(n, "max") + 1
    Dq = np.array(D, dtype=np.float64)
    closed = cap.room() == 0
    Dq[:, closed] = np.inf
    choice = np.argmin(Dq, axis=1) if n else np.zeros(0, dtype=np.intp)
    labels = np.full(n, -1, dtype=np.intp)
    start = 0
    events = 0
    while True:
        events += 1
        room = cap.room()
        C = comm.Allgather(np.bincount(choice[start:], minlength=P).astype(np.int64))
        total = C.sum(axis=0)
        if int(total.sum()) == 0:
            break
        cum = np.cumsum(C, axis=0)
        # this rank's earliest sample that fills a centre, if any
        key, partial = _INT_MAX, np.zeros(P, dtype=np.int64)
        fills = np.flatnonzero((total >= room) & (room > 0))
        r_star = (cum[:, fills] < room[fills]).sum(axis=0)  # first rank reaching room
        mine = fills[r_star == comm.rank]
        if mine.size:  # their k-th choice on this rank
            k = room[mine] - (cum[comm.rank - 1, mine] if comm.rank else 0)
            pos = _kth_positions(choice[start:], C[comm.rank], mine, k)
            key = comm.rank * stride + start + int(pos.min())
        if key != _INT_MAX:
            partial = np.bincount(choice[start:key % stride + 1], minlength=P).astype(np.int64)
        G = comm.Allgather(np.concatenate([[key], partial]).astype(np.int64))
        stop_rank = int(np.argmin(G[:, 0]))
        if G[stop_rank, 0] == _INT_MAX:  # nothing fills: every remaining sample keeps its choice
            stop_rank, stop_pos, seg_counts = comm.size, 0, total
        else:
            stop_pos = int(G[stop_rank, 0]) % stride
            seg_counts = C[:stop_rank].sum(axis=0) + G[stop_rank, 1:]
        if comm.rank < stop_rank:
            stop = n
        elif comm.rank == stop_rank:
            stop = stop_pos + 1
        else:
            stop = start
        labels[start:stop] = choice[start:stop]
        for j in np.flatnonzero(seg_counts):
            cap.add(j, int(seg_counts[j]))
        start = stop
        if int(total.sum()) == int(seg_counts.sum()):
            break
        newly_closed = (cap.room() == 0) & ~closed
        closed |= newly_closed
        if closed.all():
            raise RuntimeError("capacity exhausted before every sample was assigned")
        if newly_closed.any() and start < n:
            Dq[start:, newly_closed] = np.inf
            redo = start + np.flatnonzero(np.isin(choice[start:], np.flatnonzero(newly_closed)))
            if redo.size:
                choice[redo] = np.argmin(Dq[redo], axis=1)
    if stats is not None:
        stats["events"] = events
    return labels


def local_capacity_assign(D, regret=False):
    """The reference's approximate parallel K-balance (section 3.4): this rank's
    rows alone, every centre taking ``floor`` or ``ceil`` of ``n_local / P``
    (in data order, or by regret within the shard)."""
    n, P = D.shape
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    order = None
    if regret and P > 1:
        two = np.partition(D, 1, axis=1)[:, :2].copy()  # (not a view keeping n x P alive)
        order = np.argsort(-(two[:, 1] - two[:, 0]), kind="stable")
    return greedy_capacity_assign(D, _Capacity(n, P), order)
