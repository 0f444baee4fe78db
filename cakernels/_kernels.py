"""Kernel functions evaluated block-wise through matrix products.

Every kernel in the package is computed from the Gram matrix ``X @ Y.T``
(one BLAS call, dense or CSR) followed by an element-wise transform done in
place by the native module (``cakernels._native``, OpenMP when built in):

* ``'linear'``  : ``<x, y>``
* ``'rbf'``     : ``exp(-gamma * ||x - y||^2)`` with
  ``||x - y||^2 = ||x||^2 + ||y||^2 - 2 <x, y>`` (clipped at 0)
* ``'poly'``    : ``(gamma <x, y> + coef0) ** degree``
* ``'sigmoid'`` : ``tanh(gamma <x, y> + coef0)``

These are Table 2.1 / 3.1 of the reference; for kernel ridge regression the
thesis writes the Gaussian kernel with ``sigma``, i.e.
``gamma = 1 / (2 sigma^2)``.

Large products are never formed at once: :func:`kernel_dot` walks over row
blocks whose size keeps the temporary kernel block under a byte budget.
"""

import numpy as np
import scipy.sparse as sp

from . import _native

KERNELS = ("rbf", "linear", "poly", "sigmoid")
_KIND = {"linear": 0, "rbf": 1, "poly": 2, "sigmoid": 3}

#: default byte budget for one temporary kernel block (64 MiB)
BLOCK_BYTES = 64 * 2**20


def sigma_to_gamma(sigma):
    """Return ``1 / (2 sigma^2)``, the ``gamma`` of a Gaussian kernel of width ``sigma``."""
    return 1.0 / (2.0 * float(sigma) ** 2)


def resolve_gamma(gamma, X):
    """Resolve scikit-learn's ``gamma`` (``'scale'``, ``'auto'`` or a float) on ``X``.

    ``'scale'`` is ``1 / (n_features * X.var())`` and ``'auto'`` is
    ``1 / n_features``, computed exactly as :class:`sklearn.svm.SVC` does so
    that a single partition reproduces ``SVC``.
    """
    if isinstance(gamma, str):
        if gamma == "scale":
            if sp.issparse(X):
                X_var = X.multiply(X).mean() - X.mean() ** 2
            else:
                X_var = X.var()
            return 1.0 / (X.shape[1] * X_var) if X_var != 0 else 1.0
        if gamma == "auto":
            return 1.0 / X.shape[1]
        raise ValueError(f"gamma must be 'scale', 'auto' or a float, got {gamma!r}")
    return float(gamma)


def row_sq_norms(X):
    """Squared Euclidean norm of every row of a dense array or CSR matrix."""
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel()
    return np.einsum("ij,ij->i", X, X)


def check_magnitude(X, sq_norms=None):
    """Raise ``ValueError`` when a row's squared norm overflows float64.

    Distances to centres and every kernel need ``||x||^2``; with features near
    1e154 or beyond it is inf, distances become NaN and a solver would return a
    meaningless model without an error.

    Parameters
    ----------
    X : {ndarray, CSR matrix} of shape (n_rows, n_features)
    sq_norms : ndarray of shape (n_rows,), default=None
        ``row_sq_norms(X)`` when already computed.

    Returns
    -------
    sq_norms : ndarray of shape (n_rows,)
    """
    if sq_norms is None:
        with np.errstate(over="ignore", invalid="ignore"):
            sq_norms = row_sq_norms(X)
    bad = ~np.isfinite(sq_norms)
    if np.any(bad):
        data = X.data if sp.issparse(X) else X
        big = float(np.max(np.abs(data))) if data.size else 0.0
        raise ValueError(
            f"feature values too large: the squared norm of {int(bad.sum())} of "
            f"{bad.size} rows overflows float64 (largest |value| {big:.3g}); distances and "
            "kernels need ||x||^2 < 1.8e308: scale the features (e.g. StandardScaler)")
    return sq_norms


def check_kernel_diagonal(sq_norms, kernel, gamma, degree, coef0):
    """Raise ``FloatingPointError`` when ``K(x, x)`` is not finite for some row
    (a polynomial or linear kernel overflowing for large gamma, degree or
    features), naming the likely cause."""
    with np.errstate(over="ignore", invalid="ignore"):
        if kernel == "linear":
            diag = sq_norms
        elif kernel == "poly":
            diag = (gamma * sq_norms + coef0) ** degree
        else:  # rbf: 1; sigmoid: tanh, bounded
            return
    bad = ~np.isfinite(diag)
    if np.any(bad):
        raise FloatingPointError(
            f"kernel values overflow float64: K(x, x) is not finite for {int(bad.sum())} of "
            f"{bad.size} rows (kernel={kernel!r}, gamma={gamma:.3g}, degree={degree}, "
            f"largest ||x||^2 {float(np.max(sq_norms)):.3g}); reduce gamma or degree, or "
            "scale the features")


def _gram(X, Y):
    """``X @ Y.T`` as a C-contiguous float64 ndarray (dense or CSR operands)."""
    if sp.issparse(X) or sp.issparse(Y):
        G = X @ Y.T
        G = G.toarray() if sp.issparse(G) else np.asarray(G)
    else:
        G = X @ Y.T
    return np.ascontiguousarray(G, dtype=np.float64)


def kernel_block(X, Y, *, kernel="rbf", gamma=1.0, degree=3, coef0=0.0,
                 X_sq_norms=None, Y_sq_norms=None, n_threads=1):
    """Evaluate the kernel matrix ``K(X, Y)`` of shape ``(len(X), len(Y))``.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_x, n_features)
    Y : {ndarray, sparse matrix} of shape (n_y, n_features)
    kernel : {'rbf', 'linear', 'poly', 'sigmoid'}, default='rbf'
    gamma, degree, coef0 : float
        Kernel parameters, with scikit-learn's meaning.
    X_sq_norms, Y_sq_norms : ndarray, default=None
        Precomputed squared row norms (RBF only); computed when omitted.
    n_threads : int, default=1
        OpenMP threads for the element-wise transform (the product itself
        uses whatever BLAS threads are allowed).

    Returns
    -------
    K : ndarray of shape (n_x, n_y)
    """
    if kernel not in _KIND:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    G = _gram(X, Y)
    if kernel == "linear":
        return G
    xn = yn = None
    if kernel == "rbf":
        xn = row_sq_norms(X) if X_sq_norms is None else X_sq_norms
        yn = row_sq_norms(Y) if Y_sq_norms is None else Y_sq_norms
        xn = np.ascontiguousarray(xn, dtype=np.float64)
        yn = np.ascontiguousarray(yn, dtype=np.float64)
    _native.kernel_from_gram(G, xn, yn, _KIND[kernel], float(gamma), float(coef0),
                             float(degree), int(n_threads))
    return G


def block_rows(n_cols, block_bytes=BLOCK_BYTES):
    """Number of rows of an ``n_cols``-wide float64 block that fit in ``block_bytes``."""
    return int(max(1, block_bytes // (8 * max(int(n_cols), 1))))


def kernel_dot(X, Y, coef, *, block_bytes=BLOCK_BYTES, Y_sq_norms=None, **kernel_params):
    """Compute ``K(X, Y) @ coef`` without forming ``K(X, Y)`` at once.

    Rows of ``X`` are processed in blocks so that each temporary kernel block
    stays under ``block_bytes``.

    Returns
    -------
    out : ndarray of shape (n_x,) + coef.shape[1:]
    """
    coef = np.asarray(coef, dtype=np.float64)
    n_x = X.shape[0]
    out = np.empty((n_x,) + coef.shape[1:], dtype=np.float64)
    if kernel_params.get("kernel", "rbf") == "rbf" and Y_sq_norms is None:
        Y_sq_norms = row_sq_norms(Y)
    step = block_rows(Y.shape[0], block_bytes)
    for start in range(0, n_x, step):
        stop = min(start + step, n_x)
        K = kernel_block(X[start:stop], Y, Y_sq_norms=Y_sq_norms, **kernel_params)
        out[start:stop] = K @ coef
    return out
