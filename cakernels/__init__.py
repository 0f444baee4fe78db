"""cakernels: communication-avoiding kernel methods.

Partitioned kernel SVM classifiers and kernel ridge regressors with the
scikit-learn API: split the training set, solve every part independently
(no communication), combine. See the README for which estimator to use when.

The public names are imported on first use (PEP 562), so that ``import
cakernels`` and the command line start without loading NumPy, SciPy and
scikit-learn; ``from cakernels import CASVC`` works as usual.
"""

import importlib as _importlib
from pathlib import Path as _Path

from ._native_loader import ensure_native as _ensure_native
from ._version import __version__

# a source tree without a built module uses the installed one (or says what to run)
try:
    _ensure_native(_Path(__file__).resolve().parent)
except ImportError as _exc:
    import sys as _sys

    # `python -m cakernels ...` (sys.argv[0] is "-m" while its package is imported;
    # another package run with -m that imports cakernels keeps its ImportError): the
    # command line's one-line error and status 2, not an import traceback
    _orig = getattr(_sys, "orig_argv", [])
    if _sys.argv[:1] == ["-m"] and any(
            a == "-m" and b.split(".")[0] == "cakernels" for a, b in zip(_orig, _orig[1:])):
        _sys.stderr.write(f"cakernels: error: {_exc}\n")
        raise SystemExit(2) from None
    raise

#: public name -> submodule that defines it
_EXPORTS = {
    "CASVC": "svm",
    "FCFSSVC": "svm",
    "BKMSVC": "svm",
    "CPSVC": "svm",
    "PartitionedSVC": "svm",
    "AsyGCDSVC": "svm",
    "CascadeSVC": "svm",
    "DCSVC": "svm",
    "DCFilterSVC": "svm",
    "DisSMOSVC": "svm",
    "DCKRR": "kernel_ridge",
    "KKRR": "kernel_ridge",
    "KKRR2": "kernel_ridge",
    "BKRR": "kernel_ridge",
    "BKRR2": "kernel_ridge",
    "PartitionedKernelRidge": "kernel_ridge",
    "DKRR": "kernel_ridge",
    "oracle_predict": "kernel_ridge",
    "oracle_score": "kernel_ridge",
    "PartitionedKernelRidgeCV": "model_selection",
    "BKRR2CV": "model_selection",
    "KKRR2CV": "model_selection",
    "DCKRRCV": "model_selection",
    "BKRRCV": "model_selection",
    "KKRRCV": "model_selection",
    "PartitionedSVCCV": "model_selection",
    "CASVCCV": "model_selection",
    "FCFSSVCCV": "model_selection",
    "BKMSVCCV": "model_selection",
    "CPSVCCV": "model_selection",
    "RandomPartitioner": "partition",
    "KMeansPartitioner": "partition",
    "KBalancePartitioner": "partition",
    "FCFSPartitioner": "partition",
    "BKMPartitioner": "partition",
    "CakernelsVersionWarning": "_persist",
}
_SUBMODULES = ("backends", "datasets", "kernel_ridge", "model_selection", "partition", "svm")

__all__ = ["__version__", *_EXPORTS, "show_config"]


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(_importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = _importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))


def show_config():
    """Versions and build facts: what to paste into a bug report.

    Returns
    -------
    config : dict
        The versions of the package, Python, NumPy, SciPy and scikit-learn;
        whether the native module was built with OpenMP (``openmp``,
        ``omp_max_threads``), the threads this process may use
        (``cpu_count``), the BLAS libraries loaded, and mpi4py, the MPI
        library, its ``mpiexec`` and ScaLAPACK when they are installed.
        ``cakernels info`` prints the same on the command line.

    Examples
    --------
    >>> import cakernels
    >>> config = cakernels.show_config()
    >>> config["cakernels"] == cakernels.__version__, config["cpu_count"] >= 1
    (True, True)
    """
    from ._info import build_info

    return build_info()
