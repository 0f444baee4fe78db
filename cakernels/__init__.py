"""cakernels: communication-avoiding kernel methods.

Partitioned kernel SVM classifiers and kernel ridge regressors with the
scikit-learn API: split the training set, solve every part independently
(no communication), combine. See the README for which estimator to use when.
"""

from ._version import __version__
from .kernel_ridge import (
    BKRR,
    BKRR2,
    DCKRR,
    KKRR,
    KKRR2,
    PartitionedKernelRidge,
    oracle_predict,
    oracle_score,
)
from .partition import (
    BKMPartitioner,
    FCFSPartitioner,
    KBalancePartitioner,
    KMeansPartitioner,
    RandomPartitioner,
)
from .svm import BKMSVC, CASVC, CPSVC, FCFSSVC, AsyGCDSVC, PartitionedSVC

__all__ = [
    "__version__",
    "CASVC",
    "FCFSSVC",
    "BKMSVC",
    "CPSVC",
    "PartitionedSVC",
    "AsyGCDSVC",
    "DCKRR",
    "KKRR",
    "KKRR2",
    "BKRR",
    "BKRR2",
    "PartitionedKernelRidge",
    "oracle_predict",
    "oracle_score",
    "RandomPartitioner",
    "KMeansPartitioner",
    "KBalancePartitioner",
    "FCFSPartitioner",
    "BKMPartitioner",
    "show_config",
]


def show_config():
    """Versions and build facts (OpenMP, BLAS, MPI availability) as a dict."""
    from ._info import build_info

    return build_info()
