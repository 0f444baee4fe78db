"""Build and run-time facts: versions, OpenMP, BLAS, MPI availability."""

import importlib.util
import os
import platform
import sys

from .backends import cpu_count


def build_info():
    """Return a dict of versions and build facts.

    Keys: ``cakernels``, ``python``, ``platform``, ``numpy``, ``scipy``,
    ``scikit-learn``, ``openmp`` (compiled into the native module),
    ``omp_max_threads``, ``cpu_count``, ``blas`` (from threadpoolctl),
    ``mpi4py`` (installed version or None), ``mpi_library`` (the first line of
    ``MPI.Get_library_version()``, or None), ``mpiexec`` (the one next to this
    Python, or None), ``scalapack`` (the MKL ScaLAPACK library DKRR would load,
    or None), ``native_module`` (the file of the compiled module in use).
    """
    import numpy
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    from . import _native
    from ._version import __version__

    mpi = library = None
    if importlib.util.find_spec("mpi4py") is not None:
        try:
            import mpi4py

            mpi = mpi4py.__version__
            from mpi4py import MPI

            library = " ".join(MPI.Get_library_version().strip().splitlines()[0].split())
        except Exception as exc:  # pragma: no cover - broken install
            why = " ".join(str(exc).split())  # (mpi4py's message spans lines)
            mpi = mpi or f"unusable ({why})"
            library = f"unusable ({why})"
    from pathlib import Path

    from ._solvers.scalapack import _find

    mpiexec = Path(sys.executable).with_name("mpiexec.exe" if os.name == "nt" else "mpiexec")
    blas = [
        f"{d.get('internal_api')} {d.get('version')} ({d.get('architecture')}, "
        f"{d.get('num_threads')} threads)"
        for d in threadpool_info()
        if d.get("user_api") == "blas"
    ]
    return {
        "cakernels": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "scikit-learn": sklearn.__version__,
        "openmp": bool(_native.openmp_enabled()),
        "omp_max_threads": int(_native.max_threads()),
        "cpu_count": cpu_count(),
        "blas": blas,
        "mpi4py": mpi,
        "mpi_library": library,
        "mpiexec": str(mpiexec) if mpiexec.exists() else None,
        "scalapack": _find("libmkl_scalapack_lp64.so"),
        "native_module": _native.__file__,
    }
