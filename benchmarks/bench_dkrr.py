"""DKRR (ScaLAPACK) against scikit-learn's KernelRidge and BKRR2, 1, 2 and 4 ranks.

The reference's Table 3.3 baseline: exact distributed KRR. On cadata
(standardized features and targets, n = 8,000 and 16,000 training samples, the
4,640 others for testing), with the same (sigma, lam) for every method:

* scikit-learn's ``KernelRidge`` in one process (its BLAS on every core);
* ``DKRR(backend='mpi')`` under ``mpiexec -n P -bind-to core`` for P = 1, 2, 4
  (4 ranks on this 2-core machine share the cores: oversubscribed);
* ``BKRR2(n_partitions=8, backend='mpi')`` under the same launches.

Reported: fit seconds, peak resident memory of the largest rank (ru_maxrss), the
kernel-matrix bytes of the largest rank, and test MSE. The OpenBLAS of the
NumPy/SciPy wheels crashes in multi-threaded Cholesky factorizations of 16,000
rows with its SkylakeX kernels, so a full run (16,000 rows) re-executes itself
with ``OPENBLAS_CORETYPE=Haswell`` when it is unset on an AVX-512 CPU
(``_common.haswell_for_large_cholesky``; the workers inherit it: KernelRidge and
BKRR2 then use the same OpenBLAS kernels, while DKRR runs MKL's ScaLAPACK with MKL's
sequential kernels, one rank per core, against KernelRidge's OpenBLAS threads on
both cores). ``--quick`` (2,000 and
4,000 rows) leaves it alone.

Every fit time is the best of ``--repeat`` fits (default 3) after one untimed
warm-up fit, on every side alike.

    python benchmarks/bench_dkrr.py [--quick] [--repeat N] [--out FILE]
"""

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

HERE = Path(__file__).resolve()
MPIEXEC = common.MPIEXEC
SIGMA, LAM = 0.5, 1e-6


def _data(n, data_home):
    import numpy as np

    from cakernels.datasets import load_dataset

    X, y = load_dataset("cadata", data_home=data_home, return_X_y=True, download_if_missing=False)
    perm = np.random.RandomState(0).permutation(len(X))
    test = perm[16000:]
    train = perm[:n]
    mu, sd = X[train].mean(0), X[train].std(0)
    ym, ys = y[train].mean(), y[train].std()
    f = lambda idx: ((X[idx] - mu) / sd, (y[idx] - ym) / ys)  # noqa: E731
    return f(train) + f(test)


def _peak_rss():
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB


def worker_mpi(args):
    import time

    import numpy as np
    from mpi4py import MPI

    from cakernels import BKRR2, DKRR

    comm = MPI.COMM_WORLD
    X, y, Xt, yt = _data(args.n, args.data_home)
    out = {}
    # BKRR2 first: the peak RSS of a process only grows, and DKRR's is the larger
    for name, make in (("BKRR2", lambda: BKRR2(8, sigma=SIGMA, lam=LAM, backend="mpi",
                                               random_state=0)),
                       ("DKRR", lambda: DKRR(SIGMA, LAM, backend="mpi"))):
        seconds, est = np.inf, None
        for k in range(1 + args.repeat):  # k = 0: the untimed warm-up
            est = None  # the previous fit's memory goes before the next fit
            est = make()
            comm.Barrier()
            t0 = time.perf_counter()
            est.fit(X if comm.rank == 0 else None, y if comm.rank == 0 else None)
            comm.Barrier()
            if k:
                seconds = min(seconds, time.perf_counter() - t0)
        rss = comm.allreduce(_peak_rss(), op=MPI.MAX)
        mse = float(np.mean((est.predict(Xt) - yt) ** 2))
        matrix = getattr(est, "memory_per_rank_", None)
        out[name] = {"fit": seconds, "rss": rss, "matrix": matrix, "mse": mse,
                     "grid": list(getattr(est, "grid_", ())) or None}
    if comm.rank == 0:
        print(json.dumps(out), flush=True)


def worker_krr(args):
    import time

    import numpy as np
    from sklearn.kernel_ridge import KernelRidge

    X, y, Xt, yt = _data(args.n, args.data_home)
    seconds, est = np.inf, None
    for k in range(1 + args.repeat):  # k = 0: the untimed warm-up
        est = None  # the previous fit's memory goes before the next fit
        est = KernelRidge(kernel="rbf", gamma=1 / (2 * SIGMA ** 2), alpha=LAM * len(X))
        t0 = time.perf_counter()
        est.fit(X, y)
        if k:
            seconds = min(seconds, time.perf_counter() - t0)
    mse = float(np.mean((est.predict(Xt) - yt) ** 2))
    print(json.dumps({"fit": seconds, "rss": _peak_rss(), "matrix": 8 * len(X) ** 2,
                      "mse": mse}), flush=True)


def main():
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    ap.add_argument("--worker", choices=("mpi", "krr"), help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=common.positive_int, default=3,
                    help="timed fits of every side, best taken, after one untimed warm-up "
                         "fit (default 3)")
    args = ap.parse_args()
    sizes = (2000, 4000) if args.quick else (8000, 16000)
    if args.worker != "mpi":  # the ranks inherit the launcher's environment
        common.haswell_for_large_cholesky(args.n if args.worker == "krr" else max(sizes))
    args.data_home = common.data_home(args.data_home)
    if args.worker == "mpi":
        return worker_mpi(args)
    if args.worker == "krr":
        return worker_krr(args)
    report = common.Report()
    report.line("# DKRR (ScaLAPACK) vs KernelRidge vs BKRR2 (bench_dkrr.py)\n")
    report.machine([f"mpiexec    : {MPIEXEC} (-bind-to core)",
                    f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}"])
    rows = []
    mib = 2 ** 20
    for n in sizes:
        base = [__file__, "--data-home", args.data_home, "--n", str(n),
                "--repeat", str(args.repeat)]
        krr = common.run_json([sys.executable] + base + ["--worker", "krr"])
        rows.append([n, "KernelRidge", "1 process", f"{krr['fit']:.2f}",
                     f"{krr['matrix'] / mib:.0f}", f"{krr['rss'] / mib:.0f}",
                     f"{krr['mse']:.4f}", "1.00x"])
        for ranks in (1, 2, 4):
            res = common.run_json([MPIEXEC, "-n", ranks, "-bind-to", "core", sys.executable, "-m",
                        "mpi4py"] + base + ["--worker", "mpi"])
            for name in ("DKRR", "BKRR2"):
                r = res[name]
                grid = f" ({r['grid'][0]}x{r['grid'][1]})" if r.get("grid") else ""
                rows.append([n, name, f"{ranks} rank{'s' if ranks > 1 else ''}{grid}",
                             f"{r['fit']:.2f}",
                             "" if r["matrix"] is None else f"{r['matrix'] / mib:.0f}",
                             f"{r['rss'] / mib:.0f}", f"{r['mse']:.4f}",
                             f"{krr['fit'] / r['fit']:.2f}x"])
    report.table("Fit time, memory and test MSE (cadata, standardized)",
                 ["n", "method", "ranks", "fit s", "matrix MiB/rank", "peak RSS MiB/rank",
                  "test MSE", "speed-up vs KernelRidge"], rows,
                 note=f"sigma={SIGMA}, lam={LAM} for every method (KernelRidge: gamma = "
                      "1/(2 sigma^2), alpha = lam n); BKRR2 with 8 partitions. 4 ranks "
                      "share the 2 cores. 'matrix MiB/rank' is the kernel matrix a rank "
                      "holds (DKRR: its block-cyclic part, about 8 n^2 / P bytes). fit s: "
                      f"best of {args.repeat} fits after one untimed warm-up fit.")
    report.write(args.out)


if __name__ == "__main__":
    main()
