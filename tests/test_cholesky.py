"""The blocked Cholesky factorization (cakernels._solvers.cholesky) and the task
graph runner it stands on (cakernels.backends._pool.run_graph)."""

import threading

import numpy as np
import pytest
from scipy import linalg

from cakernels import BKRR2
from cakernels._solvers import cholesky as chol
from cakernels._solvers.cholesky import SMALL_CHOLESKY, cholesky_in_place
from cakernels._solvers.krr import solve_krr
from cakernels.backends._pool import row_blocks, run_blocks, run_graph


def _spd(n, seed=0):
    # a well-conditioned RBF-like matrix: cheap for large n, unlike A @ A.T
    X = np.random.default_rng(seed).standard_normal((n, 4))
    sq = (X * X).sum(1)
    K = np.exp(-0.25 * np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0))
    K.flat[:: n + 1] += 1e-2 * n
    return np.ascontiguousarray((K + K.T) / 2)


# ------------------------------------------------------------------ the factorization
@pytest.mark.parametrize("n", [0, 1, 5, SMALL_CHOLESKY - 1, SMALL_CHOLESKY, 1100, 3100])
def test_factor_matches_lapack_and_touches_one_triangle(n):
    K = _spd(n, seed=n)
    A = K.copy()
    assert cholesky_in_place(A, n_threads=2) == 0
    if n:
        # L = A.T's lower triangle (the layout cho_solve((A.T, True), b) reads)
        np.testing.assert_allclose(np.tril(A.T), np.linalg.cholesky(K), rtol=0, atol=1e-11)
    np.testing.assert_array_equal(np.tril(A, -1), np.tril(K, -1))


@pytest.mark.parametrize("n", [1500, 3200])
def test_factor_does_not_depend_on_the_thread_count(n):
    K = _spd(n, seed=1)
    factors = []
    for n_threads in (1, 2, 3):
        A = K.copy()
        assert cholesky_in_place(A, n_threads=n_threads) == 0
        factors.append(np.triu(A))
    np.testing.assert_array_equal(factors[0], factors[1])
    np.testing.assert_array_equal(factors[0], factors[2])


def test_tiling_covers_the_matrix_and_depends_on_its_size_only():
    for n in (SMALL_CHOLESKY, 1500, 3072, 3073, 5000):
        tasks, deps, priority = chol._task_graph(n)
        diag = [(k0, k1) for kind, k0, k1, _, _ in tasks if kind == chol._DIAG]
        assert diag[0][0] == 0 and diag[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(diag, diag[1:]))
        assert {k1 - k0 for k0, k1 in diag[:-1]} == {chol.tile_rows(n)}
        assert len(deps) == len(tasks) == len(priority)
        assert all(j < i for i, d in enumerate(deps) for j in d)  # built in a valid order


@pytest.mark.parametrize("n, bad_row", [(900, 300), (2000, 0), (2000, 1500), (3500, 3499)])
def test_not_positive_definite_reports_the_leading_minor_as_lapack(n, bad_row):
    K = _spd(n, seed=2)
    K[bad_row, bad_row] = -1e6
    expected = linalg.lapack.dpotrf(K.copy(), lower=1)[1]
    assert expected == bad_row + 1
    assert cholesky_in_place(K.copy(), n_threads=2) == expected


def test_factorizations_on_the_pool_threads_concurrently():
    """The 'threads' backend factors partitions concurrently: graphs run inside
    run_blocks workers (nested on the same shared pool) finish with the bits of
    a lone factorization."""
    K = _spd(1300, seed=4)
    lone = K.copy()
    cholesky_in_place(lone, n_threads=1)
    out = [K.copy() for _ in range(4)]

    def factor(start, stop):
        for i in range(start, stop):
            assert cholesky_in_place(out[i], n_threads=2) == 0

    run_blocks(factor, row_blocks(4, 1), 3)
    for A in out:
        np.testing.assert_array_equal(np.triu(A), np.triu(lone))


def test_solve_krr_same_bits_for_any_thread_count():
    K = _spd(1400, seed=5)
    y = np.random.default_rng(5).standard_normal((1400, 2))
    alphas = [solve_krr(K.copy(), y, 0.5, n_threads=t) for t in (1, 2)]
    np.testing.assert_array_equal(alphas[0], alphas[1])
    np.testing.assert_allclose(alphas[0], np.linalg.solve(K + 0.5 * np.eye(1400), y),
                               rtol=1e-9, atol=1e-12)


def test_krr_fit_serial_and_threads_backends_give_the_same_bits():
    """Before the blocked factorization, the serial backend's Cholesky ran on
    every BLAS thread and the threads backend's on one: their last bits could
    differ. Partitions of > 1,024 rows take the tiled path."""
    rng = np.random.default_rng(6)
    X = rng.standard_normal((2300, 5))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(2300)
    fits = [BKRR2(n_partitions=2, sigma=1.5, lam=1e-4, backend=b, random_state=0).fit(X, y)
            for b in ("serial", "threads")]
    assert min(e.X.shape[0] for e in fits[0].estimators_) >= SMALL_CHOLESKY
    for a, b in zip(fits[0].estimators_, fits[1].estimators_):
        np.testing.assert_array_equal(a.alpha, b.alpha)
    np.testing.assert_array_equal(fits[0].predict(X[:300]), fits[1].predict(X[:300]))


# ------------------------------------------------------------------ run_graph
def _chain_and_fan(n=40):
    # task i waits for i - 1 and for i // 2 (a chain with fan-in)
    return [sorted({i - 1, i // 2} - {i}) if i else [] for i in range(n)]


@pytest.mark.parametrize("n_threads", [1, 2, 4])
def test_run_graph_runs_every_task_once_after_its_dependencies(n_threads):
    deps = _chain_and_fan()
    done, lock = [], threading.Lock()

    def func(i):
        with lock:
            assert all(j in done for j in deps[i]), (i, deps[i], done)
            assert i not in done
        with lock:
            done.append(i)

    assert run_graph(func, deps, list(range(len(deps))), n_threads) is None
    assert sorted(done) == list(range(len(deps)))


def test_run_graph_one_thread_follows_the_priorities():
    # no dependencies: the order is the priorities' order
    order = []
    run_graph(order.append, [[] for _ in range(6)], [5, 3, 4, 0, 2, 1], 1)
    assert order == [3, 5, 4, 1, 2, 0]
    # a ready task of smaller priority overtakes the others once its dependency is done
    order = []
    run_graph(order.append, [[], [], [0]], [1, 5, 9], 1)
    assert order == [0, 1, 2]
    order = []
    run_graph(order.append, [[], [], [0]], [1, 5, 2], 1)
    assert order == [0, 2, 1]


@pytest.mark.parametrize("n_threads", [1, 3])
def test_run_graph_stops_on_a_result_and_on_an_error(n_threads):
    deps = [[i - 1] if i else [] for i in range(20)]  # a chain: the order is fixed
    started = []

    def stop_at_5(i):
        started.append(i)
        return "stop" if i == 5 else None

    assert run_graph(stop_at_5, deps, list(range(20)), n_threads) == "stop"
    assert started == list(range(6))
    started.clear()

    def fail_at_3(i):
        started.append(i)
        if i == 3:
            raise KeyError("task 3")

    with pytest.raises(KeyError, match="task 3"):
        run_graph(fail_at_3, deps, list(range(20)), n_threads)
    assert started == list(range(4))


def test_run_graph_error_wakes_waiting_threads():
    """A thread waiting for a task that will never be ready must not hang when
    another thread's task fails."""
    gate = threading.Event()

    def func(i):
        if i == 0:
            gate.wait(5)
            raise RuntimeError("boom")
        gate.set()

    # 0 and 1 ready; 2 waits for 0: the thread that ran 1 waits, then must leave
    with pytest.raises(RuntimeError, match="boom"):
        run_graph(func, [[], [], [0]], [0, 1, 2], 2)


def test_run_graph_rejects_cycles_and_runs_empty_graphs():
    with pytest.raises(ValueError, match="cycle"):
        run_graph(lambda i: None, [[1], [0]], [0, 1], 2)
    with pytest.raises(ValueError, match="cycle"):
        run_graph(lambda i: None, [[], [2], [1]], [0, 1, 2], 2)
    assert run_graph(lambda i: None, [], [], 2) is None
