"""SPMD check of halo partitions and soft routing under MPI.

* the distributed halo selection (``halo_indices_sharded``: local candidates, one
  allgather of margins, no rows) equals the serial selection on the stacked rows, for
  the partitioners' sharded fits (FCFS exactly equals serial; K-balance and random
  against the serial selection from the same labels and centres);
* root mode: estimators with a halo equal their serial fits (same partitions, halos,
  models, predictions);
* sharded mode: every partition's model is the one trained on its own rows and its
  halo (brute force on all rows), the halo rows move in the one all-to-all of the
  redistribution, and training communicates nothing;
* soft routing (``routing='vote'``, ``combine='vote'``): the collective prediction of
  sharded test rows equals the local one.

Prints JSON lines (rank 0).
"""

import json

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_classification, make_regression
from sklearn.svm import SVC

from cakernels import BKMSVC, BKRR2, CASVC, PartitionedKernelRidge
from cakernels.backends import MPIBackend
from cakernels.backends._comm import Communicator
from cakernels.partition import FCFSPartitioner, KBalancePartitioner, RandomPartitioner
from cakernels.partition._halo import halo_indices

world = MPI.COMM_WORLD
comm = Communicator(world)
R, rank = comm.size, comm.rank
out = []


def bounds(m):
    return rank * m // R, (rank + 1) * m // R


# ---- the distributed selection
X = np.random.RandomState(1).randn(203, 4)
lo, hi = bounds(X.shape[0])
for name, make in [("fcfs", lambda: FCFSPartitioner(8, halo=0.3, random_state=0)),
                   ("kbalance", lambda: KBalancePartitioner(8, halo=0.5, random_state=0)),
                   ("random", lambda: RandomPartitioner(8, halo=0.25, random_state=0))]:
    sh = make().fit_sharded(comm, X[lo:hi])
    ref = halo_indices(X, sh.labels_, sh.centers_, sh.sizes_, sh.halo, sh.balanced)
    same = all(np.array_equal(a, b) for a, b in zip(sh.halo_indices_, ref))
    line = {"check": "select", "name": name, "equal": same,
            "halo_sizes": sh.halo_sizes_.tolist()}
    if name == "fcfs":  # exact distributed FCFS: the serial fit's halos too
        serial = make().fit(X)
        line["serial"] = all(np.array_equal(a, b) for a, b in
                             zip(sh.halo_indices_, serial.halo_indices_))
    out.append(line)

# ---- root mode equals serial
Xc, yc = make_classification(n_samples=360, n_features=6, random_state=0)
Xr, yr = make_regression(n_samples=300, n_features=4, noise=5.0, random_state=0)
yr = yr / np.std(yr)
for name, make, X_, y_ in [
        ("BKMSVC", lambda b: BKMSVC(4, halo=0.25, backend=b, random_state=0), Xc, yc),
        ("BKRR2", lambda b: BKRR2(4, sigma=2.0, lam=1e-3, halo=0.5, backend=b,
                                  random_state=0), Xr, yr)]:
    serial = make("serial").fit(X_, y_)
    root = make(MPIBackend(sharded=False)).fit(X_ if rank == 0 else None,
                                              y_ if rank == 0 else None)
    out.append({"check": "root", "name": name,
                "equal": bool(np.array_equal(root.predict(X_), serial.predict(X_))),
                "halo_sizes": root.fit_stats_["halo_sizes"],
                "serial_halo_sizes": serial.fit_stats_["halo_sizes"]})

# ---- sharded mode: brute force on all rows
lo, hi = bounds(Xc.shape[0])
sh = CASVC(2 * R, halo=0.5, backend=MPIBackend(sharded=True), random_state=0,
           gamma=0.2, solver="libsvm").fit(Xc[lo:hi], yc[lo:hi])  # SVC per partition
part = sh.partitioner_
worst = 0.0
for j, est in enumerate(sh.estimators_):
    idx = part.training_indices(j)
    ref = SVC(gamma=0.2).fit(Xc[idx], yc[idx])
    worst = max(worst, float(np.max(np.abs(est.decision_function(Xc) -
                                           ref.decision_function(Xc)))))
phases = sh.fit_stats_["comm"]["total"]["by_phase"]
plain = CASVC(2 * R, backend=MPIBackend(sharded=True), random_state=0,
              gamma=0.2).fit(Xc[lo:hi], yc[lo:hi])
out.append({"check": "sharded_svc", "worst": worst,
            "sizes": [int(part.training_indices(j).size) for j in range(2 * R)],
            "halo_sizes": sh.fit_stats_["halo_sizes"],
            "redistribution": phases["redistribution"], "training": phases["training"],
            "plain_redistribution": plain.fit_stats_["comm"]["total"]["by_phase"]
            ["redistribution"]})

lo, hi = bounds(Xr.shape[0])
kr = BKRR2(4, sigma=2.0, lam=1e-3, halo=0.5, backend=MPIBackend(sharded=True),
           random_state=0).fit(Xr[lo:hi], yr[lo:hi])
part = kr.partitioner_
route = part.assign(Xr)
pred = np.empty(Xr.shape[0])
for j in range(4):
    idx = part.training_indices(j)
    D = ((Xr[idx, None, :] - Xr[None, idx, :]) ** 2).sum(-1)
    alpha = np.linalg.solve(np.exp(-D / 8.0) + 1e-3 * idx.size * np.eye(idx.size), yr[idx])
    rows = route == j
    Dq = ((Xr[rows, None, :] - Xr[None, idx, :]) ** 2).sum(-1)
    pred[rows] = np.exp(-Dq / 8.0) @ alpha
out.append({"check": "sharded_krr",
            "rel": float(np.max(np.abs(kr.predict(Xr) - pred)) / np.max(np.abs(pred))),
            "training": kr.fit_stats_["comm"]["total"]["by_phase"]["training"]})

# ---- soft routing: Algorithm 5 with every row sent to its n_voters nearest owners
# equals the local prediction (every rank holds every model); the last rank holds no
# test row (allowed in a collective prediction)
lo, hi = bounds(Xc.shape[0])
if R > 1 and rank == R - 1:
    lo = hi
sh.set_params(routing="vote", n_voters=3)
before = sh.fit_stats_["comm"]["total"]["by_phase"]["prediction"]["bytes"]
vote_all = np.concatenate(world.allgather(sh.predict_sharded(Xc[lo:hi])))
n_pred = world.allreduce(hi - lo)
expect = sh.predict(Xc[:n_pred])  # the predicted rows are the first n_pred ones
near_all = np.concatenate(world.allgather(
    sh.set_params(routing="nearest").predict_sharded(Xc[lo:hi])))
lo, hi = bounds(Xr.shape[0])
kr = PartitionedKernelRidge(combine="vote", n_voters=2, n_partitions=4, sigma=2.0, lam=1e-3,
                            halo=0.5, backend=MPIBackend(sharded=True),
                            random_state=0).fit(Xr[lo:hi], yr[lo:hi])
kr_all = np.concatenate(world.allgather(kr.predict_sharded(Xr[lo:hi])))
out.append({"check": "vote", "equal": bool(np.array_equal(vote_all, expect)),
            "n": int(vote_all.size), "n_pred": int(n_pred),
            "nearest_equal": bool(np.array_equal(near_all, sh.predict(Xc[:n_pred]))),
            "bytes": sh.fit_stats_["comm"]["total"]["by_phase"]["prediction"]["bytes"] - before,
            # after collective predictions the report still adds up
            "consistent": bool(
                sh.fit_stats_["comm_bytes"] == sh.fit_stats_["comm"]["total"]["bytes"]
                == sum(v["bytes"] for v in sh.fit_stats_["comm"]["total"]["by_op"].values())
                == sum(v["bytes"] for v in sh.fit_stats_["comm"]["total"]["by_phase"].values())
                and sh.fit_stats_["comm_messages"]
                == sh.fit_stats_["comm"]["total"]["messages"]),
            "krr_rel": float(np.max(np.abs(kr_all - kr.predict(Xr))))})

if rank == 0:
    for line in out:
        print(json.dumps(line), flush=True)
