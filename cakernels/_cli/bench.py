"""``cakernels bench``."""

import contextlib
import math
import sys
import time
import warnings
from pathlib import Path

from .common import (
    CLIError,
    DEMO_NAMES,
    SPLIT_SEED,
    _check_n_jobs,
    _fmt_int,
    _int32_indices,
    _load_data,
    _load_demo,
    _note,
    _registry_info,
    _task_of_registry,
)
from .registry import (
    BENCH_DEFAULTS,
    DISPLAY,
    METHODS,
    ORACLE_METHODS,
)
from .methods import (
    DEFAULT_SEED,
    KERNEL_RIDGE_COPIES,
    _check_class_labels,
    _check_options,
    _choose_task,
    _estimator_params,
    _flags,
    _given,
    _make_estimator,
    _n_partitions_of,
    _n_support_of,
    _options_task,
    _task_override_note,
)

# --------------------------------------------------------------------------- bench

#: memory budget of the scikit-learn KernelRidge baseline in ``bench`` (its n x n kernel)
KRR_MEMORY_BUDGET = 8 * 2**30


def _kernel_ridge_skip(n):
    """Why the KernelRidge baseline cannot run on ``n`` samples here, or ''.

    It holds about :data:`KERNEL_RIDGE_COPIES` copies of its n x n kernel (the
    check of ``fit --method krr``): the budget on one copy alone let a 32,614-row
    run take the machine's 23 GB, and the system killed bench without a message."""
    from .. import _memory

    one = 8.0 * n * n
    if one > KRR_MEMORY_BUDGET:
        return (f"its {_fmt_int(n)} x {_fmt_int(n)} kernel needs {one / 2**30:.1f} GiB "
                f"(budget {KRR_MEMORY_BUDGET / 2**30:.0f} GiB)")
    avail = _memory.shortfall(KERNEL_RIDGE_COPIES * one)
    if avail is not None:
        return (f"it needs about {_memory.fmt_bytes(KERNEL_RIDGE_COPIES * one)} "
                f"({KERNEL_RIDGE_COPIES} copies of its {_fmt_int(n)} x {_fmt_int(n)} kernel), "
                f"more than {_memory.MEMORY_FRACTION:.0%} of the {_memory.fmt_bytes(avail)} "
                "available")
    return ""


def _subsample(X, y, n, rng):
    """At most ``n`` random rows, in their original order."""
    import numpy as np

    if n is None or n >= X.shape[0]:
        return X, y
    idx = np.sort(rng.choice(X.shape[0], size=n, replace=False))
    return X[idx], y[idx]


def _split(X, y, train_fraction, max_train, max_test):
    """Fixed random split: ``train_fraction`` for training (of which at most
    ``max_train``), the rest for testing: the test set does not depend on
    ``max_train``, so that runs of several sizes are scored on the same rows."""
    import numpy as np

    n = X.shape[0]
    if n < 2:
        raise CLIError(f"cannot split {n} sample into a training and a test set")
    rng = np.random.RandomState(SPLIT_SEED)
    perm = rng.permutation(n)
    n_split = max(1, min(int(math.floor(train_fraction * n)), n - 1))
    n_train = min(n_split, max_train or n)
    tr, te = np.sort(perm[:n_train]), np.sort(perm[n_split:])
    Xte, yte = _subsample(X[te], y[te], max_test, rng)
    return X[tr], y[tr], Xte, yte


def _bench_data(args):
    """Load and prepare the bench dataset; returns a dict and prints the fallback line."""
    import numpy as np
    import scipy.sparse as sp

    from ..datasets import get_data_home, load_dataset

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
            fallback = (f"ijcnn1 is not in the data home {get_data_home()} (set "
                        "CAKERNELS_DATA to a folder that holds it; downloads are tried only "
                        "for a named dataset: `cakernels bench ijcnn1`); using the breast "
                        "cancer dataset shipped with scikit-learn instead")
            spec = "demo"

    rng = np.random.RandomState(SPLIT_SEED)
    out = {"standardize_X": False, "standardize_y": False, "n_partitions": 8,
           "C": None, "gamma": None, "note": fallback}
    given = _given_methods(args)
    if not given:
        _options_task(args)  # both kinds of options: an error before the data is loaded
    path = Path(spec).expanduser()
    if path.is_dir():
        raise CLIError(f"{spec}: is a directory, not a LIBSVM file")
    if path.exists():
        data = _load_data(spec, split="train")
        task = _choose_task(data, args, "bench", given or ())
        out.update(name=str(path), task=task, desc=f"{path} (fixed random 80/20 split)")
        _check_options(_bench_methods(args, task), task, args)
        Xtr, ytr, Xte, yte = _split(data.X, data.y, 0.8, args.max_train, args.max_test)
        out["standardize_X"] = task == "regression"
    elif spec.lower() in DEMO_NAMES:
        data = _load_demo(DEMO_NAMES[spec.lower()])
        out["known_task"] = (data.label, data.task)
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
        out["known_task"] = (name, _task_of_registry(info["task"]))
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
    elif out["task"] == "regression":
        # kernel ridge fits no intercept (every method here, KernelRidge too): a
        # target far from 0 is centred, or every model is pulled to 0 away from its
        # rows (cpusmall's KKRR: MSE 1,881 against 30); the MSE stays in y's units
        out["centre_y"] = True
        mean = float(ytr.mean())
        ytr, yte = ytr - mean, yte - mean
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
    return list(BENCH_DEFAULTS[task])




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
    _check_n_jobs(args)
    data = _bench_data(args)
    task = data["task"]
    methods = _bench_methods(args, task)
    _check_options(methods, task, args)
    if args.task is not None and data.get("known_task"):  # (after the checks above)
        _task_override_note(args.task, *data["known_task"], data["ytr"])
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
        _make_estimator(m, params, n_train, strict=False)

    if data["note"]:
        _note(data["note"])
        sys.stderr.flush()
    scale = ("X standardized" if data["standardize_X"] else "X as stored") + \
            (", y standardized by the training mean/std" if data["standardize_y"] else
             ", y centred by the training mean" if data.get("centre_y") else "")
    print(f"dataset:    {data['desc']}: {_fmt_int(n_train)} train / {_fmt_int(Xte.shape[0])} test, "
          f"{d} features, {task}; {scale}")
    if task == "classification":
        gamma = "scale" if params["gamma"] is None else params["gamma"]
        kp = f"C={1.0 if params['C'] is None else params['C']:g} " + \
             (f"gamma={gamma:g}" if isinstance(gamma, float) else f"gamma={gamma}") + \
             f" tol={1e-3 if params.get('tol') is None else params['tol']:g}"
    else:
        kp = f"sigma={params['sigma']:.4g} lam={params['lam']:g}"
    kernel = params["kernel"] or "rbf"
    # the options that change some methods' models, when given (two runs that differ
    # in them printed the same line)
    kp += "".join(f" {name}={params[name]:g}" if isinstance(params[name], float)
                  else f" {name}={params[name]}"
                  for name in ("halo", "routing", "n_voters", "working_set", "n_passes",
                               "predict_layer") if params.get(name) is not None)
    print(f"parameters: {kp} kernel={kernel}; {params['n_partitions']} partitions; "
          f"backend={params['backend'] or 'serial'}"
          + (f" n_jobs={params['n_jobs']}" if params["n_jobs"] is not None else "")
          + "; random_state="
          + str(DEFAULT_SEED if params["random_state"] is None else params["random_state"]))
    if _HASWELL_SET_FOR_BENCH:
        print("note: OpenBLAS runs its Haswell kernels in this run (OPENBLAS_CORETYPE=Haswell, "
              "set by cakernels bench: its SkylakeX kernels crash in multi-threaded Cholesky "
              "factorizations of 16,000 or more rows); every method uses the same BLAS")
    from .._blas import LARGE_CHOLESKY, risky_openblas

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
                est = _make_estimator(m, params, n_warm, strict=False)
                est.fit(Xtr[warm], ytr[warm]).predict(Xte[:50])


def _bench_table(task, run, methods, baseline, params, n_train, Xtr, ytr, Xte, yte):
    """Fit and time every method of ``run`` and print the table (see ``_cmd_bench``)."""
    import numpy as np

    table = _Table(task)
    base_fit = None
    notes, oracles = [], []
    header_done = skipped_baseline = False
    for m in run:
        if m == "krr":
            why = _kernel_ridge_skip(n_train)
            if why:
                print(f"note: KernelRidge skipped: {why}")
                skipped_baseline = True
                continue
        if not header_done:
            table.header()
            header_done = True
        est = _make_estimator(m, params, n_train, strict=False)
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
            table.row(DISPLAY[m], _n_partitions_of(est), fit_s, pred_s, score,
                      _n_support_of(est) if task == "classification" else None, speedup)
        for oracle, base in ORACLE_METHODS.items():
            if base == m and oracle in methods:
                from ..kernel_ridge import oracle_score

                t0 = time.perf_counter()
                mse = oracle_score(est, Xte, yte)
                table.row(DISPLAY[oracle], _n_partitions_of(est), None,
                          time.perf_counter() - t0, mse, None, None)
                oracles.append(oracle)
    if not header_done:
        table.header()
    if oracles:
        names = "/".join(DISPLAY[o] for o in oracles)
        bases = "/".join(DISPLAY[ORACLE_METHODS[o]] for o in oracles)
        notes.append(f"{names}: oracle bound of {bases} (Algorithm 11): every test sample takes "
                     "the local model closest to its true target; an evaluation bound, not a "
                     "predictor")
    if baseline not in methods and not skipped_baseline:
        notes.append(f"fit speedup needs the scikit-learn baseline ({baseline}) in --methods")
    for note in notes:
        print(f"note: {note}")
    return 0

#: set when ``cakernels bench`` chose OpenBLAS' Haswell kernels for its own process
_HASWELL_SET_FOR_BENCH = False


def _bench_may_factor_large(args):
    """Whether a ``bench`` run may fit scikit-learn's KernelRidge (a Cholesky of up to
    16,000 or more rows), decided from the command line alone (before NumPy loads)."""
    from .._dataset_registry import record

    # --methods runs only what it lists: KernelRidge only with 'krr' (the package's
    # own KRR methods factor partitions, or tiles, never one n x n matrix in LAPACK)
    if args.methods and not any(m.strip().lower() == "krr"
                                for item in args.methods for m in item.split(",")):
        return False
    if getattr(args, "task", None) == "classification":
        return False  # the SVMs and SVC: no n x n factorization
    spec = "demo" if args.demo else args.dataset
    if spec is None or spec.lower() in DEMO_NAMES:
        return False  # ijcnn1 (classification) or a small demo
    if Path(spec).expanduser().exists() or getattr(args, "task", None) == "regression":
        return True  # a file (regression is possible), or regression asked for
    try:
        return record(spec.partition(":")[0])["task"] == "regression"
    except (ValueError, TypeError):
        return False  # an unknown name: bench reports the error
