"""scikit-learn's estimator checks over every public estimator and partitioner."""

import os
import re
import sys
from pathlib import Path

import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.utils.estimator_checks import (
    check_dataframe_column_names_consistency,
    parametrize_with_checks,
)

from cakernels import (
    AsyGCDSVC,
    BKMSVC,
    BKRR,
    BKRR2,
    BKRR2CV,
    CASVC,
    CASVCCV,
    CPSVCCV,
    DCKRRCV,
    DCSVC,
    DKRR,
    CPSVC,
    DCKRR,
    CascadeSVC,
    DCFilterSVC,
    DisSMOSVC,
    FCFSSVC,
    KKRR,
    KKRR2,
    KKRRCV,
    PartitionedKernelRidge,
    PartitionedSVC,
)
from cakernels.partition import (
    BKMPartitioner,
    FCFSPartitioner,
    KBalancePartitioner,
    KMeansPartitioner,
    RandomPartitioner,
)

# Small partition counts: the checks use datasets of 10-150 samples.
ESTIMATORS = [
    CASVC(n_partitions=2, random_state=0),
    FCFSSVC(n_partitions=2, random_state=0),
    BKMSVC(n_partitions=2, random_state=0),
    CPSVC(n_partitions=2, random_state=0),
    PartitionedSVC(partitioner="kbalance", n_partitions=2, random_state=0),
    CASVC(n_partitions=2, solver="libsvm", random_state=0),  # the default is "smo"
    CASVC(n_partitions=2, solver="asygcd", random_state=0),
    CASVC(n_partitions=2, solver="pscd", random_state=0),
    AsyGCDSVC(n_threads=1, random_state=0),
    AsyGCDSVC(n_threads=1, multi_class="ovr", selection="random", random_state=0),
    CascadeSVC(n_partitions=2, random_state=0),
    CascadeSVC(n_partitions=2, n_passes=2, solver="libsvm", random_state=0),
    DCSVC(n_partitions=2, random_state=0),
    DCSVC(n_partitions=2, predict_layer=1, random_state=0),
    DCFilterSVC(n_partitions=2, random_state=0),
    DisSMOSVC(),
    DisSMOSVC(backend="threads", n_jobs=2),
    DisSMOSVC(working_set="second-order"),
    DCKRR(n_partitions=2, random_state=0),
    KKRR(n_partitions=2, random_state=0),
    KKRR2(n_partitions=2, random_state=0),
    BKRR(n_partitions=2, random_state=0),
    BKRR2(n_partitions=2, random_state=0),
    PartitionedKernelRidge(partitioner="fcfs", combine="average", n_partitions=2,
                           random_state=0),
    DKRR(),
    RandomPartitioner(n_partitions=2, random_state=0),
    KMeansPartitioner(n_partitions=2, random_state=0),
    KBalancePartitioner(n_partitions=2, random_state=0),
    FCFSPartitioner(n_partitions=2, random_state=0),
    BKMPartitioner(n_partitions=2, random_state=0),
    # the fast searches (one of each family and, as K-means partitions can hold a
    # single row, one on K-means partitions; the others share their code)
    CASVCCV(n_partitions=2, Cs=[1.0, 10.0], cv=2, random_state=0),
    CPSVCCV(n_partitions=2, Cs=[1.0, 10.0], cv=2, random_state=0),
    BKRR2CV(n_partitions=2, sigmas=[1.0, 3.0], lams=[1e-3], cv=2, random_state=0),
    KKRRCV(n_partitions=2, sigmas=[1.0, 3.0], lams=[1e-3], cv=2, random_state=0),
]


_WEIGHT_REASON = (
    "sample_weight is not equivalent to repeating samples here: gamma='scale' counts "
    "every row, the repeated ones too (scikit-learn's own SVC lists the same expected "
    "failure; with a fixed gamma and a small tol one partition passes), the solvers stop "
    "at tol, and repeating samples changes the partitions (a weight of 0 equals removing "
    "the row: such rows are not partitioned)"
)

_WEIGHT_REASON_KRR = (
    "sample_weight is not equivalent to repeating samples: repeated samples change the "
    "partitions (random, K-means and balanced ones), hence every local problem; a weight "
    "of 0 equals removing the row (such rows are not partitioned), and one partition "
    "equals KernelRidge with the same weights (tests/test_kernel_ridge.py)"
)

_WEIGHT_REASON_SEARCH = (
    "sample_weight is not equivalent to removing or repeating samples: removed or "
    "repeated rows change the validation splits and repeated ones the partitions (and "
    "for the SVMs gamma='scale' counts every row, as for scikit-learn's own SVC, which "
    "lists the same expected failure)"
)

_WEIGHT_REASON_AGCD = (
    "sample_weight is not equivalent to removing or repeating samples: gamma='scale' "
    "counts every row, the repeated ones too, and the solver stops at tol (scikit-learn's "
    "own SVC lists the same expected failure; with a fixed gamma and tol=1e-12 it "
    "passes), and removing or repeating samples also changes the K-means variable blocks"
)

_WEIGHT_REASON_SMO = (
    "sample_weight is not equivalent to removing or repeating samples: gamma='scale' "
    "counts every row, the repeated ones too, and the solver stops at tol (scikit-learn's "
    "own SVC lists the same expected failure; with a fixed gamma and tol=1e-12 it passes)"
)


def _expected_failed_checks(estimator):
    expected = {}
    if isinstance(estimator, (PartitionedSVC, AsyGCDSVC, CascadeSVC, DCSVC, DCFilterSVC,
                              DisSMOSVC)):
        reason = {AsyGCDSVC: _WEIGHT_REASON_AGCD, DisSMOSVC: _WEIGHT_REASON_SMO}.get(
            type(estimator), _WEIGHT_REASON)
        expected["check_sample_weight_equivalence_on_dense_data"] = reason
        expected["check_sample_weight_equivalence_on_sparse_data"] = reason
    if isinstance(estimator, PartitionedKernelRidge):
        expected["check_sample_weight_equivalence_on_dense_data"] = _WEIGHT_REASON_KRR
        expected["check_sample_weight_equivalence_on_sparse_data"] = _WEIGHT_REASON_KRR
    if isinstance(estimator, (CASVCCV, DCKRRCV)):
        expected["check_sample_weight_equivalence_on_dense_data"] = _WEIGHT_REASON_SEARCH
        expected["check_sample_weight_equivalence_on_sparse_data"] = _WEIGHT_REASON_SEARCH
    if isinstance(estimator, CASVCCV):
        expected["check_non_transformer_estimators_n_iter"] = (
            "a search has no one iteration count (as GridSearchCV, which has no max_iter "
            "to trigger the check): fit_stats_['n_iter'] holds the search's solver "
            "iterations, best_estimator_.n_iter_ the refit's")
    # (Asy-GCD and PSCD pass check_fit_idempotent: they run the checks' small problems
    # on one thread, deterministically - at least MIN_ROWS_PER_THREAD variables per
    # thread; several asynchronous threads agree to tol, not bitwise)
    return expected


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_dataframe_column_names_consistency(estimator):
    # not among the checks parametrize_with_checks yields: feature_names_in_
    # and the errors on other column names, as in scikit-learn's estimators
    # (partitioners have no predict; tests/test_pandas.py checks assign)
    check_dataframe_column_names_consistency(type(estimator).__name__, estimator)


def _generates_check(estimator, name):
    """Whether scikit-learn's checks for ``estimator`` include ``name``."""
    from functools import partial

    from sklearn.utils.estimator_checks import estimator_checks_generator

    for _, check in estimator_checks_generator(estimator):
        while hasattr(check, "__wrapped__"):
            check = check.__wrapped__
        if (check.func if isinstance(check, partial) else check).__name__ == name:
            return True
    return False


def test_array_api_checks_run_with_scipy_array_api(spawn):
    # The checks check_array_api_input(array_namespace=numpy) above are skipped
    # unless SCIPY_ARRAY_API=1 is set before SciPy is imported (they need no
    # array-api-strict); run them in a child interpreter that sets it.
    if os.environ.get("SCIPY_ARRAY_API"):
        pytest.skip("SCIPY_ARRAY_API is set: the checks above ran in this process")
    if not any(_generates_check(est, "check_array_api_input") for est in ESTIMATORS):
        # scikit-learn 1.6-1.7 generate it only for estimators that declare array API
        # support (later versions always do, with the NumPy namespace)
        pytest.skip("this scikit-learn generates no check_array_api_input for these "
                    "estimators (they do not declare array API support)")
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    proc = spawn([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                  str(Path(__file__)), "-k", "check_array_api_input"],
                 cwd=Path(__file__).parent.parent, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(rf"\b{len(ESTIMATORS)} passed\b", proc.stdout), proc.stdout
    assert "skipped" not in proc.stdout, proc.stdout


def _public_estimator_classes():
    import inspect

    import cakernels
    import cakernels.kernel_ridge
    import cakernels.model_selection
    import cakernels.partition
    import cakernels.svm

    seen = {}
    for module in (cakernels, cakernels.svm, cakernels.kernel_ridge, cakernels.partition,
                   cakernels.model_selection):
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isclass(obj) and issubclass(obj, BaseEstimator):
                seen[obj.__name__] = obj
    return sorted(seen.items())


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10 names only __init__()")
@pytest.mark.parametrize("name, cls", _public_estimator_classes())
def test_unknown_keyword_error_names_the_class_itself(name, cls):
    """BKRR2 inherits DCKRR's constructor; its error must not say DCKRR (a user who
    tries scikit-learn's ``gamma`` or ``alpha`` would look for the wrong class)."""
    with pytest.raises(TypeError, match=rf"^{name}\.__init__\(\) got an unexpected keyword "
                                        "argument 'gamma_typo'"):
        cls(gamma_typo=1)
    # the renamed constructor is the same function: parameters, clone, repr
    est = cls()
    assert clone(est).get_params() == est.get_params()
    assert repr(est).startswith(name)


def _count_parameters():
    from cakernels._params import Count

    cases = []
    for name, cls in _public_estimator_classes():
        for param, constraints in getattr(cls, "_parameter_constraints", {}).items():
            if param in cls().get_params() and any(isinstance(c, Count) for c in constraints):
                cases.append((name, cls, param))
    return cases


@pytest.mark.parametrize("name, cls, param", _count_parameters())
@pytest.mark.parametrize("value", [True, False])
def test_counts_refuse_booleans(name, cls, param, value):
    """``n_partitions=True`` passed scikit-learn's ``Interval(Integral, ...)``
    (a bool is an int) and failed deep in a partitioner with ``TypeError: an
    integer is required``; a count is an int, never a bool."""
    from sklearn.utils._param_validation import InvalidParameterError

    X, y = _small_problem(cls)
    with pytest.raises(InvalidParameterError, match=rf"'{param}' parameter of {name} "
                                                   rf"must be an int.*Got {value} instead"):
        cls(**{param: value}).fit(X, y)


@pytest.mark.parametrize("name, cls", [(n, c) for n, c in _public_estimator_classes()
                                       if "n_jobs" in c().get_params()])
def test_n_jobs_zero_is_refused_whatever_the_backend(name, cls):
    """joblib: ``n_jobs == 0 has no meaning``; the serial backend ignored it."""
    from sklearn.utils._param_validation import InvalidParameterError

    X, y = _small_problem(cls)
    with pytest.raises(InvalidParameterError, match=rf"'n_jobs' parameter of {name}.*Got 0"):
        cls(n_jobs=0).fit(X, y)
    cls(n_jobs=-1).get_params()  # negative counts stay valid


def _small_problem(cls):
    from sklearn.base import is_classifier
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=60, n_features=4, random_state=0)
    return (X, y) if is_classifier(cls()) else (X, y.astype(float))
