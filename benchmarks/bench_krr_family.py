"""The partitioned KRR family against scikit-learn's KernelRidge on several datasets.

Methods: scikit-learn ``KernelRidge`` (``kernel='rbf', gamma=1/(2 sigma^2),
alpha=lam*n``), DCKRR, KKRR, KKRR2, BKRR, BKRR2, "BKRR2 (regret order)"
(``KBalancePartitioner(assign_order='regret')``, nearest centre), and the
oracle bounds KKRR3 / BKRR3 (``oracle_score`` of the KKRR2 / BKRR2 models).
8 partitions, one BLAS thread for every method (``--blas-threads``).

Datasets (X and y standardised with the training statistics; none has an
official test split, so each is split once, 75% / 25%, seed 0):

============  ==============  ==================================================
name          train / test    notes
============  ==============  ==================================================
cadata        8,000 / 4,000   a random 12,000 of the 20,640 (``bench_krr_cadata``
                              runs the full 16,000 / 4,640 split)
cpusmall      6,144 / 2,048
space_ga      2,330 / 777
abalone       3,132 / 1,045
puma8NH       6,144 / 2,048   PMLB 225_puma8NH
cpu_act       6,144 / 2,048   PMLB 197_cpu_act
============  ==============  ==================================================

Protocol: ``benchmarks/_krr.py`` -- every method, KernelRidge included,
chooses (sigma, lam) on a validation split (20% of the training set, fixed
seed) from the grid sigma = sqrt(d) x {1/4, 1/2, 1, 2, 4, 8} (d features)
x lam in {1e-9, 1e-8, ..., 1e-2} (48 points; a first run with sigma <= 2 sqrt(d)
and lam >= 1e-7 put half of the choices on the grid's edge); it is refitted on
the whole training set there; the fit time is the best of ``--repeat`` interleaved rounds (every method
alike, after a warm-up fit); the test MSE of the partitioned methods is
given for partitioner seed 0 and as mean and range over ``--seeds``.

Usage::

    python benchmarks/bench_krr_family.py                 # ~10 min (2 cores, AMD EPYC)
    python benchmarks/bench_krr_family.py --quick         # 1,500-sample subsets, 2x2 grid
    python benchmarks/bench_krr_family.py --datasets cpusmall abalone --out krr_family.md
"""

import argparse
import contextlib
import time
import warnings

import _common as common  # noqa: I001
import _krr

import numpy as np
from scipy.linalg import LinAlgWarning
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from cakernels.datasets import load_dataset

METHODS = ["KernelRidge", "DCKRR", "KKRR", "KKRR2", "BKRR", "BKRR2", "BKRR2 (regret order)"]
PARTITIONED = METHODS[1:]
ORACLES = list(_krr.ORACLES)
# name: (registry name, samples used (None: all), test fraction)
DATASETS = {
    "cadata": ("cadata", 12_000, 1 / 3),
    "cpusmall": ("cpusmall", None, 0.25),
    "space_ga": ("space_ga", None, 0.25),
    "abalone": ("abalone", None, 0.25),
    "puma8NH": ("pmlb_225_puma8NH", None, 0.25),
    "cpu_act": ("pmlb_197_cpu_act", None, 0.25),
}
SIGMA_FACTORS = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0]
LAMS = [1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2]
QUICK_SIGMA_FACTORS = [0.25, 0.5]
QUICK_LAMS = [1e-5, 1e-3]


def load(name, home, quick):
    reg, n_use, test_size = DATASETS[name]
    X, y = load_dataset(reg, data_home=home, return_X_y=True, download_if_missing=False)
    X = X.toarray() if hasattr(X, "toarray") else np.asarray(X, dtype=np.float64)
    if quick:
        n_use, test_size = min(X.shape[0], 2_000), 0.25
    if n_use is not None and n_use < X.shape[0]:
        idx = np.random.RandomState(0).permutation(X.shape[0])[:n_use]
        X, y = X[idx], y[idx]
    X, Xt, y, yt = train_test_split(X, y, test_size=test_size, random_state=0)
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd[sd == 0] = 1.0
    ym, ys = y.mean(), y.std()
    return (X - mu) / sd, (y - ym) / ys, (Xt - mu) / sd, (yt - ym) / ys


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    ap.add_argument("--partitions", type=common.positive_int, default=8)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                    help="partitioner seeds for the test MSE (0 is always run, and timed)")
    ap.add_argument("--repeat", type=common.positive_int, default=3,
                    help="timed rounds; every method is fitted once per round (best kept)")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS threads for every method (0: no limit); default 1")
    args = ap.parse_args(argv)
    home = common.data_home(args.data_home)
    P = args.partitions
    seeds = [0] + [s for s in args.seeds if s != 0]
    factors, lams = (QUICK_SIGMA_FACTORS, QUICK_LAMS) if args.quick else (SIGMA_FACTORS, LAMS)

    rep = common.Report()
    rep.line("## Partitioned KRR family vs KernelRidge on several datasets"
             + (" (QUICK: 1,500 / 500-sample subsets, 2x2 grid)" if args.quick else "") + "\n")
    rep.machine([
        f"setup      : P={P}; (sigma, lam) per method on validation (20% of train held "
        f"out), sigma = sqrt(d) x {factors}, lam in {lams}; best of {args.repeat} interleaved "
        f"timed rounds after a warm-up fit; BLAS threads "
        f"{'no limit' if args.blas_threads <= 0 else args.blas_threads} (every method); "
        f"partitioner seeds {seeds}; the threadpool lines are the process defaults, read "
        "before the limit is applied"])
    limit = (threadpool_limits(args.blas_threads) if args.blas_threads > 0
             else contextlib.nullcontext())

    def log(msg):
        print(msg, flush=True)

    summary = {}
    t_start = time.perf_counter()
    with limit, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LinAlgWarning)
        for name in args.datasets:
            Xtr, ytr, Xte, yte = load(name, home, args.quick)
            d = Xtr.shape[1]
            sigmas = [float(f"{np.sqrt(d) * f:.4g}") for f in factors]
            log(f"\n{name}: train {Xtr.shape}, test {Xte.shape}, sigmas {sigmas}")
            Xf, yf, Xv, yv = _krr.validation_split(Xtr, ytr, seed=0)
            n_warn0 = _krr.count_linalg_warnings(caught)
            scores = _krr.grid_scores(Xf, yf, Xv, yv, P, sigmas, lams, methods=METHODS,
                                      log=lambda m: None)
            chosen = {m: _krr.choose(scores, m) for m in METHODS}
            for m in METHODS:
                log(f"  {m}: sigma={chosen[m][0]:g} lam={chosen[m][1]:g} "
                    f"val MSE {chosen[m][2]:.4f}")
            res, oracles = _krr.final_fits({m: chosen[m][:2] for m in METHODS}, Xtr, ytr,
                                           Xte, yte, P, repeat=args.repeat, seeds=seeds,
                                           load=common.load1, log=lambda m: None)
            n_warn = _krr.count_linalg_warnings(caught) - n_warn0
            kr_t = min(res["KernelRidge"]["times"])
            kr_mse = res["KernelRidge"]["test"]
            rows = []
            for m in METHODS:
                s, l, v = chosen[m]
                r = res[m]
                t = min(r["times"])
                ts = r["test_seeds"]
                sizes = ("-" if m == "KernelRidge" else
                         f"{r['model'].partition_sizes_.min()}-"
                         f"{r['model'].partition_sizes_.max()}")
                rows.append([m, s, f"{l:g}", f"{v:.4f}", f"{r['test']:.4f}",
                             "-" if m == "KernelRidge" else
                             f"{np.mean(ts):.4f} ({min(ts):.4f}-{max(ts):.4f})",
                             f"{np.mean(ts or [r['test']]) / kr_mse:.3f}", f"{t:.3f}",
                             f"{kr_t / t:.1f}x",
                             sizes, f"{max(r['loads']):.2f}",
                             _krr.edge_note(s, l, sigmas, lams)])
            for oname, o in oracles.items():
                s, l, _ = chosen[o["base"]]
                ts = o["test_seeds"]
                rows.append([oname, s, f"{l:g}", "-", f"{o['test']:.4f}",
                             f"{np.mean(ts):.4f} ({min(ts):.4f}-{max(ts):.4f})",
                             f"{np.mean(ts) / kr_mse:.3f}", "", "", "", "",
                             f"bound, on the {o['base']} model"])
            rep.table(f"{name}: train {Xtr.shape[0]:,} / test {Xte.shape[0]:,}, {d} features, "
                      f"P={P}",
                      ["method", "sigma", "lam", "val MSE", "test MSE (seed 0)",
                       f"test MSE, seeds {seeds}: mean (range)", "vs KernelRidge", "fit s",
                       "fit speedup", "part. sizes", "max load", "note"], rows,
                      note=f"sigma grid {sigmas}, lam grid {lams}. 'vs KernelRidge': mean "
                           "test MSE / KernelRidge's test MSE. fit s: best of "
                           f"{args.repeat} rounds, seed 0. LinAlgWarnings: {n_warn}.")
            summary[name] = dict(
                mse={m: float(np.mean(res[m]["test_seeds"] or [res[m]["test"]]))
                     for m in METHODS},
                orc={k: float(np.mean(o["test_seeds"])) for k, o in oracles.items()},
                fit={m: kr_t / min(res[m]["times"]) for m in METHODS},
                n=Xtr.shape[0])

    # ------------------------------------------------------------ summaries
    names = list(summary)
    rows = []
    for name in names:
        s = summary[name]
        kr = s["mse"]["KernelRidge"]
        rows.append([name, f"{s['n']:,}", f"{kr:.4f}"]
                    + [f"{s['mse'][m] / kr:.3f}" for m in PARTITIONED]
                    + [f"{s['orc'][k] / kr:.3f}" for k in ORACLES])
    rep.table("Summary 1: test MSE relative to KernelRidge (mean over partitioner seeds; "
              "< 1 is better than KernelRidge)",
              ["dataset", "train", "KernelRidge MSE"] + PARTITIONED + ORACLES, rows)
    rows = [[name] + [f"{summary[name]['fit'][m]:.1f}x" for m in PARTITIONED] for name in names]
    rep.table("Summary 2: fit speedup over KernelRidge (seed 0, within the run)",
              ["dataset"] + PARTITIONED, rows)
    rank_rows = []
    for m in PARTITIONED:
        ranks = []
        for name in names:
            vals = sorted(summary[name]["mse"][k] for k in PARTITIONED)
            ranks.append(1 + vals.index(summary[name]["mse"][m]))
        rel = [summary[n]["mse"][m] / summary[n]["mse"]["KernelRidge"] for n in names]
        beats_dc = sum(summary[n]["mse"][m] < summary[n]["mse"]["DCKRR"] for n in names)
        rank_rows.append([m, f"{np.mean(ranks):.2f}",
                          f"{sum(r == 1 for r in ranks)} of {len(names)}",
                          "-" if m == "DCKRR" else f"{beats_dc} of {len(names)}",
                          f"{np.exp(np.mean(np.log(rel))):.3f}", f"{max(rel):.3f}",
                          f"{np.exp(np.mean(np.log([summary[n]['fit'][m] for n in names]))):.1f}x"])
    rep.table("Summary 3: the partitioned methods across the datasets",
              ["method", "mean rank (1 = lowest MSE)", "lowest MSE on", "better than DCKRR on",
               "MSE / KernelRidge (geometric mean)", "worst MSE / KernelRidge",
               "fit speedup (geometric mean)"], rank_rows,
              note="Ranks by mean test MSE over the seeds among the six partitioned methods.")
    rep.line(f"\nwhole run: {time.perf_counter() - t_start:.0f} s; "
             f"load avg at end: {common.load_avg()}")
    rep.write(args.out)


if __name__ == "__main__":
    main()
