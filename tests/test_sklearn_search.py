"""The plain scikit-learn route: every partitioned estimator in GridSearchCV,
RandomizedSearchCV and HalvingGridSearchCV (with n_jobs) and in a Pipeline."""

import numpy as np
import pytest
from scipy.stats import loguniform
from sklearn.base import clone
from sklearn.datasets import make_classification, make_regression
from sklearn.experimental import enable_halving_search_cv  # noqa: F401
from sklearn.model_selection import (
    GridSearchCV,
    HalvingGridSearchCV,
    KFold,
    RandomizedSearchCV,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from cakernels import (
    BKMSVC,
    BKRR,
    BKRR2,
    CASVC,
    CPSVC,
    DCKRR,
    FCFSSVC,
    KKRR,
    KKRR2,
    CascadeSVC,
    DCFilterSVC,
    DCSVC,
)

CLASSIFIERS = [CASVC, FCFSSVC, BKMSVC, CPSVC, CascadeSVC, DCSVC, DCFilterSVC]
REGRESSORS = [DCKRR, KKRR, KKRR2, BKRR, BKRR2]


def _clf_data():
    X, y = make_classification(n_samples=200, n_features=5, n_informative=3, random_state=0)
    return StandardScaler().fit_transform(X), y


def _reg_data():
    X, y = make_regression(n_samples=200, n_features=4, noise=5.0, random_state=0)
    return StandardScaler().fit_transform(X), y / y.std()


@pytest.mark.parametrize("cls", CLASSIFIERS + REGRESSORS)
def test_grid_search_with_processes_equals_one_process(cls):
    if cls in CLASSIFIERS:
        X, y = _clf_data()
        grid = {"C": [0.5, 5.0], "gamma": [0.1, "scale"]}
    else:
        X, y = _reg_data()
        grid = {"sigma": [1.0, 4.0], "lam": [1e-5, 1e-2]}
    est = cls(n_partitions=2, random_state=0)
    one = GridSearchCV(est, grid, cv=3, error_score="raise").fit(X, y)
    two = GridSearchCV(est, grid, cv=3, n_jobs=2, error_score="raise").fit(X, y)
    np.testing.assert_array_equal(one.cv_results_["mean_test_score"],
                                  two.cv_results_["mean_test_score"])
    assert one.best_params_ == two.best_params_
    assert two.best_estimator_.predict(X[:4]).shape == (4,)
    assert clone(est).get_params() == est.get_params()


def test_grid_search_scores_are_the_estimators_own_refits():
    X, y = _reg_data()
    grid = {"sigma": [1.0, 4.0], "lam": [1e-4, 1e-2]}
    cv = KFold(3, shuffle=True, random_state=0)
    gs = GridSearchCV(BKRR2(n_partitions=2, random_state=0), grid, cv=cv).fit(X, y)
    for i, params in enumerate(gs.cv_results_["params"]):
        scores = [BKRR2(n_partitions=2, random_state=0, **params).fit(X[tr], y[tr])
                  .score(X[va], y[va]) for tr, va in cv.split(X)]
        np.testing.assert_allclose(gs.cv_results_["mean_test_score"][i], np.mean(scores),
                                   rtol=1e-10)


@pytest.mark.parametrize("cls, dists", [
    (BKMSVC, {"C": loguniform(0.1, 100), "gamma": loguniform(0.01, 1)}),
    (KKRR2, {"sigma": loguniform(0.5, 8), "lam": loguniform(1e-6, 1e-1)}),
])
def test_randomized_and_halving_searches(cls, dists):
    X, y = _clf_data() if cls is BKMSVC else _reg_data()
    est = cls(n_partitions=2, random_state=0)
    rs = RandomizedSearchCV(est, dists, n_iter=4, cv=3, n_jobs=2, random_state=0,
                            error_score="raise").fit(X, y)
    assert len(rs.cv_results_["params"]) == 4 and np.isfinite(rs.best_score_)
    grid = {k: list(v.rvs(size=3, random_state=1)) for k, v in dists.items()}
    hs = HalvingGridSearchCV(est, grid, cv=3, n_jobs=2, factor=3, min_resources=60,
                             random_state=0, error_score="raise").fit(X, y)
    assert hs.n_iterations_ >= 2 and np.isfinite(hs.best_score_)


def test_pipeline_with_a_scaler_in_grid_search():
    X, y = make_regression(n_samples=200, n_features=4, noise=5.0, random_state=1)
    X = X * [1, 10, 100, 1000]
    pipe = make_pipeline(StandardScaler(), BKRR2(n_partitions=2, random_state=0))
    gs = GridSearchCV(pipe, {"bkrr2__sigma": [1.0, 3.0], "bkrr2__lam": [1e-4, 1e-2]},
                      cv=3).fit(X, y)
    refit = clone(pipe).set_params(**gs.best_params_).fit(X, y)
    assert gs.score(X, y) == pytest.approx(refit.score(X, y), rel=1e-12)


@pytest.mark.parametrize("cls, bad", [(CASVC, {"C": [0.0]}), (BKRR2, {"sigma": [-1.0]})])
def test_invalid_grid_values_name_the_parameter(cls, bad):
    X, y = _clf_data() if cls is CASVC else _reg_data()
    with pytest.raises(ValueError, match=list(bad)[0]):
        GridSearchCV(cls(n_partitions=2), bad, cv=2, error_score="raise").fit(X, y)
