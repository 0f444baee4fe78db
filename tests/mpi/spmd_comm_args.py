"""SPMD check of the communicator arguments: what is not an mpi4py
intra-communicator is a clear error on every rank (an intercommunicator was
accepted and the ranks ended with different models; other objects failed
with AttributeErrors), a cakernels Communicator is unwrapped, and a
partitioner's fit_sharded takes a raw mpi4py communicator and equals fit on
the stacked shards."""

import json

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_classification

from cakernels import CASVC, PartitionedSVC
from cakernels.backends import Communicator, MPIBackend
from cakernels.partition import FCFSPartitioner, KBalancePartitioner

world = MPI.COMM_WORLD
R, rank = world.Get_size(), world.Get_rank()
X, y = make_classification(n_samples=200, n_features=5, random_state=0)
lo, hi = rank * 200 // R, (rank + 1) * 200 // R
out = []


def outcome(call):
    try:
        call()
        return "ok"
    except (TypeError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"


model = CASVC(4, random_state=0).fit(X, y)
cases = {
    "backend-str": lambda: CASVC(4, backend=MPIBackend(comm="world", sharded=True)).fit(
        X[lo:hi], y[lo:hi]),
    "predict-int": lambda: model.predict_sharded(X[lo:hi], comm=42),
    "null": lambda: CASVC(4, backend=MPIBackend(comm=MPI.COMM_NULL)).fit(X, y),
    "partition-str": lambda: KBalancePartitioner(4).fit_sharded("world", X[lo:hi]),
}
if R > 1:
    def inter():
        local = world.Split(rank % 2, rank)
        ic = local.Create_intercomm(0, world, 1 - rank % 2, tag=7)
        try:
            CASVC(4, random_state=0, backend=MPIBackend(comm=ic, sharded=True)).fit(
                X[lo:hi], y[lo:hi])
        finally:
            ic.Free()
            local.Free()
    cases["intercomm"] = inter
for name, call in cases.items():
    got = outcome(call)
    out.append({"check": name, "got": got, "same": len(set(world.allgather(got))) == 1})

# a cakernels Communicator is unwrapped; a raw comm in fit_sharded equals fit
wrapped = CASVC(4, random_state=0, backend=MPIBackend(comm=Communicator(world),
                                                      sharded=True)).fit(X[lo:hi], y[lo:hi])
plain = CASVC(4, random_state=0, backend=MPIBackend(sharded=True)).fit(X[lo:hi], y[lo:hi])
out.append({"check": "unwrapped", "got": "ok", "same": bool(np.array_equal(
    wrapped.decision_function(X), plain.decision_function(X)))})
part = FCFSPartitioner(4, random_state=0).fit_sharded(world, X[lo:hi])
ref = FCFSPartitioner(4, random_state=0).fit(X)
out.append({"check": "fit-sharded-raw-comm", "got": "ok", "same": bool(
    np.array_equal(part.labels_, ref.labels_)
    and np.allclose(part.centers_, ref.centers_, rtol=1e-12, atol=1e-12))})  # sums per rank
# an empty shard's storage does not matter (a dense (0, d) array among CSR shards)
import scipy.sparse as sp  # noqa: E402

empty = R > 1 and rank == R - 1
rows = X[:0] if empty else X[lo:hi]
local = rows if empty else sp.csr_matrix(rows)  # the empty shard: a dense (0, 5) array
part = FCFSPartitioner(4, random_state=0).fit_sharded(world, local)
ref = FCFSPartitioner(4, random_state=0).fit(np.vstack(world.allgather(rows)))
out.append({"check": "empty-dense-shard", "got": "ok",
            "same": bool(np.array_equal(part.labels_, ref.labels_))})


# a partitioner object of the user's with fit_sharded whose labels leave its
# partitions: the one-process check on every rank (was a truncated Allreduce
# that aborted the job, or rows dropped silently)
class _Bad:
    def get_params(self, deep=True):
        return {}

    def set_params(self, **params):
        return self

    def _set(self, n):
        labels = np.arange(n) % 2
        labels[:5] = 5
        self.labels_, self.centers_ = labels, np.zeros((2, 5))
        self.sizes_ = np.bincount(labels[labels < 2], minlength=2)
        return self

    def fit(self, X):
        return self._set(X.shape[0])

    def fit_sharded(self, comm, X):
        return self._set(200)

    def assign(self, X):
        return np.zeros(X.shape[0], int)


for sharded in (True, False):
    got = outcome(lambda: PartitionedSVC(
        partitioner=_Bad(), backend=MPIBackend(sharded=sharded)).fit(
        X[lo:hi] if sharded else X, y[lo:hi] if sharded else y))
    out.append({"check": f"custom-labels-{'sharded' if sharded else 'root'}", "got": got,
                # (root mode: rank 0 raises its own ValueError, the others name it)
                "same": all("labels_ must give partition indices in [0, 2)" in g
                            for g in world.allgather(got))})


class _Unreadable:
    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("unreadable sizes_")


class _Odd(_Bad):
    """Right labels, but the last rank's sizes_ cannot be read: the check of a
    user's partition raised there only (not a ValueError) and the others waited."""

    def _set(self, n):
        self.labels_ = np.arange(n) % 2
        self.centers_ = np.zeros((2, 5))
        self.sizes_ = _Unreadable() if rank == R - 1 else np.bincount(self.labels_)
        return self


if R > 1:
    try:
        PartitionedSVC(partitioner=_Odd(), backend=MPIBackend(sharded=True)).fit(
            X[lo:hi], y[lo:hi])
        got = "ok"
    except Exception as exc:  # noqa: BLE001 (the failing rank's own type)
        got = f"{type(exc).__name__}: {exc}"
    out.append({"check": "custom-unreadable-sharded", "got": got,
                "same": all("unreadable sizes_" in g for g in world.allgather(got))})


# a subclass overriding fit but not fit_sharded: sharded mode would have run the
# base class's K-means silently
from cakernels.partition import KMeansPartitioner  # noqa: E402


class _Dealt(KMeansPartitioner):
    def fit(self, X, y=None):
        super().fit(X)
        self.labels_ = np.arange(X.shape[0]) % self.n_partitions_
        self.sizes_ = np.bincount(self.labels_, minlength=self.n_partitions_)
        return self


got = outcome(lambda: PartitionedSVC(
    partitioner=_Dealt(n_partitions=2, random_state=0),
    backend=MPIBackend(sharded=True)).fit(X[lo:hi], y[lo:hi]))
out.append({"check": "fit-override-sharded", "got": got,
            "same": len(set(world.allgather(got))) == 1})


# a subclass overriding fit and fit_sharded, relabelling after the base class's: its
# halos are recomputed for its own partition (the base class's held rows of a
# partition in its own halo, trained twice), the same as one process's
class _Moved(KMeansPartitioner):
    def _move(self):
        rows = np.flatnonzero(self.labels_ == 1)[:30]
        self.labels_[rows] = 0
        self.sizes_ = np.bincount(self.labels_, minlength=self.n_partitions_)
        return self

    def fit(self, X, y=None):
        super().fit(X)
        return self._move()

    def fit_sharded(self, comm, X):
        super().fit_sharded(comm, X)
        return self._move()


from cakernels.partition._halo import halo_indices  # noqa: E402

fitted = PartitionedSVC(partitioner=_Moved(n_partitions=3, random_state=0), halo=0.5,
                        backend=MPIBackend(sharded=True)).fit(X[lo:hi], y[lo:hi]).partitioner_
expected = halo_indices(X, fitted.labels_, fitted.centers_, fitted.sizes_, 0.5, False)
got = "ok" if all(np.array_equal(a, b) for a, b in zip(fitted.halo_indices_, expected)) \
    and not any(np.any(fitted.labels_[h] == j) for j, h in enumerate(fitted.halo_indices_)) \
    else f"halos {[h.tolist()[:5] for h in fitted.halo_indices_]}"
out.append({"check": "fit-sharded-override-halo", "got": got,
            "same": len(set(world.allgather(got))) == 1})


# a subclass of RandomPartitioner relabelling after super().fit_sharded kept the base
# class's rows_stay_local_ and owners_: the rows stayed on ranks that no longer owned
# their partitions, and every partition trained on part of its rows only
from cakernels.partition import RandomPartitioner  # noqa: E402


class _Signs(RandomPartitioner):
    def _relabel(self, X):
        self.labels_ = (X[:, 0] > 0).astype(np.intp)
        self.sizes_ = np.bincount(self.labels_, minlength=2)
        self.centers_ = np.array([X[self.labels_ == j].mean(0) for j in range(2)])
        self.n_partitions_ = 2
        return self

    def fit(self, X, y=None):
        super().fit(X)
        return self._relabel(np.asarray(X))

    def fit_sharded(self, comm, X_local):
        super().fit_sharded(comm, X_local)
        return self._relabel(np.concatenate(comm.allgather(np.asarray(X_local))))


kw = dict(gamma=0.3, solver="libsvm")
sharded_fit = PartitionedSVC(partitioner=_Signs(2, random_state=0), backend=MPIBackend(
    sharded=True), **kw).fit(X[lo:hi], y[lo:hi])
serial_fit = PartitionedSVC(partitioner=_Signs(2, random_state=0), **kw).fit(X, y)
diff = float(np.abs(sharded_fit.decision_function(X) - serial_fit.decision_function(X)).max())
out.append({"check": "relabelled-random-sharded",
            "got": "ok" if diff < 1e-8 else f"max |decision difference| {diff:.3g}",
            "same": True})

# object arrays (a pandas column of strings: object labels; a grid mixing numbers and
# 'scale') were fingerprinted by their bytes, pointers that differ between ranks: the
# same model "another model than rank 0", the same grid "other parameters"
from cakernels import CASVCCV  # noqa: E402

labels = np.array(["neg", "pos"], dtype=object)[y]
model = CASVC(4, random_state=0, backend="mpi").fit(X, labels)
got = outcome(lambda: model.predict_sharded(X[lo:hi]))
got += " " + str(model.classes_.dtype)
got += " | " + outcome(lambda: CASVCCV(2, Cs=[1.0], gammas=np.array([0.5, "scale"], dtype=object),
                                       cv=2, random_state=0, backend="mpi").fit(X, y))
out.append({"check": "object-arrays", "got": got, "same": len(set(world.allgather(got))) == 1})
if rank == 0:
    for line in out:
        print(json.dumps(line), flush=True)
