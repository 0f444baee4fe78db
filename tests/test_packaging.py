"""First contact: the package imports from a source tree, the main job needs no
restart, and large Cholesky factorizations do not crash OpenBLAS."""

import os
import platform
import shutil
import sys
from pathlib import Path

import pytest

import cakernels
from cakernels import _blas, _native
from cakernels._native_loader import source_hash

REPO = Path(__file__).resolve().parent.parent

QUICK = """
from sklearn.datasets import make_classification
from cakernels import CASVC
import cakernels._native as native
X, y = make_classification(n_samples=200, random_state=0)
print(CASVC(n_partitions=2, random_state=0).fit(X, y).score(X, y) > 0.8, native.__file__)
"""


def _source_copy(tmp_path):
    """A source tree (package, C sources, setup.py, registry) with no compiled module,
    and beside it an 'installed' folder holding only the compiled module under test."""
    src = tmp_path / "src"
    shutil.copytree(REPO / "cakernels", src / "cakernels",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    shutil.copytree(REPO / "native", src / "native")
    shutil.copytree(REPO / "datasets", src / "datasets")
    shutil.copy(REPO / "setup.py", src / "setup.py")
    site = tmp_path / "site" / "cakernels"
    site.mkdir(parents=True)
    shutil.copy(_native.__file__, site / Path(_native.__file__).name)
    return src, site.parent


def test_compiled_module_matches_the_c_sources():
    # setup.py compiles the same hash in; this fails when the file lists of setup.py and
    # cakernels/_native_loader.py disagree, or when the module under test is stale
    assert _native.SOURCE_HASH == source_hash(REPO)


def test_source_tree_uses_the_installed_compiled_module(tmp_path, spawn):
    src, site = _source_copy(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), cakernels_site()]))
    out = spawn([sys.executable, "-c", QUICK], cwd=src, env=env, package_path=False)
    assert out.returncode == 0, out.stderr
    ok, native_file = out.stdout.split()
    assert ok == "True"
    assert Path(native_file).parent == site / "cakernels"


def test_stale_installed_module_is_a_clear_error(tmp_path, spawn):
    src, site = _source_copy(tmp_path)
    with open(src / "native" / "ck_smo.c", "a") as fh:
        fh.write("/* edited after the build */\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), cakernels_site()]))
    out = spawn([sys.executable, "-c", "import cakernels"], cwd=src, env=env,
                package_path=False)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: cakernels is imported from the source folder")
    assert "does not match its C sources" in last and "pip install ." in last
    assert "partially initialized" not in out.stderr


def test_python_m_cakernels_in_a_stale_source_tree_is_one_line(tmp_path, spawn):
    # `python -m cakernels info` (run to see which module loads) printed the import's
    # traceback and exited 1; now the command line's one-line error and status 2
    src, site = _source_copy(tmp_path)
    with open(src / "native" / "ck_smo.c", "a") as fh:
        fh.write("/* edited after the build */\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), cakernels_site()]))
    out = spawn([sys.executable, "-m", "cakernels", "info"], cwd=src, env=env,
                package_path=False)
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("cakernels: error: cakernels is imported from the source")
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert "does not match its C sources" in out.stderr
    # another package run with -m that imports cakernels keeps the ImportError (its
    # fallback ran no more: the process ended with status 2)
    (src / "mypkg").mkdir()
    (src / "mypkg" / "__init__.py").write_text(
        "try:\n    import cakernels\nexcept ImportError:\n    print('fallback')\n")
    (src / "mypkg" / "__main__.py").write_text("")
    out = spawn([sys.executable, "-m", "mypkg"], cwd=src, env=env, package_path=False)
    assert out.returncode == 0 and out.stdout.strip() == "fallback", out.stderr


def test_source_tree_without_any_build_is_a_clear_error(tmp_path, spawn):
    src, _ = _source_copy(tmp_path)
    # -S: no site-packages, so no installed cakernels anywhere
    out = spawn([sys.executable, "-S", "-c", "import cakernels"], cwd=src,
                env=dict(os.environ, PYTHONPATH=""), package_path=False)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert "no compiled native module" in last and "no installed cakernels was found" in last
    assert "python setup.py build_ext --inplace" in last and "pip install ." in last
    assert "partially initialized" not in out.stderr


_BUILT_MODULE = """
import glob, importlib.util, os
path, = glob.glob(os.path.join("build", "lib.*", "cakernels", "_native*"))
spec = importlib.util.spec_from_file_location("cakernels._native", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(module.openmp_enabled(), os.stat(path).st_mtime_ns)
"""


@pytest.mark.slow
def test_a_build_with_other_flags_rebuilds_the_module(tmp_path, spawn, requires):
    """build_ext used to rebuild only when a C source was newer than the module in
    build/lib.*: after ``CAKERNELS_DISABLE_OPENMP=1 python setup.py build_ext --inplace``
    a later ``pip install .`` packaged that serial module (and, after
    ``CAKERNELS_SANITIZE=1``, one that aborts at import). setup.py records the flags
    in build/temp.* and rebuilds when they differ."""
    # pyproject.toml's license field needs setuptools 77 (the test extra has it)
    requires("setuptools", min_version=77)
    src, _ = _source_copy(tmp_path)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CAKERNELS_") and k != "PYTHONPATH"}

    def build(**variables):
        out = spawn([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=src,
                    env=dict(env, **variables), package_path=False)
        assert out.returncode == 0, out.stdout + out.stderr
        module = spawn([sys.executable, "-c", _BUILT_MODULE], cwd=src, env=env,
                       package_path=False)
        assert module.returncode == 0, module.stderr
        openmp, mtime = module.stdout.split()
        return out.stdout, openmp == "True", int(mtime)

    _, openmp, _ = build(CAKERNELS_DISABLE_OPENMP="1")
    assert not openmp
    log, openmp, mtime = build()
    assert openmp is ("cakernels: building with OpenMP" in log)
    assert "compiler flags differ from the previous build" in log
    log, _, same_mtime = build()  # the same flags: nothing to rebuild
    assert "differ" not in log and same_mtime == mtime


def test_the_openmp_probe_uses_every_openmp_construct_of_the_sources():
    # the probe used "parallel reduction" only, which MSVC's OpenMP 2.0 (/openmp)
    # accepts: the build then failed on the sources' "atomic read seq_cst" instead of
    # falling back to serial code. Every kind of pragma the sources use must be in it.
    import re

    namespace = {"__name__": "not_main"}
    text = (REPO / "setup.py").read_text()
    program_src = text[text.index("OPENMP_TEST_PROGRAM = "):text.index("SIMD_TEST_PROGRAM = ")]
    exec("import textwrap\n" + program_src, namespace)  # (setup.py calls setup())
    program = namespace["OPENMP_TEST_PROGRAM"]

    def pragmas(source):
        # every pragma's directive and clause names, without the clauses' arguments
        return {" ".join(dict.fromkeys(re.sub(r"\([^)]*\)", "", m).split()))
                for m in re.findall(r"^\s*#pragma omp (.*)$", source, flags=re.M)}

    used = set()
    for path in sorted((REPO / "native").glob("*.c")):
        used |= pragmas(path.read_text())
    probed = pragmas(program)
    assert {"atomic read seq_cst", "atomic capture seq_cst"} <= used  # (what it guards)
    for kind in sorted(k for k in used if k.startswith(("atomic ", "simd"))):
        # the probe's seq_cst atomics cover the plain ones (OpenMP 4.0 over 3.1)
        assert kind in probed or f"{kind} seq_cst" in probed, (kind, sorted(probed))
    # and no bare "restrict" (MSVC's C mode takes __restrict only): CK_RESTRICT
    for path in sorted((REPO / "native").glob("*.c")):
        code = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
        code = re.sub(r"#define CK_RESTRICT restrict", "", code)
        assert not re.search(r"\brestrict\b", code), path.name


def cakernels_site():
    """sys.path entries of this interpreter (NumPy, scikit-learn) for a child
    that must not see the package under test."""
    return os.pathsep.join(p for p in sys.path if p and "site-packages" in p)


def test_import_is_light_and_lazy(spawn):
    code = ("import sys, cakernels; assert 'numpy' not in sys.modules; "
            "from cakernels import CASVC, oracle_score; import cakernels.partition; "
            "assert 'CASVC' in dir(cakernels) and 'datasets' in dir(cakernels); "
            "print(CASVC.__module__, cakernels.datasets.__name__)")
    out = spawn([sys.executable, "-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["cakernels.svm", "cakernels.datasets"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        cakernels.nope  # noqa: B018


def test_python_m_cakernels_from_the_repository_root(spawn):
    # what a newcomer runs: the source folder cakernels/ shadows the installed package
    out = spawn([sys.executable, "-m", "cakernels", "info"], cwd=REPO, package_path=False)
    assert out.returncode == 0, out.stderr
    assert "native module" in out.stdout


def test_main_job_runs_from_the_repository_root(cakernels_cli):
    out = cakernels_cli("bench", "demo", cwd=REPO, package_path=False, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "BKMSVC" in out.stdout and "restart" not in out.stderr


# --------------------------------------------------------------------------- OpenBLAS


def test_prefer_haswell_kernels_only_when_unset_and_avx512(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    avx512 = {"avx2", "fma", "avx512f"}
    import numpy  # noqa: F401  (once NumPy is loaded the variable is never changed)

    assert not _blas.prefer_haswell_kernels({}, avx512)
    monkeypatch.delitem(sys.modules, "numpy")
    monkeypatch.delitem(sys.modules, "scipy", raising=False)
    env = {}
    assert _blas.prefer_haswell_kernels(env, avx512) and env == {"OPENBLAS_CORETYPE": "Haswell"}
    env = {"OPENBLAS_CORETYPE": "SkylakeX"}
    assert not _blas.prefer_haswell_kernels(env, avx512) and env["OPENBLAS_CORETYPE"] == "SkylakeX"
    env = {}
    assert not _blas.prefer_haswell_kernels(env, {"avx2", "fma"}) and env == {}


@pytest.mark.parametrize("argv,expected", [
    (["bench"], False),                          # ijcnn1: classification
    (["bench", "demo"], False),
    (["bench", "--demo"], False),
    (["bench", "a9a"], False),
    (["bench", "cadata"], True),
    (["bench", "cadata", "--methods", "bkrr2"], False),  # KernelRidge only with krr
    (["bench", "cadata", "--methods", "bkrr2", "krr"], True),
    (["bench", "cadata", "--methods", "bkrr2,krr"], True),
    (["bench", "cadata", "--methods", "casvc"], False),
    (["bench", "unknown-name"], False),
])
def test_bench_decides_the_blas_kernels_from_its_arguments(argv, expected):
    from cakernels._cli import _bench_may_factor_large, build_parser

    assert _bench_may_factor_large(build_parser().parse_args(argv)) is expected


def _avx512():
    return platform.machine() == "x86_64" and {"avx512f", "avx2", "fma"} <= _blas._cpu_flags()


def test_bench_sets_haswell_kernels_for_its_own_process(cakernels_cli, tmp_path):
    import numpy as np
    from sklearn.datasets import dump_svmlight_file

    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    out = cakernels_cli("bench", "demo_regression", "--methods", "bkrr2", "krr", env=env)
    assert out.returncode == 0, out.stderr
    assert "Haswell" not in out.stdout  # a demo never factors a large matrix
    # a LIBSVM file may hold a regression problem: bench may run KernelRidge on it
    rng = np.random.RandomState(0)
    X = rng.randn(300, 4)
    dump_svmlight_file(X, X[:, 0] + 0.1 * rng.randn(300), str(tmp_path / "reg.svm"))
    out = cakernels_cli("bench", tmp_path / "reg.svm", "--methods", "bkrr2", "krr", env=env)
    assert out.returncode == 0, out.stderr
    assert ("OPENBLAS_CORETYPE=Haswell" in out.stdout) is _avx512()


@pytest.mark.slow
def test_large_cholesky_does_not_crash_skylakex_openblas(spawn):
    """The crash this guards against: OpenBLAS' SkylakeX kernels segfault in a
    two-thread Cholesky of 16,000 rows. The child forces those kernels (the only way
    to meet them on a machine whose OpenBLAS would pick others)."""
    if not _avx512():
        pytest.skip("the SkylakeX kernels need a CPU with AVX-512")
    code = ("import numpy as np; from cakernels import BKRR2; "
            "rng = np.random.RandomState(0); X = rng.randn(16000, 3); y = X[:, 0]; "
            "print(BKRR2(n_partitions=1, sigma=2.0, lam=1e-3).fit(X, y).score(X[:50], y[:50]))")
    env = dict(os.environ, OPENBLAS_CORETYPE="SkylakeX", OPENBLAS_NUM_THREADS="2")
    out = spawn([sys.executable, "-c", code], env=env, timeout=900)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr}"
    assert float(out.stdout) > 0.9


def test_command_line_parses_without_numpy(spawn):
    # bench chooses OpenBLAS' kernels before NumPy loads: parsing must not load it
    code = ("import sys, cakernels._cli as c; c.build_parser().parse_args(['bench']); "
            "light = 'numpy' not in sys.modules; "
            "from cakernels.backends import BACKEND_NAMES; "
            "print(light, c.BACKENDS == BACKEND_NAMES)")
    out = spawn([sys.executable, "-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]


def test_every_subpackage_is_listed_for_the_wheel():
    # a package folder missing from pyproject's list is absent from the installed
    # wheel (the tests of a source checkout would not notice)
    try:
        import tomllib
    except ImportError:  # Python 3.10: tomllib is new in 3.11, tomli is its backport
        tomllib = pytest.importorskip(
            "tomli", reason="reading pyproject.toml needs tomllib (Python 3.11+) or tomli")
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {".".join(p.parent.relative_to(root).parts)
             for p in (root / "cakernels").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)


def _package_imports(path):
    """``(line, module, names)`` of every ``import cakernels...`` and ``from
    cakernels... import ...`` in a script (module level or in functions)."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "cakernels" or node.module.startswith("cakernels.")):
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names
                      if a.name == "cakernels" or a.name.startswith("cakernels.")]
    return found


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "benchmarks").glob("*.py")))
def test_benchmark_scripts_import_what_exists(script):
    """The benchmarks are not run by the tests (they time full-size runs), so a
    moved module would break them silently (``bench_feature_major.py`` still
    imported ``cakernels._asygcd`` weeks after the module moved): every name
    they import from the package must exist. Checked without running them."""
    import importlib

    for line, module, names in _package_imports(REPO / "benchmarks" / script):
        mod = importlib.import_module(module)
        for name in names:
            if not hasattr(mod, name):
                importlib.import_module(f"{module}.{name}")  # a submodule, or the error
