"""The native SMO on several threads (``smo_fit(n_threads=...)``): every pass
split over the team gives the same solution bit for bit as one thread, a team
that collapses to one thread too, small problems stay on one thread, and the
estimators hand the backend's thread budget to their local solves."""

import numpy as np
import pytest
from sklearn.datasets import make_classification
from threadpoolctl import threadpool_limits

import cakernels._native as _native
import cakernels._solvers.smo as smo_module
from cakernels import CASVC, PartitionedSVC
from cakernels.backends import ThreadsBackend, threads_available
from cakernels._solvers.smo import smo_fit

OMP = _native.openmp_enabled()


@pytest.mark.parametrize("fmt", ["dense", "dense_float_exact", "csr", "csr_float_exact"])
@pytest.mark.parametrize("cache", ["copy", "rows", "two_columns"])
def test_threads_bit_identical(fmt, cache, smo_problem, assert_same_solution):
    """Every pass on the team (min_parallel_work=1): kernel columns from the
    feature-major copy or from the rows of X (CSR scratch per thread), a
    cache of two columns (columns recomputed and extended in pieces), the
    selection's reductions (ties included) and the gradient updates; 2 and 3
    threads (3 pieces on 2 cores) give the bits of one thread."""
    X, y = smo_problem(fmt=fmt)
    n, d = X.shape
    col_mb = n * 8 / 2**20
    cache_mb = {"copy": np.inf, "rows": 3 * col_mb, "two_columns": 2 * col_mb}[cache]
    kw = dict(kernel="rbf", gamma=0.5, cache_size=cache_mb)
    ref = smo_fit(X, y, 5.0, n_threads=1, **kw)
    assert ref["converged"] and ref["n_iter"] > 1000
    assert ref["threads_used"] == 1 and ref["parallel_regions"] == 0
    # 2 threads never collapse here, so every pass is split; 3 threads on a
    # 2-core machine may collapse (oversubscribed: the timing rule), which
    # must not change the result either
    for n_threads, collapse_at in ((2, -1), (3, None)):
        _native.smo_team_hint(0)  # (no earlier collapse remembered: the team starts)
        got = smo_fit(X, y, 5.0, n_threads=n_threads, min_parallel_work=1,
                      collapse_at=collapse_at, **kw)
        assert_same_solution(got, ref)
        if OMP:  # without OpenMP the same call runs on one thread
            assert got["threads_used"] == n_threads
            if collapse_at == -1:
                assert got["parallel_regions"] > ref["n_iter"]
    _native.smo_team_hint(0)


def test_threads_warm_start_weights_and_max_iter(smo_problem, assert_same_solution):
    """The warm start's gradient (axpys over all variables), per-sample bounds
    and a stop at max_iter while shrunk: the same on 2 threads."""
    X, y = smo_problem()
    w = np.random.RandomState(0).uniform(0.2, 2.0, size=y.size)
    ref = smo_fit(X, y, 3.0, gamma=0.5, sample_weight=w)
    with pytest.warns(Warning, match="did not converge"):
        start = smo_fit(X, y, 3.0, gamma=0.5, sample_weight=w, max_iter=300)
    kw = dict(gamma=0.5, sample_weight=w, min_parallel_work=1, collapse_at=-1)
    for n_threads in (1, 2):
        warm = smo_fit(X, y, 2.0, alpha0=start["alpha"] * (2.0 / 3.0), n_threads=n_threads,
                       **kw)
        if n_threads == 1:
            warm1 = warm
        else:
            assert_same_solution(warm, warm1)
        with pytest.warns(Warning, match="did not converge"):
            stop = smo_fit(X, y, 3.0, max_iter=1700, n_threads=n_threads, **kw)
        assert not stop["converged"] and stop["n_iter"] == 1700
        if n_threads == 1:
            stop1 = stop
        else:
            assert_same_solution(stop, stop1)
    assert ref["converged"]


def test_collapse_on_demand_same_result(smo_problem, assert_same_solution):
    """A team handed to one thread mid-solve (as when other programs hold the
    cores) finishes with the same bits."""
    X, y = smo_problem()
    ref = smo_fit(X, y, 5.0, gamma=0.5)
    got = smo_fit(X, y, 5.0, gamma=0.5, n_threads=2, min_parallel_work=1, collapse_at=50)
    assert_same_solution(got, ref)
    if OMP:
        assert got["collapses"] >= 1
        assert 50 <= got["parallel_regions"] < ref["n_iter"]


def test_a_collapse_is_remembered_by_the_next_solves(smo_problem, assert_same_solution):
    """A team's collapse (when other programs hold the cores) keeps the teams
    of the solves that start before its retry time off: a multiclass fit's
    short pair solves each paid the busy team's waits before they collapsed
    (usps with two busy processes: 5-8x their 1-thread time). The tests'
    own modes (``collapse_at``) ignore it; the result never changes."""
    X, y = smo_problem()
    ref = smo_fit(X, y, 5.0, gamma=0.5)
    kw = dict(gamma=0.5, n_threads=2, min_parallel_work=1)
    if not OMP:  # one thread, no team: nothing to remember, the same solution
        assert _native.smo_team_hint(3600) == (0.0, 0.0)
        assert _native.smo_team_hint() == (0.0, 0.0)
        got = smo_fit(X, y, 5.0, **kw, collapse_at=50)
        assert_same_solution(got, ref)
        assert got["threads_used"] == 1 and got["collapses"] == 0
        assert _native.smo_team_hint() == (0.0, 0.0)
        return
    try:
        _native.smo_team_hint(0)  # no collapse remembered: the team runs
        got = smo_fit(X, y, 5.0, **kw, collapse_at=-1)
        assert_same_solution(got, ref)
        assert got["parallel_regions"] > 0
        assert _native.smo_team_hint() == (0.0, 0.0)
        # a collapse (on demand here) is remembered, with the team's retry wait
        got = smo_fit(X, y, 5.0, **kw, collapse_at=50)
        assert_same_solution(got, ref)
        assert got["collapses"] == 1 and _native.smo_team_hint()[1] == 0.25
        # a solve that starts before the retry time starts collapsed
        _native.smo_team_hint(3600)
        got = smo_fit(X, y, 5.0, **kw)
        assert_same_solution(got, ref)
        assert got["parallel_regions"] == 0 and got["threads_used"] == 1
        assert got["collapses"] == 0  # (this solve's own collapses)
        # ... unless a test mode forces the team
        got = smo_fit(X, y, 5.0, **kw, collapse_at=-1)
        assert got["parallel_regions"] > ref["n_iter"] and got["threads_used"] == 2
        # forgotten: the team runs from the start again
        _native.smo_team_hint(0)
        got = smo_fit(X, y, 5.0, **kw)
        assert_same_solution(got, ref)
        assert got["parallel_regions"] > 0 and got["threads_used"] == 2
    finally:
        _native.smo_team_hint(0)
    with pytest.raises(ValueError, match="set_seconds"):
        _native.smo_team_hint(float("nan"))


def test_small_problems_stay_on_one_thread(smo_problem):
    """The default grain keeps the passes of a small problem on the calling
    thread (a region's fork and join would cost more than its work)."""
    X, y = smo_problem(n=400)
    res = smo_fit(X, y, 5.0, gamma=0.5, n_threads=2)
    assert res["parallel_regions"] == 0 and res["threads_used"] == 1


def test_bad_thread_arguments(smo_problem):
    X, y = smo_problem(n=100)
    with pytest.raises(ValueError, match="n_threads"):
        smo_fit(X, y, 1.0, n_threads=0)
    with pytest.raises(ValueError, match="min_parallel_work"):
        smo_fit(X, y, 1.0, min_parallel_work=0)
    a = np.zeros(y.size)
    args = (np.ascontiguousarray(X), y, np.ones(y.size), a, 1, 0.5, 0.0, 3.0, 1e-3, -1, 10.0)
    for bad in (dict(n_threads=0), dict(min_work=-1), dict(collapse_at=-2)):
        with pytest.raises(ValueError, match="n_threads must be >= 1"):
            _native.smo_solve(*args, **bad)


def _spy(monkeypatch):
    calls = []
    real = smo_module.smo_fit

    def spy(*args, **kwargs):
        calls.append(kwargs.get("n_threads"))
        return real(*args, **kwargs)

    monkeypatch.setattr(smo_module, "smo_fit", spy)
    return calls


def test_estimators_hand_the_thread_budget_to_smo(monkeypatch):
    """The serial backend gives every local SMO solve the process's threads,
    the threads backend each worker its share (workers x threads <= cores),
    and the fitted model does not depend on it."""
    X, y = make_classification(n_samples=600, n_features=6, random_state=0)
    calls = _spy(monkeypatch)
    serial = CASVC(n_partitions=2, C=4.0, gamma=0.3, random_state=0).fit(X, y)
    assert calls and set(calls) == {threads_available()}
    calls.clear()
    workers = threads_available()
    pooled = PartitionedSVC(n_partitions=2, C=4.0, gamma=0.3, random_state=0,
                            backend=ThreadsBackend(n_jobs=workers)).fit(X, y)
    assert calls and set(calls) == {1}
    np.testing.assert_array_equal(serial.decision_function(X), pooled.decision_function(X))


def test_threadpool_limits_caps_the_solves(monkeypatch):
    """``threadpool_limits(1)`` (scikit-learn users' way to ask for one core)
    limits the OpenMP runtime the native module uses: the backend's thread
    policy reads it, so every local solve gets one thread."""
    if not OMP:
        pytest.skip("the native module is built without OpenMP")  # CI builds both
    X, y = make_classification(n_samples=300, n_features=6, random_state=0)
    calls = _spy(monkeypatch)
    with threadpool_limits(1, user_api="openmp"):
        assert threads_available() == 1
        CASVC(n_partitions=2, C=4.0, gamma=0.3, random_state=0).fit(X, y)
    assert calls and set(calls) == {1}
