"""Hyper-parameter search for the partitioned estimators.

Every estimator of the package works in scikit-learn's
:class:`~sklearn.model_selection.GridSearchCV`; the classes here are faster
routes over the same grids that partition once and share the work between
the grid's points (after Algorithm 10 of the reference for kernel ridge, with
one partitioning of all rows, validation rows included).
"""

from ._krr_search import (
    BKRR2CV,
    BKRRCV,
    DCKRRCV,
    KKRR2CV,
    KKRRCV,
    PartitionedKernelRidgeCV,
)
from ._results import build_cv_results, check_grid
from ._svm_search import BKMSVCCV, CASVCCV, CPSVCCV, FCFSSVCCV, PartitionedSVCCV

__all__ = [
    "PartitionedKernelRidgeCV",
    "BKRR2CV",
    "KKRR2CV",
    "DCKRRCV",
    "BKRRCV",
    "KKRRCV",
    "PartitionedSVCCV",
    "CASVCCV",
    "FCFSSVCCV",
    "BKMSVCCV",
    "CPSVCCV",
    "build_cv_results",
    "check_grid",
]

for _name in __all__[:11]:
    globals()[_name].__module__ = __name__
del _name
