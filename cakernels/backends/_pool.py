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

import heapq
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from ._budget import blas_limits

__all__ = ["run_blocks", "row_blocks", "run_graph", "cancel_solves"]

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


def cancel_solves():
    """Stop the native solves running on this process's threads.

    Called when the calling thread is interrupted (Ctrl-C) while workers run
    native SMO or Asy-GCD solves: without it, the interrupt would wait for
    them to finish. The solves end within milliseconds with
    ``KeyboardInterrupt``; solves started later run normally. The solves of
    every thread stop (Ctrl-C is meant for the whole process).
    """
    from .. import _native

    _native.cancel_solves()


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
    here (the other workers stop taking blocks).

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
        with blas_limits(1):
            for start, stop in blocks:
                func(start, stop)
        return
    lock = threading.Lock()
    state = {"next": 0, "failed": False}

    def worker():
        while True:
            with lock:
                i = state["next"]
                if state["failed"] or i >= len(blocks):
                    return
                state["next"] = i + 1
            try:
                func(*blocks[i])
            except BaseException:
                with lock:
                    state["failed"] = True
                raise

    with blas_limits(1):
        futures = _submit(worker, n_threads - 1)
        error = None
        try:
            worker()  # the calling thread takes blocks too
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the others
            error = exc
            if isinstance(exc, KeyboardInterrupt):
                cancel_solves()  # the workers' solves stop too
        for fut in futures:
            # a worker that has not started would find no block left: never wait
            # for it (the pool may be busy, or this call may run on the pool)
            if fut.cancel():
                continue
            try:
                fut.result()
            except KeyboardInterrupt as exc:  # Ctrl-C while waiting, or a cancelled solve
                cancel_solves()
                with lock:
                    state["failed"] = True
                error = error or exc
            except BaseException as exc:  # noqa: BLE001
                error = error or exc
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
                while state["left"] and state["result"] is None and not state["failed"]:
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
