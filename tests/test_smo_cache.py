"""The native SMO's kernel column cache: columns live in fixed-size pages of
one pool (no heap fragmentation: the memory is the budget).
The page size never changes the solution; the pool stays within the budget;
the default page size follows n."""

import warnings

import numpy as np
import pytest

import cakernels._native as _native
from cakernels._solvers.smo import smo_fit

OMP = _native.openmp_enabled()


@pytest.mark.parametrize("fmt", ["dense", "dense_float_exact", "csr"])
@pytest.mark.parametrize("cache", ["copy", "rows", "two_columns"])
def test_page_size_never_changes_the_solution(fmt, cache, smo_problem, assert_same_solution):
    """Pages of 1 to 2**20 doubles (3 rounds up to 4; a page longer than a
    column; an n that is no multiple of the page): every pass that walks a
    column page by page (kernel columns from the feature-major copy and from
    the rows of X, selection, gradient and G_bar updates, the reconstruction,
    the shrinking's swaps) gives the bits of the default pages, also when the
    team splits the passes across page boundaries."""
    X, y = smo_problem(n=1200, fmt=fmt)
    n = X.shape[0]
    col_mb = n * 8 / 2**20
    cache_mb = {"copy": np.inf, "rows": 4 * col_mb, "two_columns": 2 * col_mb}[cache]
    kw = dict(kernel="rbf", gamma=0.5, cache_size=cache_mb)
    ref = smo_fit(X, y, 5.0, **kw)
    assert ref["converged"] and ref["n_iter"] > 500
    # the smallest default page; one page per column when all fit
    assert ref["stats"]["page_doubles"] == (n if cache == "copy" else 256)
    for page in (1, 3, 8, 100, 4096, 2**20):
        got = smo_fit(X, y, 5.0, page_size=page, **kw)
        assert got["stats"]["page_doubles"] == 2 ** int(np.ceil(np.log2(page)))
        assert_same_solution(got, ref)
    for page in (8, 100):
        got = smo_fit(X, y, 5.0, page_size=page, n_threads=2, min_parallel_work=1,
                      collapse_at=-1, **kw)
        assert_same_solution(got, ref)
        if OMP:
            assert got["threads_used"] == 2


@pytest.mark.parametrize("n, cache_mb, page", [
    (2, 200, 2), (1200, 200, 1200), (5000, 200, 5000),  # all columns fit: one page each
    (300, 0.1, 256), (1200, 1, 256), (20000, 200, 512), (70000, 200, 2048),
    (300000, 200, 2048)])
def test_default_page_size(n, cache_mb, page):
    """One page of n per column when the budget holds them all; else n / 64
    rounded up to a power of two, within [256, 2048]: the unused end of a
    column's last page is at most 1/64 of a full column (from n = 16,384),
    and a page long enough to amortise its walk."""
    rng = np.random.RandomState(0)
    X = rng.normal(size=(n, 2))
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter=1: not converged
        res = smo_fit(X, y, 1.0, gamma=1.0, max_iter=1, cache_size=cache_mb)
    assert res["stats"]["page_doubles"] == page


@pytest.mark.parametrize("cache_mb", [0.05, 1.0, 10.0])
def test_pool_within_the_budget(cache_mb, smo_problem):
    """The pool of pages stays within cache_size (less the feature-major
    copy), and holds at least two full columns."""
    X, y = smo_problem(n=3000)
    res = smo_fit(X, y, 1.0, gamma=0.5, cache_size=cache_mb)
    pool = res["stats"]["pool_bytes"]
    page = res["stats"]["page_doubles"]
    two_columns = 2 * -(-3000 // page) * page * 8  # in whole pages
    assert 2 * 3000 * 8 <= pool <= max(cache_mb * 2**20, two_columns)


def test_pool_grows_to_what_the_solve_needs(smo_problem):
    """The pages are allocated when first needed: an unlimited cache holds
    at most the whole matrix (every column computed once, at full length or
    extended), a small problem's pool stays small."""
    X, y = smo_problem(n=500)
    res = smo_fit(X, y, 1.0, gamma=0.5, cache_size=np.inf)
    assert res["stats"]["page_doubles"] == 500
    assert 2 * 500 * 8 <= res["stats"]["pool_bytes"] <= 500 * 500 * 8
    # each column computed once at its first length, extended at most once
    assert res["stats"]["columns"] <= 2 * 500
    paged = smo_fit(X, y, 1.0, gamma=0.5, cache_size=np.inf, page_size=64)
    assert paged["stats"]["pool_bytes"] <= 500 * 512 * 8  # 8 pages of 64 per column


def test_bad_page_size(smo_problem):
    X, y = smo_problem(n=50)
    with pytest.raises(ValueError, match="page_doubles"):
        _native.smo_solve(np.ascontiguousarray(X), y, np.ones(50), np.zeros(50), 1, 0.5,
                          0.0, 3.0, 1e-3, -1, 1.0, page_doubles=-1)
