"""SPMD check of the communication counters (``fit_stats_['comm']``).

Prints one JSON line (rank 0) with the measured and the expected volumes.
"""

import json

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_classification

from cakernels import BKRR2, CASVC
from cakernels.backends import MPIBackend

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
X, y = make_classification(n_samples=480, n_features=7, random_state=0)
P = 2 * size  # every rank owns partitions
n, d = X.shape

# root mode: the scatter sends every partition not owned by rank 0, once
root = CASVC(P, backend="mpi", random_state=0).fit(X if rank == 0 else None,
                                                     y if rank == 0 else None)
owners = np.asarray(root.fit_stats_["owners"])
rows_away = int(root.partition_sizes_[owners != 0].sum())
# per row: X (8 d bytes), class index, sample weight, global index, partition id (8 each),
# in one message per rank (plus the few hundred bytes of the message's field headers)
expected_scatter = rows_away * (8 * d + 4 * 8)
scatter_messages = int(sum(1 for r in range(1, size) if (owners == r).any()))
c = root.fit_stats_["comm"]
scatter = c["total"]["by_op"].get("Scatterv", {"bytes": 0})["bytes"]

# sharded mode, random partitions (CA-SVM): no training data moves at all
lo, hi = rank * n // size, (rank + 1) * n // size
sh = CASVC(P, backend=MPIBackend(sharded=True), random_state=0).fit(X[lo:hi], y[lo:hi])
s = sh.fit_stats_["comm"]["total"]["by_phase"]

# serial: zeros everywhere
serial = CASVC(P, random_state=0).fit(X, y).fit_stats_

if rank == 0:
    print(json.dumps({
        "root_scatter_bytes": scatter, "expected_scatter_bytes": expected_scatter,
        "root_scatter_messages": c["total"]["by_op"].get("Scatterv", {"messages": 0})["messages"],
        "root_scatter_calls": c["total"]["by_op"].get("Scatterv", {"calls": 0})["calls"],
        "expected_scatter_messages": scatter_messages,
        "root_redistribution_bytes": c["total"]["by_phase"]["redistribution"]["bytes"],
        "root_training_bytes": c["total"]["by_phase"]["training"]["bytes"],
        "root_gather_bytes": c["total"]["by_phase"]["model_gather"]["bytes"],
        "root_ranks": c["n_ranks"], "rank_sum": sum(r["bytes"] for r in c["ranks"]),
        "total_bytes": c["total"]["bytes"],
        "sharded_redistribution": s["redistribution"], "sharded_training": s["training"],
        "sharded_partitioning_bytes": s["partitioning"]["bytes"],
        "serial_bytes": serial["comm_bytes"], "serial_messages": serial["comm_messages"],
        "serial_ranks": serial["comm"]["n_ranks"],
        "workers": [root.fit_stats_["n_workers"], sh.fit_stats_["n_workers"],
                    serial["n_workers"]],
    }), flush=True)
