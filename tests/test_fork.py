"""Fork safety: a child process forked after a fit (``multiprocessing`` with the
'fork' start method, ``os.fork``, joblib's 'multiprocessing' backend) fits
again. GNU libgomp's thread pool does not survive ``fork()``: a child forked
from a thread that had run an OpenMP team waited forever in its first team
(the native core now runs such a child's teams on one thread), and the
child inherited the parent's thread ledger, BLAS limits and locks.

Every scenario runs in its own interpreter under a time limit (a hang must
fail the test, not the suite)."""

import sys
import textwrap

import pytest

PRELUDE = textwrap.dedent("""
    import os, sys, threading
    import numpy as np
    from sklearn.datasets import make_classification
    from cakernels import _native
    from cakernels._solvers.smo import smo_fit
    from cakernels.backends._budget import cpu_count

    X, y = make_classification(n_samples=6000, n_features=20, random_state=0)
    y = np.where(y == 1, 1.0, -1.0)

    def solve(n_threads):
        # every range on the team (min_parallel_work=1), whatever the machine's
        # speed; the dual variables
        return smo_fit(X, y, 1.0, gamma=0.05, n_threads=n_threads, cache_size=2,
                       tol=0.1, min_parallel_work=1)["alpha"]

    def in_child(check):
        '''Fork; the child runs check() and exits 0 when it returns True.'''
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                ok = bool(check())
            finally:
                os._exit(0 if ok else 1)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    team = _native.openmp_enabled() and cpu_count() >= 2
    """)


def _run(spawn, body, timeout=120):
    proc = spawn([sys.executable, "-c", PRELUDE + textwrap.dedent(body)], timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_a_child_forked_after_a_team_fits_on_one_thread(spawn):
    out = _run(spawn, """
        ref = solve(2)
        def child():
            assert _native.fork_clamped() == team, "clamped only after a team ran"
            assert cpu_count() == (1 if team else cpu_count())
            got = solve(2)  # asked for 2 threads: one, without waiting for the parent's
            return np.array_equal(got, ref)
        print("child", in_child(child))
        # the parent keeps its threads
        assert not _native.fork_clamped()
        assert np.array_equal(solve(2), ref)
    """)
    assert "child 0" in out


def test_a_child_forked_from_a_thread_without_a_team_keeps_its_threads(spawn):
    # the team ran in another thread: the forking thread's OpenMP pool is
    # untouched, so the child may run teams
    out = _run(spawn, """
        t = threading.Thread(target=solve, args=(2,))
        t.start(); t.join()
        def child():
            assert not _native.fork_clamped()
            return solve(2).any()
        print("child", in_child(child))
    """)
    assert "child 0" in out


def test_estimators_fit_in_forked_pool_workers_after_a_parent_fit(spawn):
    out = _run(spawn, """
        import multiprocessing as mp
        from cakernels import AsyGCDSVC, CASVC, DCSVC

        makers = [lambda: CASVC(n_partitions=2, random_state=0),
                  lambda: DCSVC(n_partitions=2, random_state=0),
                  lambda: AsyGCDSVC(n_threads=2, random_state=0)]

        def fit(i):
            return makers[i]().fit(X, y).score(X, y)

        ref = [fit(i) for i in range(3)]  # the parent's fits run OpenMP teams
        with mp.get_context("fork").Pool(2) as pool:
            got = pool.map(fit, range(3))
        assert got == ref, (got, ref)
        print("pool ok")
    """, timeout=240)
    assert "pool ok" in out


def test_a_child_forked_while_a_region_is_open_starts_with_a_fresh_budget(spawn):
    out = _run(spawn, """
        from threadpoolctl import threadpool_info
        from cakernels.backends._budget import blas_limits, reserve_threads, threads_available

        def blas():
            return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

        before = blas()
        inside, release = threading.Event(), threading.Event()

        def region():  # another thread holds threads and a BLAS limit of 1
            with reserve_threads(cpu_count()), blas_limits(1):
                inside.set()
                release.wait()

        t = threading.Thread(target=region)
        t.start(); inside.wait()

        def child():
            # no thread of the parent's region exists here: nothing is held
            assert threads_available() == cpu_count(), threads_available()
            assert blas_limits.current is None and blas() == before, (blas(), before)
            with reserve_threads(cpu_count()) as got, blas_limits(1):
                assert got == cpu_count() and blas_limits.current == 1
            return blas() == before

        print("child", in_child(child))
        release.set(); t.join()
        assert blas() == before
    """)
    assert "child 0" in out


@pytest.mark.parametrize("backend", ["multiprocessing", "loky"])
def test_joblib_process_backends_after_a_parent_fit(spawn, backend):
    out = _run(spawn, f"""
        from joblib import Parallel, delayed
        from cakernels import CASVC

        def fit():
            return CASVC(n_partitions=2, random_state=0).fit(X, y).score(X, y)

        ref = fit()
        got = Parallel(n_jobs=2, backend={backend!r})(delayed(fit)() for _ in range(2))
        assert got == [ref, ref], (got, ref)
        print("joblib ok")
    """, timeout=240)
    assert "joblib ok" in out


def test_a_child_forked_inside_a_block_leaves_it_without_undoing_the_parents():
    """A child forked inside ``reserve_threads``/``blas_limits`` starts with a fresh
    budget; leaving the block there undid the parent's entries anyway: the child's
    budget went negative (``threads_available()`` above ``cpu_count()``) and its BLAS
    stack raised ``ValueError``."""
    import os

    from cakernels.backends._budget import blas_limits, cpu_count, reserve_threads
    from cakernels.backends._budget import threads_available

    with reserve_threads(1), blas_limits(1):
        pid = os.fork()
    if pid == 0:  # the child: its budget whole, its stack empty
        ok = threads_available() == cpu_count() and blas_limits._requests == []
        os._exit(0 if ok else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert threads_available() == cpu_count() and blas_limits._requests == []
