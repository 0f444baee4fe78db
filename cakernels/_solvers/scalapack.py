"""ScaLAPACK's distributed Cholesky (``pdpotrf``/``pdpotrs``, with ``pdlange``
and ``pdpocon``'s condition estimate) through ctypes.

The exact distributed KRR baseline (:class:`cakernels.kernel_ridge.DKRR`,
Table 3.3 of the reference) stores the m x m kernel matrix block-cyclically
on a 2-D process grid and solves it with ScaLAPACK. The ScaLAPACK and BLACS
used are Intel MKL's, from the ``mkl`` wheel of the package registry
(``pip install "cakernels[scalapack]"``): its BLACS is built for the MPICH ABI
(``libmkl_blacs_intelmpi``; MPICH and Intel MPI share it) and for Open MPI
(``libmkl_blacs_openmpi``), so it runs with the MPI that mpi4py uses. MKL's
libraries do not name their dependencies, so the MPI library and MKL's
layers are loaded with ``RTLD_GLOBAL`` first, in dependency order. MKL runs
its sequential layer: ScaLAPACK's parallelism is one rank per core.
"""

import ctypes
import functools
import glob
import os
import sys

import numpy as np

_HINT = ('DKRR under MPI needs ScaLAPACK: pip install "cakernels[scalapack]" (Intel MKL\'s '
         'wheel, with ScaLAPACK and BLACS for MPICH and Open MPI)')
_I = ctypes.c_int


def _loaded_library(fragment):
    """Path of an already loaded shared library whose name contains ``fragment``."""
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as fh:
            for line in fh:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if fragment in os.path.basename(path):
                    return path
    except OSError:  # pragma: no cover - not Linux
        pass
    return None


def _mkl_dirs():
    dirs = [os.path.join(sys.prefix, "lib")]
    dirs += [os.path.join(p, "..", "..", "..", "lib") for p in sys.path if "site-packages" in p]
    dirs += os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    return [d for d in dict.fromkeys(os.path.abspath(d) for d in dirs if d) if os.path.isdir(d)]


def _find(name):
    """The first shared library ``name*`` in :func:`_mkl_dirs`, versioned names
    (``libmpi.so.12``) first: an unversioned ``libmpi.so`` can be a linker
    script (the MPICH wheel's ``INPUT(libmpi.so.12)``), which cannot be loaded;
    files that are no ELF object are skipped."""
    for d in _mkl_dirs():
        hits = sorted(glob.glob(os.path.join(d, name + "*")),
                      key=lambda p: (os.path.basename(p) == name, p))
        for path in hits:
            if _is_elf(path):
                return path
    return None


def _is_elf(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


@functools.lru_cache(maxsize=1)
def load():
    """Load MKL's ScaLAPACK and BLACS for the MPI library in use (mpi4py's).

    Returns
    -------
    libs : types.SimpleNamespace
        ``scalapack`` and ``blacs`` (ctypes libraries) and ``mpi_abi``
        (``'mpich'`` or ``'openmpi'``).

    Raises
    ------
    ImportError
        When mpi4py, MKL's ScaLAPACK or a matching BLACS is missing.
    """
    import types

    from ..backends._backend import import_mpi

    if not sys.platform.startswith("linux"):
        # (the loading below needs ELF libraries, os.RTLD_GLOBAL and /proc; MKL's
        # ScaLAPACK wheel is for Linux x86_64 and Windows only)
        raise ImportError(f"{_HINT} (Linux only: DKRR under MPI is unavailable on "
                          f"{sys.platform})")
    MPI = import_mpi(_HINT)
    version = MPI.Get_library_version()
    if "Open MPI" in version:
        abi, blacs_name = "openmpi", "libmkl_blacs_openmpi_lp64.so"
    else:  # MPICH, Intel MPI, MVAPICH: the MPICH ABI
        abi, blacs_name = "mpich", "libmkl_blacs_intelmpi_lp64.so"
    mode = os.RTLD_GLOBAL | os.RTLD_LAZY
    mpi_lib = _loaded_library("libmpi.so") or _find("libmpi.so")
    if mpi_lib is None:
        raise ImportError(f"{_HINT} (the MPI library that mpi4py loaded was not found)")
    names = ["libmkl_core.so", "libmkl_sequential.so", "libmkl_intel_lp64.so", blacs_name,
             "libmkl_scalapack_lp64.so"]
    paths = [_find(n) for n in names]
    missing = [n for n, p in zip(names, paths) if p is None]
    if missing:
        raise ImportError(f"{_HINT} (not found: {', '.join(missing)}; looked in "
                          f"{', '.join(_mkl_dirs())})")
    try:
        ctypes.CDLL(mpi_lib, mode=mode)  # MKL's BLACS resolves MPI symbols globally
        handles = [ctypes.CDLL(p, mode=mode) for p in paths]
    except OSError as exc:
        raise ImportError(f"{_HINT} ({exc})") from None
    return types.SimpleNamespace(scalapack=handles[-1], blacs=handles[3], mpi_abi=abi,
                                 paths=[mpi_lib] + paths)


def grid_shape(n_ranks):
    """The most square process grid ``nprow x npcol = n_ranks`` with ``nprow <= npcol``."""
    nprow = int(np.sqrt(n_ranks))
    while n_ranks % nprow:
        nprow -= 1
    return nprow, n_ranks // nprow


def local_indices(n, nb, iproc, nprocs):
    """Global indices of the rows (or columns) a process owns in a block-cyclic
    distribution of ``n`` rows in blocks of ``nb`` over ``nprocs`` processes."""
    blocks = np.arange(iproc, (n + nb - 1) // nb, nprocs)
    if blocks.size == 0:
        return np.zeros(0, dtype=np.int64)
    idx = (blocks[:, None] * nb + np.arange(nb)[None, :]).ravel()
    return idx[idx < n].astype(np.int64)


class Grid:
    """A BLACS process grid over an mpi4py communicator (a context manager)."""

    def __init__(self, mpi_comm):
        from mpi4py import MPI

        self.libs = load()
        self.nprow, self.npcol = grid_shape(mpi_comm.Get_size())
        handle = MPI._handleof(mpi_comm)
        arg = ctypes.c_int(handle) if self.libs.mpi_abi == "mpich" else ctypes.c_void_p(handle)
        blacs = self.libs.blacs
        self._system = blacs.Csys2blacs_handle(arg)
        self.ctxt = _I(self._system)
        blacs.Cblacs_gridinit(ctypes.byref(self.ctxt), b"R", self.nprow, self.npcol)
        r, c, pr, pc = _I(), _I(), _I(), _I()
        blacs.Cblacs_gridinfo(self.ctxt, ctypes.byref(r), ctypes.byref(c), ctypes.byref(pr),
                              ctypes.byref(pc))
        self.myrow, self.mycol = pr.value, pc.value

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.libs.blacs.Cblacs_gridexit(self.ctxt)
        self.libs.blacs.Cfree_blacs_system_handle(self._system)
        return False

    def rows(self, n, nb):
        return local_indices(n, nb, self.myrow, self.nprow)

    def cols(self, n, nb):
        return local_indices(n, nb, self.mycol, self.npcol)

    def descriptor(self, m, n, nb, lld, col_block=None):
        """Descriptor of an m x n matrix in blocks of ``nb`` rows and ``col_block``
        (default ``nb``) columns."""
        desc = (_I * 9)()
        info = _I()
        nbc = nb if col_block is None else col_block
        self.libs.scalapack.descinit_(desc, _ref(m), _ref(n), _ref(nb), _ref(nbc), _ref(0),
                                      _ref(0), ctypes.byref(self.ctxt), _ref(max(1, lld)),
                                      ctypes.byref(info))
        if info.value != 0:  # pragma: no cover - arguments are checked above
            raise ValueError(f"descinit failed with info={info.value}")
        return desc


def _ref(v):
    return ctypes.byref(_I(int(v)))


def cholesky_solve(grid, A_local, B_local, n, nrhs, nb):
    """Solve ``A X = B`` for a symmetric positive definite ``A`` (n x n), both
    distributed block-cyclically (blocks of ``nb``) on ``grid``.

    ``A_local`` (Fortran order, this process's block of the full symmetric
    matrix) is overwritten by its Cholesky factor and ``B_local`` by the
    solution. ``B`` is one block of all ``nrhs`` columns wide: its rows live
    on process column 0 only (the other processes' ``B_local`` is ignored and
    left as it is). Before the solve, ``pdpocon`` estimates the reciprocal
    condition number of ``A`` in the 1-norm from the factor and ``pdlange``'s
    norm (the one-process path's ``dpocon``/``dlange``).

    Returns
    -------
    info : int
        ScaLAPACK's ``info`` (0 on success, i > 0 when the leading minor of
        order i is not positive definite); the same on every process.
    rcond : float
        The reciprocal condition number estimate (NaN when the factorization
        failed); the same on every process. ``B`` is solved only when
        ``rcond`` exceeds machine precision (below it the factor is rounding
        noise, and the solve is left to the caller's judgement).
    """
    sl = grid.libs.scalapack
    mloc = A_local.shape[0]
    desca = grid.descriptor(n, n, nb, mloc)
    # every right-hand side in one column block, on process column 0 (blocks of
    # nb columns would put the columns beyond nb on other process columns)
    descb = grid.descriptor(n, nrhs, nb, mloc, col_block=max(1, nrhs))
    a_ptr = A_local.ctypes.data_as(ctypes.c_void_p)
    info = _I()
    sl.pdlange_.restype = ctypes.c_double
    work = np.zeros(A_local.shape[1] + nb)  # LWORK >= local columns for the 1-norm
    anorm = float(sl.pdlange_(b"1", _ref(n), _ref(n), a_ptr, _ref(1), _ref(1), desca,
                              work.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(1)))
    if not np.isfinite(anorm):  # the same on every process: every rank raises
        from .._kernels import KERNEL_OVERFLOW

        raise FloatingPointError(KERNEL_OVERFLOW)
    sl.pdpotrf_(b"L", _ref(n), a_ptr, _ref(1), _ref(1), desca, ctypes.byref(info),
                ctypes.c_size_t(1))
    if info.value != 0:
        return info.value, float("nan")
    rcond = _pocon(grid, a_ptr, n, desca, anorm)
    if not rcond > np.finfo(np.float64).eps:
        return 0, rcond
    sl.pdpotrs_(b"L", _ref(n), _ref(nrhs), a_ptr, _ref(1), _ref(1), desca,
                B_local.ctypes.data_as(ctypes.c_void_p), _ref(1), _ref(1), descb,
                ctypes.byref(info), ctypes.c_size_t(1))
    return info.value, rcond


def _pocon(grid, a_ptr, n, desca, anorm):
    """``pdpocon``'s reciprocal condition number of the factored ``A`` (lower
    Cholesky factor at ``a_ptr``), workspace sizes by ScaLAPACK's own query."""
    sl = grid.libs.scalapack
    rcond, info = ctypes.c_double(), _I()
    wq, iwq = np.zeros(1), np.zeros(1, dtype=np.intc)

    def call(work, lwork, iwork, liwork):
        sl.pdpocon_(b"L", _ref(n), a_ptr, _ref(1), _ref(1), desca,
                    ctypes.byref(ctypes.c_double(anorm)), ctypes.byref(rcond),
                    work.ctypes.data_as(ctypes.c_void_p), _ref(lwork),
                    iwork.ctypes.data_as(ctypes.c_void_p), _ref(liwork), ctypes.byref(info),
                    ctypes.c_size_t(1))

    call(wq, -1, iwq, -1)  # the workspace query
    if info.value != 0:  # pragma: no cover - arguments are checked by the caller
        raise ValueError(f"pdpocon workspace query failed with info={info.value}")
    work = np.zeros(max(1, int(wq[0])))
    iwork = np.zeros(max(1, int(iwq[0])), dtype=np.intc)
    call(work, work.size, iwork, iwork.size)
    if info.value != 0:  # pragma: no cover - as above
        raise ValueError(f"pdpocon failed with info={info.value}")
    return float(rcond.value)
