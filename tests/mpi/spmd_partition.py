"""SPMD check of the exact distributed partitioners: the capacity-limited greedy
assignment of sharded rows (cakernels.partition._distributed.greedy_assign) equals
the serial assignment of all rows stacked in rank order, and FCFSPartitioner's
fit_sharded gives the serial fit's partition. Shards are deliberately unequal
(one may be empty), distances have ties, and m is not a multiple of P, so the
floor/ceil capacities and the re-routing after a centre closes are exercised."""

import json

import numpy as np
from mpi4py import MPI

from cakernels.backends._comm import Communicator
from cakernels.partition import FCFSPartitioner
from cakernels.partition._distributed import greedy_assign
from cakernels.partition._greedy import _Capacity, greedy_capacity_assign

comm = Communicator(MPI.COMM_WORLD)
R, rank = comm.size, comm.rank


def shard_bounds(m, seed, allow_empty=True):
    """Unequal shards in rank order; rank 1 gets nothing when there are 4+ ranks
    (unless ``allow_empty`` is False)."""
    w = np.random.RandomState(seed).rand(R) + 0.2
    if R >= 4 and allow_empty:
        w[1] = 0.0
    cuts = np.concatenate([[0], np.round(np.cumsum(w) / w.sum() * m).astype(int)])
    cuts[-1] = m
    return cuts[rank], cuts[rank + 1]


cases = []
for seed, (m, P, ties) in enumerate([(97, 4, False), (250, 7, True), (64, 16, True),
                                     (31, 3, False), (500, 13, False), (9, 9, True)]):
    rng = np.random.RandomState(seed)
    D = rng.randint(0, 5, size=(m, P)).astype(float) if ties else rng.rand(m, P)
    D[: m // 3, 0] -= 10.0  # one popular centre: it fills early, its late samples re-route
    lo, hi = shard_bounds(m, seed)
    stats = {}
    local = greedy_assign(comm, D[lo:hi], _Capacity(m, P), stats)
    everything = np.concatenate(MPI.COMM_WORLD.allgather(local))
    serial = greedy_capacity_assign(D, _Capacity(m, P))
    cases.append({"check": "greedy", "m": m, "P": P, "ties": ties,
                  "equal": bool(np.array_equal(everything, serial)),
                  "events": stats["events"]})

for seed, (m, P) in enumerate([(120, 5), (203, 8)]):
    X = np.random.RandomState(100 + seed).randn(m, 3)
    lo, hi = shard_bounds(m, seed, allow_empty=False)
    sharded = FCFSPartitioner(P, random_state=seed).fit_sharded(comm, X[lo:hi])
    serial = FCFSPartitioner(P, random_state=seed).fit(X)
    cases.append({"check": "fcfs", "m": m, "P": P, "rows": int(hi - lo),
                  "equal": bool(np.array_equal(sharded.labels_, serial.labels_)),
                  "centres": bool(np.allclose(sharded.centers_, serial.centers_, rtol=1e-12,
                                              atol=1e-12))})

# sharded random partitions: partition j takes rank j mod R's rows; a rank with
# fewer rows than the partitions it owns is a clear error on every rank (it left
# a partition empty, with a NaN centre that assign then chose for every row)
from cakernels.partition import RandomPartitioner  # noqa: E402

X = np.random.RandomState(7).randn(40, 2)
rows = 1 if rank == R - 1 else 10
try:
    RandomPartitioner(2 * R, random_state=0).fit_sharded(comm, X[:rows])
    error = None
except ValueError as exc:
    error = str(exc)
errors = comm.allgather(error)
cases.append({"check": "random-small-shard", "errors": errors,
              "equal": (R == 1) == (errors[0] is None) and len(set(errors)) == 1})

# random_state=None (or an instance) in sharded mode: rank 0 draws the seed for
# all; every rank drew its own, and the centres gathered from the ranks' draws
# were uninitialised memory
X = np.random.RandomState(11).randn(90, 3)
lo, hi = shard_bounds(90, 3, allow_empty=False)
part = FCFSPartitioner(4, random_state=None).fit_sharded(comm, X[lo:hi])
centres = comm.allgather(part.initial_centers_.tobytes())
rows = {r.tobytes() for r in X}
cases.append({"check": "seed-none", "equal": len(set(centres)) == 1 and all(
    c.tobytes() in rows for c in part.initial_centers_)})
# a RandomState instance, the same seed on every rank: accepted in every fit (its
# state parts after the first fit, where rank 0 partitions alone)
from cakernels import CASVC  # noqa: E402
from cakernels.backends import MPIBackend  # noqa: E402

est = CASVC(4, random_state=np.random.RandomState(0), backend=MPIBackend(comm=comm.comm))
Xc = np.random.RandomState(1).randn(80, 3)
yc = (Xc[:, 0] > 0).astype(int)
for _ in range(2):
    est.fit(Xc if rank == 0 else None, yc if rank == 0 else None)
cases.append({"check": "seed-instance", "equal": True})

# rare distinct rows among many duplicates (7 distinct of 5,000, most ranks
# holding zeros only): the K-means sample and the random draws for distinct
# centres missed them; a pass over every rank's rows finds them, as serially
from cakernels.partition import BKMPartitioner, KBalancePartitioner  # noqa: E402

Xr = np.zeros((5000, 3))
rr = np.random.RandomState(3)
Xr[rr.choice(5000, 6, replace=False)] = rr.randn(6, 3)
lo, hi = shard_bounds(5000, 5)
for cls in (KBalancePartitioner, BKMPartitioner):
    sharded = cls(4, random_state=0).fit_sharded(comm, Xr[lo:hi])
    rows = {r.tobytes() for r in Xr}
    cases.append({"check": "rare-distinct", "sizes": sharded.sizes_.tolist(),
                  "equal": sharded.sizes_.tolist() == [1250] * 4 and len(
                      {c.tobytes() for c in sharded.centers_}) == 4})

# sharded_assign='local' with shards smaller than n_partitions: a partition
# without rows (a NaN centre that assign chose for every row) is one clear
# error on every rank (4 ranks: shards of 3, 3, 2 and 2 rows of a 3 x 3 grid,
# 9 partitions; other rank counts fit the same 10 rows)
rs = np.random.RandomState(4)
cuts = np.r_[0, np.cumsum(rs.randint(1, 4, size=4))]  # [0, 3, 6, 8, 10]
Xs = rs.randint(0, 3, size=(10, 2)).astype(float)
lo, hi = (cuts[rank], cuts[rank + 1]) if R == 4 else (0, 10) if rank == 0 else (0, 0)
try:
    KBalancePartitioner(9, sharded_assign="local", init="random", random_state=4).fit_sharded(
        comm, Xs[lo:hi])
    error = None
except ValueError as exc:
    error = str(exc)
errors = comm.allgather(error)
cases.append({"check": "local-empty", "errors": errors,
              "equal": len(set(errors)) == 1 and (R == 4) == (errors[0] is not None)})

if rank == 0:
    for c in cases:
        print(json.dumps(c), flush=True)
