"""SPMD check of DKRR (ScaLAPACK) against scikit-learn's KernelRidge, and its
memory refusal. ``spmd_dkrr.py`` prints JSON lines on rank 0."""

import json
import re
import warnings

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_regression
from sklearn.kernel_ridge import KernelRidge

import cakernels._memory as memory_module
from cakernels.backends import MPIBackend
from cakernels.kernel_ridge import DKRR

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
X, y = make_regression(n_samples=700, n_features=6, noise=1.0, random_state=0)
Y = np.column_stack([y, np.sin(y / 50)])
sigma, lam = 4.0, 1e-5


def rel(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


for name, targets in (("single", y), ("multi", Y)):
    ref = KernelRidge(kernel="rbf", gamma=1 / (2 * sigma**2), alpha=lam * len(X)).fit(X, targets)
    root = DKRR(sigma, lam, backend="mpi", block_size=64).fit(
        X if rank == 0 else None, targets if rank == 0 else None)
    lo, hi = rank * len(X) // size, (rank + 1) * len(X) // size
    sharded = DKRR(sigma, lam, backend=MPIBackend(sharded=True), block_size=64).fit(
        X[lo:hi], targets[lo:hi])
    errs = [rel(m.predict(X), ref.predict(X)) for m in (root, sharded)]
    same = len({m.predict(X[:20]).tobytes() for m in (root,)}) == 1
    if rank == 0:
        print(json.dumps({"check": name, "rel_root": errs[0], "rel_sharded": errs[1],
                          "grid": list(root.grid_), "memory_per_rank": root.memory_per_rank_,
                          "bytes": root.fit_stats_["comm_bytes"], "same": same}), flush=True)

# sample weights (zeros included): KernelRidge with alpha = lam * sum(w)
w = np.where(np.arange(len(X)) % 4 == 0, 0.0, 0.5 + np.arange(len(X)) % 3)
ref = KernelRidge(kernel="rbf", gamma=1 / (2 * sigma**2), alpha=lam * w.sum()).fit(
    X, Y, sample_weight=w)
root = DKRR(sigma, lam, backend="mpi", block_size=64).fit(
    X if rank == 0 else None, Y if rank == 0 else None, sample_weight=w if rank == 0 else None)
lo, hi = rank * len(X) // size, (rank + 1) * len(X) // size
sharded = DKRR(sigma, lam, backend=MPIBackend(sharded=True), block_size=64).fit(
    X[lo:hi], Y[lo:hi], sample_weight=w[lo:hi])
errs = [rel(m.predict(X), ref.predict(X)) for m in (root, sharded)]
if rank == 0:
    print(json.dumps({"check": "weights", "rel_root": errs[0], "rel_sharded": errs[1],
                      "grid": list(root.grid_), "memory_per_rank": root.memory_per_rank_,
                      "kept": [root.X_fit_.shape[0], sharded.X_fit_.shape[0]]}), flush=True)

# weights whose sum overflows (lam * sum(w) did): the model of the weights scaled down,
# as the one-process fit's (it raised under MPI only)
big = DKRR(sigma, lam, backend="mpi", block_size=64).fit(
    X if rank == 0 else None, Y if rank == 0 else None,
    sample_weight=w * 1e307 if rank == 0 else None)
if rank == 0:
    print(json.dumps({"check": "huge-weights", "rel": rel(big.predict(X), root.predict(X))}),
          flush=True)

# sharded: one rank's shard may weigh 0 everywhere (DKRR gathers every row)
wz = w.copy()
if size > 1:
    wz[(size - 1) * len(X) // size:] = 0.0
ref = KernelRidge(kernel="rbf", gamma=1 / (2 * sigma**2), alpha=lam * wz.sum()).fit(
    X, Y, sample_weight=wz)
zs = DKRR(sigma, lam, backend=MPIBackend(sharded=True), block_size=64).fit(
    X[lo:hi], Y[lo:hi], sample_weight=wz[lo:hi])
if rank == 0:
    print(json.dumps({"check": "zero-shard", "rel": rel(zs.predict(X), ref.predict(X))}),
          flush=True)

# more targets than rows in a block: every right-hand side lives on process column 0
# (blocks of block_size columns put the targets beyond it on other process columns,
# where they were never read)
Xs, Ys = X[:90], np.column_stack([y[:90] * k for k in (1.0, -0.5, 2.0, 0.1, 3.0)])
ref = KernelRidge(kernel="rbf", gamma=1 / (2 * sigma**2), alpha=lam * len(Xs)).fit(Xs, Ys)
lo9, hi9 = rank * len(Xs) // size, (rank + 1) * len(Xs) // size
many = [DKRR(sigma, lam, backend="mpi", block_size=2).fit(
            Xs if rank == 0 else None, Ys if rank == 0 else None),
        DKRR(sigma, lam, backend=MPIBackend(sharded=True), block_size=2).fit(
            Xs[lo9:hi9], Ys[lo9:hi9])]
if rank == 0:
    print(json.dumps({"check": "many-targets",
                      "rel": [rel(m.predict(Xs), ref.predict(Xs)) for m in many]}), flush=True)

def errors_of_root_fit(check, Xr, yr):
    """Fit DKRR in root mode; rank 0 prints every rank's error message (None: none)."""
    try:
        DKRR(sigma, lam, backend="mpi").fit(Xr if rank == 0 else None, yr if rank == 0 else None)
        error = None
    except ValueError as exc:
        error = str(exc)
    errors = comm.gather(error, root=0)
    if rank == 0:
        print(json.dumps({"check": check, "messages": errors}), flush=True)


# a row whose squared norm overflows: the one-process fit's error, on every rank
big = X[:40].copy()
big[3, 0] = 1e200
errors_of_root_fit("magnitude", big, y[:40])

# a problem that cannot fit is refused on every rank, before anything is allocated
available_bytes = memory_module.available_bytes
memory_module.available_bytes = lambda: 2**20  # pretend 1 MiB
errors_of_root_fit("memory", X, y)
memory_module.available_bytes = available_bytes


# the condition estimate (pdpocon): an ill-conditioned system warns on every rank as
# the one-process fit does, with about the same reciprocal condition number; a
# numerically singular one is an error on every rank (the one-process fit falls back
# to least squares; there is no distributed one)
def rconds(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit()
            error = None
        except ValueError as exc:
            error = str(exc)
    found = [re.search(r"reciprocal condition number ([-+.e0-9]+)", str(w.message))
             for w in caught if "ill-conditioned" in str(w.message)]
    return [float(f.group(1)) for f in found if f], error


Xc, yc = X[:300], y[:300]
for lam_c in (1e-9, 1e-13, 1e-16):
    serial, _ = rconds(lambda: DKRR(30.0, lam_c).fit(Xc, yc))
    mine = rconds(lambda: DKRR(30.0, lam_c, backend="mpi", block_size=32).fit(
        Xc if rank == 0 else None, yc if rank == 0 else None))
    everyone = comm.gather(mine, root=0)
    if rank == 0:
        print(json.dumps({"check": f"rcond-{lam_c:g}", "serial": serial,
                          "ranks": everyone}), flush=True)


# feature names: a DataFrame fit sets them on every rank, a refit on an array removes
# them on every rank (rank 0's validation did; the other ranks kept the old names)
import pandas as pd  # noqa: E402

names_model = DKRR(sigma, lam, backend="mpi", block_size=64)
states = []
for data in (pd.DataFrame(X[:200], columns=[f"f{j}" for j in range(X.shape[1])]), X[:200]):
    names_model.fit(data if rank == 0 else None, y[:200] if rank == 0 else None)
    names = getattr(names_model, "feature_names_in_", None)
    states.append(None if names is None else list(names))
everyone = comm.gather(states, root=0)
if rank == 0:
    print(json.dumps({"check": "feature-names", "ranks": everyone}), flush=True)

# kernel values that overflow off the diagonal (K(x, x) = 1, K(x, -x) = inf): the same
# FloatingPointError on every rank (ScaLAPACK's factorization had run on inf)
rng_o = np.random.RandomState(0)
Zo = rng_o.randn(60, 3)
Zo /= np.linalg.norm(Zo, axis=1, keepdims=True)
Xo, yo = np.vstack([Zo, -Zo]), np.r_[np.zeros(60), np.ones(60)]
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DKRR(0.0707, 1e-3, kernel="poly", coef0=-99.0, degree=140, backend="mpi",
             block_size=16).fit(Xo if rank == 0 else None, yo if rank == 0 else None)
    overflow = None
except FloatingPointError as exc:
    overflow = f"{type(exc).__name__}: {exc}"
everyone = comm.gather(overflow, root=0)
if rank == 0:
    print(json.dumps({"check": "kernel-overflow", "ranks": everyone}), flush=True)

# the one-process fit's diagnoses on every rank: a polynomial diagonal that overflows
# (was: "... though K(x, x) is finite"), coefficients that overflow (was: a NaN
# model); and a block larger than n is one block (was: np.arange(block_size))
rng_d = np.random.RandomState(1)
Xd, yd = rng_d.randn(40, 3) * 20, rng_d.randn(40)
outcomes = []
for kw, target in ((dict(kernel="poly", degree=300, sigma=0.5), yd),
                   (dict(sigma=4.0, lam=1e-3), np.where(yd > 0, 1e308, -1e308)),
                   (dict(sigma=4.0, block_size=10**10), yd)):
    kw = {"lam": 1e-3, **kw}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = DKRR(backend="mpi", **kw).fit(Xd if rank == 0 else None,
                                                target if rank == 0 else None)
    except FloatingPointError as exc:  # (the fit under MPI's, not the reference's)
        outcomes.append(f"{type(exc).__name__}: {exc}")
        continue
    outcomes.append(rel(est.predict(Xd), DKRR(**kw).fit(Xd, target).predict(Xd)))
everyone = comm.gather(outcomes, root=0)
if rank == 0:
    print(json.dumps({"check": "one-process-diagnoses", "ranks": everyone}), flush=True)

# partitioned KRR: the ranks of a node solve at the same time from the same memory.
# Each rank's one partition fits alone, all of them together do not: refused on every
# rank before any row moves (each rank had checked its own solves only)
from cakernels.kernel_ridge import BKRR2  # noqa: E402

m_part = len(X) // size
per_rank = 2 * 8.0 * m_part**2
outcomes = []
for factor in (1 / 1.5, 1.1):  # the node's memory 1.5x too small, then room for all
    memory_module.available_bytes = lambda f=factor: per_rank * size / 0.8 * f
    try:
        BKRR2(n_partitions=size, sigma=sigma, lam=lam, backend="mpi", random_state=0).fit(
            X if rank == 0 else None, y if rank == 0 else None)
        outcomes.append(None)
    except ValueError as exc:
        outcomes.append(str(exc))
node_error, node_ok = outcomes
memory_module.available_bytes = available_bytes
everyone = comm.gather((node_error, node_ok), root=0)
if rank == 0:
    print(json.dumps({"check": "node-memory", "ranks": everyone}), flush=True)

# an unexpected failure on one rank after the rows are gathered (out of memory, say): in
# its kernel block (before the collective factorisation) or in the model's row norms
# (after it): every rank raises, the failing one its own exception (the others waited in
# ScaLAPACK or in an allgather for good); a sharded scalar weight of 0 is one rank's
# rows of weight 0, as an array of zeros (it was refused)
import cakernels.kernel_ridge._dkrr as dkrr_module  # noqa: E402

outcomes = []
for name in ("kernel_block", "row_sq_norms"):
    real = getattr(dkrr_module, name)

    def failing(*args, real=real, **kwargs):
        if rank == size - 1:
            raise MemoryError("simulated: this rank's memory ran out")
        return real(*args, **kwargs)

    setattr(dkrr_module, name, failing)
    try:
        DKRR(sigma, lam, backend="mpi", block_size=64).fit(
            X[:200] if rank == 0 else None, y[:200] if rank == 0 else None)
        outcomes.append(None)
    except Exception as exc:
        outcomes.append(f"{type(exc).__name__}: {exc}")
    finally:
        setattr(dkrr_module, name, real)
again = DKRR(sigma, lam, backend="mpi", block_size=64).fit(
    X[:200] if rank == 0 else None, y[:200] if rank == 0 else None)
outcomes.append(rel(again.predict(X[:200]),  # the next fit is whole
                    KernelRidge(kernel="rbf", gamma=1 / (2 * sigma**2),
                                alpha=lam * 200).fit(X[:200], y[:200]).predict(X[:200])))
lo2, hi2 = rank * 200 // size, (rank + 1) * 200 // size
wz2 = np.ones(200)
if size > 1:
    wz2[(size - 1) * 200 // size:] = 0.0
ref = KernelRidge(kernel="rbf", gamma=1 / (2 * sigma**2), alpha=lam * wz2.sum()).fit(
    X[:200], y[:200], sample_weight=wz2)
scalar = DKRR(sigma, lam, backend=MPIBackend(sharded=True), block_size=64).fit(
    X[lo2:hi2], y[lo2:hi2],
    sample_weight=0.0 if (size > 1 and rank == size - 1) else 1.0)
outcomes.append(rel(scalar.predict(X[:200]), ref.predict(X[:200])))
everyone = comm.gather(outcomes, root=0)
if rank == 0:
    print(json.dumps({"check": "one-rank-failure", "ranks": everyone}), flush=True)
