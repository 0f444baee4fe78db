"""Ctrl-C stops a native solve (SMO, Asy-GCD) instead of waiting for its end.

Every test runs a child process whose solve cannot end by itself (tol=1e-300 and
max_iter=10**15: the solvers would step for days), sends it SIGINT once the solve
runs, and expects ``KeyboardInterrupt`` from the solve. Without the solvers' poll the
child never ends, and the test fails at its timeout (the child's process group is
killed then).
"""

import os
import signal
import subprocess
import sys
import textwrap

from pathlib import Path

import numpy as np
import pytest

import cakernels

# imported and set up before "start"; the bodies then solve within milliseconds
PROBLEM = """
import signal, sys, threading, time, traceback
import numpy as np
from cakernels import AsyGCDSVC, CASVC
from cakernels._solvers.smo import smo_fit
from cakernels.backends._pool import run_blocks
rng = np.random.default_rng(0)
X = rng.standard_normal((1500, 5))
y = np.where(X[:, 0] * X[:, 1] + 0.5 * rng.standard_normal(1500) > 0, 1, -1)
X_before = X.copy()
def report(exc):
    # the innermost frame outside a signal handler: where the exception arrived
    frame = [f for f in traceback.extract_tb(exc.__traceback__) if f.name != "handler"][-1]
    print("interrupted", type(exc).__name__, "|", frame.line, flush=True)
print("start", flush=True)
"""


def _child(tmp_path, body, *, sigint_after=None, timeout=120, ready="start"):
    """Run PROBLEM + body in a child and return its stdout; with ``sigint_after``,
    SIGINT it that many seconds after it prints ``ready`` (PROBLEM's "start", or a
    line of the body's once it set up more). The test fails if the child does not
    end within ``timeout`` s (its process group is killed)."""
    script = tmp_path / "child.py"
    script.write_text(PROBLEM + textwrap.dedent(body))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(cakernels.__file__).resolve().parent.parent)]
        + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.Popen([sys.executable, str(script)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        if sigint_after is not None:
            first = proc.stdout.readline()
            assert first.strip() == "start", first + proc.stderr.read()
            while ready != "start" and not first.endswith(ready + "\n"):
                line = proc.stdout.readline()
                assert line, first + proc.stderr.read()
                first += line
            try:
                proc.wait(timeout=sigint_after)  # (it should not end by itself)
            except subprocess.TimeoutExpired:
                pass
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        when = "of SIGINT" if sigint_after is not None else ""
        pytest.fail(f"the child did not end within {timeout} s {when}\n{out}\n{err}")
    assert proc.returncode == 0, out + err
    if sigint_after is not None:
        out = first + out
    return out


def _interrupt(tmp_path, body, *, delay=1.0):
    """:func:`_child`, SIGINT ``delay`` s after "start"."""
    return _child(tmp_path, body, sigint_after=delay)


def test_sigint_stops_smo_on_the_main_thread(tmp_path):
    out = _interrupt(tmp_path, """
        try:
            smo_fit(X, y.astype(float), 1.0, gamma=0.5, tol=1e-300, max_iter=10**15)
        except KeyboardInterrupt as exc:
            report(exc)
        assert np.array_equal(X, X_before)
        # the next solve runs normally (and the same as in a fresh process)
        res = smo_fit(X, y.astype(float), 1.0, gamma=0.5, tol=1e-3)
        print("after", res["n_iter"] > 0, flush=True)
    """)
    # raised by the native solve itself, not once it returned
    assert "interrupted KeyboardInterrupt | " in out and "smo_solve(" in out, out
    assert "after True" in out


def test_sigint_stops_asygcd_team(tmp_path):
    out = _interrupt(tmp_path, """
        try:
            AsyGCDSVC(tol=1e-300, max_iter=10**15, n_threads=2).fit(X, y)
        except KeyboardInterrupt as exc:
            report(exc)
    """)
    assert "interrupted KeyboardInterrupt | " in out and "asygcd_solve(" in out, out


def test_sigint_stops_asygcd_while_it_builds_a_warm_starts_gradient(tmp_path):
    # the warm start's gradient (one kernel slice per nonzero alpha0, before the
    # first step) was computed without a poll: here ~3 minutes of slices, and
    # Ctrl-C waited for all of them (40,000 rows x 20 features: 10 s)
    out = _child(tmp_path, """
        from cakernels._solvers.asygcd import asygcd_fit
        rng = np.random.default_rng(1)
        Xw = rng.standard_normal((40000, 400))
        yw = np.where(rng.random(40000) > 0.5, 1.0, -1.0)
        print("ready", flush=True)
        try:
            asygcd_fit(Xw, yw, 1.0, gamma=1e-3, n_threads=1, alpha0=np.full(40000, 0.5),
                       tol=1e-300, max_iter=10**15, cache_size=50)
        except KeyboardInterrupt as exc:
            report(exc)
    """, sigint_after=1.0, timeout=60, ready="ready")
    assert "interrupted KeyboardInterrupt | " in out and "asygcd_solve(" in out, out


@pytest.mark.parametrize("backend", ["serial", "threads"])
def test_sigint_handler_exception_propagates(tmp_path, backend):
    # a user's SIGINT handler that raises its own exception (a timeout pattern) ends the
    # solve with it; on the threads backend the workers' solves ran on, and the pool's
    # exit waited for them forever
    out = _interrupt(tmp_path, f"""
        class Stop(Exception):
            pass
        def handler(signum, frame):
            raise Stop("stopped by the user's handler")
        signal.signal(signal.SIGINT, handler)
        try:
            CASVC(n_partitions={1 if backend == "serial" else 2}, tol=1e-300,
                  max_iter=10**15, backend={backend!r},
                  n_jobs={None if backend == "serial" else 2}).fit(X, y)
        except Stop as exc:
            report(exc)
    """)
    assert "interrupted Stop | " in out, out
    if backend == "serial":  # raised by the native solve itself
        assert "smo_solve(" in out, out


@pytest.mark.parametrize("how", ["backend", "blocks"])
def test_sigint_stops_the_workers_solves(tmp_path, how):
    # threads backend: the main thread waits for the pool (the workers never see
    # the signal); run_blocks: the main thread solves a block, a worker another
    out = _interrupt(tmp_path, f"""
        try:
            if {how!r} == "backend":
                CASVC(n_partitions=2, tol=1e-300, max_iter=10**15, backend="threads",
                      n_jobs=2).fit(X, y)
            else:
                def solve(start, stop):
                    smo_fit(X[start:stop], y[start:stop].astype(float), 1.0, gamma=0.5,
                            tol=1e-300, max_iter=10**15)
                run_blocks(solve, [(0, 750), (750, 1500)], 2)
        except KeyboardInterrupt as exc:
            report(exc)
    """)
    assert "interrupted KeyboardInterrupt" in out, out
    # (the process also ended: a worker's solve still running would hold its exit)


def test_a_cancelled_token_stops_its_solves_only(tmp_path):
    # a pool's token: its running solve stops, a solve started under it later stops at
    # once (the first design stopped only the solves running at the moment), and a
    # solve of another fit in another thread runs on (the first design stopped every
    # native solve of the process)
    out = _child(tmp_path, """
        from cakernels.backends._pool import CancelToken, running_under
        before = smo_fit(X, y.astype(float), 1.0, gamma=0.5, tol=1e-3)
        token, other = CancelToken(), CancelToken()
        caught, finished = [], []
        def work():
            with running_under(token):
                try:
                    smo_fit(X, y.astype(float), 1.0, gamma=0.5, tol=1e-300,
                            max_iter=10**15)
                except KeyboardInterrupt as exc:
                    caught.append(str(exc))
        def other_fit():
            with running_under(other):  # another fit's pool
                try:
                    smo_fit(X, y.astype(float), 1.0, gamma=0.5, tol=1e-300,
                            max_iter=10**15)
                except KeyboardInterrupt:
                    finished.append("stopped by its own token")
        t = threading.Thread(target=work)
        u = threading.Thread(target=other_fit)
        t.start(); u.start()
        t.join(0.5)
        token.cancel()
        t.join(60)
        time.sleep(0.5)
        running = u.is_alive()  # the other fit's solve runs on
        other.cancel()
        u.join(60)
        print("worker", t.is_alive(), caught, flush=True)
        print("other", running, u.is_alive(), finished, flush=True)
        child = CancelToken(token)  # a pool started under a cancelled one
        with running_under(child):
            try:
                smo_fit(X, y.astype(float), 1.0, gamma=0.5, tol=1e-3)
                print("later solve ran", flush=True)
            except KeyboardInterrupt:
                print("later solve stopped", flush=True)
        after = smo_fit(X, y.astype(float), 1.0, gamma=0.5, tol=1e-3)
        print("same", np.array_equal(before["alpha"], after["alpha"]), flush=True)
    """)
    assert "worker False ['the solve was cancelled: its fit was stopped" in out, out
    assert "other True False ['stopped by its own token']" in out, out
    assert "later solve stopped" in out and "same True" in out, out


def test_sigint_stops_a_search_whose_tasks_start_solves_later(tmp_path):
    # the SVM search's tasks alternate solves and scoring: a task between two solves
    # when Ctrl-C came started its next solve afterwards, which ran to its end
    out = _interrupt(tmp_path, """
        from cakernels import CASVCCV
        try:
            CASVCCV(n_partitions=2, Cs=[1.0, 2.0, 4.0], gammas=[0.5, 1.0], cv=2,
                    tol=1e-300, max_iter=10**15, backend="threads", n_jobs=2,
                    random_state=0).fit(X, y)
        except KeyboardInterrupt as exc:
            report(exc)
    """)
    assert "interrupted KeyboardInterrupt" in out, out


@pytest.mark.parametrize("backend", ["threads", "serial"])
def test_sigint_stops_a_kernel_ridge_search(tmp_path, backend):
    # no native solve to poll: the thread pools' loops stop at the token (the workers
    # of backend='threads' ran their partitions' whole searches first: seconds to
    # minutes). 20,000 sigmas take minutes here (2,000: 15 s).
    out = _interrupt(tmp_path, f"""
        from cakernels import BKRR2CV
        try:
            BKRR2CV(n_partitions=2, sigmas=np.logspace(-1, 1, 20000), lams=[1e-3], cv=2,
                    backend={backend!r}, n_jobs=2 if {backend!r} == "threads" else None,
                    random_state=0).fit(X, y.astype(float))
        except KeyboardInterrupt as exc:
            report(exc)
    """)
    assert "interrupted KeyboardInterrupt" in out, out


def test_a_tasks_error_is_raised_not_the_cancellation_it_caused(tmp_path):
    # a failing worker cancels its pool's token: the calling thread's solve stops (it
    # would never end here) and the worker's ValueError is raised, not the
    # KeyboardInterrupt 'the solve was cancelled' of the solve it stopped
    out = _child(tmp_path, """
        main = threading.main_thread()
        def func(start, stop):
            if threading.current_thread() is main:
                smo_fit(X, y.astype(float), 1.0, gamma=0.5, tol=1e-300, max_iter=10**15)
            else:
                time.sleep(0.3)
                raise ValueError("bad block")
        try:
            run_blocks(func, [(0, 1), (1, 2)], 2)
        except BaseException as exc:
            print("raised", type(exc).__name__, exc, flush=True)
    """)
    assert "raised ValueError bad block" in out, out


def test_a_search_raises_its_tasks_own_error():
    # one gamma's tasks fail (the kernel diagonal overflows): the error came back as
    # the cancellation of a sibling task's solve in 5 of 6 fits
    from cakernels import CASVCCV

    rng = np.random.RandomState(0)
    X = rng.randn(2000, 10)
    y = np.where(X[:, 0] + 0.7 * rng.randn(2000) > 0, 1, 0)
    for _ in range(3):
        with pytest.raises(FloatingPointError, match="kernel values overflow"):
            CASVCCV(n_partitions=1, kernel="poly", degree=3, coef0=-1.0, Cs=(10.0, 100.0),
                    gammas=(0.05, 1e103), cv=3, tol=1e-5, n_jobs=2,
                    random_state=0).fit(X, y)


def test_a_partitions_error_stops_the_earlier_partitions_solves(tmp_path):
    # backend='threads' read the partitions' results in task order: partition 1's
    # error waited for partition 0's whole solve (here: forever)
    out = _child(tmp_path, """
        from cakernels.svm._partitioned import PartitionedSVC
        original = PartitionedSVC._fit_partition
        def fit_partition(self, p, ctx):
            if p.j == 1:
                raise ValueError("partition 1 failed")
            return original(self, p, ctx)
        PartitionedSVC._fit_partition = fit_partition
        try:
            CASVC(n_partitions=4, tol=1e-300, max_iter=10**15, backend="threads",
                  n_jobs=2, random_state=0).fit(X, y)
        except BaseException as exc:
            print("raised", type(exc).__name__, exc, flush=True)
    """)
    assert "raised ValueError partition 1 failed" in out, out


def test_sigint_during_a_pools_error_handling_waits_for_its_workers(tmp_path):
    # Ctrl-C while run_blocks waited for a worker after another block's error: the
    # call returned with the worker's block still running (writing its output)
    out = _interrupt(tmp_path, """
        main = threading.main_thread()
        finished = []
        def func(start, stop):
            if threading.current_thread() is main:
                raise ValueError("bad block")
            A = np.random.default_rng(0).standard_normal((300, 300))
            t = time.time()
            while time.time() - t < 3.0:  # a block that never checks the token
                A = np.tanh(A @ A.T / 300)
            finished.append(True)
        try:
            run_blocks(func, [(0, 1), (1, 2)], 2)
        except BaseException as exc:
            print("raised", type(exc).__name__, exc, "| worker done:", finished, flush=True)
    """, delay=0.5)
    assert "raised ValueError bad block | worker done: [True]" in out, out


class _Alarm(BaseException):
    """What a signal's handler raises in the tests below (as KeyboardInterrupt)."""


@pytest.mark.parametrize("which", ["reserve_threads", "blas_limits"])
def test_a_signal_while_a_blocks_exit_waits_for_its_lock_still_undoes_it(which):
    """A lock wait is interruptible: a Ctrl-C while a block's exit waited for the
    budget's lock (another fit holding it) left the block before its undo, and the
    threads stayed held (later fits got one thread) or BLAS stayed limited, for the
    rest of the process."""
    import threading
    import time

    from threadpoolctl import threadpool_info

    from cakernels.backends import _budget, blas_limits, cpu_count, reserve_threads
    from cakernels.backends import threads_available

    def blas():
        return [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]

    block, lock = ((reserve_threads(cpu_count()), _budget._LOCK) if which == "reserve_threads"
                   else (blas_limits(1), blas_limits._lock))
    blas_before = blas()
    taken, release = threading.Event(), threading.Event()

    def hold():
        with lock:
            taken.set()
            release.wait(10)

    def handler(signum, frame):
        release.set()  # (the holder lets go soon after: the exit then completes)
        raise _Alarm

    old = signal.signal(signal.SIGALRM, handler)
    holder = threading.Thread(target=hold)
    try:
        with pytest.raises(_Alarm):
            with block:
                holder.start()
                assert taken.wait(10)
                signal.setitimer(signal.ITIMER_REAL, 0.2)  # while the exit waits
        holder.join(10)
        time.sleep(0.3)  # (no second alarm pending)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        release.set()
    assert threads_available() == cpu_count() and _budget._HELD[0] == 0
    assert blas_limits._requests == [] and blas() == blas_before


@pytest.mark.parametrize("when", ["first limit", "last limit", "first restore",
                                  "last restore"])
def test_an_interruption_while_openmp_is_limited_or_restored_restores_it(when, monkeypatch):
    """``openmp_limits`` (K-means partitioning) sets every OpenMP runtime one by one:
    a Ctrl-C between two of them left one at 1 thread for good (the native module's:
    every later fit of the thread ran on one thread)."""
    import sklearn.cluster  # noqa: F401  (scikit-learn's OpenMP runtime, as K-means)
    import threadpoolctl

    from cakernels.backends import cpu_count
    from cakernels.backends._budget import blas_limits, openmp_limits

    libs = [lib for lib in blas_limits.controller().lib_controllers
            if lib.user_api == "openmp"]
    assert libs or not cakernels._native.openmp_enabled()
    if not libs:  # (a build without OpenMP, with scikit-learn's runtime elsewhere)
        return
    at = {"first limit": 1, "last limit": len(libs), "first restore": len(libs) + 1,
          "last restore": 2 * len(libs)}[when]
    before = [lib.get_num_threads() for lib in libs]
    cores = cpu_count()
    real = threadpoolctl.OpenMPController.set_num_threads
    calls = [0]

    def interrupted_at(self, n):  # the interruption right after call `at`
        real(self, n)
        calls[0] += 1
        if calls[0] == at:
            raise _Alarm

    monkeypatch.setattr(threadpoolctl.OpenMPController, "set_num_threads", interrupted_at)
    with pytest.raises(_Alarm):
        with openmp_limits(1):
            assert [lib.get_num_threads() for lib in libs] == [1] * len(libs)
    monkeypatch.undo()
    assert [lib.get_num_threads() for lib in libs] == before
    assert cpu_count() == cores


def test_openmp_limits_never_raises_a_setting():
    from threadpoolctl import threadpool_limits

    from cakernels.backends._budget import blas_limits, openmp_limits

    libs = [lib for lib in blas_limits.controller().lib_controllers
            if lib.user_api == "openmp"]
    with threadpool_limits(1, user_api="openmp"):
        with openmp_limits(4):
            assert all(lib.get_num_threads() == 1 for lib in libs)


@pytest.mark.parametrize("which", ["reserve_threads", "blas_limits"])
def test_a_signal_just_as_a_blocks_exit_gets_its_lock_does_not_deadlock(tmp_path, which):
    """The signal's handler may run just after the lock was granted to the exit that
    waited for it: the retry then waited for its own lock, for good (and caught every
    later Ctrl-C)."""
    out = _child(tmp_path, f"""
        from cakernels.backends import _budget, blas_limits, cpu_count, reserve_threads
        from cakernels.backends import threads_available
        budget = {which!r} == "reserve_threads"
        lock = _budget._LOCK if budget else blas_limits._lock
        main = threading.get_ident()
        def other(ready):
            lock.acquire()  # (another fit, for a moment)
            ready.set()
            time.sleep(0.001)
            lock.release()
            signal.pthread_kill(main, signal.SIGINT)  # the user's Ctrl-C, as it is granted
        for attempt in range(20):
            try:
                with reserve_threads(1) if budget else blas_limits(1):
                    ready = threading.Event()
                    th = threading.Thread(target=other, args=(ready,))
                    th.start(); ready.wait()
            except KeyboardInterrupt:
                pass
            th.join()
        print("held", _budget._HELD[0], "requests", blas_limits._requests,
              "available", threads_available() == cpu_count())
    """, timeout=60)
    assert "held 0 requests [] available True" in out
