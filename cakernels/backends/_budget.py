"""The process's thread budget: one policy for OpenMP and BLAS threads.

Every parallel region of the package (a backend session, an
:class:`~cakernels.AsyGCDSVC` fit) takes its threads from one process-wide
ledger, and every BLAS limit goes through one process-wide stack:

* :func:`cpu_count` is what the process may use: its CPU affinity, capped by a
  cgroup CPU quota and by ``OMP_NUM_THREADS`` when that is set (joblib's loky
  workers set it to ``cores // n_jobs``, so a fit inside
  ``GridSearchCV(n_jobs=2)`` gets its share, not every core);
* :func:`reserve_threads` hands a region at most what the regions already
  open in this process have left (at least one thread), so a threads backend
  nested in another one, or fits started concurrently from several threads,
  never run more threads than cores;
* :func:`blas_limits` limits BLAS for the length of a block; limits nest and
  interleave across threads safely: the BLAS limit is the smallest one
  requested by any open block, never above what each library had before the
  first block (``OPENBLAS_NUM_THREADS=1`` or a user's ``threadpool_limits``
  stay in force), and the original setting comes back when the last block
  closes (``threadpoolctl``'s own context manager, entered in several
  threads, restores whatever it saw when it entered, so interleaved exits
  could leave another region with the wrong count).

Fork. A child process forked while regions are open inherits their ledger
entries, BLAS limits and perhaps held locks, without the threads that would
release them: :func:`_after_fork_in_child` (``os.register_at_fork``) starts
the child with an empty ledger, new locks and BLAS's setting from before the
first limit. GNU libgomp's thread pool does not survive ``fork()`` either: in
a child forked from a thread that had run an OpenMP team of the native core,
the core runs every team on one thread (``_native.fork_clamped()``; the
:func:`cpu_count` of such a child is 1), and :func:`forked` tells the
partitioners to run scikit-learn's K-means (another OpenMP runtime, which may
have run a team in the parent too) on one thread.
"""

import contextlib
import os
import sys
import threading

__all__ = ["cpu_count", "reserve_threads", "threads_available", "blas_limits", "openmp_limits"]


def cpu_count():
    """Threads this process may use.

    Its CPU affinity, capped by a cgroup CPU quota, by ``OMP_NUM_THREADS``
    when set and by the OpenMP limit of the calling thread
    (``omp_get_max_threads`` of the runtime the native module uses, which
    ``threadpoolctl.threadpool_limits`` sets).

    Returns
    -------
    n_threads : int
        At least 1.

    Examples
    --------
    >>> from threadpoolctl import threadpool_limits
    >>> from cakernels.backends import cpu_count
    >>> cpu_count() >= 1
    True
    >>> with threadpool_limits(1, user_api="openmp"):
    ...     cpu_count()
    1
    """
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        n = os.cpu_count() or 1
    quota = _cgroup_cpu_limit()
    if quota is not None:
        n = min(n, quota)
    env = _omp_num_threads()
    if env is not None:
        n = min(n, env)
    omp = _omp_max_threads()
    if omp is not None:
        n = min(n, omp)
    return max(1, n)


def _omp_max_threads():
    """``omp_get_max_threads()`` of the native module's OpenMP runtime in the
    calling thread, or None (no OpenMP, or the module is not built)."""
    try:
        from .. import _native
    except ImportError:  # pragma: no cover - a checkout without its extension
        return None
    if not _native.openmp_enabled():
        return None
    return int(_native.max_threads())


def _omp_num_threads():
    """The first value of ``OMP_NUM_THREADS`` (a list is allowed), or None."""
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    try:
        n = int(value)
    except ValueError:
        return None
    return n if n >= 1 else None


def _cgroup_cpu_limit():
    """Whole cores allowed by a cgroup v2 (cpu.max) or v1 (cfs quota) limit, or None."""
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as fh:
            quota, period = fh.read().split()[:2]
        if quota != "max":
            return max(1, int(float(quota) / float(period)))
        return None
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", encoding="ascii") as fh:
            quota = int(fh.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us", encoding="ascii") as fh:
            period = int(fh.read())
        if quota > 0 and period > 0:
            return max(1, quota // period)
    except (OSError, ValueError):
        pass
    return None


# ---------------------------------------------------------------- the ledger
_LOCK = threading.RLock()  # (re-entrant: _acquire can tell that it owns it)
_HELD = [0]  # threads held by the open regions of this process
_FORKED = [False]  # this process was forked from one that imported the package


def forked():
    """True in a child process forked after this module was imported."""
    return _FORKED[0]


def threads_available():
    """Threads a new parallel region may use now.

    Returns
    -------
    n_threads : int
        :func:`cpu_count` minus the threads that the regions already open in
        this process hold (:func:`reserve_threads`), at least 1.

    Examples
    --------
    >>> from cakernels.backends import cpu_count, reserve_threads, threads_available
    >>> threads_available() == cpu_count()
    True
    >>> with reserve_threads(1):
    ...     threads_available() == max(1, cpu_count() - 1)
    True
    """
    with _LOCK:
        return max(1, cpu_count() - _HELD[0])


@contextlib.contextmanager
def reserve_threads(wanted):
    """Hold up to ``wanted`` threads of the process's budget for a block.

    A parallel region of your own that runs next to the package's (for
    example fits started from several threads) takes its threads here, so
    that together they never run more threads than :func:`cpu_count`.

    Parameters
    ----------
    wanted : int
        Threads the block would like.

    Yields
    ------
    granted : int
        ``min(wanted, threads_available())``, at least 1. The threads go back
        to the budget when the block ends (also on an exception).

    Examples
    --------
    >>> from cakernels.backends import cpu_count, reserve_threads
    >>> with reserve_threads(cpu_count()) as granted:
    ...     with reserve_threads(4) as nested:
    ...         (granted == cpu_count(), nested)
    (True, 1)
    """
    granted, pid = 0, os.getpid()
    try:
        with _LOCK:
            take = max(1, min(int(wanted), cpu_count() - _HELD[0]))
            _HELD[0] += take
            granted = take
        yield granted
    finally:
        # (a child forked inside the block starts with a fresh budget: nothing to undo)
        if granted and os.getpid() == pid:
            # a Ctrl-C while this waits for the lock (another fit holds it) must
            # not skip the return: the threads stayed held for good
            with _undoing(_LOCK):
                _HELD[0] -= granted


@contextlib.contextmanager
def _undoing(lock):
    """``with lock:`` for an undo that must run: the lock is taken even when a
    signal's handler raises while this waits for it (:func:`_acquire`), and
    that exception is raised once the block has run and released the lock."""
    interrupted = _acquire(lock)
    try:
        yield
    finally:
        lock.release()
    if interrupted is not None:
        raise interrupted


def _acquire(lock):
    """``lock.acquire()`` of an ``RLock`` that finishes even when a signal's
    handler raises while it waits (a lock wait is interruptible on POSIX);
    returns that exception (the first), for the caller to raise once its undo
    is done. The handler may also run just after the lock was granted: the
    lock is then ours (the caller never holds it already)."""
    interrupted = None
    while True:
        try:
            lock.acquire()
            return interrupted
        except BaseException as exc:  # noqa: PERF203 - retried until the lock is ours
            if interrupted is None:
                interrupted = exc
            if lock._is_owned():
                return interrupted


# -------------------------------------------------------------- BLAS limits
#: the BLAS setting after a change that did not complete (re-applied next time)
_UNKNOWN = object()


class _BlasLimits:
    """The process-wide stack of BLAS limits; its one instance is :data:`blas_limits`.

    ``with blas_limits(n_threads):`` limits the BLAS libraries loaded in the
    process (OpenBLAS, MKL, BLIS, through ``threadpoolctl``) to ``n_threads``
    for the block. Blocks nest and interleave across threads: the limit in
    force is the smallest one any open block requested, never above each
    library's setting before the first block, and that setting comes back
    when the last block closes (see the module docstring).

    Parameters
    ----------
    n_threads : int
        Call parameter: the block's limit (at least 1).

    Examples
    --------
    >>> from cakernels.backends import blas_limits
    >>> with blas_limits(1):
    ...     with blas_limits(4):
    ...         blas_limits.current
    1
    >>> blas_limits.current is None
    True
    """

    def __init__(self):
        self._lock = threading.RLock()  # (as _LOCK)
        self._requests = []
        self._limited = []  # the BLAS libraries' controllers set by the limit in force
        self._original = {}  # BLAS library path -> its threads before the first limit
        self._applied = None
        self._controller = None
        self._n_modules = -1

    def _control(self):
        # discovering the loaded libraries costs milliseconds (10 ms on a busy
        # machine); new extension modules may bring new ones
        if self._controller is None or len(sys.modules) != self._n_modules:
            from threadpoolctl import ThreadpoolController

            self._controller = ThreadpoolController()
            self._n_modules = len(sys.modules)
        return self._controller

    def _apply(self):
        want = min(self._requests) if self._requests else None
        if want == self._applied and (want is None or not self._unseen()):
            return
        # threadpoolctl >= 3.6 lets only one "controlling" Python thread set
        # a pthreads OpenBLAS's (process-wide) pool, and silently ignores the
        # others; this stack is the process's single policy and runs under its
        # own lock, so it takes control for the change and hands it back
        _release_openblas_control()
        self._applied = _UNKNOWN  # until the change is complete (an interrupted one)
        try:
            self._set(want)
        finally:
            _release_openblas_control()
        self._applied = want

    def _unseen(self):
        """Whether a BLAS library was loaded since the limit was last set (an
        import inside an open region): it gets the limit too."""
        return any(lib.user_api == "blas" and lib.filepath not in self._original
                   for lib in self._control().lib_controllers)

    def _set(self, want):
        # each library's own setter, not a threadpoolctl limiter object per change:
        # a limit and its restore took ~25 us, ~13 us now
        if want is None:
            # every library back to what it had before the first limit
            for lib in self._limited:
                lib.set_num_threads(self._original[lib.filepath])
            self._limited, self._original = [], {}
            return
        blas = [lib for lib in self._control().lib_controllers if lib.user_api == "blas"]
        for lib in blas:
            if lib.filepath not in self._original:  # not limited yet: its own setting
                self._original[lib.filepath] = lib.get_num_threads()
        # never above a library's own setting (the user's limit stays in force);
        # recorded first, so that an interrupted change can still be undone
        self._limited = blas
        for lib in blas:
            lib.set_num_threads(max(1, min(want, self._original[lib.filepath])))

    @contextlib.contextmanager
    def __call__(self, n_threads):
        n_threads = max(1, int(n_threads))
        pid = os.getpid()
        with self._lock:
            self._requests.append(n_threads)
            try:
                self._apply()
            except BaseException:
                # (a Ctrl-C during the libraries' scan): the request goes, or
                # BLAS stayed on its threads for the rest of the process
                self._requests.remove(n_threads)
                with contextlib.suppress(Exception):
                    self._apply()
                raise
        try:
            yield
        finally:
            if os.getpid() == pid:  # (a child forked inside the block has a fresh stack)
                self._close(n_threads)

    def _close(self, n_threads):
        # (a Ctrl-C while this waits for the lock: the request stayed, and BLAS
        # kept the limit for the rest of the process)
        with _undoing(self._lock):
            self._requests.remove(n_threads)
            try:
                self._apply()
            except BaseException:
                # (a Ctrl-C during the restore): once more, or BLAS kept the
                # limit for the rest of the process
                with contextlib.suppress(Exception):
                    self._apply()
                raise

    def controller(self):
        """The cached ``threadpoolctl.ThreadpoolController`` (refreshed when
        new modules were imported)."""
        with self._lock:
            return self._control()

    @property
    def current(self):
        """The limit in force (None: BLAS's own setting; the smallest open
        request while a change is incomplete)."""
        if self._applied is _UNKNOWN:
            return min(self._requests) if self._requests else None
        return self._applied


def _release_openblas_control():
    """Let any thread set OpenBLAS's pool next (threadpoolctl >= 3.6)."""
    import threadpoolctl

    controller = getattr(threadpoolctl, "OpenBLASController", None)
    clear = getattr(controller, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


#: ``with blas_limits(n): ...`` limits BLAS to ``n`` threads (nests, thread-safe);
#: see :class:`_BlasLimits`
blas_limits = _BlasLimits()


def _after_fork_in_child():
    """A fresh budget in a forked child (see "Fork" in the module docstring):
    the parent's open regions do not exist here."""
    global _LOCK
    _FORKED[0] = True
    _LOCK = threading.RLock()
    _HELD[0] = 0
    limits = blas_limits
    limits._lock = threading.RLock()
    limits._requests = []
    try:  # BLAS back to its setting before the parent's first limit
        limits._apply()
    except Exception:  # pragma: no cover - never fail a fork
        limits._limited, limits._original, limits._applied = [], {}, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@contextlib.contextmanager
def openmp_limits(n_threads):
    """Limit the OpenMP parallel regions that the calling thread starts (in
    any loaded OpenMP runtime, scikit-learn's included) to ``n_threads`` for a
    block. OpenMP's thread count is a setting of each thread, so no stack is
    needed: the previous value comes back at the end. Uses the cached
    controller of :data:`blas_limits` (a fresh ``threadpool_limits`` costs ~3 ms).
    Never raises a runtime's setting; a Ctrl-C while the runtimes are set or
    restored one by one restores every one of them (one runtime left at 1 thread
    made every later fit of the thread run on one thread)."""
    libs = [lib for lib in blas_limits.controller().lib_controllers
            if lib.user_api == "openmp"]
    before = [lib.get_num_threads() for lib in libs]  # (nothing changed yet)
    n = max(1, int(n_threads))

    def restore():
        for lib, threads in zip(libs, before):
            lib.set_num_threads(threads)

    try:
        for lib, threads in zip(libs, before):
            lib.set_num_threads(max(1, min(n, threads)))
        yield
    finally:
        try:
            restore()
        except BaseException:
            with contextlib.suppress(Exception):  # interrupted: once more
                restore()
            raise
