"""Wide sparse data: a larger cache must not slow the native solvers down.

The SMO and Asy-GCD solvers compute kernel columns from a feature-major copy
of X (n x n_features, zeros included) when it fits in a quarter of
``cache_size`` and is no larger than the kernel matrix (8 n^2 bytes; before
2026-11-27 the cache alone decided, so a large or unlimited cache built
copies of wide sparse data far larger than the matrix).  Shrinking swaps the copy's rows with the variables; until
2026-11-27 every swap exchanged all n_features entries of two rows (strided
by n), so on wide sparse data a cache large enough for the copy made fits
7-10x slower than a small one.  A CSR swap now touches the two rows' nonzero
features only.

Here the same a9a rows (CSR, 123 binary features, about 14 nonzeros a row)
are solved as given and padded with empty columns to n_features = 2,000 and
12,000: the same problem, the same solution bit for bit (checked), the same
kernel columns; only the copy's width changes.  Both sides run in this
process, interleaved, with the same cache budget (the copy is built when it
takes at most a quarter of it and no more than the kernel matrix: in float,
up to 2 n columns; the table says whether every fit used it), best of
``--repeat`` fits; printed: seconds and the ratio padded / as given (goal:
about 1x; an audit measured 7-10x at 20,000 columns of 3,000 rows).

    python benchmarks/bench_wide_sparse.py [--quick] [--n 10000] [--repeat 2]
        [--widths 2000 12000] [--cache 2000] [--out FILE]

Full run: about 2 minutes on 2 cores.
"""

import argparse
import time

import _common as common  # noqa: I001  (puts the checkout on sys.path)

import numpy as np
import scipy.sparse as sp

from cakernels._solvers.asygcd import asygcd_fit
from cakernels._solvers.smo import smo_fit
from cakernels.datasets import load_dataset

C, GAMMA = 1.0, 0.05  # a9a's settings in bench_asygcd.py and bench_feature_major.py


def padded(X, width):
    """X with empty columns appended up to ``width`` features (same rows)."""
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], width))


def solve(kind, X, y, cache, threads):
    t0 = time.perf_counter()
    if kind == "smo":
        r = smo_fit(X, y, C, kernel="rbf", gamma=GAMMA, cache_size=cache, tol=1e-3)
    else:
        r = asygcd_fit(X, y, C, gamma=GAMMA, n_threads=threads, cache_size=cache,
                       tol=1e-3, random_state=0, return_stats=True)
    return time.perf_counter() - t0, r


def copy_held(kind, r):
    """Whether the solve used the feature-major copy (every thread's, for Asy-GCD)."""
    if kind == "smo":
        return r["stats"]["feature_major"] > 0
    return r["stats"]["fm_threads"] == r["n_threads"]


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--n", type=int, default=None,
                    help="a9a rows (default 10,000; with --quick 3,000)")
    ap.add_argument("--widths", type=int, nargs="+", default=None,
                    help="padded widths (default n/5 and 6n/5: 2,000 and 12,000)")
    ap.add_argument("--cache", type=float, default=2000.0, help="cache_size in MB")
    ap.add_argument("--repeat", type=common.positive_int, default=2)
    args = ap.parse_args(argv)
    n = args.n if args.n is not None else (3000 if args.quick else 10_000)
    X, y = load_dataset("a9a", data_home=common.data_home(args.data_home), return_X_y=True,
                        download_if_missing=False, n_samples=n, random_state=0)
    X = sp.csr_matrix(X)
    y = np.where(y > 0, 1.0, -1.0)
    args.widths = args.widths or [X.shape[0] // 5, 6 * X.shape[0] // 5]

    rep = common.Report()
    rep.line("## Wide sparse data: the feature-major copy's swaps"
             + (f" (QUICK: {X.shape[0]:,} rows)" if args.quick else "") + "\n")
    rep.machine([f"data       : a9a, {X.shape[0]:,} rows, {X.nnz / X.shape[0]:.1f} "
                 f"nonzeros a row, padded to {args.widths} columns",
                 f"params     : C={C}, gamma={GAMMA}, tol=1e-3, cache {args.cache:g} MB, "
                 f"best of {args.repeat} interleaved fits"])
    solve("smo", X[:300], y[:300], 50.0, 1)  # warm-up: OpenMP team, lazy imports
    rows = []
    for kind, threads in (("smo", 1), ("asygcd", 1), ("asygcd", 2)):
        for width in args.widths:
            Xw = padded(X, width)
            best = {"given": np.inf, "padded": np.inf}
            same, held, team = True, set(), set()
            for k in range(args.repeat):
                order = (("given", X), ("padded", Xw))
                res = {}
                for side, data in (order if k % 2 == 0 else order[::-1]):
                    t, r = solve(kind, data, y, args.cache, threads)
                    best[side] = min(best[side], t)
                    res[side] = r
                    held.add(copy_held(kind, r))
                    team.add(int(r.get("n_threads", r.get("threads_used", 1))))
                if team == {1}:  # with two threads timing decides the order of steps
                    same &= bool(np.array_equal(res["given"]["alpha"], res["padded"]["alpha"]))
            # the threads that ran (Asy-GCD's size rule gives small problems one)
            ran = "/".join(str(t) for t in sorted(team))
            asked = "" if team == {threads} else f", {threads} asked"
            label = f"{kind} ({ran} thr{asked})" if kind == "asygcd" else "smo"
            rows.append([label, f"{X.shape[1]} -> {width:,}", f"{best['given']:.2f}",
                         f"{best['padded']:.2f}", f"{best['padded'] / best['given']:.2f}x",
                         "yes" if held == {True} else "NO (not comparable)",
                         ("yes" if same else "NO") if team == {1} else "n/a",
                         f"{common.load1():.2f}"])
            print("  " + " | ".join(rows[-1]), flush=True)
    rep.table("Fit seconds, as given and padded with empty columns",
              ["solver", "features", "as given s", "padded s", "padded / given",
               "copy on both sides", "same alpha", "load"], rows,
              note="'copy on both sides': every fit of the row used the feature-major copy "
                   "(it must fit in a quarter of the cache; otherwise the row compares "
                   "two code paths). 'same alpha': bit for bit (one thread).")
    rep.line(f"\nload avg at end: {common.load_avg()}")
    rep.write(args.out)


if __name__ == "__main__":
    main()
