"""Row-block parallelism on a shared pool of Python threads.

Element-wise kernels and the BLAS products they follow do not mix well as two
thread teams on the same cores: OpenBLAS's threads spin for a while after
every call, and an OpenMP transform (or the next small product) that starts
meanwhile runs several times slower on a machine with few cores (measured on
2 cores: an RBF transform of 5,700 x 190 entries 0.9 ms on its own, 5.1 ms
right after a 2-thread product). :func:`run_blocks` avoids the two teams:
``n_threads`` Python threads each take whole row blocks and run every step of
a block (product, transform, reduction) on one core, with BLAS limited to one
thread for the length of the call (NumPy, SciPy and the native module release
the GIL in all of them).

:func:`run_graph` runs a graph of dependent tasks (a blocked factorization)
on the same threads: a task starts as soon as the tasks it waits for are done,
the most urgent ready task first, and an idle thread sleeps instead of
spinning, so a thread that the operating system deschedules delays its own
task only (BLAS's and OpenMP's teams spin at their barriers: next to one busy
process on 2 cores, OpenBLAS's two-thread Cholesky of 4,000 rows took 3.4-6 s
instead of 0.24 s).

The pool is created on first use and shared by the whole process; a process
forked from one that used it gets a new pool.
"""

import contextlib
import heapq
import os
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from ._budget import blas_limits

__all__ = ["run_blocks", "row_blocks", "run_graph", "CancelToken", "Cancelled",
           "cancellable", "current_token", "running_under", "solve_cancel_flag"]

_LOCK = threading.Lock()
_POOL = {"pool": None, "size": 0, "pid": None}


def _after_fork_in_child():
    # a lock held by another thread of the parent would never be released here
    global _LOCK
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _pool(n_threads):
    """The shared executor, with at least ``n_threads`` workers (call with
    ``_LOCK`` held)."""
    pid = os.getpid()
    if _POOL["pool"] is None or _POOL["pid"] != pid or _POOL["size"] < n_threads:
        old = _POOL["pool"] if _POOL["pid"] == pid else None
        _POOL.update(pool=ThreadPoolExecutor(max_workers=n_threads,
                                             thread_name_prefix="cakernels-blocks"),
                     size=n_threads, pid=pid)
        if old is not None:  # (its submitted work still runs)
            old.shutdown(wait=False)
    return _POOL["pool"]


def _submit(fn, count):
    """``count`` futures of ``fn()`` on the shared executor, grown to ``count``
    workers if needed. Under the lock: a larger executor replaces the old one
    and shuts it down, which a thread between fetching the old one and
    submitting to it met as "cannot schedule new futures after shutdown"."""
    with _LOCK:
        pool = _pool(count)
        return [pool.submit(fn) for _ in range(count)]


#: the message of a native solve stopped by its pool's token
CANCELLED = ("the solve was cancelled: its fit was stopped in another thread (Ctrl-C, or "
             "an error in another task of the same fit)")

_LOCAL = threading.local()


class Cancelled(KeyboardInterrupt):
    """A solve, block or task stopped because its pool's :class:`CancelToken` was
    cancelled (Ctrl-C, or another task's error). A pool never raises it in
    place of the exception that made it cancel: see :func:`_keep_first`."""


def _keep_first(error, exc):
    """The exception a pool raises, of the one it holds (``error``) and a new one:
    the first, except that a :class:`Cancelled` gives way to the exception that
    caused the cancellation (a task's ValueError came back as the 'solve was
    cancelled' of a sibling read first)."""
    if error is None or (isinstance(error, Cancelled) and not isinstance(exc, Cancelled)):
        return exc
    return error


class CancelToken:
    """The cancellation of one pool's work (a fit's workers, nested pools included).

    The native solvers (SMO, Asy-GCD) read ``flag`` (one byte) every few dozen
    steps without the GIL and stop (:class:`Cancelled`) once it is set;
    :func:`~cakernels._solvers.smo.smo_fit` and ``asygcd_fit`` refuse to start
    under a cancelled token. A pool cancels its token when its calling thread
    meets an exception (Ctrl-C, a signal handler's exception, a task's error):
    the workers' running and later solves end within milliseconds instead of
    running to their end, and the pool returns at once. Tokens of pools
    started from a worker are its children: cancelling a token cancels them,
    and a child born under a cancelled token is cancelled. Other fits (other
    threads, other pools) are not affected.
    """

    def __init__(self, parent=None):
        self.flag = bytearray(1)
        self._children = weakref.WeakSet()
        self._lock = threading.Lock()
        if parent is not None:
            with parent._lock:
                parent._children.add(self)
                if parent.cancelled:
                    self.flag[0] = 1

    @property
    def cancelled(self):
        return bool(self.flag[0])

    def cancel(self):
        with self._lock:
            self.flag[0] = 1
            children = list(self._children)
        for child in children:
            child.cancel()


def current_token():
    """The :class:`CancelToken` of the pool task this thread runs (None: none)."""
    return getattr(_LOCAL, "token", None)


def solve_cancel_flag():
    """The ``cancel`` byte for a native solve on this thread (its pool token's;
    None outside a pool); :class:`Cancelled` when the pool is cancelled
    already: a solve started after its fit was stopped ends at once."""
    token = current_token()
    if token is None:
        return None
    if token.cancelled:
        raise Cancelled(CANCELLED)
    return token.flag


@contextlib.contextmanager
def cancellable(flag):
    """Around a native solve given ``cancel=flag``: its ``KeyboardInterrupt`` is
    :class:`Cancelled` when the flag stopped it (not a signal)."""
    try:
        yield
    except KeyboardInterrupt as exc:
        if flag is not None and flag[0] and not isinstance(exc, Cancelled):
            raise Cancelled(CANCELLED) from None
        raise


@contextlib.contextmanager
def running_under(token):
    """Run the block with ``token`` as this thread's :func:`current_token`."""
    old = getattr(_LOCAL, "token", None)
    _LOCAL.token = token
    try:
        yield token
    finally:
        _LOCAL.token = old


def row_blocks(n_rows, block_rows):
    """``[(start, stop), ...]`` covering ``range(n_rows)`` in blocks of ``block_rows``."""
    block_rows = max(1, int(block_rows))
    return [(start, min(start + block_rows, n_rows)) for start in range(0, n_rows, block_rows)]


def run_blocks(func, blocks, n_threads):
    """Call ``func(start, stop)`` for every block, on up to ``n_threads`` threads.

    BLAS is limited to one thread until every block is done, so that a block
    gives the same values whichever thread computes it. With one thread or
    one block this is a plain loop in the calling thread; otherwise the
    calling thread and ``n_threads - 1`` workers of the shared pool take the
    blocks in order, and the first exception raised by ``func`` is re-raised
    here (the other workers stop taking blocks). The blocks run under this
    call's :class:`CancelToken` (a child of the calling thread's): an
    exception, or Ctrl-C while the calling thread waits, cancels it, so the
    workers' native solves stop and no block starts after it; the call returns
    once its workers have stopped (a second Ctrl-C while waiting returns at
    once), raising the exception that stopped it, never the :class:`Cancelled`
    of the blocks it stopped.

    Parameters
    ----------
    func : callable
        ``func(start, stop)``; its return value is ignored (write into an
        output array).
    blocks : list of (int, int)
    n_threads : int
    """
    n_threads = max(1, min(int(n_threads), len(blocks)))
    if n_threads == 1:
        token = current_token()  # an enclosing pool's: a stopped fit stops here too
        with blas_limits(1):
            for start, stop in blocks:
                if token is not None and token.cancelled:
                    raise Cancelled(CANCELLED)
                func(start, stop)
        return
    lock = threading.Lock()
    state = {"next": 0, "failed": False}
    token = CancelToken(current_token())

    def worker():
        with running_under(token):
            while True:
                with lock:
                    i = state["next"]
                    if state["failed"] or i >= len(blocks):
                        return
                    state["next"] = i + 1
                if token.cancelled:  # its fit was stopped (an enclosing pool's too)
                    raise Cancelled(CANCELLED)
                try:
                    func(*blocks[i])
                except BaseException:
                    with lock:
                        state["failed"] = True
                    token.cancel()  # the other workers' solves stop too
                    raise

    with blas_limits(1):
        futures = _submit(worker, n_threads - 1)
        error = None
        try:
            worker()  # the calling thread takes blocks too
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the others
            error = exc
        interrupts = 0
        for fut in futures:
            # a worker that has not started would find no block left: never wait
            # for it (the pool may be busy, or this call may run on the pool)
            if fut.cancel():
                continue
            while True:
                try:
                    fut.result()
                except BaseException as exc:  # noqa: BLE001 - Ctrl-C while waiting, too
                    with lock:
                        state["failed"] = True
                    token.cancel()
                    error = _keep_first(error, exc)
                    if not fut.done():
                        # a signal interrupted the wait: the worker stops at its next
                        # check; wait for it (its block must not outlive this call),
                        # unless a second Ctrl-C says not to
                        interrupts += 1
                        if interrupts > 1:
                            raise error from None
                        continue
                break
        if error is not None:
            raise error


def run_graph(func, deps, priority, n_threads):
    """Call ``func(i)`` for every task ``i`` once the tasks ``deps[i]`` are done.

    Up to ``n_threads`` threads (the calling thread and workers of the shared
    pool, with BLAS limited to one thread, as :func:`run_blocks`) take the
    ready task of the smallest ``priority[i]`` each time; a thread with no
    ready task waits on a condition variable until another task finishes. A
    task's work must not depend on which thread runs it or when: then the
    results are the same for any ``n_threads``.

    Parameters
    ----------
    func : callable
        ``func(i)``; a return value other than None stops the graph: no task
        starts after it, and ``run_graph`` returns that value once the running
        ones are done.
    deps : list of list of int
        The tasks each task waits for (the graph must be acyclic).
    priority : list
        Sort keys; among ready tasks the smallest goes first.
    n_threads : int

    Returns
    -------
    The first value other than None returned by ``func``, else None. The
    first exception raised by ``func`` is re-raised (no task starts after it).
    """
    n = len(deps)
    waiting = [len(d) for d in deps]
    successors = [[] for _ in range(n)]
    for i, d in enumerate(deps):
        for j in d:
            successors[j].append(i)
    ready = [(priority[i], i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    if n and not ready:
        raise ValueError("the task graph has a cycle: no task is ready to start")
    cond = threading.Condition()
    state = {"left": n, "running": 0, "result": None, "failed": False}

    def worker(_start, _stop):
        with cond:
            try:
                token = current_token()  # (run_blocks's, below)
                while state["left"] and state["result"] is None and not state["failed"]:
                    if token is not None and token.cancelled:  # its fit was stopped
                        raise Cancelled(CANCELLED)
                    if not ready:
                        if not state["running"]:
                            raise ValueError("the task graph has a cycle: tasks are left "
                                             "but none can start")
                        cond.wait()
                        continue
                    _, i = heapq.heappop(ready)
                    state["running"] += 1
                    cond.release()
                    try:
                        result = func(i)
                    finally:
                        cond.acquire()
                        state["running"] -= 1
                    state["left"] -= 1
                    if result is not None and state["result"] is None:
                        state["result"] = result
                    for j in successors[i]:
                        waiting[j] -= 1
                        if waiting[j] == 0:
                            heapq.heappush(ready, (priority[j], j))
                    cond.notify_all()
            except BaseException:
                state["failed"] = True  # the others stop taking tasks
                raise
            finally:
                cond.notify_all()

    run_blocks(worker, [(0, 0)] * max(1, min(int(n_threads), n)), n_threads)
    return state["result"]
