"""Tests of the native module ``cakernels._native`` against NumPy references."""

import math
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cakernels._native as _native

LINEAR, RBF, POLY, SIGMOID = 0, 1, 2, 3
KINDS = {"linear": LINEAR, "rbf": RBF, "poly": POLY, "sigmoid": SIGMOID}


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def reference(X, Y, kind, gamma, coef0, degree):
    """Brute-force NumPy kernel block K(X, Y)."""
    G = X @ Y.T
    with np.errstate(all="ignore"):
        if kind == LINEAR:
            return G
        if kind == RBF:
            xn = np.einsum("ij,ij->i", X, X)
            yn = np.einsum("ij,ij->i", Y, Y)
            d = np.maximum(xn[:, None] + yn[None, :] - 2.0 * G, 0.0)
            return np.exp(-gamma * d)
        if kind == POLY:
            return (gamma * G + coef0) ** degree
        if kind == SIGMOID:
            return np.tanh(gamma * G + coef0)
    raise AssertionError(kind)


def native(X, Y, kind, gamma, coef0, degree, n_threads=1, norms=True):
    G = np.ascontiguousarray(X @ Y.T)
    xn = np.einsum("ij,ij->i", X, X) if norms else None
    yn = np.einsum("ij,ij->i", Y, Y) if norms else None
    out = _native.kernel_from_gram(G, xn, yn, kind, gamma, coef0, degree, n_threads)
    assert out is None
    return G


def ulp_distance(a, b):
    """Distance in units in the last place between float64 arrays (finite)."""
    ia = np.asarray(a, dtype=np.float64).view(np.int64)
    ib = np.asarray(b, dtype=np.float64).view(np.int64)
    # map the sign-magnitude ordering to a monotone integer ordering
    ia = np.where(ia < 0, np.int64(-(2**63)) - ia, ia)
    ib = np.where(ib < 0, np.int64(-(2**63)) - ib, ib)
    return np.abs(ia - ib)


def data(n, m, d, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return scale * rng.standard_normal((n, d)), scale * rng.standard_normal((m, d))


PARAMS = {
    "linear": dict(gamma=1.0, coef0=0.0, degree=3.0),
    "rbf": dict(gamma=0.1, coef0=0.0, degree=3.0),
    "poly": dict(gamma=0.3, coef0=1.5, degree=3.0),
    "sigmoid": dict(gamma=0.05, coef0=-0.5, degree=3.0),
}


# --------------------------------------------------------------------------
# module information
# --------------------------------------------------------------------------


def test_openmp_enabled_is_bool():
    assert isinstance(_native.openmp_enabled(), bool)


def test_max_threads():
    n = _native.max_threads()
    assert isinstance(n, int)
    assert n >= 1
    if not _native.openmp_enabled():
        assert n == 1


def test_simd_path():
    assert _native.simd_path() in ("avx512f", "avx2", "baseline")


def test_kind_constants():
    assert (_native.KERNEL_LINEAR, _native.KERNEL_RBF, _native.KERNEL_POLY,
            _native.KERNEL_SIGMOID) == (0, 1, 2, 3)


# --------------------------------------------------------------------------
# values
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(KINDS))
@pytest.mark.parametrize("n_threads", [1, 2, 0])
@pytest.mark.parametrize("shape", [(37, 53, 5), (200, 301, 17), (3, 1, 4), (1, 7, 2),
                                   (64, 1, 3), (301, 200, 1)])
def test_matches_numpy(name, n_threads, shape):
    n, m, d = shape
    X, Y = data(n, m, d, seed=n * 1000 + m)
    kind = KINDS[name]
    p = PARAMS[name]
    K = native(X, Y, kind, p["gamma"], p["coef0"], p["degree"], n_threads)
    R = reference(X, Y, kind, p["gamma"], p["coef0"], p["degree"])
    assert K.shape == (n, m)
    np.testing.assert_allclose(K, R, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_large_block_threads_agree(name):
    """Big enough for the OpenMP path; results must not depend on threads."""
    X, Y = data(300, 257, 8, seed=3)  # odd number of columns
    p = PARAMS[name]
    results = [native(X, Y, KINDS[name], p["gamma"], p["coef0"], p["degree"], t)
               for t in (1, 2, 0, 3)]
    for K in results[1:]:
        np.testing.assert_array_equal(K, results[0])
    R = reference(X, Y, KINDS[name], p["gamma"], p["coef0"], p["degree"])
    np.testing.assert_allclose(results[0], R, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("n_cols", [1, 2, 3, 5, 7, 9, 15, 17, 31, 33])
def test_odd_column_counts_rbf(n_cols):
    """Vector loop remainders: every column must be transformed."""
    X, Y = data(11, n_cols, 3, seed=n_cols)
    K = native(X, Y, RBF, 0.7, 0.0, 3.0)
    np.testing.assert_allclose(K, reference(X, Y, RBF, 0.7, 0.0, 3.0), rtol=1e-13, atol=0)


@pytest.mark.parametrize("name", sorted(KINDS))
@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0)])
def test_empty_blocks(name, shape):
    G = np.empty(shape)
    rn = np.zeros(shape[0]) if name == "rbf" else None
    cn = np.zeros(shape[1]) if name == "rbf" else None
    assert _native.kernel_from_gram(G, rn, cn, KINDS[name], 1.0, 0.0, 3.0, 2) is None
    assert G.shape == shape


def test_linear_is_unchanged():
    X, Y = data(13, 9, 4)
    G = X @ Y.T
    K = G.copy()
    _native.kernel_from_gram(K, None, None, LINEAR, 2.0, 1.0, 3.0, 1)
    np.testing.assert_array_equal(K, G)


def test_rbf_diagonal_is_one_and_range():
    X, _ = data(50, 1, 6, seed=4)
    K = native(X, X, RBF, 0.5, 0.0, 3.0)
    np.testing.assert_allclose(np.diag(K), 1.0, rtol=0, atol=1e-12)
    assert np.all((K >= 0.0) & (K <= 1.0))


def test_rbf_clips_negative_distances():
    # rn + cn - 2G < 0 must be clipped to 0, giving exactly 1
    G = np.array([[5.0, 1.0]])
    _native.kernel_from_gram(G, np.array([1.0]), np.array([1.0, 0.5]), RBF, 2.0, 0.0, 3.0, 1)
    assert G[0, 0] == 1.0
    assert G[0, 1] == math.exp(-2.0 * max(1.0 + 0.5 - 2.0, 0.0)) == 1.0


def test_rbf_exp_accuracy_full_range():
    """The vectorised exp stays within 2 ulp of libm over its whole range,
    including gradual underflow, underflow to 0 and overflow to inf."""
    x = np.concatenate([
        np.linspace(-750.0, 0.0, 200_001),
        np.linspace(0.0, 709.78, 100_001),
        np.geomspace(1e-300, 1.0, 10_001),
        -np.geomspace(1e-300, 1.0, 10_001),
        [-745.1332191019411, -745.1332191019412, -708.3964185322641, 709.782712893384],
    ])
    a = np.abs(x)
    # kernel value = exp(-gamma * a); gamma = +-1 gives both signs
    for gamma, arg in ((1.0, a), (-1.0, a[a <= 709.78])):
        K = np.zeros((1, arg.size))
        _native.kernel_from_gram(K, np.zeros(1), arg, RBF, gamma, 0.0, 3.0, 1)
        ref = np.array([math.exp(-gamma * v) for v in arg])
        assert ulp_distance(K[0], ref).max() <= 2
    # beyond the range
    K = np.zeros((1, 3))
    _native.kernel_from_gram(K, np.zeros(1), np.array([746.0, 1e300, np.inf]), RBF, 1.0, 0.0, 3.0, 1)
    np.testing.assert_array_equal(K, 0.0)
    K = np.zeros((1, 3))
    _native.kernel_from_gram(K, np.zeros(1), np.array([710.0, 1e300, np.inf]), RBF, -1.0, 0.0, 3.0, 1)
    np.testing.assert_array_equal(K, np.inf)


def test_nan_propagates():
    G = np.array([[np.nan, 0.0, 1.0]])
    K = G.copy()
    _native.kernel_from_gram(K, np.zeros(1), np.array([0.0, np.nan, 2.0]), RBF, 1.0, 0.0, 3.0, 1)
    assert np.isnan(K[0, 0]) and np.isnan(K[0, 1])
    assert K[0, 2] == math.exp(0.0)
    for kind in (POLY, SIGMOID):
        K = G.copy()
        _native.kernel_from_gram(K, None, None, kind, 1.0, 0.0, 3.0, 1)
        assert np.isnan(K[0, 0])


@pytest.mark.parametrize("degree", [0.0, 1.0, 2.0, 3.0, 4.0, 7.0])
def test_poly_integer_degrees_exact(degree):
    """Integer degrees reproduce NumPy's ``**`` bit for bit."""
    rng = np.random.default_rng(int(degree))
    G = rng.integers(-6, 7, size=(17, 23)).astype(np.float64)
    for gamma, coef0 in [(1.0, 0.0), (0.5, 1.0), (2.0, -3.0), (0.37, 0.11)]:
        K = G.copy()
        _native.kernel_from_gram(K, None, None, POLY, gamma, coef0, degree, 2)
        np.testing.assert_array_equal(K, (gamma * G + coef0) ** degree)


@pytest.mark.parametrize("degree", [3, 4, 5, 7])
def test_poly_integer_degree_accuracy(degree):
    """Within 1 ulp of the exact power of the (rounded) base, including
    negative bases (no exp(log) shortcut)."""
    from fractions import Fraction

    base = np.random.default_rng(degree).uniform(-3.0, 3.0, size=(40, 25))
    K = base.copy()
    _native.kernel_from_gram(K, None, None, POLY, 1.0, 0.0, float(degree), 1)
    exact = np.array([float(Fraction(v) ** degree) for v in base.ravel()]).reshape(base.shape)
    assert ulp_distance(K, exact).max() <= 1


def test_poly_fractional_degree():
    G = np.abs(np.random.default_rng(1).standard_normal((9, 11)))
    K = G.copy()
    _native.kernel_from_gram(K, None, None, POLY, 0.5, 1.0, 2.5, 1)
    np.testing.assert_allclose(K, (0.5 * G + 1.0) ** 2.5, rtol=1e-15)
    # negative base with non-integer degree is NaN, like NumPy
    K = np.full((1, 1), -3.0)
    _native.kernel_from_gram(K, None, None, POLY, 1.0, 0.0, 0.5, 1)
    assert np.isnan(K[0, 0])


def test_keywords_and_norms_ignored_for_non_rbf():
    X, Y = data(4, 6, 3)
    G = X @ Y.T
    _native.kernel_from_gram(G=G, row_sqnorm=None, col_sqnorm=None, kind=SIGMOID,
                             gamma=0.2, coef0=0.1, degree=3.0, n_threads=1)
    np.testing.assert_allclose(G, np.tanh(0.2 * (X @ Y.T) + 0.1), rtol=1e-15)


def test_accepts_any_writable_float64_buffer():
    import array

    buf = array.array("d", [0.0, 1.0, 2.0, 3.0])
    G = memoryview(buf).cast("B").cast("d", shape=[2, 2])
    _native.kernel_from_gram(G, None, None, POLY, 1.0, 1.0, 2.0, 1)
    assert list(buf) == [1.0, 4.0, 9.0, 16.0]


# --------------------------------------------------------------------------
# invalid input: always ValueError, never a crash
# --------------------------------------------------------------------------


def _call(G, rn=None, cn=None, kind=RBF, gamma=1.0, coef0=0.0, degree=3.0, n_threads=1):
    return _native.kernel_from_gram(G, rn, cn, kind, gamma, coef0, degree, n_threads)


def test_norm_length_mismatch():
    G = np.zeros((3, 4))
    with pytest.raises(ValueError, match="row_sqnorm"):
        _call(G, np.zeros(4), np.zeros(4))
    with pytest.raises(ValueError, match="col_sqnorm"):
        _call(G, np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="row_sqnorm"):
        _call(G, np.zeros((3, 1)), np.zeros(4))
    with pytest.raises(ValueError, match="col_sqnorm"):
        _call(G, np.zeros(3), np.zeros(4, dtype=np.float32))
    with pytest.raises(ValueError, match="col_sqnorm"):
        _call(G, np.zeros(3), np.zeros(8)[::2])
    with pytest.raises(ValueError, match="col_sqnorm"):
        _call(G, np.zeros(3), [0.0, 0.0, 0.0, 0.0])
    # mismatched norms are also rejected for the other kernels
    with pytest.raises(ValueError):
        _call(G, np.zeros(5), None, kind=POLY)


def test_rbf_needs_norms():
    G = np.zeros((3, 4))
    for rn, cn in [(None, None), (np.zeros(3), None), (None, np.zeros(4))]:
        with pytest.raises(ValueError, match="RBF"):
            _call(G, rn, cn)


def test_norms_must_not_alias_G():
    G = np.zeros((4, 4))
    with pytest.raises(ValueError, match="share memory"):
        _call(G, np.zeros(4), G[0])


@pytest.mark.parametrize(
    "make_G",
    [
        lambda: np.zeros((4, 6))[:, ::2],            # non-contiguous
        lambda: np.asfortranarray(np.zeros((4, 3))),  # F order
        lambda: np.zeros((4, 3), dtype=np.float32),  # float32
        lambda: np.zeros((4, 3), dtype=np.int64),    # right itemsize, wrong type
        lambda: np.zeros(12),                        # 1-D
        lambda: np.zeros((2, 2, 3)),                 # 3-D
        lambda: np.zeros((4, 3)).astype(">f8"),      # byte-swapped
        lambda: [[0.0, 1.0], [2.0, 3.0]],            # not a buffer
        lambda: b"\x00" * 96,                        # read-only bytes
    ],
    ids=["strided", "fortran", "float32", "int64", "1d", "3d", "bigendian", "list", "bytes"],
)
def test_bad_G(make_G):
    G = make_G()
    before = np.array(G, copy=True) if isinstance(G, np.ndarray) else None
    with pytest.raises(ValueError):
        _call(G, None, None, kind=SIGMOID)
    if before is not None:
        np.testing.assert_array_equal(G, before)


def test_read_only_G():
    G = np.zeros((3, 3))
    G.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        _call(G, np.zeros(3), np.zeros(3))


@pytest.mark.parametrize("kwargs", [
    dict(kind=4), dict(kind=-1),
    dict(gamma=np.nan), dict(gamma=np.inf), dict(coef0=-np.inf), dict(degree=np.nan),
    dict(kind=POLY, degree=-1.0),
])
def test_bad_parameters(kwargs):
    G = np.ones((2, 3))
    with pytest.raises(ValueError):
        _call(G, np.zeros(2), np.zeros(3), **kwargs)
    np.testing.assert_array_equal(G, 1.0)


def test_bad_argument_types():
    G = np.ones((2, 3))
    with pytest.raises(TypeError):
        _native.kernel_from_gram(G, None, None, "rbf", 1.0, 0.0, 3.0, 1)
    with pytest.raises(TypeError):
        _native.kernel_from_gram(G, None, None, 0, 1.0)


def test_buffers_released_on_every_path():
    """Success and every error path give back all buffer exports."""
    import sys

    G = np.ones((3, 4))
    rn, cn = np.zeros(3), np.zeros(4)
    bad_cn = np.zeros(5)
    cases = [
        (rn, cn, RBF, 1.0, None),                # success
        (rn, cn, SIGMOID, 1.0, None),            # success, norms ignored
        (rn, bad_cn, RBF, 1.0, ValueError),      # col norms wrong length
        (np.zeros(2), cn, RBF, 1.0, ValueError), # row norms wrong length
        (rn, None, RBF, 1.0, ValueError),        # RBF without norms
        (rn, G[0], RBF, 1.0, ValueError),        # aliasing
        (rn, cn, RBF, np.nan, ValueError),       # bad gamma
    ]
    for r, c, kind, gamma, exc in cases:
        refs = [sys.getrefcount(o) for o in (G, rn, cn, bad_cn)]
        if exc is None:
            _native.kernel_from_gram(G, r, c, kind, gamma, 0.0, 3.0, 1)
        else:
            with pytest.raises(exc):
                _native.kernel_from_gram(G, r, c, kind, gamma, 0.0, 3.0, 1)
        # a buffer export holds a reference to its exporter
        assert [sys.getrefcount(o) for o in (G, rn, cn, bad_cn)] == refs


# --------------------------------------------------------------------------
# the GIL is released
# --------------------------------------------------------------------------


def _rbf_problem(n, d=8, seed=7, gamma=0.05):
    X = np.random.default_rng(seed).standard_normal((n, d))
    xn = np.einsum("ij,ij->i", X, X)
    G0 = X @ X.T
    expected = np.exp(-gamma * np.maximum(xn[:, None] + xn[None, :] - 2 * G0, 0.0))
    return G0, xn, expected


def test_gil_released_concurrent_threads():
    """Two Python threads transform big blocks concurrently and both finish
    with correct results."""
    G0, xn, expected = _rbf_problem(1536)
    results = [None, None]
    errors = []
    barrier = threading.Barrier(2)

    def work(k):
        try:
            barrier.wait(timeout=60)
            for _ in range(6):
                H = G0.copy()
                _native.kernel_from_gram(H, xn, xn, RBF, 0.05, 0.0, 3.0, 1)
            results[k] = H
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive()
    assert not errors, errors
    for H in results:
        np.testing.assert_allclose(H, expected, rtol=1e-12, atol=1e-300)


def test_gil_released_during_call():
    """Deterministic check that the call runs without the GIL.

    With a huge switch interval the worker thread keeps the GIL until it
    blocks or releases it explicitly.  The main thread, woken by the event,
    therefore only runs once the worker is inside kernel_from_gram (GIL
    released) -- and must see the call still in progress.  If the binding
    kept the GIL, the main thread could only run after the call returned.
    """
    n = 2048
    G0, xn, _ = _rbf_problem(n, d=4, seed=11)
    H = G0.copy()
    _assert_releases_gil(lambda: _native.kernel_from_gram(H, xn, xn, RBF, 0.05, 0.0, 3.0, 1))


def _assert_releases_gil(call):
    """Run ``call`` twice in a worker thread with a huge switch interval and
    check that the main thread ran while the calls were in progress (see
    the test above): it can only if ``call`` releases the GIL."""
    import sys

    state = {"done": False}
    started = threading.Event()

    def work():
        started.set()  # wakes the main thread, which then waits for the GIL
        call()
        call()
        state["done"] = True

    old = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    try:
        t = threading.Thread(target=work)
        t.start()
        started.wait(timeout=60)
        done_when_main_ran = state["done"]
    finally:
        sys.setswitchinterval(old)
    t.join(timeout=120)
    assert not t.is_alive()
    assert state["done"]
    assert not done_when_main_ran, "main thread could not run during the call: GIL held"


# --------------------------------------------------------------------------
# property test
# --------------------------------------------------------------------------

finite = st.floats(min_value=-3.0, max_value=3.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 9),
    m=st.integers(0, 9),
    d=st.integers(1, 5),
    kind=st.sampled_from([LINEAR, RBF, POLY, SIGMOID]),
    gamma=st.floats(min_value=1e-3, max_value=5.0),
    coef0=finite,
    degree=st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0]),
    n_threads=st.sampled_from([0, 1, 2]),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_random_small(n, m, d, kind, gamma, coef0, degree, n_threads, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    Y = rng.uniform(-2, 2, size=(m, d))
    K = native(X, Y, kind, gamma, coef0, degree, n_threads, norms=(kind == RBF))
    R = reference(X, Y, kind, gamma, coef0, degree)
    assert K.shape == R.shape == (n, m)
    # NumPy's ** may use SIMD pow (SVML) that differs from libm by an ulp
    np.testing.assert_allclose(K, R, rtol=1e-12, atol=1e-13)


# --------------------------------------------------------------------------
# GIL-free blocked Cholesky tasks through SciPy's LAPACK/BLAS
# --------------------------------------------------------------------------
from scipy.linalg import cython_blas, cython_lapack  # noqa: E402

ROUTINES = (cython_lapack.__pyx_capi__["dpotrf"], cython_blas.__pyx_capi__["dtrsm"],
            cython_blas.__pyx_capi__["dgemm"], cython_blas.__pyx_capi__["dsyrk"])
DIAG, PANEL, UPDATE = 0, 1, 2


def _spd(n, seed=0):
    A = np.random.RandomState(seed).randn(n, n)
    return A @ A.T + n * np.eye(n)


@pytest.mark.parametrize("n", [1, 2, 7, 200])
def test_cholesky_task_diag_on_the_whole_matrix_matches_numpy(n):
    K = _spd(n)
    L_ref = np.linalg.cholesky(K)
    work = K.copy()
    assert _native.cholesky_task(work, DIAG, 0, n, 0, 0, ROUTINES) == 0
    # the lower factor lives in the lower triangle of work.T
    np.testing.assert_allclose(np.tril(work.T), L_ref, rtol=1e-12, atol=1e-12)
    # the other triangle is neither read nor written
    np.testing.assert_array_equal(np.tril(work, -1), np.tril(K, -1))


@pytest.mark.parametrize("n, tile", [(10, 3), (37, 8), (64, 16)])
def test_cholesky_tasks_in_order_give_the_factor(n, tile):
    """Every step's diagonal, panel (rows in uneven chunks) and update (each
    later block column) in sequence is the Cholesky factor; no entry above the
    column-major diagonal changes."""
    K = _spd(n, seed=n)
    work = K.copy()
    tiles = [(s, min(s + tile, n)) for s in range(0, n, tile)]
    for k, (k0, k1) in enumerate(tiles):
        assert _native.cholesky_task(work, DIAG, k0, k1, 0, 0, ROUTINES) == 0
        if k1 == n:
            break
        cut = (k1 + n) // 2 + 1 if n - k1 > 2 else n  # two panel chunks of different size
        for r0, r1 in [(k1, cut), (cut, n)] if cut < n else [(k1, n)]:
            assert _native.cholesky_task(work, PANEL, k0, k1, r0, r1, ROUTINES) == 0
        for c0, c1 in tiles[k + 1:]:
            assert _native.cholesky_task(work, UPDATE, k0, k1, c0, c1, ROUTINES) == 0
    np.testing.assert_allclose(np.tril(work.T), np.linalg.cholesky(K), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.tril(work, -1), np.tril(K, -1))


def test_cholesky_task_reports_not_positive_definite_from_the_first_row():
    K = _spd(10)
    K[4, 4] = -100.0
    assert _native.cholesky_task(K.copy(), DIAG, 0, 10, 0, 0, ROUTINES) == 5
    K = _spd(10)
    K[7, 7] = -100.0  # the diagonal tile [6, 10): its 2nd row, the 8th of the matrix
    assert _native.cholesky_task(K.copy(), DIAG, 6, 10, 0, 0, ROUTINES) == 8


def test_cholesky_task_bad_arguments():
    K = _spd(6)
    with pytest.raises(ValueError, match="square"):
        _native.cholesky_task(np.zeros((3, 4)), DIAG, 0, 3, 0, 0, ROUTINES)
    with pytest.raises(ValueError, match="square float64"):
        _native.cholesky_task(np.zeros((3, 3), dtype=np.float32), DIAG, 0, 3, 0, 0, ROUTINES)
    with pytest.raises(ValueError):
        _native.cholesky_task(np.asfortranarray(np.zeros((3, 2)))[:2].T, DIAG, 0, 2, 0, 0,
                              ROUTINES)
    ro = K.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        _native.cholesky_task(ro, DIAG, 0, 6, 0, 0, ROUTINES)
    with pytest.raises(ValueError, match="PyCapsule"):
        _native.cholesky_task(K.copy(), DIAG, 0, 6, 0, 0, ("dpotrf",) + ROUTINES[1:])
    with pytest.raises(ValueError, match="4 capsules"):
        _native.cholesky_task(K.copy(), DIAG, 0, 6, 0, 0, ROUTINES[:3])
    with pytest.raises(TypeError):
        _native.cholesky_task(K.copy(), DIAG, 0, 6, 0, 0, list(ROUTINES))
    # sizes out of range and unknown tasks: a status error, nothing written
    for args in [(DIAG, 0, 0, 0, 0), (DIAG, -1, 3, 0, 0), (DIAG, 2, 7, 0, 0),
                 (PANEL, 0, 3, 2, 6), (PANEL, 0, 3, 3, 3), (PANEL, 0, 3, 3, 7),
                 (UPDATE, 0, 3, 1, 4), (UPDATE, 0, 3, 4, 8), (7, 0, 3, 3, 6)]:
        work = K.copy()
        with pytest.raises(ValueError, match="cholesky_task.*invalid argument"):
            _native.cholesky_task(work, *args, ROUTINES)
        np.testing.assert_array_equal(work, K)
    with pytest.raises(ValueError, match="cholesky_task"):
        _native.cholesky_task(np.zeros((0, 0)), DIAG, 0, 0, 0, 0, ROUTINES)


def test_cholesky_task_releases_the_gil():
    """Same deterministic check as for kernel_from_gram (see above)."""
    K0 = _spd(900, seed=3)
    _assert_releases_gil(lambda: _native.cholesky_task(K0.copy(), DIAG, 0, 900, 0, 0, ROUTINES))


# --------------------------------------------------------------------------
# GIL-free symmetric eigendecomposition (dsyevd through SciPy's LAPACK)
# --------------------------------------------------------------------------
SYEVD = cython_lapack.__pyx_capi__["dsyevd"]


def _sym(n, seed=0):
    B = np.random.RandomState(seed).randn(n, n)
    return (B + B.T) / 2  # exactly symmetric: a + b == b + a


@pytest.mark.parametrize("n", [1, 2, 7, 64, 300])
def test_eigh_inplace_equals_scipy_eigh_bit_for_bit(n):
    """The same LAPACK routine as scipy's eigh(driver='evd') on one thread:
    the same eigenvalues and eigenvectors, to the last bit."""
    from scipy import linalg
    from threadpoolctl import threadpool_limits

    from cakernels._solvers.eigh import eigh_in_place

    A = _sym(n, seed=n)
    with threadpool_limits(1, user_api="blas"):
        w_ref, Q_ref = linalg.eigh(A, driver="evd")
        work = A.copy()
        w = np.empty(n)
        assert _native.eigh_inplace(work, w, SYEVD) == 0
        w2, Q2 = eigh_in_place(A.copy())
    np.testing.assert_array_equal(w, w_ref)
    np.testing.assert_array_equal(work.T, Q_ref)  # eigenvectors in the rows
    np.testing.assert_array_equal(w2, w_ref)
    np.testing.assert_array_equal(Q2, Q_ref)
    np.testing.assert_allclose(Q2 @ np.diag(w2) @ Q2.T, A, atol=1e-12 * n)


def test_eigh_inplace_bad_arguments():
    from cakernels._solvers.eigh import eigh_in_place

    A = _sym(5)
    w = np.empty(5)
    with pytest.raises(ValueError, match="square"):
        _native.eigh_inplace(np.zeros((3, 4)), np.empty(3), SYEVD)
    with pytest.raises(ValueError, match="square float64"):
        _native.eigh_inplace(A.astype(np.float32), w, SYEVD)
    with pytest.raises(ValueError):
        _native.eigh_inplace(np.asfortranarray(A)[:, :4].T[:, :4], np.empty(4), SYEVD)
    ro = A.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        _native.eigh_inplace(ro, w, SYEVD)
    with pytest.raises(ValueError, match="w has 4 elements"):
        _native.eigh_inplace(A.copy(), np.empty(4), SYEVD)
    with pytest.raises(ValueError, match="w must be"):
        _native.eigh_inplace(A.copy(), np.empty(5, dtype=np.float32), SYEVD)
    with pytest.raises(ValueError, match="PyCapsule"):
        _native.eigh_inplace(A.copy(), w, "dsyevd")
    with pytest.raises(ValueError, match="eigh_inplace.*invalid argument"):
        _native.eigh_inplace(np.zeros((0, 0)), np.empty(0), SYEVD)
    with pytest.raises(ValueError, match="writable C-contiguous"):
        eigh_in_place(np.asfortranarray(_sym(4) + np.eye(4)[:, ::-1]))
    with pytest.raises(ValueError, match="writable C-contiguous"):
        eigh_in_place(A.astype(np.float32))
    class Huge:  # only its shape is looked at: the size is checked first
        shape = (32767, 32767)

    with pytest.raises(ValueError, match="32,766 rows"):
        eigh_in_place(Huge())
    w0, Q0 = eigh_in_place(np.zeros((0, 0)))
    assert w0.shape == (0,) and Q0.shape == (0, 0)


def test_eigh_in_place_refuses_non_finite_input():
    """NaN makes dsyevd fail (positive info) or return NaN, never a crash; the
    wrapper refuses it first (kernel values that overflow), as a FloatingPointError
    (it was a LinAlgError 'failed to converge', or NaN eigenvalues)."""
    from cakernels._solvers import eigh as eigh_module
    from cakernels._solvers.eigh import eigh_in_place

    A = _sym(6)
    A[2, 3] = A[3, 2] = np.nan
    with pytest.raises(FloatingPointError, match="kernel values overflow float64"):
        eigh_in_place(A.copy())
    w = np.empty(6)
    info = _native.eigh_inplace(A, w, eigh_module._SYEVD)  # the native call: no crash
    assert info > 0 or np.isnan(w).any()


def test_eigh_inplace_releases_the_gil():
    """Same deterministic check as for kernel_from_gram (see above)."""
    A0 = _sym(500, seed=3)
    w = np.empty(500)
    _assert_releases_gil(lambda: _native.eigh_inplace(A0.copy(), w, SYEVD))


# --------------------------------------------------------------------------
# GIL-free 1-norm, condition estimate and triangular solves after a Cholesky
# --------------------------------------------------------------------------
POCON_POTRS = (cython_lapack.__pyx_capi__["dpocon"], cython_lapack.__pyx_capi__["dpotrs"])


@pytest.mark.parametrize("n", [1, 2, 7, 300])
def test_norm1_equals_lapack_dlange_bit_for_bit(n):
    from scipy import linalg

    rng = np.random.RandomState(n)
    A = rng.randn(n, n) * 10.0 ** rng.uniform(-3, 3, size=(n, n))
    # A's buffer read column-major is A.T: dlange('1') of A.T, NaN-propagating
    assert _native.norm1(A) == linalg.lapack.dlange("1", A.T)
    if n <= 7:  # NumPy sums fewer than 8 values in order too
        assert _native.norm1(A) == np.abs(A.T).sum(axis=0).max()
    if n > 1:
        A[n - 1, 0] = np.nan
        assert np.isnan(_native.norm1(A)) and np.isnan(linalg.lapack.dlange("1", A.T))


@pytest.mark.parametrize("n", [1, 5, 300])
@pytest.mark.parametrize("nrhs", [1, 3])
def test_chol_solve_equals_scipy_cho_solve_bit_for_bit(n, nrhs):
    """After the package's own Cholesky: the same solution as SciPy's
    cho_solve (dpotrs) to the last bit, and SciPy's dpocon estimate (to the
    last bit or two: OpenBLAS's vector kernels may sum in another order for
    another workspace alignment)."""
    from scipy import linalg
    from threadpoolctl import threadpool_limits

    from cakernels._solvers.cholesky import cholesky_in_place

    A = _spd(n, seed=n)
    anorm = _native.norm1(A)
    L = A.copy()
    assert cholesky_in_place(L, 1) == 0
    B = np.random.RandomState(1).randn(n, nrhs)
    bt = np.array(B.T, order="C")
    with threadpool_limits(1, user_api="blas"):
        rcond_ref, info = linalg.lapack.dpocon(L.T, anorm, uplo="L")
        x_ref = linalg.cho_solve((L.T, True), B, check_finite=False)
        rcond = _native.chol_solve(L, bt, anorm, POCON_POTRS)
    assert info == 0
    np.testing.assert_array_equal(bt.T, x_ref)
    assert rcond == pytest.approx(rcond_ref, rel=1e-14)
    np.testing.assert_allclose(A @ bt.T, B, atol=1e-10)


def test_chol_solve_bad_arguments():
    A = _spd(5)
    L = A.copy()
    bt = np.ones((1, 5))
    with pytest.raises(ValueError, match="square"):
        _native.chol_solve(np.zeros((3, 4)), bt, 1.0, POCON_POTRS)
    with pytest.raises(ValueError, match=r"shape \(nrhs, 5\)"):
        _native.chol_solve(L, np.ones((1, 4)), 1.0, POCON_POTRS)
    with pytest.raises(ValueError, match=r"shape \(nrhs, 5\)"):
        _native.chol_solve(L, np.ones(5), 1.0, POCON_POTRS)
    with pytest.raises(ValueError, match="writable C-contiguous"):
        _native.chol_solve(L, np.ones((5, 2)).T, 1.0, POCON_POTRS)  # Fortran view
    with pytest.raises(ValueError, match=r"shape \(nrhs, 5\)"):
        _native.chol_solve(L, np.ones((1, 5), dtype=np.float32), 1.0, POCON_POTRS)
    with pytest.raises(ValueError, match="2 capsules"):
        _native.chol_solve(L, bt, 1.0, POCON_POTRS[:1])
    with pytest.raises(ValueError, match="PyCapsule"):
        _native.chol_solve(L, bt, 1.0, ("dpocon", POCON_POTRS[1]))
    for anorm in (-1.0, np.nan, np.inf):  # a status error, nothing solved
        work = bt.copy()
        with pytest.raises(ValueError, match="chol_solve.*invalid argument"):
            _native.chol_solve(L, work, anorm, POCON_POTRS)
        np.testing.assert_array_equal(work, bt)
    with pytest.raises(ValueError, match="chol_solve.*invalid argument"):
        _native.chol_solve(L, np.ones((0, 5)), 1.0, POCON_POTRS)
    with pytest.raises(ValueError, match="norm1.*invalid argument"):
        _native.norm1(np.zeros((0, 0)))
    with pytest.raises(ValueError, match="square float64"):
        _native.norm1(np.zeros((3, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="C-contiguous square"):
        _native.norm1(np.asfortranarray(np.zeros((3, 4)))[:, :3])


def test_norm1_and_chol_solve_release_the_gil():
    """Same deterministic check as for kernel_from_gram (see above)."""
    from cakernels._solvers.cholesky import cholesky_in_place

    A = _spd(1500, seed=3)
    L = A.copy()
    cholesky_in_place(L, 1)
    bt = np.ones((8, 1500))
    _assert_releases_gil(lambda: _native.chol_solve(L, bt.copy(), 1.0, POCON_POTRS))
    big = np.ones((3000, 3000))  # a norm is quick: many long windows without the GIL

    def norms():
        for _ in range(10):
            _native.norm1(big)

    _assert_releases_gil(norms)


def test_a_huge_thread_count_runs_a_bounded_team():
    # n_threads=100,000 went to OpenMP as asked: libgomp exited the process ("Thread
    # creation failed") or crashed in GOMP_parallel; the team is now at most 256
    # threads (the SMO's bound), with the same results (in a child: the old crash)
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import numpy as np
        import cakernels._native as _native
        rng = np.random.RandomState(0)
        G = rng.rand(300, 300); norms = np.ones(300)
        one, many = G.copy(), G.copy()
        _native.kernel_from_gram(one, norms, norms, 1, 0.5, 0.0, 3.0, 1)
        _native.kernel_from_gram(many, norms, norms, 1, 0.5, 0.0, 3.0, 100000)
        assert np.array_equal(one, many)
        X = rng.randn(300, 5); y = np.where(rng.rand(300) > 0.5, 1.0, -1.0)
        for nt in (1, 100000):
            a = np.zeros(300)
            block = (np.arange(300) % nt).astype(np.int64)
            res = _native.asygcd_solve(X, y, np.ones(300), block, a, 1, 0.2, 0.0, 3.0, nt,
                                       True, 0, 1e-3, 100000, 10.0)
            assert np.isfinite(res[0]) and 0 < np.count_nonzero(a) < 300, res
        print("ok", flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
