"""The oracle bound BKRR3/KKRR3 (Algorithm 11): an evaluation function."""

import numpy as np

from ._partitioned import PartitionedKernelRidge

def oracle_predict(model, X, y):
    """Oracle predictions (BKRR3/KKRR3, Algorithm 11).

    For every sample, the prediction of the local model closest to the true
    target. It inspects ``y``, so it is a bound for evaluation, not a
    predictor.

    Parameters
    ----------
    model : fitted PartitionedKernelRidge (any of DCKRR, KKRR, KKRR2, BKRR, BKRR2)
        The model whose local models are asked.
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Test samples.
    y : array-like of shape (n_samples,) or (n_samples, n_targets)
        True targets.

    Returns
    -------
    y_oracle : ndarray of the shape of ``y``

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_regression
    >>> from cakernels import KKRR2, oracle_predict
    >>> X, y = make_regression(n_samples=300, n_features=3, noise=5, random_state=0)
    >>> m = KKRR2(n_partitions=3, sigma=5.0, random_state=0).fit(X, y)
    >>> best = oracle_predict(m, X, y)
    >>> local = m.local_predictions(X)  # every local model's predictions
    >>> bool(np.all(np.abs(best - y) <= np.abs(local - y).min(axis=0)))
    True
    """
    if not isinstance(model, PartitionedKernelRidge):
        raise TypeError(f"oracle_predict needs a partitioned KRR model, got {type(model).__name__}")
    local = model.local_predictions(X)  # (P, n[, t])
    y = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(y)):  # (argmin over NaN errors chose model 0 silently)
        raise ValueError("Input y contains NaN or infinity")
    shape = y.shape
    if shape != local.shape[1:]:
        # one target in either layout, (n,) or (n, 1), as score and the metrics take it
        n = local.shape[1]
        if not (y.ndim in (1, 2) and y.size == n == shape[0] and local[0].size == n):
            raise ValueError(f"y has shape {shape}, predictions have shape {local.shape[1:]}")
        y, local = y.reshape(n), local.reshape(local.shape[0], n)
    err = (local - y[None]) ** 2
    if err.ndim == 3:
        err = err.sum(axis=2)
    best = np.argmin(err, axis=0)
    return local[best, np.arange(local.shape[1])].reshape(shape)


def oracle_score(model, X, y):
    """Mean squared error of the oracle bound BKRR3/KKRR3 (Algorithm 11).

    With a :class:`BKRR2` (or :class:`BKRR`) model this is BKRR3's MSE, with
    a :class:`KKRR2` (or :class:`KKRR`) model KKRR3's: a lower bound on the
    MSE that any rule choosing one local model per sample can reach. Lower
    is better (unlike scikit-learn's ``score``).

    Parameters
    ----------
    model : fitted PartitionedKernelRidge
        The model whose local models are asked.
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        Test samples.
    y : array-like of shape (n_samples,) or (n_samples, n_targets)
        True targets.

    Returns
    -------
    mse : float

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.metrics import mean_squared_error
    >>> from cakernels import BKRR2, oracle_score
    >>> X, y = make_regression(n_samples=300, n_features=3, noise=5, random_state=0)
    >>> m = BKRR2(n_partitions=3, sigma=5.0, random_state=0).fit(X, y)
    >>> bool(oracle_score(m, X, y) <= mean_squared_error(y, m.predict(X)))
    True
    """
    y = np.asarray(y, dtype=np.float64)
    return float(np.mean((oracle_predict(model, X, y) - y) ** 2))
