"""``cakernels fit``."""

import time
from pathlib import Path

from .common import (
    _Data,
    _collective,
    _infer_task,
    _check_mpi_launch,
    _check_n_jobs,
    _mpi_world,
    CLIError,
    MODEL_FORMAT,
    MODEL_FORMAT_VERSION,
    TASKS,
    _save_model,
    _check_output,
    _fmt_int,
    _load_data,
    _note,
    _task_of_method,
    _warnings_of_every_rank,
)
from .registry import (
    REGISTRY,
    DEFAULT_METHOD,
)
from .methods import (
    _check_class_labels,
    _check_feature_memory,
    _check_kernel_ridge_memory,
    _check_options,
    _choose_task,
    _estimator_params,
    _flags,
    _given,
    _kernel_width_note,
    _large_cholesky_guard,
    _make_estimator,
    _method_against_data,
    _task_override_note,
    _n_partitions_of,
    _n_support_of,
    _options_task,
    _rbf_width,
)

# --------------------------------------------------------------------------- fit


def _check_fit_options(args, params):
    """The method given, or None; every option error is raised here, before any data is
    loaded."""
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
        # bad values fail before the data is loaded (and before any note on it); with
        # the task still open, an option of one task's method (--routing: the SVMs) is
        # checked once the data chose it
        chosen = args.task or option_task
        for candidate in [chosen] if chosen else TASKS:
            _make_estimator(DEFAULT_METHOD[candidate], params, 1, strict=bool(chosen))
    if args.backend == "mpi" and method is not None and REGISTRY[method].kind == "baseline":
        raise CLIError(f"--method {method} (scikit-learn's baseline) runs in one process; "
                       "--backend mpi applies to the partitioned methods, dissmosvc and dkrr")
    if method is not None and REGISTRY[method].kind == "baseline":
        ignored = [flag for flag, given in (("--backend threads", args.backend == "threads"),
                                            ("--n-jobs", args.n_jobs is not None),
                                            ("--verbose", bool(args.verbose))) if given]
        if ignored:
            raise CLIError(f"{'/'.join(ignored)} {'does' if len(ignored) == 1 else 'do'} not "
                           f"apply to --method {method} (scikit-learn's baseline: one model, "
                           "no partitions to run on threads or to show progress over)")
    _check_n_jobs(args)
    _check_mpi_launch(args, "train the same model")
    return method


def _choose_method(args, data, method):
    """``(method, task, chosen, chooser)`` once the data (or its summary) is known."""
    method_given = method is not None
    if method is None:
        task = _choose_task(data, args, "fit")
        method = DEFAULT_METHOD[task]
        _check_options([method], task, args)
        chosen = f" (default for {task}; choose with --method)"
        chooser = ("--task classification" if args.task is not None else
                   f"chosen by {_flags(_given(args, 'C', 'gamma'))}"
                   if _given(args, "C", "gamma") else f"{method}, the default")
    else:
        task = _task_of_method(method)
        chosen = ""
        chooser = f"--method {method}"
        _method_against_data(task, data, chooser, task_given=args.task)
    if task == "classification":
        _check_class_labels(data.label, data.y, chooser)
    if method_given and args.task is not None and data.kind != "file":
        # (after the checks that could contradict it)
        _task_override_note(args.task, data.label, data.task, data.y)
    return method, task, chosen, chooser


def _index_base_note(data, n_rows, rows_with_index_0):
    if data.kind == "file" and data.index_base == 0:
        _note(f"{data.label}: read zero-based (feature indices from 0): index 0 occurs in "
              f"{_fmt_int(rows_with_index_0)} of {_fmt_int(n_rows)} rows; the model reads "
              "prediction files zero-based too (if the file is one-based, as LIBSVM files "
              "are, remove its 0: entries: they shift every feature by one)")


def _cmd_fit(args):
    import scipy.sparse as sp

    params = _estimator_params(args)
    method = _check_fit_options(args, params)
    if args.backend == "mpi":  # (checks the output on rank 0, once every rank is in MPI)
        return _fit_mpi(args, params, method)
    _check_output(args.output, [args.data])  # before spending time on the data and the fit
    data = _load_data(args.data, split="train", n_features=args.n_features)
    _check_output(args.output, data.files)  # a registry name's own file
    method, task, chosen, _ = _choose_method(args, data, method)
    X, y = data.X, data.y
    if data.kind == "file":
        _index_base_note(data, X.shape[0], data.read.rows_with_index_0)
    _check_kernel_ridge_memory(method, X.shape[0])
    _check_feature_memory(X.shape[1], sp.issparse(X), method, args.standardize)
    est = _make_estimator(method, params, X.shape[0])
    width = _rbf_width(est, method, params)
    if width is not None:
        _kernel_width_note(X, *width, standardize=args.standardize)
    sparse = sp.issparse(X)
    model = est
    if args.standardize:
        model = _standardized(est, method, task, _feature_scaler(sparse))
    t0 = time.perf_counter()
    with _large_cholesky_guard(method, X.shape[0]):
        model.fit(X, y)
    fit_seconds = time.perf_counter() - t0
    if task == "regression" and args.standardize:
        est = model.regressor_[-1]  # (the target's wrapper fits a clone)
    _save(args, model, est, method, chosen, data, X.shape, sparse, fit_seconds)
    return 0


def _feature_scaler(sparse):
    """``--standardize``'s scaler of the features: unit variance, centred unless
    sparse (centring would make the matrix dense)."""
    from sklearn.preprocessing import StandardScaler

    return StandardScaler(with_mean=not sparse)


def _standardized(est, method, task, scaler):
    """``--standardize``'s model: the features scaled in a ``Pipeline``; for
    regression also the target centred (``TransformedTargetRegressor``): the kernel
    ridge estimators fit no intercept (as scikit-learn's ``KernelRidge``), so away
    from its training rows a model predicts 0, the mean only of a centred target
    (bodyfat, targets of mean 19 and std 8: R^2 0.005 on its own training rows)."""
    from sklearn.pipeline import Pipeline

    model = Pipeline([("standardscaler", scaler), (method, est)])
    if task != "regression":
        return model
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.preprocessing import StandardScaler

    return TransformedTargetRegressor(regressor=model,
                                      transformer=StandardScaler(with_std=False))


def _pooled_scalers(comm, X, y, sparse, regression):
    """``--standardize`` under ``--backend mpi``: ``(features' scaler, target's scaler or
    None)`` (None without any row), fitted as :func:`_standardized`'s model fits them in one process, on the
    rows of all ranks together (a scaler fitted on one rank's rows would differ between
    ranks, and the models with it): every rank's :func:`_row_stats`, gathered and
    pooled in rank order (:func:`_pooled`), so every rank holds the same scalers; in
    root mode rank 0's rows are all the rows. Bad values (NaN, inf) are the same error
    on every rank."""
    stats = comm.allgather(_collective(comm, _row_stats, X, y, sparse, regression))
    return _pooled(stats, sparse, regression) if any(s[0] for s in stats) else None


def _row_stats(X, y, sparse, regression):
    """``(n, means, variances, target sum)`` of one rank's rows (float64; no rows:
    ``(0, None, None, 0.0)``)."""
    import numpy as np

    if X is None or X.shape[0] == 0:
        return 0, None, None, 0.0
    from sklearn.utils import check_array
    from sklearn.utils.sparsefuncs import mean_variance_axis

    A = check_array(X, accept_sparse="csr", dtype="numeric", ensure_all_finite=True)
    if sparse:
        mean, var = mean_variance_axis(A, axis=0)
    else:
        mean, var = A.mean(axis=0, dtype=np.float64), A.var(axis=0, dtype=np.float64)
    total = (float(check_array(y, ensure_2d=False, input_name="y").sum(dtype=np.float64))
             if regression else 0.0)
    return A.shape[0], np.asarray(mean, np.float64), np.asarray(var, np.float64), total


def _pooled(stats, sparse, regression):
    """The scalers of :func:`_pooled_scalers` from every rank's :func:`_row_stats`: the
    mean of the means and the pooled variance (Chan, Golub and LeVeque's formula)."""
    import numpy as np
    from sklearn.preprocessing import StandardScaler

    stats = [s for s in stats if s[0]]
    n = sum(s[0] for s in stats)
    mean = sum(s[0] * s[1] for s in stats) / n
    var = sum(s[0] * (s[2] + (s[1] - mean) ** 2) for s in stats) / n
    features = _fitted_scaler(_feature_scaler(sparse), n, mean, var)
    if not regression:
        return features, None
    target = np.array([sum(s[3] for s in stats) / n])
    return features, _fitted_scaler(StandardScaler(with_std=False), n, target, None)


def _fitted_scaler(scaler, n, mean, var):
    """``scaler`` (a ``StandardScaler``) with the fitted state ``fit`` gives it on ``n``
    rows of these means and variances: scikit-learn's public attributes, a near-constant
    feature's scale 1 as its ``fit`` decides it."""
    import numpy as np

    scaler.n_features_in_ = int(mean.shape[0])
    scaler.n_samples_seen_ = int(n)
    scaler.mean_ = mean
    scaler.var_ = var if scaler.with_std else None
    scaler.scale_ = None
    if scaler.with_std:
        eps = np.finfo(np.float64).eps
        constant = (var <= n * eps * var + (n * mean * eps) ** 2) | (np.sqrt(var) < 10 * eps)
        scaler.scale_ = np.where(constant, 1.0, np.sqrt(var))
    return scaler


def _assembled(est, method, task, scaler, target):
    """``--standardize``'s model (:func:`_standardized`) from parts fitted apart: ``est``
    fitted on the features ``scaler`` scales and, for regression, on the target that
    ``target`` (a fitted ``StandardScaler(with_std=False)``) centres. The object that
    fitting :func:`_standardized`'s model gives, without fitting ``est`` again."""
    import numpy as np
    from sklearn.base import clone
    from sklearn.frozen import FrozenEstimator
    from sklearn.pipeline import Pipeline

    pipeline = Pipeline([("standardscaler", scaler), (method, est)])
    if task != "regression":
        return pipeline
    model = _standardized(clone(est), method, task, clone(scaler))
    params = model.get_params(deep=False)
    # the wrapper's own fit sets its state: on the frozen pipeline (fit leaves it as it
    # is) and the target's mean alone; then the parts themselves, and the unfitted
    # parameters as its fit leaves them
    model.set_params(regressor=FrozenEstimator(pipeline))
    model.fit(None, np.asarray(target.mean_, dtype=np.float64))
    model.regressor_, model.transformer_ = pipeline, target
    return model.set_params(regressor=params["regressor"])


def _load_data_mpi(args, comm):
    """``(summary, X, y, backend, n_samples)`` on every rank: a LIBSVM file is read in
    sharded mode (every rank its own rows, :func:`cakernels.datasets.load_svmlight_shard`);
    a registry dataset or the demo is loaded by rank 0 (root mode). ``summary`` is a
    :class:`_Data` whose ``y`` holds the distinct targets of all ranks."""
    import numpy as np

    from .._svmlight_shard import read_shard
    from ..backends import MPIBackend
    from .common import _int32_indices

    path = Path(args.data).expanduser()
    if _exists_on_every_rank(comm, path, args.data):
        _collective(comm, _not_a_directory, path, args.data)
        X, y, info = read_shard(path, comm, zero_based="auto", index_0="drop",
                                n_features=args.n_features)
        values = np.unique(np.concatenate(comm.allgather(np.unique(y))))
        task, reason = _infer_task(values, n_samples=info["n_samples"])
        summary = _Data(None, values, str(path), task, "file", reason=reason,
                        index_base=info["index_base"])
        summary.rows_with_index_0 = info["rows_with_index_0"]
        return summary, _int32_indices(X), y, MPIBackend(sharded=True), info["n_samples"]
    data = _collective(comm, lambda: _load_data(args.data, split="train",
                                                n_features=args.n_features)
                       if comm.rank == 0 else None)
    summary = None
    if comm.rank == 0:
        summary = _Data(None, np.unique(data.y), data.label, data.task, data.kind, data.name,
                        reason=data.reason, index_base=data.index_base,
                        files=data.files)  # (a registry name's own files: not an output)
        summary.rows_with_index_0 = 0
        summary.n_samples = data.X.shape[0]
    summary = comm.bcast_obj(summary)
    X, y = (data.X, data.y) if comm.rank == 0 else (None, None)
    return summary, X, y, MPIBackend(sharded=False), summary.n_samples


def _exists_on_every_rank(comm, path, spec):
    """Whether ``path`` exists, the same answer on every rank: a file on some ranks
    only is one error (rank 0 read it in sharded mode while the others loaded a
    registry name in root mode, and the job hung in mismatched collectives)."""
    from ..backends import CollectiveError

    there = comm.allgather(bool(_collective(comm, path.exists)))
    if all(there) or not any(there):
        return there[0]
    missing = [r for r, ok in enumerate(there) if not ok]
    raise CollectiveError(
        f"{spec}: the file exists on ranks {[r for r, ok in enumerate(there) if ok]} but not "
        f"on ranks {missing}; with --backend mpi every rank reads its own rows of the same "
        "LIBSVM file: put it on a file system every node sees, or the same copy at the same "
        "path on every node")


def _check_output_mpi(comm, args, inputs):
    """:func:`_check_output` under ``--backend mpi``: rank 0 writes, so rank 0 checks
    (another node may lack the folder), the same error on every rank. Checked once
    every rank is in MPI: a rank that exited before MPI_Init left the others waiting
    there."""
    _collective(comm, lambda: _check_output(args.output, inputs) if comm.rank == 0 else None)


def _not_a_directory(path, spec):
    if path.is_dir():
        raise CLIError(f"{spec}: is a directory, not a LIBSVM file")


def _width_note_rows(comm, backend, X, n):
    """Whether this rank measures the kernel-width note: rank 0, which holds every
    row in root mode; in sharded mode its own rows when they are at least the 1,000
    rows (or all ``n``) that the one-process note samples (fewer rows have nearest
    neighbours further apart than the data's: the note could misfire)."""
    return comm.rank == 0 and (not backend.sharded or X.shape[0] >= min(n, 1000))


def _fit_mpi(args, params, method):
    """``fit --backend mpi`` under mpiexec: every rank runs this; rank 0 writes."""
    comm = _mpi_world()
    _check_output_mpi(comm, args, [args.data])  # before spending time on the data
    summary, X, y, backend, n = _load_data_mpi(args, comm)
    _check_output_mpi(comm, args, summary.files)  # a registry name's own file
    method, task, chosen, _ = _collective(comm, _choose_method, args, summary, method)
    if summary.kind == "file":
        _index_base_note(summary, n, summary.rows_with_index_0)
    params = dict(params, backend=backend)
    est = _collective(comm, _make_estimator, method, params, n)
    width = _rbf_width(est, method, params)
    # the one-process fit's note, as search's, on rank 0's rows
    _collective(comm, lambda: _kernel_width_note(X, *width, standardize=args.standardize)
                if width is not None and _width_note_rows(comm, backend, X, n) else None)
    sparse = _sparse_on_rank_0(comm, X)
    t0 = time.perf_counter()
    X, y, scalers = _standardized_mpi(comm, args, X, y, sparse, task)
    with _warnings_of_every_rank(comm):
        est.fit(X, y)  # collective: bad input anywhere is the same error on every rank
    fit_seconds = time.perf_counter() - t0
    model = est if scalers is None else _assembled(est, method, task, *scalers)
    shape = (n, est.n_features_in_)
    _collective(comm, lambda: _save(args, model, est, method, chosen, summary, shape, sparse,
                                    fit_seconds, n_ranks=comm.size)
                if comm.rank == 0 else None)
    return 0


def _sparse_on_rank_0(comm, X):
    """Whether the rows are sparse (every rank's in sharded mode, rank 0's in root mode:
    the registry's LIBSVM datasets too)."""
    import scipy.sparse as sp

    return bool(comm.bcast_obj(sp.issparse(X) if comm.rank == 0 else None))


def _standardized_mpi(comm, args, X, y, sparse, task):
    """``(X, y, scalers)``: without ``--standardize`` the data as they are and None;
    with it every rank's rows scaled (and a regression target centred) by the scalers of
    all ranks' rows (:func:`_pooled_scalers`), which :func:`_assembled` makes the model
    of, ``(features' scaler, target's or None)``."""
    if not args.standardize:
        return X, y, None
    _collective(comm, lambda: None if X is None else
                _check_feature_memory(X.shape[1], sparse, None, True, n_ranks=comm.size))
    scalers = _pooled_scalers(comm, X, y, sparse, task == "regression")
    if scalers is None:  # no rows anywhere: the estimator's own error
        return X, y, None

    def scaled():
        if X is None or X.shape[0] == 0:  # (root mode: rank 0's rows only; an empty
            return X, y  # shard: the estimator's own error says what is wrong)
        return (scalers[0].transform(X),
                y if scalers[1] is None else y - scalers[1].mean_[0])

    return (*_collective(comm, scaled), scalers)


def _save(args, model, est, method, chosen, data, shape, sparse, fit_seconds, n_ranks=None):
    """Write the model file and print the one-line summary."""
    import numpy as np
    import sklearn

    from .._version import __version__

    meta = {
        "method": method,
        "estimator": type(est).__name__,
        "task": _task_of_method(method),
        "cakernels_version": __version__,
        "sklearn_version": sklearn.__version__,
        "n_features": int(shape[1]),
        "n_samples": int(shape[0]),
        # how LIBSVM prediction files are read: 0 or 1, None (tables, demos) decides per file
        "index_base": data.index_base,
        "sparse_input": bool(sparse),
        "standardization": ({"scaler": "StandardScaler", "with_mean": not sparse,
                             "target_centred": _task_of_method(method) == "regression"}
                            if args.standardize else None),
        "data": args.data,
        "fit_seconds": fit_seconds,
        "mpi_ranks": n_ranks,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if meta["task"] == "classification":
        meta["classes"] = np.asarray(getattr(est, "classes_", np.unique(data.y))).tolist()
    payload = {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION,
               "metadata": meta, "estimator": model}
    _save_model(args.output, payload)
    extra = []
    if REGISTRY[method].partitioned:
        n_parts = _n_partitions_of(est)
        extra.append(f"{n_parts} partition{'s' if n_parts != 1 else ''}")
    nsv = _n_support_of(est)
    if nsv is not None:
        extra.append(f"{_fmt_int(nsv)} support vectors")
    if args.standardize:
        extra.append("standardized" + (", target centred"
                                       if meta["task"] == "regression" else ""))
    if n_ranks is not None:
        extra.append(f"{n_ranks} MPI rank{'s' if n_ranks != 1 else ''}"
                     + (", sharded input" if data.kind == "file" else ", root mode"))
    extra = extra or ["no partitions"]
    print(f"{type(est).__name__}{chosen}: fitted on {_fmt_int(shape[0])} samples x "
          f"{shape[1]} features in {fit_seconds:.2f} s ({', '.join(extra)}); "
          f"saved to {args.output}")
