"""Soft routing at prediction (``routing='vote'`` for the SVMs, ``combine='vote'`` for
PartitionedKernelRidge): every test sample gets the mean of its ``n_voters`` nearest
centres' models weighted by the inverse squared distance to each centre, checked
against a brute-force evaluation of every local model on every sample."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification, make_regression
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import InvalidParameterError

from cakernels import (
    BKMSVC,
    BKRR2CV,
    CASVC,
    FCFSSVC,
    PartitionedKernelRidge,
    PartitionedSVC,
)
from cakernels._engine import vote_weights


def brute_force_vote(centers, X, local_values, k):
    """Weighted mean over the k nearest centres (sample by sample, ties to the lower
    index) of ``local_values[j][i]``, model j's value on sample i."""
    out = []
    for i, x in enumerate(X):
        d2 = np.array([np.sum((x - c) ** 2) for c in centers])
        near = sorted(range(len(centers)), key=lambda j: (d2[j], j))[:k]
        if d2[near[0]] == 0.0:
            out.append(local_values[near[0]][i])
            continue
        w = np.array([1.0 / d2[j] for j in near])
        w /= w.sum()
        out.append(sum(wj * local_values[j][i] for wj, j in zip(w, near)))
    return np.array(out)


@pytest.fixture(scope="module")
def binary():
    return make_classification(n_samples=500, n_features=6, random_state=0)


@pytest.mark.parametrize("k", [2, 3, 6])
def test_svc_vote_is_the_weighted_mean_of_the_nearest_models(binary, k):
    X, y = binary
    Xt = X[::3] + 0.05
    clf = FCFSSVC(6, gamma=0.3, routing="vote", n_voters=k, random_state=0).fit(X, y)
    # every local model is a scikit-learn SVC: its own decision function is the reference
    local = [est.decision_function(Xt) for est in clf.estimators_]
    ref = brute_force_vote(clf.centers_, Xt, local, k)
    dec = clf.decision_function(Xt)
    np.testing.assert_allclose(dec, ref, rtol=1e-9, atol=1e-9)
    # predict follows the mean (0 is classes_[1]'s, as for one SVC)
    np.testing.assert_array_equal(clf.predict(Xt), clf.classes_[(ref >= 0).astype(int)])


def test_multiclass_vote_is_the_argmax_of_the_weighted_mean():
    X, y = make_classification(n_samples=600, n_features=6, n_informative=4, n_classes=3,
                               random_state=1)
    clf = PartitionedSVC("kbalance", 5, gamma=0.3, routing="vote", n_voters=3,
                         random_state=0).fit(X, y)
    # a model's scores in the global class layout (one-vs-rest, as SVC's 'ovr')
    local = [clf._local_decision(est, X, 1) for est in clf.estimators_]
    ref = brute_force_vote(clf.centers_, X, local, 3)
    np.testing.assert_allclose(clf.decision_function(X), ref, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.argmax(ref, axis=1)])


@pytest.mark.parametrize("multi_output", [False, True])
def test_krr_vote_is_the_weighted_mean_of_the_nearest_models(multi_output):
    X, y = make_regression(n_samples=300, n_features=4, n_targets=2 if multi_output else 1,
                           noise=1.0, random_state=0)
    y = y / np.std(y)
    reg = PartitionedKernelRidge(combine="vote", n_partitions=5, sigma=2.0, lam=1e-3,
                                 n_voters=3, random_state=0).fit(X, y)
    local = reg.local_predictions(X)
    ref = brute_force_vote(reg.centers_, X, list(local), 3)
    np.testing.assert_allclose(reg.predict(X), ref, rtol=1e-10, atol=1e-12)


def test_one_voter_is_nearest_routing_and_nearest_is_unchanged(binary):
    X, y = binary
    near = BKMSVC(4, random_state=0).fit(X, y)
    one = BKMSVC(4, routing="vote", n_voters=1, random_state=0).fit(X, y)
    assert near.routing == "nearest" and near.n_voters == 3
    np.testing.assert_array_equal(one.decision_function(X), near.decision_function(X))
    np.testing.assert_array_equal(one.predict(X), near.predict(X))
    # routing acts at prediction only: the same fitted models
    vote = BKMSVC(4, routing="vote", random_state=0).fit(X, y)
    for a, b in zip(vote.estimators_, near.estimators_):
        np.testing.assert_array_equal(a.dual_coef_, b.dual_coef_)


def test_more_voters_than_partitions_uses_all(binary):
    X, y = binary
    a = CASVC(3, routing="vote", n_voters=10, random_state=0).fit(X, y)
    b = CASVC(3, routing="vote", n_voters=3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))


def test_a_sample_on_a_centre_takes_that_model_alone(binary):
    X, y = binary
    clf = BKMSVC(4, routing="vote", random_state=0).fit(X, y)
    centres = clf.centers_
    dec = clf.decision_function(centres)
    for j, c in enumerate(centres):
        assert dec[j] == pytest.approx(clf.estimators_[j].decision_function(c[None])[0],
                                       rel=1e-9, abs=1e-9)


def test_vote_weights():
    w = vote_weights(np.array([[1.0, 2.0, 4.0], [0.0, 0.0, 3.0], [2.0, 2.0, 2.0]]))
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    np.testing.assert_allclose(w[0], np.array([1, 0.5, 0.25]) / 1.75)
    np.testing.assert_array_equal(w[1], [1.0, 0.0, 0.0])  # on a centre
    np.testing.assert_allclose(w[2], 1 / 3)
    assert vote_weights(np.zeros((0, 3))).shape == (0, 3)


def test_vote_threads_sparse_and_float32_agree(binary):
    X, y = binary
    ref = CASVC(4, routing="vote", random_state=0).fit(X, y)
    thr = CASVC(4, routing="vote", backend="threads", n_jobs=2, random_state=0).fit(X, y)
    np.testing.assert_allclose(thr.decision_function(X), ref.decision_function(X), atol=1e-10)
    dec_sparse = ref.decision_function(sp.csr_matrix(X))
    np.testing.assert_allclose(dec_sparse, ref.decision_function(X), atol=1e-8)
    X32 = np.asfortranarray(X.astype(np.float32))
    before = X32.copy()
    ref.predict(X32)
    np.testing.assert_array_equal(X32, before)  # the user's array is not modified


@pytest.mark.parametrize("params", [{"routing": "soft"}, {"n_voters": 0},
                                    {"n_voters": 2.5}])
def test_bad_routing_is_refused(binary, params):
    X, y = binary
    with pytest.raises(InvalidParameterError):
        CASVC(4, **params).fit(X, y)


def test_bad_krr_combine_is_refused():
    X, y = make_regression(n_samples=100, n_features=3, random_state=0)
    with pytest.raises(InvalidParameterError):
        PartitionedKernelRidge(combine="vote", n_voters=-1).fit(X, y)
    # the fast search scores held-out rows with their own partition only
    with pytest.raises(TypeError):
        BKRR2CV(combine="vote")


@pytest.mark.parametrize("params", [{"routing": "soft"}, {"routing": "vote", "n_voters": 0},
                                    {"routing": "vote", "n_voters": 3.0},
                                    {"routing": "vote", "n_voters": True}])
def test_bad_routing_set_after_fit_is_refused_at_prediction(binary, params):
    # set_params switches a fitted model's routing: its values are checked where they
    # act ('soft' and n_voters=0 predicted by nearest centre, 3.0 blamed n_nearest)
    X, y = binary
    clf = CASVC(4, random_state=0).fit(X, y)
    clf.set_params(**params)
    name = "routing" if "soft" in params.values() else "n_voters"
    for method in (clf.predict, clf.decision_function):
        with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of CASVC"):
            method(X[:5])
    reg = PartitionedKernelRidge(n_partitions=4, random_state=0).fit(X, y.astype(float))
    reg.set_params(**{"combine" if k == "routing" else k: ("avg" if v == "soft" else v)
                      for k, v in params.items()})
    with pytest.raises(InvalidParameterError, match="parameter of PartitionedKernelRidge"):
        reg.predict(X[:5])
    clf.set_params(routing="vote", n_voters=np.int64(2))  # a valid switch still works
    assert clf.predict(X[:5]).shape == (5,)


@pytest.mark.parametrize("bad", [0, -1, 1.7, "2", True, None])
def test_nearest_partitions_refuses_a_bad_count(bad):
    # 0 gave an (n, 0) result, 1.7 was truncated, '2' accepted, -1 a NumPy error
    from cakernels.partition import KBalancePartitioner

    X = np.random.RandomState(0).randn(50, 3)
    part = KBalancePartitioner(4, random_state=0).fit(X)
    with pytest.raises(ValueError, match="n_nearest must be a positive integer"):
        part.nearest_partitions(X[:3], bad)
    order, _ = part.nearest_partitions(X[:3], np.int64(9))  # at most n_partitions_
    assert order.shape == (3, 4)


def test_routing_in_grid_search(binary):
    X, y = binary
    gs = GridSearchCV(FCFSSVC(4, random_state=0),
                      {"routing": ["nearest", "vote"], "n_voters": [2, 3]}, cv=3).fit(X, y)
    assert gs.best_params_["routing"] in ("nearest", "vote")
    assert len(gs.cv_results_["params"]) == 4
