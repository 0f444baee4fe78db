"""SPMD check of the multi-level SVMs and Dis-SMO under MPI against serial.

Run as ``mpiexec -n P python -m mpi4py spmd_multilevel.py OUTDIR``; rank 0
prints one JSON line per check and pickles the root-mode models into OUTDIR.
"""

import hashlib
import json
import pickle
import sys

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI
from sklearn.datasets import make_classification

from cakernels import DCSVC, CascadeSVC, DCFilterSVC, DisSMOSVC
from cakernels.backends import MPIBackend

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
outdir = sys.argv[1]

Xb, yb = make_classification(n_samples=400, n_features=6, flip_y=0.05, random_state=1)
Xc, yc = make_classification(n_samples=360, n_features=8, n_informative=5, n_classes=3,
                             random_state=0)
SVM = {"kernel": "rbf", "C": 4.0, "gamma": 0.2}
# every alpha at its bound C: the intercept is the middle of the ranks' feasible range
Xn, yn = make_classification(n_samples=200, n_features=4, flip_y=0.3, random_state=0)
CASES = [
    ("CascadeSVC", lambda b: CascadeSVC(5, backend=b, random_state=0, **SVM), Xb, yb),
    ("CascadeSVC-passes", lambda b: CascadeSVC(4, n_passes=3, backend=b, random_state=0,
                                               **SVM), Xb, yb),
    ("DCSVC", lambda b: DCSVC(4, backend=b, random_state=0, **SVM), Xb, yb),
    ("DCSVC-early", lambda b: DCSVC(4, predict_layer=2, backend=b, random_state=0, **SVM),
     Xb, yb),
    ("DCFilterSVC-multiclass", lambda b: DCFilterSVC(4, backend=b, random_state=0, **SVM),
     Xc, yc),
    ("CascadeSVC-csr-weighted", lambda b: CascadeSVC(4, backend=b, random_state=0,
                                                     class_weight="balanced", **SVM),
     sp.csr_matrix(Xc), yc),
    ("DisSMOSVC", lambda b: DisSMOSVC(backend=b, **SVM), Xb, yb),
    ("DisSMOSVC-csr-multiclass", lambda b: DisSMOSVC(backend=b, class_weight="balanced",
                                                     **SVM), sp.csr_matrix(Xc), yc),
    ("DisSMOSVC-second-order-csr", lambda b: DisSMOSVC(backend=b, working_set="second-order",
                                                       **SVM), sp.csr_matrix(Xb), yb),
    ("DisSMOSVC-no-free", lambda b: DisSMOSVC(backend=b, C=1e-3, gamma=0.5, tol=1e-6), Xn, yn),
]


def report(**fields):
    if rank == 0:
        print(json.dumps(fields), flush=True)


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def same_everywhere(values):
    digest = hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()
    return all(d == digest for d in comm.allgather(digest))


bounds = np.linspace(0, 1, size + 1)
for name, make, X, y in CASES:
    n = X.shape[0]
    serial = make("serial").fit(X, y)
    ref, ref_dec = serial.predict(X), serial.decision_function(X)
    root = make("mpi").fit(X if rank == 0 else None, y if rank == 0 else None)
    pred, dec = root.predict(X), root.decision_function(X)
    stats = root.fit_stats_
    layers = stats.get("layers", [])
    report(check="root", name=name, pred_equal=bool(np.array_equal(pred, ref)),
           dec_rel=rel(dec, ref_dec), everywhere=same_everywhere(dec),
           objective_rel=rel(np.sort(np.ravel(root.objective_)),
                             np.sort(np.ravel(serial.objective_))),
           support_equal=bool(np.array_equal(root.support_, serial.support_)),
           n_iter_equal=bool(np.array_equal(root.n_iter_, serial.n_iter_)),
           layer_messages=[ls["comm_messages"] for ls in layers],
           layer_bytes=[ls["comm_bytes"] for ls in layers],
           owners=stats.get("owners"), training=stats["comm"]["total"]["by_phase"]
           .get("training", {}), n_iter=np.ravel(root.n_iter_).tolist(),
           n_workers=stats.get("n_workers"))
    if rank == 0:
        with open(f"{outdir}/{name}.pkl", "wb") as fh:
            pickle.dump({"model": root, "X": X, "pred": pred}, fh)
    # sharded mode: every rank its own contiguous rows
    lo, hi = int(bounds[rank] * n), int(bounds[rank + 1] * n)
    sh = make(MPIBackend(sharded=True)).fit(X[lo:hi], y[lo:hi])
    whole = sh.predict(X)
    sh_layers = sh.fit_stats_.get("layers")
    report(check="sharded", name=name, everywhere=same_everywhere(sh.decision_function(X)),
           # one tree (a binary problem, one pass): the first layer holds every row
           first_layer_samples=(sh_layers[0]["samples_in"] if sh_layers and sh.classes_.size
                                == 2 and getattr(sh, "n_passes_", 1) == 1 else None),
           score=float(np.mean(whole == y)), serial_score=float(np.mean(ref == y)),
           objective_rel=rel(np.sort(np.ravel(sh.objective_)),
                             np.sort(np.ravel(serial.objective_))),
           n_samples=int(sum(comm.allgather(hi - lo))))

# rows of zero sample_weight take no part: a tree fitted with them equals the tree
# of the other rows (support_ in the caller's numbering), in root and sharded mode
wz = np.ones(len(yc))
wz[1::3] = 0.0
keep = np.flatnonzero(wz > 0)
lo, hi = int(bounds[rank] * len(yc)), int(bounds[rank + 1] * len(yc))
mine = np.flatnonzero(wz[lo:hi] > 0)
offsets = np.cumsum([0] + comm.allgather(int(mine.size)))
zero = {}
for label, backend in (("root", "mpi"), ("sharded", MPIBackend(sharded=True))):
    make = lambda: DCFilterSVC(4, backend=backend, random_state=0, **SVM)  # noqa: E731
    if label == "root":
        a = make().fit(Xc if rank == 0 else None, yc if rank == 0 else None,
                       sample_weight=wz if rank == 0 else None)
        b = make().fit(Xc[keep] if rank == 0 else None, yc[keep] if rank == 0 else None)
        b_support = keep[b.support_]
    else:
        a = make().fit(Xc[lo:hi], yc[lo:hi], sample_weight=wz[lo:hi])
        b = make().fit(Xc[lo:hi][mine], yc[lo:hi][mine])
        # b numbers the kept rows shard by shard: back to the callers' global rows
        rows = np.concatenate(comm.allgather(lo + mine))
        b_support = rows[b.support_]
    zero[label] = bool(np.array_equal(a.decision_function(Xc), b.decision_function(Xc))
                       and np.array_equal(a.support_, b_support))
report(check="zero-weights", **zero)
