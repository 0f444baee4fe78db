"""Peak memory of fits and predictions, next to scikit-learn's SVC and KernelRidge.

Every measurement runs in a FRESH process (this script re-run with ``--case``),
so that one case's peak cannot hide in another's heap. The child imports
everything, loads its data (and, for a prediction, unpickles the model that the
fit case saved), runs one small warm-up call of the same estimator (the
runtime's one-time set-up: lazy imports, BLAS and OpenMP thread pools), returns
freed heap to the system (``malloc_trim``), reads its resident size (the
baseline), resets the kernel's peak-RSS counter (``5`` into
``/proc/self/clear_refs``), runs the one timed call and reads ``VmHWM``. The
tables give the peak above that baseline, the size of the input matrix (the
training X of a fit, the batch of a prediction: a dense array's bytes or a CSR
matrix's three arrays), their ratio, and our estimator's peak over the
reference's on the same data. Linux only (``/proc``).

Cases (``backend='serial'``, ``random_state=0`` and every other parameter at its
default unless named):

* fit, ijcnn1 (dense, 49,990 x 22; C=32, gamma=2, cache_size=4): CASVC, CPSVC,
  DCSVC, CascadeSVC (P=8), DisSMOSVC, and SVC as the reference. DisSMOSVC runs
  with one BLAS thread: its Python loop makes one small ``dgemv`` per kernel row
  (cache_size=4 holds 10 rows of 49,990), and a 2-thread ``dgemv`` next to a busy
  core made its fit 5-10x slower (1,290 s against 252 s with one thread, at load
  ~3); its peak is the same (19.4 against 19.5 MB);
* fit, a9a (CSR, 32,561 x 123; C=1, gamma=0.05, cache_size=4): CASVC, BKMSVC
  (P=8), SVC;
* predict of 200,000 rows (the test set tiled: a9a as CSR, ijcnn1 dense) by the
  CASVC fitted above, against SVC.predict of its own model on the same rows;
* fit, cadata (16,000 rows, standardised X and y): BKRR2 and DCKRR (P=8,
  sigma=1, lam=1e-4) against KernelRidge (gamma = 1/(2 sigma^2), alpha = lam n)
  on 8,000 rows only: its n x n kernel matrix is 488 MB there and 1,953 MB at
  16,000 rows; plus "m x m matrices held" = peak / (8 m^2), m = rows per
  partition (n for KernelRidge);
* the fast search BKRR2CV (P=8, lams 1e-6, 1e-4, 1e-2, cv=3) on 8,000 cadata
  rows with 2 and with 10 sigmas (geomspace(0.25, 4)): more sigmas should not
  multiply its memory;
* the partitioners on 200,000 x 20 standard normal rows with P=256: the
  distance-based ones hold the n x P distances to the centres.

The KRR, search and partitioner tables put the peak next to the bound the
pre-allocation memory checks reserve (in m x m kernel matrices, or n x P distance
arrays): a peak above it would let a problem the check passed be killed instead.

``--quick``: 5,000 ijcnn1 rows, 5,000 a9a rows, 2,000 cadata rows (KernelRidge and
the search on 1,000), 20,000 predicted rows, 20,000 partitioned rows with P=64;
well under a minute.

    python benchmarks/bench_memory.py [--quick] [--out FILE] [--data-home DIR]
                                      [--no-warmup] [--tracemalloc]
    # full: ~9 min on 2 busy cores, most of it Dis-SMO's and SVC's fits and SVC.predict
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

import _common as common  # noqa: I001  (puts a built checkout on sys.path)
import numpy as np
from cakernels._cli.methods import KERNEL_RIDGE_COPIES
from cakernels.kernel_ridge._partitioned import PARTITION_COPIES
from cakernels.model_selection._krr_search import _search_copies
from cakernels.partition._partitioners import DISTANCE_COPIES

SVM_IJCNN1 = dict(C=32.0, gamma=2.0, cache_size=4)
SVM_A9A = dict(C=1.0, gamma=0.05, cache_size=4)
KRR = dict(sigma=1.0, lam=1e-4)
CV_LAMS = [1e-6, 1e-4, 1e-2]
P = 8
MB = 2.0 ** 20


# ================================================================== child
def _status_mb(key):
    return common.proc_status_bytes(key) / MB


def _trim():
    """Give freed heap back to the system, so that the baseline is the live set
    and the timed call cannot reuse pages freed by the loading or the warm-up."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_peak():
    """Reset VmHWM to the current RSS; False when the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _load(case, home):
    """The case's training data (as the estimator gets it)."""
    from cakernels.datasets import load_dataset

    name, rows = case["data"], case.get("rows")
    if name == "normal":
        X = np.random.RandomState(0).standard_normal((rows, case["d"]))
        return X, None
    if name == "cadata":
        X, y = load_dataset("cadata", data_home=home, return_X_y=True, n_samples=case["n_load"],
                            random_state=0, dense=True, download_if_missing=False)
        X = np.asarray(X, dtype=np.float64)
        X = np.ascontiguousarray((X - X.mean(0)) / X.std(0))
        y = np.asarray(y, dtype=np.float64)
        y = (y - y.mean()) / y.std()
        if rows:
            X, y = np.ascontiguousarray(X[:rows]), y[:rows].copy()
        return X, y
    sub = dict(n_samples=rows, random_state=0) if rows else {}
    X, y = load_dataset(name, data_home=home, return_X_y=True, download_if_missing=False, **sub)
    return X, y


def _batch(case, home):
    """The prediction batch: the test set stacked until ``ntest`` rows."""
    import scipy.sparse as sp
    from cakernels.datasets import load_dataset

    Xt, _ = load_dataset(case["data"], subset="test", data_home=home, return_X_y=True,
                         download_if_missing=False)
    reps = -(-case["ntest"] // Xt.shape[0])
    if sp.issparse(Xt):
        return sp.vstack([Xt] * reps, format="csr")[: case["ntest"]]
    return np.ascontiguousarray(np.tile(Xt, (reps, 1))[: case["ntest"]])


def _make(case):
    import cakernels
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.svm import SVC

    name, params = case["est"], dict(case.get("params", {}))
    if name == "SVC":
        return SVC(**params)
    if name == "KernelRidge":
        s, lam = params["sigma"], params["lam"]
        return KernelRidge(kernel="rbf", gamma=1.0 / (2.0 * s * s), alpha=lam * case["n"])
    cls = getattr(cakernels, name)
    if name != "DisSMOSVC":
        params.setdefault("random_state", 0)
    return cls(**params)


def child(case, home):
    import pickle
    import warnings

    import scipy.sparse as sp
    import sklearn.kernel_ridge  # noqa: F401
    import sklearn.svm  # noqa: F401

    import cakernels  # noqa: F401

    from threadpoolctl import threadpool_limits

    warnings.simplefilter("ignore")
    res = {}
    limit = threadpool_limits(limits=case["blas_threads"], user_api="blas") \
        if case.get("blas_threads") else None
    if case["op"] == "fit":
        X, y = _load(case, home)
        if case["est"] == "SVC":
            X = common.libsvm_csr(X)
        case["n"] = X.shape[0]
        est = _make(case)
        call, arg = est.fit, (X, y)
        if case["warmup"]:
            idx = np.sort(np.random.RandomState(0).choice(X.shape[0], min(600, X.shape[0] // 4),
                                                          replace=False))
            try:
                _make(case).fit(X[idx], None if y is None else y[idx])
            except Exception as exc:  # noqa: BLE001 (a warm-up only)
                res["warmup_error"] = repr(exc)
    else:
        with open(case["model"], "rb") as fh:
            est = pickle.load(fh)
        X = _batch(case, home)
        if case["est"] == "SVC":
            X = common.libsvm_csr(X)
        call, arg = est.predict, (X,)
        if case["warmup"]:
            est.predict(X[:600])
    nbytes = common.data_nbytes(X)
    gc.collect()
    _trim()
    tm = case.get("tracemalloc")
    if tm:
        import tracemalloc

        tracemalloc.start()
    base = _status_mb("VmRSS:")
    reset = _reset_peak()
    t0 = time.perf_counter()
    call(*arg)
    sec = time.perf_counter() - t0
    peak = _status_mb("VmHWM:")
    if limit is not None:
        limit.restore_original_limits()
    res.update(baseline_mb=base, peak_mb=peak - base, reset=reset, seconds=sec,
               x_mb=nbytes / MB, rows=int(X.shape[0]), sparse=bool(sp.issparse(X)))
    if tm:
        res["tracemalloc_mb"] = tracemalloc.get_traced_memory()[1] / MB
        tracemalloc.stop()
    sizes = getattr(est, "partition_sizes_", None)
    if sizes is None and hasattr(est, "best_estimator_"):
        sizes = getattr(est.best_estimator_, "partition_sizes_", None)
    if sizes is not None:
        res["max_part"] = int(np.max(sizes))
    if case.get("save"):
        with open(case["save"], "wb") as fh:
            pickle.dump(est, fh, protocol=pickle.HIGHEST_PROTOCOL)
    print(json.dumps(res), flush=True)


# ================================================================== parent
def run_case(case, args, timeout):
    """``case`` in a fresh process; its JSON result, or None after saying why."""
    case = dict(case, warmup=not args.no_warmup, tracemalloc=args.tracemalloc)
    argv = [sys.executable, os.path.abspath(__file__), "--case", json.dumps(case),
            "--data-home", common.data_home(args.data_home)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(common.REPO_ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    label = f"{case['op']} {case['data']} {case['est']}"
    t0 = time.perf_counter()
    try:
        out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout,
                             start_new_session=True)
    except subprocess.TimeoutExpired:
        print(f"  {label}: timed out after {timeout} s", flush=True)
        return None
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        print(f"  {label}: failed (exit {out.returncode})\n{out.stderr[-2000:]}", flush=True)
        return None
    res = json.loads(lines[-1])
    print(f"  {label}: {res['peak_mb']:.1f} MB above {res['baseline_mb']:.0f} MB, "
          f"X {res['x_mb']:.1f} MB, {res['seconds']:.2f} s "
          f"(case {time.perf_counter() - t0:.0f} s, load {common.load1():.2f})", flush=True)
    if res.get("warmup_error"):
        print(f"    warm-up failed: {res['warmup_error']}", flush=True)
    if not res["reset"]:
        print("    /proc/self/clear_refs refused: peak includes the loading", flush=True)
    return res


def f1(v):
    return "-" if v is None else f"{v:,.1f}"


def ratio(a, b):
    if a is None or b is None or b < 0.5:
        return "-"
    return f"{a / b:.2f}x"


def peak(res):
    return None if res is None else res["peak_mb"]


def svm_rows(results, ref_name, args):
    """Rows of an SVM table: estimator, rows, X MB, baseline, peak, peak/X, vs ref, s."""
    ref = peak(results.get(ref_name))
    out = []
    for name, res in results.items():
        if res is None:
            out.append([name] + ["failed"] + ["-"] * 6 + (["-"] if args.tracemalloc else []))
            continue
        row = [name, f"{res['rows']:,}", f"{res['x_mb']:.1f}", f"{res['baseline_mb']:.0f}",
               f1(res["peak_mb"]), ratio(res["peak_mb"], res["x_mb"]),
               "ref" if name == ref_name else ratio(res["peak_mb"], ref),
               f"{res['seconds']:.2f}"]
        if args.tracemalloc:
            row.append(f1(res.get("tracemalloc_mb")))
        out.append(row)
    return out


def main():
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    ap.add_argument("--no-warmup", action="store_true",
                    help="no warm-up call in the child (the first call's one-time set-up counts)")
    ap.add_argument("--tracemalloc", action="store_true",
                    help="also report tracemalloc's peak (Python and numpy allocations; slower)")
    ap.add_argument("--case", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        child(json.loads(args.case), common.data_home(args.data_home))
        return

    quick = args.quick
    n_ij = 5_000 if quick else None        # None: every training row
    n_a9a = 5_000 if quick else None
    n_cad = 2_000 if quick else 16_000
    n_half = n_cad // 2
    n_pred = 20_000 if quick else 200_000
    timeout = 600 if quick else 3600
    report = common.Report()
    small = (" --quick: at these small sizes the fixed arrays weigh more than the matrices,"
             " and a peak may pass the check's bound, which is for the full sizes."
             if quick else "")
    report.machine([
        f"setup      : each case in a fresh process; peak = VmHWM after resetting it "
        f"(/proc/self/clear_refs) minus VmRSS at the reset; "
        f"{'no warm-up' if args.no_warmup else 'after a warm-up call on 600 rows'} and "
        f"malloc_trim; default threads (DisSMOSVC: one BLAS thread); backend='serial'; "
        f"random_state=0"
        + ("; --quick subsets" if quick else "")])
    t_start = time.perf_counter()
    tmp = tempfile.TemporaryDirectory(prefix="bench_memory_")
    model = lambda tag: os.path.join(tmp.name, f"{tag}.pkl")  # noqa: E731
    hdr = ["estimator", "rows", "X MB", "baseline MB", "peak MB", "peak / X",
           "vs SVC", "s"] + (["tracemalloc MB"] if args.tracemalloc else [])

    # ---------------------------------------------------------- SVM fits
    print("\nfit, ijcnn1", flush=True)
    ij = {}
    for name, extra in [("CASVC", dict(n_partitions=P)), ("CPSVC", dict(n_partitions=P)),
                        ("DCSVC", dict(n_partitions=P)), ("CascadeSVC", dict(n_partitions=P)),
                        ("DisSMOSVC", {}), ("SVC", {})]:
        save = {"CASVC": model("casvc_ijcnn1"), "SVC": model("svc_ijcnn1")}.get(name)
        # Dis-SMO's Python loop makes one small dgemv per kernel row: on 2 shared cores
        # OpenBLAS's 2-thread dgemv waits on a busy core (10x slower); one BLAS thread
        blas = 1 if name == "DisSMOSVC" else None
        label = name + (" (1 BLAS thread)" if blas else "")
        ij[label] = run_case(dict(op="fit", data="ijcnn1", rows=n_ij, est=name, blas_threads=blas,
                                  params=dict(SVM_IJCNN1, **extra), save=save), args, timeout)
    report.table(f"fit, ijcnn1 (dense, "
                 f"{'all rows' if n_ij is None else f'{n_ij:,} rows'}; C=32, gamma=2, "
                 f"cache_size=4 MB, P=8)", hdr, svm_rows(ij, "SVC", args),
                 note="s: the timed call's seconds (context only; the machine is shared).")

    print("\nfit, a9a", flush=True)
    a9 = {}
    for name, extra in [("CASVC", dict(n_partitions=P)), ("BKMSVC", dict(n_partitions=P)),
                        ("SVC", {})]:
        save = {"CASVC": model("casvc_a9a"), "SVC": model("svc_a9a")}.get(name)
        a9[name] = run_case(dict(op="fit", data="a9a", rows=n_a9a, est=name,
                                 params=dict(SVM_A9A, **extra), save=save), args, timeout)
    report.table(f"fit, a9a (CSR, {'all rows' if n_a9a is None else f'{n_a9a:,} rows'}; "
                 f"C=1, gamma=0.05, cache_size=4 MB, P=8)", hdr, svm_rows(a9, "SVC", args))

    # ---------------------------------------------------------- predictions
    print(f"\npredict, {n_pred:,} rows", flush=True)
    prow = []
    for data, fits, kind in [("a9a", a9, "CSR"), ("ijcnn1", ij, "dense")]:
        pr = {}
        for name in ("CASVC", "SVC"):
            if fits.get(name) is None:
                pr[name] = None
                continue
            pr[name] = run_case(dict(op="predict", data=data, est=name, ntest=n_pred,
                                     model=model(f"{name.lower()}_{data}")), args, timeout)
        for row in svm_rows(pr, "SVC", args):
            prow.append([f"{data} ({kind})"] + row)
    report.table(f"predict, {n_pred:,} rows (the test set tiled; each model from the fits above)",
                 ["data"] + hdr, prow,
                 note="X is the prediction batch here; 'vs SVC': SVC.predict of its own model "
                      "on the same rows.")

    # ---------------------------------------------------------- KRR fits
    print("\nfit, cadata", flush=True)
    kr = {}
    for name, n in [("BKRR2", n_cad), ("DCKRR", n_cad), ("KernelRidge", n_half)]:
        params = dict(KRR) if name == "KernelRidge" else dict(KRR, n_partitions=P)
        kr[name] = run_case(dict(op="fit", data="cadata", n_load=n_cad, rows=n, est=name,
                                 params=params), args, timeout)
    ref = peak(kr["KernelRidge"])
    krow = []
    for name, res in kr.items():
        if res is None:
            krow.append([name, "failed"] + ["-"] * 9)
            continue
        m = res["rows"] if name == "KernelRidge" else res.get("max_part", res["rows"] // P)
        krow.append([name, f"{res['rows']:,}", f"{m:,}", f"{res['x_mb']:.2f}",
                     f"{res['baseline_mb']:.0f}", f1(res["peak_mb"]),
                     f"{res['peak_mb'] / res['x_mb']:.0f}x",
                     f"{res['peak_mb'] * MB / (8.0 * m * m):.2f}",
                     f"{KERNEL_RIDGE_COPIES if name == 'KernelRidge' else PARTITION_COPIES}",
                     "ref" if name == "KernelRidge" else ratio(res["peak_mb"], ref),
                     f"{res['seconds']:.2f}"])
    report.table(f"fit, cadata (standardised; BKRR2/DCKRR on {n_cad:,} rows, P=8, sigma=1, "
                 f"lam=1e-4; KernelRidge on {n_half:,} rows only)",
                 ["estimator", "rows", "m", "X MB", "baseline MB", "peak MB", "peak / X",
                  "m x m matrices held", "check's bound", f"vs KernelRidge ({n_half:,})",
                  "s"], krow,
                 note=f"m: rows per partition (the largest; KernelRidge: all its rows); "
                      f"'m x m matrices held' = peak / (8 m^2 bytes). KernelRidge runs on "
                      f"{n_half:,} rows only: its kernel matrix grows as n^2 "
                      f"({8 * n_half ** 2 / MB:,.0f} MB at {n_half:,} rows, "
                      f"{8 * n_cad ** 2 / MB:,.0f} MB at {n_cad:,}), so its peak on the "
                      f"{n_cad:,} rows of the partitioned fits would be about 4x the one shown."
                      + small)

    # ---------------------------------------------------------- the fast search
    print(f"\nBKRR2CV, cadata {n_half:,}", flush=True)
    cv = {}
    for ns in (2, 10):
        sig = [float(s) for s in np.geomspace(0.25, 4.0, ns)]
        cv[ns] = run_case(dict(op="fit", data="cadata", n_load=n_cad, rows=n_half, est="BKRR2CV",
                               params=dict(n_partitions=P, sigmas=sig, lams=CV_LAMS, cv=3)),
                          args, timeout)
    crow = []
    m = n_half // P
    threads = os.cpu_count() or 1
    for ns, res in cv.items():
        if res is None:
            crow.append([ns, "failed"] + ["-"] * 8)
            continue
        crow.append([f"{ns} x 3", f"{res['rows']:,}", f"{m:,}", f"{res['baseline_mb']:.0f}",
                     f1(res["peak_mb"]), f"{res['peak_mb'] / res['x_mb']:.0f}x",
                     f"{res['peak_mb'] * MB / (8.0 * m * m):.2f}",
                     f"{_search_copies(threads, 3, False, False, ns):.2f}",
                     "ref" if ns == 2 else ratio(res["peak_mb"], peak(cv[2])),
                     f"{res['seconds']:.2f}"])
    report.table(f"BKRR2CV fast search, cadata {n_half:,} rows (P=8, cv=3, lams 1e-6/1e-4/1e-2, "
                 f"sigmas geomspace(0.25, 4))",
                 ["sigmas x lams", "rows", "m", "baseline MB", "peak MB", "peak / X",
                  "m x m matrices held", "check's bound", "vs 2 sigmas", "s"], crow,
                 note=f"m = rows / P = {m:,} (a fold's training part of a partition is about "
                      f"2/3 of it); X is {n_half:,} x 8 doubles "
                      f"({n_half * 8 * 8 / MB:.2f} MB); check's bound: the m x m matrices "
                      f"the search's memory check reserves with {threads} threads." + small)

    # ---------------------------------------------------------- the partitioners
    n_part, p_part = (20_000, 64) if quick else (200_000, 256)
    print(f"\npartitioners, {n_part:,} x 20, P={p_part}", flush=True)
    prow = []
    for name in ("RandomPartitioner", "KMeansPartitioner", "KBalancePartitioner",
                 "FCFSPartitioner", "BKMPartitioner"):
        res = run_case(dict(op="fit", data="normal", rows=n_part, d=20, est=name,
                            params=dict(n_partitions=p_part)), args, timeout)
        if res is None:
            prow.append([name, "failed"] + ["-"] * 5)
            continue
        held = res["peak_mb"] * MB / (8.0 * n_part * p_part)
        prow.append([name, f"{res['rows']:,}", f"{res['baseline_mb']:.0f}", f1(res["peak_mb"]),
                     f"{held:.2f}", "0" if name == "RandomPartitioner" else
                     f"{DISTANCE_COPIES}", f"{res['seconds']:.2f}"])
    report.table(f"partitioners, {n_part:,} x 20 standard normal rows, P={p_part}",
                 ["partitioner", "rows", "baseline MB", "peak MB", "n x P arrays held",
                  "check's bound", "s"], prow,
                 note=f"n x P arrays held = peak / (8 n P bytes) ({8 * n_part * p_part / MB:,.0f}"
                      " MB each); the check's bound counts the distances (none for random "
                      "partitions without a halo) and 4 copies of the P x d centres." + small)
    tmp.cleanup()
    report.line(f"\ntotal {time.perf_counter() - t_start:.0f} s, load average at the end "
                f"{common.load_avg()}")
    report.write(args.out)


if __name__ == "__main__":
    main()
