"""SPMD check of the fast KRR search (Algorithm 10 with cross-validation):
root mode equals the serial search; sharded mode equals brute-force refits on
its own (distributed) partitions; the search itself sends nothing and the
scores travel in the validation phase. Prints JSON lines on rank 0."""

import json

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_regression
from sklearn.metrics import r2_score
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GroupKFold, KFold

from cakernels import BKRR2CV, DCKRRCV
from cakernels.backends import MPIBackend

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
X, y = make_regression(n_samples=360, n_features=4, noise=5.0, random_state=0)
X = (X - X.mean(0)) / X.std(0)
y = y / y.std()
cv = KFold(3, shuffle=True, random_state=1)
splits = list(cv.split(X))
kw = dict(n_partitions=4, sigmas=[0.7, 2.0], lams=[1e-4, 1e-2], cv=cv, random_state=0)


def brute(search, splits=splits, w=None, X=X, y=y):
    """r2 of refits of every partition on its training rows of every split
    (with weights ``w``: KernelRidge's weighted problem on the partitions of
    the rows of positive weight, and the weighted r2). A partition without
    training rows in a split has no model there: its rows go to the nearest
    partition that has (the average leaves it out)."""
    part = search.partitioner_
    w = np.ones(len(y)) if w is None else w
    labels = np.full(len(y), -1)
    labels[w > 0] = part.labels_
    average = search._combine_mode == "average"
    out = []
    for params in search.cv_results_["params"]:
        gamma = 1.0 / (2 * params["sigma"] ** 2)
        row = []
        for train, val in splits:
            tr = np.zeros(len(y), bool)
            tr[train] = True
            P = search.partition_sizes_.size
            trained = np.flatnonzero([np.any((labels == j) & tr) for j in range(P)])
            preds = np.zeros((P, len(val)))
            for j in trained:
                T = np.flatnonzero((labels == j) & tr)
                W = np.diag(w[T])
                K = W @ rbf_kernel(X[T], X[T], gamma=gamma) + params["lam"] * w[T].sum() * np.eye(
                    T.size)
                preds[j] = rbf_kernel(X[val], X[T], gamma=gamma) @ np.linalg.solve(K, W @ y[T])
            route = part.assign(X[val])
            lost = ~np.isin(route, trained)
            if lost.any():
                d = ((X[val][lost][:, None, :] - part.centers_[trained][None]) ** 2).sum(-1)
                route[lost] = trained[np.argmin(d, axis=1)]
            pred = preds[trained].mean(0) if average else preds[route, np.arange(len(val))]
            row.append(r2_score(y[val], pred, sample_weight=w[val]))
        out.append(row)
    return np.array(out)


def phases(search):
    by = search.fit_stats_["comm"]["total"]["by_phase"]
    return {p: by[p]["bytes"] for p in by}


def three_modes(name, cls, params, X, y, brute_scores, rows=None, relative=True,
                exact=False, n_predict=20):
    """Fit ``cls(**params)`` serially, in root mode and in sharded mode (every
    rank its contiguous block; ``rows``: per-row fit arguments such as
    ``sample_weight`` or ``groups``, rank 0's in root mode and every rank's own
    block in sharded mode) and print on rank 0: root mode equals serial (to
    1e-10, or bit for bit with ``exact``), sharded mode's split scores against
    ``brute_scores(sharded)`` (relative or absolute), the same best parameters
    everywhere, and the bytes per phase."""
    rows = rows or {}
    serial = cls(**params).fit(X, y, **rows)
    root = cls(backend="mpi", **params).fit(
        X if rank == 0 else None, y if rank == 0 else None,
        **{k: v if rank == 0 else None for k, v in rows.items()})
    lo, hi = rank * len(X) // size, (rank + 1) * len(X) // size
    sharded = cls(backend=MPIBackend(sharded=True), **params).fit(
        X[lo:hi], y[lo:hi], **{k: v[lo:hi] for k, v in rows.items()})
    got = np.column_stack([sharded.cv_results_[f"split{f}_test_score"]
                           for f in range(sharded.n_splits_)])
    err = np.abs(got - brute_scores(sharded))
    same = (np.array_equal if exact else
            lambda a, b: np.allclose(a, b, rtol=1e-10))
    best = comm.allgather((root.best_params_, sharded.best_params_))
    line = {"check": name,
            "root_equal": bool(same(root.cv_results_["mean_test_score"],
                                    serial.cv_results_["mean_test_score"])),
            "sharded_rel": float(np.max(err / np.abs(got) if relative else err)),
            "everywhere": all(b == best[0] for b in best),
            "root_phases": phases(root), "sharded_phases": phases(sharded),
            "root_predict_equal": bool(same(root.predict(X[:n_predict]),
                                            serial.predict(X[:n_predict]))),
            "sizes": [root.partition_sizes_.tolist(), sharded.partition_sizes_.tolist()]}
    if "sample_weight" in rows:  # rows of weight 0 are left out of the partitions
        line["partitioned"] = [int(root.partition_sizes_.sum()),
                               int(sharded.partition_sizes_.sum())]
    if rank == 0:
        print(json.dumps(line), flush=True)


for cls in (BKRR2CV, DCKRRCV):
    three_modes(cls.__name__, cls, kw, X, y, brute)

# group splits: root mode takes rank 0's groups, sharded mode every rank's own
groups = np.arange(len(y)) % 7
three_modes("BKRR2CV-groups", BKRR2CV, dict(kw, cv=GroupKFold(3)), X, y,
            lambda search: brute(search, list(GroupKFold(3).split(X, y, groups))),
            rows={"groups": groups})

# an outlier: a K-means partition of one row has no training row in the split it
# validates; its rows go to the nearest partition with training rows (the average
# leaves it out), in every mode (the training counts are summed over the ranks)
from cakernels import KKRR2CV, KKRRCV  # noqa: E402

Xo = X.copy()
Xo[0] += 40.0
for cls in (KKRR2CV, KKRRCV):
    three_modes(f"{cls.__name__}-outlier", cls, kw, Xo, y,
                lambda search: brute(search, X=Xo))

# closed-form leave-one-out: the rows travel to their nearest centre's rank as in
# k-fold; root mode equals serial, sharded mode refits without each row
def brute_loo(search):
    part = search.partitioner_
    labels, route = np.asarray(part.labels_), part.assign(X)
    out = []
    for params in search.cv_results_["params"]:
        gamma = 1.0 / (2 * params["sigma"] ** 2)
        pred = np.zeros(len(y))
        for j in range(search.partition_sizes_.size):
            T = np.flatnonzero(labels == j)
            K = rbf_kernel(X[T], X[T], gamma=gamma)
            full = np.linalg.solve(K + params["lam"] * T.size * np.eye(T.size), y[T])
            for i in np.flatnonzero(route == j):
                if labels[i] == j:
                    keep = T != i
                    a = np.linalg.solve(K[np.ix_(keep, keep)] + params["lam"] * (T.size - 1)
                                        * np.eye(T.size - 1), y[T][keep])
                    pred[i] = (rbf_kernel(X[i:i + 1], X[T][keep], gamma=gamma) @ a)[0]
                else:
                    pred[i] = (rbf_kernel(X[i:i + 1], X[T], gamma=gamma) @ full)[0]
        out.append(r2_score(y, pred))
    return np.array(out)


three_modes("BKRR2CV-loo", BKRR2CV, dict(kw, cv="loo"), X, y,
            lambda search: brute_loo(search)[:, None])

# sample weights (zeros included): root mode equals serial, sharded mode weighted refits
wy = np.where(np.arange(len(y)) % 5 == 0, 0.0, 0.5 + (np.arange(len(y)) % 3))
three_modes("BKRR2CV-weights", BKRR2CV, kw, X, y, lambda search: brute(search, w=wy),
            rows={"sample_weight": wy})

# the SVM search: root mode equals serial (the warm-started SMO path is deterministic)
from sklearn.datasets import make_classification  # noqa: E402

from cakernels import BKMSVCCV  # noqa: E402

Xc, yc = make_classification(n_samples=300, n_features=5, n_classes=3, n_informative=3,
                             random_state=0)
skw = dict(n_partitions=4, Cs=[0.5, 5.0], gammas=[0.1, "scale"], cv=3, scoring="f1_macro",
           random_state=0)
serial = BKMSVCCV(**skw).fit(Xc, yc)
root = BKMSVCCV(backend="mpi", **skw).fit(Xc if rank == 0 else None, yc if rank == 0 else None)
best = comm.allgather(root.best_params_)
line = {"check": "BKMSVCCV",
        "root_equal": bool(np.array_equal(root.cv_results_["mean_test_score"],
                                          serial.cv_results_["mean_test_score"])),
        "everywhere": all(b == best[0] for b in best), "root_phases": phases(root),
        "root_predict_equal": bool(np.array_equal(root.predict(Xc), serial.predict(Xc)))}
if rank == 0:
    print(json.dumps(line), flush=True)

# zero sample weights in the SVM search: those rows are not partitioned (as in
# the estimators' fit) but are validated; root mode equals serial, sharded mode
# equals LIBSVM refits of its own partitions' weighted rows
from sklearn.model_selection import StratifiedKFold  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

from cakernels import CASVCCV  # noqa: E402

Xw, yw = make_classification(n_samples=240, n_features=5, random_state=1)
ww = np.where(np.arange(len(yw)) % 3 == 0, 0.0, 1.0 + (np.arange(len(yw)) % 5) / 4)
wcv = StratifiedKFold(3, shuffle=True, random_state=0)
wkw = dict(n_partitions=4, Cs=[0.5, 5.0], gammas=[0.1, "scale"], cv=wcv, solver="libsvm",
           random_state=0)


def brute_svm(search):
    labels = np.full(len(yw), -1)
    labels[ww > 0] = search.partitioner_.labels_
    out = []
    for params in search.cv_results_["params"]:
        row = []
        for train, val in wcv.split(Xw, yw):
            gamma = params["gamma"]
            if gamma == "scale":
                gamma = 1.0 / (Xw.shape[1] * Xw[train].var())
            tr = np.zeros(len(yw), bool)
            tr[train] = True
            route = search.partitioner_.assign(Xw[val])
            pred = np.empty(len(val), dtype=yw.dtype)
            for j in range(search.partition_sizes_.size):
                T = np.flatnonzero((labels == j) & tr)
                here = route == j
                if here.any():
                    svc = SVC(C=params["C"], gamma=gamma).fit(Xw[T], yw[T], sample_weight=ww[T])
                    pred[here] = svc.predict(Xw[val][here])
            row.append(np.average(pred == yw[val], weights=ww[val]))
        out.append(row)
    return np.array(out)


three_modes("CASVCCV-weights", CASVCCV, wkw, Xw, yw, brute_svm, rows={"sample_weight": ww},
            relative=False, exact=True, n_predict=len(Xw))

# a generator of splits (or a user's splitter object): its repr shows an address that
# differs between ranks; it was refused as "other parameters than rank 0"
gen_serial = BKRR2CV(**dict(kw, cv=iter(splits))).fit(X, y)
gen_root = BKRR2CV(backend="mpi", **dict(kw, cv=iter(splits))).fit(
    X if rank == 0 else None, y if rank == 0 else None)
best = comm.allgather(gen_root.best_params_)
if rank == 0:
    print(json.dumps({
        "check": "BKRR2CV-generator",
        "root_equal": bool(np.allclose(gen_root.cv_results_["mean_test_score"],
                                       gen_serial.cv_results_["mean_test_score"], rtol=1e-10)),
        "everywhere": all(b == best[0] for b in best),
        "root_predict_equal": bool(np.allclose(gen_root.predict(X[:20]),
                                               gen_serial.predict(X[:20]), rtol=1e-10)),
        "root_phases": phases(gen_root)}), flush=True)
