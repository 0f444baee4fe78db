"""Oversubscription, contention and the process's thread budget.

Asy-GCD: the team-size rule, the delay bound, the hand-over to one thread when
the team keeps waiting (forced on demand, so that it is tested whatever the
timing), a stress run of 8 threads on the machine's cores and fits while other
processes keep every core busy (these two in a child process with a generous
time limit: the only assertion on time is that they finish). The budget: nested
sessions and concurrent regions never hold more threads than the process may
use, BLAS limits nest and interleave across threads and come back, and a fit
inside ``GridSearchCV(n_jobs=2)`` gets its share of the cores.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_info, threadpool_limits

import cakernels._native as _native
from cakernels import CASVC, AsyGCDSVC
from cakernels._solvers.asygcd import MIN_ROWS_PER_THREAD, asygcd_fit, team_size
from cakernels._solvers.smo import native_matrix
from cakernels.backends import (
    SerialBackend,
    ThreadsBackend,
    blas_limits,
    cpu_count,
    reserve_threads,
    threads_available,
)

TOL = 1e-3


def data(n, seed=0):
    X, y = make_classification(n_samples=n, n_features=10, random_state=seed)
    return np.ascontiguousarray(X), np.where(y == 1, 1.0, -1.0)


def q_matrix(X, y, gamma):
    return (y[:, None] * y[None, :]) * rbf_kernel(X, gamma=gamma)


def max_violation(alpha, grad, upper):
    pg = np.where(alpha <= 0.0, np.minimum(grad, 0.0),
                  np.where(alpha >= upper, np.maximum(grad, 0.0), grad))
    return float(np.max(np.abs(pg)))


def solve(X, y, C, gamma, n_threads, **kw):
    n = X.shape[0]
    alpha = np.zeros(n)
    block = (np.arange(n) % n_threads).astype(np.int64)
    obj, n_upd, conv, grad, stats = _native.asygcd_solve(
        native_matrix(X), y, np.full(n, C), block, alpha, 1, gamma, 0.0, 3.0, n_threads,
        True, 0, TOL, kw.pop("max_iter", -1), 200.0, return_stats=True, **kw)
    return alpha, obj, n_upd, conv, np.asarray(grad), stats


# --------------------------------------------------------------------------
# team size and the default number of threads
# --------------------------------------------------------------------------
def test_team_size_rule():
    assert MIN_ROWS_PER_THREAD == 5000
    assert team_size(400, 2) == 1
    assert team_size(2 * MIN_ROWS_PER_THREAD - 1, 2) == 1
    assert team_size(2 * MIN_ROWS_PER_THREAD, 2) == 2
    assert team_size(10**6, 3) == 3
    assert team_size(100, 8, min_rows_per_thread=10) == 8
    with pytest.raises(ValueError, match="min_rows_per_thread"):
        team_size(10, 2, 0)


def test_small_problem_runs_on_one_thread_unless_forced():
    X, y = data(400)
    one = asygcd_fit(X, y, 4.0, gamma=0.3, n_threads=2, random_state=0)
    assert one["n_threads"] == 1
    serial = asygcd_fit(X, y, 4.0, gamma=0.3, n_threads=1, random_state=0)
    np.testing.assert_array_equal(one["alpha"], serial["alpha"])  # the serial solve itself
    two = asygcd_fit(X, y, 4.0, gamma=0.3, n_threads=2, random_state=0, min_rows_per_thread=1)
    assert two["n_threads"] == 2
    assert two["objective"] == pytest.approx(serial["objective"], rel=1e-3)


def test_default_team_comes_from_the_budget(monkeypatch):
    # joblib's loky workers set OMP_NUM_THREADS = cores // n_jobs
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert cpu_count() == 1 and threads_available() == 1
    X, y = data(2 * MIN_ROWS_PER_THREAD)
    assert asygcd_fit(X, y, 1.0, gamma=0.1, random_state=0)["n_threads"] == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "not a number")
    assert cpu_count() >= 1


# --------------------------------------------------------------------------
# the delay bound and the hand-over to one thread
# --------------------------------------------------------------------------
@pytest.mark.parametrize("n, n_threads, expected", [
    (600, 2, 75),     # ceil(n / 8)
    (10, 2, 16),      # at least 8 per thread
    (50, 4, 32),
    (40000, 1, 4096),  # at most the log's capacity
])
def test_delay_bound_scales_with_the_problem(n, n_threads, expected):
    X, y = data(n)
    *_, stats = solve(X, y, 1.0, 0.3, n_threads, max_iter=10)
    assert stats["max_delay"] == expected
    *_, stats = solve(X, y, 1.0, 0.3, n_threads, max_delay=5, max_iter=10)
    assert stats["max_delay"] == 5


def test_delay_bound_checked():
    X, y = data(20)
    for bad in (-1, 4097):
        with pytest.raises(ValueError, match="max_delay"):
            solve(X, y, 1.0, 0.3, 2, max_delay=bad)


@pytest.mark.parametrize("n_threads", [2, 4])
@pytest.mark.parametrize("at", [1, 37, 400])
@pytest.mark.parametrize("shrinking", [False, True])
def test_collapse_hands_over_to_one_thread(n_threads, at, shrinking):
    """A team that hands over at step ``at`` reaches the optimum: every step of
    the team applied, then one thread from the team's alpha and gradient."""
    X, y = data(600)
    C, gamma = 4.0, 0.3
    alpha, obj, n_upd, conv, grad, stats = solve(X, y, C, gamma, n_threads, collapse_at=at,
                                                 shrinking=shrinking)
    assert stats["collapsed"] is True
    assert conv and n_upd >= at
    Q = q_matrix(X, y, gamma)
    np.testing.assert_allclose(grad, Q @ alpha - 1.0, atol=1e-9 * C * 600)
    assert max_violation(alpha, grad, np.full(600, C)) <= TOL
    ref_alpha, ref_obj, *_ = solve(X, y, C, gamma, 1)
    assert obj == pytest.approx(0.5 * alpha @ Q @ alpha - alpha.sum(), rel=1e-9)
    assert obj == pytest.approx(ref_obj, rel=1e-4)


def test_collapse_respects_max_iter():
    X, y = data(600)
    for at in (50, 150):
        alpha, obj, n_upd, conv, grad, stats = solve(X, y, 4.0, 0.3, 2, collapse_at=at,
                                                     max_iter=150)
        assert n_upd == 150 and not conv
        Q = q_matrix(X, y, 0.3)
        np.testing.assert_allclose(grad, Q @ alpha - 1.0, atol=1e-9 * 4.0 * 600)


def test_one_thread_never_collapses():
    X, y = data(300)
    *_, stats = solve(X, y, 4.0, 0.3, 1, collapse_at=5)
    assert stats["collapsed"] is False


# --------------------------------------------------------------------------
# stress and contention, in a child process with a time limit
# --------------------------------------------------------------------------
CHILD = textwrap.dedent("""
    import json, subprocess, sys, time
    import numpy as np
    from sklearn.datasets import make_classification
    from cakernels._solvers.asygcd import asygcd_fit

    n_busy, n, n_threads, repeat = map(int, sys.argv[1:5])
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(n_busy)]
    try:
        X, y = make_classification(n_samples=n, n_features=10, random_state=1)
        y = np.where(y == 1, 1.0, -1.0)
        ref = asygcd_fit(X, y, 4.0, gamma=0.3, n_threads=1, random_state=0)
        out = []
        for r in range(repeat):
            res = asygcd_fit(X, y, 4.0, gamma=0.3, n_threads=n_threads, random_state=r,
                             min_rows_per_thread=1, return_stats=True)
            out.append(dict(objective=res["objective"], converged=res["converged"],
                            team=res["n_threads"], collapsed=res["stats"]["collapsed"],
                            n_updates=res["n_updates"]))
        print(json.dumps(dict(reference=ref["objective"], runs=out)))
    finally:
        for h in hogs:
            h.kill()
""")


def run_child(n_busy, n, n_threads, repeat, timeout):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(n_busy), str(n), str(n_threads),
                             str(repeat)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{n_threads} threads with {n_busy} busy processes did not finish "
                    f"within {timeout} s")
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("n_busy, n, n_threads", [
    (0, 3000, 8),   # the stress test: 8 threads on this machine's cores
    (2, 400, 2),    # the small problem while both cores are busy
    (2, 3000, 4),   # more threads than cores, cores busy
])
def test_oversubscribed_team_reaches_the_serial_optimum(n_busy, n, n_threads):
    res = run_child(n_busy, n, n_threads, repeat=3, timeout=300)
    for run in res["runs"]:
        assert run["team"] == n_threads
        assert run["converged"], run
        assert run["objective"] == pytest.approx(res["reference"], rel=1e-3), run


PINNED = textwrap.dedent("""
    import json, os
    import numpy as np
    from sklearn.datasets import make_classification
    import cakernels._native as _native
    from cakernels._solvers.smo import native_matrix

    # the whole process on one core: a 2-thread team shares it
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    n = 8000
    X, y = make_classification(n_samples=n, n_features=20, random_state=0)
    y = np.where(y == 1, 1.0, -1.0)
    M = native_matrix(np.ascontiguousarray(X))
    out = []
    for nt in (1, 2, 2, 2):
        a = np.zeros(n)
        block = (np.arange(n) % nt).astype(np.int64)
        obj, upd, conv, g, st = _native.asygcd_solve(
            M, y, np.full(n, 4.0), block, a, 1, 0.05, 0.0, 3.0, nt, True, 0, 1e-3, -1,
            200.0, return_stats=True)
        out.append(dict(threads=nt, objective=obj, converged=conv,
                        collapsed=st["collapsed"], reason=st["collapse_reason"]))
    print(json.dumps(out))
""")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_team_on_one_core_hands_over_to_one_thread():
    """Two threads pinned to one core: the OS runs each for about half of its
    time, and the CPU share test (deviation 5 in ck_asygcd.c) hands the solve
    to one thread, which reaches the serial optimum."""
    proc = subprocess.run([sys.executable, "-c", PINNED], capture_output=True, text=True,
                          timeout=300, start_new_session=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout.strip().splitlines()[-1])
    serial, teams = runs[0], runs[1:]
    assert serial["collapsed"] is False and serial["reason"] is None
    for run in teams:
        assert run["converged"] and run["collapsed"] is True, run
        assert run["objective"] == pytest.approx(serial["objective"], rel=1e-4), run
    # the CPU share test is what notices (the delay-bound waits may too, rarely)
    assert "cpu_share" in [run["reason"] for run in teams], teams


def test_collapse_reason_reported():
    X, y = data(600)
    *_, stats = solve(X, y, 4.0, 0.3, 2, collapse_at=10)
    assert stats["collapsed"] is True and stats["collapse_reason"] == "on_demand"
    *_, stats = solve(X, y, 4.0, 0.3, 1)
    assert stats["collapse_reason"] is None


# --------------------------------------------------------------------------
# the thread budget
# --------------------------------------------------------------------------
def test_reserve_threads_nests_within_the_budget():
    total = cpu_count()
    assert threads_available() == total
    with reserve_threads(total) as a:
        assert a == total
        with reserve_threads(total) as b:
            assert b == 1  # what is left, at least one
            assert threads_available() == 1
    assert threads_available() == total
    with reserve_threads(10**6) as c:
        assert c == total


def test_nested_sessions_never_exceed_the_cores():
    total = cpu_count()
    with ThreadsBackend().session() as outer:
        assert outer.n_workers * outer.threads == total
        with ThreadsBackend().session() as inner:
            assert inner.n_workers * inner.threads <= max(1, total - outer.n_workers)
        with SerialBackend().session() as inner:
            assert inner.threads <= max(1, total - outer.n_workers)
    with SerialBackend().session() as alone:
        assert alone.threads == total
    # an explicit worker count is the user's choice; the threads are shared
    with ThreadsBackend(n_jobs=4).session() as s:
        assert s.n_workers == 4 and s.threads == 1


def test_partitions_on_threads_inside_a_threads_backend():
    X, y = data(400)
    seen = []

    def fit(seed):
        clf = CASVC(n_partitions=2, backend="threads", random_state=seed).fit(X, y)
        seen.append(clf.fit_stats_["n_workers"] * clf.fit_stats_["threads_per_worker"])
        return clf.score(X, y)

    with ThreadsBackend(n_jobs=2).session() as s:
        held = s.n_workers * s.threads
        scores = s.map(fit, [0, 1])
    assert all(sc > 0.8 for sc in scores)
    # the two nested fits ran while the outer session held its threads
    assert all(v <= max(1, cpu_count() - held) for v in seen), (seen, held)


def _blas_threads():
    return [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]


def test_blas_limits_nest_and_interleave_across_threads():
    original = _blas_threads()
    assert original, "NumPy's BLAS is loaded and controllable"
    with blas_limits(2):
        with blas_limits(1):
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {min(2, o) for o in original}
    assert _blas_threads() == original
    # A enters, B enters, A leaves while B is inside, then B leaves: threadpoolctl's
    # own context manager would have restored A's view under B
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with blas_limits(1):
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def b():
        a_in.wait(10)
        with blas_limits(1):
            b_in.set()
            a_out.wait(10)
            seen["b after a left"] = set(_blas_threads())

    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start(), tb.start()
    ta.join(20), tb.join(20)
    assert seen["b after a left"] == {1}
    assert _blas_threads() == original
    assert blas_limits.current is None


def test_blas_limits_never_raise_the_users_setting():
    # the package's regions lower BLAS, never raise it: a user's threadpool_limits (or
    # OPENBLAS_NUM_THREADS=1) stays in force inside a threads-backend fit
    from sklearn.datasets import make_regression

    from cakernels import BKRR2

    seen = []

    class Spy(BKRR2):
        def _fit_partition(self, part, ctx):
            seen.append(set(_blas_threads()))
            return super()._fit_partition(part, ctx)

    Xr, yr = make_regression(n_samples=300, n_features=5, random_state=0)
    with threadpool_limits(1, user_api="blas"):
        with blas_limits(2):
            assert set(_blas_threads()) == {1}
        Spy(2, backend="threads", n_jobs=1, random_state=0).fit(Xr, yr)
        assert seen == [{1}, {1}]
        assert set(_blas_threads()) == {1}
    assert blas_limits.current is None


def test_blas_limits_keep_no_limiter_per_change():
    # a long region open in one thread while another opens and closes regions (a
    # service predicting while a fit runs): the limits change, the state stays small
    original = _blas_threads()
    with blas_limits(2):
        for _ in range(200):
            with blas_limits(1):
                assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {min(2, o) for o in original}
        assert len(blas_limits._limited) <= len(original)  # one entry per library
    assert _blas_threads() == original and blas_limits._limited == []
    assert blas_limits._original == {}


def test_asygcd_partitions_on_threads_restore_blas():
    original = _blas_threads()
    X, y = data(600)
    clf = CASVC(n_partitions=4, solver="asygcd", backend="threads", n_jobs=2,
                random_state=0).fit(X, y)
    assert clf.score(X, y) > 0.8
    assert _blas_threads() == original
    assert blas_limits.current is None
    # the estimator itself holds its threads while it fits
    AsyGCDSVC(C=1.0, random_state=0).fit(X, y)
    assert threads_available() == cpu_count()


def test_threads_backend_inside_gridsearch_n_jobs_2():
    from sklearn.model_selection import GridSearchCV

    def _threads_held(est, X, y):
        """A scorer: the threads the fitted estimator's session held (a local
        function, pickled by value: CI's workers cannot import ``tests``)."""
        return float(est.fit_stats_["n_workers"] * est.fit_stats_["threads_per_worker"])

    X, y = data(300)
    grid = GridSearchCV(CASVC(n_partitions=2, backend="threads", random_state=0),
                        {"C": [0.5, 1.0]}, cv=2, n_jobs=2, scoring=_threads_held)
    grid.fit(X, y)
    held = grid.cv_results_["mean_test_score"]
    # joblib's workers get cores // n_jobs threads (OMP_NUM_THREADS), so the
    # two concurrent fits together never hold more than the cores
    assert np.all(held <= max(1, cpu_count() // 2)), held


def test_blas_limits_reach_a_library_loaded_inside_a_region(monkeypatch):
    # a BLAS library loaded while a limit is open (an import inside a fit) gets the limit
    # at the next region, even when the limit's value does not change
    from cakernels.backends._budget import _BlasLimits

    limits = _BlasLimits()
    real = limits._control()
    blas = [lib for lib in real.lib_controllers if lib.user_api == "blas"]
    assert len(blas) >= 1
    first = blas[:1]  # pretend only the first library was loaded when the region opened

    class Partial:
        lib_controllers = first

        def limit(self, limits):
            return real.limit(limits=limits)

    monkeypatch.setattr(limits, "_control", lambda: Partial())
    original = _blas_threads()
    with limits(1):
        monkeypatch.setattr(limits, "_control", lambda: real)  # the others appear
        with limits(1):
            assert set(_blas_threads()) == {1}
    assert _blas_threads() == original
