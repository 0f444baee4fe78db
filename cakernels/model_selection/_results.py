"""Grid validation and ``cv_results_`` in scikit-learn's format, shared by the
fast searches of :mod:`cakernels.model_selection`."""

import numbers

import numpy as np
from scipy.stats import rankdata


def check_grid(name, values, *, allow_zero=False):
    """Validate one axis of a hyper-parameter grid.

    Parameters
    ----------
    name : str
        Parameter name, for the error message (``'sigmas'``, ``'lams'``...).
    values : array-like of real numbers
        The grid values, in the order the user gave them (kept).
    allow_zero : bool, default=False
        Whether 0 is a valid value (a ridge ``lam`` may be 0; a width may not).

    Returns
    -------
    values : ndarray of shape (n_values,), float64
        A new array (the user's sequence is never modified).

    Raises
    ------
    ValueError
        Empty, not one-dimensional, not real, NaN/inf, negative (or zero when
        ``allow_zero`` is False), or with repeated values.

    Examples
    --------
    >>> from cakernels.model_selection import check_grid
    >>> check_grid("lams", [1e-3, 0, 1e-6], allow_zero=True)
    array([1.e-03, 0.e+00, 1.e-06])
    >>> check_grid("sigmas", [1.0, 1.0])
    Traceback (most recent call last):
        ...
    ValueError: ...
    """
    if isinstance(values, (str, bytes)) or values is None:
        raise ValueError(f"{name} must be a non-empty sequence of numbers, got {values!r}")
    if isinstance(values, numbers.Real):
        values = [values]
    if not (isinstance(values, np.ndarray) and values.dtype.kind in "biuf"):
        # np.array(..., float64) parses '1.0' and makes None NaN: the estimators
        # take numbers only
        try:
            items = np.asarray(values, dtype=object).ravel().tolist()
        except (TypeError, ValueError):
            items = []
        bad = [v for v in items if not isinstance(v, numbers.Real)]
        if bad:
            raise ValueError(f"{name} must hold real numbers, got {bad[0]!r}")
    try:
        arr = np.array(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a sequence of real numbers ({exc})") from None
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty one-dimensional sequence of numbers, "
                         f"got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values: {arr.tolist()}")
    bad = arr < 0 if allow_zero else arr <= 0
    if np.any(bad):
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"every value of {name} must be {need}, got {arr[bad].tolist()}")
    if np.unique(arr).size != arr.size:
        raise ValueError(f"{name} has repeated values: {arr.tolist()}")
    return arr


def build_cv_results(params, test_scores, fit_times=None, score_times=None,
                     train_scores=None):
    """``cv_results_`` as :class:`~sklearn.model_selection.GridSearchCV` builds it.

    Parameters
    ----------
    params : list of dict
        One dict of parameter values per candidate, in candidate order.
    test_scores : ndarray of shape (n_candidates, n_splits)
        Validation score of every candidate on every split (greater is
        better, scikit-learn's convention).
    fit_times, score_times : ndarray of shape (n_candidates, n_splits), default=None
        Seconds spent per candidate and split (zeros when not given). In a
        shared-factorisation search they are the candidate's share of the
        work, not a separate fit.
    train_scores : ndarray of shape (n_candidates, n_splits), default=None
        Adds ``split{i}_train_score``, ``mean_train_score`` and
        ``std_train_score``.

    Returns
    -------
    cv_results : dict of ndarray
        Keys ``mean_fit_time``, ``std_fit_time``, ``mean_score_time``,
        ``std_score_time``, ``param_<name>`` (masked arrays), ``params``,
        ``split{i}_test_score``, ``mean_test_score``, ``std_test_score`` and
        ``rank_test_score`` (1 is best; ties share the lowest rank and NaN
        scores rank last, as scikit-learn's).

    Examples
    --------
    >>> import numpy as np
    >>> from cakernels.model_selection import build_cv_results
    >>> params = [{"sigma": 1.0}, {"sigma": 2.0}]
    >>> scores = np.array([[0.8, 0.6], [0.9, 0.9]])
    >>> res = build_cv_results(params, scores)
    >>> res["mean_test_score"], res["rank_test_score"]
    (array([0.7, 0.9]), array([2, 1], dtype=int32))
    >>> res["param_sigma"].tolist(), res["split1_test_score"]
    ([1.0, 2.0], array([0.6, 0.9]))
    """
    test_scores = np.asarray(test_scores, dtype=np.float64)
    n_cand, n_splits = test_scores.shape
    if len(params) != n_cand:
        raise ValueError(f"{len(params)} parameter sets for {n_cand} rows of scores")
    zeros = np.zeros((n_cand, n_splits))
    fit_times = zeros if fit_times is None else np.asarray(fit_times, dtype=np.float64)
    score_times = zeros if score_times is None else np.asarray(score_times, dtype=np.float64)
    res = {
        "mean_fit_time": fit_times.mean(axis=1), "std_fit_time": fit_times.std(axis=1),
        "mean_score_time": score_times.mean(axis=1),
        "std_score_time": score_times.std(axis=1),
    }
    names = []
    for p in params:
        names.extend(k for k in p if k not in names)
    for name in names:
        vals = [p.get(name) for p in params]
        present = [v for v in vals if v is not None]
        # one numeric dtype when every value is a number, else object (as
        # GridSearchCV: gamma=[0.1, 'scale'] keeps the float and the string)
        numeric = present and all(isinstance(v, (int, float, np.number))
                                  and not isinstance(v, bool) for v in present)
        arr = np.ma.MaskedArray(np.empty(n_cand, dtype=np.asarray(present).dtype
                                         if numeric else object), mask=True)
        for i, v in enumerate(vals):
            if name in params[i]:
                arr[i] = v
        res[f"param_{name}"] = arr
    res["params"] = [dict(p) for p in params]
    _add_scores(res, "test", test_scores)
    if train_scores is not None:
        _add_scores(res, "train", np.asarray(train_scores, dtype=np.float64), rank=False)
    return res


def _add_scores(res, kind, scores, rank=True):
    for i in range(scores.shape[1]):
        res[f"split{i}_{kind}_score"] = scores[:, i].copy()
    with np.errstate(invalid="ignore"):
        mean = scores.mean(axis=1)
        std = scores.std(axis=1)
    res[f"mean_{kind}_score"] = mean
    res[f"std_{kind}_score"] = std
    if rank:
        # GridSearchCV: rank by mean, ties share the minimum rank, NaN last
        filled = np.where(np.isnan(mean), np.nanmin(mean) - 1 if np.any(~np.isnan(mean))
                          else 0.0, mean)
        res[f"rank_{kind}_score"] = np.asarray(rankdata(-filled, method="min"),
                                               dtype=np.int32)
