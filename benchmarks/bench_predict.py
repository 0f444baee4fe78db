"""Prediction time: the package's ``predict`` against LIBSVM's on the same
models, and against the package's previous prediction path; and KRR fit time
against the previous way of forming kernel matrices.

``predict`` is what users run after every fit, often on more rows than the
fit saw (ijcnn1: 91,701 test rows for 49,990 training rows). For each case a
partitioned estimator is fitted once, then three predictions of the whole
test set run alternately, ``--repeat`` times each after a warm-up, in one
process with the same fitted models, routing and data:

* ``ours``: ``estimator.predict(X_test)``. Every kernel block is computed in
  row blocks shared among the prediction's threads, each block's product,
  transform and reduction on one core with BLAS on one thread; a multiclass
  model computes each support vector's kernel row once for all its
  one-vs-one pairs (LIBSVM's own multiclass models included, through
  ``NativeKernelSVC.from_libsvm``).
* ``before``: the path of the package before this change, re-implemented
  here: nearest-centre routing, then per partition and per binary problem one
  BLAS product for the whole group (BLAS's own threads) followed by the
  OpenMP kernel transform on every core, and LIBSVM's ``predict`` for a
  multiclass LIBSVM model.
* ``LIBSVM``: the same routing, then each partition's ``sklearn.svm.SVC``
  predicts its rows itself (LIBSVM's loop over samples, one thread); only for
  fits with ``solver='libsvm'``, whose local models are those ``SVC``.

Settings: ``2 cores`` (nothing else runs, every library with its default
threads), ``1 core`` (``threadpoolctl.threadpool_limits(1)``: BLAS and
OpenMP on one thread, for every side) and ``1 busy`` / ``2 busy`` (one or
two other processes spinning on the 2 cores, default threads). The labels of
the three sides are compared (they can differ only where a decision value is
within rounding of 0).

KRR fits (``BKRR2``, ``DCKRR`` on cadata) form each partition's kernel
matrix with ``kernel_block``, the only part of their fit that changed: the
``before`` side swaps in the old one (one product on BLAS's threads, then the
OpenMP transform), on 2 cores and on 1 core (next to busy processes both
sides spend their time in OpenBLAS's collapsing multi-threaded Cholesky:
``bench_contention.py --parts krr``). Last, predictions of 1, 100 and
1,000 rows show the fixed cost of a call, in every setting. Needs ``../shared/datasets`` (or
``--data-home``).

Usage::

    python benchmarks/bench_predict.py            # ~8 min on 2 cores
    python benchmarks/bench_predict.py --quick    # subsets, 3 repeats
"""

import argparse
import time

import _common as common  # noqa: I001

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

from cakernels import BKMSVC, BKRR2, CASVC, DCKRR, _native
from cakernels._kernels import _KIND, block_rows, row_sq_norms
from cakernels.backends import SerialBackend
from cakernels.datasets import load_dataset


#: timing noise allowed by the goal "as fast as before"
NOISE = 0.05


# ------------------------------------------------------------ the cases
def _svm(name, make, home, quick):
    Xtr, ytr = load_dataset(name, data_home=home, return_X_y=True,
                            n_samples=4000 if quick else None, random_state=0,
                            download_if_missing=False)
    Xte, _ = load_dataset(name, subset="test", data_home=home, return_X_y=True,
                          download_if_missing=False)
    return make().fit(Xtr, ytr), Xte[:4000] if quick else Xte


def _krr(home, quick):
    X, y = load_dataset("cadata", data_home=home, return_X_y=True, download_if_missing=False)
    rng = np.random.RandomState(0)
    order = rng.permutation(X.shape[0])
    n_train = 4000 if quick else 16000
    tr, te = order[:n_train], order[n_train:]
    scaler = StandardScaler().fit(X[tr])
    y = (y - y[tr].mean()) / y[tr].std()
    est = BKRR2(n_partitions=8, sigma=1.0, lam=1e-4, random_state=0)
    return est.fit(scaler.transform(X[tr]), y[tr]), scaler.transform(X[te])


CASES = [
    ("ijcnn1", "BKMSVC(P=16, C=32, gamma=2), libsvm",
     lambda h, q: _svm("ijcnn1", lambda: BKMSVC(n_partitions=16, C=32.0, gamma=2.0,
                                                  solver="libsvm", random_state=0), h, q)),
    ("a9a", "CASVC(P=16, C=1, gamma=0.05), libsvm, CSR",
     lambda h, q: _svm("a9a", lambda: CASVC(n_partitions=16, C=1.0, gamma=0.05,
                                              solver="libsvm", random_state=0), h, q)),
    ("usps", "CASVC(P=8, C=10), libsvm, 10 classes",
     lambda h, q: _svm("usps", lambda: CASVC(n_partitions=8, C=10.0, solver="libsvm",
                                               random_state=0), h, q)),
    ("usps", "CASVC(P=8, C=10), smo, 10 classes",
     lambda h, q: _svm("usps", lambda: CASVC(n_partitions=8, C=10.0, solver="smo",
                                               random_state=0), h, q)),
    ("cadata", "BKRR2(P=8, sigma=1, lam=1e-4)", _krr),
]


def _cadata_train(home, quick):
    X, y = load_dataset("cadata", data_home=home, return_X_y=True, download_if_missing=False)
    order = np.random.RandomState(0).permutation(X.shape[0])[:4000 if quick else 16000]
    X = StandardScaler().fit_transform(X[order])
    return X, (y[order] - y[order].mean()) / y[order].std()


FITS = [
    ("BKRR2(P=8, sigma=1, lam=1e-4)", lambda: BKRR2(n_partitions=8, sigma=1.0, lam=1e-4,
                                                      random_state=0), _cadata_train),
    ("BKRR2(P=4, sigma=1, lam=1e-4)", lambda: BKRR2(n_partitions=4, sigma=1.0, lam=1e-4,
                                                      random_state=0), _cadata_train),
    ("DCKRR(P=8, sigma=1, lam=1e-4)", lambda: DCKRR(n_partitions=8, sigma=1.0, lam=1e-4,
                                                      random_state=0), _cadata_train),
]


# ------------------------------------------------------------ the other sides
def _kernel_dot_before(X, Y, coef, kp, n_threads):
    """``K(X, Y) @ coef`` as the package computed it before: the old
    ``kernel_block`` per 64 MiB block of rows."""
    kp = {key: kp[key] for key in ("kernel", "gamma", "degree", "coef0")}
    out = np.empty((X.shape[0],) + np.shape(coef)[1:])
    step = block_rows(Y.shape[0])
    for start in range(0, X.shape[0], step):
        out[start:start + step] = _kernel_block_before(
            X[start:start + step], Y, n_threads=n_threads, **kp) @ coef
    return out


def _local_before(est, model, Xg, n_threads):
    if hasattr(model, "alpha"):  # a KRR partition
        return _kernel_dot_before(Xg, model.X, model.alpha, model.kernel_params, n_threads)
    kp = est._kernel_params()
    if model.classes_.size == 2:
        coef = model.dual_coef_
        coef = coef.toarray() if sp.issparse(coef) else np.asarray(coef)
        dec = _kernel_dot_before(Xg, model.support_vectors_, coef[0], kp,
                                 n_threads) + model.intercept_[0]
        return model.classes_[(dec >= 0).astype(int)]
    if isinstance(model, SVC):
        return model.predict(common.libsvm_csr(Xg))
    # one kernel block per one-vs-one pair, then LIBSVM's votes
    dec = -np.column_stack([_kernel_dot_before(Xg, sv, coef[0], kp, n_threads) + b[0]
                            for sv, coef, b in model.models_])
    votes = np.zeros((Xg.shape[0], model.classes_.size), dtype=np.int64)
    for col, (i, j) in enumerate(model.problems_):
        first = dec[:, col] > 0
        votes[first, i] += 1
        votes[~first, j] += 1
    return model.classes_[np.argmax(votes, axis=1)]


def predict_before(est, X):
    """The package's ``predict`` before this change (nearest-centre routing)."""
    X = est._check_X(X)
    route = est.partitioner_.assign(X)
    out = None
    with SerialBackend().session() as s:  # as the package did: the session's threads
        for j, model in enumerate(est.estimators_):
            rows = np.flatnonzero(route == j)
            if rows.size == 0:
                continue
            vals = _local_before(est, model, X[rows], s.threads)
            if out is None:
                out = np.empty(X.shape[0], dtype=np.asarray(vals).dtype)
            out[rows] = vals
    return out


def _kernel_block_before(X, Y, *, kernel="rbf", gamma=1.0, degree=3, coef0=0.0,
                         X_sq_norms=None, Y_sq_norms=None, n_threads=1):
    """``K(X, Y)`` as the package computed it before: one BLAS product (BLAS's
    threads; a sparse product for sparse operands, as SciPy does it), then the
    OpenMP transform on ``n_threads``."""
    G = X @ Y.T
    G = np.ascontiguousarray(G.toarray() if sp.issparse(G) else G, dtype=np.float64)
    if kernel != "linear":
        rbf = kernel == "rbf"
        _native.kernel_from_gram(G, row_sq_norms(X) if rbf else None,
                                 row_sq_norms(Y) if rbf else None, _KIND[kernel],
                                 float(gamma), float(coef0), float(degree), n_threads)
    return G


def fit_before(make, X, y):
    """A fit with the kernel matrices formed as before (the only part of a KRR
    fit that changed): ``kernel_block`` swapped for the old one."""
    import cakernels._solvers.local as local

    saved = local.kernel_block
    local.kernel_block = _kernel_block_before
    try:
        return make().fit(X, y)
    finally:
        local.kernel_block = saved


def predict_libsvm(est, X):
    """Each partition's own ``SVC.predict`` on its routed rows (LIBSVM)."""
    X = est._check_X(X)
    route = est.partitioner_.assign(X)
    out = np.empty(X.shape[0], dtype=est.classes_.dtype)
    for j, model in enumerate(est.estimators_):
        rows = np.flatnonzero(route == j)
        if rows.size:
            out[rows] = model.predict(common.libsvm_csr(X[rows]))
    return out


# ------------------------------------------------------------ measuring
def measure(sides, X, repeat, setting):
    limit = 1 if setting == "1 core" else None
    busy = {"1 busy": 1, "2 busy": 2}.get(setting, 0)
    times = {name: [] for name in sides}
    labels = {}
    with common.Busy(busy), threadpool_limits(limit):
        for r in range(repeat + 1):  # the first round warms up, not timed
            for name, fn in sides.items():
                t0 = time.perf_counter()
                labels[name] = fn(X)
                if r:
                    times[name].append(time.perf_counter() - t0)
    return {name: float(np.median(t)) for name, t in times.items()}, labels


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--repeat", type=common.positive_int, default=None, help="timed rounds (default 5; quick 3)")
    ap.add_argument("--settings", nargs="+", default=["2 cores", "1 core", "1 busy", "2 busy"],
                    choices=["2 cores", "1 core", "1 busy", "2 busy"])
    args = ap.parse_args(argv)
    repeat = args.repeat or (3 if args.quick else 5)
    home = common.data_home(args.data_home)
    rep = common.Report()
    rep.machine()
    rows, worst_before, worst_libsvm = [], np.inf, np.inf
    for data, label, make in CASES:
        est, Xte = make(home, args.quick)
        sides = {"ours": est.predict, "before": lambda X, e=est: predict_before(e, X)}
        libsvm = any(isinstance(m, SVC) for m in est.estimators_)
        if libsvm:
            sides["LIBSVM"] = lambda X, e=est: predict_libsvm(e, X)
        n_sv = getattr(est, "n_support_total_", None)
        for setting in args.settings:
            t, lab = measure(sides, Xte, repeat, setting)
            same = "regression" if data == "cadata" else \
                f"{int(np.sum(lab['ours'] != lab['before']))}"
            if data == "cadata":
                diff = float(np.max(np.abs(lab["ours"] - lab["before"])))
                same = f"max abs. diff {diff:.1e}"
            elif libsvm:
                same += f" / {int(np.sum(lab['ours'] != lab['LIBSVM']))}"
            r_before = t["before"] / t["ours"]
            r_libsvm = t["LIBSVM"] / t["ours"] if libsvm else None
            worst_before = min(worst_before, r_before)
            if libsvm:
                worst_libsvm = min(worst_libsvm, r_libsvm)
            rows.append([data, label, f"{Xte.shape[0]:,}", "-" if n_sv is None else f"{n_sv:,}",
                         setting, f"{t['ours']:.3f}", f"{t['before']:.3f}",
                         f"{t['LIBSVM']:.3f}" if libsvm else "-", f"{r_before:.2f}x",
                         f"{r_libsvm:.2f}x" if libsvm else "-", same])
            print(" | ".join(rows[-1]), flush=True)
    fit_rows = []
    for label, make, data in FITS:
        X, y = data(home, args.quick)
        # next to busy processes a KRR fit is its Cholesky's collapse on both sides
        # (bench_contention.py --parts krr): the quiet settings only
        for setting in [s_ for s_ in args.settings if "busy" not in s_]:
            t, models = measure({"ours": lambda X_, y_=y, m=make: m().fit(X_, y_),
                                 "before": lambda X_, y_=y, m=make: fit_before(m, X_, y_)},
                                X, max(1, repeat - 2), setting)
            diff = float(np.max(np.abs(models["ours"].predict(X[:2000])
                                       - models["before"].predict(X[:2000]))))
            worst_before = min(worst_before, t["before"] / t["ours"])
            fit_rows.append([label, f"{X.shape[0]:,}", setting, f"{t['ours']:.3f}",
                             f"{t['before']:.3f}", f"{t['before'] / t['ours']:.2f}x",
                             f"{diff:.1e}"])
            print(" | ".join(fit_rows[-1]), flush=True)
    small_rows = []
    est, Xte = CASES[0][2](home, args.quick)  # ijcnn1's model: fixed costs per call
    for setting in args.settings:
        for n in (1, 100, 1000):
            t, _ = measure({"ours": est.predict,
                            "before": lambda X, e=est: predict_before(e, X)},
                           Xte[:n], 50, setting)
            if n > 1:
                worst_before = min(worst_before, t["before"] / t["ours"])
            small_rows.append([setting, f"{n:,}", f"{t['ours'] * 1e3:.3f}",
                               f"{t['before'] * 1e3:.3f}", f"{t['before'] / t['ours']:.2f}x"])
    rep.table(
        "predict of the whole test set, median seconds (ratios: the other side / ours)",
        ["data", "estimator", "test rows", "SVs", "setting", "ours s", "before s", "LIBSVM s",
         "before / ours", "LIBSVM / ours", "labels differing (before / LIBSVM)"], rows,
        note=f"Goals: ours as fast as before or faster in every setting and size (up to "
             f"{NOISE:.0%} of timing noise; small predictions below included): worst ratio "
             f"{worst_before:.2f}x, {common.pass_miss(worst_before >= 1.0 - NOISE)}; ours "
             f"faster than LIBSVM's predict of the same models in every setting: worst ratio "
             f"{worst_libsvm:.2f}x, {common.pass_miss(worst_libsvm > 1.0)}.")
    rep.table("KRR fits (the kernel matrices: shared row blocks against the old product + "
              "OpenMP transform), median seconds", ["estimator", "train rows", "setting",
                                                    "ours s", "before s", "before / ours",
                                                    "max abs. prediction diff"], fit_rows)
    rep.table("small predictions: the first rows of ijcnn1's test set, BKMSVC's model above, "
              "median of 50 (milliseconds)",
              ["setting", "rows", "ours ms", "before ms", "before / ours"], small_rows,
              note="The 1-row case (one per setting) is not counted in the goal: it is all "
                   "fixed costs (validation, routing, one session), printed for the record.")
    rep.write(args.out)


if __name__ == "__main__":
    main()
