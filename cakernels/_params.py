"""Parameter constraints shared by the estimators (scikit-learn's validation
framework, with the checks it leaves out)."""

import numbers

import numpy as np
from sklearn.utils._param_validation import Interval


class Count(Interval):
    """An integer interval that refuses booleans: scikit-learn's
    ``Interval(Integral, ...)`` accepts ``True`` (a ``bool`` is an ``int``), so
    ``n_partitions=True`` reached the partitioner as one partition count it
    could not use (``TypeError: an integer is required``)."""

    def __init__(self, left, right=None, *, closed="left"):
        super().__init__(numbers.Integral, left, right, closed=closed)

    def is_satisfied_by(self, val):
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


#: ``n_jobs`` as scikit-learn and joblib read it: None, a positive count, or a
#: negative one counted back from the cores; 0 "has no meaning" (joblib) and is
#: refused when the parameters are validated, whatever the backend
N_JOBS = [Count(None, -1, closed="right"), Count(1), None]
