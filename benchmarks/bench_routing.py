"""Soft routing at prediction: does a weighted vote of the nearest centres' models pay?

``routing='vote'`` (the SVMs) and ``combine='vote'`` (``PartitionedKernelRidge``)
give every test sample the mean of the models of its ``n_voters`` nearest centres,
weighted by the inverse squared distance to each centre; ``'nearest'`` (Algorithm 5)
uses the nearest centre's model only. Routing acts at prediction: every
configuration is fitted once and predicted with every routing, so the rows of one
configuration share their models. All on ONE core (``threadpool_limits(1)``).

* ijcnn1 (49,990 / 91,701, C=32, gamma=2), 16 partitions: random (CA-SVM), FCFS,
  BKM and K-balance partitions, halo 0 and 0.5, mean over ``--seeds`` (0 1 2):
  test accuracy and predict seconds for nearest and vote with 2, 3 and 5 voters;
* usps (multiclass, C=10, gamma=2^-7) and a9a (sparse, C=1, gamma=0.05), 8 BKM
  and FCFS partitions, seed 0;
* cadata (16,000 training samples, standardised) and cpusmall, 8 K-balance
  partitions (BKRR2's), halo 0 and 0.5: (sigma, lam) chosen on a 20% validation
  split for every routing alike (``benchmarks/_krr.py``), test MSE.

"Pays" in the summary: the vote's accuracy at least 0.1 point above nearest's (its
MSE at least 1% below, for KRR) at the same fit.

Usage::

    python benchmarks/bench_routing.py             # ~15 min (2-core AMD EPYC)
    python benchmarks/bench_routing.py --quick     # subsets, 1 seed, ~1 min
"""

import argparse
import time

import _common as common  # noqa: I001
import _krr

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from cakernels import PartitionedKernelRidge, PartitionedSVC
from cakernels.datasets import load_dataset
from cakernels.partition import (BKMPartitioner, FCFSPartitioner, KBalancePartitioner,
                                 RandomPartitioner)

PARTITIONERS = {"random": RandomPartitioner, "FCFS": FCFSPartitioner, "BKM": BKMPartitioner,
                "K-balance": KBalancePartitioner}
ROUTINGS = [("nearest", 1), ("vote", 2), ("vote", 3), ("vote", 5)]


def _label(routing, k):
    return "nearest" if routing == "nearest" else f"vote k={k}"


def classification(name, home, params, P, parts, halos, seeds, quick):
    X, y, Xt, yt = common.load_train_test(name, home, quick)
    rows = []
    for pname in parts:
        for h in halos:
            acc = {r: [] for r in ROUTINGS}
            pred_s = {r: [] for r in ROUTINGS}
            fits = []
            for seed in seeds:
                est = PartitionedSVC(partitioner=PARTITIONERS[pname](P, random_state=seed),
                                     halo=h, **params)
                t0 = time.perf_counter()
                est.fit(X, y)
                fits.append(time.perf_counter() - t0)
                for routing, k in ROUTINGS:
                    est.set_params(routing=routing, n_voters=k)
                    t0 = time.perf_counter()
                    pred = est.predict(Xt)
                    pred_s[routing, k].append(time.perf_counter() - t0)
                    acc[routing, k].append(float(np.mean(pred == yt)))
            base = np.mean(acc["nearest", 1])
            for r in ROUTINGS:
                a = float(np.mean(acc[r]))
                rows.append([name, pname, h, _label(*r), f"{100 * a:.2f}",
                             f"{100 * (a - base):+.2f}", f"{np.mean(fits):.2f}",
                             f"{np.mean(pred_s[r]):.2f}"])
                print(rows[-1], flush=True)
    return rows


def regression(name, home, P, halos, quick):
    X, y = load_dataset(name, data_home=home, return_X_y=True, download_if_missing=False)
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    perm = np.random.RandomState(0).permutation(X.shape[0])
    n_train = 16000 if name == "cadata" else int(0.8 * X.shape[0])
    if quick:
        n_train = min(n_train, 3000)
    tr, te = perm[:n_train], perm[n_train:n_train + (1000 if quick else X.shape[0])]
    mu, sd = X[tr].mean(0), X[tr].std(0)
    sd[sd == 0] = 1.0
    X = (X - mu) / sd
    y = (y - y[tr].mean()) / y[tr].std()
    Xtr, ytr, Xte, yte = X[tr], y[tr], X[te], y[te]
    Xf, yf, Xv, yv = _krr.validation_split(Xtr, ytr)
    sigmas = [0.5, 1.0, 2.0] if not quick else [1.0, 2.0]
    lams = [1e-7, 1e-6, 1e-5, 1e-4] if not quick else [1e-6, 1e-4]
    rows = []
    for h in halos:
        val = {}
        for s in sigmas:
            for lam in lams:
                est = PartitionedKernelRidge(n_partitions=P, sigma=s, lam=lam, halo=h,
                                             random_state=0).fit(Xf, yf)
                for routing, k in ROUTINGS:
                    est.set_params(combine=routing, n_voters=k)
                    val[routing, k, s, lam] = _krr.mse(est.predict(Xv), yv)
        base = None
        for routing, k in ROUTINGS:
            s, lam = min(((s, lam) for s in sigmas for lam in lams),
                         key=lambda p: (val[routing, k, p[0], p[1]], p))
            est = PartitionedKernelRidge(n_partitions=P, sigma=s, lam=lam, halo=h,
                                         combine=routing, n_voters=k, random_state=0)
            est.fit(Xtr, ytr)
            t0 = time.perf_counter()
            m = _krr.mse(est.predict(Xte), yte)
            t_pred = time.perf_counter() - t0
            base = m if base is None else base
            rows.append([name, "K-balance", h, _label(routing, k), f"{s:g}", f"{lam:g}",
                         f"{m:.4f}", f"{m / base:.3f}", f"{t_pred:.2f}"])
            print(rows[-1], flush=True)
    return rows


def pays(rows, acc_col, gain, higher_better=True):
    """Configurations (data, partitions, halo) where a vote beats nearest by ``gain``."""
    out = []
    by = {}
    for r in rows:
        by.setdefault((r[0], r[1], r[2]), []).append(r)
    for key, rs in by.items():
        base = float(rs[0][acc_col])
        best = (max if higher_better else min)(rs[1:], key=lambda r: float(r[acc_col]))
        delta = float(best[acc_col]) - base
        ok = delta >= gain if higher_better else delta <= -gain * base
        out.append((key, best[3], delta, ok))
    return out


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--seeds", type=int, nargs="+", default=None)
    args = ap.parse_args(argv)
    home = common.data_home(args.data_home)
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    rep = common.Report()
    rep.line("# Soft routing (one core)")
    rep.machine()
    headers = ["data", "partitions", "halo", "routing", "accuracy %", "vs nearest", "fit s",
               "predict s"]
    with threadpool_limits(1):
        rows = classification("ijcnn1", home, dict(C=32.0, gamma=2.0), 16, list(PARTITIONERS),
                              [0.0, 0.5], seeds, args.quick)
        rep.table(f"ijcnn1, 16 partitions, mean of {len(seeds)} seeds", headers, rows)
        more = []
        for name, params in [("usps", dict(C=10.0, gamma=2.0 ** -7)),
                             ("a9a", dict(C=1.0, gamma=0.05))]:
            more += classification(name, home, params, 8, ["FCFS", "BKM"], [0.0, 0.5],
                                   seeds[:1], args.quick)
        rep.table("usps (multiclass) and a9a (sparse), 8 partitions, seed 0", headers, more)
        krr = []
        for name in ("cadata", "cpusmall"):
            krr += regression(name, home, 8, [0.0, 0.5], args.quick)
        rep.table("Kernel ridge regression, 8 K-balance partitions, (sigma, lam) chosen on "
                  "validation data for every routing", ["data", "partitions", "halo",
                                                        "routing", "sigma", "lam", "test MSE",
                                                        "/ nearest", "predict s"], krr)
    verdict = pays(rows + more, 4, 0.1) + pays(krr, 6, 0.01, higher_better=False)
    rep.line("\nWhere the best vote pays (>= 0.1 point of accuracy, >= 1% of MSE):")
    rep.line("")
    for (data, part, h), label, delta, ok in verdict:
        unit = "points" if data not in ("cadata", "cpusmall") else "MSE"
        shown = f"{delta:+.2f} {unit}" if unit == "points" else f"{delta:+.4f} MSE"
        rep.line(f"- {data} {part} h={h:g}: best {label} {shown}: "
                 f"{'pays' if ok else 'does not pay'}")
    rep.write(args.out)


if __name__ == "__main__":
    main()
