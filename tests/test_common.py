"""scikit-learn's estimator checks over every public estimator and partitioner."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from cakernels import (
    AsyGCDSVC,
    BKMSVC,
    BKRR,
    BKRR2,
    CASVC,
    CPSVC,
    DCKRR,
    FCFSSVC,
    KKRR,
    KKRR2,
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
    CASVC(n_partitions=2, solver="smo", random_state=0),
    CASVC(n_partitions=2, solver="asygcd", random_state=0),
    AsyGCDSVC(n_threads=1, random_state=0),
    AsyGCDSVC(n_threads=1, multi_class="ovr", selection="random", random_state=0),
    DCKRR(n_partitions=2, random_state=0),
    KKRR(n_partitions=2, random_state=0),
    KKRR2(n_partitions=2, random_state=0),
    BKRR(n_partitions=2, random_state=0),
    BKRR2(n_partitions=2, random_state=0),
    PartitionedKernelRidge(partitioner="fcfs", combine="average", n_partitions=2,
                           random_state=0),
    RandomPartitioner(n_partitions=2, random_state=0),
    KMeansPartitioner(n_partitions=2, random_state=0),
    KBalancePartitioner(n_partitions=2, random_state=0),
    FCFSPartitioner(n_partitions=2, random_state=0),
    BKMPartitioner(n_partitions=2, random_state=0),
]


_WEIGHT_REASON = (
    "sample_weight is not equivalent to removing or repeating samples: the local "
    "solver is LIBSVM, for which scikit-learn's own SVC lists the same expected "
    "failure, and removing or repeating samples also changes the partitions"
)

_WEIGHT_REASON_AGCD = (
    "sample_weight is not equivalent to removing or repeating samples: weights scale "
    "the upper bounds C_i (as in LIBSVM, for which scikit-learn's own SVC lists the "
    "same expected failure), and removing or repeating samples also changes the "
    "K-means variable blocks"
)


_ASYNC_REASON = (
    "Asy-GCD with several OpenMP threads is asynchronous: two fits reach the same objective "
    "up to tol, not bitwise the same coefficients"
)


def _expected_failed_checks(estimator):
    expected = {}
    if isinstance(estimator, (PartitionedSVC, AsyGCDSVC)):
        reason = _WEIGHT_REASON if isinstance(estimator, PartitionedSVC) else _WEIGHT_REASON_AGCD
        expected["check_sample_weight_equivalence_on_dense_data"] = reason
        expected["check_sample_weight_equivalence_on_sparse_data"] = reason
    if isinstance(estimator, PartitionedSVC) and estimator.solver in ("asygcd", "pscd"):
        expected["check_fit_idempotent"] = _ASYNC_REASON
    return expected


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failed_checks)
def test_sklearn_compatible(estimator, check):
    check(estimator)
