"""The capacity-limited greedy assignment of Algorithms 3, 4 and 9, computed
exactly by an event simulation (see :mod:`cakernels.partition`)."""

import numpy as np

def balanced_sizes(n_samples, n_partitions):
    """The sizes a balanced partition may have, ``floor`` and ``ceil`` of m/P, and
    how many partitions have the larger one (``m mod P``)."""
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


#: partitions that fill up in one round beyond which one stable sort of the
#: choices finds their positions, instead of one scan per partition: scans cost
#: O(P^2 n) over the rounds with P near n (3,000 rows into 3,000 partitions:
#: 13.7 s against 0.4 s), while a sort costs 75-90 scans (measured, 20,000 to
#: 500,000 choices; 128 leaves margin), so up to 128 partitions keep their scans
SORT_FILLS = 128


def _kth_positions(choice, counts, labels, k):
    """Position of the ``k[i]``-th (1-based) occurrence of ``labels[i]`` in
    ``choice`` (``counts = bincount(choice)``; every ``k[i] <= counts[labels[i]]``)."""
    if labels.size <= SORT_FILLS:
        return np.array([np.flatnonzero(choice == j)[kj - 1] for j, kj in zip(labels, k)],
                        dtype=np.int64)
    by_label = np.argsort(choice, kind="stable")
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    return by_label[first[labels] + k - 1]


def greedy_capacity_assign(D, cap, order=None, overwrite=False):
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
    overwrite : bool, default=False
        Whether ``D`` (float64, C-contiguous) may be overwritten: without an
        ``order`` it is then masked in place instead of copied (an n x P array
        less at the peak).

    Returns
    -------
    labels : ndarray of shape (n,)
        The partition of every row of ``D`` (in the original row order).
    """
    n, P = D.shape
    if order is None:
        order = np.arange(n)
        in_place = (overwrite and isinstance(D, np.ndarray) and D.dtype == np.float64
                    and D.flags.writeable and D.flags.c_contiguous)
        Dq = D if in_place else np.array(D, dtype=np.float64)  # one we may mask
    else:
        Dq = np.asarray(D, dtype=np.float64)[order]  # (a copy: fancy indexing)
    closed = cap.room() == 0
    Dq[:, closed] = np.inf
    choice = np.argmin(Dq, axis=1)
    labels_q = np.full(n, -1, dtype=np.intp)
    start = 0
    while start < n:
        room = cap.room()
        rest = choice[start:]
        # the first position (relative to ``start``) at which a partition fills up
        # (its room[j]-th choice in ``rest``): prefixes of doubling length are
        # searched until some partition fills in one (a partition that fills
        # later has no earlier position)
        open_room = room[room > 0]
        length = max(1024, int(open_room.min()) if open_room.size else 0)
        while True:
            prefix = rest[:length]
            counts = np.bincount(prefix, minlength=P)
            fills = np.flatnonzero((counts >= room) & (room > 0))
            if fills.size or length >= rest.size:
                break
            length *= 2
        stop = (start + int(_kth_positions(prefix, counts, fills, room[fills]).min()) + 1
                if fills.size else n)
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
