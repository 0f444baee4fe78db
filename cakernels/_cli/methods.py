"""The methods of the command line and their options."""

import contextlib
import sys

from .common import (
    CLIError,
    PROG,
    _fmt_int,
    _note,
    _task_of_method,
    _whole_numbers,
)
from .registry import (
    REGISTRY,
    CLASSIFICATION_METHODS,
    METHODS,
    REGRESSION_METHODS,
)

# --------------------------------------------------------------------------- estimators


def _given(args, *names):
    return [n for n in names if getattr(args, n, None) is not None]


_FLAG = {"C": "--C", "gamma": "--gamma", "sigma": "--sigma", "lam": "--lam",
         "n_partitions": "--n-partitions", "halo": "--halo", "routing": "--routing",
         "n_voters": "--n-voters", "working_set": "--working-set", "tol": "--tol",
         "n_passes": "--n-passes", "predict_layer": "--predict-layer"}


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
        if data.kind != "file":
            if args.task == "classification":  # (an error first, not a note it contradicts)
                _check_class_labels(data.label, data.y, "--task classification", command)
            _task_override_note(args.task, data.label, data.task, data.y)
        return args.task
    if data.kind != "file":
        return data.task  # known: options of the other kind are rejected by _check_options
    kinds = {_task_of_method(m) if m in METHODS else "regression" for m in methods}
    if len(kinds) == 1:
        task = kinds.pop()
        _method_against_data(task, data, f"--methods {' '.join(methods)}", command)
        return task
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
    how = {"fit": "--method bkrr2, or --sigma/--lam without --method",
           "search": "--method bkrr2, or --sigmas/--lams without --method"}.get(
        command, "the default methods of bench for these targets, or --methods bkrr2")
    raise CLIError(f"cannot train a classifier ({chooser}) on {label}: its targets are continuous "
                   f"({_fmt_int(values.size)} distinct values, not all whole numbers) and a "
                   f"classifier needs class labels; kernel ridge regression fits them (e.g. {how})")


def _n_distinct(y):
    """Distinct target values: the classes a classifier trained on ``y`` gets."""
    import numpy as np

    return int(np.unique(np.asarray(y, dtype=np.float64)).size)


def _task_override_note(task, label, known, y=None):
    """``--task`` is the explicit override of a registry dataset's or the demo's
    own task (``known``): a note says so (it trained a classifier on regression
    targets silently), with the number of classes, one per distinct target value,
    when ``y`` is given; for a LIBSVM file it overrides the inference."""
    if known is None or task == known:
        return
    classes = ""
    if task == "classification" and y is not None:
        classes = (f" (a classifier of {_fmt_int(_n_distinct(y))} classes, one per distinct "
                   "target value)")
    _note(f"{label} is a {known} dataset; --task {task} overrides that{classes}")


def _method_against_data(task, data, chooser, command="fit", methods=None,
                         task_given=None):
    """Methods the user named (``chooser``) for the other task than the data's:
    for a registry dataset or the demo (their task is known) an error, unless
    ``--task`` (``task_given``) overrides it explicitly (the error lists
    ``methods``, the command's own, default every method, of the data's task);
    a note for a LIBSVM file (whose task was inferred from its targets).
    Whole-number regression targets make a classifier of one class per distinct
    value."""
    if data.task is None or task == data.task:
        return
    several = len(chooser.split()) > 2  # "--methods a b"
    if data.kind != "file":
        if task_given == task:  # the explicit override (noted with --task)
            return
        ok = CLASSIFICATION_METHODS if data.task == "classification" else REGRESSION_METHODS
        ok = [m for m in ok if methods is None or m in methods]
        raise CLIError(f"{data.label} is a {data.task} dataset, but {chooser} "
                       f"{'are' if several else 'is'} for {task} (methods for it: "
                       f"{', '.join(ok)}; --task {task} overrides the dataset's task)")
    if task == "classification":
        _check_class_labels(data.label, data.y, chooser, command)
        what = (f"{'train classifiers' if several else 'trains a classifier'} of "
                f"{_fmt_int(_n_distinct(data.y))} classes (one per distinct target value)")
    else:
        what = f"{'train' if several else 'trains'} kernel ridge regression on the class labels"
    _note(f"{data.label}: {chooser} {what}, although {data.task} was inferred: {data.reason}")


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
                       f"{task} problem (methods for it: {', '.join(ok)}; --task "
                       f"{_task_of_method(wrong[0])} overrides the data's task)")


def _taking(option):
    """The methods whose estimator takes ``option``, in registry order."""
    return [m.name for m in REGISTRY.values() if option in m.options]


#: the command line's seed when --random-state is not given (the classes' default, None,
#: draws a fresh seed: two runs of one command would train two models)
DEFAULT_SEED = 0


def _make_estimator(method, p, n_train, strict=True):
    """The estimator of ``method`` (see :mod:`.registry`) with the parameters in ``p``
    (None: the estimator's default). ``strict``: an option the method does not take
    (``--halo``) is an error; otherwise (``bench`` over several methods) it applies to
    the methods that take it."""
    entry = REGISTRY.get(method)
    if entry is None or entry.estimator is None:  # pragma: no cover - argparse restricts
        raise CLIError(f"unknown method {method!r}")
    if p.get("halo") is not None and "halo" not in entry.options and strict:
        raise CLIError(f"--halo does not apply to --method {method}: it applies to the "
                       "single-level partitioned methods (casvc, fcfssvc, bkmsvc, cpsvc and "
                       "the kernel ridge ones but dkrr and krr)")
    for name in ("routing", "n_voters"):
        if p.get(name) is not None and name not in entry.options and strict:
            raise CLIError(f"{_FLAG[name]} does not apply to --method {method}: it applies "
                           "to the single-level partitioned SVMs (casvc, fcfssvc, bkmsvc, "
                           "cpsvc)")
    if p.get("n_voters") is not None and p.get("routing") != "vote" \
            and "n_voters" in entry.options and strict:
        raise CLIError("--n-voters applies to --routing vote only (the models that vote "
                       "per sample); nearest-centre routing has no voters")
    if p.get("working_set") is not None and "working_set" not in entry.options and strict:
        raise CLIError(f"--working-set does not apply to --method {method}: it applies to "
                       "dissmosvc")
    if p.get("tol") is not None and "tol" not in entry.options and strict:
        raise CLIError(f"--tol does not apply to --method {method}: it is the stopping "
                       f"tolerance of the SVM methods ({', '.join(_taking('tol'))}); kernel "
                       "ridge solves its linear systems directly, with no tolerance")
    for name in ("n_passes", "predict_layer"):
        if p.get(name) is not None and name not in entry.options and strict:
            raise CLIError(f"{_FLAG[name]} does not apply to --method {method}: it applies "
                           f"to {', '.join(_taking(name))}")
    if p.get("random_state") is not None and "random_state" not in entry.options and strict:
        raise CLIError(f"--random-state does not apply to --method {method}: it draws "
                       "nothing at random (it seeds the partitioners of the methods that "
                       "partition)")
    if "random_state" in entry.options and p.get("random_state") is None:
        p = {**p, "random_state": DEFAULT_SEED}  # the command line's seed, given or not
    if method == "krr":
        from sklearn.kernel_ridge import KernelRidge

        from .._kernels import sigma_to_gamma

        sigma = 1.0 if p.get("sigma") is None else p["sigma"]
        lam = 1e-4 if p.get("lam") is None else p["lam"]
        if not sigma > 0:
            raise CLIError(f"--sigma must be > 0, got {sigma!r}")
        if not lam >= 0:
            raise CLIError(f"--lam must be >= 0, got {lam!r}")
        if not lam * max(n_train, 1) < float("inf"):
            raise CLIError(f"--lam {lam!r} times the {_fmt_int(n_train)} training samples "
                           "overflows (KernelRidge's alpha is lam * n)")
        # the same problem as BKRR2(n_partitions=1): (K + lam n I) alpha = y
        est = KernelRidge(alpha=lam * max(n_train, 1), kernel=p.get("kernel") or "rbf",
                          gamma=sigma_to_gamma(sigma))
    else:
        est = entry.estimator_class()(**{n: p[n] for n in entry.options if p.get(n) is not None})
    validate = getattr(est, "_validate_params", None)
    if validate is not None:
        validate()  # bad values fail here, before any data is loaded
    return est


def _large_cholesky_guard(method, n):
    """Context for fitting ``method`` on ``n`` samples: scikit-learn's KernelRidge on
    16,000 or more samples gets one BLAS thread when the loaded OpenBLAS uses its
    SkylakeX kernels, which crash in multi-threaded Cholesky factorizations of that
    size (the package's own KRR factors in small tiles on one BLAS thread each and
    never meets the crash, see ``_blas``)."""
    from .._blas import LARGE_CHOLESKY, cholesky_guard, risky_openblas

    if method != "krr" or n < LARGE_CHOLESKY:
        return contextlib.nullcontext()
    if risky_openblas():
        print(f"{PROG}: note: KernelRidge on {_fmt_int(n)} samples factors its kernel matrix "
              "with one BLAS thread: OpenBLAS' SkylakeX kernels crash in multi-threaded "
              "Cholesky factorizations of 16,000 or more rows (start with "
              "OPENBLAS_CORETYPE=Haswell to keep every thread)", file=sys.stderr)
        sys.stderr.flush()
    return cholesky_guard(n)


#: peak memory of scikit-learn's KernelRidge.fit in units of its n x n float64 kernel
#: matrix (measured: the resident set grows by 3.0-3.1 times 8 n^2 bytes, dense or CSR)
KERNEL_RIDGE_COPIES = 3


def _check_kernel_ridge_memory(method, n):
    """Refuse ``--method krr`` (scikit-learn's KernelRidge) on more samples than this
    machine's available memory holds, before the data goes in: the kernel would be
    killed by the system's out-of-memory killer without a message."""
    from .. import _memory

    if method != "krr":
        return
    need = KERNEL_RIDGE_COPIES * 8.0 * n * n
    avail = _memory.shortfall(need)
    if avail is not None:
        raise CLIError(f"--method krr (scikit-learn's KernelRidge) on {_fmt_int(n)} samples "
                       f"needs about {_memory.fmt_bytes(need)} ({KERNEL_RIDGE_COPIES} copies "
                       f"of its {_fmt_int(n)} x {_fmt_int(n)} kernel matrix), more than "
                       f"{_memory.MEMORY_FRACTION:.0%} of the {_memory.fmt_bytes(avail)} "
                       "available: use a partitioned method (bkrr2, the default), dkrr under "
                       "mpiexec, or fewer samples")


#: bytes per feature column that ``--standardize``'s scaler holds on sparse input
#: (its means, variances and scales, and the variance pass's temporaries: measured 39)
SCALER_BYTES_PER_FEATURE = 40
#: bytes per feature column of scikit-learn's kernels on CSR input (the transposed
#: matrix's column pointers: measured 4)
SPARSE_KERNEL_BYTES_PER_FEATURE = 8


def _check_feature_memory(n_features, sparse, method, standardize, n_ranks=1):
    """Refuse, before the data goes in, what allocates per feature column on sparse
    input beyond the available memory: ``--standardize``'s scaler (under
    ``--backend mpi`` also every rank's gathered statistics) and ``--method krr``'s
    kernels. A LIBSVM file has as many features as its largest index, so one huge
    index (hashed features) made them allocate gigabytes, or be killed by the system."""
    from .. import _memory

    if not sparse:
        return
    parts = []
    if standardize:
        parts.append(("--standardize's scaler", SCALER_BYTES_PER_FEATURE + 24 * (n_ranks - 1)))
    if method == "krr":
        parts.append(("--method krr's kernels", SPARSE_KERNEL_BYTES_PER_FEATURE))
    need = float(sum(per for _, per in parts)) * n_features
    avail = _memory.shortfall(need) if need else None
    if avail is not None:
        raise CLIError(f"{' and '.join(what for what, _ in parts)} on {_fmt_int(n_features)} "
                       f"features need{'s' if len(parts) == 1 else ''} about "
                       f"{_memory.fmt_bytes(need)}, more than "
                       f"{_memory.MEMORY_FRACTION:.0%} of the {_memory.fmt_bytes(avail)} "
                       "available: a LIBSVM file has as many features as its largest index; "
                       "renumber the file's feature indices to the columns it uses"
                       + (", or leave out --standardize" if standardize else ""))


def _estimator_params(args):
    return {k: getattr(args, k, None) for k in
            ("C", "gamma", "tol", "kernel", "sigma", "lam", "n_partitions", "halo", "routing",
             "n_voters", "working_set", "n_passes", "predict_layer", "backend", "n_jobs",
             "random_state", "verbose")}


def _n_partitions_of(est):
    """Partitions of a fitted estimator (the leaves of a multi-level tree; 1 for the
    single-model baselines and Dis-SMO)."""
    if hasattr(est, "partition_sizes_"):
        return len(est.partition_sizes_)
    return len(est.estimators_) if hasattr(est, "estimators_") else 1


def _n_support_of(est):
    if hasattr(est, "n_support_total_"):
        return est.n_support_total_
    if hasattr(est, "support_"):
        return int(est.support_.size)
    return None


# --------------------------------------------------------------------------- kernel width

#: the kernel value at the typical nearest-neighbour distance below which a note
#: says that the RBF kernel is nearly the identity (the model only recalls its rows)
_NEAR_IDENTITY = 1e-6


def _rbf_width(est, method, params):
    """``(name, [value], default)`` of the RBF kernel width of ``method``'s estimator
    ``est`` ('sigma' for kernel ridge, 'gamma' for SVMs; ``default``: not given),
    or None (another kernel, or 'scale'/'auto', which scikit-learn derives from the
    data)."""
    import numbers

    if getattr(est, "kernel", "rbf") != "rbf":
        return None
    if _task_of_method(method) == "regression":  # KernelRidge ('krr') too: --sigma
        sigma = params.get("sigma")
        return ("sigma", [getattr(est, "sigma", 1.0) if sigma is None else sigma],
                sigma is None)
    gamma = getattr(est, "gamma", None)
    if isinstance(gamma, numbers.Real) and not isinstance(gamma, bool):
        return ("gamma", [gamma], params.get("gamma") is None)
    return None


def _compact_columns(X, columns):
    """CSR ``X`` restricted to the sorted ``columns`` (renumbered 0..), in O(nnz)
    memory (SciPy's column indexing allocates per column of ``X``)."""
    import numpy as np
    import scipy.sparse as sp

    X = X.tocsr()
    keep = np.isin(X.indices, columns)
    row = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(row[keep], minlength=X.shape[0]))])
    return sp.csr_matrix((X.data[keep], np.searchsorted(columns, X.indices[keep]), indptr),
                         shape=(X.shape[0], columns.size))


def _kernel_width_note(X, name, widths, default=False, standardize=False):
    """Note when the RBF kernel is nearly the identity on ``X`` for every width in
    ``widths`` (``name`` 'sigma' or 'gamma'): the typical sample's nearest
    neighbour then lies where the kernel is ~0, and the model recalls its training
    rows and predicts ~0 (a constant) elsewhere - as unscaled features with the
    default sigma = 1 do. Measured on at most 1,000 rows (a fixed sample): the
    median squared distance of each to its nearest other (distinct) row."""
    import numpy as np
    import scipy.sparse as sp
    from sklearn.metrics.pairwise import euclidean_distances

    from .._kernels import sigma_to_gamma

    widths = [float(w) for w in widths]
    n = X.shape[0]
    if not widths or n < 2:
        return
    rows = np.sort(np.random.RandomState(0).choice(n, size=min(n, 1000), replace=False))
    try:
        S = X[rows]
        if sp.issparse(S):
            # only the columns the sample uses: distances between its rows need no
            # other, and a LIBSVM file with one huge feature index has ~2^31 columns
            used = np.unique(S.indices)
            S, X = _compact_columns(S, used), (_compact_columns(X, used) if standardize
                                               else None)
        if standardize:
            from sklearn.preprocessing import StandardScaler

            S = StandardScaler(with_mean=False).fit(X).transform(S)
        with np.errstate(all="ignore"):
            D = euclidean_distances(S, squared=True)
    except (ValueError, TypeError, MemoryError):  # NaN, inf...: the fit says what is wrong
        return
    D[D <= 0] = np.inf  # itself and duplicates
    nearest = D.min(axis=1)
    nearest = nearest[np.isfinite(nearest)]
    if nearest.size == 0:
        return
    d2 = float(np.median(nearest))
    gammas = [sigma_to_gamma(w) if name == "sigma" else w for w in widths]
    if max(np.exp(-g * d2) for g in gammas) >= _NEAR_IDENTITY:
        return
    if name == "sigma":
        what = (f"sigma = {widths[0]:.4g}{' (the default)' if default else ''}"
                if len(widths) == 1 else f"every sigma of the grid (the largest {max(widths):.4g})")
        hint = f"--sigma{'s' if len(widths) > 1 else ''} around {np.sqrt(d2):.3g}"
        formula = "exp(-d^2 / (2 sigma^2))"
    else:
        what = (f"gamma = {widths[0]:.4g}" if len(widths) == 1
                else f"every gamma of the grid (the smallest {min(widths):.4g})")
        hint = f"--gamma{'s' if len(widths) > 1 else ''} around {1.0 / d2:.3g} (or 'scale')"
        formula = "exp(-gamma d^2)"
    _note(f"the RBF kernel is nearly the identity on this data: the typical sample's "
          f"nearest neighbour lies at squared distance d^2 = {d2:.3g}"
          f"{' after standardizing' if standardize else ''}, where {formula} < "
          f"{_NEAR_IDENTITY:g} for {what}, so the model can only recall its training rows. "
          + ("Choose " if standardize else "Standardize the features (--standardize) or choose ")
          + hint)
