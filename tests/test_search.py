"""The fast searches: the KRR family against brute-force refits
on the same partitions and folds, leave-one-out against refits without each
row, the selection against GridSearchCV; the SVM search against LIBSVM refits
and its warm start over C."""

import re
import warnings

import numpy as np
import pytest
from scipy import linalg
import scipy.sparse as sp
import sklearn
from sklearn.base import clone
from sklearn.datasets import make_regression
from sklearn.metrics import (
    mean_absolute_error,
    mean_squared_error,
    r2_score,
    root_mean_squared_error,
)
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import (
    GridSearchCV,
    GroupKFold,
    KFold,
    LeaveOneOut,
    PredefinedSplit,
    ParameterGrid,
    ShuffleSplit,
)

from cakernels import BKRR2, BKRR2CV, BKRRCV, DCKRRCV, KKRR2CV, KKRRCV, PartitionedKernelRidgeCV
from cakernels.model_selection._krr_search import EIGH_MIN_LAMS

METRICS = {"r2": r2_score, "neg_mean_squared_error": mean_squared_error,
           "neg_root_mean_squared_error": root_mean_squared_error,
           "neg_mean_absolute_error": mean_absolute_error}


def _data(n=240, d=4, seed=0, targets=1):
    X, y = make_regression(n_samples=n, n_features=d, noise=5.0, random_state=seed,
                           n_targets=targets)
    X = (X - X.mean(0)) / X.std(0)
    return X, y / np.std(y)


def _brute_route(part, X, trained):
    """Nearest-centre routing; a row whose partition has no training row in the
    split goes to the nearest centre of those that have (``trained``)."""
    route = part.assign(X)
    lost = ~np.isin(route, trained)
    if lost.any():
        C = part.centers_[trained]
        d = ((X[lost][:, None, :] - C[None, :, :]) ** 2).sum(-1)
        route[lost] = trained[np.argmin(d, axis=1)]
    return route


def _brute_split_scores(search, X, y, splits, scoring, sample_weight=None):
    """Refit every partition on its training rows of every split from scratch
    (sklearn's rbf_kernel and numpy's solve; with ``sample_weight``, the
    weighted problem ``(W K + lam sum(w) I) alpha = W y`` of KernelRidge, on
    partitions of the rows of positive weight) and score the routed or
    averaged validation predictions (weighted by ``sample_weight`` too). A
    partition without training rows in a split has no model there: its rows go
    to the nearest partition that has (or the average leaves it out)."""
    part = search.partitioner_
    w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
    labels = np.full(len(y), -1)
    labels[w > 0] = part.labels_
    P = search.partition_sizes_.size
    average = search._combine_mode == "average"
    out = np.zeros((len(search.cv_results_["params"]), len(splits)))
    for c, params in enumerate(search.cv_results_["params"]):
        gamma = 1.0 / (2 * params["sigma"] ** 2)
        for f, (train, val) in enumerate(splits):
            tr = np.zeros(len(y), bool)
            tr[train] = True
            preds = np.zeros((P, len(val)) + y.shape[1:])
            trained = np.flatnonzero([np.any((labels == j) & tr) for j in range(P)])
            for j in trained:
                T = np.flatnonzero((labels == j) & tr)
                K = rbf_kernel(X[T], X[T], gamma=gamma)
                if sample_weight is None:
                    alpha = np.linalg.solve(K + params["lam"] * T.size * np.eye(T.size), y[T])
                else:
                    W = np.diag(w[T])
                    alpha = np.linalg.solve(W @ K + params["lam"] * w[T].sum()
                                            * np.eye(T.size), W @ y[T])
                preds[j] = rbf_kernel(X[val], X[T], gamma=gamma) @ alpha
            if average:
                pred = preds[trained].mean(axis=0)
            else:
                route = _brute_route(part, X[val], trained)
                pred = preds[route, np.arange(len(val))]
            value = METRICS[scoring](y[val], pred, sample_weight=w[val])
            out[c, f] = value if scoring == "r2" else -value
    return out


@pytest.mark.parametrize("cls", [BKRR2CV, DCKRRCV, KKRR2CV])
@pytest.mark.parametrize("solver", ["cholesky", "eigh"])
def test_kfold_scores_equal_refits_on_the_same_partitions_and_folds(cls, solver):
    X, y = _data()
    cv = KFold(3, shuffle=True, random_state=1)
    search = cls(n_partitions=3, sigmas=[0.7, 2.0], lams=[1e-4, 1e-2], cv=cv, solver=solver,
                 random_state=0).fit(X, y)
    brute = _brute_split_scores(search, X, y, list(cv.split(X)), "r2")
    got = np.column_stack([search.cv_results_[f"split{f}_test_score"] for f in range(3)])
    np.testing.assert_allclose(got, brute, rtol=1e-8)
    assert search.fit_stats_["solver"] == solver


@pytest.mark.parametrize("cls", [KKRR2CV, KKRRCV])
def test_a_partition_without_training_rows_in_a_split_has_no_model_there(cls):
    # an outlier is a K-means cluster of its own: in the split it validates, its
    # partition has no training row. The search refused every such dataset ("use fewer
    # partitions or folds", which never helped); now, as K-means drops an empty
    # cluster, its rows go to the nearest partition with training rows (averaging:
    # the average of those), as the refits on the same partitions and folds
    X, y = _data()
    X[0] += 40.0
    cv = KFold(3, shuffle=True, random_state=1)
    search = cls(n_partitions=4, sigmas=[0.7, 2.0], lams=[1e-4, 1e-2], cv=cv,
                 random_state=0).fit(X, y)
    assert 1 in search.partition_sizes_.tolist()
    brute = _brute_split_scores(search, X, y, list(cv.split(X)), "r2")
    got = np.column_stack([search.cv_results_[f"split{f}_test_score"] for f in range(3)])
    np.testing.assert_allclose(got, brute, rtol=1e-8)
    # the refit keeps every partition, the outlier's too
    assert search.best_estimator_.partition_sizes_.tolist() == search.partition_sizes_.tolist()


@pytest.mark.parametrize("cls", [BKRR2CV, DCKRRCV, KKRR2CV])
@pytest.mark.parametrize("solver", ["cholesky", "eigh"])
def test_weighted_kfold_scores_equal_weighted_refits(cls, solver):
    """sample_weight: every split solves KernelRidge's weighted problem on each
    partition's training rows (rows of weight 0 left out of the partitions)
    and weighs the validation rows' errors; the refit is the estimator's
    weighted fit; the weights are not modified."""
    X, y = _data(targets=2)
    rng = np.random.default_rng(3)
    w = rng.uniform(0.2, 3.0, len(y))
    w[::7] = 0.0
    w_before = w.copy()
    cv = KFold(3, shuffle=True, random_state=1)
    search = cls(n_partitions=3, sigmas=[0.7, 2.0], lams=[1e-4, 1e-2], cv=cv, solver=solver,
                 random_state=0).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(w, w_before)
    assert search.partition_sizes_.sum() == np.count_nonzero(w)
    brute = _brute_split_scores(search, X, y, list(cv.split(X)), "r2", sample_weight=w)
    got = np.column_stack([search.cv_results_[f"split{f}_test_score"] for f in range(3)])
    np.testing.assert_allclose(got, brute, rtol=1e-8)
    plain = cls(n_partitions=3, sigmas=[0.7, 2.0], lams=[1e-4, 1e-2], cv=cv, solver=solver,
                random_state=0).fit(X, y)
    assert not np.allclose(plain.cv_results_["mean_test_score"],
                           search.cv_results_["mean_test_score"])
    refit = search._make_estimator(**search.best_params_).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(search.predict(X), refit.predict(X))


@pytest.mark.parametrize("scoring", sorted(METRICS))
def test_weighted_scores_are_scikit_learn_weighted_metrics(scoring):
    X, y = _data(seed=2)
    w = np.random.default_rng(4).uniform(0.0, 2.0, len(y))
    cv = KFold(3, shuffle=True, random_state=2)
    search = BKRR2CV(n_partitions=3, sigmas=[0.7, 2.0], lams=[1e-4, 1e-2], cv=cv,
                     scoring=scoring, random_state=0).fit(X, y, sample_weight=w)
    brute = _brute_split_scores(search, X, y, list(cv.split(X)), scoring, sample_weight=w)
    got = np.column_stack([search.cv_results_[f"split{f}_test_score"] for f in range(3)])
    np.testing.assert_allclose(got, brute, rtol=1e-8)


@pytest.mark.skipif(tuple(int(v) for v in sklearn.__version__.split(".")[:2]) < (1, 7),
                    reason="GridSearchCV passes sample_weight to its scorer from 1.7 on")
@pytest.mark.parametrize("combine_cls", [BKRR2CV, DCKRRCV])
def test_one_partition_weighted_search_equals_gridsearchcv(combine_cls):
    """With one partition the protocols agree: the weighted search equals
    GridSearchCV over the estimator with the same weights and folds."""
    X, y = _data(n=150)
    w = np.random.default_rng(5).uniform(0.1, 3.0, len(y))
    cv = KFold(3, shuffle=True, random_state=0)
    grid = {"sigma": [0.7, 2.0], "lam": [1e-4, 1e-2]}
    search = combine_cls(n_partitions=1, sigmas=grid["sigma"], lams=grid["lam"], cv=cv,
                         scoring="neg_mean_squared_error").fit(X, y, sample_weight=w)
    ref = GridSearchCV(combine_cls._estimator_class(n_partitions=1), grid, cv=cv,
                       scoring="neg_mean_squared_error").fit(X, y, sample_weight=w)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"],
                               ref.cv_results_["mean_test_score"], rtol=1e-8)


def test_weights_of_one_equal_the_unweighted_search_bit_for_bit():
    X, y = _data()
    kw = dict(n_partitions=3, sigmas=[0.7, 2.0], lams=[1e-4, 1e-2], cv=3, random_state=0)
    for solver in ("cholesky", "eigh"):
        ones = BKRR2CV(solver=solver, **kw).fit(X, y, sample_weight=np.ones(len(y)))
        plain = BKRR2CV(solver=solver, **kw).fit(X, y)
        np.testing.assert_array_equal(ones.cv_results_["mean_test_score"],
                                      plain.cv_results_["mean_test_score"])


def test_loo_with_sample_weight_is_refused():
    X, y = _data(n=60)
    with pytest.raises(ValueError, match="cv='loo' takes no sample_weight"):
        BKRR2CV(n_partitions=2, sigmas=[1.0], lams=[1e-3], cv="loo").fit(
            X, y, sample_weight=np.ones(len(y)))


@pytest.mark.parametrize("scoring", sorted(METRICS))
def test_every_scoring_equals_scikit_learn_metric_on_refits(scoring):
    X, y = _data(seed=3)
    cv = KFold(3)
    search = BKRR2CV(n_partitions=2, sigmas=[1.0, 3.0], lams=[1e-3], cv=cv, scoring=scoring,
                     random_state=0).fit(X, y)
    brute = _brute_split_scores(search, X, y, list(cv.split(X)), scoring)
    got = np.column_stack([search.cv_results_[f"split{f}_test_score"] for f in range(3)])
    np.testing.assert_allclose(got, brute, rtol=1e-8)
    # score() is the search's scorer on the refitted model, as GridSearchCV.score
    value = METRICS[scoring](y, search.best_estimator_.predict(X))
    assert search.score(X, y) == pytest.approx(value if scoring == "r2" else -value,
                                                rel=1e-12)


@pytest.mark.parametrize("noise", [1e-1, 1e-3, 1e-4])
def test_r2_of_a_fold_far_from_the_mean_does_not_cancel(noise):
    """A validation fold whose targets sit far from the others' with a small
    spread: its r2 is scikit-learn's (the sums were taken about the mean of
    all rows, and the fold's total sum of squares cancelled to 0)."""
    rng = np.random.RandomState(0)
    X = rng.randn(80, 2)
    fold = np.arange(80) < 20
    y = np.where(fold, 1000.0, -300.0) + noise * rng.randn(80)
    cv = PredefinedSplit(np.where(fold, 0, -1))
    grid = {"sigma": [1.0, 3.0], "lam": [1e-6, 1e-2]}
    search = BKRR2CV(n_partitions=1, sigmas=grid["sigma"], lams=grid["lam"], cv=cv,
                     random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", linalg.LinAlgWarning)
        ref = GridSearchCV(BKRR2(n_partitions=1, random_state=0), grid, cv=cv).fit(X, y)
    np.testing.assert_allclose(search.cv_results_["split0_test_score"],
                               ref.cv_results_["split0_test_score"], rtol=1e-8)


@pytest.mark.parametrize("scoring", ["r2", "neg_mean_squared_error"])
def test_a_split_whose_validation_rows_weigh_nothing_scores_nan(scoring):
    """As GridSearchCV: NaN for that split (r2 scored it 1.0: 0 residual of 0
    total), with a warning that names the weights, not the predictions."""
    from cakernels import CASVCCV

    X, y = _data(n=120)
    fold = np.arange(120) % 3
    cv = PredefinedSplit(fold)
    w = np.where(fold == 0, 0.0, 1.0)
    with pytest.warns(RuntimeWarning, match=r"split\(s\) \[0\] all have sample_weight 0"):
        search = BKRR2CV(n_partitions=2, sigmas=[1.0, 3.0], lams=[1e-3], cv=cv,
                         scoring=scoring, random_state=0).fit(X, y, sample_weight=w)
    assert np.all(np.isnan(search.cv_results_["split0_test_score"]))
    assert np.all(np.isfinite(search.cv_results_["split1_test_score"]))
    yc = (y > np.median(y)).astype(int)
    with pytest.warns(RuntimeWarning, match=r"split\(s\) \[0\] all have sample_weight 0"):
        clf = CASVCCV(n_partitions=2, Cs=[1.0, 10.0], cv=cv, random_state=0).fit(
            X, yc, sample_weight=w)
    assert np.all(np.isnan(clf.cv_results_["split0_test_score"]))
    assert np.all(np.isfinite(clf.cv_results_["split2_test_score"]))


def test_group_splits_equal_refits_and_keep_groups_apart():
    """``groups`` reaches the splitter as in ``GridSearchCV.fit(X, y, groups=...)``."""
    X, y = _data()
    groups = np.arange(len(y)) % 5
    cv = GroupKFold(3)
    search = BKRR2CV(n_partitions=3, sigmas=[0.7, 2.0], lams=[1e-4, 1e-2], cv=cv,
                     random_state=0).fit(X, y, groups=groups)
    splits = list(cv.split(X, y, groups))
    brute = _brute_split_scores(search, X, y, splits, "r2")
    got = np.column_stack([search.cv_results_[f"split{f}_test_score"] for f in range(3)])
    np.testing.assert_allclose(got, brute, rtol=1e-8)
    for train, val in splits:
        assert not set(groups[train]) & set(groups[val])
    # KFold's splits differ: the groups were used
    plain = BKRR2CV(n_partitions=3, sigmas=[0.7, 2.0], lams=[1e-4, 1e-2], cv=KFold(3),
                    random_state=0).fit(X, y)
    assert not np.allclose(plain.cv_results_["split0_test_score"],
                           search.cv_results_["split0_test_score"])


@pytest.mark.parametrize("groups, match", [
    (None, "groups"),                      # scikit-learn's own message
    (np.arange(10), "one label per row"),  # wrong length
])
def test_bad_groups_are_clear_errors(groups, match):
    X, y = _data()
    with pytest.raises(ValueError, match=match):
        BKRR2CV(n_partitions=2, sigmas=[1.0], lams=[1e-3], cv=GroupKFold(3)).fit(
            X, y, groups=groups)


def test_multi_output_and_sparse_and_held_out_split():
    X, y = _data(targets=2)
    cv = ShuffleSplit(n_splits=1, test_size=0.25, random_state=0)
    dense = BKRR2CV(n_partitions=3, sigmas=[1.0, 2.0], lams=[1e-3, 1e-1], cv=cv,
                    random_state=0).fit(X, y)
    brute = _brute_split_scores(dense, X, y, list(cv.split(X)), "r2")
    np.testing.assert_allclose(dense.cv_results_["split0_test_score"], brute[:, 0], rtol=1e-8)
    sparse = clone(dense).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.cv_results_["mean_test_score"],
                               dense.cv_results_["mean_test_score"], rtol=1e-8)
    assert dense.predict(X[:3]).shape == (3, 2)


def _brute_loo(search, X, y):
    """Refit without each row, as ``cv=LeaveOneOut()`` on the same partitions:
    the row leaves the partitions it trains in (shift lam * (m - 1)); it is
    predicted by its nearest centre's model (with it left out, or the full
    model when that partition never had it) or by the mean of all models."""
    part = search.partitioner_
    labels = np.asarray(part.labels_)
    P = search.partition_sizes_.size
    average = search._combine_mode == "average"
    route = part.assign(X)
    out = []
    for params in search.cv_results_["params"]:
        gamma = 1.0 / (2 * params["sigma"] ** 2)

        def model(T):
            K = rbf_kernel(X[T], X[T], gamma=gamma)
            return T, np.linalg.solve(K + params["lam"] * T.size * np.eye(T.size), y[T])

        full = [model(np.flatnonzero(labels == j)) for j in range(P)]
        pred = np.zeros(len(y))
        for i in range(len(y)):
            models = [model(T[T != i]) if i in T else (T, a) for T, a in full]
            preds = [(rbf_kernel(X[i:i + 1], X[T], gamma=gamma) @ a)[0] for T, a in models]
            pred[i] = np.mean(preds) if average else preds[route[i]]
        out.append(-mean_squared_error(y, pred))
    return np.array(out)


@pytest.mark.parametrize("cls", [BKRR2CV, BKRRCV, PartitionedKernelRidgeCV])
def test_closed_form_leave_one_out_equals_refits_without_each_row(cls):
    X, y = _data(n=60, d=3, seed=5)
    kw = {"partitioner": "random"} if cls is PartitionedKernelRidgeCV else {}
    search = cls(n_partitions=3, sigmas=[0.8, 2.5], lams=[1e-3, 1e-1], cv="loo",
                 scoring="neg_mean_squared_error", random_state=0, **kw).fit(X, y)
    assert search.n_splits_ == 1 and search.fit_stats_["solver"] == "eigh"
    if search._combine_mode == "nearest":
        # rows whose nearest centre is another partition's: routed there
        assert np.any(search.partitioner_.assign(X) != search.partitioner_.labels_)
    np.testing.assert_allclose(search.cv_results_["split0_test_score"],
                               _brute_loo(search, X, y), rtol=1e-8)
    # the closed form is cv=LeaveOneOut() on the same partitions
    splits = cls(n_partitions=3, sigmas=[0.8, 2.5], lams=[1e-3, 1e-1], cv=LeaveOneOut(),
                 scoring="neg_mean_squared_error", random_state=0, **kw).fit(X, y)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"],
                               splits.cv_results_["mean_test_score"], rtol=1e-8)
    # MAE too; RMSE is pooled as r2 is (the root of that mean squared error, where
    # LeaveOneOut()'s one-row RMSEs average to the MAE)
    common = dict(n_partitions=3, sigmas=[0.8, 2.5], lams=[1e-3, 1e-1], random_state=0, **kw)
    loo = {s: cls(cv="loo", scoring=s, **common).fit(X, y).cv_results_["mean_test_score"]
           for s in ("neg_mean_absolute_error", "neg_root_mean_squared_error")}
    mae = cls(cv=LeaveOneOut(), scoring="neg_mean_absolute_error", **common).fit(X, y)
    np.testing.assert_allclose(loo["neg_mean_absolute_error"],
                               mae.cv_results_["mean_test_score"], rtol=1e-8)
    np.testing.assert_allclose(loo["neg_root_mean_squared_error"],
                               -np.sqrt(-splits.cv_results_["mean_test_score"]), rtol=1e-8)


def test_leave_one_out_refuses_a_partition_of_one_row():
    X, y = _data(n=30, d=2, seed=1)
    X[0] += 100.0  # a cluster of its own
    with pytest.raises(ValueError, match="partition .* has a single training row"):
        KKRR2CV(n_partitions=3, sigmas=[1.0], lams=[1e-3], cv="loo",
                random_state=0).fit(X, y)


@pytest.mark.parametrize("cv", [LeaveOneOut(), ShuffleSplit(3, test_size=1, random_state=0)])
def test_r2_on_single_row_validation_splits_is_refused(cv):
    # r2 of one row is undefined: every split scored 0 and every candidate tied
    X, y = _data(n=40, d=3, seed=1)
    kw = dict(n_partitions=1, sigmas=[0.7, 2.0], lams=[1e-4, 1e-2], random_state=0)
    with pytest.raises(ValueError, match="validates 1 row.*r2 is undefined on a single row"):
        BKRR2CV(cv=cv, **kw).fit(X, y)
    # other scorings take such splits; cv='loo' scores r2 on the pooled predictions
    mse = BKRR2CV(cv=cv, scoring="neg_mean_squared_error", **kw).fit(X, y)
    assert np.all(np.isfinite(mse.cv_results_["mean_test_score"]))
    r2 = BKRR2CV(cv="loo", **kw).fit(X, y).cv_results_["mean_test_score"]
    assert np.unique(r2).size == r2.size


def _sigmoid_krr_scores(X, y, splits, lams, gamma, coef0):
    """Refits of the sigmoid kernel (indefinite) by minimum-norm least squares,
    as the estimator's fallback solves them."""
    out = []
    for lam in lams:
        err = []
        for train, val in splits:
            K = np.tanh(gamma * X[train] @ X[train].T + coef0)
            A = K + lam * train.size * np.eye(train.size)
            alpha = np.linalg.lstsq(A, y[train], rcond=None)[0]
            pred = np.tanh(gamma * X[val] @ X[train].T + coef0) @ alpha
            err.append(-mean_squared_error(y[val], pred))
        out.append(np.mean(err))
    return np.array(out)


@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")  # Cholesky's fallback
def test_indefinite_kernel_keeps_negative_eigenvalues_in_eigh_and_loo():
    # the sigmoid kernel's negative eigenvalues were zeroed as if below the
    # least-squares cutoff: a candidate's score depended on the grid's size
    rng = np.random.RandomState(0)
    X = rng.randn(60, 3)
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.1 * rng.randn(60)
    lams = [1e-4, 1e-2]
    kw = dict(n_partitions=1, kernel="sigmoid", coef0=0.5, sigmas=[1.0], lams=lams,
              scoring="neg_mean_squared_error")
    cv = KFold(3, shuffle=True, random_state=1)
    splits = list(cv.split(X))
    brute = _sigmoid_krr_scores(X, y, splits, lams, 0.5, 0.5)
    assert np.linalg.eigvalsh(np.tanh(0.5 * X @ X.T + 0.5)).min() < -1.0  # indefinite
    for solver in ("cholesky", "eigh"):
        got = BKRR2CV(cv=cv, solver=solver, **kw).fit(X, y).cv_results_["mean_test_score"]
        np.testing.assert_allclose(got, brute, rtol=1e-8)
    loo = BKRR2CV(cv="loo", **kw).fit(X, y).cv_results_["mean_test_score"]
    n = len(y)
    brute_loo = _sigmoid_krr_scores(X, y, [(np.delete(np.arange(n), i), np.array([i]))
                                          for i in range(n)], lams, 0.5, 0.5)
    np.testing.assert_allclose(loo, brute_loo, rtol=1e-6)


def test_loo_on_a_singular_system_scores_nan_with_a_warning():
    # lam = 0 on a linear kernel of rank 3: the closed form needs an invertible
    # system (with the pseudo-inverse it reported 2,500x the refits' error)
    rng = np.random.RandomState(0)
    X = rng.randn(60, 3)
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.1 * rng.randn(60)
    kw = dict(n_partitions=1, kernel="linear", sigmas=[1.0], lams=[0.0, 1e-4],
              scoring="neg_mean_squared_error")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        loo = BKRR2CV(cv="loo", **kw).fit(X, y)
    linalg_warnings = [str(r.message) for r in rec if issubclass(r.category, linalg.LinAlgWarning)]
    # one warning, the closed form's (not also "using the least-squares solution")
    assert len(linalg_warnings) == 1, linalg_warnings
    assert re.search(r"cv='loo'.*singular.*lam in \[0.0\]", linalg_warnings[0])
    scores = loo.cv_results_["mean_test_score"]
    assert np.isnan(scores[0]) and np.isfinite(scores[1])
    assert loo.best_params_ == {"lam": 1e-4, "sigma": 1.0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", linalg.LinAlgWarning)
        refits = BKRR2CV(cv=LeaveOneOut(), **kw).fit(X, y).cv_results_["mean_test_score"]
    assert np.all(np.isfinite(refits))
    np.testing.assert_allclose(scores[1], refits[1], rtol=1e-8)


@pytest.mark.parametrize("cv, solver", [(3, "eigh"), ("loo", "auto")])
def test_eigh_routes_warn_on_ill_conditioned_candidates(cv, solver):
    # the Cholesky route and every refit warned (LinAlgWarning) on these candidates;
    # the eigendecomposition routes scored them silently, up to 6e-4 off the refits
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    y = X[:, 0] + np.sin(X[:, 1]) + 0.1 * rng.normal(size=150)
    kw = dict(n_partitions=1, sigmas=[10.0], cv=cv, solver=solver, refit=False)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        BKRR2CV(lams=[1e-13, 1e-4], **kw).fit(X, y)
    messages = [str(r.message) for r in rec if issubclass(r.category, linalg.LinAlgWarning)]
    # one warning for the whole search (it was one per solve, each with its numbers)
    assert len(messages) == 1 and re.search(r"ill-conditioned in \d+ of the search's \d+ "
                                            r"solves \(lam in \[1e-13\]; reciprocal "
                                            r"condition numbers down to", messages[0]), messages
    with warnings.catch_warnings():
        warnings.simplefilter("error", linalg.LinAlgWarning)  # well-conditioned: silent
        BKRR2CV(lams=[1e-4, 1e-2], **kw).fit(X, y)


@pytest.mark.parametrize("solver", ["cholesky", "eigh"])
def test_a_search_warns_once_for_all_its_ill_conditioned_solves(solver):
    # every partition, sigma, split (and lambda, Cholesky) warned with its own numbers:
    # 25 lines for one search of 4 partitions under the default filter
    rng = np.random.RandomState(0)
    X, y = rng.randn(400, 3), rng.randn(400)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        BKRR2CV(n_partitions=4, cv=3, sigmas=[3.0, 10.0], lams=[1e-13, 1e-2], solver=solver,
                refit=False, random_state=0).fit(X, y)
    ill = [r for r in rec if issubclass(r.category, linalg.LinAlgWarning)
           and "ill-conditioned" in str(r.message)]
    assert len(ill) == 1, [str(r.message) for r in rec]
    assert re.search(r"in \d+ of the search's \d+ solves \(lam in \[1e-13\];",
                     str(ill[0].message))
    assert ill[0].filename == __file__  # the caller's line


def test_cv_results_have_grid_search_format_and_order():
    X, y = _data()
    grid = {"sigma": [0.5, 1.0, 2.0], "lam": [1e-4, 1e-2]}
    search = BKRR2CV(n_partitions=2, sigmas=grid["sigma"], lams=grid["lam"], cv=3,
                     random_state=0).fit(X, y)
    gs = GridSearchCV(BKRR2(n_partitions=2, random_state=0), grid, cv=3).fit(X, y)
    assert search.cv_results_["params"] == list(ParameterGrid(grid))
    assert set(gs.cv_results_) == set(search.cv_results_)
    for key in ("param_sigma", "param_lam"):
        assert isinstance(search.cv_results_[key], np.ma.MaskedArray)
        np.testing.assert_array_equal(search.cv_results_[key], gs.cv_results_[key])
    best = search.cv_results_["rank_test_score"] == 1
    assert search.cv_results_["params"][int(np.flatnonzero(best)[0])] == search.best_params_
    assert search.best_score_ == search.cv_results_["mean_test_score"].max()
    # the refit is the plain estimator with the best parameters, partitioned alike
    assert isinstance(search.best_estimator_, BKRR2)
    assert search.best_estimator_.sigma == search.best_params_["sigma"]
    np.testing.assert_array_equal(search.best_estimator_.partitioner_.labels_,
                                  search.partitioner_.labels_)
    assert search.score(X, y) == pytest.approx(search.best_estimator_.score(X, y))


def test_selection_is_as_good_as_grid_search_on_test_data():
    X, y = _data(n=700, seed=11)
    Xtr, ytr, Xte, yte = X[:500], y[:500], X[500:], y[500:]
    grid = {"sigma": [0.3, 1.0, 3.0, 10.0], "lam": [1e-6, 1e-3, 1e-1]}
    fast = BKRR2CV(n_partitions=4, sigmas=grid["sigma"], lams=grid["lam"], cv=3,
                   random_state=0).fit(Xtr, ytr)
    gs = GridSearchCV(BKRR2(n_partitions=4, random_state=0), grid, cv=3).fit(Xtr, ytr)
    mse_fast = mean_squared_error(yte, fast.predict(Xte))
    mse_gs = mean_squared_error(yte, gs.predict(Xte))
    assert mse_fast <= 1.05 * mse_gs, (fast.best_params_, gs.best_params_, mse_fast, mse_gs)


def test_threads_backend_equals_serial_and_generic_class_equals_front_door():
    X, y = _data()
    kw = dict(n_partitions=4, sigmas=[0.7, 2.0], lams=[1e-4, 1e-2], cv=3, random_state=0)
    serial = BKRR2CV(**kw).fit(X, y)
    threads = BKRR2CV(backend="threads", n_jobs=2, **kw).fit(X, y)
    generic = PartitionedKernelRidgeCV("kbalance", "nearest", **kw).fit(X, y)
    for other in (threads, generic):
        np.testing.assert_allclose(other.cv_results_["mean_test_score"],
                                   serial.cv_results_["mean_test_score"], rtol=1e-12)
    kk = KKRRCV(**kw).fit(X, y)
    assert kk.best_estimator_.__class__.__name__ == "KKRR"


@pytest.mark.parametrize("cls,cv,solver", [(BKRR2CV, 3, "cholesky"), (BKRR2CV, 3, "eigh"),
                                           (BKRR2CV, "loo", "eigh"), (DCKRRCV, 3, "cholesky"),
                                           (DCKRRCV, "loo", "eigh")])
def test_scores_are_the_same_bits_for_any_thread_count(monkeypatch, cls, cv, solver):
    """Every (sigma, split) task runs on one thread with BLAS on one thread:
    the serial backend on 1, 2 or 3 threads and the threads backend give the
    same bits (before, the eigendecompositions ran on BLAS's threads)."""
    import cakernels.backends._backend as backend_module

    X, y = _data(n=1500)  # blocks of ~330-500 rows: BLAS would thread them
    kw = dict(n_partitions=3, sigmas=[0.7, 2.0, 5.0], lams=[1e-4, 1e-2], cv=cv,
              solver=solver, random_state=0, refit=False)
    got = []
    for n in (1, 2, 3):
        monkeypatch.setattr(backend_module, "cpu_count", lambda n=n: n)
        got.append(cls(**kw).fit(X, y).cv_results_)
    monkeypatch.undo()
    got.append(cls(backend="threads", n_jobs=2, **kw).fit(X, y).cv_results_)
    for res in got[1:]:
        for key in ("mean_test_score", "split0_test_score"):
            np.testing.assert_array_equal(res[key], got[0][key])
    assert np.all(np.isfinite(got[0]["mean_test_score"]))


@pytest.mark.parametrize("bad", [dict(sigmas=[]), dict(sigmas=[1.0, -1.0]),
                                 dict(sigmas=[np.nan]), dict(lams=[1e-3, 1e-3]),
                                 dict(lams=[-1e-3]), dict(lams=[np.inf]),
                                 dict(sigmas=["1.0"]), dict(lams=[None]),
                                 dict(sigmas=np.array(["1.0"]))])
def test_bad_grids_are_value_errors(bad):
    X, y = _data(n=60)
    kw = dict(n_partitions=2, sigmas=[1.0], lams=[1e-3], cv=3)
    kw.update(bad)
    with pytest.raises(ValueError, match="sigmas|lams"):
        BKRR2CV(**kw).fit(X, y)


def test_other_bad_settings_are_clear_errors():
    X, y = _data(n=60)
    with pytest.raises(ValueError, match="solver='eigh'"):
        BKRR2CV(n_partitions=2, cv="loo", solver="cholesky").fit(X, y)
    labels = BKRR2(n_partitions=2, random_state=0).fit(X, y).partitioner_.labels_
    # a split whose training rows are all in partition 0: partition 1 has no model
    # there, and partition 0's predicts its validation rows (this was an error)
    cv = [(np.flatnonzero(labels == 0), np.flatnonzero(labels))]
    search = BKRR2CV(n_partitions=2, sigmas=[1.0], lams=[1e-3], cv=cv, random_state=0).fit(X, y)
    np.testing.assert_allclose(search.cv_results_["split0_test_score"],
                               _brute_split_scores(search, X, y, cv, "r2")[:, 0], rtol=1e-8)
    # rows of weight 0 train nowhere: a split whose training rows all weigh 0 is still
    # an error (no partition has a model; it named one partition with the advice "use
    # fewer partitions or folds, or shuffled folds", which could not help)
    w = np.where(labels == 0, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"^split 0 has no training row of positive "
                                         r"sample_weight \(rows of weight 0 train nowhere\)$"):
        BKRR2CV(n_partitions=2, cv=cv, random_state=0).fit(X, y, sample_weight=w)
    with pytest.raises(ValueError, match=r"^split 0 has no training row of positive"):
        CASVCCV(n_partitions=2, cv=cv, random_state=0).fit(X, y > 0, sample_weight=w)
    # shuffling is advice for splits that do not shuffle (int folds do)
    assert BKRR2CV(cv=3)._fold_hint() == "; use fewer partitions or folds"
    from sklearn.model_selection import KFold

    # None is 5 shuffled folds, as an int
    assert BKRR2CV(cv=None)._fold_hint() == "; use fewer partitions or folds"
    assert BKRR2CV(cv=KFold(5))._fold_hint().endswith("or shuffled folds")
    assert BKRR2CV(cv=KFold(3, shuffle=True))._fold_hint() == "; use fewer partitions or folds"
    Xs = np.sort(X, axis=0)  # sorted rows: unshuffled folds cut the partitions
    search = PartitionedKernelRidgeCV(partitioner="kmeans", n_partitions=4, cv=KFold(4),
                                      sigmas=[1.0], lams=[1e-3], random_state=0).fit(Xs, y)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"],
                               _brute_split_scores(search, Xs, y, list(KFold(4).split(Xs)),
                                                   "r2").mean(axis=1), rtol=1e-8)
    with pytest.raises(ValueError):
        BKRR2CV(n_partitions=2, cv=100).fit(X, y)  # more folds than rows
    # a shuffled splitter seeded as the search draws the random partitioner's
    # permutation: a warning whatever the outcome (the partitions follow the folds: a
    # partition inside a validation fold has no model in that split, and its rows are
    # predicted by the other partitions; ShuffleSplit had no hint, and with a smaller
    # validation set put every validation row in partition 0 without a word)
    same = "cv draws with random_state=0, the search's own seed"
    for cls in (DCKRRCV, CASVCCV):
        yy = (y > 0).astype(int) if cls is CASVCCV else y
        for cv in (KFold(3, shuffle=True, random_state=0),
                   ShuffleSplit(1, test_size=0.25, random_state=0)):
            with pytest.warns(UserWarning, match=same):
                search = cls(n_partitions=4, cv=cv, random_state=0).fit(X, yy)
            assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
        with pytest.warns(UserWarning, match=same):
            cls(n_partitions=4, cv=ShuffleSplit(1, test_size=0.1, random_state=0),
                random_state=0).fit(X, yy)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            for cv in (KFold(3, shuffle=True, random_state=1), 3,
                       ShuffleSplit(1, test_size=0.1, random_state=1)):
                cls(n_partitions=4, cv=cv, random_state=0).fit(X, yy)
    assert BKRR2CV(cv=ShuffleSplit(1, random_state=3))._fold_hint() == (
        "; use fewer partitions or folds")
    with pytest.raises(ValueError, match="scoring"):
        BKRR2CV(n_partitions=2, scoring="accuracy").fit(X, y)
    search = BKRR2CV(n_partitions=2, sigmas=[1.0], lams=[1e-3], cv=3, refit=False).fit(X, y)
    assert search.best_params_ == {"lam": 1e-3, "sigma": 1.0}
    with pytest.raises(AttributeError, match="predict") as info:
        search.predict(X)
    assert "refit=False" in str(info.value.__cause__)  # the reason, as GridSearchCV's
    assert not hasattr(search, "predict")  # as GridSearchCV(refit=False)


def test_the_user_data_is_left_alone_and_the_search_is_reproducible():
    X, y = _data()
    X32 = np.asfortranarray(X.astype(np.float32))
    before = X32.copy(), y.copy()
    a = BKRR2CV(n_partitions=3, sigmas=[1.0, 2.0], lams=[1e-3], cv=3, random_state=0)
    a.fit(X32, y)
    np.testing.assert_array_equal(X32, before[0])
    np.testing.assert_array_equal(y, before[1])
    b = clone(a).fit(X32, y)
    np.testing.assert_array_equal(a.cv_results_["mean_test_score"],
                                  b.cv_results_["mean_test_score"])


def test_auto_solver_choice():
    X, y = _data(n=80)
    few = BKRR2CV(n_partitions=2, lams=[1e-3, 1e-2], cv=2).fit(X, y)
    many = BKRR2CV(n_partitions=2, lams=np.geomspace(1e-6, 1, EIGH_MIN_LAMS), cv=2).fit(X, y)
    assert few.fit_stats_["solver"] == "cholesky" and many.fit_stats_["solver"] == "eigh"
    # one factorisation per (sigma, split, partition) for eigh, per lambda too for cholesky
    assert many.fit_stats_["n_factorizations"] == 6 * 2 * 2
    assert few.fit_stats_["n_factorizations"] == 6 * 2 * 2 * 2


# --------------------------------------------------------------------------- SVM search

from sklearn.datasets import make_classification  # noqa: E402
from sklearn.model_selection import StratifiedKFold  # noqa: E402
from sklearn.base import BaseEstimator, ClassifierMixin  # noqa: E402
from sklearn.metrics import get_scorer  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

from cakernels import BKMSVCCV, CASVC, CASVCCV, CPSVCCV, FCFSSVCCV, PartitionedSVCCV  # noqa: E402


class _Fixed(ClassifierMixin, BaseEstimator):
    """Predicts the labels it was given: scikit-learn's scorers applied to them."""

    def __init__(self, pred=None):
        self.pred = pred

    def predict(self, X):
        return self.pred


def _brute_svm_scores(search, X, y, splits, scoring="accuracy", sample_weight=None):
    """LIBSVM (scikit-learn's SVC) refitted on every partition's rows of every
    split, nearest-centre routing, scikit-learn's scorer ``scoring`` on the
    split's validation rows (a partition without training rows in the split
    passes its rows to the nearest that has); 'scale' resolved on the split. With
    ``sample_weight``, the partitions hold the rows of positive weight and the
    scorer weighs the validation rows."""
    scorer = get_scorer(scoring)
    w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
    part = search.partitioner_
    labels = np.full(len(y), -1)
    labels[w > 0] = part.labels_
    out = np.zeros((len(search.cv_results_["params"]), len(splits)))
    for c, params in enumerate(search.cv_results_["params"]):
        for f, (train, val) in enumerate(splits):
            tr = np.zeros(len(y), bool)
            tr[train] = True
            gamma = params["gamma"]
            if gamma == "scale":
                gamma = 1.0 / (X.shape[1] * X[train].var())
            P = search.partition_sizes_.size
            trained = np.flatnonzero([np.any((labels == j) & tr) for j in range(P)])
            route = _brute_route(part, X[val], trained)
            pred = np.empty(len(val), dtype=y.dtype)
            for j in range(P):
                T = np.flatnonzero((labels == j) & tr)
                here = route == j
                if not here.any():
                    continue
                if np.unique(y[T]).size == 1:
                    pred[here] = y[T][0]
                else:
                    svc = SVC(C=params["C"], gamma=gamma).fit(X[T], y[T],
                                                              sample_weight=w[T])
                    pred[here] = svc.predict(X[val][here])
            fixed = _Fixed(pred)
            fixed.classes_ = np.unique(y)
            out[c, f] = scorer(fixed, X[val], y[val], sample_weight=w[val])
    return out


@pytest.mark.parametrize("cls", [CASVCCV, BKMSVCCV])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_svm_search_equals_libsvm_refits_on_the_same_partitions(cls, n_classes):
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4,
                               n_classes=n_classes, random_state=0)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    search = cls(n_partitions=3, Cs=[0.5, 5.0], gammas=[0.05, "scale"], cv=cv,
                 solver="libsvm", random_state=0).fit(X, y)
    brute = _brute_svm_scores(search, X, y, list(cv.split(X, y)))
    got = np.column_stack([search.cv_results_[f"split{f}_test_score"] for f in range(3)])
    np.testing.assert_allclose(got, brute, rtol=0, atol=1e-12)
    assert search.cv_results_["params"] == list(ParameterGrid({"C": [0.5, 5.0],
                                                               "gamma": [0.05, "scale"]}))


@pytest.mark.parametrize("n_classes", [2, 3])
def test_svm_search_lends_an_untrained_partitions_rows_to_the_nearest(n_classes):
    # CPSVCCV refused any data with an outlier (a K-means partition of one row has no
    # training row in the split it validates); GridSearchCV(CPSVC) took them
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4,
                               n_classes=n_classes, random_state=0)
    X[0] += 40.0
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    search = CPSVCCV(n_partitions=4, Cs=[0.5, 5.0], gammas=[0.05, "scale"], cv=cv,
                     solver="libsvm", random_state=0).fit(X, y)
    assert 1 in search.partition_sizes_.tolist()
    brute = _brute_svm_scores(search, X, y, list(cv.split(X, y)))
    got = np.column_stack([search.cv_results_[f"split{f}_test_score"] for f in range(3)])
    np.testing.assert_allclose(got, brute, rtol=0, atol=1e-12)
    # the native SMO's warm path takes the same rows
    smo = CPSVCCV(n_partitions=4, Cs=[0.5, 5.0], gammas=[0.05], cv=cv, random_state=0).fit(X, y)
    assert np.all(np.isfinite(smo.cv_results_["mean_test_score"]))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@pytest.mark.parametrize("n_classes, scoring", [
    (2, "f1"), (2, "balanced_accuracy"), (2, "matthews_corrcoef"), (2, "precision_macro"),
    (2, "recall"), (3, "f1_macro"), (3, "f1_weighted"), (3, "balanced_accuracy"),
    (3, "jaccard_micro"), (3, "recall_weighted"), (3, "matthews_corrcoef")])
def test_svm_search_scorings_equal_scikit_learn_scorers_on_refits(n_classes, scoring):
    """Every scoring from the confusion counts summed over the partitions equals
    scikit-learn's scorer on the split's validation rows (imbalanced classes,
    so that the averages differ)."""
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4,
                               n_classes=n_classes, weights=[0.6] + [0.4 / (n_classes - 1)]
                               * (n_classes - 1), flip_y=0.1, random_state=1)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    search = CASVCCV(n_partitions=3, Cs=[0.05, 5.0], gammas=[0.05, 1.0], cv=cv,
                     scoring=scoring, solver="libsvm", random_state=0).fit(X, y)
    brute = _brute_svm_scores(search, X, y, list(cv.split(X, y)), scoring)
    got = np.column_stack([search.cv_results_[f"split{f}_test_score"] for f in range(3)])
    np.testing.assert_allclose(got, brute, rtol=1e-12, atol=1e-15)
    assert np.unique(got.round(12)).size > 2  # the candidates score differently
    assert repr(search.scorer_) == repr(get_scorer(scoring))
    assert search.score(X, y) == get_scorer(scoring)(search.best_estimator_, X, y)


def test_svm_search_takes_groups():
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, random_state=0)
    groups = np.arange(len(y)) // 20
    cv = GroupKFold(3)
    search = CASVCCV(n_partitions=3, Cs=[0.5, 5.0], gammas=[0.05], cv=cv, solver="libsvm",
                     random_state=0).fit(X, y, groups=groups)
    brute = _brute_svm_scores(search, X, y, list(cv.split(X, y, groups)))
    got = np.column_stack([search.cv_results_[f"split{f}_test_score"] for f in range(3)])
    np.testing.assert_allclose(got, brute, rtol=0, atol=1e-12)


def test_svm_search_scorings_table_is_scikit_learns():
    from cakernels.model_selection._svm_search import SCORINGS

    for name, (func, kwargs) in SCORINGS.items():
        scorer = get_scorer(name)
        assert scorer._score_func is func and scorer._kwargs == kwargs, name
        assert scorer._sign == 1 and scorer._response_method == "predict", name


@pytest.mark.parametrize("y_kind, scoring, match", [
    ("three", "f1", r"3 classes: use 'f1_macro'"),
    ("strings", "precision", r"class 1 as positive .*\['neg', 'pos'\]"),
    ("binary", "roc_auc", "scoring"),
])
def test_svm_search_refuses_scorings_it_cannot_compute(y_kind, scoring, match):
    X, y = make_classification(n_samples=90, n_classes=3 if y_kind == "three" else 2,
                               n_informative=4, random_state=0)
    if y_kind == "strings":
        y = np.where(y == 1, "pos", "neg")
    with pytest.raises(ValueError, match=match):
        CASVCCV(n_partitions=2, Cs=[1.0], cv=3, scoring=scoring, random_state=0).fit(X, y)


def test_warm_start_over_C_saves_iterations_and_keeps_the_scores():
    X, y = make_classification(n_samples=900, n_features=8, n_informative=5, flip_y=0.05,
                               random_state=0)
    kw = dict(n_partitions=2, Cs=np.geomspace(1, 1000, 6), gammas=[0.1], cv=3, random_state=0)
    warm = CASVCCV(**kw).fit(X, y)
    cold = CASVCCV(warm_start=False, **kw).fit(X, y)
    assert warm.fit_stats_["warm_start"] and not cold.fit_stats_["warm_start"]
    assert warm.fit_stats_["n_iter"] < 0.9 * cold.fit_stats_["n_iter"]
    # the same optimum within tol: the validation accuracy moves by a few rows at most
    np.testing.assert_allclose(warm.cv_results_["mean_test_score"],
                               cold.cv_results_["mean_test_score"], atol=0.01)
    # cold SMO is the estimator's own fit: the refit of the same parameters
    assert isinstance(cold.best_estimator_, CASVC)
    assert cold.best_estimator_.solver == "smo"


@pytest.mark.parametrize("solver", ["smo", "asygcd", "libsvm"])
def test_svm_search_is_the_same_for_any_thread_count(monkeypatch, solver):
    """The (gamma, split) paths run concurrently on the worker's threads, each
    solve on one thread: the serial backend on 1, 2 or 3 threads and the
    threads backend give the same scores and iterations."""
    import cakernels.backends._backend as backend_module

    X, y = make_classification(n_samples=900, n_features=8, n_informative=5, n_classes=3,
                               flip_y=0.05, random_state=0)
    kw = dict(n_partitions=2, Cs=[0.5, 5.0, 50.0], gammas=[0.05, "scale"], cv=3,
              solver=solver, random_state=0, refit=False)
    got = []
    for n in (1, 2, 3):
        monkeypatch.setattr(backend_module, "cpu_count", lambda n=n: n)
        got.append(CASVCCV(**kw).fit(X, y))
    monkeypatch.undo()
    got.append(CASVCCV(backend="threads", n_jobs=2, **kw).fit(X, y))
    for other in got[1:]:
        for key in ("mean_test_score", "split0_test_score", "split2_test_score"):
            np.testing.assert_array_equal(other.cv_results_[key], got[0].cv_results_[key])
        assert other.fit_stats_["n_iter"] == got[0].fit_stats_["n_iter"]
    assert np.all(got[0].cv_results_["mean_test_score"] > 0.4)


def test_svm_search_format_errors_and_front_doors():
    X, y = make_classification(n_samples=200, n_features=5, random_state=1)
    for cls in (FCFSSVCCV, CPSVCCV):
        s = cls(n_partitions=2, Cs=[1.0], gammas=[0.1, 0.5], cv=2, random_state=0).fit(X, y)
        assert set(s.best_params_) == {"C", "gamma"}
        assert s.score(X, y) == pytest.approx(s.best_estimator_.score(X, y))
        assert list(s.classes_) == [0, 1]
    generic = PartitionedSVCCV("bkm", n_partitions=2, Cs=[1.0], cv=2, random_state=0).fit(X, y)
    ref = BKMSVCCV(n_partitions=2, Cs=[1.0], cv=2, random_state=0).fit(X, y)
    np.testing.assert_array_equal(generic.cv_results_["mean_test_score"],
                                  ref.cv_results_["mean_test_score"])
    for bad in (dict(Cs=[]), dict(Cs=[-1.0]), dict(gammas=["median"]), dict(gammas=[0.0]),
                dict(Cs=[1.0, 1.0])):
        with pytest.raises(ValueError, match="Cs|gammas"):
            CASVCCV(n_partitions=2, cv=2, **{"Cs": [1.0], **bad}).fit(X, y)
    # strings were parsed ('1.0', which CASVC refuses) and None was "NaN"
    for bad, shown in ((dict(Cs=["1.0", "10"]), "'1.0'"), (dict(Cs=[None]), "None"),
                       (dict(gammas=[None]), "None")):
        with pytest.raises(ValueError, match=f"(Cs|gammas) must hold real numbers, got {shown}"):
            CASVCCV(n_partitions=2, cv=2, **{"Cs": [1.0], **bad}).fit(X, y)
    # numpy numbers and arrays of them are numbers
    ok = CASVCCV(n_partitions=2, cv=2, Cs=np.array([1, 10]), gammas=[np.float32(0.5)],
                 random_state=0).fit(X, y)
    assert ok.best_params_["C"] in (1.0, 10.0)
    # a 0-d array of gammas was a TypeError (iteration over a 0-d array), as Cs' is not
    for name, value in (("Cs", np.array(1.0)), ("gammas", np.array(0.1)),
                        ("gammas", np.array("scale"))):
        with pytest.raises(ValueError, match=rf"{name} must be a non-empty one-dimensional "
                                             r"sequence.*got shape \(\)"):
            CASVCCV(n_partitions=2, cv=2, **{name: value}).fit(X, y)
    # an array of strings gives Python strs in params (np.str_ leaked into best_params_)
    ok = CASVCCV(n_partitions=2, cv=2, Cs=[1.0], gammas=np.array(["scale", "auto"]),
                 random_state=0).fit(X, y)
    assert all(type(p["gamma"]) is str for p in ok.cv_results_["params"])
    assert type(ok.best_params_["gamma"]) is str
    with pytest.raises(ValueError, match="classes"):
        CASVCCV(n_partitions=2, cv=2).fit(X, np.zeros(len(y)))
    # the estimators' class_weight error (was "sample_weight must be non-negative")
    for cw in ({0: -1.0, 1: 1.0}, {0: np.nan, 1: 1.0}):
        with pytest.raises(ValueError, match="class_weight must be finite and non-negative"):
            CASVCCV(n_partitions=2, cv=2, class_weight=cw).fit(X, y)
    w = np.ones(len(y))
    w[:10] = 3.0
    weighted = CASVCCV(n_partitions=2, Cs=[1.0], cv=2, random_state=0).fit(X, y, w)
    assert weighted.best_estimator_.n_partitions == 2


def test_sigmoid_kernel_is_never_warm_started():
    # the indefinite sigmoid kernel's dual has several stationary points: warm
    # started, the score of C=100 depended on the other Cs of the grid (12 of
    # 100 validation rows) and differed from refits
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, random_state=1)
    X = (X - X.mean(0)) / X.std(0)
    kw = dict(n_partitions=2, gammas=[0.2], kernel="sigmoid", cv=3, random_state=0,
              refit=False)
    cold = CASVCCV(Cs=[100.0], warm_start=False, **kw).fit(X, y)
    for grid in ([100.0], [0.1, 1.0, 10.0, 100.0]):
        warm = CASVCCV(Cs=grid, **kw).fit(X, y)
        assert warm.fit_stats_["warm_start"] is False
        i = [p["C"] for p in warm.cv_results_["params"]].index(100.0)
        for f in range(3):
            assert warm.cv_results_[f"split{f}_test_score"][i] == \
                cold.cv_results_[f"split{f}_test_score"][0]
    rbf = CASVCCV(Cs=[1.0, 10.0], **{**kw, "kernel": "rbf"}).fit(X, y)
    assert rbf.fit_stats_["warm_start"] is True


def test_int_cv_folds_are_not_the_random_partitions():
    # the same seed for the partitioner's permutation and the folds' would make every
    # random partition exactly one validation fold (no training row in that split)
    X, y = _data(n=300)
    search = DCKRRCV(n_partitions=3, sigmas=[1.0], lams=[1e-3], cv=3, random_state=0).fit(X, y)
    assert search.n_splits_ == 3 and np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    svm = CASVCCV(n_partitions=3, Cs=[1.0], cv=3, random_state=0).fit(X, y > np.median(y))
    assert svm.n_splits_ == 3


def test_svm_search_delegates_decision_function_as_grid_search_cv():
    """roc_auc, cross_val_predict(method='decision_function') and
    CalibratedClassifierCV need it (GridSearchCV delegates it to best_estimator_)."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.model_selection import cross_val_score

    X, y = make_classification(n_samples=240, n_features=6, random_state=0)
    search = CASVCCV(n_partitions=2, Cs=[1.0, 10.0], cv=3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(search.decision_function(X),
                                  search.best_estimator_.decision_function(X))
    auc = cross_val_score(clone(search), X, y, cv=2, scoring="roc_auc")
    assert np.all(auc > 0.8)
    cal = CalibratedClassifierCV(clone(search), cv=2).fit(X, y)
    assert cal.predict_proba(X).shape == (240, 2)
    no_refit = CASVCCV(n_partitions=2, Cs=[1.0], cv=3, refit=False, random_state=0).fit(X, y)
    with pytest.raises(AttributeError, match="decision_function") as info:
        no_refit.decision_function(X)
    assert "refit=False" in str(info.value.__cause__)
    # as GridSearchCV(refit=False): the methods of best_estimator_ are absent
    assert not hasattr(no_refit, "decision_function") and not hasattr(no_refit, "predict")
    assert hasattr(search, "decision_function") and hasattr(search, "predict")


def test_svm_search_refuses_a_class_without_positive_weight_up_front():
    X, y = make_classification(n_samples=120, n_features=5, random_state=0)
    with pytest.raises(ValueError, match="class 0 has none"):
        CASVCCV(n_partitions=2, Cs=[1.0], cv=3).fit(X, y, sample_weight=(y == 1) * 1.0)
    # bounds that underflow to 0 at the grid's smallest C (that candidate left class 0 out)
    with pytest.raises(ValueError, match="class 0 has none"):
        CASVCCV(n_partitions=2, Cs=[1e-300, 1.0], cv=3).fit(
            X, y, sample_weight=np.where(y == 0, 1e-30, 1.0))


@pytest.mark.skipif(tuple(int(v) for v in sklearn.__version__.split(".")[:2]) < (1, 7),
                    reason="GridSearchCV passes sample_weight to its scorer from 1.7 on")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.UndefinedMetricWarning")
@pytest.mark.parametrize("scoring", ["accuracy", "f1_macro", "matthews_corrcoef"])
def test_one_partition_weighted_svm_search_equals_gridsearchcv(scoring):
    """One partition, LIBSVM, cold starts: the weighted search equals
    GridSearchCV over CASVC with the same weights and folds (its scorer
    weighs the validation rows too, some of them 0)."""
    X, y = make_classification(n_samples=240, n_features=5, n_informative=3, n_classes=3,
                               random_state=1)
    w = np.random.default_rng(0).uniform(0.1, 3.0, len(y))
    w[::9] = 0.0
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    grid = {"C": [0.3, 10.0], "gamma": [0.03, 0.3]}
    search = CASVCCV(n_partitions=1, Cs=grid["C"], gammas=grid["gamma"], cv=cv,
                     scoring=scoring, solver="libsvm", warm_start=False).fit(
                         X, y, sample_weight=w)
    ref = GridSearchCV(CASVC(n_partitions=1, solver="libsvm"), grid, cv=cv,
                       scoring=scoring).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"],
                               ref.cv_results_["mean_test_score"], rtol=1e-12)
    assert search.best_params_ == ref.best_params_


def test_svm_search_partitions_the_rows_of_positive_weight_and_validates_every_row():
    """Half the rows weigh 0 and form a cluster of their own: as in the
    estimators' fit they are left out of the partitions (K-means gave them a
    partition of their own, with nothing to train on), while every row is
    still validated, unweighted, as by GridSearchCV; scores equal LIBSVM
    refits of the partitions' weighted rows."""
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(size=(60, 2)), rng.normal(size=(120, 2)) + 10]
    y = np.r_[np.arange(60) % 2, (X[60:, 0] > 10).astype(int)]
    w = np.r_[np.zeros(60), rng.uniform(0.5, 2.0, 120)]
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    w_before = w.copy()
    search = CPSVCCV(n_partitions=2, Cs=[0.5, 5.0], gammas=[0.5, "scale"], cv=cv,
                     solver="libsvm", random_state=0).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(w, w_before)
    assert search.partition_sizes_.sum() == 120
    brute = _brute_svm_scores(search, X, y, list(cv.split(X, y)), sample_weight=w)
    got = np.column_stack([search.cv_results_[f"split{f}_test_score"] for f in range(3)])
    np.testing.assert_allclose(got, brute, rtol=0, atol=1e-12)
    # the warm-started native path trains on the same rows
    warm = CPSVCCV(n_partitions=2, Cs=[0.5, 5.0], gammas=[0.5, "scale"], cv=cv,
                   random_state=0).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(warm.partition_sizes_, search.partition_sizes_)
    np.testing.assert_allclose(warm.cv_results_["mean_test_score"],
                               search.cv_results_["mean_test_score"], atol=0.02)


@pytest.mark.parametrize("cls", [BKRR2CV, BKRRCV, DCKRRCV, KKRR2CV, KKRRCV,
                                 PartitionedKernelRidgeCV, CASVCCV, BKMSVCCV, CPSVCCV,
                                 FCFSSVCCV, PartitionedSVCCV])
def test_unfitted_search_score_is_not_fitted_error(cls):
    # score looked up scorer_ (set by fit) before the fitted check: AttributeError
    from sklearn.exceptions import NotFittedError

    X, y = make_classification(n_samples=40, random_state=0)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        cls().score(X, y)


def test_averaging_search_holds_one_sum_of_predictions_not_one_per_partition(peak_bytes):
    # every partition's predictions of every validation row and candidate were kept
    # until the end: peak memory grew with P x rows x candidates (258 MB for 26 MB)
    X, y = make_regression(n_samples=2000, n_features=4, noise=1.0, random_state=0)
    search = DCKRRCV(n_partitions=16, sigmas=np.geomspace(1, 30, 10),
                     lams=np.geomspace(1e-6, 1e-2, 10), cv=3, random_state=0, refit=False)
    _, peak = peak_bytes(search.fit, X, y)
    one = 100 * 2000 * 8  # the candidates' predictions of the rows, once
    assert peak < 6 * one, peak / one  # (16 partitions' arrays: 18x before)


def test_a_generator_or_a_users_splitter_has_the_same_fingerprint_on_every_rank():
    # repr() showed the object's address: under MPI every rank's cv looked different
    # ("ranks [1] were given other parameters than rank 0")
    from cakernels._engine import _fingerprint

    class HoldOut:
        def split(self, X, y=None, groups=None):
            idx = np.arange(len(X))
            yield idx[idx % 5 != 0], idx[idx % 5 == 0]

        def get_n_splits(self, X=None, y=None, groups=None):
            return 1

    a, b = (s for s in KFold(3).split(np.zeros(9))), (s for s in KFold(3).split(np.zeros(9)))
    assert _fingerprint(a) == _fingerprint(b)
    assert _fingerprint(HoldOut()) == _fingerprint(HoldOut())
    assert "0x" not in _fingerprint(HoldOut())
    assert _fingerprint(KFold(3)) != _fingerprint(KFold(4))
    search = BKRR2CV(n_partitions=2, cv=HoldOut(), sigmas=[1.0], lams=[1e-3], random_state=0)
    assert search.fit(*_data(n=100)).n_splits_ == 1


@pytest.mark.parametrize("cls", [BKRR2CV, DCKRRCV, CASVCCV])
def test_a_randomstate_instance_refits_on_the_partitions_it_scored(cls):
    # the refit drew again from the instance the splits and the partitions had
    # advanced: best_estimator_ used other partitions than cv_results_ describes
    X, y = _data(n=200)
    y = (y > 0).astype(int) if cls is CASVCCV else y
    grid = dict(Cs=[1.0, 10.0]) if cls is CASVCCV else dict(sigmas=[1.0, 3.0], lams=[1e-3])
    rs = np.random.RandomState(3)
    first = cls(n_partitions=3, cv=3, random_state=rs, **grid).fit(X, y)
    assert first.random_state is rs  # the parameter is left as given
    np.testing.assert_array_equal(first.partitioner_.labels_,
                                  first.best_estimator_.partitioner_.labels_)
    second = cls(n_partitions=3, cv=3, random_state=rs, **grid).fit(X, y)
    assert not np.array_equal(first.partitioner_.labels_, second.partitioner_.labels_)
    np.testing.assert_array_equal(second.partitioner_.labels_,
                                  second.best_estimator_.partitioner_.labels_)


@pytest.mark.parametrize("make", [lambda cv: BKRR2CV(n_partitions=3, cv=cv, random_state=0),
                                  lambda cv: CASVCCV(n_partitions=3, Cs=[1.0, 10.0], cv=cv,
                                                     random_state=0)])
def test_cv_none_is_five_shuffled_folds_as_an_int(make):
    # cv=None was an unshuffled 5-fold split (check_cv's): on rows stored in
    # feature order every fold extrapolated; GridSearchCV's None is 5
    rng = np.random.RandomState(0)
    X = np.sort(rng.uniform(-3, 3, (200, 1)), axis=0)
    y = np.sin(X[:, 0]) if "KRR" in type(make(5)).__name__ else (X[:, 0] > 0).astype(int)
    none, five = make(None).fit(X, y), make(5).fit(X, y)
    assert none.n_splits_ == 5
    np.testing.assert_array_equal(none.cv_results_["mean_test_score"],
                                  five.cv_results_["mean_test_score"])


def test_an_iteration_limit_turns_the_warm_start_off():
    # a warm-started C ran max_iter iterations of its own on top of the earlier
    # Cs': scored as converged further than its refit, it changed the selection
    X, y = make_classification(n_samples=300, n_features=8, n_informative=5, flip_y=0.1,
                               random_state=0)
    kw = dict(n_partitions=2, Cs=[1.0, 100.0], gammas=[0.5], cv=3, max_iter=20,
              random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        limited = CASVCCV(**kw).fit(X, y)
        cold = CASVCCV(warm_start=False, **kw).fit(X, y)
    assert not limited.fit_stats_["warm_start"]
    np.testing.assert_array_equal(limited.cv_results_["mean_test_score"],
                                  cold.cv_results_["mean_test_score"])


def test_warm_path_with_a_weight_whose_bound_underflows_at_the_smaller_C():
    # C * 5e-324 is 0 at C = 0.1 (no variable: NaN in its gradient) and positive
    # at C = 1: the warm path refused the NaN gradient the cold path never needs
    rng = np.random.RandomState(0)
    X, y = rng.randn(200, 2), (rng.randn(200) > 0).astype(int)
    w = np.ones(200)
    w[:5] = 5e-324
    kw = dict(n_partitions=2, Cs=[0.1, 1.0], gammas=[0.5], cv=2, random_state=0)
    warm = CASVCCV(**kw).fit(X, y, sample_weight=w)
    cold = CASVCCV(warm_start=False, **kw).fit(X, y, sample_weight=w)
    assert warm.fit_stats_["warm_start"]
    np.testing.assert_allclose(warm.cv_results_["mean_test_score"],
                               cold.cv_results_["mean_test_score"], atol=0.02)


@pytest.mark.parametrize("make", [
    lambda rs: CASVCCV(n_partitions=2, Cs=[1.0], cv=2, random_state=rs),
    lambda rs: BKRR2CV(n_partitions=2, cv=2, random_state=rs)])
def test_a_failed_fit_does_not_draw_from_a_given_random_state(make):
    # the search drew its seed from the RandomState before the input check
    # failed: the retry on fixed data gave other scores than a fresh search
    X, y = make_classification(n_samples=120, n_features=5, random_state=0)
    bad = X.copy()
    bad[0, 0] = np.nan
    rs = np.random.RandomState(0)
    retried = make(rs)
    with pytest.raises(ValueError):
        retried.fit(bad, y)
    retried.fit(X, y)
    fresh = make(np.random.RandomState(0)).fit(X, y)
    np.testing.assert_array_equal(retried.cv_results_["mean_test_score"],
                                  fresh.cv_results_["mean_test_score"])


def test_splits_that_repeat_rows_are_refused():
    # a bootstrap split was held as a set of rows: scores silently differed from
    # GridSearchCV's (which trains and scores the repeated rows)
    X, y = _data(n=120, d=3, seed=2)
    Xc, yc = make_classification(n_samples=120, n_features=5, random_state=0)
    rng = np.random.RandomState(0)
    boot = rng.randint(0, 120, 120)
    oob = np.setdiff1d(np.arange(120), boot)
    twice = (np.arange(60), np.r_[np.arange(60, 120), np.arange(60, 70)])
    for name, split in (("training", (boot, oob)), ("validation", twice)):
        for search, data in ((BKRR2CV(n_partitions=2, sigmas=[1.0], lams=[1e-3]), (X, y)),
                             (CASVCCV(n_partitions=2, Cs=[1.0]), (Xc, yc))):
            with pytest.raises(ValueError, match=f"split 0 of cv repeats {name} rows"):
                search.set_params(cv=[split]).fit(*data)


def test_splits_given_as_boolean_masks_are_their_rows():
    # a boolean mask was taken for a list of repeated rows (0 and 1) and refused
    X, y = _data(n=120, d=3, seed=2)
    mask = np.arange(120) % 3 != 0
    index = (np.flatnonzero(mask), np.flatnonzero(~mask))
    kw = dict(n_partitions=2, sigmas=[1.0, 2.0], lams=[1e-3], random_state=0)
    by_mask = BKRR2CV(cv=[(mask, ~mask)], **kw).fit(X, y)
    by_index = BKRR2CV(cv=[index], **kw).fit(X, y)
    np.testing.assert_array_equal(by_mask.cv_results_["mean_test_score"],
                                  by_index.cv_results_["mean_test_score"])


def test_r2_of_overflowing_sums_is_nan_as_gridsearchcv():
    # targets near 1e160: the squared sums overflowed and r2 was 0.0 for every
    # candidate (best_score_ 0.0, an arbitrary choice) where GridSearchCV gives NaN
    X, y = _data(n=90, d=3, seed=3)
    y = y * 1e160
    cv = KFold(3, shuffle=True, random_state=1)
    grid = dict(sigmas=[1.0, 4.0], lams=[1e-4, 1e-2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = BKRR2CV(n_partitions=1, cv=cv, random_state=0, **grid).fit(X, y)
        theirs = GridSearchCV(BKRR2(n_partitions=1, random_state=0),
                              {"sigma": grid["sigmas"], "lam": grid["lams"]}, cv=cv).fit(X, y)
    assert np.all(np.isnan(theirs.cv_results_["mean_test_score"]))
    assert np.all(np.isnan(ours.cv_results_["mean_test_score"])) and np.isnan(ours.best_score_)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # (NumPy's overflow warnings come first)
        BKRR2CV(n_partitions=1, cv=cv, random_state=0, **grid).fit(X, y)
    assert any("4 of 4 candidates gave non-finite predictions or scores" in str(w.message)
               for w in caught)


@pytest.mark.parametrize("cv", [3, "loo"])
def test_the_krr_search_refuses_partitions_too_large_for_its_memory(monkeypatch, cv):
    # the fast KRR searches allocated their m x m matrices (the Gram matrix, the kernels
    # alive, every thread's block and its factorisation: 5.8-8.3 kernel matrices
    # measured on one process) with no memory check at all: where the estimator's fit
    # is refused with a ValueError, the search was killed by the system instead
    import cakernels._memory as memory
    from cakernels.model_selection._krr_search import _search_copies

    X, y = make_regression(n_samples=1200, n_features=3, random_state=0)
    matrix = 8.0 * 1200 ** 2  # 11 MiB
    monkeypatch.setattr(memory, "available_bytes", lambda: 3 * matrix / 0.8)
    BKRR2(n_partitions=1).fit(X, y)  # the fit's 2 copies fit
    search = BKRR2CV(n_partitions=1, sigmas=[1.0, 2.0], lams=[1e-3], cv=cv, refit=False)
    with pytest.raises(ValueError, match=r"the search on a partition of 1,200 rows needs "
                                         r"about .* copies of its 1,200 x 1,200 kernel "
                                         r"matrix, 8 m\^2 bytes\).*use more partitions"):
        search.fit(X, y)
    search.set_params(n_partitions=4).fit(X, y)  # 300-row partitions fit
    # the bound: the Gram matrix, a temporary and the routing and result arrays, the
    # kernels alive, every thread's block and its factorisation, the routed rows' block
    assert _search_copies(1, 3, False, False, 2) == pytest.approx(3 + 2 + 3 * (2 / 3) ** 2 + 1)
    assert _search_copies(2, 1, True, True, 1) == 3 + 1 + 2 * 1
    assert _search_copies(4, 5, False, True, 10) == pytest.approx(3 + 2 + 4 * 3 * 0.64)


def test_tied_candidates_rank_and_best_index_as_gridsearchcv():
    # no test had exactly tied candidates: mutations ranking ties by their largest rank
    # or taking the last of the best survived (both differ from GridSearchCV's)
    from scipy.stats import rankdata

    X, y = make_regression(n_samples=120, n_features=4, noise=1.0, random_state=0)
    # a linear kernel: sigma plays no part, so every lam scores the same for every sigma
    search = BKRR2CV(n_partitions=2, sigmas=(1.0, 2.0, 4.0), lams=(1e-3, 1e-1),
                     kernel="linear", cv=3, random_state=0).fit(X, y)
    mean = search.cv_results_["mean_test_score"]
    assert len(set(mean.tolist())) == 2  # the premise: ties
    np.testing.assert_array_equal(search.cv_results_["rank_test_score"],
                                  rankdata(-mean, method="min").astype(int))
    assert search.best_index_ == int(np.flatnonzero(mean == mean.max())[0])


def test_svm_search_warm_path_honours_class_weight():
    # the warm-started C path was never run with class_weight: a mutation dropping it
    # there (and only there) survived
    from sklearn.datasets import make_classification

    from cakernels import CASVCCV

    X, y = make_classification(n_samples=240, n_features=5, weights=[0.8], random_state=1)
    kw = dict(n_partitions=2, Cs=(0.1, 1.0, 10.0), cv=3, random_state=0,
              class_weight={0: 1.0, 1: 8.0}, solver="smo", tol=1e-6)
    warm = CASVCCV(warm_start=True, **kw).fit(X, y)
    cold = CASVCCV(warm_start=False, **kw).fit(X, y)
    plain = CASVCCV(warm_start=False, **dict(kw, class_weight=None)).fit(X, y)
    np.testing.assert_allclose(warm.cv_results_["mean_test_score"],
                               cold.cv_results_["mean_test_score"], atol=1e-9)
    assert not np.allclose(cold.cv_results_["mean_test_score"],
                           plain.cv_results_["mean_test_score"])  # the weights matter


def test_classifier_search_int_cv_is_stratified():
    # "an int cv is a shuffled StratifiedKFold for classifiers" (docstring, README)
    # was never checked: a mutation giving classifiers KFold survived
    from sklearn.datasets import make_classification

    from cakernels.model_selection._search import _masks_from_cv

    X, y = make_classification(n_samples=200, n_features=4, weights=[0.9], random_state=0)
    masks = _masks_from_cv(5, X, y, classifier=True, random_state=0)
    val = masks[:, -5:].astype(bool)  # every split's validation rows
    n_min = int(np.sum(y == 1))
    for f in range(5):
        assert np.sum(y[val[:, f]] == 1) in (n_min // 5, -(-n_min // 5))
    assert np.array_equal(val.sum(axis=1), np.ones(200))  # every row validated once


def test_the_krr_search_memory_check_counts_halos_and_a_splitters_training_share(
        monkeypatch):
    # the search's check took the partitions without their halos ((1 + h)^2 too little
    # with halo=h) and assumed k folds' (k - 1) / k of the rows in training (a
    # ShuffleSplit with test_size=0.05 trains on 95%)
    import cakernels._memory as memory
    from sklearn.model_selection import ShuffleSplit

    from cakernels.model_selection._krr_search import _search_copies

    X, y = make_regression(n_samples=1200, n_features=3, random_state=0)
    half = 8.0 * 600 ** 2  # one 600-row partition's kernel matrix
    bound = _search_copies(1, 3, False, False, 1)
    monkeypatch.setattr(memory, "process_room", lambda: None)
    monkeypatch.setattr(memory, "available_bytes", lambda: 2 * bound * half / 0.8)
    kw = dict(n_partitions=2, sigmas=[1.0], lams=[1e-3], cv=3, refit=False,
              backend="threads", n_jobs=2)
    BKRR2CV(**kw).fit(X, y)  # two 600-row partitions at once fit
    with pytest.raises(ValueError, match=r"the search on a partition of 1,200 rows"):
        BKRR2CV(halo=1.0, **kw).fit(X, y)  # each trains on 1,200 rows with its halo
    assert _search_copies(1, 2, False, False, 1, train=0.95) == pytest.approx(
        3 + 1 + 3 * 0.95 ** 2 + 1)
    monkeypatch.setattr(memory, "available_bytes",
                        lambda: 2 * _search_copies(1, 2, False, False, 1) * half / 0.8)
    BKRR2CV(**dict(kw, cv=2)).fit(X, y)
    with pytest.raises(ValueError, match=r"the search on a partition of 600 rows"):
        BKRR2CV(**dict(kw, cv=ShuffleSplit(n_splits=2, test_size=0.05,
                                           random_state=0))).fit(X, y)


def test_a_leave_one_out_search_warns_once_for_its_singular_partitions():
    # cv='loo' warned once per (partition, sigma), each with its own numbers, and the
    # full models of the routed rows once more per call: 26 warnings for one search
    rng = np.random.RandomState(0)
    X, y = rng.randn(400, 3), rng.randn(400)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        BKRR2CV(n_partitions=8, kernel="linear", sigmas=[0.5, 1.0, 2.0], lams=[0.0, 1e-2],
                cv="loo", refit=False, random_state=0).fit(X, y)
    linalg_warnings = [str(r.message) for r in rec
                       if issubclass(r.category, linalg.LinAlgWarning)]
    loo = [m for m in linalg_warnings if m.startswith("cv='loo'")]
    assert len(loo) == 1 and re.search(r"singular for lam in \[0.0\] in 24 \(partition, "
                                       r"sigma\) pairs", loo[0]), linalg_warnings
    assert len(linalg_warnings) <= 3, linalg_warnings  # one per kind


@pytest.mark.parametrize("make, task", [
    (lambda: BKRR2CV(n_partitions=6, sigmas=[1.0, 2.0], lams=[1e-3], cv=3, halo=0.5,
                     random_state=0), "regression"),
    (lambda: BKMSVCCV(n_partitions=6, Cs=[1.0, 10.0], cv=3, random_state=0),
     "classification")])
def test_the_refit_takes_the_searchs_partition(make, task, monkeypatch):
    # the refit partitioned the same rows with the same partitioner again (K-means
    # twice: 40% of a search at P = 256); its model is a fresh fit's, bit for bit
    import cakernels._engine as engine

    fits = []
    real = engine._fit_custom_checked
    monkeypatch.setattr(engine, "_fit_custom_checked",
                        lambda part, X: fits.append(type(part).__name__) or real(part, X))
    if task == "regression":
        X, y = make_regression(n_samples=400, n_features=5, noise=1.0, random_state=0)
        y = y / y.std()
    else:
        X, y = make_classification(n_samples=400, n_features=5, random_state=0)
    w = np.ones(len(y))
    w[:20] = 0.0  # (the refit partitions the rows of positive weight, as the search)
    search = make().fit(X, y, sample_weight=w)
    assert len(fits) == 1, fits
    assert "_search_partition" not in vars(search.best_estimator_)
    fresh = clone(search.best_estimator_).fit(X, y, sample_weight=w)
    assert len(fits) == 2
    np.testing.assert_array_equal(search.best_estimator_.partitioner_.labels_,
                                  fresh.partitioner_.labels_)
    np.testing.assert_array_equal(search.predict(X), fresh.predict(X))


def test_the_svm_search_reads_the_rows_for_scale_only_once_per_split(monkeypatch):
    # every gamma of the grid copied every split's training rows to resolve it (6x X
    # for three numbers and 3 folds); only 'scale' reads them, once per split
    from cakernels.model_selection import _svm_search

    rows = []
    real = _svm_search.resolve_gamma
    monkeypatch.setattr(_svm_search, "resolve_gamma",
                        lambda g, X: rows.append((g, X.shape[0])) or real(g, X))
    X, y = make_classification(n_samples=150, n_features=4, random_state=0)
    search = CASVCCV(n_partitions=2, Cs=[1.0], gammas=[0.1, "auto", "scale", 0.5], cv=3,
                     random_state=0).fit(X, y)
    assert sorted(n for g, n in rows if g == "scale") == [100, 100, 100]
    assert all(n == 1 for g, n in rows if g != "scale")
    assert len(search.cv_results_["params"]) == 4  # (the scores: the refit tests above)
