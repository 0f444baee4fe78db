"""``cakernels search``: the fast grid search of a partitioned method on DATA,
with a progress bar over the grid, saving the refitted best model."""

import time

from .common import (
    CLIError,
    _check_output,
    _check_mpi_launch,
    _check_n_jobs,
    _collective,
    _fmt_int,
    _load_data,
    _mpi_world,
    _note,
    _task_of_method,
    _warn,
    _warnings_of_every_rank,
)
from .fit import _index_base_note, _save
from .methods import (
    DEFAULT_SEED,
    _check_class_labels,
    _check_feature_memory,
    _task_override_note,
    _kernel_width_note,
    _method_against_data,
)

#: --method -> the search class of cakernels.model_selection
SEARCHES = {
    "casvc": "CASVCCV", "fcfssvc": "FCFSSVCCV", "bkmsvc": "BKMSVCCV", "cpsvc": "CPSVCCV",
    "dckrr": "DCKRRCV", "kkrr": "KKRRCV", "kkrr2": "KKRR2CV", "bkrr": "BKRRCV",
    "bkrr2": "BKRR2CV",
}
DEFAULT_SEARCH = {"classification": "casvc", "regression": "bkrr2"}


def add_search_parser(sub, add_common, positive_int, gamma_type):
    p = sub.add_parser(
        "search", help="grid search of a partitioned method; save the best model",
        description="Search a grid of C and gamma (SVMs) or sigma and lambda (kernel ridge) "
                    "by cross-validation with the fast search of cakernels.model_selection "
                    "(partition once, share the work between the grid's points), print the "
                    "best candidates and save the best model refitted on all of DATA.")
    p.add_argument("data", metavar="DATA")
    p.add_argument("-o", "--output", required=True, metavar="MODEL",
                   help="model file to write (the refitted best estimator)")
    p.add_argument("--method", choices=sorted(SEARCHES), type=str.lower,
                   help="partitioned method to tune (default: casvc for classification, "
                        "bkrr2 for regression)")
    p.add_argument("--task", choices=("classification", "regression"), type=str.lower,
                   help="default: the method's, a dataset's own, the kind of grid given, or "
                        "inferred from the targets")
    p.add_argument("--Cs", dest="Cs", nargs="+", type=float, metavar="C",
                   help="SVM: values of C (default 0.1 1 10 100)")
    p.add_argument("--gammas", nargs="+", type=gamma_type, metavar="G",
                   help="SVM: values of gamma, numbers or 'scale'/'auto' (default scale)")
    p.add_argument("--sigmas", nargs="+", type=float, metavar="S",
                   help="kernel ridge: Gaussian widths (default 0.25 0.5 1 2 4 8)")
    p.add_argument("--lams", nargs="+", type=float, metavar="L",
                   help="kernel ridge: values of lambda (default 1e-8 1e-6 1e-4 1e-2)")
    p.add_argument("--tol", type=float, metavar="TOL",
                   help="SVM: stopping tolerance of every fit of the grid, LIBSVM's -e "
                        "(default 1e-3; the kernel ridge searches refuse it)")
    p.add_argument("--cv", default="5", metavar="K",
                   help="number of shuffled folds (stratified for SVMs), or 'loo' (kernel "
                        "ridge: closed-form leave-one-out); default 5")
    p.add_argument("--scoring", metavar="NAME",
                   help="scikit-learn scorer to select by: SVMs accuracy (default), "
                        "balanced_accuracy, matthews_corrcoef, f1/precision/recall/jaccard "
                        "(positive class 1) and their _macro/_weighted/_micro averages; "
                        "kernel ridge r2 (default), neg_mean_squared_error, "
                        "neg_root_mean_squared_error, neg_mean_absolute_error")
    p.add_argument("--n-partitions", "-p", type=positive_int, default=8, metavar="P",
                   help="number of partitions (default 8)")
    p.add_argument("--standardize", action="store_true",
                   help="fit a StandardScaler first, on all rows before the folds "
                        "(with_mean=False for sparse input), and for regression centre the "
                        "target; saved with the model (under --backend mpi fitted on all ranks' "
                        "rows)")
    p.add_argument("--n-features", type=positive_int, metavar="N",
                   help="a LIBSVM file's number of features (default: its largest feature index); "
                        "give the test data's when it uses indices the training file does not")
    p.add_argument("--backend", choices=("serial", "threads", "mpi"), default="serial",
                   help="how partitions are run (default serial); mpi: under mpiexec, a "
                        "LIBSVM file read in sharded mode (every rank its own rows), a "
                        "registry dataset or the demo by rank 0; rank 0 prints and writes")
    p.add_argument("--n-jobs", type=int, metavar="N", help="workers of the threads backend")
    p.add_argument("--random-state", type=int, default=0, metavar="SEED",
                   help="seed of the partitioners (default 0)")
    p.add_argument("--top", type=positive_int, default=5, metavar="N",
                   help="candidates to print (default 5)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_common(p)
    p.set_defaults(func=_cmd_search)
    return p


def _search_task(args, data):
    if args.method is not None:
        task = _task_of_method(args.method)
        if args.task is not None and args.task != task:
            raise CLIError(f"--method {args.method} is for {task}, but --task {args.task} "
                           "was given")
        return task
    svm = [f for f, v in (("--Cs", args.Cs), ("--gammas", args.gammas)) if v is not None]
    krr = [f for f, v in (("--sigmas", args.sigmas), ("--lams", args.lams)) if v is not None]
    if svm and krr:
        raise CLIError(f"{' and '.join(svm)} are SVM grids, {' and '.join(krr)} kernel ridge "
                       "grids: give one kind")
    if args.task is not None:
        return args.task  # (its note once _check_search's checks have passed)
    if svm or krr:
        task = "classification" if svm else "regression"
        if data.kind != "file" and task != data.task:
            raise CLIError(f"{data.label} is a {data.task} dataset: "
                           f"{' and '.join(svm or krr)} do not apply")
        # a file: the grid's kind overrules the task inferred from its targets, which
        # a note says (as fit's --C/--lam); continuous targets for SVMs are an error
        _method_against_data(task, data, " and ".join(svm or krr), "search")
        return task
    if data.kind == "file":
        _note(f"{data.label}: {data.task} inferred: {data.reason}")
    return data.task


def _cmd_search(args):
    import scipy.sparse as sp

    if args.backend != "mpi":  # (under MPI rank 0 checks, once every rank is in MPI)
        _check_output(args.output, [args.data])
    cv = args.cv.lower()
    if cv != "loo":
        try:
            cv = int(cv)
        except ValueError:
            raise CLIError(f"--cv must be a number of folds or 'loo', got {args.cv!r}") from None
    _check_n_jobs(args)
    _check_mpi_launch(args, "run the same search")
    if args.backend == "mpi":
        return _search_mpi(args, cv)
    data = _load_data(args.data, split="train", n_features=args.n_features)
    _check_output(args.output, data.files)  # a registry name's own file
    task, method = _check_search(args, data, cv)
    if data.kind == "file":
        _index_base_note(data, data.X.shape[0], data.read.rows_with_index_0)
    search = _make_search(args, method, task, cv, args.backend)  # (checks the grids)
    if args.method is not None:
        _method_against_data(task, data, f"--method {method}", "search", methods=SEARCHES,
                             task_given=args.task)
    X, y = data.X, data.y
    _grid_width_note(search, task, X, args.standardize)
    sparse = sp.issparse(X)
    t0 = time.perf_counter()
    scalers = None
    if args.standardize:
        _check_feature_memory(X.shape[1], sparse, method, True)
        X, y, scalers = _standardized_rows(X, y, sparse, task)
    search.fit(X, y)
    seconds = time.perf_counter() - t0
    _report(args, search, method, data, X.shape, sparse, seconds, scalers)
    return 0


def _standardized_rows(X, y, sparse, task):
    """``search --standardize`` in one process: ``(X, y, scalers)``, the features scaled
    on all rows before the folds and a regression target centred, as ``fit
    --standardize``'s model does (kernel ridge fits no intercept; the scores, MSE and
    R^2, are then those of y itself); ``scalers`` (features', target's or None) for
    :func:`.fit._assembled`."""
    from sklearn.preprocessing import StandardScaler

    from .fit import _feature_scaler

    scaler = _feature_scaler(sparse)
    X = scaler.fit_transform(X)
    if task != "regression":
        return X, y, (scaler, None)
    target = StandardScaler(with_std=False).fit(y.reshape(-1, 1))
    return X, target.transform(y.reshape(-1, 1)).ravel(), (scaler, target)


def _search_mpi(args, cv):
    """``search --backend mpi`` under mpiexec: every rank runs this; rank 0 prints
    and writes. The data are loaded (and standardized) as by ``fit --backend mpi``."""
    from .fit import (_check_output_mpi, _load_data_mpi, _sparse_on_rank_0,
                      _standardized_mpi, _width_note_rows)

    comm = _mpi_world()
    _check_output_mpi(comm, args, [args.data])  # before spending time on the data
    summary, X, y, backend, n = _load_data_mpi(args, comm)
    _check_output_mpi(comm, args, summary.files)  # a registry name's own file
    task, method = _collective(comm, _check_search, args, summary, cv)
    if summary.kind == "file":
        _index_base_note(summary, n, summary.rows_with_index_0)
    search = _collective(comm, _make_search, args, method, task, cv, backend)
    if args.method is not None:
        _collective(comm, _method_against_data, task, summary, f"--method {method}",
                    "search", methods=SEARCHES, task_given=args.task)
    _collective(comm, lambda: _grid_width_note(search, task, X, args.standardize)
                if _width_note_rows(comm, backend, X, n) else None)
    sparse = _sparse_on_rank_0(comm, X)
    t0 = time.perf_counter()
    X, y, scalers = _standardized_mpi(comm, args, X, y, sparse, task)
    with _warnings_of_every_rank(comm):
        search.fit(X, y)  # collective: bad input anywhere is the same error on every rank
    seconds = time.perf_counter() - t0
    shape = (n, search.best_estimator_.n_features_in_)
    _collective(comm, lambda: _report(args, search, method, summary, shape, sparse, seconds,
                                      scalers, n_ranks=comm.size)
                if comm.rank == 0 else None)
    return 0


def _check_search(args, data, cv):
    """``(task, method)`` once the data (or, under MPI, their summary) are known; the
    grids, --cv and --scoring checked against the task."""
    task = _search_task(args, data)
    method = args.method or DEFAULT_SEARCH[task]
    other = ({"--sigmas": args.sigmas, "--lams": args.lams} if task == "classification"
             else {"--Cs": args.Cs, "--gammas": args.gammas})
    given = [k for k, v in other.items() if v is not None]
    if given:
        raise CLIError(f"{', '.join(given)} do not apply to --method {method} ({task})")
    if args.tol is not None and task == "regression":
        raise CLIError(f"--tol does not apply to --method {method}: it is the SVM searches' "
                       "stopping tolerance; kernel ridge solves its linear systems directly, "
                       "with no tolerance")
    if cv == "loo" and task == "classification":
        raise CLIError("--cv loo is the kernel ridge searches' closed-form leave-one-out; "
                       "give a number of folds for an SVM")
    if args.scoring is not None:
        from ..model_selection._krr_search import SCORINGS as KRR_SCORINGS
        from ..model_selection._svm_search import SCORINGS as SVM_SCORINGS

        allowed = sorted(SVM_SCORINGS if task == "classification" else KRR_SCORINGS)
        if args.scoring not in allowed:
            raise CLIError(f"--scoring {args.scoring} is not a scoring of the {task} search "
                           f"(--method {method}); choose one of {', '.join(allowed)}")
    if task == "classification":
        chooser = ("--task classification" if args.task and not args.method
                   else f"--method {method}")
        _check_class_labels(data.label, data.y, chooser, "search")
    if args.task is not None and data.kind != "file":
        # --task's override of a registry dataset's task: noted after every check that
        # could contradict it
        _task_override_note(args.task, data.label, data.task, data.y)
    return task, method


def _grids(args, task):
    return ({"Cs": args.Cs, "gammas": args.gammas} if task == "classification"
            else {"sigmas": args.sigmas, "lams": args.lams})


def _make_search(args, method, task, cv, backend):
    from .. import model_selection

    cls = getattr(model_selection, SEARCHES[method])
    params = {k: v for k, v in _grids(args, task).items() if v is not None}
    if args.tol is not None:  # (_check_search refused it for kernel ridge)
        params["tol"] = args.tol
    search = cls(n_partitions=args.n_partitions, cv=cv, backend=backend,
                 n_jobs=args.n_jobs,
                 random_state=DEFAULT_SEED if args.random_state is None else args.random_state,
                 verbose=not args.quiet,
                 scoring=args.scoring, **params)
    search._validate_params()
    search._grid()  # a bad grid is the error, before the kernel-width note reads it
    return search


def _report(args, search, method, data, shape, sparse, seconds, scalers, n_ranks=None):
    """Print the best candidates and save the refitted best model (``scalers``: those of
    ``--standardize``, the saved model then that of ``fit --standardize``)."""
    from .fit import _assembled

    _print_top(search, args.top)
    _tie_note(search, args.standardize)
    best = search.best_estimator_
    model = best
    if scalers is not None:
        model = _assembled(best, method, _task_of_method(method), *scalers)
    n_cand = len(search.cv_results_["params"])
    chosen = (f" (searched {n_cand} candidate{'s' if n_cand != 1 else ''} x "
              f"{search.n_splits_} split"
              f"{'s' if search.n_splits_ != 1 else ''}; best "
              + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in search.best_params_.items())
              + (f"; tol={args.tol:g}" if getattr(args, "tol", None) is not None else "")
              + ")")
    _save(args, model, best, method, chosen, data, shape, sparse, seconds, n_ranks=n_ranks)


def _grid_width_note(search, task, X, standardize):
    """The kernel-width note of ``fit`` (:func:`._kernel_width_note`) for a grid: when
    the RBF kernel is nearly the identity for every width of the grid."""
    import numbers

    if getattr(search, "kernel", "rbf") != "rbf":
        return
    name = "sigma" if task == "regression" else "gamma"
    widths = list(getattr(search, name + "s"))
    if widths and all(isinstance(w, numbers.Real) and not isinstance(w, bool)
                      for w in widths):  # not 'scale': derived from the data
        _kernel_width_note(X, name, widths, standardize=standardize)


def _tie_note(search, standardized):
    """Note when every candidate scored the same: the grid did not change the model."""
    import numpy as np

    scores = np.asarray(search.cv_results_["mean_test_score"], dtype=float)
    if not np.any(np.isfinite(scores)):
        # (the model was saved as "best" with no word beyond the solves' warnings)
        _warn(f"no candidate has a finite mean score ({'all' if scores.size > 1 else 'its'} "
              f"{'NaN' if np.all(np.isnan(scores)) else 'NaN or infinite'}): the saved "
              "model is the first candidate's, not a selection; see the warnings above")
    elif scores.size > 1 and np.all(np.isfinite(scores)) and np.ptp(scores) == 0:
        _note(f"all {_fmt_int(scores.size)} candidates scored the same ({scores[0]:.6g}): "
              "the grid does not change the model on this data, and the best one is simply "
              "the first; widen the grid"
              + ("" if standardized else " (or standardize the features, --standardize)"))


def _print_top(search, top):
    import numpy as np

    res = search.cv_results_
    order = np.argsort(res["rank_test_score"], kind="stable")[:top]
    from sklearn.base import is_classifier

    scoring = getattr(search, "scoring", None) or (
        "accuracy" if is_classifier(search) else "r2")
    print(f"rank  mean {scoring} (std)      parameters")
    for i in order:
        params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                           for k, v in res["params"][i].items())
        print(f"{res['rank_test_score'][i]:>4}  {res['mean_test_score'][i]:.6f} "
              f"({res['std_test_score'][i]:.4f})  {params}")
    n_cand = len(res["params"])
    print(f"{_fmt_int(n_cand)} candidate{'s' if n_cand != 1 else ''}; partitions "
          f"{search.partition_sizes_.tolist()}")
