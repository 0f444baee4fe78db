"""Shared protocol of the KRR benchmarks (``bench_krr_cadata.py``, ``bench_krr_family.py``).

Parameter choice and timing are the same for every method, scikit-learn's
``KernelRidge`` included:

1. **Choice on validation data.**  The training set is split once (fixed
   seed) into a fitting part and a validation part (``VAL_FRACTION`` of it);
   every method is fitted on the fitting part at every (sigma, lam) point of
   its grid and scored by its validation MSE; its point of lowest validation
   MSE is chosen.  The test set is never used for choosing.  ``KernelRidge``
   gets ``kernel='rbf', gamma=1/(2 sigma^2), alpha=lam*n`` (the problem of
   one partition holding all n samples).  KKRR and KKRR2 share one K-means
   partitioned fit per grid point (same partitioner and seed: identical
   local models, only the combination differs), BKRR and BKRR2 one
   K-balance fit.
2. **Refit and test.**  Each method is refitted on the whole training set
   at its chosen point; its test MSE is that model's.  The oracle bounds
   KKRR3/BKRR3 (``oracle_score``, Algorithm 11) are evaluated on the
   refitted KKRR2/BKRR2 models: they inspect the test targets, so they are
   bounds, not predictors.
3. **Timing.**  After one untimed warm-up fit of every method (on a small
   subsample), ``repeat`` interleaved rounds each fit every method once on
   the whole training set; the fit time reported is the best of the rounds
   for every method alike.  BLAS threads are limited for both sides alike by
   the caller (``threadpool_limits``).
4. **Partitioner seeds.**  The timed rounds use seed 0; the test MSE of the
   partitioned methods (and of the oracles) is also given as mean and range
   over ``seeds`` partitioner seeds, at the same chosen parameters.
"""

import time

import numpy as np
from sklearn.kernel_ridge import KernelRidge

from cakernels import (BKRR, BKRR2, DCKRR, KKRR, KKRR2, PartitionedKernelRidge,
                       oracle_score)
from cakernels.partition import KBalancePartitioner

VAL_FRACTION = 0.2


def mse(a, b):
    return float(np.mean((np.asarray(a) - np.asarray(b)) ** 2))


def _regret(P, s, l, seed):
    return PartitionedKernelRidge(
        partitioner=KBalancePartitioner(P, assign_order="regret", random_state=seed),
        combine="nearest", sigma=s, lam=l, random_state=seed)


#: name -> factory(P, sigma, lam, seed, n_train)
FACTORIES = {
    "KernelRidge": lambda P, s, l, seed, n: KernelRidge(
        kernel="rbf", gamma=1.0 / (2.0 * s * s), alpha=l * n),
    "DCKRR": lambda P, s, l, seed, n: DCKRR(P, sigma=s, lam=l, random_state=seed),
    "KKRR": lambda P, s, l, seed, n: KKRR(P, sigma=s, lam=l, random_state=seed),
    "KKRR2": lambda P, s, l, seed, n: KKRR2(P, sigma=s, lam=l, random_state=seed),
    "BKRR": lambda P, s, l, seed, n: BKRR(P, sigma=s, lam=l, random_state=seed),
    "BKRR2": lambda P, s, l, seed, n: BKRR2(P, sigma=s, lam=l, random_state=seed),
    "BKRR2 (regret order)": lambda P, s, l, seed, n: _regret(P, s, l, seed),
}
ORACLES = {"KKRR3 (oracle)": "KKRR2", "BKRR3 (oracle)": "BKRR2"}


def validation_split(X, y, seed=0, fraction=VAL_FRACTION):
    """(X_fit, y_fit, X_val, y_val): a fixed random split of the training set."""
    rng = np.random.RandomState(seed)
    perm = rng.permutation(X.shape[0])
    n_val = int(round(fraction * X.shape[0]))
    va, fi = perm[:n_val], perm[n_val:]
    return X[fi], y[fi], X[va], y[va]


def grid_scores(Xf, yf, Xv, yv, P, sigmas, lams, *, methods, krr_grid=None, seed=0,
                log=print):
    """Validation MSE of every method at every grid point: {(method, sigma, lam): mse}.

    ``krr_grid`` (list of (sigma, lam)) restricts KernelRidge's grid; None: the
    full grid.
    """
    n = Xf.shape[0]
    scores = {}
    for s in sigmas:
        for l in lams:
            log(f"  grid sigma={s:g} lam={l:g}")
            if "DCKRR" in methods:
                m = FACTORIES["DCKRR"](P, s, l, seed, n).fit(Xf, yf)
                scores["DCKRR", s, l] = mse(m.predict(Xv), yv)
            if "KKRR" in methods or "KKRR2" in methods:
                m = FACTORIES["KKRR2"](P, s, l, seed, n).fit(Xf, yf)
                scores["KKRR2", s, l] = mse(m.predict(Xv), yv)
                scores["KKRR", s, l] = mse(m.local_predictions(Xv).mean(axis=0), yv)
            if "BKRR" in methods or "BKRR2" in methods:
                m = FACTORIES["BKRR2"](P, s, l, seed, n).fit(Xf, yf)
                scores["BKRR2", s, l] = mse(m.predict(Xv), yv)
                scores["BKRR", s, l] = mse(m.local_predictions(Xv).mean(axis=0), yv)
            if "BKRR2 (regret order)" in methods:
                m = FACTORIES["BKRR2 (regret order)"](P, s, l, seed, n).fit(Xf, yf)
                scores["BKRR2 (regret order)", s, l] = mse(m.predict(Xv), yv)
    if "KernelRidge" in methods:
        pts = krr_grid if krr_grid is not None else [(s, l) for s in sigmas for l in lams]
        for s, l in pts:
            log(f"  KernelRidge sigma={s:g} lam={l:g}")
            m = FACTORIES["KernelRidge"](P, s, l, seed, n).fit(Xf, yf)
            scores["KernelRidge", s, l] = mse(m.predict(Xv), yv)
            del m
    return {k: v for k, v in scores.items() if k[0] in methods}


def choose(scores, method):
    """(sigma, lam, validation MSE) of the method's lowest validation MSE."""
    pts = {(s, l): v for (m, s, l), v in scores.items() if m == method}
    (s, l), v = min(pts.items(), key=lambda kv: (kv[1], kv[0]))
    return s, l, v


def edge_note(s, l, sigmas, lams):
    edge = []
    if s in (min(sigmas), max(sigmas)):
        edge.append("sigma")
    if l in (min(lams), max(lams)):
        edge.append("lam")
    return ("grid edge: " + ", ".join(edge)) if edge else ""


def final_fits(chosen, Xtr, ytr, Xte, yte, P, *, repeat=3, seeds=(0,), load=None,
               log=print):
    """Refit at the chosen points, time, test.

    chosen: {method: (sigma, lam)}.  Returns {method: dict(times, loads, test,
    test_seeds, model)} plus the oracle rows {name: dict(test, test_seeds)}.
    """
    n = Xtr.shape[0]
    methods = list(chosen)
    out = {m: dict(times=[], loads=[], test=None, test_seeds=[], model=None) for m in methods}
    # warm-up: one untimed fit of every method on a small subsample
    nw = min(n, 50 * P)
    for m in methods:
        s, l = chosen[m]
        FACTORIES[m](P, s, l, 0, nw).fit(Xtr[:nw], ytr[:nw])
    for r in range(repeat):
        for m in methods:
            s, l = chosen[m]
            est = FACTORIES[m](P, s, l, 0, n)
            ld = load() if load else float("nan")
            t0 = time.perf_counter()
            est.fit(Xtr, ytr)
            out[m]["times"].append(time.perf_counter() - t0)
            out[m]["loads"].append(ld)
            log(f"  round {r + 1}/{repeat} {m}: {out[m]['times'][-1]:.2f} s")
            if r == repeat - 1:
                out[m]["test"] = mse(est.predict(Xte), yte)
                out[m]["model"] = est
            del est
    oracles = {}
    for name, base in ORACLES.items():
        if base in out:
            oracles[name] = dict(test=oracle_score(out[base]["model"], Xte, yte),
                                 test_seeds=[], base=base)
    # other partitioner seeds: test MSE only
    for m in methods:
        if m == "KernelRidge":
            continue
        s, l = chosen[m]
        out[m]["test_seeds"].append(out[m]["test"])
        for seed in seeds:
            if seed == 0:
                continue
            est = FACTORIES[m](P, s, l, seed, n).fit(Xtr, ytr)
            out[m]["test_seeds"].append(mse(est.predict(Xte), yte))
            for name, o in oracles.items():
                if o["base"] == m:
                    o["test_seeds"].append(oracle_score(est, Xte, yte))
    for name, o in oracles.items():
        o["test_seeds"].insert(0, o["test"])
    return out, oracles


def count_linalg_warnings(caught):
    from scipy.linalg import LinAlgWarning
    return sum(issubclass(w.category, LinAlgWarning) for w in caught)
