"""Native SMO against scikit-learn's SVC (LIBSVM): one binary problem, every cache size.

On ijcnn1 (full, dense, C=32, gamma=2), a9a (full, CSR, C=1, gamma=0.05) and
covtype_5000 (the largest covtype subset here, dense, C=8, gamma=2), at
``cache_size`` 100, 200, 500 and 2,000 MB (the same for both sides), one BLAS
thread, tol=1e-3, shrinking on for both:

* ``SVC`` (LIBSVM, float kernel columns of the active length),
* ``smo_fit`` (this package's SMO: double columns of the active length under a
  byte budget as LIBSVM's, computed from a feature-major copy of X held in the
  solver's permutation, its bytes taken out of the same budget),

with fit seconds, iterations, test accuracy and the dual objective (the
package's, and LIBSVM's computed from its ``dual_coef_``). Goals (the
solver-speed issue): SMO at most 0.6x LIBSVM's fit time at every cache size,
test accuracy within 0.05 point, dual objectives within ``tol`` (relative).

Then the partitioned fits that get the gain: ``CASVC`` and ``CPSVC`` on ijcnn1
with 16 partitions, ``solver='smo'`` against ``solver='libsvm'`` (goal 1.5x).

Last, scikit-learn-intelex's ``SVC`` (oneDAL, on every core) against the SMO on
one thread, cache 200 MB, when sklearnex is installed (``--parts intelex``).

Asy-GCD has its own script, ``bench_asygcd.py``.

    python benchmarks/bench_smo.py [--quick] [--out FILE]   # ~8 min
    python benchmarks/bench_smo.py --parts partitioned      # the partitioned fits only
    python benchmarks/bench_smo.py --parts intelex          # against scikit-learn-intelex only
"""

import argparse

import _common as common  # noqa: I001  (puts a built checkout on sys.path)
import numpy as np
import scipy.sparse as sp
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

from cakernels import CASVC, CPSVC
from cakernels._kernels import kernel_dot
from cakernels._solvers.smo import smo_fit
from cakernels.datasets import load_dataset

CACHE_SIZES = [100, 200, 500, 2000]
TOL = 1e-3


def _datasets(home, quick):
    n = 5000 if quick else None
    kw = dict(data_home=home, return_X_y=True, download_if_missing=False)
    for name, C, gamma in [("ijcnn1", 32.0, 2.0), ("a9a", 1.0, 0.05)]:
        X, y = load_dataset(name, n_samples=n, random_state=0, **kw)
        Xt, yt = load_dataset(name, subset="test", n_samples=n, random_state=0, **kw)
        yield name, X, y, Xt, yt, C, gamma
    X, y = load_dataset("covtype_5000", **kw)
    Xt, yt = load_dataset("covtype_5000", subset="test", **kw)
    yield "covtype_5000", X, y, Xt, yt, 8.0, 2.0


def smo_accuracy(res, X, y_pm, Xt, yt_pm, gamma):
    """Test accuracy of an ``smo_fit`` result (labels -1/+1)."""
    sv = res["support"]
    f = kernel_dot(Xt, X[sv], res["alpha"][sv] * y_pm[sv], kernel="rbf",
                   gamma=gamma) + res["intercept"]
    return float(np.mean(np.where(f > 0, 1.0, -1.0) == yt_pm))


def libsvm_objective(svc, X, gamma):
    """LIBSVM's dual objective 1/2 a^T Q a - sum(a) from ``dual_coef_`` (= y a)."""
    ya = np.asarray(svc.dual_coef_.todense() if sp.issparse(svc.dual_coef_)
                    else svc.dual_coef_).ravel()
    Xs = X[svc.support_]
    # Q = diag(y) K diag(y): a^T Q a = (y a)^T K (y a); K by blocks of rows
    Kya = kernel_dot(Xs, Xs, ya, kernel="rbf", gamma=gamma)
    return 0.5 * float(ya @ Kya) - float(np.abs(ya).sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_common_args(ap)
    ap.add_argument("--parts", nargs="+", choices=("single", "partitioned", "intelex"),
                    default=["single", "partitioned", "intelex"])
    args = ap.parse_args()
    rep = common.Report()
    rep.machine()
    rows, goals, prow, xrow = [], [], [], []
    with threadpool_limits(1):
        single = "single" in args.parts
        for name, X, y, Xt, yt, C, gamma in (_datasets(common.data_home(args.data_home),
                                                       args.quick) if single else []):
            if sp.issparse(X):  # scikit-learn's SVC wants 32-bit CSR indices
                X, Xt = (sp.csr_matrix(M, dtype=np.float64) for M in (X, Xt))
                for M in (X, Xt):
                    M.indices = M.indices.astype(np.int32)
                    M.indptr = M.indptr.astype(np.int32)
            y_pm = np.where(y > 0, 1.0, -1.0)
            yt_pm = np.where(yt > 0, 1.0, -1.0)
            for cs in CACHE_SIZES:
                svc, t_svc = common.timed(SVC(C=C, gamma=gamma, tol=TOL, cache_size=cs).fit,
                                          X, y_pm)
                acc_svc = svc.score(Xt, yt_pm)
                obj_svc = libsvm_objective(svc, X, gamma)
                res, t_smo = common.timed(smo_fit, X, y_pm, C, gamma=gamma, tol=TOL,
                                          cache_size=cs)
                acc_smo = smo_accuracy(res, X, y_pm, Xt, yt_pm, gamma)
                rel = abs(res["objective"] - obj_svc) / abs(obj_svc)
                ratio = t_smo / t_svc
                rows.append((name, cs, f"{t_svc:.2f}", f"{t_smo:.2f}", f"{ratio:.2f}x",
                             int(svc.n_iter_[0]), res["n_iter"], f"{100 * acc_svc:.2f}%",
                             f"{100 * acc_smo:.2f}%", f"{obj_svc:.6g}", f"{res['objective']:.6g}",
                             f"{rel:.1e}"))
                print(rows[-1], flush=True)
                ok = ratio <= 0.6 and abs(acc_smo - acc_svc) <= 5e-4 and rel <= TOL
                goals.append((f"{name}, cache {cs} MB", f"{ratio:.2f}x",
                              f"{100 * (acc_smo - acc_svc):+.3f}", f"{rel:.1e}",
                              common.pass_miss(ok)))
        # partitioned fits: the same estimator with either local solver
        if "partitioned" in args.parts:
            partitioned(args, prow, goals)
    if "intelex" in args.parts:  # outside threadpool_limits: oneDAL takes both cores
        intelex(args, xrow, goals)
    if rows:
        rep.table("fit on one binary problem, one thread, the same cache_size for both",
                  ["dataset", "cache MB", "LIBSVM s", "SMO s", "SMO / LIBSVM", "LIBSVM iter",
                   "SMO iter", "LIBSVM acc", "SMO acc", "LIBSVM dual obj", "SMO dual obj",
                   "rel. diff"], rows)
    if prow:
        rep.table("partitioned fits on ijcnn1, 16 partitions, one thread (median of 5 fits, "
                  "the two solvers alternating)", ["estimator", "solver", "fit s", "test acc"],
                  prow)
    if xrow:
        rep.table("SMO (one thread) against scikit-learn-intelex's SVC (oneDAL, all "
                  f"{common.n_cores()} cores), cache 200 MB, median of 3 fits each, alternating",
                  ["dataset", "sklearnex s", "SMO s", "SMO / sklearnex", "sklearnex acc",
                   "SMO acc"], xrow)
    rep.table("goals", ["goal", "time", "acc diff (pts)", "dual obj diff", "status"], goals)
    rep.line(f"\nload average at end: {common.load_avg()}")
    rep.write(args.out)


def partitioned(args, prow, goals):
    """CASVC and CPSVC on ijcnn1, 16 partitions, solver='smo' against 'libsvm'."""
    kw = dict(data_home=common.data_home(args.data_home), return_X_y=True,
              download_if_missing=False)
    n = 5000 if args.quick else None
    X, y = load_dataset("ijcnn1", n_samples=n, random_state=0, **kw)
    Xt, yt = load_dataset("ijcnn1", subset="test", n_samples=n, random_state=0, **kw)
    for Est in (CASVC, CPSVC):
        times, acc = {"libsvm": [], "smo": []}, {}
        for _ in range(5):  # alternating, so that both see the same machine
            for solver in times:
                est = Est(n_partitions=16, C=32.0, gamma=2.0, solver=solver, random_state=0)
                times[solver].append(common.timed(est.fit, X, y)[1])
                if solver not in acc:
                    acc[solver] = est.score(Xt, yt)
        t = {k: float(np.median(v)) for k, v in times.items()}
        for solver in times:
            prow.append((Est.__name__, solver, f"{t[solver]:.3f}", f"{100 * acc[solver]:.2f}%"))
        speed = t["libsvm"] / t["smo"]
        goals.append((f"{Est.__name__} ijcnn1 P=16: smo vs libsvm", f"{speed:.2f}x faster",
                      f"{100 * (acc['smo'] - acc['libsvm']):+.3f}", "",
                      common.pass_miss(speed >= 1.5)))


def intelex(args, xrow, goals):
    """scikit-learn-intelex's SVC on every core against the SMO on one thread."""
    try:
        from sklearnex.svm import SVC as XSVC
    except ImportError:
        print("scikit-learn-intelex is not installed: its comparison is skipped")
        return
    for name, X, y, Xt, yt, C, gamma in _datasets(common.data_home(args.data_home), args.quick):
        y_pm = np.where(y > 0, 1.0, -1.0)
        yt_pm = np.where(yt > 0, 1.0, -1.0)
        tx, ts = [], []
        for _ in range(3):
            m, t = common.timed(XSVC(C=C, gamma=gamma, tol=TOL, cache_size=200).fit, X, y_pm)
            tx.append(t)
            with threadpool_limits(1):
                res, t = common.timed(smo_fit, X, y_pm, C, gamma=gamma, tol=TOL,
                                      cache_size=200)
            ts.append(t)
        acc_x = m.score(Xt, yt_pm)
        acc_s = smo_accuracy(res, X, y_pm, Xt, yt_pm, gamma)
        t_x, t_s = float(np.median(tx)), float(np.median(ts))
        xrow.append((name, f"{t_x:.2f}", f"{t_s:.2f}", f"{t_s / t_x:.2f}x",
                     f"{100 * acc_x:.2f}%", f"{100 * acc_s:.2f}%"))
        print(xrow[-1], flush=True)
        goals.append((f"{name}: SMO (1 thread) vs sklearnex ({common.n_cores()} cores)",
                      f"{t_s / t_x:.2f}x", f"{100 * (acc_s - acc_x):+.3f}", "",
                      common.pass_miss(t_s < t_x)))


if __name__ == "__main__":
    main()
