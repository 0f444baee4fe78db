"""SPMD failure cases, one per run: ``spmd_errors.py CASE OUTDIR``.

Every case makes one rank's input or run go wrong; the job must end on every
rank (within the test's time limit), with the same ValueError on every rank
for bad input. The test launches some cases without ``-m mpi4py``.
"""

import os
import sys

import numpy as np
from mpi4py import MPI
from sklearn.datasets import make_classification

from cakernels import BKMSVC, CASVC
from cakernels.backends import MPIBackend

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
case, outdir = sys.argv[1], sys.argv[2]
bad = size - 1  # the rank that goes wrong
X, y = make_classification(n_samples=400, n_features=5, random_state=0)
lo, hi = rank * 400 // size, (rank + 1) * 400 // size
Xs, ys = X[lo:hi].copy(), y[lo:hi].copy()
sharded = MPIBackend(sharded=True)


def on_bad_rank(owner, name, act):
    """Patch method ``name`` of ``owner`` to call ``act()`` first on the bad rank."""
    original = getattr(owner, name)

    def patched(self, *args):
        if rank == bad:
            act()
        return original(self, *args)

    setattr(owner, name, patched)


class UserPartitioner:
    """Base of a user's partitioner object without parameters (the package asks for
    them as of an estimator)."""

    def get_params(self, deep=True):
        return {}

    def set_params(self, **params):
        return self


def fail(message):
    raise RuntimeError(message)


def run():
    global Xs, ys
    if case == "nan":                       # NaN on one rank (sharded data)
        if rank == bad:
            Xs[0, 0] = np.nan
        CASVC(4, backend=sharded).fit(Xs, ys)
    elif case == "features":                # a shard with another number of features
        if rank == bad:
            Xs = Xs[:, :4]
        CASVC(4, backend=sharded).fit(Xs, ys)
    elif case == "empty":                   # an empty shard
        if rank == bad:
            Xs, ys = Xs[:0], ys[:0]
        CASVC(4, backend=sharded).fit(Xs, ys)
    elif case == "params":                  # one rank with other parameters
        CASVC(4, C=2.0 if rank == bad else 1.0, backend=sharded).fit(Xs, ys)
    elif case == "labels":                  # text labels on one rank, numbers on the others
        if rank == bad:
            ys = np.where(ys == 1, "a", "b")
        CASVC(4, backend=sharded).fit(Xs, ys)
    elif case == "zero-weights":            # one rank's rows all weigh 0 (sharded)
        CASVC(4, backend=sharded).fit(Xs, ys, sample_weight=np.full(len(ys), float(
            rank != bad)))
    elif case == "tiny":                    # every shard's features below 1e-154
        CASVC(4, backend=sharded).fit(Xs * 1e-170, ys)
    elif case == "tiny-partitioner":        # the same for a partitioner's own fit_sharded
        from cakernels.partition import KMeansPartitioner

        KMeansPartitioner(4, random_state=0).fit_sharded(comm, Xs * 1e-170)
    elif case == "tiny-one-shard":          # one shard's: fine next to the others' rows
        CASVC(4, backend=sharded).fit(Xs * (1e-170 if rank == bad else 1.0), ys)
    elif case == "zero-weight-scalar":      # the same as one scalar 0 (sklearn's own message)
        CASVC(4, backend=sharded).fit(Xs, ys, sample_weight=float(rank != bad))
    elif case == "zero-weights-partitions":  # one row of positive weight for 2 partitions
        w = np.ones(len(ys))
        if rank == bad:
            w[1:] = 0.0  # (the message blamed the rank's 100 rows)
        CASVC(4 * size, backend=sharded).fit(Xs, ys, sample_weight=w)
    elif case == "krr-weights":             # sample_weight on some ranks only (sharded)
        from cakernels import BKRR2

        BKRR2(4, backend=sharded).fit(Xs, ys.astype(float), sample_weight=None if rank == bad
                                      else np.ones(len(ys)))
    elif case == "krr-y-columns":           # targets of 3 columns on one rank, 2 elsewhere
        from cakernels import BKRR2

        Y = np.column_stack([ys, ys, ys]).astype(float)
        BKRR2(4, backend=sharded).fit(Xs, Y if rank == bad else Y[:, :2])
    elif case == "svm-weights":             # the same for a classifier (ones were filled in)
        CASVC(4, backend=sharded).fit(Xs, ys, sample_weight=None if rank == bad
                                      else np.full(len(ys), 0.01))
    elif case == "invalid-param":           # an invalid parameter on one rank only
        CASVC(4, C=-1.0 if rank == bad else 1.0, backend=sharded).fit(Xs, ys)
    elif case == "invalid-grid":            # a search's invalid grid on one rank only
        from cakernels import BKRR2CV

        BKRR2CV(4, lams=[-1.0] if rank == bad else [1e-3], sigmas=[1.0], cv=2,
                backend=sharded).fit(Xs, ys.astype(float))
    elif case == "search-scoring":          # a binary scoring, a third class on one rank
        from cakernels import CASVCCV

        if rank == bad:
            ys[:5] = 2
        CASVCCV(4, Cs=[1.0], cv=2, scoring="f1", backend=sharded).fit(Xs, ys)
    elif case == "other-estimator":         # another estimator, the same parameters
        (BKMSVC if rank == bad else CASVC)(4, backend=sharded).fit(Xs, ys)
    elif case == "mixed-storage":           # a CSR shard among dense ones
        import scipy.sparse as sp

        BKMSVC(4, backend=sharded).fit(sp.csr_matrix(Xs) if rank == bad else Xs, ys)
    elif case == "custom-sharded-differs":  # a user's fit_sharded: another partition per rank
        from cakernels import PartitionedSVC

        class Unshared(UserPartitioner):
            def fit(self, X, y=None):
                raise NotImplementedError

            def fit_sharded(self, comm, X_local):
                n = sum(comm.allgather(len(X_local)))
                rng = np.random.RandomState(0 if rank != bad else 1)  # a seed not shared
                self.labels_ = rng.randint(0, 2, n).astype(np.intp)
                self.sizes_ = np.bincount(self.labels_, minlength=2)
                self.centers_ = np.zeros((2, X_local.shape[1]))
                return self

            def assign(self, X):
                return np.zeros(len(X), np.intp)

        PartitionedSVC(partitioner=Unshared(), backend=sharded).fit(Xs, ys)
    elif case == "predict-custom-assign":   # a user's assign failing on one rank's rows
        from cakernels import PartitionedSVC

        class Halves(UserPartitioner):
            def fit(self, X, y=None):
                X = np.asarray(X)
                self.labels_ = (np.arange(X.shape[0]) % 2).astype(np.intp)
                self.sizes_ = np.bincount(self.labels_, minlength=2)
                self.centers_ = np.array([X[self.labels_ == j].mean(0) for j in range(2)])
                return self

            def fit_sharded(self, comm, X_local):  # (the search below is sharded)
                return self.fit(np.concatenate(comm.allgather(np.asarray(X_local))))

            def assign(self, X):
                return np.full(len(X), 7 if rank == bad else 0, dtype=np.intp)

        for routing in ("nearest", "vote"):
            clf = PartitionedSVC(partitioner=Halves(), routing=routing).fit(X, y)
            if routing == "vote":  # (the vote routes by centres: a centre NaN on one rank)
                if rank == bad:
                    clf.partitioner_.centers_ = None
            try:
                clf.predict_sharded(Xs)
            except Exception as exc:  # (all must fail; the last one is reported)
                last = exc
            else:
                raise AssertionError(f"routing={routing}: no error")
        # a search's validation rows are routed by assign before their exchange too
        from cakernels.model_selection import PartitionedSVCCV

        try:
            PartitionedSVCCV(Halves(), 2, Cs=[1.0], cv=2, backend=sharded).fit(Xs, ys)
        except Exception as exc:
            last = exc
        else:
            raise AssertionError("search: no error")
        raise last
    elif case == "predict-features":        # collective prediction: bad test rows on one rank
        from cakernels import DCSVC

        for est in (CASVC(4, backend=sharded).fit(Xs, ys), DCSVC(4, random_state=0).fit(X, y)):
            try:
                est.predict_sharded(Xs[:, :4] if rank == bad else Xs)
            except ValueError as exc:
                last = exc
            else:
                raise AssertionError("no error")
        raise last
    elif case == "score-short-y":           # collective score: a y one row short on one rank
        from cakernels import BKRR2

        est = BKRR2(4, backend=sharded).fit(Xs, ys.astype(float))
        est.score_sharded(Xs, ys[:-1] if rank == bad else ys)
    elif case == "predict-other-model":     # collective prediction with another model
        from cakernels import DisSMOSVC, FCFSSVC

        # a serial fit per rank, partitions drawn from another seed on one rank (rows
        # were routed by each rank's centres: silently other predictions), another
        # partition count (an IndexError on one rank, the others hung), another C for a
        # full model (each rank predicted with its own)
        for est in (FCFSSVC(4, random_state=1 if rank == bad else 0).fit(X, y),
                    FCFSSVC(3 if rank == bad else 4, random_state=0).fit(X, y),
                    DisSMOSVC(C=2.0 if rank == bad else 1.0).fit(X, y)):
            try:
                est.predict_sharded(Xs)
            except ValueError as exc:
                last = exc
            else:
                raise AssertionError("no error")
        raise last
    elif case == "predict-voters":          # n_voters set after fit; one rank without rows
        est = CASVC(4, backend=sharded).fit(Xs, ys).set_params(routing="vote", n_voters=3.0)
        est.predict_sharded(Xs[:0] if rank == bad else Xs)  # it hung the rank without rows
    elif case == "score-nan-y":             # collective score: a NaN target on one rank
        from cakernels import BKRR2

        est = BKRR2(4, backend=sharded).fit(Xs, ys.astype(float))
        yq = ys.astype(float)
        if rank == bad:
            yq[0] = np.nan
        est.score_sharded(Xs, yq)
    elif case == "score-weights-some":      # collective score: weights on some ranks only
        est = CASVC(4, backend=sharded).fit(Xs, ys)
        w = np.linspace(0.5, 2.0, ys.size)
        # a rank without rows may pass none (it has no weights to give)
        est.score_sharded(Xs[:0] if rank == 2 else Xs, ys[:0] if rank == 2 else ys,
                          sample_weight=None if rank == 2 else w)
        # they counted rank 3's rows with weight 1: a score neither weighted nor not
        est.score_sharded(Xs, ys, sample_weight=None if rank == bad else w)
    elif case == "score-labels":            # collective score: text labels on one rank
        est = CASVC(4, backend=sharded).fit(Xs, ys)
        est.score_sharded(Xs, np.where(ys == 1, "a", "b") if rank == bad else ys)
    elif case.startswith("part-"):          # a partitioner's own fit_sharded (README)
        from cakernels.partition import KBalancePartitioner

        kw = dict(n_partitions=4, random_state=0)
        Xp = Xs
        if rank == bad:
            if case == "part-invalid":       # it hung the other ranks
                kw["n_partitions"] = 0
            elif case == "part-params":      # a halo on one rank: the others hung
                kw["halo"] = 0.5
            elif case == "part-nan":         # NaN centres (random) or a hang (K-balance)
                Xp = Xs.copy()
                Xp[0, 0] = np.nan
            elif case == "part-features":
                Xp = Xs[:, :4]
        KBalancePartitioner(**kw).fit_sharded(MPI.COMM_WORLD, Xp)  # a raw mpi4py comm
    elif case == "dkrr-names":              # DKRR: one shard's columns in another order
        import pandas as pd

        from cakernels import DKRR

        cols = ["e", "d", "c", "b", "a"] if rank == bad else ["a", "b", "c", "d", "e"]
        DKRR(sigma=2.0, lam=1e-3, backend=sharded).fit(
            pd.DataFrame(Xs[:, ::-1] if rank == bad else Xs, columns=cols), ys.astype(float))
    elif case == "root-inf":                # root mode: bad data on rank 0
        Xr = X.copy()
        Xr[3, 1] = np.inf
        CASVC(4, backend="mpi").fit(Xr if rank == 0 else None, y if rank == 0 else None)
    elif case == "root-scale":              # root mode: gamma='scale' is inf on rank 0's rows
        from cakernels import CASVCCV

        Xr = X * 1e-156  # (variance 1e-312: gamma = inf; a ValueError on rank 0 only, hung)
        for est in (CASVC(4, backend="mpi"), CASVCCV(4, Cs=[1.0], cv=2, backend="mpi")):
            try:
                est.fit(Xr if rank == 0 else None, y if rank == 0 else None)
            except ValueError as exc:
                last = exc
            else:
                raise AssertionError("no error")
        raise last
    elif case == "solver-raises":           # a local solve raises on one rank mid-fit
        from cakernels.svm._partitioned import PartitionedSVC

        on_bad_rank(PartitionedSVC, "_fit_partition",
                    lambda: fail("injected failure in a local solve"))
        BKMSVC(2 * size, backend=sharded).fit(Xs, ys)
    elif case == "dies":                    # a rank dies mid-fit (no exception at all)
        from cakernels.svm._partitioned import PartitionedSVC

        on_bad_rank(PartitionedSVC, "_fit_partition", lambda: os._exit(3))
        BKMSVC(2 * size, backend=sharded).fit(Xs, ys)
    elif case == "tree-solve-raises":       # a node's solve fails in a multi-level tree
        from cakernels import CascadeSVC, DCSVC
        from cakernels.svm._multilevel import _MultiLevelSVC

        on_bad_rank(_MultiLevelSVC, "_solve", lambda: fail("injected failure in a node solve"))
        for cls in (CascadeSVC, DCSVC):
            try:
                cls(2 * size, backend="mpi").fit(X if rank == 0 else None,
                                                 y if rank == 0 else None)
            except Exception as exc:
                last = exc
            else:
                raise AssertionError("no error")
        raise last
    elif case == "dissmo-raises":           # one rank fails inside Dis-SMO, at every stage
        from cakernels import DisSMOSVC
        from cakernels.svm._dissmo import _Block

        # (method, its call on the bad rank that fails, working set): the blocks'
        # making, an iteration's candidates (both working sets), the summary, the
        # support vectors; every fit must fail on every rank and leave the ranks
        # in step for the next one
        errors = []
        for name, at, ws in [("__init__", 1, "first-order"), ("candidates", 3, "first-order"),
                             ("first_candidate", 3, "second-order"),
                             ("second_candidate", 2, "second-order"),
                             ("summary", 1, "first-order"), ("support", 1, "second-order")]:
            original, calls = getattr(_Block, name), [0]

            def patched(self, *args, _original=original, _calls=calls, _at=at, _name=name):
                _calls[0] += 1
                if rank == bad and _calls[0] == _at:
                    fail(f"injected failure in Dis-SMO's {_name}")
                return _original(self, *args)

            setattr(_Block, name, patched)
            try:
                DisSMOSVC(backend="mpi", working_set=ws).fit(X if rank == 0 else None,
                                                             y if rank == 0 else None)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            else:
                raise AssertionError(f"no error from a failure in {name}")
            finally:
                setattr(_Block, name, original)
        clean = DisSMOSVC(backend="mpi").fit(X if rank == 0 else None, y if rank == 0 else None)
        assert clean.score(X, y) > 0.8
        raise RuntimeError(" | ".join(errors))
    elif case == "violators-raises":        # Cascade's check between passes fails on one rank
        import cakernels._kernels as kernels
        from cakernels import CascadeSVC

        original = kernels.kernel_dot       # (used there only, in the tree)

        def failing(*args, **kwargs):
            if rank == bad:
                raise MemoryError("injected failure in the check between passes")
            return original(*args, **kwargs)

        kernels.kernel_dot = failing
        try:
            CascadeSVC(2 * size, n_passes=3, backend="mpi").fit(X if rank == 0 else None,
                                                                y if rank == 0 else None)
        except Exception as exc:
            kernels.kernel_dot = original
            # the ranks are in step: a clean fit follows
            clean = CascadeSVC(2 * size, n_passes=3, backend="mpi").fit(
                X if rank == 0 else None, y if rank == 0 else None)
            assert clean.score(X, y) > 0.8
            raise exc
        raise AssertionError("no error")
    elif case in ("cv-raises", "cv-raises-sharded"):  # splits for other data: IndexError
        from cakernels import BKRR2CV

        cv = [(np.arange(200), np.arange(200, 450))]  # 400 rows: index 400 and on
        search = BKRR2CV(n_partitions=2, sigmas=[1.0], lams=[1e-3], cv=cv, refit=False)
        errors = []
        for mode in (["root"] if case == "cv-raises" else ["sharded"]):
            try:
                if mode == "root":
                    search.set_params(backend="mpi").fit(X if rank == 0 else None,
                                                         y * 1.0 if rank == 0 else None)
                else:
                    search.set_params(backend=sharded).fit(Xs, ys * 1.0)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            else:
                raise AssertionError("no error")
        # the ranks are in step: a good search follows
        search.set_params(cv=2, backend="mpi").fit(X if rank == 0 else None,
                                                   y * 1.0 if rank == 0 else None)
        raise RuntimeError(" | ".join(errors))
    elif case == "validation-raises":       # root mode: validation fails with a KeyError
        from cakernels.svm._partitioned import PartitionedSVC

        original = PartitionedSVC._validate_checked

        def failing(self, *args):
            raise KeyError("injected failure in the validation")

        PartitionedSVC._validate_checked = failing  # (only rank 0 validates)
        try:
            CASVC(4, backend="mpi").fit(X if rank == 0 else None, y if rank == 0 else None)
        except Exception as exc:
            PartitionedSVC._validate_checked = original
            clean = CASVC(4, backend="mpi").fit(X if rank == 0 else None,
                                                y if rank == 0 else None)
            assert clean.score(X, y) > 0.8
            raise exc
        raise AssertionError("no error")
    elif case == "predict-overflow":        # a test row whose kernel overflows on its owner
        from cakernels import BKRR2

        Xt = np.random.RandomState(rank).randn(6, 5)
        if rank == bad:
            Xt[0] = 1e150  # (its squared norm passes the check: only K(x, .) overflows)
        for est in (CASVC(4, kernel="poly", backend=sharded, random_state=0).fit(Xs, ys),
                    BKRR2(4, kernel="poly", backend=sharded, random_state=0).fit(
                        Xs, ys.astype(float))):
            try:  # the owner of its partition raised; the other ranks waited for good
                est.predict_sharded(Xt)
            except (ValueError, FloatingPointError) as exc:
                last = exc
            else:
                raise AssertionError("no error")
        raise last
    elif case == "interrupt-one-rank":      # KeyboardInterrupt on one rank alone (not shared)
        from cakernels.partition import BKMPartitioner

        def interrupt():
            raise KeyboardInterrupt

        on_bad_rank(BKMPartitioner, "fit_sharded", interrupt)
        BKMSVC(2 * size, backend=sharded).fit(Xs, ys)
    elif case == "uncaught":                # an error outside any collective (needs -m mpi4py)
        if rank == bad:
            raise KeyError("user code failed on one rank")
        comm.Barrier()                      # the others wait here forever without -m mpi4py
    else:
        raise SystemExit(f"unknown case {case}")


try:
    run()
except Exception as exc:
    # one file per rank (mpiexec may interleave the ranks' output), then the traceback
    assert isinstance(exc, ValueError) or case in (
        "solver-raises", "dies", "uncaught", "tree-solve-raises", "dissmo-raises",
        "violators-raises", "cv-raises", "cv-raises-sharded", "validation-raises",
        "predict-overflow", "predict-custom-assign")
    with open(os.path.join(outdir, f"rank{rank}.txt"), "w") as fh:
        fh.write(f"{type(exc).__name__}: {exc}")
    raise
print(f"rank {rank}: finished without error", flush=True)
