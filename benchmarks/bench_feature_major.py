"""Asy-GCD kernel slices from feature-major copies against row-by-row dot products.

Asy-GCD (``cakernels._solvers.asygcd.asygcd_fit``) computes a kernel slice
``Q[S_t, i]`` either from a feature-major copy of the thread's rows (one
contiguous axpy per nonzero feature of ``x_i``; the default when the copy
fits in a quarter of ``cache_size`` and in the kernel matrix's size) or from the rows of ``X`` (one dot
product per row; dense rows four at a time, CSR rows by a gather).  The
private switch ``feature_major=False`` forces the second path with
everything else equal: the same cache budget and the same number of cached
slices (the copy's bytes still come out of the budget), hence, on one
thread, the same slices computed and the same solution bit for bit (checked
here and in ``tests/test_asygcd.py``).

For every dataset and thread count both paths run a full fit (tol=1e-3,
defaults otherwise) in interleaved rounds -- copy, rows, rows, copy, ... --
after one warm-up fit of each on a small subsample; ``return_stats=True``
counts the slices computed and times their computation inside the solver
(wall time summed over the threads).  Printed: fit seconds (best of the
rounds), slices, microseconds per slice (lowest of the rounds), and the two
ratios rows / copy, per slice and per fit.  The first full-size fit of a
process is up to 2x slower whichever path it takes (measured: 6.8-8.2 s
against 3.1-3.3 s for the same a9a fit later), hence several rounds.

Datasets (the settings of ``bench_asygcd.py``): a9a (CSR, 123 binary
features, C=1, gamma=0.05: the copy is kept in float), ijcnn1 (dense, 22
features, C=32, gamma=2) and mushrooms (CSR, 112 binary features, C=1,
gamma=0.05).

    python benchmarks/bench_feature_major.py [--quick] [--datasets a9a ijcnn1]
        [--threads 1 2] [--cache 2000] [--repeat 2] [--out FILE]

Full run: about 2 minutes on 2 cores (AMD EPYC; ``--repeat 3``: 3 minutes).
"""

import argparse
import time

import _common as common  # noqa: I001  (puts the checkout on sys.path)

import numpy as np
import scipy.sparse as sp

from cakernels._solvers.asygcd import asygcd_fit
from cakernels.datasets import load_dataset

PARAMS = {"a9a": dict(C=1.0, gamma=0.05), "ijcnn1": dict(C=32.0, gamma=2.0),
          "mushrooms": dict(C=1.0, gamma=0.05)}
SPARSE = {"a9a": True, "ijcnn1": False, "mushrooms": True}


def load(name, home, quick):
    sub = dict(n_samples=8000, random_state=0) if quick and name != "mushrooms" else {}
    X, y = load_dataset(name, data_home=home, return_X_y=True, download_if_missing=False,
                        **sub)
    X = sp.csr_matrix(X) if SPARSE[name] else (X.toarray() if sp.issparse(X)
                                                else np.asarray(X))
    return X, np.where(y > 0, 1.0, -1.0)


def fit(X, y, params, n_threads, cache, fm):
    t0 = time.perf_counter()
    r = asygcd_fit(X, y, params["C"], gamma=params["gamma"], n_threads=n_threads,
                   cache_size=cache, tol=1e-3, random_state=0, feature_major=fm,
                   return_stats=True)
    r["seconds"] = time.perf_counter() - t0
    return r


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--datasets", nargs="+", default=["a9a", "ijcnn1", "mushrooms"],
                    choices=sorted(PARAMS))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--cache", type=float, nargs="+", default=[2000.0],
                    help="cache budgets (MB), the same for both paths (default 2000)")
    ap.add_argument("--repeat", type=common.positive_int, default=2,
                    help="rounds; each runs both paths once (order alternates)")
    args = ap.parse_args(argv)
    home = common.data_home(args.data_home)

    rep = common.Report()
    rep.line("## Asy-GCD kernel slices: feature-major copy vs row-by-row dot products"
             + (" (QUICK: 8,000-sample subsets)" if args.quick else "") + "\n")
    rep.machine([f"params     : {PARAMS}, tol=1e-3, cache {args.cache} MB (both paths), "
                 f"threads {args.threads}, best of {args.repeat} interleaved rounds"])
    rows, ratios = [], []
    for name in args.datasets:
        X, y = load(name, home, args.quick)
        p = PARAMS[name]
        kind = "CSR" if sp.issparse(X) else "dense"
        print(f"\n{name}: {X.shape} {kind}", flush=True)
        # warm-up: OpenMP team, page-fault paths, lazy imports
        for fm in (True, False):
            fit(X[:500], y[:500], p, max(args.threads), 50.0, fm)
        for cache in args.cache:
            for nt in args.threads:
                res = {True: [], False: []}
                for k in range(args.repeat):
                    for fm in ((True, False) if k % 2 == 0 else (False, True)):
                        r = fit(X, y, p, nt, cache, fm)
                        r["load"] = common.load1()
                        res[fm].append(r)
                        s = r["stats"]
                        print(f"  {r['n_threads']} thr cache {cache:g} "
                              f"{'copy' if fm else 'rows'}: "
                              f"{r['seconds']:.2f} s, {s['n_slices']:,} slices, "
                              f"{1e6 * s['slice_seconds'] / max(s['n_slices'], 1):.1f} us/slice, "
                              f"{r['n_updates']:,} updates (load {common.load_avg()})",
                              flush=True)
                # the threads that ran (Asy-GCD's size rule gives small problems one)
                team = {int(r["n_threads"]) for rs in res.values() for r in rs}
                ran = "/".join(str(t) for t in sorted(team))
                ran_label = ran if team == {nt} else f"{ran} ({nt} asked)"
                same = ""
                if team == {1}:  # with two threads timing decides the order of steps
                    a, b = res[True][0], res[False][0]
                    ident = (np.array_equal(a["alpha"], b["alpha"])
                             and np.array_equal(a["grad"], b["grad"])
                             and a["stats"]["n_slices"] == b["stats"]["n_slices"])
                    same = "yes" if ident else "NO"
                best = {fm: min(rs, key=lambda r: r["seconds"]) for fm, rs in res.items()}
                us = {fm: 1e6 * min(r["stats"]["slice_seconds"] / max(r["stats"]["n_slices"], 1)
                                    for r in rs) for fm, rs in res.items()}
                per_slice = us[False] / us[True]
                per_fit = best[False]["seconds"] / best[True]["seconds"]
                asked = "" if team == {nt} else f" ({nt} asked)"
                ratios.append((name, f"{ran} thr{asked}", cache, per_slice, per_fit))
                fm_used = best[True]["stats"]["fm_threads"]
                for fm in (True, False):
                    b = best[fm]
                    s = b["stats"]
                    share = s["slice_seconds"] / (b["n_threads"] * b["seconds"])
                    rows.append([
                        name, kind, ran_label, f"{cache:g}", s["capacity"],
                        (f"copy ({fm_used} of {b['n_threads']} thr)" if fm else "rows"),
                        f"{b['seconds']:.2f}", f"{s['n_slices']:,}", f"{us[fm]:.1f}",
                        f"{100 * share:.0f}%", f"{b['n_updates']:,}",
                        f"{per_slice:.2f}x" if not fm else "",
                        f"{per_fit:.2f}x" if not fm else "", same if not fm else "",
                        f"{b['load']:.2f}"])
    rep.table("Full fits, both paths side by side",
              ["dataset", "X", "threads", "cache MB", "slices cached / thread", "slices from",
               "fit s", "slices computed", "us / slice", "slice share of fit",
               "updates", "rows / copy per slice", "rows / copy per fit", "same bits",
               "load"], rows,
              note="threads: the threads that ran (Asy-GCD's size rule, "
                   "cakernels._solvers.asygcd.team_size, runs small problems on one; the "
                   "count asked is then given too); "
                   "fit s: best of the rounds; us / slice: slice time (summed over the "
                   "threads) / slices computed, the lowest of the rounds; slice share: the "
                   "fastest round's slice time / (threads x fit s). A slice is the part of "
                   "a kernel column over one thread's rows (n / threads values). 'same bits': alpha, gradient and slice count "
                   "identical (one thread only; with two, timing decides the order of "
                   "steps).")
    rep.line("\nratios (rows / copy): " + "; ".join(
        f"{n} {t} {c:g} MB: {a:.2f}x per slice, {b:.2f}x per fit"
        for n, t, c, a, b in ratios))
    rep.line(f"\nload avg at end: {common.load_avg()}")
    rep.write(args.out)


if __name__ == "__main__":
    main()
