"""Partitioning cost on 500k samples, next to the fit it prepares.

The issue's goal: partitioning costs O(m P) work (vectorised) and stays a
small fraction of fit time on 500k samples. This script times every
partitioner on ijcnn1's 49,990 training samples tiled (with a little noise)
to 500,000 x 22, P = 16, and one CASVC fit on the same data (C=32,
gamma=2, serial, one BLAS thread) for scale. The K-means-based partitioners
spend almost all their time in scikit-learn's KMeans; the balanced
assignment itself is reported separately (``assign s``).

With ``--halo`` it times the halo selection instead (``halo=0.5``, the margins of
every row to every partition's border, ``cakernels.partition._halo.halo_indices``)
next to the ``m x P`` distance matrix it starts from, at a fixed partition size of
500 rows (P = m / 500), on Gaussian data with 20 features, one thread, best of 3:
the selection is O(m P), so it grows as m^2 there.

    python benchmarks/bench_partition.py [--quick] [--no-fit] [--halo]
"""

import argparse
import os
import time
from pathlib import Path

import _common  # noqa: F401, I001  (puts a built checkout on sys.path)
import numpy as np
from threadpoolctl import threadpool_limits

from cakernels import CASVC
from cakernels.datasets import load_dataset
from cakernels.partition import (
    BKMPartitioner,
    FCFSPartitioner,
    KBalancePartitioner,
    KMeansPartitioner,
    RandomPartitioner,
    _Capacity,
    greedy_capacity_assign,
    squared_distances,
)

ROOT = Path(__file__).resolve().parent.parent


def machine():
    return "\n".join(_common.machine_lines())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="50,000 samples instead of 500,000")
    ap.add_argument("--no-fit", action="store_true", help="skip the CASVC fit")
    ap.add_argument("--data-home", default=os.environ.get("CAKERNELS_DATA",
                                                          str(ROOT.parent / "shared" / "datasets")))
    ap.add_argument("--halo", action="store_true",
                    help="time the halo selection against the distance matrix instead")
    args = ap.parse_args()
    if args.halo:
        return halo_table(args.quick)
    X0, y0 = load_dataset("ijcnn1", data_home=args.data_home, return_X_y=True,
                          download_if_missing=False)
    m = 50_000 if args.quick else 500_000
    rng = np.random.RandomState(0)
    reps = -(-m // len(X0))
    X = np.tile(X0, (reps, 1))[:m] + 0.01 * rng.randn(m, X0.shape[1])
    y = np.tile(y0, reps)[:m]
    P = 16
    print(machine())
    print(f"data: ijcnn1 tiled to {m:,} x {X.shape[1]}, P = {P}, load average "
          f"{os.getloadavg()[0]:.2f}")
    rows = []
    with threadpool_limits(1):
        for cls in [RandomPartitioner, FCFSPartitioner, KMeansPartitioner,
                    KBalancePartitioner, BKMPartitioner]:
            t0 = time.perf_counter()
            part = cls(n_partitions=P, random_state=0).fit(X)
            total = time.perf_counter() - t0
            assign = ""
            if cls in (KBalancePartitioner,):
                D = squared_distances(X, part.centers_)
                t1 = time.perf_counter()
                greedy_capacity_assign(D, _Capacity(m, P))
                assign = f"{time.perf_counter() - t1:.2f}"
            rows.append((cls.__name__, total, assign, part.sizes_.min(), part.sizes_.max(),
                         getattr(part, "n_iter_", "")))
        fit = None
        if not args.no_fit:
            t0 = time.perf_counter()
            CASVC(n_partitions=P, C=32, gamma=2, random_state=0).fit(X, y)
            fit = time.perf_counter() - t0
    print()
    print("| partitioner | seconds | assign s | min size | max size | K-means iters |"
          + (" % of CASVC fit |" if fit else ""))
    print("|---|---|---|---|---|---|" + ("---|" if fit else ""))
    for name, total, assign, lo, hi, it in rows:
        frac = f" {100 * total / fit:.1f}% |" if fit else ""
        print(f"| {name} | {total:.2f} | {assign} | {lo:,} | {hi:,} | {it} |{frac}")
    if fit:
        print(f"\nCASVC fit (16 partitions, including its random partitioning): {fit:.1f} s")


def best_of(func, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - t0)
    return best


def halo_table(quick):
    """The halo selection (h = 0.5) against its distance matrix, 500 rows a partition."""
    from cakernels.partition._halo import halo_indices

    print(machine())
    print(f"data: Gaussian, 20 features, 500 rows per partition, halo 0.5, one thread, "
          f"best of 3, load average {os.getloadavg()[0]:.2f}")
    print()
    print("| rows m | partitions P | distance matrix s | halo selection s | ratio |")
    print("|---|---|---|---|---|")
    with threadpool_limits(1):
        for m in ((25_000, 50_000) if quick else (25_000, 50_000, 100_000, 200_000)):
            P = m // 500
            X = np.random.default_rng(0).standard_normal((m, 20))
            part = RandomPartitioner(n_partitions=P, random_state=0).fit(X)
            dist = best_of(lambda: squared_distances(X, part.centers_))
            sel = best_of(lambda: halo_indices(X, part.labels_, part.centers_, part.sizes_,
                                               0.5, True))
            print(f"| {m:,} | {P} | {dist:.3f} | {sel:.3f} | {sel / dist:.1f}x |")


if __name__ == "__main__":
    main()
