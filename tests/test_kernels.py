"""Kernel blocks against scikit-learn's pairwise kernels."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import pairwise_kernels

from cakernels._kernels import block_rows, kernel_block, kernel_dot, resolve_gamma


@pytest.fixture(scope="module")
def xy():
    rng = np.random.RandomState(0)
    return rng.randn(37, 9), rng.randn(23, 9)


PARAMS = [("rbf", {"gamma": 0.3}), ("linear", {}), ("poly", {"gamma": 0.2, "degree": 3,
                                                             "coef0": 1.0}),
          ("sigmoid", {"gamma": 0.05, "coef0": -0.5})]


@pytest.mark.parametrize("kernel,params", PARAMS)
@pytest.mark.parametrize("sparse", [False, True])
def test_kernel_block_matches_sklearn(xy, kernel, params, sparse):
    X, Y = xy
    ref = pairwise_kernels(X, Y, metric=kernel, **params)
    if sparse:
        X, Y = sp.csr_matrix(np.where(np.abs(X) > 0.5, X, 0)), sp.csr_matrix(Y)
        ref = pairwise_kernels(X, Y, metric=kernel, **params)
    K = kernel_block(X, Y, kernel=kernel, gamma=params.get("gamma", 1.0),
                     degree=params.get("degree", 3), coef0=params.get("coef0", 0.0),
                     n_threads=2)
    np.testing.assert_allclose(K, ref, rtol=1e-12, atol=1e-12)


def test_rbf_is_stable_for_large_norms(xy):
    # ||x||^2 + ||y||^2 - 2 x.y cancels badly for large norms: the squared
    # distance is clipped at 0, so the kernel never exceeds 1
    X, _ = xy
    K = kernel_block(X * 1e3, X * 1e3, kernel="rbf", gamma=1e-7)
    np.testing.assert_allclose(np.diag(K), 1.0, rtol=1e-9)
    assert np.all(K <= 1.0)


def test_kernel_dot_blocks(xy):
    X, Y = xy
    coef = np.random.RandomState(1).randn(len(Y), 2)
    full = pairwise_kernels(X, Y, metric="rbf", gamma=0.1) @ coef
    # a tiny budget forces one row per block
    out = kernel_dot(X, Y, coef, kernel="rbf", gamma=0.1, block_bytes=8)
    np.testing.assert_allclose(out, full, rtol=1e-12)
    assert block_rows(1000, 8000) == 1 and block_rows(10, 8000) == 100


def test_resolve_gamma_matches_svc():
    X = np.random.RandomState(2).rand(20, 4)
    assert resolve_gamma("scale", X) == 1.0 / (4 * X.var())
    assert resolve_gamma("scale", sp.csr_matrix(X)) == pytest.approx(1.0 / (4 * X.var()))
    assert resolve_gamma("auto", X) == 0.25
    assert resolve_gamma(0.5, X) == 0.5
    assert resolve_gamma("scale", np.ones((3, 2))) == 1.0
    with pytest.raises(ValueError):
        resolve_gamma("wide", X)
    with pytest.raises(ValueError):
        kernel_block(X, X, kernel="laplacian")
