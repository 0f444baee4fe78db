"""Shared pieces of the command line: errors, messages, data loading, model files."""

import contextlib
import numbers
import os
import pickle
import stat
import sys
import tempfile
from pathlib import Path

PROG = "cakernels"

#: marker and version of the model files written by ``cakernels fit``; version 2 adds the
#: metadata ``index_base`` (the feature-index base of the training file, which the
#: prediction files are read with)
MODEL_FORMAT = "cakernels-model"
MODEL_FORMAT_VERSION = 3  # 3: skops.io files (before: pickles)
#: module prefixes of the types a model file may hold beyond what skops.io trusts by
#: default (scikit-learn's estimators, NumPy arrays and builtins): this package's own
#: classes and SciPy's sparse matrices (stored as .npz members, read without pickle).
#: A name must also be a class defined there (:func:`_trusted_class`): skops resolves a
#: type's name as an attribute path, so a prefix alone would let a file name any module,
#: function or method one of these modules imports (``cakernels._cli.common.os.system``)
TRUSTED_PREFIXES = ("cakernels.", "scipy.sparse.")

TASKS = ("classification", "regression")
#: whole-number targets with at most this many distinct values are class labels
MAX_CLASS_CODES = 20

#: seed of every split and subsample drawn by ``bench`` (the estimators use --random-state)
SPLIT_SEED = 0
DEMO_NAMES = {"demo": "demo", "demo_regression": "demo_regression",
              "demo-regression": "demo_regression"}


#: the backends' names (as cakernels.backends.BACKEND_NAMES, without importing NumPy)
BACKENDS = ("serial", "threads", "mpi")


from .registry import REGISTRY  # noqa: E402


class CLIError(Exception):
    """A user error: reported as one line, exit status 2."""

# --------------------------------------------------------------------------- helpers


def _one_line(text):
    return " ".join(str(text).split())


def _error_message(exc):
    if isinstance(exc, MemoryError):
        return (f"out of memory ({_one_line(exc) or 'MemoryError'}); use fewer samples "
                "(or, for the partitioned methods, more partitions), or fewer features (a "
                "LIBSVM file has as many as its largest feature index)")
    msg = _one_line(exc)
    if isinstance(exc, (CLIError, ValueError, OSError, ImportError)) and msg:
        return msg
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


class _Run:
    """State of one command: the MPI world of a ``--backend mpi`` run (None otherwise);
    only rank 0 of it prints notes, warnings and results, and writes files."""

    mpi = None  # (mpi4py communicator, counted Communicator) under mpiexec

    @classmethod
    def quiet(cls):
        return cls.mpi is not None and cls.mpi[1].rank != 0


def _show_warning(message, category, filename, lineno, file=None, line=None):
    if not _Run.quiet():
        print(f"{PROG}: warning: {_one_line(message)} ({category.__name__})",
              file=sys.stderr if file is None else file)


@contextlib.contextmanager
def _warnings_of_every_rank(comm):
    """Around a collective step of a ``--backend mpi`` run: the warnings every rank
    raised, shown once by rank 0, each with the ranks that raised it unless all did
    (:func:`_show_warning` prints rank 0's only: a partition solved on rank 1 warned
    in the one-process fit and was silent under MPI). On an error the step's
    warnings are shown by rank 0 as they came, and no rank waits for the others."""
    import warnings

    failed = True
    with warnings.catch_warnings(record=True) as caught:
        try:
            yield
            failed = False
        finally:
            mine = list(dict.fromkeys((w.category.__name__, _one_line(w.message))
                                      for w in caught))
            if failed and not _Run.quiet():  # no collective on an error's way out
                for category, text in mine:
                    print(f"{PROG}: warning: {text} ({category})", file=sys.stderr)
    ranks = {}
    for rank, theirs in enumerate(comm.allgather(mine)):
        for key in theirs:
            ranks.setdefault(key, []).append(rank)
    if comm.rank == 0:
        for (category, text), where in ranks.items():
            on = "" if len(where) == comm.size else (
                f"; rank {where[0]}" if len(where) == 1 else f"; ranks {where}")
            print(f"{PROG}: warning: {text} ({category}{on})", file=sys.stderr)


def _note(text):
    if not _Run.quiet():
        print(f"{PROG}: note: {text}", file=sys.stderr)


def _warn(text):
    if not _Run.quiet():
        print(f"{PROG}: warning: {text}", file=sys.stderr)


def _mpi_world():
    """``(mpi4py COMM_WORLD, counted Communicator)`` for ``--backend mpi``."""
    from ..backends import Communicator
    from ..backends._backend import import_mpi

    try:
        MPI = import_mpi('--backend mpi needs mpi4py and an MPI library: pip install '
                         '"cakernels[mpi]"')
    except ImportError as exc:
        raise CLIError(str(exc)) from None

    _Run.mpi = (MPI.COMM_WORLD, Communicator(MPI.COMM_WORLD))
    return _Run.mpi[1]


def _check_mpi_launch(args, work):
    """Without ``--backend mpi``, one process: ``work`` says what every process would
    otherwise repeat."""
    if args.backend != "mpi" and _launched_by_mpiexec() > 1:
        raise CLIError(f"running under mpiexec with {_launched_by_mpiexec()} processes, but "
                       f"without --backend mpi every process would {work} and write the same "
                       "file: add --backend mpi")


def _check_n_jobs(args):
    """``--n-jobs`` sets the threads backend's workers: with another backend it
    would be ignored, so it is refused (as for the baselines)."""
    if getattr(args, "n_jobs", None) is None or args.backend == "threads":
        return
    if args.backend == "mpi":
        raise CLIError("--n-jobs does not apply to --backend mpi (one worker per rank: "
                       "choose the ranks with mpiexec -n)")
    raise CLIError(f"--n-jobs sets the workers of --backend threads; the "
                   f"{args.backend or 'serial'} backend (the default) runs one partition at a "
                   "time: add --backend threads")


def _launched_by_mpiexec():
    """Number of processes mpiexec started (from its environment), 1 without it."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"):
        value = os.environ.get(var)
        if value and value.isdigit():
            return int(value)
    return 1


def _collective(comm, func, *args, **kwargs):
    """Run a step that involves no communication on every rank; a failure on any
    rank becomes the same :class:`~cakernels.backends.CollectiveError` on every
    rank (with the lowest failing rank's message)."""
    from ..backends import CollectiveError

    try:
        result, error = func(*args, **kwargs), None
    except Exception as exc:  # reported on every rank below
        result, error = None, _error_message(exc)
    errors = comm.allgather(error)
    bad = [(r, e) for r, e in enumerate(errors) if e is not None]
    if bad:
        rank, msg = bad[0]
        raise CollectiveError(msg if rank == 0 else f"rank {rank}: {msg}")
    return result


def _task_of_method(method):
    return REGISTRY[method].task


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


def _infer_task(y, n_samples=None):
    """``(task, reason)``: does a LIBSVM file hold class labels or regression targets?

    Class labels are whole numbers that take 2 distinct values, at most
    ``MAX_CLASS_CODES`` of them, or form the contiguous class codes ``0..K`` or
    ``1..K`` with at most half as many values as samples (letter, sector, aloi).
    Anything else is a regression target: real values, or whole numbers with many
    distinct values and gaps (cpusmall, cadata, abalone) or a range that class codes
    do not take (years 1922..2011). ``reason`` completes "its targets take ...".
    ``y`` may be the distinct values only when ``n_samples`` gives the number of
    samples (the targets of all MPI ranks).
    """
    import numpy as np

    y = np.asarray(y, dtype=np.float64)
    n_samples = y.size if n_samples is None else int(n_samples)
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
    elif 2 * k > n_samples:
        why = (f"{_fmt_value(lo)}..{_fmt_value(hi)}, too many for class codes of "
               f"{_fmt_int(n_samples)} samples")
    else:
        return "classification", f"{count}, the class codes {_fmt_value(lo)}..{_fmt_value(hi)}"
    return "regression", f"{count} (whole numbers, {why})"


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _check_output(path, inputs=()):
    """The output ``path`` as a Path, or a CLIError when it cannot be written there
    or is one of the command's ``inputs`` (files it reads: writing would replace them)."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise CLIError(f"cannot write {path}: it is a directory")
    if path.parent.exists() and not path.parent.is_dir():
        raise CLIError(f"cannot write {path}: {path.parent} is a file, not a folder")
    if not path.parent.is_dir():
        raise CLIError(f"cannot write {path}: the folder {path.parent} does not exist")
    for given in inputs:
        source = Path(str(given)).expanduser()
        try:
            same = path.exists() and source.exists() and os.path.samefile(path, source)
        except OSError:
            same = False
        if same:
            raise CLIError(f"cannot write {path}: it is the input {given}, which the output "
                           "would replace; choose another output file")
    return path


def _atomic_write(path, write, binary):
    """Write ``path`` through a temporary file in the same folder and ``os.replace``.

    A symbolic link is followed (its target is replaced, the link stays), and a path
    that is not a regular file (a device such as /dev/null, a FIFO) is written
    through, never replaced by a file."""
    path = _check_output(path)
    real = Path(os.path.realpath(path))
    if real.exists() and not real.is_file():  # a device or FIFO: write into it
        try:
            with open(real, "wb" if binary else "w",
                      encoding=None if binary else "utf-8") as fh:
                write(fh)
        except OSError as exc:
            raise CLIError(f"cannot write {path}: {exc.strerror or exc}") from None
        return
    if real != path:
        path = _check_output(real)  # the link's target, in its own folder
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
        try:  # a file replaced keeps its mode (a private model stays private)
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:  # a new file: what open() would give it
            mode = 0o666 & ~_umask()
        os.chmod(tmp, mode)
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
                 read=None, files=()):
        self.X = X
        self.y = y
        self.label = label      # for messages
        self.task = task        # 'classification' or 'regression'
        self.kind = kind        # 'file', 'registry' or 'demo'
        self.name = name        # registry / demo name
        self.reason = reason    # why a file's task was inferred ("its targets take ...")
        self.index_base = index_base  # 0 or 1 for LIBSVM data, None when it has none
        self.read = read        # a file: what the reader found (see datasets._parse_svmlight)
        self.files = list(files)  # the files read (an output must not replace them)


def _load_demo(name):
    from ..datasets import load_demo, load_demo_regression

    if name == "demo":
        X, y = load_demo(return_X_y=True)
        return _Data(X, y, "demo (breast cancer, shipped with scikit-learn)", "classification",
                     "demo", "demo")
    X, y = load_demo_regression(return_X_y=True)
    return _Data(X, y, "demo_regression (diabetes, shipped with scikit-learn)", "regression",
                 "demo", "demo_regression")


def _registry_info(spec):
    """``(info, subset)`` of a registry spec ``name`` or ``name:subset``, or raise CLIError."""
    from ..datasets import dataset_info

    name, _, subset = spec.partition(":")
    if subset and name.lower() in DEMO_NAMES:
        raise CLIError(f"{spec!r}: the demo {name!r} has no subsets (it is one table); give "
                       f"it as {name!r}")
    try:
        info = dataset_info(name)
    except ValueError as exc:
        if os.sep in spec or "/" in spec:
            raise CLIError(f"no such file: {spec}") from None
        raise CLIError(f"{spec!r} is neither an existing file nor a known dataset: "
                       f"{_one_line(exc)}") from None
    return info, (subset or None)


def _int32_indices(X):
    """CSR with 32-bit indices when they hold it: scikit-learn's LIBSVM reader gives
    int64 indices, which SVC refuses; a matrix beyond 2**31 - 1 non-zeros keeps its
    64-bit indices (the native solvers take them; solver='libsvm' then says why not)."""
    import scipy.sparse as sp

    from ..partition import _int32_indices as narrow
    from ..partition._storage import INT32_LIMIT

    if not sp.issparse(X):
        return X
    X = X.tocsr()
    return narrow(X) if X.nnz <= INT32_LIMIT and X.shape[1] <= INT32_LIMIT else X


def _registry_index_base(info, filenames):
    """1 when a registry dataset was read from LIBSVM files (one-based, as every file on
    the LIBSVM site), None when from tables (their columns have no index base)."""
    from ..datasets import get_data_home

    home = get_data_home()
    tables = {os.path.normcase(str(home / loc["path"])) for loc in info["local"]
              if not loc["format"].startswith("libsvm")}
    files = [filenames] if isinstance(filenames, str) else list(filenames)
    return None if any(os.path.normcase(str(f)) in tables for f in files) else 1


def _load_data(spec, *, split, download=True, index_base=None, n_features=None):
    """Load DATA: a LIBSVM file (if the path exists), ``demo``, or a registry name[:subset].

    ``split`` is the default subset of a registry dataset: ``'train'``, or ``'test'``
    (falls back to the train split, with a note, when there is no official test split).
    ``index_base`` reads a LIBSVM file with that feature-index base (entries with index
    0 in a file read one-based are dropped and counted in ``data.read``); None decides
    it from the file (zero-based when index 0 occurs in it). ``n_features`` (``fit
    --n-features``) gives a LIBSVM file that many columns instead of its largest index.
    """
    from ..datasets import ChecksumMismatchError, _parse_svmlight, load_dataset

    path = Path(spec).expanduser()
    if n_features is not None and not path.exists():
        raise CLIError(f"--n-features applies to LIBSVM files; {spec} is not a file (a "
                       "registry dataset or the demo has its own number of features)")
    if path.exists():
        if path.is_dir():
            raise CLIError(f"{spec}: is a directory, not a LIBSVM file")
        zero_based = "auto" if index_base is None else index_base == 0
        read = _parse_svmlight(path, zero_based=zero_based, index_0="drop",
                               n_features=n_features)
        task, reason = _infer_task(read.y)
        return _Data(_int32_indices(read.X), read.y, str(path), task, "file", reason=reason,
                     index_base=read.index_base, read=read)
    if spec.lower() in DEMO_NAMES:
        if split == "test":  # (as a registry dataset without a test split)
            print(f"{PROG}: note: {spec} has no test split; using all its rows (a model "
                  f"fitted on {spec} was trained on them)", file=sys.stderr)
        return _load_demo(DEMO_NAMES[spec.lower()])
    info, subset = _registry_info(spec)
    if subset == "test" and info.get("n_test") is None:
        # (the library's advice, subset='train' and train_test_split, is no option here)
        raise CLIError(f"{info['name']} has no official test split: " + (
            f"give {info['name']} (its train split, with a note) or a LIBSVM file of your own "
            "test rows" if split == "test" else
            f"give {info['name']} (or {info['name']}:train) to train on its rows"))
    if subset is None:
        subset = split
        if split == "test" and info.get("n_test") is None:
            print(f"{PROG}: note: {info['name']} has no official test split; using its train split",
                  file=sys.stderr)
            subset = "train"
    try:
        bunch = load_dataset(info["name"], subset=subset, download_if_missing=download)
    except ChecksumMismatchError as exc:
        # the library's advice (verify=False) is no option of the command line
        raise CLIError(f"{str(exc).split(': replace it', 1)[0]}: replace the file, or give "
                       f"its path instead of the name {spec!r} (a file given by its path is "
                       "read as it is, unchecked)") from None
    files = bunch.filename if isinstance(bunch.filename, list) else [bunch.filename]
    return _Data(_int32_indices(bunch.data), bunch.target, f"{info['name']} ({subset})",
                 _task_of_registry(info["task"]), "registry", info["name"],
                 index_base=_registry_index_base(info, bunch.filename),
                 files=[f for f in files if f])


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
        hint = (f"; if it is data like the training set, refit with `{PROG} fit ... "
                f"--n-features {d}` (or `{PROG} search ... --n-features {d}`; a LIBSVM "
                "training file has as many features as its largest index)"
                if data.kind == "file" else "")
        raise CLIError(
            f"{data.label} has {d} features but the model was trained on {n_features}; "
            f"it was not trained on data like this{hint}"
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

# --------------------------------------------------------------------------- model files


def _save_model(path, payload):
    """Write ``payload`` with skops.io (a zip of JSON and arrays: loading it runs no
    code from the file)."""
    import zipfile

    import skops.io as sio

    # compressed: skops's JSON schema is most of an uncompressed file (a binary model
    # of 8 partitions: 281 KB, 40 KB compressed; skops reads either)
    _atomic_write(path, lambda fh: sio.dump(payload, fh, compression=zipfile.ZIP_DEFLATED),
                  binary=True)


def _load_model(path, trust_pickle=False):
    """``(estimator, metadata)`` of a model file written by ``cakernels fit``.

    A skops.io file is loaded only when every type in it is this package's or one
    skops trusts by default (scikit-learn, NumPy, SciPy): a file naming any other
    type (a function to call, a class of another package) is refused before
    anything in it is built. Pickles (model files of cakernels 0.1.0 before format 3, or a file
    from elsewhere) can run arbitrary code while loading: refused unless
    ``trust_pickle``.
    """
    import warnings

    from .._persist import CakernelsVersionWarning

    path = Path(path).expanduser()
    if not path.exists():
        raise CLIError(f"no such model file: {path}")
    if path.is_dir():
        raise CLIError(f"{path}: is a directory, not a model file")
    with warnings.catch_warnings():
        # (the estimator's own version warning: the metadata's line below says it)
        warnings.simplefilter("ignore", CakernelsVersionWarning)
        payload = _read_model_file(path, trust_pickle)
    if not (isinstance(payload, dict) and payload.get("format") == MODEL_FORMAT
            and "estimator" in payload and isinstance(payload.get("metadata"), dict)):
        raise CLIError(f"{path} is not a cakernels model file (write one with `cakernels fit`)")
    version = payload.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CLIError(f"{path}: model format version {version!r} is not one cakernels writes "
                       "(a whole number): the file was edited or is not a cakernels model file")
    if version > MODEL_FORMAT_VERSION:
        raise CLIError(f"{path}: model format version {version!r} is newer than this cakernels "
                       f"reads ({MODEL_FORMAT_VERSION}); upgrade cakernels")
    meta = payload["metadata"]
    n_features = meta.get("n_features")
    if (not isinstance(n_features, numbers.Integral) or isinstance(n_features, bool)
            or n_features < 0 or not hasattr(payload["estimator"], "predict")):
        raise CLIError(f"{path}: its metadata (n_features) or its estimator is not what "
                       f"`{PROG} fit` writes: the file was edited or is not a cakernels model "
                       "file; write it again with `cakernels fit`")
    from .._version import __version__

    if meta.get("cakernels_version") != __version__:
        written = meta.get("cakernels_version") or "an unknown version"
        print(f"{PROG}: warning: {path} was written by cakernels {written}, this is "
              f"{__version__}", file=sys.stderr)
    return payload["estimator"], meta


def _trusted_class(name):
    """Whether the type name ``name`` of a skops file is a class defined in a module
    under :data:`TRUSTED_PREFIXES`, named by its own module and qualified name (not
    a function, a module, a method, or a name a module merely imports)."""
    import importlib

    if not isinstance(name, str) or not name.startswith(TRUSTED_PREFIXES):
        return False
    module, _, qualname = name.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module), qualname)
    except Exception:  # noqa: BLE001 - no such module or attribute: not trusted
        return False
    return (isinstance(obj, type) and obj.__module__ == module
            and obj.__qualname__ == qualname)


def _read_model_file(path, trust_pickle):
    """The payload of a model file: a skops file, or a pickle with ``trust_pickle``."""
    import zipfile

    if zipfile.is_zipfile(path):
        return _load_skops(path)
    # (with --trust-pickle too: a damaged skops file or a data file is not unpickled)
    with open(path, "rb") as fh:
        head = fh.read(2)
    if head == b"PK":  # a zip's signature, but no readable zip: cut off or damaged
        raise CLIError(_damaged(path))
    if head[:1] != b"\x80":
        raise CLIError(f"{path} is not a cakernels model file (neither a skops file written "
                       f"by `{PROG} fit` nor a pickle); the model comes first: "
                       f"{PROG} predict|evaluate MODEL DATA")
    if not trust_pickle:
        raise CLIError(f"{path} is a pickle (a model file of an older cakernels, or from "
                       "elsewhere): loading a pickle can run any code it contains, so it "
                       "is refused; if you trust the file, add --trust-pickle (then save "
                       "it again with `cakernels fit`)")
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except OSError:
        raise
    except Exception as exc:
        raise CLIError(f"{path} is not a cakernels model file (unpickling failed: "
                       f"{_error_message(exc)})") from None


def _damaged(path):
    return (f"{path} is a truncated or damaged model file (it starts as a zip file, as "
            f"`{PROG} fit` writes them, but cannot be read as one); write it again with "
            "`cakernels fit`")


def _missing_class_of_ours(name):
    """Whether ``name`` is a class name under ``cakernels.`` that this version does not
    define at all (no such module or attribute: a class another version had), not a
    name of something else that exists (a function, a module: a crafted file)."""
    import importlib

    if not isinstance(name, str) or not name.startswith("cakernels."):
        return False
    module, _, qualname = name.rpartition(".")
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return True
    except Exception:  # noqa: BLE001 - importing it failed otherwise: not a missing class
        return False
    return not hasattr(mod, qualname)


def _load_skops(path):
    import zipfile
    import zlib

    import skops.io as sio

    try:
        untrusted = sio.get_untrusted_types(file=path)
    except (zipfile.BadZipFile, zlib.error, EOFError):  # a bad CRC, a cut-off member
        raise CLIError(_damaged(path)) from None
    except Exception as exc:
        raise CLIError(f"{path} is not a cakernels model file (reading it failed: "
                       f"{_error_message(exc)})") from None
    foreign = sorted(t for t in untrusted if not _trusted_class(t))
    ours = [t for t in foreign if _missing_class_of_ours(t)]
    if ours and len(ours) == len(foreign):  # classes this version does not define
        from .._version import __version__

        raise CLIError(f"{path} names classes of cakernels that this version ({__version__}) "
                       f"does not have ({', '.join(ours)}): it was written by another "
                       "cakernels version; fit the model again with this one, or load it "
                       "with the version that wrote it")
    if foreign:
        raise CLIError(f"refusing to load {path}: it names types that are not classes of "
                       f"cakernels, scikit-learn, NumPy or SciPy's sparse matrices "
                       f"({', '.join(foreign)}); a model written by `cakernels fit` holds "
                       "none, so the file was made or changed elsewhere")
    try:
        return sio.load(path, trusted=list(untrusted))
    except (zipfile.BadZipFile, zlib.error, EOFError):
        raise CLIError(_damaged(path)) from None
    except Exception as exc:
        raise CLIError(f"{path} is not a cakernels model file (loading failed: "
                       f"{_error_message(exc)})") from None
