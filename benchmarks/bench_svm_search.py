"""The SVM search's warm start over C: iterations and time against cold starts.

``CASVCCV`` solves every partition's Cs in increasing order; with
``warm_start=True`` (the default) each C starts from the previous C's dual
variables, with ``warm_start=False`` from zero (every score then equals a
refit). Both sides run the same search (data, partitions, folds, grid, cache,
threads) in one process, alternating, best of ``--repeat`` (default 3) after an
untimed warm-up search on a small subset:

* ijcnn1 (dense, 22 features) and a9a (CSR, 123 features) subsets, 2 and 8
  partitions, Cs ``geomspace(1, 1000, 4)`` and ``geomspace(0.01, 100, 5)``,
  one gamma per dataset (2 and 0.05: Table 2.12's), 3 folds;
* cache_size 200 MB (the default) and 20 MB (a cache too small for the
  partitions' kernel columns, where a start that computes fewer columns pays).

Printed per case: the SMO iterations of every solve added up, the search's
seconds, the ratio cold / warm (above 1: the warm start is faster) and
whether both select the same (C, gamma).

Usage::

    python benchmarks/bench_svm_search.py            # ~7 min (2-core AMD EPYC)
    python benchmarks/bench_svm_search.py --quick    # 3,000-row subsets, ~20 s
"""

import argparse
import time

import _common as common  # noqa: I001

import numpy as np
from threadpoolctl import threadpool_limits

from cakernels import CASVCCV
from cakernels.datasets import load_dataset

DATA = {"ijcnn1": 2.0, "a9a": 0.05}
GRIDS = {"1..1000": np.geomspace(1, 1000, 4), "0.01..100": np.geomspace(0.01, 100, 5)}


def one(X, y, gamma, Cs, P, cache, warm):
    search = CASVCCV(n_partitions=P, Cs=Cs, gammas=[gamma], cv=3, cache_size=cache,
                     warm_start=warm, refit=False, random_state=0)
    t = time.perf_counter()
    search.fit(X, y)
    return time.perf_counter() - t, search


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--repeat", type=common.positive_int, default=3)
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS and solver threads of both sides (default 1)")
    args = ap.parse_args(argv)
    home = common.data_home(args.data_home)
    n = 3000 if args.quick else 16000
    rep = common.Report()
    rep.line("# The SVM search's warm start over C (CASVCCV, warm vs cold)")
    rep.machine([f"threads    : {args.threads} (threadpool_limits, both sides)"])
    rows = []
    with threadpool_limits(args.threads):
        for name, gamma in DATA.items():
            X, y = load_dataset(name, data_home=home, return_X_y=True, n_samples=n,
                                random_state=0, download_if_missing=False)
            one(X[:500], y[:500], gamma, GRIDS["1..1000"], 2, 200, True)  # warm-up
            for P in (2, 8):
                for grid, Cs in GRIDS.items():
                    for cache in (200, 20):
                        best = {True: np.inf, False: np.inf}
                        fits = {}
                        for _ in range(args.repeat):
                            for warm in (True, False):
                                t, fits[warm] = one(X, y, gamma, Cs, P, cache, warm)
                                best[warm] = min(best[warm], t)
                        it_w, it_c = (fits[w].fit_stats_["n_iter"] for w in (True, False))
                        rows.append([name, f"{X.shape[0]:,}", P, grid, cache,
                                     f"{it_w:,}", f"{it_c:,}", f"{it_w / it_c:.2f}",
                                     f"{best[True]:.2f}", f"{best[False]:.2f}",
                                     f"{best[False] / best[True]:.2f}x",
                                     "yes" if fits[True].best_params_ == fits[False].best_params_
                                     else "no"])
                        print(" | ".join(map(str, rows[-1])), flush=True)
    rep.table("Warm vs cold start over C (3 folds, best of "
              f"{args.repeat} alternating searches)",
              ["data", "rows", "P", "Cs", "cache MB", "iter warm", "iter cold",
               "warm / cold iter", "warm s", "cold s", "cold / warm time", "same choice"],
              rows)
    ratios = [float(r[10].rstrip("x")) for r in rows]
    saved = [1 - float(r[7]) for r in rows]
    rep.line(f"\nIterations saved by the warm start: {100 * min(saved):.0f}% to "
             f"{100 * max(saved):.0f}%; time cold / warm: {min(ratios):.2f}x to "
             f"{max(ratios):.2f}x (above 1: the warm start is faster).")
    rep.write(args.out)


if __name__ == "__main__":
    main()
