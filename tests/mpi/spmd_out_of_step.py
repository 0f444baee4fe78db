"""SPMD: ranks that fall out of step end the job (they hung): ``spmd_out_of_step.py CASE``.

An exception caught on one rank only makes that rank skip a collective call the
others make; each rank then reads another call's message as its own. Cases:

- ``cross_val_score``: a scorer that raises on the last rank only, under
  scikit-learn's default ``error_score=nan`` (the README's hang, found by audit);
- ``fit-vs-predict``: the last rank calls ``fit`` while the others call
  ``predict_sharded``;
- ``partitioner-vs-load``: the last rank calls a partitioner's ``fit_sharded``
  while the others call ``load_svmlight_shard`` (the file is ``sys.argv[2]``);
- ``fit-vs-load`` and ``predict-vs-partitioner``: a call that opens an MPI session
  against one that does not (the session's first collective met another kind and
  hung before any named check).
"""

import sys

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_classification

from cakernels import CASVC
from cakernels.backends import MPIBackend

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
last = rank == size - 1
case = sys.argv[1]
X, y = make_classification(n_samples=240, n_features=6, random_state=0)
Xs, ys = np.array_split(X, size)[rank], np.array_split(y, size)[rank]
sharded = MPIBackend(sharded=True)

if case == "cross_val_score":
    from sklearn.model_selection import cross_val_score

    calls = [0]

    def scorer(est, Xv, yv):  # the fold's score over every rank's validation rows
        calls[0] += 1
        if last and calls[0] == 2:
            raise RuntimeError("scorer failed on one rank only")
        return est.score_sharded(Xv, yv)

    est = CASVC(n_partitions=2, random_state=0, backend=sharded)
    print(rank, cross_val_score(est, Xs, ys, cv=3, scoring=scorer), flush=True)
elif case == "fit-vs-predict":
    est = CASVC(n_partitions=2, random_state=0, backend=sharded).fit(Xs, ys)
    if last:
        est.fit(Xs, ys)
    else:
        est.predict_sharded(Xs)
elif case == "partitioner-vs-load":
    from cakernels.datasets import load_svmlight_shard
    from cakernels.partition import KMeansPartitioner

    if last:
        KMeansPartitioner(n_partitions=2, random_state=0).fit_sharded(comm, Xs)
    else:
        load_svmlight_shard(sys.argv[2])
elif case == "fit-vs-load":
    from cakernels.datasets import load_svmlight_shard

    if last:
        load_svmlight_shard(sys.argv[2])
    else:
        CASVC(n_partitions=2, random_state=0, backend=sharded).fit(Xs, ys)
elif case == "predict-vs-partitioner":
    from cakernels.partition import KMeansPartitioner

    est = CASVC(n_partitions=2, random_state=0, backend=sharded).fit(Xs, ys)
    if last:
        KMeansPartitioner(n_partitions=2, random_state=0).fit_sharded(comm, Xs)
    else:
        est.predict_sharded(Xs)
print(f"rank {rank} finished", flush=True)
