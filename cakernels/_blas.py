"""Protection against a known OpenBLAS crash in large Cholesky factorizations.

The OpenBLAS of the NumPy/SciPy wheels (0.3.30-0.3.31) segfaults in a Cholesky
factorization (``dpotrf``) of 16,000 or more rows when it runs two or more
threads with its SkylakeX kernels (reproduced on this project's machines with
``OPENBLAS_CORETYPE=SkylakeX``; one thread, or the Haswell kernels, work).
Two protections, neither of which changes a result:

* :func:`cholesky_guard`: around a factorization of that size, BLAS is
  limited to one thread when an OpenBLAS with AVX-512 kernels is loaded
  (SkylakeX and its successors Cooperlake and SapphireRapids, which build on
  its kernels). Slower on such machines, never a crash. ``cakernels fit``
  uses it for scikit-learn's ``KernelRidge``; the package's own KRR does not
  need it: its blocked Cholesky (:mod:`cakernels._solvers.cholesky`) calls
  ``dpotrf`` on at most 1,023 rows (a small matrix whole, else tiles of
  192-384 rows), always on one BLAS thread.
* :func:`prefer_haswell_kernels`: ``cakernels bench`` sets
  ``OPENBLAS_CORETYPE=Haswell`` for its own process before NumPy loads (the
  variable is read when OpenBLAS loads), so that its comparisons run both
  sides with the same, multi-threaded, working kernels. Nothing is restarted.
"""

import contextlib
import functools
import os
import platform
import sys

#: factorizations of at least this many rows are guarded
LARGE_CHOLESKY = 16000
#: OpenBLAS core types that use the SkylakeX (AVX-512) kernels
_AVX512_CORETYPES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})


@functools.lru_cache(maxsize=1)
def risky_openblas():
    """True when a loaded OpenBLAS runs AVX-512 (SkylakeX family) kernels."""
    try:
        from threadpoolctl import threadpool_info

        return any(d.get("internal_api") == "openblas"
                   and str(d.get("architecture", "")).lower() in _AVX512_CORETYPES
                   for d in threadpool_info())
    except Exception:  # pragma: no cover - threadpoolctl cannot inspect: assume safe
        return False


def cholesky_guard(n_rows):
    """Context manager for a Cholesky of ``n_rows`` rows: one BLAS thread when
    ``n_rows >= 16000`` and the loaded OpenBLAS uses its SkylakeX kernels,
    nothing otherwise."""
    if n_rows < LARGE_CHOLESKY or not risky_openblas():
        return contextlib.nullcontext()
    from .backends import blas_limits  # the process's one BLAS policy

    return blas_limits(1)


def _cpu_flags():
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def skylakex_kernels_likely(cpu_flags=None):
    """Whether OpenBLAS would pick its SkylakeX kernels here: an x86-64 CPU with
    AVX-512 (they all also run the Haswell kernels, which need AVX2 and FMA)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    flags = _cpu_flags() if cpu_flags is None else set(cpu_flags)
    return {"avx512f", "avx2", "fma"} <= flags


def prefer_haswell_kernels(environ=None, cpu_flags=None):
    """Set ``OPENBLAS_CORETYPE=Haswell`` in ``environ`` for this process when
    it is unset, NumPy is not loaded yet, and the CPU has AVX-512 (the only
    CPUs on which OpenBLAS picks its SkylakeX kernels; they all run the Haswell
    kernels, which need AVX2 and FMA). Returns True when it set the variable.
    """
    environ = os.environ if environ is None else environ
    if environ.get("OPENBLAS_CORETYPE") or "numpy" in sys.modules or "scipy" in sys.modules:
        return False
    if not skylakex_kernels_likely(cpu_flags):
        return False
    environ["OPENBLAS_CORETYPE"] = "Haswell"
    return True
