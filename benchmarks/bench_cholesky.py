"""The package's blocked Cholesky against LAPACK's ``dpotrf``, on an idle and
on a busy machine; and the KRR fits that stand on it.

Every KRR fit factors one kernel matrix per partition (``solve_krr``). Until
2026-11-26 that was one LAPACK ``dpotrf`` call on BLAS's own thread team,
whose threads wait for each other by spinning: next to one busy process on 2
cores, OpenBLAS's two-thread factorization of 4,000 rows took 11x its idle
time. The package now factors in tiles (``cakernels._solvers.cholesky``), the
tasks of a right-looking blocked Cholesky run on the package's threads, each
on one BLAS thread, a waiting thread sleeping.

Part 1 (``factor``): the same matrices (an RBF kernel of ``n`` Gaussian rows
plus ``1e-3 n I``) factored by

* ``ours``: ``cholesky_in_place(A, n_threads)`` (``n_threads`` = the cores
  the process may use, as a serial-backend fit passes; 1 in the 1-core
  setting);
* ``dpotrf``: ``scipy.linalg.lapack.dpotrf`` in place on the same buffer
  (what ``solve_krr`` called before), BLAS with its default threads.

Two regimes, ``--repeat`` timed calls each, medians: ``back to back`` (one
side's calls in a row after a pause and a warm-up call, as a fit factoring
its partitions one after the other) and ``after a pause`` (the sides
alternate, each call ``SETTLE`` seconds after the previous one, so that it
starts with every thread asleep: OpenBLAS's threads spin for about 0.1 s
after a multi-threaded call, and a factorization started right after
``dpotrf`` shares the cores with them, ours then up to 1.7x slower on 2 idle
cores, while ``dpotrf`` started right after ours finds no one spinning).
Settings: ``2 cores`` (idle), ``1 core`` (``threadpool_limits(1)`` for both
sides, ours on one thread), ``1 busy`` and ``2 busy`` (one or two other
processes spinning, default threads; up to 4,000 rows). The factors of both
sides are compared (max entry difference).

Part 2 (``fit``): full ``BKRR2`` fits on cadata (standardised), whose
partitions' factorizations are most of the fit, with the package's
factorization and with ``dpotrf`` swapped back in (the ``before`` side),
same settings. Needs ``../shared/datasets`` (or ``--data-home``).

Usage::

    python benchmarks/bench_cholesky.py            # ~25 min on 2 cores
    python benchmarks/bench_cholesky.py --quick    # smaller sizes, 3 repeats
"""

import argparse
import contextlib
import time

import _common as common  # noqa: I001

import numpy as np
from scipy import linalg
from threadpoolctl import threadpool_limits

from cakernels import BKRR2
from cakernels._kernels import kernel_block
from cakernels._solvers import krr as krr_module
from cakernels._solvers.cholesky import cholesky_in_place
from cakernels.backends import cpu_count
from cakernels.datasets import load_dataset

#: seconds between timed calls: OpenBLAS's idle threads spin for about 0.1 s
#: after each multi-threaded call (its THREAD_TIMEOUT, 2^28 cycles), and a
#: call that starts meanwhile shares its cores with them
SETTLE = 0.25
SETTINGS = [("2 cores", 0, None), ("1 core", 0, 1), ("1 busy", 1, None), ("2 busy", 2, None)]


def dpotrf_in_place(A, n_threads=None):
    """The previous factorization: LAPACK on A's buffer (A.T is its Fortran view)."""
    _, info = linalg.lapack.dpotrf(A.T, lower=1, clean=0, overwrite_a=1)
    return info


def kernel_matrix(n, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, 8))
    K = kernel_block(X, X, kernel="rbf", gamma=0.1, degree=3, coef0=0.0)
    K.flat[:: n + 1] += 1e-3 * n
    return K


def _time_factor(fn, K, n_threads):
    A = K.copy()
    t0 = time.perf_counter()
    info = fn(A, n_threads)
    t = time.perf_counter() - t0
    assert info == 0, info
    return t, A


def factor_part(rep, sizes, repeat):
    sides = (("ours", cholesky_in_place), ("dpotrf", dpotrf_in_place))
    rows = []
    for label, busy, limit in SETTINGS:
        n_threads = limit or cpu_count()
        with common.Busy(busy), (threadpool_limits(limit) if limit
                                 else contextlib.nullcontext()):
            for n in sizes:
                if busy and n > 4000:
                    continue  # minutes per call on the previous path
                K = kernel_matrix(n)
                reps = repeat if n <= 4000 else max(2, repeat // 2)
                hot, cold, factors = {}, {s: [] for s, _ in sides}, {}
                for side, fn in sides:  # back to back: one side's calls in a row
                    time.sleep(SETTLE)  # not next to the other side's spinning threads
                    ts = [_time_factor(fn, K, n_threads)[0] for _ in range(reps + 1)][1:]
                    hot[side] = float(np.median(ts))
                for _ in range(reps):  # after a pause, the sides alternating
                    for side, fn in sides:
                        time.sleep(SETTLE)
                        t, factors[side] = _time_factor(fn, K, n_threads)
                        cold[side].append(t)
                cold = {s: float(np.median(v)) for s, v in cold.items()}
                diff = float(np.max(np.abs(np.triu(factors["ours"]) - np.triu(factors["dpotrf"]))))
                rows.append([label, f"{n:,}"]
                            + [f"{d[side] * 1e3:.1f}" for d in (hot, cold)
                               for side in ("ours", "dpotrf")]
                            + [f"{hot['dpotrf'] / hot['ours']:.2f}x",
                               f"{cold['dpotrf'] / cold['ours']:.2f}x", f"{diff:.1e}"])
                print(rows[-1], flush=True)
    rep.table("Cholesky factorization (median ms; `dpotrf / ours` > 1: ours faster)",
              ["setting", "rows", "back to back: ours", "dpotrf", "after a pause: ours",
               "dpotrf", "dpotrf / ours, back to back", "after a pause",
               "max abs. factor difference"], rows)


@contextlib.contextmanager
def previous_factorization():
    """solve_krr with LAPACK's dpotrf on BLAS's threads (the path before)."""
    saved = krr_module.cholesky_in_place
    krr_module.cholesky_in_place = dpotrf_in_place
    try:
        yield
    finally:
        krr_module.cholesky_in_place = saved


def fit_part(rep, home, quick, repeat):
    from sklearn.preprocessing import StandardScaler

    X, y = load_dataset("cadata", data_home=home, return_X_y=True, download_if_missing=False)
    n = 4000 if quick else 16000
    order = np.random.RandomState(0).permutation(X.shape[0])[:n]
    X = StandardScaler().fit_transform(X[order])
    y = (y[order] - y[order].mean()) / y[order].std()
    cases = [8, 2] if not quick else [4, 2]
    rows = []
    for label, busy, limit in SETTINGS:
        with common.Busy(busy), (threadpool_limits(limit) if limit
                                 else contextlib.nullcontext()):
            for P in cases:
                times = {"ours": [], "before": []}
                preds = {}
                for r in range(repeat + 1):
                    for side in ("ours", "before"):
                        ctx = (previous_factorization() if side == "before"
                               else contextlib.nullcontext())
                        est = BKRR2(n_partitions=P, sigma=1.0, lam=1e-4, random_state=0)
                        with ctx:
                            t0 = time.perf_counter()
                            est.fit(X, y)
                            t = time.perf_counter() - t0
                        if r:
                            times[side].append(t)
                        preds[side] = est.predict(X[:2000])
                diff = float(np.max(np.abs(preds["ours"] - preds["before"])))
                med = {s: float(np.median(v)) for s, v in times.items()}
                rows.append([label, f"BKRR2(P={P})", f"{n // P:,}", f"{med['ours']:.2f}",
                             f"{med['before']:.2f}", f"{med['before'] / med['ours']:.2f}x",
                             f"{diff:.1e}"])
                print(rows[-1], flush=True)
    rep.table(f"Full BKRR2 fits, cadata {n:,} rows, sigma=1, lam=1e-4 (median seconds)",
              ["setting", "estimator", "rows per partition", "ours (s)", "before (s)",
               "before / ours", "max abs. prediction difference"], rows)


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--repeat", type=common.positive_int, default=None, help="timed rounds (default 5; quick 3)")
    ap.add_argument("--parts", nargs="+", default=["factor", "fit"], choices=["factor", "fit"])
    args = ap.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 5)
    rep = common.Report()
    rep.machine()
    if "factor" in args.parts:
        sizes = [1333, 2000, 4000] if args.quick else [1024, 1333, 2000, 4000, 8000]
        factor_part(rep, sizes, repeat)
    if "fit" in args.parts:
        fit_part(rep, common.data_home(args.data_home), args.quick, min(repeat, 3))
    rep.write(args.out)


if __name__ == "__main__":
    main()
