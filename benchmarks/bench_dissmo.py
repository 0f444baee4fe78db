"""Dis-SMO's working sets: Algorithm 1's first-order pair against LIBSVM's second-order one.

``DisSMOSVC(working_set='first-order')`` (the default, Algorithm 1: one
allgather per iteration) against ``working_set='second-order'`` (``j`` by the
objective decrease with ``i``: two allgathers per iteration), with scikit-learn's
``SVC`` with and without shrinking as the reference (the same dual), one
process, one worker, one BLAS thread, tol=1e-3, ``max_iter=-1`` (the automatic
limit: 100 iterations per sample, at least 10^6):

* a9a, first 2,000 rows (CSR, gamma=0.05; duplicate rows with opposite labels)
  at C = 1, 100, 10^4, 10^6: the first-order pair zigzags towards C on the
  contradicting duplicates;
* ijcnn1 (full, C=32, gamma=2, Table 2.12's setting) and usps (10 classes,
  C=10, gamma=0.0066), the data of ``bench_comparison.py``.

Printed: fit seconds, iterations (summed over the binary problems), whether
the fit converged, the dual objective (summed) and the training accuracy of
each, and the ratios first-order / second-order. Under MPI the second-order
choice sends two messages per iteration instead of one (``tests/test_mpi.py``
counts them); the per-iteration records are the same size.

``--parts threads``: the threads backend's two workers against one serial
worker, the same 2,000 iterations (``max_iter``) of the same problem
(``make_classification``, 50 features, C=1) at 2,000, 10,000 and 40,000 rows,
best of two interleaved runs each, BLAS as configured: the per-iteration
synchronisation against the kernel rows' work.

    python benchmarks/bench_dissmo.py [--parts sets threads] [--quick] [--out FILE]   # ~7 min
"""

import argparse
import warnings

import _common as common  # noqa: I001  (puts a built checkout on sys.path)

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

from cakernels import DisSMOSVC
from cakernels.datasets import load_dataset


def svc_objective(svc, X):
    """``0.5 a^T Q a - sum(a)`` of a binary ``SVC`` from its ``dual_coef_``
    (``y_i a_i``, so ``a_i`` is its absolute value)."""
    import scipy.sparse as sp
    from sklearn.metrics.pairwise import rbf_kernel

    coef = svc.dual_coef_
    coef = np.asarray(coef.todense() if sp.issparse(coef) else coef).ravel()
    Xs = X[svc.support_]
    K = rbf_kernel(Xs, Xs, gamma=svc._gamma)
    return float(0.5 * coef @ K @ coef - np.abs(coef).sum())


def run(name, X, y, C, gamma, report, rows):
    fits = {}
    for label, make in [
        ("Dis-SMO first-order", lambda: DisSMOSVC(C=C, gamma=gamma)),
        ("Dis-SMO second-order", lambda: DisSMOSVC(C=C, gamma=gamma,
                                                   working_set="second-order")),
        ("SVC shrinking=False", lambda: SVC(C=C, gamma=gamma, shrinking=False)),
        ("SVC", lambda: SVC(C=C, gamma=gamma)),
    ]:
        est = make()
        Xf = common.libsvm_csr(X) if label.startswith("SVC") else X
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            _, sec = common.timed(est.fit, Xf, y)
        converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        iters = int(np.sum(est.n_iter_))
        if label.startswith("SVC"):
            obj = svc_objective(est, Xf) if est.classes_.size == 2 else None
        else:
            obj = float(np.sum(est.objective_))
        acc = float(np.mean(est.predict(Xf) == y))
        fits[label] = (sec, iters)
        rows.append([name, f"{C:g}", label, f"{sec:.2f}", f"{iters:,}",
                     "yes" if converged else "no (limit)",
                     "-" if obj is None else f"{obj:.6g}", f"{100 * acc:.2f}%"])
        report.line(f"  {name} C={C:g} {label}: {sec:.2f} s, {iters:,} iterations, "
                    f"converged={converged}")
    (t1, i1), (t2, i2) = fits["Dis-SMO first-order"], fits["Dis-SMO second-order"]
    return [name, f"{C:g}", f"{t1 / t2:.1f}x", f"{i1 / i2:.1f}x",
            f"{t2 / fits['SVC shrinking=False'][0]:.1f}x"]


def threads_part(report, quick):
    """The threads backend's 2 workers against serial, the same iterations."""
    from sklearn.datasets import make_classification

    rows = []
    for n in ([2000, 5000] if quick else [2000, 10_000, 40_000]):
        X, y = make_classification(n, n_features=50, random_state=0)
        best, models = {}, {}
        for _ in range(2):  # interleaved: both sides see the same machine
            for label, kw in [("serial", {}), ("threads", {"backend": "threads", "n_jobs": 2})]:
                est = DisSMOSVC(C=1.0, max_iter=2000, **kw)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    _, sec = common.timed(est.fit, X, y)
                best[label] = min(best.get(label, np.inf), sec)
                models[label] = est
        diff = float(np.max(np.abs(models["serial"].decision_function(X[:500])
                                   - models["threads"].decision_function(X[:500]))))
        rows.append([f"{n:,}", f"{int(models['serial'].n_iter_[0]):,}",
                     f"{best['serial']:.2f}", f"{best['threads']:.2f}",
                     f"{best['serial'] / best['threads']:.2f}x", f"{diff:.1e}"])
        report.line(f"  threads n={n:,}: serial {best['serial']:.2f} s, 2 threads "
                    f"{best['threads']:.2f} s")
    report.table("Dis-SMO: threads backend (2 workers) against serial, the same iterations",
                 ["rows", "iterations", "serial s", "2 threads s", "serial / threads",
                  "max decision difference"], rows,
                 note="make_classification, 50 features, C=1, max_iter=2000, best of 2 "
                      "interleaved runs, BLAS as configured (the threads backend runs one "
                      "BLAS thread per worker). The kernel rows of a block of other rows "
                      "may round otherwise, so the iterates can part at a tie.")


def main():
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    ap.add_argument("--parts", nargs="+", choices=("sets", "threads"),
                    default=["sets", "threads"])
    args = ap.parse_args()
    report = common.Report()
    report.machine(["threads    : one BLAS thread, one Dis-SMO worker (--parts threads: 2)"])
    home = common.data_home(args.data_home)
    if "threads" in args.parts:  # the defaults users run: BLAS as configured
        threads_part(report, args.quick)
    if "sets" not in args.parts:
        report.write(args.out)
        return
    rows, ratios = [], []
    with threadpool_limits(1):
        a9a = load_dataset("a9a", data_home=home, download_if_missing=False)
        n = 500 if args.quick else 2000
        X, y = a9a.data[:n], a9a.target[:n]
        for C in ([1.0, 1e4] if args.quick else [1.0, 100.0, 1e4, 1e6]):
            ratios.append(run(f"a9a {n:,}", X, y, C, 0.05, report, rows))
        for reg, C, gamma, m in [("ijcnn1", 32.0, 2.0, 49_990), ("usps", 10.0, 0.0066, 7_291)]:
            data = load_dataset(reg, data_home=home, download_if_missing=False)
            m = 1000 if args.quick else m
            ratios.append(run(f"{reg} {m:,}", data.data[:m], data.target[:m], C, gamma,
                              report, rows))
    report.table("Dis-SMO working sets against SVC (1 core, tol=1e-3)",
                 ["data", "C", "solver", "fit s", "iterations", "converged",
                  "dual objective", "train acc"], rows,
                 note="Iterations summed over the binary problems (usps: 45). SVC's objective "
                      "from its dual_coef_ (binary problems only). Dis-SMO's limit is "
                      "max_iter=-1: 100 iterations per sample, at least 10^6.")
    report.table("first-order / second-order", ["data", "C", "fit time", "iterations",
                                                 "second-order / SVC(shrinking=False) time"],
                 ratios)
    report.write(args.out)


if __name__ == "__main__":
    main()
