"""Small helpers shared by the benchmark scripts.

Importing this module puts the repository root first on ``sys.path`` when the
checkout has its native extension built in place (``python setup.py
build_ext --inplace``), so that the scripts benchmark the tree they live in;
otherwise the installed ``cakernels`` is used.
It imports nothing heavy at module level (numpy, scipy and cakernels load
on first use).
"""

import os
import platform
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if (any((REPO_ROOT / "cakernels").glob("_native*"))
        and str(REPO_ROOT) not in sys.path):
    sys.path.insert(0, str(REPO_ROOT))


# ---------------------------------------------------------------- machine
def cpu_model():
    """CPU model name from /proc/cpuinfo (platform string elsewhere)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def n_cores():
    """Cores this process may use (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def load_avg():
    """The 1/5/15-minute load averages as a string, e.g. ``'1.02 0.80 0.55'``."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def load1():
    """The 1-minute load average (float, nan when unavailable)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def _version(dist):
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:  # not installed
        return None


def machine_lines(extra=()):
    """Lines describing the machine, the libraries and the BLAS in use."""
    import numpy as np
    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    import cakernels

    lines = [
        f"CPU        : {cpu_model()}",
        f"cores      : {n_cores()} usable ({os.cpu_count()} logical)",
        f"load avg   : {load_avg()} (1/5/15 min, at start)",
        f"python     : {platform.python_version()}  numpy {np.__version__}  scipy "
        f"{scipy.__version__}  scikit-learn {sklearn.__version__}",
        f"cakernels  : {cakernels.__version__} ({Path(cakernels.__file__).parent})",
    ]
    skx = _version("scikit-learn-intelex")
    if skx:
        lines.append(f"sklearnex  : {skx}")
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    for pool in threadpool_info():
        lines.append(
            "threadpool : {api}: {impl} {ver} ({arch}), {nt} threads, {lib}".format(
                api=pool.get("user_api"), impl=pool.get("internal_api"),
                ver=pool.get("version"), arch=pool.get("architecture", "-"),
                nt=pool.get("num_threads"), lib=os.path.basename(pool.get("filepath", "")))
        )
    if coretype:
        lines.append(f"env        : OPENBLAS_CORETYPE={coretype}")
    lines.extend(extra)
    return lines


def print_machine(extra=()):
    lines = machine_lines(extra)
    print("\n".join(lines), flush=True)
    return lines


def haswell_for_large_cholesky(n_rows, cpu_flags=None):
    """Re-execute this script with ``OPENBLAS_CORETYPE=Haswell`` when the run will
    factor ``n_rows`` rows or more in one Cholesky (``KernelRidge``, DKRR, one
    partition) -- at least ``cakernels._blas.LARGE_CHOLESKY`` (16,000) -- the
    variable is unset or empty, and the CPU would make OpenBLAS pick its SkylakeX
    kernels (x86-64 with AVX-512F, AVX2 and FMA: the test of
    ``cakernels._blas.prefer_haswell_kernels``). The numpy/scipy wheels' OpenBLAS
    segfaults in 2-thread Cholesky of that size with those kernels; it reads the
    variable when it loads, hence a fresh process, in which every side of the
    comparison uses the same BLAS. Call it right after parsing the arguments;
    otherwise it returns (False) and changes nothing. ``cpu_flags``: for tests."""
    from cakernels._blas import LARGE_CHOLESKY, skylakex_kernels_likely

    if n_rows < LARGE_CHOLESKY or os.environ.get("OPENBLAS_CORETYPE"):
        return False
    if not skylakex_kernels_likely(cpu_flags):
        return False
    print(f"note: this run factors {n_rows:,} rows (>= {LARGE_CHOLESKY:,}) on an AVX-512 "
          "CPU, where the wheels' OpenBLAS SkylakeX kernels crash in 2-thread Cholesky: "
          "re-running with OPENBLAS_CORETYPE=Haswell", flush=True)
    sys.stderr.flush()
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell")
    # the command line as given, interpreter options and -c/-m included (sys.argv
    # lost them: a main(argv) called from `python -c` re-ran the wrong thing)
    argv = list(getattr(sys, "orig_argv", [sys.executable] + sys.argv))
    os.execve(sys.executable, [sys.executable] + argv[1:], env)


# ---------------------------------------------------------------- arguments
def positive_int(text):
    """argparse ``type``: an int >= 1 (``--repeat``, ``--partitions``)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


# ---------------------------------------------------------------- data
def libsvm_csr(X):
    """``X`` as scikit-learn's ``SVC`` takes sparse input: a float64 CSR matrix
    with 32-bit indices (LIBSVM rejects int64 ones); dense input is returned
    unchanged. The caller's matrix is not modified."""
    import numpy as np
    import scipy.sparse as sp

    if not sp.issparse(X):
        return X
    A = sp.csr_matrix(X, dtype=np.float64)
    return sp.csr_matrix((A.data, A.indices.astype(np.int32), A.indptr.astype(np.int32)),
                         shape=A.shape)


# ---------------------------------------------------------------- timing
#: a busy loop that ends when the benchmark that started it does (a SIGTERM, SIGHUP or
#: SIGKILL ends the benchmark without __exit__, and its own session keeps it from the
#: group's signals: it spun on for good); it checks its parent every few milliseconds
_SPIN = """
import os
parent = os.getppid()
while os.getppid() == parent:
    for _ in range(100_000):
        pass
"""


class Busy:
    """``n`` other processes spinning on the cores while the block runs (a busy
    machine for the contention settings of the benchmarks). They end with the
    block, or with this process however it ends."""

    def __init__(self, n):
        self.n = n
        self.procs = []

    def __enter__(self):
        import subprocess
        self.procs = [subprocess.Popen([sys.executable, "-c", _SPIN],
                                       start_new_session=True) for _ in range(self.n)]
        time.sleep(0.3 if self.n else 0.0)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def timed(fn, *args, **kwargs):
    """Run ``fn`` once; return ``(result, seconds)`` (time.perf_counter)."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


# ---------------------------------------------------------------- output
def md_table(headers, rows):
    """A Markdown table (numbers right-aligned) as a string."""
    rows = [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]

    def is_num(v):
        try:
            float(v.rstrip("x%s").replace(",", ""))
            return True
        except ValueError:
            return False

    def numeric(i):
        vals = [r[i] for r in rows if r[i] not in ("", "-", "n/a")]
        return bool(vals) and all(is_num(v) for v in vals)

    right = [numeric(i) for i in range(len(headers))]
    out = ["| " + " | ".join(str(h).ljust(w) for h, w in zip(headers, widths)) + " |",
           "|" + "|".join(("-" * (w + 1) + ":") if r else ("-" * (w + 2))
                          for w, r in zip(widths, right)) + "|"]
    for r in rows:
        out.append("| " + " | ".join(c.rjust(w) if rt else c.ljust(w)
                                     for c, w, rt in zip(r, widths, right)) + " |")
    return "\n".join(out)


def pass_miss(ok):
    return "PASS" if ok else "MISS"


class Report:
    """Collects what a script prints so that ``--out`` gets the same Markdown."""

    def __init__(self):
        self.parts = []

    def line(self, text=""):
        print(text, flush=True)
        self.parts.append(text)

    def table(self, title, headers, rows, note=None):
        self.line(f"\n### {title}\n")
        self.line(md_table(headers, rows))
        if note:
            self.line(f"\n{note}")

    def machine(self, extra=()):
        lines = print_machine(extra)
        self.parts.append("```\n" + "\n".join(lines) + "\n```")

    def write(self, path):
        if path:
            Path(path).write_text("\n".join(self.parts) + "\n")
            print(f"\nwrote {path}")


# ---------------------------------------------------------------- figures
#: where a ``--quick`` run's figures go unless a path is given: ``benchmarks/results/``
#: (its ``*.png`` are git-ignored), so that a subset run never overwrites a committed
#: full-run figure in ``benchmarks/``
QUICK_PLOT_DIR = REPO_ROOT / "benchmarks" / "results"
NO_MATPLOTLIB = "matplotlib is not installed (pip install '.[bench]')"


def plot_path(explicit, name, quick):
    """Where a script saves its figure ``name`` (e.g. ``'halo.png'``).

    The rule of every script that writes a figure by default: a path given on the
    command line is used as given; otherwise a full run writes the committed figure
    ``benchmarks/<name>`` and a ``--quick`` run ``benchmarks/results/<stem>_quick.png``
    (git-ignored)."""
    if explicit:
        return Path(explicit)
    if quick:
        return QUICK_PLOT_DIR / f"{Path(name).stem}_quick{Path(name).suffix}"
    return REPO_ROOT / "benchmarks" / name


def shown(path):
    """``path`` for the output: relative to the checkout when inside it."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def plot_check(wanted=True):
    """At the start of a run: can its figure be drawn? Says so when matplotlib is
    missing (the tables are still printed; the figure is skipped at the end)."""
    if not wanted:
        return False
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"note: {NO_MATPLOTLIB}: the tables will be printed, the plot skipped",
              flush=True)
        return False
    return True


def pyplot(say=print):
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or ``None`` after
    saying (``say``: ``print`` or ``Report.line``) that the plot is skipped."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say(f"\nplot skipped: {NO_MATPLOTLIB}")
        return None
    return plt


def save_figure(fig, path, say=print, label="plot"):
    """Save ``fig`` to ``path`` (creating its folder), close it and say where."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    say(f"\n{label}: {shown(path)}")
    return path


# ---------------------------------------------------------------- subprocesses
#: the mpiexec of this environment (the MPICH wheel's, next to its python)
MPIEXEC = Path(sys.executable).with_name("mpiexec")


def run_json(argv, timeout=7200):
    """Run ``argv`` (this tree's package first on PYTHONPATH, in its own session)
    and return the last JSON line it printed; exits with its stderr on failure."""
    import json
    import subprocess

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    out = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env,
                         timeout=timeout, start_new_session=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed:\n{out.stderr[-3000:]}")
    return json.loads([line for line in out.stdout.splitlines()
                       if line.startswith(("{", "["))][-1])


# ---------------------------------------------------------------- data
def data_home(arg=None):
    """``--data-home``, else ``$CAKERNELS_DATA``, else ``<repo>/../shared/datasets``."""
    if arg:
        return str(arg)
    env = os.environ.get("CAKERNELS_DATA")
    if env:
        return env
    return str((REPO_ROOT / ".." / "shared" / "datasets").resolve())


def load_train_test(name, home, quick):
    """``(X, y, X_test, y_test)`` of a dataset with an official test split, from
    ``home`` only (no download): ijcnn1 dense; a sparse set as CSR, the test matrix
    widened to the training set's columns; ``quick``: random 6,000-row subsets of
    both (seed 0). Used by ``bench_halo.py`` and ``bench_routing.py``."""
    import numpy as np
    import scipy.sparse as sp

    from cakernels.datasets import load_dataset

    X, y = load_dataset(name, data_home=home, return_X_y=True, download_if_missing=False)
    Xt, yt = load_dataset(name, subset="test", data_home=home, return_X_y=True,
                          download_if_missing=False)
    if name == "ijcnn1":
        X = X.toarray() if sp.issparse(X) else np.asarray(X)
        Xt = Xt.toarray() if sp.issparse(Xt) else np.asarray(Xt)
    if sp.issparse(X):
        X, Xt = sp.csr_matrix(X), sp.csr_matrix(Xt)
        if Xt.shape[1] < X.shape[1]:
            Xt = sp.csr_matrix((Xt.data, Xt.indices, Xt.indptr), shape=(Xt.shape[0], X.shape[1]))
    if quick:
        rng = np.random.RandomState(0)
        a = rng.choice(X.shape[0], min(X.shape[0], 6000), replace=False)
        b = rng.choice(Xt.shape[0], min(Xt.shape[0], 6000), replace=False)
        X, y, Xt, yt = X[a], np.asarray(y)[a], Xt[b], np.asarray(yt)[b]
    return X, np.asarray(y), Xt, np.asarray(yt)


def add_common_args(ap):
    ap.add_argument("--quick", action="store_true", help="small subset, for smoke runs")
    ap.add_argument("--data-home", default=None,
                    help="dataset folder (default: $CAKERNELS_DATA, then ../shared/datasets)")
    ap.add_argument("--out", default=None, help="write the tables as Markdown to this file")
    return ap


# ------------------------------------------------- memory of a child process
def proc_status_bytes(key):
    """A memory field of ``/proc/self/status`` (``'VmRSS:'``, ``'VmHWM:'``) in bytes
    (Linux). The peak-memory children of bench_smo and bench_asygcd import it."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise KeyError(key)


def data_nbytes(X):
    """Bytes of a dense array or of a CSR matrix's three arrays."""
    if hasattr(X, "indptr"):
        return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    return X.nbytes
