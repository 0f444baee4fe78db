"""Shared fixtures."""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_home():
    """The local benchmark folder from ``CAKERNELS_DATA``.

    Skipped when missing on a developer machine; under ``CI=true`` missing
    data is a failure, never a silent skip.
    """
    value = os.environ.get("CAKERNELS_DATA")
    home = Path(value).expanduser().absolute() if value else None
    if home is None or not home.is_dir():
        msg = (
            "CAKERNELS_DATA is unset" if home is None else f"CAKERNELS_DATA={value} is not a folder"
        ) + ": the local benchmark datasets are needed for this test"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return home


@pytest.fixture(autouse=True)
def _no_downloads(monkeypatch):
    """No test downloads: ``pooch.retrieve`` refuses, so that a file missing from
    ``CAKERNELS_DATA`` fails the test naming it instead of being fetched from the
    LIBSVM site (tests of the download path patch it with their own fakes)."""
    try:
        import pooch
    except ImportError:  # nothing could download
        return

    def offline(url, *args, **kwargs):
        raise ConnectionError(f"the tests never download ({url}): is the file missing "
                              "from CAKERNELS_DATA?")

    monkeypatch.setattr(pooch, "retrieve", offline)


def _require(module, reason="pip install '.[test]'", min_version=None):
    """Import a test dependency: a skip where it is missing (or older than
    ``min_version``, its major version) on a developer machine, a failure under
    ``CI=true`` (never a silent skip there)."""
    import importlib

    try:
        found = importlib.import_module(module)
        version = getattr(found, "__version__", "0")
        if min_version is not None and int(version.split(".")[0]) < min_version:
            raise ImportError(f"version {version} is older than {min_version}")
        return found
    except ImportError as exc:
        msg = f"{module} is needed for this test ({reason}): {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture(scope="session")
def requires():
    """``requires(module, reason=..., min_version=None)``: the imported module, or a
    skip (a failure under CI=true)."""
    return _require


def _package_parent():
    """The folder holding the ``cakernels`` package under test (site-packages when
    installed, the repository root when built in place)."""
    import cakernels

    return str(Path(cakernels.__file__).resolve().parent.parent)


def run_process(argv, *, cwd=None, env=None, timeout=300, package_path=True, stdin=None):
    """Run ``argv`` in a new session and return the CompletedProcess (text mode).

    ``package_path`` puts the package under test first on PYTHONPATH, so that a
    child interpreter imports the same cakernels as the tests (whichever way it is
    installed). On timeout the whole process group is killed and the test fails.
    """
    import signal
    import subprocess

    full_env = dict(os.environ if env is None else env)
    if package_path:
        full_env["PYTHONPATH"] = os.pathsep.join(
            [_package_parent()] + [p for p in [full_env.get("PYTHONPATH")] if p])
    proc = subprocess.Popen([str(a) for a in argv], cwd=cwd, env=full_env, text=True,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{argv} did not finish within {timeout} s\n{out}\n{err}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def cakernels_executable():
    """The ``cakernels`` console script of this environment (next to the interpreter)."""
    import sys

    exe = Path(sys.executable).with_name("cakernels")
    if not exe.exists():
        pytest.fail(f"the cakernels executable is not installed next to {sys.executable}")
    return exe


@pytest.fixture
def cakernels_cli(tmp_path):
    """``cakernels_cli(*args, cwd=..., env=...)`` runs the real ``cakernels`` executable
    in a subprocess (the installed console script, importing the package under test)."""

    def run(*args, cwd=None, env=None, timeout=300, **kwargs):
        return run_process([cakernels_executable(), *args], cwd=cwd or tmp_path, env=env,
                           timeout=timeout, **kwargs)

    return run


@pytest.fixture
def spawn():
    """``spawn(argv, cwd=..., env=..., package_path=True)``: :func:`run_process`."""
    return run_process


def _svmlight_csr(X):
    """``X`` as :func:`sklearn.datasets.load_svmlight_file` returns it: CSR with
    int64 indices, read back from the LIBSVM text format with exactly the values
    of ``X`` (written with 17 significant digits; ``dump_svmlight_file`` writes 16).
    Older scikit-learn/SciPy return int32 indices: they are widened to int64, the
    format under test."""
    import io

    import numpy as np
    from sklearn.datasets import load_svmlight_file

    X = np.asarray(X, dtype=np.float64)
    lines = ["0 " + " ".join(f"{j + 1}:{float(row[j])!r}" for j in np.flatnonzero(row))
             for row in X]
    Z = load_svmlight_file(io.BytesIO("\n".join(lines).encode()), n_features=X.shape[1])[0]
    Z.indices, Z.indptr = Z.indices.astype(np.int64), Z.indptr.astype(np.int64)
    assert np.array_equal(Z.toarray(), X)
    return Z


def _storage_formats(X):
    import scipy.sparse as sp

    return {"dense": X, "csr32": sp.csr_matrix(X), "csr64": _svmlight_csr(X)}


@pytest.fixture(scope="session")
def storage_formats():
    """``storage_formats(X)``: ``{'dense': X, 'csr32': CSR with 32-bit indices,
    'csr64': CSR with 64-bit indices as load_svmlight_file returns}``, all holding
    exactly the values of the dense ``X``."""
    return _storage_formats


def _smo_problem(n=1500, fmt="dense"):
    """Overlapping classes (labels -1/+1): long enough for the SMO's
    shrinking, unshrinking and gradient reconstruction to run. fmt: 'dense',
    'csr', with '_float_exact' values exactly floats."""
    import numpy as np
    import scipy.sparse as sp
    from sklearn.datasets import make_classification
    from sklearn.preprocessing import StandardScaler

    X, y = make_classification(n_samples=n, n_features=8, n_informative=5, flip_y=0.1,
                               class_sep=0.8, random_state=3)
    X = StandardScaler().fit_transform(X)
    if fmt.endswith("float_exact"):
        X = np.round(4 * X) / 4
    if fmt.startswith("csr"):
        X = sp.csr_matrix(np.where(np.abs(X) < 0.5, 0.0, X))
    return X, 2.0 * y - 1.0


def _assert_same_solution(got, ref):
    """Two ``smo_fit`` results are the same bit for bit."""
    import numpy as np

    np.testing.assert_array_equal(got["alpha"], ref["alpha"])
    assert got["intercept"] == ref["intercept"]
    assert got["n_iter"] == ref["n_iter"]
    assert got["objective"] == ref["objective"]
    assert got["converged"] == ref["converged"]


@pytest.fixture(scope="session")
def smo_problem():
    """``smo_problem(n=1500, fmt='dense') -> (X, y)``: a binary problem for the
    native SMO's invariance tests."""
    return _smo_problem


@pytest.fixture(scope="session")
def assert_same_solution():
    """``assert_same_solution(got, ref)``: ``smo_fit`` results equal bit for bit."""
    return _assert_same_solution


def _peak_bytes(call, *args, **kwargs):
    """Run ``call(*args, **kwargs)`` under ``tracemalloc``: ``(result, peak)`` with
    ``peak`` the most bytes Python-tracked allocations held above those alive at the
    start (NumPy reports its buffers to tracemalloc)."""
    import tracemalloc

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = call(*args, **kwargs)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.fixture(scope="session")
def peak_bytes():
    """``peak_bytes(call, *args, **kwargs) -> (result, peak)``: the peak memory of a
    call, measured with ``tracemalloc``."""
    return _peak_bytes
