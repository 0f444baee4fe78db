"""Backends that run the independent per-partition solves.

========================  =====================================================
backend                   where the partitions run
========================  =====================================================
:class:`SerialBackend`    one after another in this thread (the reference)
:class:`ThreadsBackend`   a thread pool of this process (the solvers release the GIL)
:class:`MPIBackend`       MPI ranks under ``mpiexec`` (mpi4py), root or sharded data
========================  =====================================================

Every partitioned estimator takes ``backend='serial'|'threads'|'mpi'`` or an
instance of these classes (for ``MPIBackend(comm=..., sharded=True)``). The
backend owns placement of partitions on ranks, data movement (scatter,
all-to-all, allgather), reductions, the thread budget of every local solve
and the communication counters reported in ``fit_stats_['comm']``.
"""

from ._backend import (
    BACKEND_NAMES,
    Backend,
    MPIBackend,
    SerialBackend,
    Session,
    ThreadsBackend,
    cpu_count,
    effective_n_jobs,
    get_backend,
    lpt_placement,
)
from ._budget import blas_limits, reserve_threads, threads_available
from ._comm import (
    PHASES,
    CollectiveError,
    CommCounter,
    Communicator,
    SelfCommunicator,
    comm_report,
)

__all__ = [
    "Backend",
    "SerialBackend",
    "ThreadsBackend",
    "MPIBackend",
    "get_backend",
    "Session",
    "BACKEND_NAMES",
    "PHASES",
    "CollectiveError",
    "CommCounter",
    "Communicator",
    "SelfCommunicator",
    "comm_report",
    "cpu_count",
    "threads_available",
    "reserve_threads",
    "blas_limits",
    "effective_n_jobs",
    "lpt_placement",
]
