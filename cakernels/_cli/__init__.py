"""The ``cakernels`` command line: ``info``, ``fit``, ``search``, ``predict``, ``evaluate``,
``bench``.

Run ``cakernels --help`` (or ``python -m cakernels --help``) for the usage. Every
user error (missing or malformed file, unknown dataset, failed download, a file
that is not a cakernels model, a feature-count mismatch, a bad parameter value)
prints one line ``cakernels: error: ...`` on stderr and exits with status 2;
``--debug`` adds the traceback. Ctrl-C exits with status 130.
"""

import argparse
import contextlib
import os
import re
import sys
import traceback
import warnings

from .bench import (
    _bench_may_factor_large,
    _cmd_bench,
)
from .common import (
    _Run,
    BACKENDS,
    MAX_CLASS_CODES,
    PROG,
    TASKS,
    CLIError,
    _error_message,
    _launched_by_mpiexec,
    _show_warning,
)
from .registry import (
    CLASSIFICATION_METHODS,
    METHODS,
    ORACLE_METHODS,
    REGRESSION_METHODS,
)
from .fit import (
    _cmd_fit,
)
from .info import (
    _cmd_info,
)
from .search import add_search_parser
from .predict import (
    _cmd_evaluate,
    _cmd_predict,
)

# --------------------------------------------------------------------------- parser


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value > 2 ** 62:  # (--n-features 2**63 was SciPy's OverflowError)
        raise argparse.ArgumentTypeError(f"expected a positive integer up to 2**62, got "
                                         f"{text!r}")
    return value


def _gamma(text):
    if text in ("scale", "auto"):
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected 'scale', 'auto' or a number, got {text!r}") from None


def _add_common(parser):
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of an error")


def _add_trust_pickle(parser):
    parser.add_argument("--trust-pickle", action="store_true",
                        help="load MODEL even if it is a pickle (model files of cakernels "
                             "0.1 and other pickles): unpickling runs any code the file "
                             "contains, so only for files you made yourself")


def _add_estimator_options(parser, *, bench=False):

    g = parser.add_argument_group("estimator options")
    if not bench:
        g.add_argument("--method", choices=METHODS, type=str.lower,
                       help="partitioned estimator, or the scikit-learn baseline svc (SVC) / "
                            "krr (KernelRidge); default: casvc for classification, bkrr2 for "
                            "regression (see --task); for a LIBSVM file, --C/--gamma choose "
                            "casvc and --sigma/--lam bkrr2")
    g.add_argument("--task", choices=TASKS, type=str.lower,
                   help="classification or regression. Default: "
                        + ("" if bench else "the --method's; otherwise ")
                        + "a registry dataset's or demo's own task; for a LIBSVM file, the kind "
                        + ("of the --methods or options given" if bench else "of options given")
                        + " (--C/--gamma: SVM, --sigma/--lam: kernel ridge), else inferred "
                          "from its targets (classification for whole numbers with at most "
                          f"{MAX_CLASS_CODES} distinct values or forming the class codes 0..K "
                          "or 1..K, regression otherwise; a note on stderr says which and why)")
    g.add_argument("--n-partitions", "-p", type=int, metavar="P",
                   help="number of partitions" + (" (default: 16 for ijcnn1, 4 for the demo, "
                                                  "8 otherwise)" if bench else " (default 8)"))
    g.add_argument("--C", dest="C", type=float, help="SVM regularisation C (default 1"
                   + ("; 32 for ijcnn1)" if bench else ")"))
    g.add_argument("--gamma", type=_gamma, help="SVM kernel coefficient: number, 'scale' or "
                   "'auto' (default 'scale'" + ("; 2 for ijcnn1)" if bench else ")"))
    g.add_argument("--tol", type=float, metavar="TOL",
                   help="SVM stopping tolerance, LIBSVM's -e (default 1e-3; kernel ridge "
                        + ("methods ignore it)" if bench else "methods refuse it)"))
    g.add_argument("--kernel", choices=("rbf", "linear", "poly", "sigmoid"), type=str.lower,
                   help="kernel (default rbf)")
    g.add_argument("--sigma", type=float,
                   help="kernel ridge Gaussian width, gamma = 1/(2 sigma^2) "
                        + ("(default sqrt(n_features/2) on the standardized features)" if bench
                           else "(default 1)"))
    g.add_argument("--lam", type=float, help="kernel ridge parameter lambda; every part solves "
                   "(K + lam m I) alpha = y (default " + ("1e-5)" if bench else "1e-4)"))
    g.add_argument("--halo", type=float, metavar="H",
                   help="halo partitions: every partition also trains on the H * m/P samples "
                        "(K-means partitions, cpsvc/kkrr/kkrr2: H times their own size) "
                        "of its neighbours nearest to its border (default 0"
                        + ("; methods without a halo ignore it)" if bench else
                           "; single-level partitioned methods)"))
    g.add_argument("--routing", choices=("nearest", "vote"), type=str.lower,
                   help="prediction of the single-level partitioned SVMs: the nearest "
                        "centre's model, or a vote of the --n-voters nearest centres' models "
                        "weighted by 1/distance^2 (default nearest"
                        + ("; other methods ignore it)" if bench else ")"))
    g.add_argument("--n-voters", type=int, metavar="K",
                   help="models that vote per sample under --routing vote (default 3)")
    g.add_argument("--working-set", choices=("first-order", "second-order"), type=str.lower,
                   help="Dis-SMO's choice of the pair: Algorithm 1's first-order maximal "
                        "violating pair, or LIBSVM's second-order one (fewer iterations; "
                        "use it with a large --C) (default first-order"
                        + ("; other methods ignore it)" if bench else ")"))
    g.add_argument("--n-passes", type=int, metavar="N",
                   help="cascadesvc's passes over the tree (Graf et al.'s feedback loop): it "
                        "stops once no training row violates the SVM by --tol (the exact "
                        "SVM) and warns when the passes run out first (default 1: one pass, "
                        "unchecked" + ("; other methods ignore it)" if bench else ")"))
    g.add_argument("--predict-layer", type=int, metavar="L",
                   help="dcsvc's early prediction: stop after layer L (1: the partitions' own "
                        "models) and predict by the models of that layer (default: the last "
                        "layer, the full SVM" + ("; other methods ignore it)" if bench else ")"))
    g.add_argument("--backend", choices=BACKENDS, help="how partitions are run (default serial)")
    g.add_argument("--n-jobs", type=int, metavar="N",
                   help="workers of the threads backend (default: all cores)")
    g.add_argument("--random-state", type=int, metavar="SEED",
                   help="seed of the partitioners (default 0, where the Python classes' "
                        "default is None: a fresh draw)")
    g.add_argument("-v", "--verbose", action="store_true", default=None,
                   help="progress bar over the partitions (tqdm, on stderr)")


_BENCH_EPILOG = """\
datasets:
  omitted      ijcnn1 from the data home (CAKERNELS_DATA or ~/cakernels_data), official
               train/test split, C=32 gamma=2, 16 partitions. It is never downloaded
               implicitly: when it is not there the demo is used instead (and said so).
  demo         breast cancer, shipped with scikit-learn: 70/30 split, standardized
               (demo_regression: the diabetes data, run with the regression methods).
  NAME         any registry dataset (downloaded if missing). Regression datasets run
               DCKRR, KKRR, KKRR2, BKRR, BKRR2, the oracle bounds BKRR3/KKRR3 and
               scikit-learn's KernelRidge (gamma = 1/(2 sigma^2), alpha = lam n) on
               standardized X and y centred by the training mean (kernel ridge fits no
               intercept); cadata standardizes y and trains on 16,000 samples of a
               fixed random split (8 partitions). KernelRidge is skipped when its
               n x n kernel needs more than 8 GiB, or its 3 copies more than 80% of
               the memory available.
  FILE         a LIBSVM file, with a fixed random 80/20 split (regression: X
               standardized and y centred, as above).

note: OpenBLAS' SkylakeX kernels crash in multi-threaded Cholesky factorizations of
16,000 or more rows (scikit-learn's KernelRidge on that many samples). When a run may
fit KernelRidge and OPENBLAS_CORETYPE is unset, bench sets OPENBLAS_CORETYPE=Haswell
for its own process on CPUs with AVX-512 (before NumPy loads, nothing is restarted), so
that every method runs the same, working BLAS kernels, and says so.
Every method is warmed up on a small subsample before it is timed.
Timings are wall-clock seconds of one run; other load on the machine changes them."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors, as every other error of the command line
    (argparse prints the whole usage block first); ``--help`` shows the usage. A
    negative number in scientific notation (``--lams -1e-3``) or ``-inf`` is a value,
    as ``-0.001`` is (argparse took it for an option: "expected at least one
    argument"), so that the option's own check says what is wrong with it."""

    _NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$",
                                  re.IGNORECASE)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = self._NEGATIVE_NUMBER

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser():
    from .._version import __version__

    parser = _Parser(
        prog=PROG,
        description="Communication-avoiding kernel methods: partitioned kernel SVM and kernel "
                    "ridge regression. DATA is a LIBSVM file, 'demo', or a registry dataset "
                    "name[:train|test|all] (see cakernels.datasets.list_datasets()).",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--debug", action="store_true", default=False,
                        help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("info", help="versions, OpenMP, BLAS, MPI and the data home",
                       description="Versions, OpenMP, BLAS, MPI availability and the data home.")
    _add_common(p)
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser(
        "fit", help="train a model and save it",
        description="Train a model on DATA (a LIBSVM file, 'demo', or a registry name[:subset], "
                    "default subset train) and save it (a skops.io file: loading it runs no code).")
    p.add_argument("data", metavar="DATA")
    p.add_argument("-o", "--output", required=True, metavar="MODEL", help="model file to write")
    p.add_argument("--standardize", action="store_true",
                   help="fit a StandardScaler first (with_mean=False for sparse input), and "
                        "for regression centre the target; saved with the model (under --backend "
                        "mpi fitted on all ranks' rows)")
    p.add_argument("--n-features", type=_positive_int, metavar="N",
                   help="a LIBSVM file's number of features (default: its largest feature index); "
                        "give the test data's when it uses indices the training file does not")
    _add_estimator_options(p)
    _add_common(p)
    p.set_defaults(func=_cmd_fit)

    add_search_parser(sub, _add_common, _positive_int, _gamma)

    trust = ("MODEL files are skops.io files: one that names a type other than cakernels', "
             "scikit-learn's, NumPy's or SciPy's is refused, and so are pickles (they can run "
             "code) unless --trust-pickle is given.")
    p = sub.add_parser(
        "predict", help="write one prediction per line",
        description="Predict DATA (a LIBSVM file, 'demo', or a registry name[:subset], default "
                    "the test split) with a saved model. A LIBSVM file may have fewer features "
                    "than the training data (the missing ones are zero). " + trust)
    p.add_argument("model", metavar="MODEL")
    p.add_argument("data", metavar="DATA")
    p.add_argument("-o", "--output", metavar="OUT", help="output file (default: stdout)")
    _add_trust_pickle(p)
    _add_common(p)
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser(
        "evaluate", help="accuracy or MSE/R^2 of a saved model",
        description="Accuracy (classifiers) or MSE and R^2 (regressors) of a saved model on "
                    "DATA, and the prediction time. " + trust)
    p.add_argument("model", metavar="MODEL")
    p.add_argument("data", metavar="DATA")
    _add_trust_pickle(p)
    _add_common(p)
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser(
        "bench", help="partitioned estimators vs the scikit-learn baseline, side by side",
        description="Train the partitioned estimators and the scikit-learn baseline on one\n"
                    "dataset and print fit and predict times, accuracy or test MSE, support\n"
                    "vectors and the fit speedup over scikit-learn.",
        epilog=_BENCH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", nargs="?", metavar="DATASET",
                   help="registry name, 'demo', or a LIBSVM file (default: ijcnn1, see below)")
    p.add_argument("--demo", action="store_true", help="use the dataset shipped with scikit-learn")
    p.add_argument("--methods", nargs="+", metavar="M",
                   help="methods to run (space or comma separated): "
                        f"{', '.join(CLASSIFICATION_METHODS)} | "
                        f"{', '.join(REGRESSION_METHODS + tuple(ORACLE_METHODS))}")
    p.add_argument("--max-train", type=_positive_int, metavar="N",
                   help="subsample the training set to N samples")
    p.add_argument("--max-test", type=_positive_int, metavar="N",
                   help="subsample the test set to N samples (default: all of it)")
    _add_estimator_options(p, bench=True)
    _add_common(p)
    p.set_defaults(func=_cmd_bench)
    return parser

def main(argv=None):
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        # under mpiexec, rank 0 alone prints usage errors and --help
        with _silenced(_launched_rank() > 0):
            args, extra = parser.parse_known_args(argv)
            if extra:  # the command's own usage error (its --help lists its options)
                commands = next(a for a in parser._actions
                                if isinstance(a, argparse._SubParsersAction))
                commands.choices[args.command].error(
                    f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, --version, usage errors
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    if argv is None and args.command == "bench" and _bench_may_factor_large(args):
        # the real command line (never a test calling main(argv)), before NumPy loads
        from .._blas import prefer_haswell_kernels

        from . import bench

        bench._HASWELL_SET_FOR_BENCH = prefer_haswell_kernels()
    debug = getattr(args, "debug", False)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            _check_launch(args)
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        if _Run.mpi is not None and _Run.mpi[1].size > 1:
            # mpiexec forwards Ctrl-C to every rank, but a rank may be inside a
            # collective that does not return to Python (the others spun there for
            # minutes while this one waited in MPI_Finalize): end the job
            print(f"{PROG}: interrupted (rank {_Run.mpi[1].rank}): aborting the MPI job",
                  file=sys.stderr)
            sys.stderr.flush()
            _Run.mpi[0].Abort(130)
        return 130
    except BrokenPipeError:
        # the reader went away (e.g. `cakernels predict ... | head`): stop quietly
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141
    except Exception as exc:
        if _Run.mpi is not None:
            return _mpi_error(exc, debug)
        if _launched_rank() == 0:  # under mpiexec without --backend mpi: rank 0 reports
            if debug:
                traceback.print_exc()
            print(f"{PROG}: error: {_error_message(exc)}", file=sys.stderr)
        return 2


#: commands that run in one process (fit and search say so themselves: they take
#: --backend mpi); info printed its whole report once per process
_ONE_PROCESS = ("predict", "evaluate", "bench", "info")


def _check_launch(args):
    """Refuse a one-process command that mpiexec started several times: every process
    would run it and print or write the same output."""
    n = _launched_by_mpiexec()
    if n > 1 and args.command in _ONE_PROCESS:
        raise CLIError(f"running under mpiexec with {n} processes, but {PROG} {args.command} "
                       "runs in one process (every process would run it and print or write "
                       "the same output): run it without mpiexec; fit and search take "
                       "--backend mpi")


@contextlib.contextmanager
def _silenced(quiet):
    """Send stdout and stderr to nowhere while ``quiet``."""
    if not quiet:
        yield
        return
    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull), \
            contextlib.redirect_stderr(devnull):
        yield


def _launched_rank():
    """This process's rank in an mpiexec launch (from its environment), 0 without it."""
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        value = os.environ.get(var)
        if value and value.isdigit():
            return int(value)
    return 0


def _mpi_error(exc, debug):
    """An error of a ``--backend mpi`` run. Raised on every rank (a collective check or
    a failure every rank learned of): rank 0 reports it and every rank exits 2.
    Raised on this rank only: report it here and abort the job, so that no other rank
    waits forever."""
    from ..backends import CollectiveError

    mpi_comm, comm = _Run.mpi
    if isinstance(exc, CollectiveError) or getattr(exc, "collective", False):
        if comm.rank == 0:
            if debug:
                traceback.print_exc()
            print(f"{PROG}: error: {_error_message(exc)}", file=sys.stderr)
        return 2
    if debug:
        traceback.print_exc()
    print(f"{PROG}: error: rank {comm.rank}: {_error_message(exc)}", file=sys.stderr)
    sys.stderr.flush()
    mpi_comm.Abort(2)
    return 2  # pragma: no cover - Abort does not return
