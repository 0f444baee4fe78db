"""Kernel ridge regression on one worker: ``(K + reg I) alpha = y`` by an
in-place blocked Cholesky on the worker's threads, without the GIL (Algorithm 6,
eq. 3.6; the factorization is :mod:`cakernels._solvers.cholesky`). The norm,
condition estimate and triangular solves around it (LAPACK ``dlange``,
``dpocon``, ``dpotrs``, the same routines as SciPy's ``cho_solve`` path) run in
the native module without the GIL too: through SciPy's f2py wrappers they held
it for ~20% of a 1,000-2,000-row solve on one thread, which partitions solved
on threads then took one at a time."""

import warnings

import numpy as np
from scipy import linalg
from scipy.linalg import cython_lapack

from .. import _native
from .._kernels import KERNEL_OVERFLOW, kernel_dot, row_sq_norms
from ..backends import blas_limits
from .cholesky import cholesky_in_place

#: a factor whose reciprocal condition number is below this gets a warning: the
#: solution's relative error bound cond * eps then exceeds 1e-4 (four digits)
RCOND_WARN = 1e4 * np.finfo(np.float64).eps

_POCON_POTRS = (cython_lapack.__pyx_capi__["dpocon"], cython_lapack.__pyx_capi__["dpotrs"])


#: the regularised matrix the conditioning warnings name (the KRR fits' and searches')
SHIFTED_KERNEL = "kernel matrix + lam*m*I (lam*sum(w)*I when weighted)"


def check_ridge_shift(lam, scale=1.0):
    """``FloatingPointError`` naming ``lam`` when the diagonal shift ``lam *
    scale`` (``scale``: ``m`` or ``sum(w)``) is not a finite float64: LAPACK
    would scale an infinite matrix and print its own errors before a
    least-squares fallback that fails."""
    with np.errstate(over="ignore"):
        reg = np.asarray(lam, dtype=np.float64) * float(scale)
    if not np.all(np.isfinite(reg)) and np.max(lam) <= 1e3:  # (m * 1e3 never overflows)
        raise FloatingPointError(
            f"the kernel ridge shift lam * sum(sample_weight) overflows float64 "
            f"(sum(sample_weight) = {float(scale):.3g}): scale the weights down (weights "
            "all multiplied by one number give the same model)")
    if not np.all(np.isfinite(reg)):
        raise FloatingPointError(
            f"the kernel ridge shift lam * m (or lam * sum(sample_weight)) overflows "
            f"float64 ({float(np.max(reg))!r}): lam is too large; the kernel's entries are "
            "about 1, so any lam above ~1e3 already gives a model of almost zero")


#: weights whose largest is below this are scaled up (:func:`shift_weights`):
#: the weighted kernel ``S K S`` of weights near 1e-308 is subnormal (digits lost)
TINY_WEIGHT = 2.0 ** -500


def shift_weights(w, lam):
    """``(w, sum(w))`` for the weighted ridge shift ``lam * sum(w)``: ``w`` itself
    unless that shift overflows float64 or the largest weight is below
    :data:`TINY_WEIGHT`, else ``w`` times a power of 4 that makes ``1/4 < max(w)
    <= 1``. Weights all multiplied by one number give the same model (``S (S K S
    + lam sum(w) I)^-1 S y`` with ``S = diag(sqrt(w))``), and a power of 4 is
    exact for the weights, their square roots and every product after them; the
    error for a ``lam`` that is too large then stays ``lam``'s, and weights of
    1e-320 (subnormal: ``S K S`` lost its digits, predictions off by 3e-3) give
    the model of weights 1."""
    w = np.asarray(w, dtype=np.float64)
    with np.errstate(over="ignore"):
        total = float(np.sum(w))
        shift = float(np.max(lam)) * total
    top = float(np.max(w)) if w.size else 0.0
    if (not np.isfinite(shift) and top > 1) or 0 < top < TINY_WEIGHT:
        w = scale_by_power_of_4(w, top)
        total = float(np.sum(w))
    return w, total


def scale_by_power_of_4(a, top):
    """``a * 4**-j`` with ``j = ceil(log2(top) / 2)``, which puts ``top * 4**-j``
    in (1/4, 1]: exact (frexp gives the exponent of subnormals too)."""
    mantissa, exponent = np.frexp(top)  # top = mantissa * 2**exponent, in [0.5, 1)
    j = int(exponent) // 2 if mantissa == 0.5 else (int(exponent) + 1) // 2
    return a * 2.0 ** -j * 2.0 ** -j  # (two steps: 4**j alone overflows for j > 511)


def solve_krr(K, y, reg, rebuild=None, n_threads=1, report=None):
    """Solve ``(K + reg * I) alpha = y`` in place by Cholesky.

    ``K`` is overwritten. When the regularised matrix is not numerically
    positive definite (Cholesky fails, or its reciprocal condition number is
    below machine precision) the minimum-norm least-squares solution is
    returned instead, with a :class:`scipy.linalg.LinAlgWarning`. A factor that
    succeeds with a reciprocal condition number below ``1e4 * eps`` (the
    answer may have lost more than 12 of its 16 digits) also warns.

    Parameters
    ----------
    K : ndarray of shape (m, m)
        Symmetric kernel matrix, C-contiguous float64 (overwritten).
    y : ndarray of shape (m,) or (m, n_outputs)
        Targets.
    reg : float
        Diagonal shift ``lam * m``.
    rebuild : callable, default=None
        Returns ``K`` again for the fallback (the factorization destroyed
        it); without it a copy of ``K`` is kept during the factorization.
    n_threads : int, default=1
        Threads of the factorization (:func:`~cakernels._solvers.cholesky.cholesky_in_place`);
        the triangular solves and the condition estimate run on one BLAS
        thread. ``alpha`` does not depend on it, bit for bit.
    report : list, default=None
        When given, the two warnings are not raised but appended to it as
        ``('singular', message)`` or ``('ill', rcond)``, for a caller that
        solves many partitions to raise one warning for all.

    Returns
    -------
    alpha : ndarray of the shape of ``y``

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics.pairwise import rbf_kernel
    >>> from cakernels.kernel_ridge import solve_krr
    >>> rng = np.random.RandomState(0)
    >>> X, y = rng.randn(50, 3), rng.randn(50)
    >>> K = rbf_kernel(X, gamma=0.5)
    >>> expected = np.linalg.solve(K + 0.1 * np.eye(50), y)
    >>> alpha = solve_krr(K.copy(), y, reg=0.1)  # (K is overwritten: a copy)
    >>> bool(np.allclose(alpha, expected))
    True
    """
    if not (isinstance(K, np.ndarray) and K.dtype == np.float64 and K.ndim == 2
            and K.shape[0] == K.shape[1] and K.flags.c_contiguous and K.flags.writeable):
        # before anything is written to it (the shift went in, then the native
        # check refused the matrix as "A")
        raise ValueError(f"K must be a writable C-contiguous square float64 array (it is "
                         f"overwritten), got {type(K).__name__} of shape "
                         f"{getattr(K, 'shape', None)} and dtype {getattr(K, 'dtype', None)}")
    m = K.shape[0]
    check_ridge_shift(reg)
    if m == 0:  # no row: no coefficient
        return np.zeros(np.shape(y), dtype=np.float64)
    backup = K.copy() if rebuild is None else None
    K.flat[:: m + 1] += reg
    anorm = _native.norm1(K)  # dlange('1') of the symmetric K, without the GIL
    if not np.isfinite(anorm):  # LAPACK would fail with a misleading message
        raise FloatingPointError(KERNEL_OVERFLOW)
    failure = None
    try:
        alpha, rcond = _cholesky_solve(K, y, anorm, n_threads)
    except linalg.LinAlgError as exc:
        failure = str(exc)  # not the exception: its traceback would keep K alive
    if failure is not None:
        if report is not None:
            report.append(("singular", failure))
        else:
            warnings.warn(
                f"{SHIFTED_KERNEL} is not numerically positive definite ({failure}); "
                "using the least-squares solution. Increase lam or check the kernel.",
                linalg.LinAlgWarning,
                stacklevel=3,
            )
        if rebuild is not None:
            del K  # the factor: one m x m matrix at a time
            backup = rebuild()
        backup.flat[:: m + 1] += reg
        return _lstsq_in_place(backup, y)
    if rcond < RCOND_WARN and report is not None:
        report.append(("ill", float(rcond)))
    elif rcond < RCOND_WARN:
        warnings.warn(
            f"{SHIFTED_KERNEL} is ill-conditioned (reciprocal condition number "
            f"{rcond:.2g}): the coefficients may carry relative errors up to "
            f"{np.finfo(np.float64).eps / rcond:.1g}. Increase lam for a trustworthy answer.",
            linalg.LinAlgWarning,
            stacklevel=3,
        )
    return alpha


def warn_solves(reports, n_solves, what="partitions", stacklevel=3):
    """One :class:`scipy.linalg.LinAlgWarning` per kind for the ``reports`` that
    :func:`solve_krr` collected over ``n_solves`` solves (a fit's partitions):
    one line per fit, not one per partition, each naming how many solves and
    the worst case."""
    singular = [r[1] for r in reports if r[0] == "singular"]
    ill = [r[1] for r in reports if r[0] == "ill"]
    if singular:
        warnings.warn(
            f"{SHIFTED_KERNEL} is not numerically positive definite in {len(singular)} of "
            f"{n_solves} {what} ({singular[0]}{'' if len(singular) == 1 else ', ...'}): they "
            "use the least-squares solution. Increase lam or check the kernel.",
            linalg.LinAlgWarning, stacklevel=stacklevel)
    if ill:
        worst = min(ill)
        warnings.warn(
            f"{SHIFTED_KERNEL} is ill-conditioned in {len(ill)} of {n_solves} {what} "
            f"(reciprocal condition numbers down to {worst:.2g}): the coefficients may "
            f"carry relative errors up to {np.finfo(np.float64).eps / worst:.1g}. Increase "
            "lam for a trustworthy answer.", linalg.LinAlgWarning, stacklevel=stacklevel)


def _lstsq_in_place(A, y):
    """Minimum-norm least-squares solution of the symmetric ``A x = y`` by LAPACK
    dgelsd on ``A``'s own buffer (destroyed).

    SciPy's ``lstsq`` copies ``A`` whatever ``overwrite_a`` says; dgelsd called
    directly works in place with a workspace of O(m log m) doubles, so the
    fallback holds one m x m matrix. Singular values below ``eps * m`` times the
    largest count as zero (NumPy's ``lstsq`` default): without a cutoff,
    duplicate samples turn the coefficients into rounding noise.
    """
    m = A.shape[0]
    cond = np.finfo(np.float64).eps * m
    y2 = np.asarray(y, dtype=np.float64)
    b = np.array(y2.reshape(m, -1), order="F")  # dgelsd overwrites b with x
    lwork, liwork, info = linalg.lapack.dgelsd_lwork(m, m, b.shape[1], cond)
    if info != 0:  # pragma: no cover - LAPACK rejects its own query
        raise linalg.LinAlgError(f"dgelsd workspace query failed (info {info})")
    # A is symmetric, so its C-ordered buffer read in Fortran order (A.T) is A
    x, _, _, info = linalg.lapack.dgelsd(A.T, b, int(lwork), int(liwork), cond,
                                         overwrite_a=True, overwrite_b=True)
    if info != 0:
        raise linalg.LinAlgError(f"the least-squares fallback failed: SVD did not converge "
                                 f"(dgelsd info {info})")
    return x[:m].reshape(y2.shape)


def _cholesky_solve(K, y, anorm, n_threads):
    """``(K^-1 y, rcond)`` by an in-place Cholesky of the regularised ``K``;
    LinAlgError when it is not numerically positive definite."""
    # K is symmetric, so its C-order buffer is the same matrix in Fortran order:
    # L ends up in K.T's lower triangle, where dpocon and dpotrs read it (the
    # layout of cho_solve((K.T, True), ...)). The GIL is released throughout, so
    # that the 'threads' backend factors and solves partitions concurrently.
    if not np.isfinite(anorm):
        raise linalg.LinAlgError("the regularised kernel matrix has non-finite entries")
    info = cholesky_in_place(K, n_threads)
    if info != 0:
        raise linalg.LinAlgError(f"{info}-th leading minor is not positive definite")
    m = K.shape[0]
    y2 = np.asarray(y, dtype=np.float64)
    k = y2.size // m
    # the right-hand sides as the rows of a C array: its buffer is the
    # column-major m x k matrix dpotrs solves in place (a copy: y is the user's)
    bt = np.array(y2.reshape(m, k).T, order="C") if k else np.zeros((1, m))
    with blas_limits(1):  # BLAS-2 work: no thread team to wait for, the same bits
        rcond = _native.chol_solve(K, bt, anorm, _POCON_POTRS)
    if not rcond > np.finfo(np.float64).eps:
        raise linalg.LinAlgError(f"reciprocal condition number {rcond:.3g}")
    return bt[:k].T.reshape(y2.shape), float(rcond)


class _LocalKRR:
    """One partition's model: its training samples and dual coefficients."""

    def __init__(self, X, alpha, kernel_params):
        self.X = X
        self.alpha = alpha
        self.kernel_params = kernel_params
        self.sq_norms = row_sq_norms(X) if kernel_params["kernel"] == "rbf" else None

    def predict(self, X, n_threads=None):
        params = dict(self.kernel_params)
        if n_threads is not None:
            params["n_threads"] = int(n_threads)
        return kernel_dot(X, self.X, self.alpha, Y_sq_norms=self.sq_norms, **params)
