"""Native SMO against scikit-learn's SVC (LIBSVM), one binary problem.

On ijcnn1 (C=32, gamma=2, tol=1e-3) and covtype.5000 from the local copies
(C=8, gamma=2 -- dense, 54 features), fit time, iterations and test accuracy
of

* ``SVC`` (LIBSVM, shrinking on, cache 200 MB),
* ``smo_fit`` (this package's SMO, same problem, same cache).

Asy-GCD has its own script, ``bench_asygcd.py``.

All on one BLAS thread. Goals of the issue printed next to the ratios:
native SMO at most 1.0x SVC's fit time with the same accuracy (within 0.1%).

    python benchmarks/bench_smo.py [--quick] [--out FILE]
"""

import argparse

import _common as common  # noqa: I001  (puts a built checkout on sys.path)
import numpy as np
from sklearn.svm import SVC
from threadpoolctl import threadpool_limits

from cakernels._kernels import kernel_dot
from cakernels._solvers.smo import smo_fit
from cakernels.datasets import load_dataset


def _datasets(home, quick):
    n = 5000 if quick else None
    kw = dict(data_home=home, return_X_y=True, download_if_missing=False)
    X, y = load_dataset("ijcnn1", n_samples=n, random_state=0, **kw)
    Xt, yt = load_dataset("ijcnn1", subset="test", n_samples=n or 20000, random_state=0, **kw)
    yield "ijcnn1", X, y, Xt, yt, 32.0, 2.0
    X, y = load_dataset("covtype_5000", **kw)
    Xt, yt = load_dataset("covtype_5000", subset="test", **kw)
    yield "covtype_5000", X, y, Xt, yt, 8.0, 2.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common.add_common_args(ap)
    args = ap.parse_args()
    rep = common.Report()
    rep.machine()
    rows, goals = [], []
    with threadpool_limits(1):
        for name, X, y, Xt, yt, C, gamma in _datasets(common.data_home(args.data_home),
                                                      args.quick):
            y_pm = np.where(y > 0, 1.0, -1.0)
            yt_pm = np.where(yt > 0, 1.0, -1.0)
            svc, t_svc = common.timed(SVC(C=C, gamma=gamma).fit, X, y_pm)
            acc_svc = svc.score(Xt, yt_pm)
            rows.append((name, "sklearn SVC (LIBSVM)", f"{t_svc:.2f}", int(svc.n_iter_[0]),
                         f"{100 * acc_svc:.2f}%", "1.00x"))
            res, t_smo = common.timed(smo_fit, X, y_pm, C, gamma=gamma)
            sv = res["support"]
            f = kernel_dot(Xt, X[sv], res["alpha"][sv] * y_pm[sv], kernel="rbf",
                           gamma=gamma) + res["intercept"]
            acc_smo = np.mean(np.where(f > 0, 1.0, -1.0) == yt_pm)
            rows.append((name, "cakernels smo_fit", f"{t_smo:.2f}", res["n_iter"],
                         f"{100 * acc_smo:.2f}%", f"{t_smo / t_svc:.2f}x"))
            goals.append((f"{name}: SMO fit <= 1.0x SVC", f"{t_smo / t_svc:.2f}x",
                          common.pass_miss(t_smo <= t_svc)))
            goals.append((f"{name}: SMO accuracy within 0.1%",
                          f"{100 * (acc_smo - acc_svc):+.3f} pts",
                          common.pass_miss(abs(acc_smo - acc_svc) <= 0.001)))
    rep.table("fit on one binary problem", ["dataset", "solver", "fit s", "iterations",
                                            "test acc", "time vs SVC"], rows)
    rep.table("goals (informational)", ["goal", "measured", "status"], goals)
    rep.line(f"\nload average at end: {common.load_avg()}")
    rep.write(args.out)


if __name__ == "__main__":
    main()
