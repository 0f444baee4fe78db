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
         "n_voters": "--n-voters"}


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
    if method == "krr":
        from sklearn.kernel_ridge import KernelRidge

        from .._kernels import sigma_to_gamma

        sigma = 1.0 if p.get("sigma") is None else p["sigma"]
        lam = 1e-4 if p.get("lam") is None else p["lam"]
        if not sigma > 0:
            raise CLIError(f"--sigma must be > 0, got {sigma!r}")
        if not lam >= 0:
            raise CLIError(f"--lam must be >= 0, got {lam!r}")
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


def _estimator_params(args):
    return {k: getattr(args, k, None) for k in
            ("C", "gamma", "kernel", "sigma", "lam", "n_partitions", "halo", "routing",
             "n_voters", "backend", "n_jobs", "random_state", "verbose")}


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
