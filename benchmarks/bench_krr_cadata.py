"""Partitioned kernel ridge regression against scikit-learn's KernelRidge on cadata.

cadata (20,640 x 8): one fixed random split (seed 0), 16,000 training samples
and the remaining 4,640 for test; X and y standardised with the training
statistics; 8 partitions (Figures 3.8-3.9 and 3.6 of the reference).

Methods: scikit-learn ``KernelRidge`` (``kernel='rbf', gamma=1/(2 sigma^2),
alpha=lam*n``: the problem of one partition holding all n samples), DCKRR,
KKRR, KKRR2, BKRR, BKRR2, "BKRR2 (regret order)" =
``PartitionedKernelRidge(partitioner=KBalancePartitioner(8,
assign_order='regret'), combine='nearest')``, and the oracle bounds KKRR3 /
BKRR3 (``oracle_score`` of the KKRR2 / BKRR2 models).

Protocol (``benchmarks/_krr.py``, the same for every method):

* (sigma, lam) is chosen on validation data: 20% of the 16,000 training
  samples (fixed seed) are held out, every method is fitted on the other
  12,800 at every point of the grid sigma in {0.5, 1, 2, 4} x lam in
  {1e-7, ..., 1e-3} -- KernelRidge too (20 fits of 15-30 s) -- and the point of
  lowest validation MSE is chosen; the test set is never used for choosing;
* each method is refitted on all 16,000 samples at its point; the test MSE
  is that model's; the fit time is the best of ``--repeat`` (default 3)
  interleaved rounds, each fitting every method once, after an untimed
  warm-up fit of each -- KernelRidge timed exactly like the others;
* ``--blas-threads`` (default 1) limits BLAS for both sides: on a shared
  2-core machine two-thread OpenBLAS Cholesky factorizations are up to 10x
  slower whenever another process holds a core (threads spin-wait);
* the partitioned methods' test MSE is also given over ``--seeds``
  partitioner seeds (default 0 1 2) at the same chosen parameters.

The numpy/scipy wheels' OpenBLAS segfaults in multi-threaded Cholesky at
n >= 16,000 with its SkylakeX kernels; the Haswell kernels are stable. A full
run (KernelRidge on 16,000 rows) with ``OPENBLAS_CORETYPE`` unset on an AVX-512
CPU therefore re-executes itself with ``OPENBLAS_CORETYPE=Haswell``
(``_common.haswell_for_large_cholesky``): KernelRidge and cakernels then use the
same BLAS, so the comparison stays fair. ``--quick`` leaves it alone.

Usage::

    python benchmarks/bench_krr_cadata.py               # ~10 min (2-core AMD EPYC)
    python benchmarks/bench_krr_cadata.py --krr-grid 1:1e-5,2:1e-6   # KernelRidge on 2 points
    python benchmarks/bench_krr_cadata.py --quick       # 4,000 train / 1,000 test, 2x2 grid
    python benchmarks/bench_krr_cadata.py --out krr.md
"""

import argparse
import contextlib
import warnings

import _common as common  # noqa: I001
import _krr

import numpy as np
from scipy.linalg import LinAlgWarning
from threadpoolctl import threadpool_limits

from cakernels.datasets import load_dataset

SIGMAS = [0.5, 1.0, 2.0, 4.0]
LAMS = [1e-7, 1e-6, 1e-5, 1e-4, 1e-3]
QUICK_SIGMAS = [1.0, 2.0]
QUICK_LAMS = [1e-5, 1e-4]
METHODS = ["KernelRidge", "DCKRR", "KKRR", "KKRR2", "BKRR", "BKRR2", "BKRR2 (regret order)"]


def load_split(home, quick, seed):
    X, y = load_dataset("cadata", data_home=home, return_X_y=True, download_if_missing=False)
    rng = np.random.RandomState(seed)
    perm = rng.permutation(X.shape[0])
    n_tr = 4_000 if quick else 16_000
    tr = perm[:n_tr]
    te = perm[n_tr:n_tr + 1_000] if quick else perm[n_tr:]
    mu, sd = X[tr].mean(axis=0), X[tr].std(axis=0)
    ym, ys = y[tr].mean(), y[tr].std()
    return ((X[tr] - mu) / sd, (y[tr] - ym) / ys, (X[te] - mu) / sd, (y[te] - ym) / ys)


def parse_grid(text):
    """argparse ``type`` of ``--krr-grid``: 'sigma:lam,...' -> [(sigma, lam), ...]."""
    pts = []
    for item in text.split(","):
        try:
            s, lam = item.split(":")
            pts.append((float(s), float(lam)))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected 'sigma:lam,...' (e.g. 1:1e-5,2:1e-6), got {text!r}")
    return pts


def span(vals):
    return (f"{np.mean(vals):.4f} ({min(vals):.4f}-{max(vals):.4f})" if len(vals) > 1
            else f"{vals[0]:.4f}")


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--partitions", type=common.positive_int, default=8)
    ap.add_argument("--seed", type=int, default=0, help="test split and validation split seed")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                    help="partitioner seeds for the test MSE (the first is timed)")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS threads for both sides (0: no limit); default 1")
    ap.add_argument("--krr-grid", type=parse_grid, default=None,
                    help="restrict KernelRidge's validation grid to 'sigma:lam,...' "
                         "(default: the full grid, like every other method)")
    ap.add_argument("--repeat", type=common.positive_int, default=3,
                    help="timed rounds; every method is fitted once per round (best kept)")
    args = ap.parse_args(argv)
    common.haswell_for_large_cholesky(4_000 if args.quick else 16_000)  # KernelRidge's n

    home = common.data_home(args.data_home)
    Xtr, ytr, Xte, yte = load_split(home, args.quick, args.seed)
    Xf, yf, Xv, yv = _krr.validation_split(Xtr, ytr, seed=args.seed)
    n, P = Xtr.shape[0], args.partitions
    sigmas, lams = (QUICK_SIGMAS, QUICK_LAMS) if args.quick else (SIGMAS, LAMS)
    krr_grid = args.krr_grid
    seeds = [0] + [s for s in args.seeds if s != 0]

    rep = common.Report()
    rep.line("## cadata: partitioned KRR vs KernelRidge "
             f"({'QUICK subset' if args.quick else 'full split'})\n")
    limit = (threadpool_limits(args.blas_threads) if args.blas_threads > 0
             else contextlib.nullcontext())
    rep.machine([
        f"data       : cadata, {n} train / {Xte.shape[0]} test (split seed {args.seed}), "
        f"X and y standardised with training statistics, {home}",
        f"selection  : fit on {Xf.shape[0]}, validate on {Xv.shape[0]} (held out of the "
        f"training set); grid sigma {sigmas} x lam {lams}; KernelRidge grid "
        f"{'the same' if krr_grid is None else krr_grid}",
        f"timing     : P={P}, best of {args.repeat} interleaved rounds after a warm-up fit, "
        f"every method alike; BLAS threads "
        f"{'no limit' if args.blas_threads <= 0 else args.blas_threads} (both sides); "
        f"partitioner seeds {seeds} for the test MSE",
    ])

    with limit, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LinAlgWarning)
        print("validation grid ...", flush=True)
        scores = _krr.grid_scores(
            Xf, yf, Xv, yv, P, sigmas, lams, methods=METHODS, krr_grid=krr_grid,
            log=lambda m: print(f"{m} (load {common.load_avg()})", flush=True))
        chosen = {m: _krr.choose(scores, m) for m in METHODS}
        print("final fits ...", flush=True)
        res, oracles = _krr.final_fits(
            {m: chosen[m][:2] for m in METHODS}, Xtr, ytr, Xte, yte, P,
            repeat=args.repeat, seeds=seeds, load=common.load1,
            log=lambda m: print(m, flush=True))
        n_warn = _krr.count_linalg_warnings(caught)

    # ---------------------------------------------------------------- Table 1
    kr_t = min(res["KernelRidge"]["times"])
    rows = []
    for m in METHODS:
        s, l, v = chosen[m]
        r = res[m]
        t = min(r["times"])
        est = r["model"]
        sizes = ("-" if m == "KernelRidge" else
                 f"{est.partition_sizes_.min()}-{est.partition_sizes_.max()}")
        rows.append([m, s, f"{l:g}", f"{v:.4f}", f"{r['test']:.4f}",
                     "-" if m == "KernelRidge" else span(r["test_seeds"]),
                     f"{t:.2f}", f"{min(r['times']):.2f}-{max(r['times']):.2f}",
                     f"{kr_t / t:.1f}x", sizes, f"{max(r['loads']):.2f}",
                     _krr.edge_note(s, l, sigmas, lams)])
    for name, o in oracles.items():
        base = o["base"]
        s, l, _ = chosen[base]
        rows.append([name, s, f"{l:g}", "-", f"{o['test']:.4f}", span(o["test_seeds"]),
                     "", "", "", "", "", f"bound, on the {base} model"])
    rep.table("Table 1: parameters chosen on validation data; test MSE and fit time there",
              ["method", "sigma", "lam", "val MSE", "test MSE", "test MSE seeds mean (range)",
               "fit s", "fit s range", "fit speedup", "part. sizes", "max load", "note"],
              rows,
              note=f"val MSE: fitted on {Xf.shape[0]}, validated on {Xv.shape[0]} held-out "
                   "training samples (standardised y). test MSE and fit s: refitted on all "
                   f"{n} training samples at the chosen point, partitioner seed 0; fit s is "
                   f"the best of {args.repeat} interleaved rounds for every method "
                   "(KernelRidge included), partitioning included. 'test MSE seeds': over "
                   f"partitioner seeds {seeds}. Oracle rows inspect the true test targets: "
                   f"bounds, not predictors. LinAlgWarnings (least-squares fallback): {n_warn}.")

    # ---------------------------------------------------------------- grid
    grows = []
    for m in METHODS:
        for s in sigmas:
            cells = [f"{scores[m, s, l]:.4f}" if (m, s, l) in scores else "-" for l in lams]
            if any(c != "-" for c in cells):
                grows.append([m, s] + cells)
    rep.table("Validation MSE per (sigma, lam)", ["method", "sigma"] +
              [f"lam={l:g}" for l in lams], grows)

    # ---------------------------------------------------------------- balance
    lb_rows = []
    for m in ("KKRR2", "BKRR2"):
        est = res[m]["model"]
        sz = est.partition_sizes_
        so = np.asarray(est.fit_stats_["solve_seconds"])
        lb_rows.append([f"{m} ({'K-means' if m == 'KKRR2' else 'K-balance'})",
                        int(sz.min()), int(sz.max()), f"{sz.max() / sz.min():.1f}x",
                        f"{so.min():.3f}", f"{so.max():.3f}", f"{so.max() / so.min():.1f}x"])
    rep.table("Load balance (Figure 3.6): partition sizes and per-partition solve time",
              ["partitioner", "min size", "max size", "max/min", "fastest s",
               "slowest s", "slowest/fastest"], lb_rows,
              note="From the last timed fit of each (seed 0, its chosen parameters).")

    # ---------------------------------------------------------------- goals, ranking
    g_rows = []
    for m in ("BKRR2", "KKRR2"):
        sp = kr_t / min(res[m]["times"])
        g_rows.append([f"{m} fit speedup vs KernelRidge", ">= 20x", f"{sp:.1f}x",
                       common.pass_miss(sp >= 20)])
    rep.table("Goals (informational)", ["goal", "target", "measured", "status"], g_rows)

    t0 = {m: res[m]["test"] for m in METHODS}
    tm = {m: float(np.mean(res[m]["test_seeds"])) for m in METHODS if m != "KernelRidge"}
    o0 = {k: o["test"] for k, o in oracles.items()}

    def both(a, b):
        """a < b on seed 0 and on the seed mean."""
        ok0 = t0[a] < t0[b]
        okm = tm[a] < tm[b] if a in tm and b in tm else ok0
        return "yes" if ok0 and okm else ("NO" if not ok0 and not okm else "mixed")

    claims = [
        ("KKRR2 better than DC-KRR", both("KKRR2", "DCKRR")),
        ("BKRR2 better than DC-KRR", both("BKRR2", "DCKRR")),
        ("KKRR2 better than BKRR2", both("KKRR2", "BKRR2")),
        ("DC-KRR better than KKRR (averaging far models hurts)", both("DCKRR", "KKRR")),
        ("BKRR2 better than BKRR (nearest centre beats averaging)", both("BKRR2", "BKRR")),
        ("BKRR2 (regret order) better than BKRR2 (data order)",
         both("BKRR2 (regret order)", "BKRR2")),
        ("KernelRidge better than every partitioned method",
         "yes" if all(t0["KernelRidge"] < t0[m] for m in METHODS[1:]) else "NO"),
        ("oracle bounds below KernelRidge",
         "yes" if max(o0.values()) < t0["KernelRidge"] else "NO"),
    ]
    rep.table("Thesis ranking on this data (test MSE at the chosen points)",
              ["claim", "holds? (seed 0 and seed mean)"], claims,
              note="ranking, seed 0: " + " < ".join(
                  f"{m} {v:.4f}" for m, v in sorted({**t0, **o0}.items(), key=lambda kv: kv[1])))
    if args.quick:
        rep.line("\nQUICK run: 4,000 training samples; goals and ranking refer to the full split.")
    rep.line(f"\nload avg at end: {common.load_avg()}")
    rep.write(args.out)


if __name__ == "__main__":
    main()
