"""Blocked Cholesky factorization on the package's threads.

LAPACK's ``dpotrf`` runs on BLAS's thread team, and that team spins at every
barrier: with one other process busy on a 2-core machine, OpenBLAS's
two-thread factorization of 2,000 rows took 0.7-1.0 s instead of 0.04 s, one
of 4,000 rows 3.4-6.0 s instead of 0.24 s (``benchmarks/bench_cholesky.py``);
its last bits also depend on the number of BLAS threads.
:func:`cholesky_in_place` factors in tiles instead: a right-looking blocked
Cholesky whose tasks (factor a diagonal tile, solve a chunk of panel rows,
update a block column of the trailing matrix) run on
:func:`cakernels.backends._pool.run_graph`, each on one BLAS thread, the next
step's diagonal tile and panel as soon as their column is up to date
(look-ahead). The tiling depends on the matrix size only, and every task's
arithmetic on its tiles only, so the factor is the same bit for bit whatever
the number of threads, and a descheduled thread delays its own task, not a
barrier of the whole team. On an idle machine it runs within a few percent of
OpenBLAS's own ``dpotrf`` with the same threads (0.98-1.06x its speed on 2
cores, 0.94-1.07x on one, 1,024-8,000 rows).

The tasks are BLAS level-3 calls made by the native module
(``_native.cholesky_task``: ``dpotrf``, ``dtrsm``, ``dsyrk``, ``dgemm`` from
SciPy's ``cython_lapack``/``cython_blas``), with the GIL released.
"""

from scipy.linalg import cython_blas, cython_lapack

from .. import _native
from ..backends import blas_limits
from ..backends._pool import run_graph

__all__ = ["cholesky_in_place", "SMALL_CHOLESKY"]

#: below this many rows a matrix is factored by one ``dpotrf`` call on one
#: thread (a few milliseconds; handing tiles between threads costs more than
#: it gains there)
SMALL_CHOLESKY = 1024
#: diagonal tiles are this many rows wide up to ...
_TILE_SMALL, _TILE_SMALL_UP_TO = 192, 3072
#: ... and this many above (measured on 2 cores, 1,000-8,000 rows: wider tiles
#: make the updates' products more efficient, narrower ones the look-ahead)
_TILE = 384
#: a panel task solves this many tiles' rows
_PANEL_TILES = 2

_DIAG, _PANEL, _UPDATE = 0, 1, 2  # ck_chol_task_kind (native/cakernels.h)

#: SciPy's LAPACK and BLAS routines the native tasks call
_ROUTINES = (cython_lapack.__pyx_capi__["dpotrf"], cython_blas.__pyx_capi__["dtrsm"],
             cython_blas.__pyx_capi__["dgemm"], cython_blas.__pyx_capi__["dsyrk"])


def tile_rows(n):
    """Width of the diagonal tiles for a matrix of ``n`` rows."""
    return _TILE_SMALL if n <= _TILE_SMALL_UP_TO else _TILE


def cholesky_in_place(A, n_threads=1):
    """Factor the symmetric positive definite ``A`` in place: ``A = L L^T``.

    ``A``'s buffer is read as a column-major matrix (``A`` is symmetric, so it
    is its own transpose) and ``L`` ends up in its lower triangle, i.e. in the
    upper triangle of ``A`` as NumPy indexes it (``A.T`` holds ``L`` below its
    diagonal, the layout of ``scipy.linalg.cho_solve((A.T, True), b)``). Only
    that triangle is read or written.

    Parameters
    ----------
    A : ndarray of shape (n, n)
        Writable, C-contiguous float64; overwritten.
    n_threads : int, default=1
        Threads that share the tiles. The factor does not depend on it.

    Returns
    -------
    info : int
        0 on success, else ``k > 0``: the leading minor of order ``k`` is not
        positive definite (``A`` is then partly overwritten), as ``dpotrf``.
    """
    n = A.shape[0]
    if n < SMALL_CHOLESKY:
        if n == 0:
            return 0
        with blas_limits(1):
            return _native.cholesky_task(A, _DIAG, 0, n, 0, 0, _ROUTINES)
    tasks, deps, priority = _task_graph(n)

    def run(i):
        kind, k0, k1, r0, r1 = tasks[i]
        info = _native.cholesky_task(A, kind, k0, k1, r0, r1, _ROUTINES)
        return info or None  # a failed diagonal tile stops the graph

    return run_graph(run, deps, priority, n_threads) or 0


def _task_graph(n):
    """``(tasks, deps, priority)`` of the right-looking blocked Cholesky of
    ``n`` rows: per step k (diagonal tile [k0, k1)), a DIAG task, PANEL tasks
    over chunks of the rows below, and one UPDATE task per later block
    column J (its rows [c0, n) minus panel k times its tile's panel rows)."""
    t = tile_rows(n)
    tiles = [(s, min(s + t, n)) for s in range(0, n, t)]
    n_tiles = len(tiles)
    tasks, deps, priority = [], [], []

    def add(task, waits_for, key):
        tasks.append(task)
        deps.append(waits_for)
        priority.append(key)
        return len(tasks) - 1

    # priorities: the leftmost block column first, then the earliest step, so
    # that the next diagonal tile and its panel (the critical path) overtake
    # the rest of a step's updates as soon as their column is up to date
    update = {}  # (step, block column) -> task
    for k, (k0, k1) in enumerate(tiles):
        # the diagonal tile is up to date once the previous step updated its column
        diag = add((_DIAG, k0, k1, 0, 0), [update[k - 1, k]] if k else [], (k, k, 0, 0))
        panels = []  # (first tile, end tile, task)
        for a in range(k + 1, n_tiles, _PANEL_TILES):
            b = min(a + _PANEL_TILES, n_tiles)
            panels.append((a, b, add((_PANEL, k0, k1, tiles[a][0], tiles[b - 1][1]), [diag],
                                     (k, k, 1, a))))
        for j in range(k + 1, n_tiles):
            # block column j needs the panel rows from its tile down, and the
            # previous step's update of the same block column done first
            waits = [task for a, b, task in panels if b > j]
            if k:
                waits.append(update[k - 1, j])
            update[k, j] = add((_UPDATE, k0, k1) + tiles[j], waits, (j, k, 2, j))
    return tasks, deps, priority
