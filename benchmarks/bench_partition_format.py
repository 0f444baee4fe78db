"""What the storage-independent partitioning costs on sparse data.

Below ``cakernels.partition.DENSE_BUDGET_BYTES`` the partitioners compute on
one canonical storage chosen from the data's shape and density
(``partition_storage``): dense float64 for data with at least
``SPARSE_DENSITY`` (5%) non-zeros, canonical CSR below, so that CSR and its
dense copy give the same partition. This script times, in one process and on
the same CSR matrix (as ``load_dataset`` returns it), every partitioner's
``fit`` and ``assign`` of the test set on that canonical path (the "dense
path" columns: dense for a9a and mushrooms, CSR for ``wide``) and on the CSR
path (the budget set to 0, what the partitioners did before), and prints the
ratio canonical path / CSR path (below 1: the canonical path is faster). Best of
``--repeat`` runs, one BLAS thread. For scale, one ``BKMSVC`` fit (P = 16,
the default native SMO per partition, ``solver='smo'``) on the same CSR data,
partitioning included.

The dataset ``wide`` is the case the density rule is for: synthetic 8,192 x
8,192 CSR with 0.2% non-zeros (a 512 MiB dense copy, half the budget), where
dense K-means would multiply 500 times more values than CSR; its canonical
storage is CSR, so both of its columns time CSR.

    python benchmarks/bench_partition_format.py [--quick] [--datasets a9a mushrooms wide]
"""

import argparse

import _common
import numpy as np
from sklearn.metrics import adjusted_rand_score
from threadpoolctl import threadpool_limits

from cakernels import BKMSVC, partition
from cakernels.datasets import load_dataset

P = 16
CONFIGS = {
    "random": lambda: partition.RandomPartitioner(P, random_state=0),
    "fcfs": lambda: partition.FCFSPartitioner(P, random_state=0),
    "kmeans": lambda: partition.KMeansPartitioner(P, random_state=0),
    "kbalance": lambda: partition.KBalancePartitioner(P, random_state=0),
    "bkm": lambda: partition.BKMPartitioner(P, random_state=0),
}


def best_of(repeat, fn):
    times = []
    for _ in range(repeat):
        out, t = _common.timed(fn)
        times.append(t)
    return out, min(times)


def run(name, X, y, T, repeat, report):
    # the budget is read where it is defined (cakernels.partition re-exports the
    # value: setting it there changed nothing, and both paths ran the dense one)
    storage = partition._storage
    budget = storage.DENSE_BUDGET_BYTES
    rows = []
    for cname, make in CONFIGS.items():
        res = {}
        for path, b in (("dense", budget), ("csr", 0)):
            storage.DENSE_BUDGET_BYTES = b
            try:
                part, t_fit = best_of(repeat, lambda make=make: make().fit(X))
                _, t_assign = best_of(repeat, lambda part=part: part.assign(T))
            finally:
                storage.DENSE_BUDGET_BYTES = budget
            res[path] = (part, t_fit, t_assign)
        (pd, fd, ad), (pc, fc, ac) = res["dense"], res["csr"]
        ari = adjusted_rand_score(pd.labels_, pc.labels_)
        rows.append([cname, f"{fd:.3f}", f"{fc:.3f}", f"{fd / fc:.2f}x",
                     f"{ad:.4f}", f"{ac:.4f}", f"{ad / ac:.2f}x", f"{ari:.3f}"])
        if cname == "bkm":
            extra = fd - fc
    dense_mb = 8 * X.shape[0] * X.shape[1] / 2**20
    report.table(
        f"{name}: {X.shape[0]:,} x {X.shape[1]:,} CSR ({X.nnz / np.prod(X.shape):.1%} non-zero, "
        f"dense copy {dense_mb:.0f} MiB), assign of {T.shape[0]:,} test rows, P = {P}",
        ["partitioner", "fit dense path s", "fit CSR path s", "ratio",
         "assign dense path s", "assign CSR path s", "ratio", "ARI dense vs CSR path"],
        rows,
        note="`ARI`: adjusted Rand index between the partitions of the two paths (1: the "
             "same partition); K-means on CSR rounds differently.")
    _, t_svc = _common.timed(lambda: BKMSVC(P, C=1.0, gamma=0.05, random_state=0).fit(X, y))
    report.line(f"\nBKMSVC fit on this CSR data (dense path): {t_svc:.2f} s; the dense "
                f"path's extra BKM partitioning time, {extra:+.3f} s, is "
                f"{100 * extra / t_svc:+.1f}% of it")


def main():
    ap = _common.add_common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    ap.add_argument("--datasets", nargs="+", default=["a9a", "mushrooms", "wide"],
                    choices=["a9a", "mushrooms", "wide"])
    ap.add_argument("--repeat", type=_common.positive_int, default=None,
                    help="runs of every timing, best taken (default 3; with --quick 1)")
    args = ap.parse_args()
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    report = _common.Report()
    report.machine()
    home = _common.data_home(args.data_home)
    with threadpool_limits(1):
        for name in args.datasets:
            kw = {"data_home": home, "return_X_y": True, "dense": False,
                  "download_if_missing": False}
            if name == "wide":
                import scipy.sparse as sp

                n = 2048 if args.quick else 8192
                X = sp.random(n, 8192, density=0.002, format="csr", random_state=0)
                X.data = np.random.RandomState(1).randn(X.nnz)
                y = np.where(np.asarray(X[:, :64].sum(axis=1)).ravel() > 0, 1, -1)
                T = X
                run(name, X, y, T, args.repeat, report)
                continue
            X, y = load_dataset(name, subset="train", **kw)
            # mushrooms has no official test split: route the training set
            T = X if name == "mushrooms" else load_dataset(name, subset="test", **kw)[0]
            if args.quick:
                X, y, T = X[:4000], y[:4000], T[:4000]
            run(name, X, y, T, args.repeat, report)
    report.write(args.out)


if __name__ == "__main__":
    main()
