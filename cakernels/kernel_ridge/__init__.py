"""Partitioned kernel ridge regression (chapter 3 of the reference).

Every partition of ``m`` samples solves ``(K + lam * m * I) alpha = y`` by
Cholesky (the package's blocked factorisation on its threads, LAPACK's
kernels through SciPy; in place, float64), eq. (3.6) and
Algorithm 8. The named estimators differ in how they partition and how they
combine the local models:

================  ===========================  ==========================
estimator         partitioner                  combine (prediction)
================  ===========================  ==========================
:class:`DCKRR`    random, balanced             average (Algorithm 8)
:class:`KKRR`     K-means                      average
:class:`KKRR2`    K-means                      nearest centre
:class:`BKRR`     K-balance (Algorithm 9)      average
:class:`BKRR2`    K-balance (Algorithm 9)      nearest centre (Alg. 10)
================  ===========================  ==========================

The oracle bound BKRR3/KKRR3 (Algorithm 11) looks at the true targets, so it
is an evaluation function, :func:`oracle_score`, not a predictor.
"""

from .._solvers.krr import solve_krr
from ._dkrr import DKRR
from ._oracle import oracle_predict, oracle_score
from ._partitioned import BKRR, BKRR2, DCKRR, KKRR, KKRR2, PartitionedKernelRidge

__all__ = [
    "PartitionedKernelRidge",
    "DCKRR",
    "KKRR",
    "KKRR2",
    "BKRR",
    "BKRR2",
    "DKRR",
    "oracle_predict",
    "oracle_score",
    "solve_krr",
]

# public objects report this package as their module (as NumPy's set_module
# does), so that pickles and reprs do not depend on the private file layout
for _name in ["PartitionedKernelRidge", "DCKRR", "KKRR", "KKRR2", "BKRR", "BKRR2", "DKRR",
              "oracle_predict", "oracle_score"]:
    globals()[_name].__module__ = __name__
del _name
