"""``cakernels fit``."""

import pickle
import time

from .common import (
    CLIError,
    MODEL_FORMAT,
    MODEL_FORMAT_VERSION,
    TASKS,
    _atomic_write,
    _check_output,
    _fmt_int,
    _load_data,
    _note,
    _task_of_method,
)
from .registry import (
    REGISTRY,
    DEFAULT_METHOD,
)
from .methods import (
    _check_class_labels,
    _check_options,
    _choose_task,
    _estimator_params,
    _flags,
    _given,
    _large_cholesky_guard,
    _make_estimator,
    _n_partitions_of,
    _n_support_of,
    _options_task,
)

# --------------------------------------------------------------------------- fit


def _cmd_fit(args):
    import numpy as np
    import scipy.sparse as sp

    from .._version import __version__

    params = _estimator_params(args)
    method = args.method
    if method is not None:
        task = _task_of_method(method)
        if args.task is not None and args.task != task:
            raise CLIError(f"--method {method} is for {task}, but --task {args.task} was given")
        _check_options([method], task, args)
        if not REGISTRY[method].partitioned and args.n_partitions is not None:
            what = ("the scikit-learn baseline" if REGISTRY[method].kind == "baseline"
                    else "the exact distributed solver")
            raise CLIError(f"--n-partitions does not apply to --method {method} "
                           f"({what} has no partitions)")
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
    if REGISTRY[method].partitioned:
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
