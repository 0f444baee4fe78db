"""SPMD check of the collective prediction and score (predict_sharded,
score_sharded) where earlier code failed: the last rank holds no test row
(the full-model SVMs raised there; a regressor's score_sharded could not
reshape), the searches delegate to best_estimator_ (they had no _predict), a
column vector of labels is raveled as score does (it broadcast to n x n and
scored 15), and R^2 of targets far from zero (the one-pass sum of squares
cancelled). Every value is compared with the one-process predict/score; what
all ranks' rows sum to (no rows, weights all 0, one row) is refused or warned
about as score does, the same on every rank."""

import json

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_classification, make_regression

from cakernels import BKRR2, BKRR2CV, CASVCCV, DCSVC, DisSMOSVC, BKMSVC

world = MPI.COMM_WORLD
R, rank = world.Get_size(), world.Get_rank()
out = []


def shard(n):
    """This rank's test rows: the last rank (of several) holds none."""
    cuts = np.linspace(0, n, max(R - 1, 1) + 1).astype(int)
    if rank >= max(R - 1, 1):
        return 0, 0
    return cuts[rank], cuts[rank + 1]


Xc, yc = make_classification(n_samples=240, n_features=5, n_informative=3, n_classes=3,
                             random_state=0)
Xt, yt = Xc[:120], yc[:120]
lo, hi = shard(60)
for est in (DCSVC(4, random_state=0), DisSMOSVC(), BKMSVC(4, random_state=0),
            CASVCCV(n_partitions=2, Cs=[1.0, 10.0], cv=2, random_state=0)):
    est.fit(Xt, yt)
    pred = np.concatenate(world.allgather(est.predict_sharded(Xc[120:][lo:hi])))
    w = np.linspace(0.5, 2.0, 60)
    score = est.score_sharded(Xc[120:][lo:hi], yc[120:][lo:hi, None], w[lo:hi])
    ref = est.best_estimator_ if hasattr(est, "best_estimator_") else est
    out.append({"check": type(est).__name__, "rows": int(hi - lo),
                "equal": bool(np.array_equal(pred, est.predict(Xc[120:180])))
                and score == ref.score(Xc[120:180], yc[120:180], w)})

Xr, yr = make_regression(n_samples=200, n_features=4, noise=1.0, random_state=1)
Xr /= Xr.std(0)
for offset in (0.0, 1e9):
    for est in (BKRR2(4, sigma=3.0, lam=1e-4, kernel="linear", random_state=0),
                BKRR2CV(n_partitions=2, sigmas=[1.0, 3.0], lams=[1e-4], cv=2,
                        random_state=0)):
        Xo = np.column_stack([Xr, np.ones(200)])  # a constant column: the offset is fitted
        est.set_params(kernel="linear") if isinstance(est, BKRR2CV) else None
        est.fit(Xo[:140], yr[:140] + offset)
        lo, hi = shard(60)
        Xq, yq = Xo[140:][lo:hi], yr[140:][lo:hi] + offset
        pred = np.concatenate(world.allgather(est.predict_sharded(Xq)))
        got = est.score_sharded(Xq, yq)
        ref = (est.best_estimator_ if hasattr(est, "best_estimator_") else est).score(
            Xo[140:], yr[140:] + offset)
        out.append({"check": f"{type(est).__name__}-{offset:g}", "got": got, "ref": ref,
                    "equal": bool(np.allclose(pred, est.predict(Xo[140:]), rtol=1e-12))
                    and abs(got - ref) <= 1e-9 * max(1.0, abs(ref))})

# gamma='scale' on sharded rows far from the origin with a tiny spread: the
# summed one-pass variance E[x^2] - E[x]^2 cancelled (320x the variance here;
# for one constant CSR feature a negative gamma and NaN decisions); two passes
from cakernels.backends import MPIBackend  # noqa: E402

Xk = 1000.0 + 1e-6 * np.random.RandomState(0).randn(60, 2)
yk = (Xk[:, 0] > 1000.0).astype(int)
lo, hi = (rank * 60 // R, (rank + 1) * 60 // R)
expect = 1.0 / (2 * Xk.var())
for est in (DisSMOSVC(gamma="scale", backend=MPIBackend(sharded=True)),
            CASVCCV(n_partitions=2, gammas=["scale"], Cs=[1.0], cv=2, random_state=0,
                    backend=MPIBackend(sharded=True))):
    est.fit(Xk[lo:hi], yk[lo:hi])
    if hasattr(est, "gamma_"):
        gammas = [est.gamma_]
    else:  # the search's gamma of every split, and of the refit
        gammas = [est.best_estimator_.gamma_]
    out.append({"check": f"scale-{type(est).__name__}", "gamma": float(gammas[0]),
                "equal": bool(all(abs(g - expect) <= 1e-6 * expect for g in gammas))})

# what every rank's test rows sum to is refused on every rank, as score refuses it:
# weights all 0 (accuracy was 0/0, R^2 1.0), no test row anywhere (R^2 1.0); one
# row in all: R^2 is NaN with scikit-learn's warning (it was 1.0 or 0.0)
import warnings  # noqa: E402

clf = DCSVC(4, random_state=0).fit(Xt, yt)
reg = BKRR2(4, sigma=3.0, lam=1e-4, random_state=0).fit(Xr[:140], yr[:140])
lo, hi = shard(60)
for name, call in (
        ("zero-weights-clf", lambda: clf.score_sharded(Xc[120:][lo:hi], yc[120:][lo:hi],
                                                       np.zeros(hi - lo))),
        ("zero-weights-reg", lambda: reg.score_sharded(Xr[140:][lo:hi], yr[140:][lo:hi],
                                                       np.zeros(hi - lo))),
        ("no-rows-clf", lambda: clf.score_sharded(Xc[:0], yc[:0])),
        ("no-rows-reg", lambda: reg.score_sharded(Xr[:0], yr[:0])),
        ("one-row-reg", lambda: reg.score_sharded(Xr[140:141] if rank == 0 else Xr[:0],
                                                  yr[140:141] if rank == 0 else yr[:0]))):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = f"returned {call()}"
        except ValueError as exc:
            got = f"{type(exc).__name__}: {exc}"
    got += "".join(f" | warning: {w.message}" for w in caught)
    every = world.allgather(got)
    out.append({"check": name, "got": got, "equal": len(set(every)) == 1})

if rank == 0:
    for line in out:
        print(json.dumps(line), flush=True)
