"""Symmetric eigendecomposition without the GIL.

SciPy's ``linalg.eigh`` calls LAPACK through f2py wrappers that hold the GIL,
so eigendecompositions started from several Python threads run one after
another (measured: two threads each decomposing ten 667 x 667 kernels took
1.06 s, one thread alone 1.06 s). :func:`eigh_in_place` calls the same LAPACK
routine (``dsyevd``, SciPy's ``driver='evd'``, from ``cython_lapack``) from the
native module with the GIL released, so that the search's per-split tasks
(:mod:`cakernels.model_selection._krr_search`) run concurrently, each on one
BLAS thread, instead of one at a time on BLAS's spinning thread team.
"""

import numpy as np
from scipy import linalg
from scipy.linalg import cython_lapack

from .. import _native

__all__ = ["eigh_in_place"]

_SYEVD = cython_lapack.__pyx_capi__["dsyevd"]


def eigh_in_place(A):
    """Eigenvalues and eigenvectors of the symmetric ``A``, overwriting ``A``.

    LAPACK ``dsyevd`` (divide and conquer) on the BLAS threads of the calling
    thread (limit them with :func:`cakernels.backends.blas_limits`), with the
    GIL released. ``A``'s buffer is read as a column-major matrix, which is
    ``A`` itself when it is symmetric (its upper triangle as NumPy indexes it
    is read).

    Parameters
    ----------
    A : ndarray of shape (n, n)
        Writable, C-contiguous float64 (overwritten with the eigenvectors).

    Returns
    -------
    w : ndarray of shape (n,)
        Eigenvalues in ascending order.
    Q : ndarray of shape (n, n)
        Orthonormal eigenvectors in its columns (``A.T``, a view of ``A``), so
        that ``A_before = Q @ np.diag(w) @ Q.T``.

    Raises
    ------
    numpy.linalg.LinAlgError
        When an eigenvalue fails to converge (as ``scipy.linalg.eigh``).
    FloatingPointError
        When ``A`` holds inf or NaN (kernel values that overflow).
    """
    shape = tuple(getattr(A, "shape", ()))
    n = int(shape[0]) if len(shape) == 2 else 0
    if 1 + 6 * n + 2 * n * n > np.iinfo(np.int32).max:  # dsyevd's workspace
        raise ValueError(f"a symmetric eigendecomposition of {n:,} rows needs a LAPACK "
                         "workspace beyond the 32-bit sizes of SciPy's LAPACK (at most "
                         "32,766 rows); use more partitions (or solver='cholesky' with k-fold "
                         "cv)")
    if not (isinstance(A, np.ndarray) and A.dtype == np.float64 and A.ndim == 2
            and A.shape[0] == A.shape[1] and A.flags.c_contiguous and A.flags.writeable):
        raise ValueError("A must be a writable C-contiguous square float64 array")
    w = np.empty(n)
    if n == 0:
        return w, A.T
    if not np.isfinite(_native.norm1(A)):  # dsyevd would fail with a misleading message
        from .._kernels import KERNEL_OVERFLOW

        raise FloatingPointError(KERNEL_OVERFLOW)
    info = _native.eigh_inplace(A, w, _SYEVD)
    if info:
        raise linalg.LinAlgError(f"the eigendecomposition failed to converge: {info} "
                                 "off-diagonal elements of an intermediate tridiagonal "
                                 "form did not converge to zero (dsyevd info)")
    return w, A.T
