"""The ``cakernels`` command line: ``info``, ``fit``, ``predict``, ``evaluate``, ``bench``.

Run ``cakernels --help`` (or ``python -m cakernels --help``) for the usage. Every
user error (missing or malformed file, unknown dataset, failed download, a file
that is not a cakernels model, a feature-count mismatch, a bad parameter value)
prints one line ``cakernels: error: ...`` on stderr and exits with status 2;
``--debug`` adds the traceback. Ctrl-C exits with status 130.
"""

import argparse
import contextlib
import math
import os
import pickle
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

PROG = "cakernels"

#: marker and version of the model files written by ``cakernels fit``; version 2 adds the
#: metadata ``index_base`` (the feature-index base of the training file, which the
#: prediction files are read with)
MODEL_FORMAT = "cakernels-model"
MODEL_FORMAT_VERSION = 2

SVM_METHODS = ("casvc", "fcfssvc", "bkmsvc", "cpsvc")
KRR_METHODS = ("dckrr", "kkrr", "kkrr2", "bkrr", "bkrr2")
ORACLE_METHODS = {"bkrr3": "bkrr2", "kkrr3": "kkrr2"}  # oracle row -> model it bounds
METHODS = SVM_METHODS + ("svc",) + KRR_METHODS + ("krr",)
CLASSIFICATION_METHODS = SVM_METHODS + ("svc",)
REGRESSION_METHODS = KRR_METHODS + ("krr",)
TASKS = ("classification", "regression")
#: the method ``fit`` trains when neither --method nor its options choose one
DEFAULT_METHOD = {"classification": "casvc", "regression": "bkrr2"}
#: whole-number targets with at most this many distinct values are class labels
MAX_CLASS_CODES = 20

#: memory budget of the scikit-learn KernelRidge baseline in ``bench`` (its n x n kernel)
KRR_MEMORY_BUDGET = 8 * 2**30
#: seed of every split and subsample drawn by ``bench`` (the estimators use --random-state)
SPLIT_SEED = 0
DEMO_NAMES = {"demo": "demo", "demo_regression": "demo_regression",
              "demo-regression": "demo_regression"}


#: the backends' names (as cakernels.backends.BACKEND_NAMES, without importing NumPy)
BACKENDS = ("serial", "threads", "mpi")


class CLIError(Exception):
    """A user error: reported as one line, exit status 2."""


# --------------------------------------------------------------------------- helpers


def _one_line(text):
    return " ".join(str(text).split())


def _error_message(exc):
    if isinstance(exc, MemoryError):
        return (f"out of memory ({_one_line(exc) or 'MemoryError'}); "
                "use fewer samples or more partitions")
    msg = _one_line(exc)
    if isinstance(exc, (CLIError, ValueError, OSError, ImportError)) and msg:
        return msg
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"{PROG}: warning: {_one_line(message)} ({category.__name__})",
          file=sys.stderr if file is None else file)


def _note(text):
    print(f"{PROG}: note: {text}", file=sys.stderr)


def _warn(text):
    print(f"{PROG}: warning: {text}", file=sys.stderr)


def _task_of_method(method):
    return "classification" if method in CLASSIFICATION_METHODS else "regression"


def _task_of_registry(task):
    return "regression" if task == "regression" else "classification"


def _fmt_value(v):
    """A target value as a user wrote it: ``-1``, ``46``, ``0.5``."""
    v = float(v)
    return str(int(v)) if v.is_integer() else repr(v)


def _value_list(values, limit=6):
    shown = ", ".join(_fmt_value(v) for v in values[:limit])
    return shown + (", ..." if len(values) > limit else "")


def _whole_numbers(values):
    import numpy as np

    return bool(np.all(np.isfinite(values)) and np.all(values == np.round(values)))


def _infer_task(y):
    """``(task, reason)``: does a LIBSVM file hold class labels or regression targets?

    Class labels are whole numbers that take 2 distinct values, at most
    ``MAX_CLASS_CODES`` of them, or form the contiguous class codes ``0..K`` or
    ``1..K`` with at most half as many values as samples (letter, sector, aloi).
    Anything else is a regression target: real values, or whole numbers with many
    distinct values and gaps (cpusmall, cadata, abalone) or a range that class codes
    do not take (years 1922..2011). ``reason`` completes "its targets take ...".
    """
    import numpy as np

    y = np.asarray(y, dtype=np.float64)
    values = np.unique(y)
    k = values.size
    count = f"its targets take {_fmt_int(k)} distinct value{'' if k == 1 else 's'}"
    if not _whole_numbers(values):
        return "regression", f"{count}, not all whole numbers"
    if k <= MAX_CLASS_CODES:
        return "classification", f"{count} ({_value_list(values)})"
    lo, hi = float(values[0]), float(values[-1])
    if hi - lo + 1 != k:
        why = "not a contiguous range of class codes"
    elif lo not in (0.0, 1.0):
        why = f"the range {_fmt_value(lo)}..{_fmt_value(hi)}, which class codes do not take"
    elif 2 * k > y.size:
        why = f"{_fmt_value(lo)}..{_fmt_value(hi)}, too many for class codes of {_fmt_int(y.size)} samples"
    else:
        return "classification", f"{count}, the class codes {_fmt_value(lo)}..{_fmt_value(hi)}"
    return "regression", f"{count} (whole numbers, {why})"


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _check_output(path):
    """The output ``path`` as a Path, or a CLIError when it cannot be written there."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise CLIError(f"cannot write {path}: it is a directory")
    if not path.parent.is_dir():
        raise CLIError(f"cannot write {path}: the folder {path.parent} does not exist")
    return path


def _atomic_write(path, write, binary):
    """Write ``path`` through a temporary file in the same folder and ``os.replace``."""
    path = _check_output(path)
    folder = path.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise CLIError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def _fmt_int(n):
    return f"{int(n):,}"


# --------------------------------------------------------------------------- data


class _Data:
    """Loaded samples and what is known about them."""

    def __init__(self, X, y, label, task, kind, name=None, *, reason=None, index_base=None,
                 read=None):
        self.X = X
        self.y = y
        self.label = label      # for messages
        self.task = task        # 'classification' or 'regression'
        self.kind = kind        # 'file', 'registry' or 'demo'
        self.name = name        # registry / demo name
        self.reason = reason    # why a file's task was inferred ("its targets take ...")
        self.index_base = index_base  # 0 or 1 for LIBSVM data, None when it has none
        self.read = read        # a file: what the reader found (see datasets._parse_svmlight)


def _load_demo(name):
    from .datasets import load_demo, load_demo_regression

    if name == "demo":
        X, y = load_demo(return_X_y=True)
        return _Data(X, y, "demo (breast cancer, shipped with scikit-learn)", "classification",
                     "demo", "demo")
    X, y = load_demo_regression(return_X_y=True)
    return _Data(X, y, "demo_regression (diabetes, shipped with scikit-learn)", "regression",
                 "demo", "demo_regression")


def _registry_info(spec):
    """``(info, subset)`` of a registry spec ``name`` or ``name:subset``, or raise CLIError."""
    from .datasets import dataset_info

    name, _, subset = spec.partition(":")
    try:
        info = dataset_info(name)
    except ValueError as exc:
        if os.sep in spec or "/" in spec:
            raise CLIError(f"no such file: {spec}") from None
        raise CLIError(f"{spec!r} is neither an existing file nor a known dataset: "
                       f"{_one_line(exc)}") from None
    return info, (subset or None)


def _int32_indices(X):
    """CSR with 32-bit indices: scikit-learn's LIBSVM reader gives int64 indices, which
    SVC refuses (the partitioned SVMs narrow them themselves)."""
    import scipy.sparse as sp

    from .partition import _int32_indices as narrow

    return narrow(X.tocsr()) if sp.issparse(X) else X


def _registry_index_base(info, filenames):
    """1 when a registry dataset was read from LIBSVM files (one-based, as every file on
    the LIBSVM site), None when from tables (their columns have no index base)."""
    from .datasets import get_data_home

    home = get_data_home()
    tables = {os.path.normcase(str(home / loc["path"])) for loc in info["local"]
              if not loc["format"].startswith("libsvm")}
    files = [filenames] if isinstance(filenames, str) else list(filenames)
    return None if any(os.path.normcase(str(f)) in tables for f in files) else 1


def _load_data(spec, *, split, download=True, index_base=None):
    """Load DATA: a LIBSVM file (if the path exists), ``demo``, or a registry name[:subset].

    ``split`` is the default subset of a registry dataset: ``'train'``, or ``'test'``
    (falls back to the train split, with a note, when there is no official test split).
    ``index_base`` reads a LIBSVM file with that feature-index base (entries with index
    0 in a file read one-based are dropped and counted in ``data.read``); None decides
    it from the file (zero-based when index 0 occurs in it).
    """
    from .datasets import _parse_svmlight, load_dataset

    path = Path(spec).expanduser()
    if path.exists():
        if path.is_dir():
            raise CLIError(f"{spec}: is a directory, not a LIBSVM file")
        zero_based = "auto" if index_base is None else index_base == 0
        read = _parse_svmlight(path, zero_based=zero_based, index_0="drop")
        task, reason = _infer_task(read.y)
        return _Data(_int32_indices(read.X), read.y, str(path), task, "file", reason=reason,
                     index_base=read.index_base, read=read)
    if spec.lower() in DEMO_NAMES:
        return _load_demo(DEMO_NAMES[spec.lower()])
    info, subset = _registry_info(spec)
    if subset is None:
        subset = split
        if split == "test" and info.get("n_test") is None:
            print(f"{PROG}: note: {info['name']} has no official test split; using its train split",
                  file=sys.stderr)
            subset = "train"
    bunch = load_dataset(info["name"], subset=subset, download_if_missing=download)
    return _Data(_int32_indices(bunch.data), bunch.target, f"{info['name']} ({subset})",
                 _task_of_registry(info["task"]), "registry", info["name"],
                 index_base=_registry_index_base(info, bunch.filename))


def _match_features(data, n_features, index_base=None):
    """Give a prediction set the model's feature count (LIBSVM files may end early)."""
    import numpy as np
    import scipy.sparse as sp

    d = data.X.shape[1]
    if d == n_features:
        return data.X
    if (d == n_features + 1 and data.kind == "file" and index_base == 0
            and not data.read.uses_index_0):
        raise CLIError(
            f"{data.label} uses feature index {n_features} but never index 0: it looks "
            f"one-based, but the model was trained on a zero-based file (features 0.."
            f"{n_features - 1}); write it zero-based like the training file"
        )
    if d > n_features:
        raise CLIError(
            f"{data.label} has {d} features but the model was trained on {n_features}; "
            "it was not trained on data like this"
        )
    if data.kind != "file":
        raise CLIError(f"{data.label} has {d} features but the model was trained on {n_features}")
    # a LIBSVM file only lists the features it uses: the missing trailing ones are zero
    X = data.X
    if sp.issparse(X):
        X = X.tocsr()
        return _int32_indices(sp.csr_matrix((X.data, X.indices, X.indptr),
                                            shape=(X.shape[0], n_features)))
    return np.hstack([X, np.zeros((X.shape[0], n_features - d))])


# --------------------------------------------------------------------------- estimators


def _given(args, *names):
    return [n for n in names if getattr(args, n, None) is not None]


_FLAG = {"C": "--C", "gamma": "--gamma", "sigma": "--sigma", "lam": "--lam",
         "n_partitions": "--n-partitions"}


def _verb(items):
    return "applies" if len(items) == 1 else "apply"


def _flags(names):
    return "/".join(_FLAG[n] for n in names)


def _options_task(args):
    """``(task, names)`` chosen by the estimator options given: --sigma/--lam are kernel
    ridge options (regression), --C/--gamma SVM options (classification); ``(None, [])``
    when neither kind is given. Both kinds at once are an error."""
    krr, svm = _given(args, "sigma", "lam"), _given(args, "C", "gamma")
    if krr and svm:
        raise CLIError(f"{_flags(svm)} (SVM) and {_flags(krr)} (kernel ridge) cannot be combined: "
                       "give the options of one kind of method (they choose the kind when "
                       "no method is given)")
    if krr:
        return "regression", krr
    if svm:
        return "classification", svm
    return None, []


#: (what a task's options choose, how to choose the other task) in ``fit`` and ``bench``
_CHOICES = {
    "fit": {"classification": ("an SVM (casvc)", "an SVM --method", "train a classifier"),
            "regression": ("kernel ridge regression (bkrr2)", "a kernel ridge --method",
                           "fit a regressor")},
    "bench": {"classification": ("the SVM methods", "SVM --methods", "compare classifiers"),
              "regression": ("the kernel ridge methods", "kernel ridge --methods",
                             "compare regressors")},
}


def _choose_task(data, args, command, methods=()):
    """The task when no single --method fixes it: --task; a registry dataset's or a
    demo's own task; for a LIBSVM file, the kind of the --methods given, then of the
    options given (--sigma/--lam or --C/--gamma), then the task inferred from its
    targets. For a file, one stderr note says what was inferred and why."""
    if args.task is not None:
        return args.task
    if data.kind != "file":
        return data.task  # known: options of the other kind are rejected by _check_options
    kinds = {_task_of_method(m) if m in METHODS else "regression" for m in methods}
    if len(kinds) == 1:
        return kinds.pop()
    option_task, given = _options_task(args)
    choices = _CHOICES[command]
    if option_task is not None and option_task != data.task:
        if option_task == "classification":  # continuous targets: one error, no note
            _check_class_labels(data.label, data.y, f"chosen by {_flags(given)}", command)
        _note(f"{data.label}: {_flags(given)} {'chooses' if len(given) == 1 else 'choose'} "
              f"{choices[option_task][0]}, although {data.task} was inferred: {data.reason}")
        return option_task
    other = "regression" if data.task == "classification" else "classification"
    hint = ""
    if other == "regression" or _whole_numbers(data.y):  # real values cannot be class labels
        hint = f"; use --task {other} (or {choices[other][1]}) to {choices[other][2]}"
    _note(f"{data.label}: {data.task} inferred: {data.reason}{hint}")
    return data.task


def _check_class_labels(label, y, chooser, command="fit"):
    """A classifier needs class labels: continuous targets are one clear error (instead
    of scikit-learn's "Unknown label type")."""
    import numpy as np

    values = np.unique(np.asarray(y, dtype=np.float64))
    if _whole_numbers(values):
        return
    how = ("--method bkrr2, or --sigma/--lam without --method" if command == "fit" else
           "the default methods of bench for these targets, or --methods bkrr2")
    raise CLIError(f"cannot train a classifier ({chooser}) on {label}: its targets are continuous "
                   f"({_fmt_int(values.size)} distinct values, not all whole numbers) and a "
                   f"classifier needs class labels; kernel ridge regression fits them (e.g. {how})")


def _check_options(methods, task, args):
    """Reject options that do not apply to the chosen methods (instead of ignoring them)."""
    if task == "classification":
        bad = _given(args, "sigma", "lam")
        if bad:
            raise CLIError(f"{'/'.join(_FLAG[b] for b in bad)} {_verb(bad)} to kernel ridge "
                           "methods; the SVM methods take --C and --gamma")
    else:
        bad = _given(args, "C", "gamma")
        if bad:
            raise CLIError(f"{'/'.join(_FLAG[b] for b in bad)} {_verb(bad)} to SVM methods; the "
                           "kernel ridge methods take --sigma and --lam (gamma = 1/(2 sigma^2))")
    wrong = [m for m in methods if m in METHODS and _task_of_method(m) != task]
    if wrong:
        ok = CLASSIFICATION_METHODS if task == "classification" else REGRESSION_METHODS
        raise CLIError(f"method {wrong[0]} is for {_task_of_method(wrong[0])}, but the data is a "
                       f"{task} problem (methods for it: {', '.join(ok)})")


def _make_estimator(method, p, n_train):
    """The estimator of ``method`` with the parameters in ``p`` (None: the estimator default)."""
    from .kernel_ridge import BKRR, BKRR2, DCKRR, KKRR, KKRR2
    from .svm import BKMSVC, CASVC, CPSVC, FCFSSVC

    classes = {"casvc": CASVC, "fcfssvc": FCFSSVC, "bkmsvc": BKMSVC, "cpsvc": CPSVC,
               "dckrr": DCKRR, "kkrr": KKRR, "kkrr2": KKRR2, "bkrr": BKRR, "bkrr2": BKRR2}

    def pick(*names):
        return {n: p[n] for n in names if p.get(n) is not None}

    common = ("kernel", "n_partitions", "backend", "n_jobs", "random_state", "verbose")
    if method in SVM_METHODS:
        est = classes[method](**pick("C", "gamma", *common))
    elif method in KRR_METHODS:
        est = classes[method](**pick("sigma", "lam", *common))
    elif method == "svc":
        from sklearn.svm import SVC

        est = SVC(**pick("C", "gamma", "kernel"))
    elif method == "krr":
        from sklearn.kernel_ridge import KernelRidge

        from ._kernels import sigma_to_gamma

        sigma = 1.0 if p.get("sigma") is None else p["sigma"]
        lam = 1e-4 if p.get("lam") is None else p["lam"]
        if not sigma > 0:
            raise CLIError(f"--sigma must be > 0, got {sigma!r}")
        if not lam >= 0:
            raise CLIError(f"--lam must be >= 0, got {lam!r}")
        # the same problem as BKRR2(n_partitions=1): (K + lam n I) alpha = y
        est = KernelRidge(alpha=lam * max(n_train, 1), kernel=p.get("kernel") or "rbf",
                          gamma=sigma_to_gamma(sigma))
    else:  # pragma: no cover - argparse restricts the names
        raise CLIError(f"unknown method {method!r}")
    validate = getattr(est, "_validate_params", None)
    if validate is not None:
        validate()  # bad values fail here, before any data is loaded
    return est


def _large_cholesky_guard(method, n):
    """Context for fitting ``method`` on ``n`` samples: scikit-learn's KernelRidge on
    16,000 or more samples gets one BLAS thread when the loaded OpenBLAS uses its
    SkylakeX kernels, which crash in multi-threaded Cholesky factorizations of that
    size (the package's own KRR guards its factorizations itself, see ``_blas``)."""
    from ._blas import LARGE_CHOLESKY, cholesky_guard, risky_openblas

    if method != "krr" or n < LARGE_CHOLESKY:
        return contextlib.nullcontext()
    if risky_openblas():
        print(f"{PROG}: note: KernelRidge on {_fmt_int(n)} samples factors its kernel matrix "
              "with one BLAS thread: OpenBLAS' SkylakeX kernels crash in multi-threaded "
              "Cholesky factorizations of 16,000 or more rows (start with "
              "OPENBLAS_CORETYPE=Haswell to keep every thread)", file=sys.stderr)
        sys.stderr.flush()
    return cholesky_guard(n)


def _estimator_params(args):
    return {k: getattr(args, k, None) for k in
            ("C", "gamma", "kernel", "sigma", "lam", "n_partitions", "backend", "n_jobs",
             "random_state", "verbose")}


def _n_partitions_of(est):
    return len(est.estimators_) if hasattr(est, "estimators_") else 1


def _n_support_of(est):
    if hasattr(est, "n_support_total_"):
        return est.n_support_total_
    if hasattr(est, "support_"):
        return int(est.support_.size)
    return None


# --------------------------------------------------------------------------- model files


def _load_model(path):
    path = Path(path).expanduser()
    if not path.exists():
        raise CLIError(f"no such model file: {path}")
    if path.is_dir():
        raise CLIError(f"{path}: is a directory, not a model file")
    try:
        with open(path, "rb") as fh:
            payload = pickle.load(fh)
    except OSError:
        raise
    except Exception as exc:
        raise CLIError(f"{path} is not a cakernels model file (unpickling failed: "
                       f"{_error_message(exc)})") from None
    if not (isinstance(payload, dict) and payload.get("format") == MODEL_FORMAT
            and "estimator" in payload and isinstance(payload.get("metadata"), dict)):
        raise CLIError(f"{path} is not a cakernels model file (write one with `cakernels fit`)")
    version = payload.get("format_version")
    if not isinstance(version, int) or version > MODEL_FORMAT_VERSION:
        raise CLIError(f"{path}: model format version {version!r} is newer than this cakernels "
                       f"reads ({MODEL_FORMAT_VERSION}); upgrade cakernels")
    meta = payload["metadata"]
    from ._version import __version__

    if meta.get("cakernels_version") != __version__:
        print(f"{PROG}: warning: {path} was written by cakernels {meta.get('cakernels_version')}, "
              f"this is {__version__}", file=sys.stderr)
    return payload["estimator"], meta


# --------------------------------------------------------------------------- info


def _cmd_info(args):
    from ._info import build_info
    from .datasets import ENV_VAR, get_data_home

    info = build_info()
    rows = [
        ("cakernels", info["cakernels"]),
        ("python", info["python"]),
        ("platform", info["platform"]),
        ("numpy", info["numpy"]),
        ("scipy", info["scipy"]),
        ("scikit-learn", info["scikit-learn"]),
        ("OpenMP", f"yes, {info['omp_max_threads']} threads" if info["openmp"]
         else "no (native module built without OpenMP)"),
        ("CPU cores", str(info["cpu_count"])),
        ("native module", info["native_module"]),
    ]
    blas = info["blas"] or ["none found by threadpoolctl"]
    rows += [("BLAS" if i == 0 else "", b) for i, b in enumerate(blas)]
    mpi = info["mpi4py"]
    rows.append(("MPI", f"mpi4py {mpi} importable" if mpi else
                 "not available (mpi4py not importable; pip install cakernels[mpi])"))
    for mod, extra in (("pooch", "datasets"), ("tqdm", "progress")):
        try:
            from importlib.metadata import version

            rows.append((mod, version(mod)))
        except Exception:
            rows.append((mod, f"not installed (pip install cakernels[{extra}])"))
    home = get_data_home()
    source = f"from {ENV_VAR}" if os.environ.get(ENV_VAR) else f"default; set {ENV_VAR} to change"
    exists = "exists" if home.is_dir() else "does not exist"
    rows.append(("data home", f"{home} ({source}; {exists})"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0


# --------------------------------------------------------------------------- fit


def _cmd_fit(args):
    import numpy as np
    import scipy.sparse as sp

    from ._version import __version__

    params = _estimator_params(args)
    method = args.method
    if method is not None:
        task = _task_of_method(method)
        if args.task is not None and args.task != task:
            raise CLIError(f"--method {method} is for {task}, but --task {args.task} was given")
        _check_options([method], task, args)
        if method in ("svc", "krr") and args.n_partitions is not None:
            raise CLIError(f"--n-partitions does not apply to --method {method} "
                           "(the scikit-learn baseline has no partitions)")
        _make_estimator(method, params, 1)  # validate parameters before loading data
    else:
        option_task, _ = _options_task(args)  # both kinds: an error before loading the data
        if args.task is not None:
            _check_options([DEFAULT_METHOD[args.task]], args.task, args)
        # bad values fail before the data is loaded (and before any note on it)
        for candidate in [args.task or option_task] if (args.task or option_task) else TASKS:
            _make_estimator(DEFAULT_METHOD[candidate], params, 1)
    _check_output(args.output)  # before spending time on the data and the fit
    data = _load_data(args.data, split="train")
    if method is None:
        task = _choose_task(data, args, "fit")
        method = DEFAULT_METHOD[task]
        _check_options([method], task, args)
        chosen = f" (default for {task}; choose with --method)"
        chooser = ("--task classification" if args.task is not None else
                   f"chosen by {_flags(_given(args, 'C', 'gamma'))}"
                   if _given(args, "C", "gamma") else f"{method}, the default")
    else:
        chosen = ""
        chooser = f"--method {method}"
    if task == "classification":
        _check_class_labels(data.label, data.y, chooser)
    if data.kind == "file" and data.index_base == 0:
        n0, n = data.read.rows_with_index_0, data.X.shape[0]
        _note(f"{data.label}: read zero-based (feature indices from 0): index 0 occurs in "
              f"{_fmt_int(n0)} of {_fmt_int(n)} rows; the model reads prediction files "
              "zero-based too (if the file is one-based, as LIBSVM files are, remove its 0: "
              "entries: they shift every feature by one)")
    X, y = data.X, data.y
    est = _make_estimator(method, params, X.shape[0])
    sparse = sp.issparse(X)
    model = est
    if args.standardize:
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import StandardScaler

        model = Pipeline([("standardscaler", StandardScaler(with_mean=not sparse)),
                          (method, est)])
    t0 = time.perf_counter()
    with _large_cholesky_guard(method, X.shape[0]):
        model.fit(X, y)
    fit_seconds = time.perf_counter() - t0
    import sklearn

    meta = {
        "method": method,
        "estimator": type(est).__name__,
        "task": _task_of_method(method),
        "cakernels_version": __version__,
        "sklearn_version": sklearn.__version__,
        "n_features": int(X.shape[1]),
        "n_samples": int(X.shape[0]),
        # how LIBSVM prediction files are read: 0 or 1, None (tables, demos) decides per file
        "index_base": data.index_base,
        "sparse_input": bool(sparse),
        "standardization": ({"scaler": "StandardScaler", "with_mean": not sparse}
                            if args.standardize else None),
        "data": args.data,
        "fit_seconds": fit_seconds,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if meta["task"] == "classification":
        meta["classes"] = np.unique(y).tolist()
    payload = {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION,
               "metadata": meta, "estimator": model}
    _atomic_write(args.output, lambda fh: pickle.dump(payload, fh, protocol=5), binary=True)
    extra = []
    if method not in ("svc", "krr"):
        extra.append(f"{_n_partitions_of(est)} partitions")
    nsv = _n_support_of(est)
    if nsv is not None:
        extra.append(f"{_fmt_int(nsv)} support vectors")
    if args.standardize:
        extra.append("standardized")
    extra = extra or ["no partitions"]
    print(f"{type(est).__name__}{chosen}: fitted on {_fmt_int(X.shape[0])} samples x "
          f"{X.shape[1]} features in {fit_seconds:.2f} s ({', '.join(extra)}); "
          f"saved to {args.output}")
    return 0


# --------------------------------------------------------------------------- predict / evaluate


def _prediction_lines(pred, task):
    import numpy as np

    pred = np.asarray(pred)
    if pred.dtype.kind not in "fiu":
        fmt = str
    else:
        pred = pred.astype(np.float64)
        integral = np.all(np.isfinite(pred)) and np.all(pred == np.round(pred))
        # class labels as integers ("-1", "1"); real values in the shortest exact form
        fmt = (lambda v: str(int(v))) if task == "classification" and integral else \
            (lambda v: repr(float(v)))
    if pred.ndim == 1:
        return [fmt(v) for v in pred]
    return [" ".join(fmt(v) for v in row) for row in pred]


def _predict_data(args):
    """The model and DATA read as the model's training data was: a LIBSVM file with the
    training file's index base (models without ``index_base`` decide it per file)."""
    model, meta = _load_model(args.model)
    base = meta.get("index_base")
    data = _load_data(args.data, split="test", index_base=base)
    n_features = int(meta["n_features"])
    dropped = data.read.dropped_index_0 if data.read is not None else 0
    if dropped:
        rows = data.X.shape[0]
        _warn(f"{data.label}: feature index 0 occurs in {_fmt_int(dropped)} of {_fmt_int(rows)} "
              f"rows, but the model was trained on a one-based file (features 1..{n_features}): "
              f"{'that entry was' if dropped == 1 else f'those {_fmt_int(dropped)} entries were'} "
              "dropped (if this file is zero-based, every feature is shifted by one for this "
              "model)")
    X = _match_features(data, n_features, base)
    return model, meta, data, X


def _label_desc(values):
    k = len(values)
    return _value_list(values) if k <= 6 else f"{_fmt_int(k)} distinct values: {_value_list(values)}"


def _check_labels(model, meta, data, command):
    """A classifier's DATA with labels that are not classes of the model. ``evaluate``
    refuses data none of whose labels is a class (its accuracy would be 0) or whose
    labels are as many as the classes but not the same (coded differently: 0/1 or 1/2
    for -1/+1, 0..9 for 1..10), and warns when only some labels are unseen; ``predict``
    (which ignores the labels) warns in every case."""
    import numpy as np

    if meta.get("task") != "classification":
        return
    classes = meta.get("classes")
    if classes is None:
        classes = getattr(model, "classes_", None)
    if classes is None:
        return
    classes = np.unique(np.asarray(classes, dtype=np.float64))
    y = np.asarray(data.y, dtype=np.float64)
    unseen = ~np.isin(y, classes)
    n_unseen = int(np.count_nonzero(unseen))
    if not n_unseen:
        return
    labels, new = np.unique(y), np.unique(y[unseen])
    counts = f"{_fmt_int(n_unseen)} of {_fmt_int(y.size)} samples"
    if n_unseen == y.size:
        msg = (f"{data.label}: none of its labels ({_label_desc(labels)}) is a class of the "
               f"model ({_label_desc(classes)})")
        wrong = "every sample would count as wrong"
    elif labels.size == classes.size:
        msg = (f"{data.label}: its labels ({_label_desc(labels)}) are not the classes of the "
               f"model ({_label_desc(classes)}): {counts} have labels it never saw "
               f"({_label_desc(new)})")
        wrong = "those would all count as wrong"
    else:
        _warn(f"{data.label}: {counts} have labels the model never saw ({_label_desc(new)}; its "
              f"classes: {_label_desc(classes)})"
              + (": they count as errors in the accuracy" if command == "evaluate"
                 else "; predict ignores the labels"))
        return
    if command == "evaluate":
        raise CLIError(f"{msg}; {wrong} (labels coded differently, e.g. "
                       "0/1 for -1/+1, or not the data the model was trained for?)")
    _warn(f"{msg}; predict ignores the labels, but check that this is the right file")


def _cmd_predict(args):
    model, meta, data, X = _predict_data(args)
    _check_labels(model, meta, data, "predict")
    pred = model.predict(X)
    text = "\n".join(_prediction_lines(pred, meta.get("task"))) + "\n"
    if args.output in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        _atomic_write(args.output, lambda fh: fh.write(text), binary=False)
    return 0


def _cmd_evaluate(args):
    import numpy as np

    model, meta, data, X = _predict_data(args)
    _check_labels(model, meta, data, "evaluate")
    t0 = time.perf_counter()
    pred = model.predict(X)
    seconds = time.perf_counter() - t0
    y = data.y
    print(f"model:      {meta.get('estimator', '?')} ({meta.get('method')}), trained on "
          f"{_fmt_int(meta.get('n_samples', 0))} samples x {meta['n_features']} features"
          + (", standardized" if meta.get("standardization") else ""))
    print(f"data:       {data.label}: {_fmt_int(X.shape[0])} samples")
    if meta.get("task") == "classification":
        acc = float(np.mean(pred == y))
        print(f"accuracy:   {acc:.4f} ({_fmt_int(int(np.sum(pred == y)))}/{_fmt_int(y.size)})")
    else:
        from sklearn.metrics import mean_squared_error, r2_score

        print(f"MSE:        {mean_squared_error(y, pred):.6g}")
        r2 = f"{r2_score(y, pred):.4f}" if y.size > 1 else "n/a (one sample)"
        print(f"R^2:        {r2}")
    print(f"predict:    {seconds:.3f} s")
    return 0


# --------------------------------------------------------------------------- bench


def _subsample(X, y, n, rng):
    """At most ``n`` random rows, in their original order."""
    import numpy as np

    if n is None or n >= X.shape[0]:
        return X, y
    idx = np.sort(rng.choice(X.shape[0], size=n, replace=False))
    return X[idx], y[idx]


def _split(X, y, train_fraction, max_train, max_test):
    """Fixed random split: at most ``train_fraction`` (and ``max_train``) for training."""
    import numpy as np

    n = X.shape[0]
    if n < 2:
        raise CLIError(f"cannot split {n} sample into a training and a test set")
    rng = np.random.RandomState(SPLIT_SEED)
    perm = rng.permutation(n)
    n_train = max(1, min(int(math.floor(train_fraction * n)), max_train or n, n - 1))
    tr, te = np.sort(perm[:n_train]), np.sort(perm[n_train:])
    Xte, yte = _subsample(X[te], y[te], max_test, rng)
    return X[tr], y[tr], Xte, yte


def _bench_data(args):
    """Load and prepare the bench dataset; returns a dict and prints the fallback line."""
    import numpy as np
    import scipy.sparse as sp

    from .datasets import get_data_home, load_dataset

    spec = args.dataset
    if args.demo:
        if spec is not None and spec.lower() != "demo":
            raise CLIError("give either a DATASET or --demo, not both")
        spec = "demo"
    fallback = loaded = None
    if spec is None:
        # the default dataset is only looked up locally: never download without being asked
        try:
            Xtr, ytr = load_dataset("ijcnn1", subset="train", download_if_missing=False,
                                    return_X_y=True)
            Xte, yte = load_dataset("ijcnn1", subset="test", download_if_missing=False,
                                    return_X_y=True)
            spec = "ijcnn1"
            loaded = (Xtr, ytr, Xte, yte)
        except FileNotFoundError:
            fallback = (f"{PROG}: ijcnn1 is not in the data home {get_data_home()} (downloads "
                        "are tried only for a named dataset: `cakernels bench ijcnn1`); using the "
                        "breast cancer dataset shipped with scikit-learn instead")
            spec = "demo"

    rng = np.random.RandomState(SPLIT_SEED)
    out = {"standardize_X": False, "standardize_y": False, "n_partitions": 8,
           "C": None, "gamma": None, "note": fallback}
    given = _given_methods(args)
    if not given:
        _options_task(args)  # both kinds of options: an error before the data is loaded
    path = Path(spec).expanduser()
    if path.exists() and not path.is_dir():
        data = _load_data(spec, split="train")
        task = _choose_task(data, args, "bench", given or ())
        out.update(name=str(path), task=task, desc=f"{path} (fixed random 80/20 split)")
        _check_options(_bench_methods(args, task), task, args)
        Xtr, ytr, Xte, yte = _split(data.X, data.y, 0.8, args.max_train, args.max_test)
        out["standardize_X"] = task == "regression"
    elif spec.lower() in DEMO_NAMES:
        data = _load_demo(DEMO_NAMES[spec.lower()])
        out.update(name=data.name, task=args.task or data.task,
                   desc=f"{data.label}, fixed random 70/30 split", n_partitions=4,
                   standardize_X=True)
        Xtr, ytr, Xte, yte = _split(data.X, data.y, 0.7, args.max_train, args.max_test)
    else:
        info, subset = _registry_info(spec)
        if subset is not None:
            raise CLIError(f"bench takes a dataset name without a subset, got {spec!r}")
        name = info["name"]
        task = args.task or _task_of_registry(info["task"])
        out.update(name=name, task=task)
        if name == "ijcnn1":
            out.update(n_partitions=16, C=32.0, gamma=2.0)
        if task == "regression":
            out["standardize_X"] = True
        if name == "cadata":
            out["standardize_y"] = True
        # options are checked before the (possibly long) load
        _check_options(_bench_methods(args, task), task, args)
        if info.get("n_test") is not None:
            if loaded is None:
                Xtr, ytr = load_dataset(name, subset="train", return_X_y=True)
                Xte, yte = load_dataset(name, subset="test", return_X_y=True)
            else:
                Xtr, ytr, Xte, yte = loaded
            Xtr, Xte = _int32_indices(Xtr), _int32_indices(Xte)
            Xtr, ytr = _subsample(Xtr, ytr, args.max_train, rng)
            Xte, yte = _subsample(Xte, yte, args.max_test, rng)
            out["desc"] = f"{name}, official train/test split"
        else:
            X, y = load_dataset(name, subset="train", return_X_y=True)
            X = _int32_indices(X)
            max_train = args.max_train
            if max_train is None and name == "cadata":
                max_train = 16000
            Xtr, ytr, Xte, yte = _split(X, y, 0.8, max_train, args.max_test)
            out["desc"] = f"{name}, fixed random split (no official test split)"
    if out["task"] == "classification":
        svm = _given(args, "C", "gamma")
        chooser = ("--task classification" if args.task is not None else
                   f"--methods {' '.join(given)}" if given else
                   f"chosen by {_flags(svm)}" if svm else "the default methods")
        _check_class_labels(out["name"], np.concatenate([ytr, yte]), chooser, "bench")
    if out["standardize_X"]:
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler(with_mean=not sp.issparse(Xtr)).fit(Xtr)
        Xtr, Xte = scaler.transform(Xtr), scaler.transform(Xte)
    if out["standardize_y"]:
        mean, std = float(ytr.mean()), float(ytr.std()) or 1.0
        ytr, yte = (ytr - mean) / std, (yte - mean) / std
    out.update(Xtr=Xtr, ytr=ytr, Xte=Xte, yte=yte)
    return out


def _given_methods(args):
    """The --methods of ``bench`` (validated names, in order), or None."""
    if not args.methods:
        return None
    methods = []
    for item in args.methods:
        for m in item.split(","):
            m = m.strip().lower()
            if m and m not in methods:
                methods.append(m)
    known = set(METHODS) | set(ORACLE_METHODS)
    bad = [m for m in methods if m not in known]
    if bad:
        raise CLIError(f"unknown method {bad[0]!r} (choose from {', '.join(METHODS)}, "
                       f"{', '.join(ORACLE_METHODS)})")
    if not methods:
        raise CLIError("--methods is empty")
    return methods


def _bench_methods(args, task):
    methods = _given_methods(args)
    if methods:
        for m in methods:
            if m in ORACLE_METHODS and task != "regression":
                raise CLIError(f"{m} is an oracle bound of kernel ridge regression, "
                               "not available for classification")
        return methods
    if task == "classification":
        return list(CLASSIFICATION_METHODS)
    return ["dckrr", "kkrr", "kkrr2", "bkrr", "bkrr2", "bkrr3", "kkrr3", "krr"]


_NAMES = {"casvc": "CASVC", "fcfssvc": "FCFSSVC", "bkmsvc": "BKMSVC", "cpsvc": "CPSVC",
          "svc": "SVC", "dckrr": "DCKRR", "kkrr": "KKRR", "kkrr2": "KKRR2", "bkrr": "BKRR",
          "bkrr2": "BKRR2", "bkrr3": "BKRR3", "kkrr3": "KKRR3", "krr": "KernelRidge"}


def _secs(seconds):
    return f"{seconds:.3f}" if seconds < 1 else f"{seconds:.2f}"


class _Table:
    def __init__(self, task):
        self.task = task
        cols = [("method", 11, "<"), ("partitions", 10, ">"), ("fit s", 8, ">"),
                ("predict s", 9, ">"),
                ("accuracy" if task == "classification" else "test MSE", 10, ">")]
        if task == "classification":
            cols.append(("#SV", 8, ">"))
        cols.append(("fit speedup", 11, ">"))
        self.cols = cols

    def line(self, values):
        return "  ".join(f"{v:{align}{w}}" for v, (_, w, align) in zip(values, self.cols)).rstrip()

    def header(self):
        print(self.line([c[0] for c in self.cols]))
        print(self.line(["-" * c[1] for c in self.cols]))
        sys.stdout.flush()

    def row(self, method, parts, fit_s, pred_s, score, nsv, speedup):
        vals = [method, str(parts), "-" if fit_s is None else _secs(fit_s), _secs(pred_s),
                f"{score:.4f}" if self.task == "classification" else f"{score:.4g}"]
        if self.task == "classification":
            vals.append("-" if nsv is None else _fmt_int(nsv))
        vals.append("-" if speedup is None else f"{speedup:.2f}x")
        print(self.line(vals))
        sys.stdout.flush()


def _cmd_bench(args):
    data = _bench_data(args)
    task = data["task"]
    methods = _bench_methods(args, task)
    _check_options(methods, task, args)
    params = _estimator_params(args)
    for key in ("n_partitions", "C", "gamma"):
        if params[key] is None and data.get(key) is not None:
            params[key] = data[key]
    if params["n_partitions"] is None:
        params["n_partitions"] = data["n_partitions"]
    Xtr, ytr, Xte, yte = data["Xtr"], data["ytr"], data["Xte"], data["yte"]
    n_train, d = Xtr.shape
    if task == "regression":
        if params["sigma"] is None:
            # as SVC's gamma='scale' on standardized features: gamma = 1/d
            params["sigma"] = math.sqrt(d / 2.0)
        if params["lam"] is None:
            params["lam"] = 1e-5
    baseline = "svc" if task == "classification" else "krr"
    run = [m for m in methods if m not in ORACLE_METHODS]
    for oracle, base in ORACLE_METHODS.items():
        if oracle in methods and base not in run:
            run.append(base)
    # the scikit-learn baseline runs first so that every row can show its speedup
    run.sort(key=lambda m: m != baseline)
    # validate every estimator's parameters before spending time on fits
    for m in run:
        _make_estimator(m, params, n_train)

    if data["note"]:
        print(data["note"])
    scale = ("X standardized" if data["standardize_X"] else "X as stored") + \
            (", y standardized by the training mean/std" if data["standardize_y"] else "")
    print(f"dataset:    {data['desc']}: {_fmt_int(n_train)} train / {_fmt_int(Xte.shape[0])} test, "
          f"{d} features, {task}; {scale}")
    if task == "classification":
        gamma = "scale" if params["gamma"] is None else params["gamma"]
        kp = f"C={1.0 if params['C'] is None else params['C']:g} " + \
             (f"gamma={gamma:g}" if isinstance(gamma, float) else f"gamma={gamma}")
    else:
        kp = f"sigma={params['sigma']:.4g} lam={params['lam']:g}"
    kernel = params["kernel"] or "rbf"
    print(f"parameters: {kp} kernel={kernel}; {params['n_partitions']} partitions; "
          f"backend={params['backend'] or 'serial'}"
          + (f" n_jobs={params['n_jobs']}" if params["n_jobs"] is not None else "")
          + f"; random_state={params['random_state']}")
    if _HASWELL_SET_FOR_BENCH:
        print("note: OpenBLAS runs its Haswell kernels in this run (OPENBLAS_CORETYPE=Haswell, "
              "set by cakernels bench: its SkylakeX kernels crash in multi-threaded Cholesky "
              "factorizations of 16,000 or more rows); every method uses the same BLAS")
    from ._blas import LARGE_CHOLESKY, risky_openblas

    one_blas_thread = "krr" in run and n_train >= LARGE_CHOLESKY and risky_openblas()
    if one_blas_thread:
        print("note: every fit runs with one BLAS thread: OpenBLAS' SkylakeX kernels crash in "
              "multi-threaded Cholesky factorizations of 16,000 or more rows (start with "
              "OPENBLAS_CORETYPE=Haswell to use every thread)")
    with _one_blas_thread() if one_blas_thread else contextlib.nullcontext():
        _bench_warm_up(run, params, n_train, Xtr, ytr, Xte)
        return _bench_table(task, run, methods, baseline, params, n_train, Xtr, ytr, Xte, yte)


def _one_blas_thread():
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def _bench_warm_up(run, params, n_train, Xtr, ytr, Xte):
    """Pay one-off start-up costs (imports, thread pools, first calls into BLAS and the
    native module) on a small subsample of every method, before anything is timed."""
    import numpy as np

    n_warm = min(n_train, max(200, 25 * int(params["n_partitions"])))
    warm = np.random.RandomState(SPLIT_SEED).choice(n_train, n_warm, replace=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for m in run:
            with contextlib.suppress(Exception):  # e.g. too few samples for a partition
                _make_estimator(m, params, n_warm).fit(Xtr[warm], ytr[warm]).predict(Xte[:50])


def _bench_table(task, run, methods, baseline, params, n_train, Xtr, ytr, Xte, yte):
    """Fit and time every method of ``run`` and print the table (see ``_cmd_bench``)."""
    import numpy as np

    table = _Table(task)
    base_fit = None
    notes, oracles = [], []
    header_done = skipped_baseline = False
    for m in run:
        if m == "krr" and n_train ** 2 * 8 > KRR_MEMORY_BUDGET:
            print(f"note: KernelRidge skipped: its {_fmt_int(n_train)} x {_fmt_int(n_train)} "
                  f"kernel needs {n_train ** 2 * 8 / 2**30:.1f} GiB (budget "
                  f"{KRR_MEMORY_BUDGET / 2**30:.0f} GiB)")
            skipped_baseline = True
            continue
        if not header_done:
            table.header()
            header_done = True
        est = _make_estimator(m, params, n_train)
        t0 = time.perf_counter()
        est.fit(Xtr, ytr)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        pred = est.predict(Xte)
        pred_s = time.perf_counter() - t0
        if task == "classification":
            score = float(np.mean(pred == yte))
        else:
            score = float(np.mean((pred - yte) ** 2))
        if m == baseline:
            base_fit = fit_s
        speedup = base_fit / fit_s if base_fit is not None and fit_s > 0 else None
        if m in methods:
            table.row(_NAMES[m], _n_partitions_of(est), fit_s, pred_s, score,
                      _n_support_of(est) if task == "classification" else None, speedup)
        for oracle, base in ORACLE_METHODS.items():
            if base == m and oracle in methods:
                from .kernel_ridge import oracle_score

                t0 = time.perf_counter()
                mse = oracle_score(est, Xte, yte)
                table.row(_NAMES[oracle], _n_partitions_of(est), None,
                          time.perf_counter() - t0, mse, None, None)
                oracles.append(oracle)
    if not header_done:
        table.header()
    if oracles:
        names = "/".join(_NAMES[o] for o in oracles)
        bases = "/".join(_NAMES[ORACLE_METHODS[o]] for o in oracles)
        notes.append(f"{names}: oracle bound of {bases} (Algorithm 11): every test sample takes "
                     "the local model closest to its true target; an evaluation bound, not a "
                     "predictor")
    if baseline not in methods and not skipped_baseline:
        notes.append(f"fit speedup needs the scikit-learn baseline ({baseline}) in --methods")
    for note in notes:
        print(f"note: {note}")
    return 0


# --------------------------------------------------------------------------- parser


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
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
    g.add_argument("--kernel", choices=("rbf", "linear", "poly", "sigmoid"), type=str.lower,
                   help="kernel (default rbf)")
    g.add_argument("--sigma", type=float,
                   help="kernel ridge Gaussian width, gamma = 1/(2 sigma^2) "
                        + ("(default sqrt(n_features/2) on the standardized features)" if bench
                           else "(default 1)"))
    g.add_argument("--lam", type=float, help="kernel ridge parameter lambda; every part solves "
                   "(K + lam m I) alpha = y (default " + ("1e-5)" if bench else "1e-4)"))
    g.add_argument("--backend", choices=BACKENDS, help="how partitions are run (default serial)")
    g.add_argument("--n-jobs", type=int, metavar="N",
                   help="workers of the threads backend (default: all cores)")
    g.add_argument("--random-state", type=int, default=0, metavar="SEED",
                   help="seed of the partitioners (default 0)")
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
               standardized X; cadata also standardizes y and trains on 16,000 samples
               of a fixed random split (8 partitions). KernelRidge is skipped when its
               n x n kernel needs more than 8 GiB.
  FILE         a LIBSVM file, with a fixed random 80/20 split.

note: OpenBLAS' SkylakeX kernels crash in multi-threaded Cholesky factorizations of
16,000 or more rows (scikit-learn's KernelRidge on that many samples). When a run may
fit KernelRidge and OPENBLAS_CORETYPE is unset, bench sets OPENBLAS_CORETYPE=Haswell
for its own process on CPUs with AVX-512 (before NumPy loads, nothing is restarted), so
that every method runs the same, working BLAS kernels, and says so.
Every method is warmed up on a small subsample before it is timed.
Timings are wall-clock seconds of one run; other load on the machine changes them."""


def build_parser():
    from ._version import __version__

    parser = argparse.ArgumentParser(
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
                    "default subset train) and save it with pickle.")
    p.add_argument("data", metavar="DATA")
    p.add_argument("-o", "--output", required=True, metavar="MODEL", help="model file to write")
    p.add_argument("--standardize", action="store_true",
                   help="fit a StandardScaler first (with_mean=False for sparse input); saved "
                        "with the model")
    _add_estimator_options(p)
    _add_common(p)
    p.set_defaults(func=_cmd_fit)

    trust = "MODEL files are pickles: only load models you trust."
    p = sub.add_parser(
        "predict", help="write one prediction per line",
        description="Predict DATA (a LIBSVM file, 'demo', or a registry name[:subset], default "
                    "the test split) with a saved model. A LIBSVM file may have fewer features "
                    "than the training data (the missing ones are zero). " + trust)
    p.add_argument("model", metavar="MODEL")
    p.add_argument("data", metavar="DATA")
    p.add_argument("-o", "--output", metavar="OUT", help="output file (default: stdout)")
    _add_common(p)
    p.set_defaults(func=_cmd_predict)

    p = sub.add_parser(
        "evaluate", help="accuracy or MSE/R^2 of a saved model",
        description="Accuracy (classifiers) or MSE and R^2 (regressors) of a saved model on "
                    "DATA, and the prediction time. " + trust)
    p.add_argument("model", metavar="MODEL")
    p.add_argument("data", metavar="DATA")
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
                        f"{', '.join(CLASSIFICATION_METHODS)} | {', '.join(KRR_METHODS)}, "
                        "bkrr3, kkrr3, krr")
    p.add_argument("--max-train", type=_positive_int, metavar="N",
                   help="subsample the training set to N samples")
    p.add_argument("--max-test", type=_positive_int, metavar="N",
                   help="subsample the test set to N samples (default: all of it)")
    _add_estimator_options(p, bench=True)
    _add_common(p)
    p.set_defaults(func=_cmd_bench)
    return parser


#: set when ``cakernels bench`` chose OpenBLAS' Haswell kernels for its own process
_HASWELL_SET_FOR_BENCH = False


def _bench_may_factor_large(args):
    """Whether a ``bench`` run may fit scikit-learn's KernelRidge (a Cholesky of up to
    16,000 or more rows), decided from the command line alone (before NumPy loads)."""
    from ._dataset_registry import record

    if args.methods and not any(m.strip().lower() in ("krr",) + KRR_METHODS
                                + tuple(ORACLE_METHODS)
                                for item in args.methods for m in item.split(",")):
        return False
    spec = "demo" if args.demo else args.dataset
    if spec is None or spec.lower() in DEMO_NAMES:
        return False  # ijcnn1 (classification) or a small demo
    if Path(spec).expanduser().exists():
        return True  # a file: regression is possible
    try:
        return record(spec.partition(":")[0])["task"] == "regression"
    except (ValueError, TypeError):
        return False  # an unknown name: bench reports the error


def main(argv=None):
    """Run the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    if argv is None and args.command == "bench" and _bench_may_factor_large(args):
        # the real command line (never a test calling main(argv)), before NumPy loads
        from ._blas import prefer_haswell_kernels

        global _HASWELL_SET_FOR_BENCH
        _HASWELL_SET_FOR_BENCH = prefer_haswell_kernels()
    debug = getattr(args, "debug", False)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (e.g. `cakernels predict ... | head`): stop quietly
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 141
    except Exception as exc:
        if debug:
            traceback.print_exc()
        print(f"{PROG}: error: {_error_message(exc)}", file=sys.stderr)
        return 2
