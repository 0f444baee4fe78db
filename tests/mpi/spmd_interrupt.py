"""A fit whose solves cannot end by themselves (tol=1e-300, max_iter=10**15) on every
rank; the test sends SIGINT to mpiexec once rank 0 prints "start"."""

import numpy as np
from mpi4py import MPI

from cakernels import CASVC

rng = np.random.default_rng(0)
X = rng.standard_normal((1500, 5))
y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
MPI.COMM_WORLD.Barrier()
if MPI.COMM_WORLD.rank == 0:
    print("start", flush=True)
CASVC(n_partitions=2, tol=1e-300, max_iter=10**15, backend="mpi").fit(X, y)
print("finished without error", flush=True)
