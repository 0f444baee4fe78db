"""The backend seams without MPI: placement of partitions on ranks, the
one-process communicator, and the classifiers' work estimate used to place
their partitions."""

from types import SimpleNamespace

import numpy as np
import pytest

from cakernels import BKMSVC
from cakernels.backends import SelfCommunicator
from cakernels.backends._backend import lpt_placement


@pytest.mark.parametrize("n_tasks, n_ranks", [(16, 2), (7, 3), (3, 4), (10, 10)])
def test_equal_costs_spread_evenly(n_tasks, n_ranks):
    owners = lpt_placement(np.ones(n_tasks), n_ranks)
    counts = np.bincount(owners, minlength=n_ranks)
    assert counts.max() - counts.min() <= 1 and counts.sum() == n_tasks


def test_lpt_balances_unequal_costs():
    costs = np.array([5.0, 4, 3, 3, 2, 2, 1])
    owners = lpt_placement(costs, 2)
    loads = np.bincount(owners, weights=costs, minlength=2)
    # LPT: the largest task first to the least loaded rank
    assert owners[0] == 0 and owners[1] == 1
    assert sorted(loads.tolist()) == [10.0, 10.0]


def test_self_communicator_allgather_stacks_one_rank():
    comm = SelfCommunicator()
    a = np.arange(4)
    out = comm.Allgather(a)
    assert out.shape == (1, 4) and np.array_equal(out[0], a)
    out[0, 0] = 99
    assert a[0] == 0  # a copy, never the caller's array


def test_agree_with_a_failure_on_one_process():
    # agree(failure=...) (an unexpected exception, shared with the other ranks
    # under MPI: tests/test_mpi.py) re-raises it on one process; a message wins
    comm = SelfCommunicator()
    comm.agree(None, failure=None)
    with pytest.raises(KeyError, match="lost"):
        comm.agree(None, failure=KeyError("lost"))
    with pytest.raises(ValueError, match="bad rows"):
        comm.agree("bad rows", failure=KeyError("lost"))


def test_classifier_placement_costs_weigh_one_class_partitions_little():
    est = BKMSVC(n_partitions=3)
    est.classes_ = np.array(["a", "b", "c"])
    s = SimpleNamespace(comm=SelfCommunicator())
    # partition 0: one class only; 1: 10 vs 10 of two classes; 2: 18 vs 2
    labels = np.repeat([0, 1, 1, 2, 2], [20, 10, 10, 18, 2])
    y = np.repeat([0, 0, 1, 2, 1], [20, 10, 10, 18, 2])
    sizes = np.bincount(labels)
    costs = est._placement_costs(s, y, labels, sizes)
    # one-vs-one: sum over pairs of (n_a + n_b) * min(n_a, n_b), plus the size
    assert costs.tolist() == [20.0, 20 + 20 * 10, 20 + 20 * 2]
    # without this rank's rows (root mode on another rank) only the sizes count
    assert est._placement_costs(s, None, np.zeros(0, np.intp), sizes).tolist() == [20, 20, 20]


def test_kmeans_blas_context_interleaved_with_a_package_region(monkeypatch):
    """scikit-learn's K-means limits BLAS with its own threadpoolctl context,
    which restores what it saw on entry. Entered in one thread (a K-means
    partitioner) while a package region limited BLAS in another, it left BLAS
    on 2 threads inside the region (a blocked Cholesky then took 20x longer)
    and on 1 thread for good afterwards. The partitioners now hold the
    package's limit of 1 around K-means."""
    import threading

    from sklearn.utils.parallel import _get_threadpool_controller
    from threadpoolctl import threadpool_info, threadpool_limits

    import cakernels.partition._partitioners as parts
    from cakernels.backends import blas_limits
    from cakernels.partition import KMeansPartitioner

    def blas():
        return sorted(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

    entered, region, left = threading.Event(), threading.Event(), threading.Event()

    class InterleavedKMeans(parts.KMeans):
        def fit(self, X, y=None, sample_weight=None):
            with _get_threadpool_controller().limit(limits=1, user_api="blas"):  # as sklearn
                entered.set()
                region.wait(10)
            left.set()
            return super().fit(X, y, sample_weight)

    monkeypatch.setattr(parts, "KMeans", InterleavedKMeans)
    X = np.random.RandomState(0).rand(200, 3)
    seen = {}

    def package_region():
        entered.wait(10)
        with blas_limits(1):
            region.set()
            left.wait(10)
            seen["inside"] = blas()

    with threadpool_limits(limits=2, user_api="blas"):  # BLAS on 2 threads to start with
        before = blas()
        t = threading.Thread(target=package_region)
        t.start()
        KMeansPartitioner(n_partitions=2, random_state=0).fit(X)
        t.join()
        after = blas()
    assert before and max(before) == 2
    assert seen["inside"] == [1] * len(before), seen  # the region's limit holds
    assert after == before                             # and BLAS comes back


@pytest.mark.parametrize("n_jobs", [0, 1.5, "2", True, -1.0])
def test_threads_backend_validates_n_jobs_as_the_estimators(n_jobs):
    from sklearn.utils._param_validation import InvalidParameterError

    from cakernels.backends import ThreadsBackend

    with pytest.raises(InvalidParameterError, match="n_jobs"):
        ThreadsBackend(n_jobs=n_jobs)


def test_n_jobs_and_a_threads_backend_instance_must_agree():
    # n_jobs configures backend='threads'; with an instance it was silently dropped
    from sklearn.datasets import make_classification

    from cakernels import CASVC
    from cakernels.backends import ThreadsBackend

    X, y = make_classification(n_samples=200, random_state=0)
    with pytest.raises(ValueError, match=r"n_jobs=1 and backend=ThreadsBackend\(n_jobs=None\) "
                                         "disagree"):
        CASVC(2, backend=ThreadsBackend(), n_jobs=1).fit(X, y)
    a = CASVC(2, backend=ThreadsBackend(n_jobs=1), n_jobs=1, random_state=0).fit(X, y)
    b = CASVC(2, backend="threads", n_jobs=1, random_state=0).fit(X, y)
    assert a.fit_stats_["n_workers"] == 1
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


@pytest.mark.parametrize("sharded", ["no", "False", 0.5, 0, 1, None])
def test_mpi_backend_validates_sharded(sharded):
    # a truthy string switched sharded mode on: on 2 ranks given the same rows in
    # root mode's use, every row was trained on twice, without a word
    from sklearn.utils._param_validation import InvalidParameterError

    from cakernels.backends import MPIBackend

    with pytest.raises(InvalidParameterError, match="sharded"):
        MPIBackend(sharded=sharded)
    assert MPIBackend(sharded=np.True_).sharded


def test_an_interrupted_blas_limit_is_undone(monkeypatch):
    # the request stayed on the stack when the change raised (a Ctrl-C during
    # the libraries' scan or set_num_threads): BLAS kept one thread for good
    import threadpoolctl

    from cakernels.backends import blas_limits

    def blas():
        return [lib["num_threads"] for lib in threadpoolctl.threadpool_info()
                if lib["user_api"] == "blas"]

    # two BLAS threads before (on a 1-core runner the limit to 1 would be invisible)
    outer = threadpoolctl.threadpool_limits(2, user_api="blas")
    before = blas()
    assert all(n == 2 for n in before) and before
    cls = type(blas_limits)
    original = cls._set

    def interrupted(self, want):
        monkeypatch.setattr(cls, "_set", original)
        original(self, want)  # the limit is applied, then the Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(cls, "_set", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            with blas_limits(1):
                pass
        assert blas_limits._requests == [] and blas() == before
    finally:
        outer.restore_original_limits()


def test_a_session_interrupted_on_entry_returns_its_threads(monkeypatch):
    # the reservation stayed held while a kept traceback (a REPL's) kept the
    # session's stack alive: every later fit got fewer threads
    from cakernels.backends import ThreadsBackend, blas_limits, threads_available

    free = threads_available()
    cls = type(blas_limits)
    original = cls._control

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(cls, "_control", interrupted)
    monkeypatch.setattr(blas_limits, "_applied", None)
    session = ThreadsBackend(n_jobs=2).session()
    with pytest.raises(KeyboardInterrupt) as info:
        session.__enter__()
    monkeypatch.setattr(cls, "_control", original)
    kept = info.value.__traceback__  # noqa: F841 (what a REPL keeps)
    assert threads_available() == free


class _FakeNodeComm:
    """A communicator whose node-local split allgathers the given CPU sets."""

    def __init__(self, sets):
        self.sets = sets

    def Split_type(self, kind):
        return self

    def allgather(self, mine):
        return self.sets

    def Free(self):
        pass


def test_mpi_ranks_share_the_cores_they_share(monkeypatch):
    # a cgroup quota is no binding (every rank took all of it); ranks confined
    # together to one CPU set share it (each took all of it); sub-communicators
    # of one job fitting side by side each counted only their own ranks
    import os

    import cakernels.backends._backend as backend

    everything = frozenset(range(64))
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.delenv("MPI_LOCALNRANKS", raising=False)
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_SIZE", raising=False)
    # a quota of 8 cores, 2 ranks on the node, no CPU binding
    monkeypatch.setattr(backend, "_bound_by_launcher", lambda mine: False)
    monkeypatch.setattr(backend, "cpu_count", lambda: 8)
    monkeypatch.setattr(backend, "_affinity", lambda: everything)
    assert backend._cores_of_rank(_FakeNodeComm([everything] * 2)) == 4
    # a sub-communicator (1 rank on the node) of a job of 4 ranks there
    monkeypatch.setenv("MPI_LOCALNRANKS", "4")
    assert backend._cores_of_rank(_FakeNodeComm([everything])) == 2
    # two ranks confined together to cores {0, 1, 2, 3} of the 64 (the overlap alone)
    monkeypatch.delenv("MPI_LOCALNRANKS")
    monkeypatch.setattr(backend, "cpu_count", lambda: 4)
    monkeypatch.setattr(backend, "_affinity", lambda: frozenset(range(4)))
    assert backend._cores_of_rank(_FakeNodeComm([frozenset(range(4))] * 2)) == 2
    # ... and with sub-communicators side by side, the launcher's ranks on the node
    monkeypatch.setenv("MPI_LOCALNRANKS", "4")
    assert backend._cores_of_rank(_FakeNodeComm([frozenset(range(4))])) == 1
    # each rank bound to cores of its own keeps them; two bound to the same set share it
    monkeypatch.setattr(backend, "_bound_by_launcher", lambda mine: True)
    monkeypatch.setattr(backend, "cpu_count", lambda: 3)
    monkeypatch.setattr(backend, "_affinity", lambda: frozenset({0, 1, 2}))
    assert backend._cores_of_rank(_FakeNodeComm([frozenset({0, 1, 2}),
                                                 frozenset({3, 4, 5})])) == 3
    assert backend._cores_of_rank(_FakeNodeComm([frozenset({0, 1, 2})] * 2)) == 1


def test_a_copy_of_an_mpi_backend_keeps_its_communicator():
    import copy

    from cakernels.backends import MPIBackend

    class Mine(MPIBackend):
        pass

    comm = object()
    for backend in (MPIBackend(comm=comm, sharded=True), Mine(comm=comm, sharded=True)):
        for other in (copy.copy(backend), copy.deepcopy(backend)):
            assert type(other) is type(backend)
            assert other.comm is comm and other.sharded and other == backend


def test_an_interrupted_blas_restore_is_completed():
    # a Ctrl-C while leaving the block left BLAS limited for good, and current
    # returned an internal sentinel
    import threadpoolctl

    from cakernels.backends import blas_limits

    def threads():
        return [lib.get_num_threads() for lib in blas_limits.controller().lib_controllers
                if lib.user_api == "blas"]

    outer = threadpoolctl.threadpool_limits(2, user_api="blas")
    before = threads()
    assert all(n == 2 for n in before) and before  # the limit to 1 is observable
    with pytest.raises(KeyboardInterrupt):
        with blas_limits(1):
            lib = blas_limits._limited[0]
            real = lib.set_num_threads

            def interrupted(n):
                lib.set_num_threads = real  # once
                raise KeyboardInterrupt

            lib.set_num_threads = interrupted
    try:
        assert threads() == before and blas_limits.current is None
    finally:
        outer.restore_original_limits()



def test_a_rank_is_bound_when_its_cpu_set_is_a_strict_part_of_its_parents(monkeypatch):
    import os

    import cakernels.backends._backend as backend

    monkeypatch.setattr(os, "sched_getaffinity",
                        lambda pid: {0, 1} if pid == os.getppid() else {0, 1, 2, 3},
                        raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    assert backend._bound_by_launcher(frozenset({0}))          # bound by the launcher
    assert not backend._bound_by_launcher(frozenset({0, 1}))   # the job's set, inherited


def test_effective_n_jobs_refuses_what_it_truncated():
    # 1.7 and True were workers 1: the estimators refuse them, and so does the helper
    from cakernels.backends import effective_n_jobs

    for bad in (1.7, 2.0, True, "2"):
        with pytest.raises(TypeError, match="n_jobs must be None or an int"):
            effective_n_jobs(bad, n_cpu=4)
    assert effective_n_jobs(np.int64(3), n_cpu=4) == 3
    with pytest.raises(ValueError, match="n_jobs == 0"):
        effective_n_jobs(0, n_cpu=4)
