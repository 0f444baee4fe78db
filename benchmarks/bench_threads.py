"""Speedup of the ``'threads'`` backend over ``'serial'`` on the cores of this machine.

With few, large partitions every partition is a long independent solve, so
running them on a thread pool should approach ``n_jobs``-fold speedup
(~2x on 2 cores):

* ``CASVC`` on the ijcnn1 training set (49,990 x 22; C=32, gamma=2) with 2 and
  4 partitions -- fit time (the default native SMO, no BLAS);
* ``BKRR2`` on a 16,000-sample cadata training set (random seed-0 subset,
  standardised; sigma=2, lam=1e-5) with 2 and 4 partitions -- fit time.

Columns: ``serial`` (one partition after the other, ``threadpool_limits(1)``:
BLAS and the solvers' OpenMP on one thread, i.e. one core), ``threads``
(``backend='threads', n_jobs=2``; the backend itself gives every worker
``cores // n_jobs`` BLAS and OpenMP threads) and ``serial, all cores`` (the
default serial backend: BLAS uses every core for each partition's Cholesky,
and each SMO solve splits its long passes over every core). Speedup = serial /
threads. Every round runs every variant once (interleaved), the best of
``--repeat`` rounds is kept.

Usage::

    python benchmarks/bench_threads.py             # ~4 min
    python benchmarks/bench_threads.py --quick     # 10,000 ijcnn1 / 4,000 cadata samples
"""

import argparse
from contextlib import nullcontext

import _common as common  # noqa: I001

import numpy as np
from threadpoolctl import threadpool_limits

from cakernels import BKRR2, CASVC
from cakernels.datasets import load_dataset


def best_of(variants, repeat):
    """Best wall time of every variant over ``repeat`` interleaved rounds."""
    best = {name: float("inf") for name, _ in variants}
    loads = {name: [] for name, _ in variants}
    for _ in range(repeat):
        for name, fn in variants:
            loads[name].append(common.load1())
            _, t = common.timed(fn)
            best[name] = min(best[name], t)
    return best, {k: max(v) for k, v in loads.items()}


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--repeat", type=common.positive_int, default=None,
                    help="rounds (default 2; quick 1)")
    ap.add_argument("--n-jobs", type=int, default=2)
    args = ap.parse_args(argv)
    repeat = args.repeat or (1 if args.quick else 2)
    home = common.data_home(args.data_home)
    nj = args.n_jobs

    Xs, ys = load_dataset("ijcnn1", subset="train", data_home=home, return_X_y=True,
                          download_if_missing=False,
                          **(dict(n_samples=10_000, random_state=0) if args.quick else {}))
    Xc, yc = load_dataset("cadata", data_home=home, return_X_y=True, download_if_missing=False)
    idx = np.random.RandomState(0).permutation(Xc.shape[0])[:4_000 if args.quick else 16_000]
    Xc, yc = Xc[idx], yc[idx]
    Xc = (Xc - Xc.mean(axis=0)) / Xc.std(axis=0)
    yc = (yc - yc.mean()) / yc.std()

    rep = common.Report()
    rep.line(f"## threads vs serial backend ({'QUICK subsets' if args.quick else 'full'})\n")
    rep.machine([f"data       : ijcnn1 train {Xs.shape}; cadata subset {Xc.shape}; {home}",
                 f"setup      : threads n_jobs={nj}, best of {repeat} interleaved rounds"])

    rows = []
    for P in (2, 4):
        def svm(backend, one_core, P=P):
            def f():
                with threadpool_limits(1) if one_core else nullcontext():
                    CASVC(P, C=32.0, gamma=2.0, random_state=0, backend=backend,
                          n_jobs=nj).fit(Xs, ys)
            return f
        print(f"CASVC P={P} (load {common.load_avg()}) ...", flush=True)
        best, loads = best_of([("serial", svm("serial", True)),
                               ("serial all", svm("serial", False)),
                               ("threads", svm("threads", False))], repeat)
        rows.append([f"CASVC ijcnn1 P={P}", f"{Xs.shape[0] // P}", f"{best['serial']:.2f}",
                     f"{best['serial all']:.2f}", f"{best['threads']:.2f}",
                     f"{best['serial'] / best['threads']:.2f}x",
                     f"{best['serial all'] / best['threads']:.2f}x",
                     f"{max(loads.values()):.2f}"])
    for P in (2, 4):
        def krr(backend, blas1, P=P):
            def f():
                with threadpool_limits(1) if blas1 else nullcontext():
                    BKRR2(P, sigma=2.0, lam=1e-5, random_state=0, backend=backend,
                          n_jobs=nj).fit(Xc, yc)
            return f
        print(f"BKRR2 P={P} (load {common.load_avg()}) ...", flush=True)
        best, loads = best_of([("serial", krr("serial", True)),
                               ("serial all", krr("serial", False)),
                               ("threads", krr("threads", False))], repeat)
        rows.append([f"BKRR2 cadata P={P}", f"{Xc.shape[0] // P}", f"{best['serial']:.2f}",
                     f"{best['serial all']:.2f}", f"{best['threads']:.2f}",
                     f"{best['serial'] / best['threads']:.2f}x",
                     f"{best['serial all'] / best['threads']:.2f}x",
                     f"{max(loads.values()):.2f}"])
    rep.table(f"threads (n_jobs={nj}) vs serial: fit seconds",
              ["case", "partition size", "serial s (1 core)", "serial s (all cores)",
               "threads s", "speedup vs serial", "speedup vs serial+BLAS", "max load"],
              rows,
              note=f"Goal: ~{nj}x over serial on {common.n_cores()} cores. 'max load' is the "
                   "highest 1-min load average seen before a timed fit; a load above the "
                   "core count means other processes competed for the cores and the "
                   "speedup is understated.")
    rep.line(f"\nload avg at end: {common.load_avg()}")
    rep.write(args.out)


if __name__ == "__main__":
    main()
