"""Hyper-parameter search for the partitioned estimators.

Every estimator of the package works in scikit-learn's
:class:`~sklearn.model_selection.GridSearchCV`; the classes here are faster
routes over the same grids that partition once and share the work between
the grid's points (Algorithm 10 of the reference for kernel ridge).
"""

from ._results import build_cv_results, check_grid

__all__ = ["build_cv_results", "check_grid"]
