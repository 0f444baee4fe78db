"""Backends that run the independent per-partition tasks.

A backend maps a function over a list of tasks and returns the results in
task order:

* ``'serial'``  : one after the other in this thread (the reference).
* ``'threads'`` : a thread pool; the per-partition solvers (LIBSVM through
  scikit-learn, LAPACK Cholesky, the native kernels) release the GIL, so
  partitions really run concurrently. BLAS is limited with threadpoolctl
  so that ``n_workers x BLAS threads`` does not exceed the cores.

The MPI backend arrives with the distributed-training issue.
"""

import os
import sys
from concurrent.futures import ThreadPoolExecutor

from threadpoolctl import threadpool_limits

BACKENDS = ("serial", "threads")


def cpu_count():
    """Cores this process may use (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def effective_n_jobs(backend, n_jobs):
    """Number of workers: 1 for ``'serial'``; for ``'threads'`` ``n_jobs``,
    with ``None`` meaning every available core and negative values counting
    back from it (``-1`` = all cores) as in scikit-learn."""
    if backend == "serial":
        return 1
    n_cpu = cpu_count()
    if n_jobs is None:
        return n_cpu
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError("n_jobs == 0 has no meaning; use None, a positive or a negative int")
    if n_jobs < 0:
        return max(1, n_cpu + 1 + n_jobs)
    return n_jobs


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


def run_tasks(func, tasks, *, backend="serial", n_jobs=None, verbose=False,
              desc="partitions"):
    """Apply ``func`` to every task with the chosen backend.

    Parameters
    ----------
    func : callable
        ``func(task) -> result``; must be thread safe for ``'threads'``.
    tasks : sequence
        The independent tasks (one per partition).
    backend : {'serial', 'threads'}, default='serial'
    n_jobs : int or None, default=None
        Workers of the ``'threads'`` backend, see :func:`effective_n_jobs`.
    verbose : bool or int, default=False
        Show a progress bar over the tasks.

    Returns
    -------
    results : list
        ``[func(t) for t in tasks]``, in task order.
    """
    if backend not in BACKENDS:
        raise ValueError(
            f"backend must be one of {BACKENDS}, got {backend!r} "
            "(the 'mpi' backend is not available in this version)"
        )
    tasks = list(tasks)
    n_workers = min(effective_n_jobs(backend, n_jobs), max(len(tasks), 1))
    if n_workers <= 1:
        return [func(t) for t in _progress(tasks, len(tasks), verbose, desc)]
    blas_threads = max(1, cpu_count() // n_workers)
    with threadpool_limits(limits=blas_threads, user_api="blas"):
        with ThreadPoolExecutor(max_workers=n_workers) as pool:
            results = pool.map(func, tasks)
            return list(_progress(results, len(tasks), verbose, desc))
