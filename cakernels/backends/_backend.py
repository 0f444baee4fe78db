"""The backends: where the independent per-partition solves run, how data moves,
and how many threads every local solve may use.

A backend object is configuration only (it is a hyper-parameter of the
estimators, so it is cloned, compared and pickled with them). A fit opens a
:class:`Session` on it, which owns for the length of the fit:

* the communicator (:class:`~cakernels.backends._comm.Communicator`, or the
  one-process :class:`~cakernels.backends._comm.SelfCommunicator`) and its
  communication counters;
* placement: which rank solves which partition (:meth:`Session.place`);
* the thread budget: ``workers x threads`` never exceeds the cores this
  process may use (:mod:`~cakernels.backends._budget`: affinity, cgroup quota,
  ``OMP_NUM_THREADS``, less what other open sessions of the process hold);
  BLAS is limited once around the parallel region, and every local solve is
  handed its share (``Session.threads``) for its OpenMP threads; local solves
  never change process-wide settings themselves;
* running the local tasks (:meth:`Session.map`), serially or on threads.
"""

import contextlib
import numbers
import os
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed

import numpy as np

from ._budget import blas_limits, cpu_count, reserve_threads
from ._comm import Communicator, SelfCommunicator, check_in_step
from ._pool import CancelToken, current_token, running_under

BACKEND_NAMES = ("serial", "threads", "mpi")

_MPI_HINT = ('backend="mpi" needs mpi4py and an MPI library: install them with '
             'pip install "cakernels[mpi]" (the MPICH wheel and mpi4py, no system '
             'packages needed)')


def import_mpi(hint=_MPI_HINT):
    """``mpi4py.MPI``, or an ``ImportError`` that starts with ``hint``: when mpi4py
    is missing, and when it is installed but cannot load its MPI library (mpi4py
    raises ``RuntimeError("cannot load MPI library ...")`` then: an MPI wheel
    removed, ``MPI4PY_LIBMPI`` pointing nowhere, Windows without MS-MPI)."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError(f"{hint} ({exc})") from None
    except RuntimeError as exc:
        import os

        why = " ".join(str(exc).split())
        fix = ("install MS-MPI" if os.name == "nt" else
               "reinstall the extra, or point MPI4PY_LIBMPI at an MPI library")
        raise ImportError(f"{hint} (mpi4py is installed but cannot load an MPI library: "
                          f"{why}; {fix})") from None
    return MPI


def effective_n_jobs(n_jobs, n_cpu=None):
    """Workers for ``n_jobs``: scikit-learn's counts, but None is every core.

    Parameters
    ----------
    n_jobs : int or None
        None: every core (scikit-learn's None is one job outside a joblib
        context: the package's backends use every core unless told
        otherwise); a positive count as given; a negative one counts back
        from the cores (-1: all of them, -2: all but one), at least 1.
    n_cpu : int, default=None
        The cores (None: :func:`cpu_count`).

    Returns
    -------
    n_workers : int

    Raises
    ------
    TypeError
        ``n_jobs`` is not None or an integer (a bool or a float is refused:
        it was truncated).
    ValueError
        ``n_jobs == 0``.

    Examples
    --------
    >>> from cakernels.backends import effective_n_jobs
    >>> [effective_n_jobs(n, n_cpu=8) for n in (None, 3, -1, -2, -20)]
    [8, 3, 8, 7, 1]
    """
    n_cpu = cpu_count() if n_cpu is None else n_cpu
    if n_jobs is None:
        return n_cpu
    if isinstance(n_jobs, (bool, np.bool_)) or not isinstance(n_jobs, numbers.Integral):
        raise TypeError(f"n_jobs must be None or an int, got {n_jobs!r}")
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError("n_jobs == 0 has no meaning; use None, a positive or a negative int")
    if n_jobs < 0:
        return max(1, n_cpu + 1 + n_jobs)
    return n_jobs


def lpt_placement(costs, n_ranks):
    """Owner rank of every task, longest processing time first (LPT).

    The largest remaining cost goes to the least loaded rank (ties: the rank
    with fewer tasks, then the lowest rank). Equal costs give every rank
    ``floor`` or ``ceil`` of ``len(costs) / n_ranks`` tasks. The MPI backend
    places the partitions' solves this way.

    Parameters
    ----------
    costs : array-like of shape (n_tasks,)
        Estimated cost of every task (for a partition of ``m`` samples, the
        package uses its solver's cost model, e.g. ``m**2`` or ``m**3``).
    n_ranks : int
        Ranks to place the tasks on.

    Returns
    -------
    owners : ndarray of shape (n_tasks,), int64
        The rank of every task.

    Examples
    --------
    >>> from cakernels.backends import lpt_placement
    >>> lpt_placement([9, 1, 4, 4], n_ranks=2).tolist()
    [0, 1, 1, 1]
    >>> lpt_placement([1, 1, 1, 1, 1], n_ranks=2).tolist()
    [0, 1, 0, 1, 0]
    """
    costs = np.asarray(costs, dtype=np.float64)
    owners = np.empty(costs.size, dtype=np.int64)
    load = np.zeros(n_ranks)
    count = np.zeros(n_ranks, dtype=np.int64)
    for j in np.argsort(-costs, kind="stable"):
        r = int(np.lexsort((np.arange(n_ranks), count, load))[0])
        owners[j] = r
        load[r] += costs[j]
        count[r] += 1
    return owners


def _progress(iterable, total, verbose, desc):
    """Wrap ``iterable`` in a tqdm progress bar when ``verbose`` (and tqdm is there)."""
    if not verbose:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:  # plain log lines without tqdm
        def _log():
            for i, item in enumerate(iterable, 1):
                print(f"[cakernels] {desc}: {i}/{total}", file=sys.stderr)
                yield item
        return _log()
    return tqdm(iterable, total=total, desc=desc, leave=False, file=sys.stderr)


class Backend:
    """Base class of the backends: configuration only; a fit opens a :class:`Session`.

    :class:`SerialBackend`, :class:`ThreadsBackend` and :class:`MPIBackend`
    are its subclasses; an estimator's ``backend`` parameter takes one of them
    or its name (:func:`get_backend`).

    Examples
    --------
    >>> from cakernels.backends import Backend, get_backend
    >>> backend = get_backend("serial")
    >>> isinstance(backend, Backend), backend.name
    (True, 'serial')
    >>> with backend.session() as s:
    ...     s.rank, s.size, s.n_workers
    (0, 1, 1)
    """

    name = "serial"
    sharded = False

    def session(self, n_jobs=None, verbose=False, call="fit"):
        """A :class:`Session` for one fit or prediction (enter it with ``with``).

        Parameters
        ----------
        n_jobs : int, default=None
            Workers of a threads backend (None: its own ``n_jobs``); the
            serial and MPI backends run one worker per process.
        verbose : bool, default=False
            A progress bar over the partitions (under MPI rank 0's bar, over
            the partitions rank 0 solves).
        call : str, default='fit'
            The public call the session serves (``'fit'``,
            ``'predict_sharded'``): under MPI the ranks first exchange it, and
            ranks in different calls end the job.

        Returns
        -------
        session : Session
        """
        return Session(self, SelfCommunicator(), n_workers=1, threads=cpu_count(),
                       verbose=verbose, limit_blas=False)

    def __repr__(self):
        return f"{type(self).__name__}()"

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self):
        return hash(type(self))


class SerialBackend(Backend):
    """Solve the partitions one after another in this thread (the reference).

    Every local solve may use every core of the process that no other open
    session holds (OpenMP solvers get ``cpu_count()`` threads when the fit
    is the only one; BLAS keeps its own setting).

    Examples
    --------
    >>> from cakernels.backends import SerialBackend
    >>> with SerialBackend().session() as s:
    ...     s.map(lambda t: t * t, [1, 2, 3])
    [1, 4, 9]
    """

    name = "serial"


class ThreadsBackend(Backend):
    """Solve the partitions on a pool of threads of this process.

    The solvers (LIBSVM through scikit-learn, LAPACK, the native kernels and
    solvers) release the GIL, so partitions really run concurrently. The
    thread budget is ``workers x threads per worker <= cores``: BLAS is
    limited once around the pool, and the OpenMP solvers get the same share.

    Parameters
    ----------
    n_jobs : int, default=None
        Worker threads (None: every core this process may use and no other
        open session of it holds; negative values count back from the
        process's cores). Each worker gets ``cores // n_jobs`` OpenMP/BLAS
        threads (at least one).

    Examples
    --------
    >>> from cakernels.backends import ThreadsBackend
    >>> with ThreadsBackend(n_jobs=2).session() as s:
    ...     s.map(lambda t: t + 1, [1, 2, 3])
    [2, 3, 4]
    """

    name = "threads"

    def __init__(self, n_jobs=None):
        from sklearn.utils._param_validation import validate_parameter_constraints

        from .._params import N_JOBS

        # the estimators' rule for n_jobs: None, or a non-zero integer (not a bool)
        validate_parameter_constraints({"n_jobs": N_JOBS}, {"n_jobs": n_jobs},
                                       caller_name="ThreadsBackend")
        self.n_jobs = n_jobs

    def __repr__(self):
        return f"ThreadsBackend(n_jobs={self.n_jobs!r})"

    def session(self, n_jobs=None, verbose=False, call="fit"):
        n_cpu = cpu_count()
        n_jobs = self.n_jobs if n_jobs is None else n_jobs
        workers = effective_n_jobs(n_jobs, n_cpu)
        return Session(self, SelfCommunicator(), n_workers=workers,
                       threads=max(1, n_cpu // workers), verbose=verbose, limit_blas=True,
                       auto_workers=n_jobs is None)


class MPIBackend(Backend):
    """Distributed training under ``mpiexec``: partitions spread over MPI ranks.

    SPMD: every rank runs the same script and calls ``fit`` with the same
    parameters. Each rank solves the partitions placed on it, one after
    another, with OpenMP/BLAS threads defaulting to the cores of that rank
    (the process's cores shared by the ranks of its node, or its CPU binding).
    After ``fit`` every rank holds the same complete model.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm, default=None
        The communicator (None: ``MPI.COMM_WORLD``), e.g. a sub-communicator
        from ``COMM_WORLD.Split``.
    sharded : bool, default=False
        ``False`` (root mode, the reference's casvm1): rank 0's ``X, y`` are
        used (other ranks may pass the same arrays or ``None``); rank 0
        partitions and scatters the partitions. ``True`` (sharded mode,
        casvm2): every rank passes only its own rows (for example from
        :func:`cakernels.datasets.load_svmlight_shard`); the partitioners run
        distributed and one all-to-all moves every sample to the rank of its
        partition (random partitions move nothing).

    Notes
    -----
    mpi4py is imported when a fit starts; without it an ``ImportError``
    names the install extra (``pip install "cakernels[mpi]"``). Launch with
    the environment's own ``mpiexec`` and ``python -m mpi4py`` so that an
    exception on one rank ends every rank::

        mpiexec -n 4 python -m mpi4py train.py

    The backend object holds no MPI state: it pickles and clones with its
    estimator (a pickled ``comm`` other than ``COMM_WORLD`` is not kept).

    Examples
    --------
    >>> from cakernels.backends import MPIBackend
    >>> MPIBackend(sharded=True)
    MPIBackend(comm=None, sharded=True)
    """

    name = "mpi"

    def __init__(self, comm=None, sharded=False):
        from sklearn.utils._param_validation import validate_parameter_constraints

        # a truthy string such as 'no' would switch sharded mode on: every rank's
        # rows would be trained on, repeated P times in root mode's use
        validate_parameter_constraints({"sharded": ["boolean"]}, {"sharded": sharded},
                                       caller_name="MPIBackend")
        self.comm = comm
        self.sharded = sharded

    def __repr__(self):
        comm = None if self.comm is None else "<comm>"
        return f"MPIBackend(comm={comm}, sharded={self.sharded!r})"

    def __eq__(self, other):
        return (type(self) is type(other) and self.comm is other.comm
                and self.sharded == other.sharded)

    def __hash__(self):
        return hash((type(self), self.sharded))

    def __deepcopy__(self, memo):
        # a communicator is a handle to shared MPI state: never copied
        return type(self)(comm=self.comm, sharded=self.sharded)

    def __copy__(self):  # (__getstate__ below drops the communicator: for pickles only)
        return type(self)(comm=self.comm, sharded=self.sharded)

    def __getstate__(self):
        return {"comm": None, "sharded": self.sharded}

    def mpi_comm(self):
        """The mpi4py communicator (imports mpi4py; ImportError names the extra)."""
        MPI = import_mpi(_MPI_HINT)
        return MPI.COMM_WORLD if self.comm is None else self.comm

    def session(self, n_jobs=None, verbose=False, call="fit"):
        comm = Communicator(self.mpi_comm())
        # the public call's name before any other collective (uncounted: a control
        # message): ranks in different calls end the job here (check_in_step)
        check_in_step(comm, comm._allgather_uncounted((call,)), call)
        return Session(self, comm, n_workers=1, threads=_cores_of_rank(comm.comm),
                       verbose=verbose and comm.rank == 0, limit_blas=True)


def ranks_on_node(mpi_comm):
    """Ranks of ``mpi_comm`` on this rank's node (a collective on every call:
    a cache by the communicator's handle skipped it on the ranks that had seen
    a freed communicator's reused handle and hung the others)."""
    from mpi4py import MPI

    node = mpi_comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_size()
    finally:
        node.Free()


def _launcher_local_ranks():
    """The job's processes on this node, as the launcher says (MPICH's Hydra:
    ``MPI_LOCALNRANKS``; Open MPI: ``OMPI_COMM_WORLD_LOCAL_SIZE``), or 1."""
    for name in ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"):
        try:
            return max(1, int(os.environ[name]))
        except (KeyError, ValueError):
            continue
    return 1


def _affinity():
    """This process's CPU set, or None where the platform has none."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return None


def _cores_of_rank(mpi_comm):
    """Cores of this rank: its usable cores (:func:`cpu_count`: its CPU set, a
    cgroup quota, OpenMP limits) divided among the ranks of its node whose CPU
    sets overlap its own (collective: the node's ranks exchange their sets).
    A rank bound to cores of its own keeps them; ranks confined together to
    one CPU set, or to none, share it, as they share a container's quota. A
    rank the launcher did not bind (:func:`_bound_by_launcher`) also counts
    the launcher's processes on the node when that is more
    (``MPI_LOCALNRANKS``, ``OMPI_COMM_WORLD_LOCAL_SIZE``: sub-communicators
    of one job fit side by side)."""
    from mpi4py import MPI

    n = cpu_count()
    mine = _affinity()
    node = mpi_comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        sets = node.allgather(mine)
    finally:
        node.Free()
    if mine is None:
        sharing = len(sets)
    else:
        sharing = sum(1 for other in sets if other is None or other & mine)
    if mine is None or not _bound_by_launcher(mine):
        sharing = max(sharing, _launcher_local_ranks())
    return max(1, n // sharing)


def _bound_by_launcher(mine):
    """Whether this rank was given a CPU set of its own: a strict part of its
    parent's (the launcher's proxy; an unbound rank inherits the parent's set,
    which may be a job's cpuset smaller than the machine), or, where the
    parent's set is unknown, less than the machine."""
    try:
        parent = frozenset(os.sched_getaffinity(os.getppid()))
    except (AttributeError, OSError):
        parent = None
    if parent:
        return mine < parent
    return len(mine) < (os.cpu_count() or 1)


def get_backend(backend, n_jobs=None):
    """Resolve a backend given by name (``'serial'``, ``'threads'``, ``'mpi'``) or
    instance. ``n_jobs`` configures ``'threads'``; with a ``ThreadsBackend``
    instance it must be None or the instance's own.

    Parameters
    ----------
    backend : {'serial', 'threads', 'mpi'} or Backend
        A name, or a backend instance (returned as it is).
    n_jobs : int, default=None
        Workers of ``'threads'`` (None: the cores this process may use).

    Returns
    -------
    backend : Backend

    Raises
    ------
    ValueError
        An unknown name, or ``n_jobs`` that disagrees with a
        ``ThreadsBackend`` instance's.

    Examples
    --------
    >>> from cakernels.backends import get_backend
    >>> get_backend("threads", n_jobs=2).n_jobs
    2
    >>> get_backend("serial").name
    'serial'
    """
    if isinstance(backend, Backend):
        if (isinstance(backend, ThreadsBackend) and n_jobs is not None
                and n_jobs != backend.n_jobs):
            raise ValueError(f"n_jobs={n_jobs!r} and backend={backend!r} disagree: give the "
                             "number of workers in one place (n_jobs with backend='threads', "
                             "or ThreadsBackend(n_jobs=...))")
        return backend
    if backend == "serial":
        return SerialBackend()
    if backend == "threads":
        return ThreadsBackend(n_jobs=n_jobs)
    if backend == "mpi":
        return MPIBackend()
    raise ValueError(f"backend must be one of {BACKEND_NAMES} or a Backend instance, "
                     f"got {backend!r}")


class Session:
    """A backend at work for one fit: communicator, counters, placement, threads.

    Made by :meth:`Backend.session`; entering it (``with``) takes its threads
    from the process's budget (:func:`reserve_threads`) and limits BLAS for
    its length.

    Parameters
    ----------
    backend : Backend
        The backend that made it.
    comm : Communicator or SelfCommunicator
        The ranks' communicator (one process: a ``SelfCommunicator``).
    n_workers : int
        Concurrent local solves in this process.
    threads : int
        OpenMP/BLAS threads of every local solve (lowered on entry to the
        share of the threads granted).
    verbose : bool
        A progress bar over :meth:`map`'s tasks.
    limit_blas : bool
        Limit BLAS to ``threads`` while the session is open.
    auto_workers : bool, default=False
        ``n_workers`` was not chosen by the user: it becomes the threads
        granted on entry.

    Attributes
    ----------
    backend : Backend
    comm : communicator
        Counted; ``comm.rank`` and ``comm.size`` (1 without MPI).
    n_workers : int
        Local solves run concurrently in this process.
    threads : int
        OpenMP/BLAS threads for every local solve.

    Examples
    --------
    >>> from cakernels.backends import ThreadsBackend
    >>> with ThreadsBackend(n_jobs=2).session() as s:
    ...     owners = s.place([3.0, 1.0, 2.0])
    ...     squares = s.map(lambda t: t * t, [1, 2, 3])
    >>> owners.tolist(), squares, s.comm_report()["n_ranks"]
    ([0, 0, 0], [1, 4, 9], 1)
    """

    def __init__(self, backend, comm, *, n_workers, threads, verbose, limit_blas,
                 auto_workers=False):
        self.backend = backend
        self.comm = comm
        self._auto_workers = bool(auto_workers)
        self.n_workers = int(n_workers)
        self.threads = int(threads)
        self.verbose = verbose
        self._limit_blas = limit_blas
        self._stack = None

    @property
    def rank(self):
        """This process's rank (0 without MPI)."""
        return self.comm.rank

    @property
    def size(self):
        """Processes of the communicator (1 without MPI)."""
        return self.comm.size

    @property
    def is_root(self):
        """Whether this process is rank 0."""
        return self.comm.rank == 0

    @property
    def sharded(self):
        """Whether every rank holds only its own rows (``MPIBackend(sharded=True)``)."""
        return bool(getattr(self.backend, "sharded", False))

    def __enter__(self):
        stack = contextlib.ExitStack()
        try:
            # the process's budget: sessions open in other threads (a threads
            # backend nested in another, concurrent fits) hold part of it
            granted = stack.enter_context(reserve_threads(self.n_workers * self.threads))
            if self._auto_workers:
                self.n_workers = granted
            # an explicit worker count is kept (the user's choice), each worker
            # then gets its share of the threads granted
            self.threads = max(1, min(self.threads, granted // self.n_workers))
            if self._limit_blas:
                # once, around the whole parallel region: workers never change it
                stack.enter_context(blas_limits(self.threads))
        except BaseException:
            # (a Ctrl-C while BLAS is limited): the reservation goes back now, not
            # when a kept traceback lets the stack be collected
            stack.close()
            raise
        self._stack = stack
        return self

    def __exit__(self, *exc):
        stack, self._stack = self._stack, None
        return stack.__exit__(*exc) if stack is not None else False

    def place(self, costs):
        """Owner rank of every partition (LPT on ``costs``; all on rank 0 without MPI)."""
        return lpt_placement(costs, self.size)

    def map(self, func, tasks, desc="partitions"):
        """``[func(t) for t in tasks]`` on this process's workers, in task order."""
        tasks = list(tasks)
        if self.size > 1:  # (the bar is rank 0's: it counts rank 0's own tasks)
            desc = f"{desc} of rank {self.rank} (of {self.size} ranks)"
        workers = min(self.n_workers, max(len(tasks), 1))
        if workers <= 1:
            return [func(t) for t in _progress(tasks, len(tasks), self.verbose, desc)]
        token = CancelToken(current_token())

        def run(task):
            with running_under(token):
                return func(task)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run, t) for t in tasks]
            try:
                # as they finish: a task's error stops the others at once (read in
                # task order, it waited for every earlier task's whole solve)
                for f in _progress(as_completed(futures), len(tasks), self.verbose, desc):
                    f.result()
                return [f.result() for f in futures]
            except BaseException:
                # Ctrl-C (or a signal handler's exception) while waiting, or a task's
                # error: the other tasks do not start, their running solves stop (the
                # pool's exit waits for them), and this exception is raised
                for f in futures:
                    f.cancel()
                token.cancel()
                raise

    def comm_report(self):
        """Every rank's communication summary (collective under MPI)."""
        from ._comm import comm_report

        return comm_report(self.comm.allgather(self.comm.counter.summary()))
