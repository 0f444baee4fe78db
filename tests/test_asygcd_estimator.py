"""AsyGCDSVC and solver='asygcd'/'pscd' in the partitioned SVMs."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs, make_classification
from sklearn.model_selection import GridSearchCV
from sklearn.svm import SVC

from cakernels import BKMSVC, CASVC, AsyGCDSVC


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=500, n_features=8, n_informative=5, random_state=0)
    return X[:350], y[:350], X[350:], y[350:]


@pytest.fixture(scope="module")
def multiclass():
    X, y = make_blobs(n_samples=400, centers=4, n_features=4, cluster_std=2.5, random_state=2)
    return X[:300], y[:300], X[300:], y[300:]


def _dual_objective(clf, X, y):
    """0.5 a^T Q a - sum(a) of a binary AsyGCDSVC, from its support vectors."""
    m = clf.model_
    coef = m.dual_coef_[0]
    d = ((m.support_vectors_[:, None] - m.support_vectors_[None]) ** 2).sum(-1)
    K = np.exp(-clf.gamma_ * d)
    return 0.5 * coef @ K @ coef - np.abs(coef).sum()


@pytest.mark.parametrize("n_threads", [1, 2])
def test_binary_close_to_svc(binary, n_threads):
    X, y, Xt, yt = binary
    clf = AsyGCDSVC(C=5.0, n_threads=n_threads, random_state=0).fit(X, y)
    ref = SVC(C=5.0).fit(X, y)
    assert clf.score(Xt, yt) >= ref.score(Xt, yt) - 0.05
    dec = clf.decision_function(Xt)
    np.testing.assert_array_equal(clf.classes_[(dec > 0).astype(int)], clf.predict(Xt))


def test_two_threads_reach_the_serial_objective(binary):
    X, y, _, _ = binary
    one = AsyGCDSVC(C=5.0, n_threads=1, tol=1e-4, random_state=0).fit(X, y)
    two = AsyGCDSVC(C=5.0, n_threads=2, tol=1e-4, random_state=0).fit(X, y)
    pscd = AsyGCDSVC(C=5.0, n_threads=2, tol=1e-4, selection="random", random_state=0).fit(X, y)
    f1 = _dual_objective(one, X, y)
    assert _dual_objective(two, X, y) == pytest.approx(f1, rel=1e-3)
    assert _dual_objective(pscd, X, y) == pytest.approx(f1, rel=1e-3)


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_multiclass(multiclass, multi_class):
    X, y, Xt, yt = multiclass
    clf = AsyGCDSVC(C=2.0, multi_class=multi_class, n_threads=2, random_state=0).fit(X, y)
    dec = clf.decision_function(Xt)
    assert dec.shape == (len(Xt), 4)
    np.testing.assert_array_equal(clf.classes_[np.argmax(dec, axis=1)], clf.predict(Xt))
    assert clf.score(Xt, yt) >= SVC(C=2.0).fit(X, y).score(Xt, yt) - 0.05
    assert clf.n_iter_.shape == ((6,) if multi_class == "ovo" else (4,))


def test_weights_grid_pickle(binary):
    X, y, Xt, yt = binary
    w = np.where(y == 1, 5.0, 1.0)
    a = AsyGCDSVC(n_threads=1, random_state=0).fit(X, y)
    b = AsyGCDSVC(n_threads=1, random_state=0).fit(X, y, sample_weight=w)
    assert (b.predict(Xt) == 1).sum() >= (a.predict(Xt) == 1).sum()
    c = AsyGCDSVC(n_threads=1, random_state=0, class_weight={0: 1.0, 1: 5.0}).fit(X, y)
    np.testing.assert_allclose(c.decision_function(Xt), b.decision_function(Xt), rtol=1e-6,
                               atol=1e-8)
    grid = GridSearchCV(AsyGCDSVC(n_threads=1, random_state=0),
                        {"C": [0.5, 5.0], "gamma": ["scale", 0.05]}, cv=3).fit(X, y)
    restored = pickle.loads(pickle.dumps(grid.best_estimator_))
    np.testing.assert_array_equal(restored.predict(Xt), grid.predict(Xt))


def test_bad_input(binary):
    X, y, _, _ = binary
    with pytest.raises(ValueError, match="number of classes"):
        AsyGCDSVC().fit(X, np.zeros(len(y)))
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        AsyGCDSVC().fit(Xn, y)
    with pytest.raises(ValueError):
        AsyGCDSVC(n_threads=0).fit(X, y)
    with pytest.raises(ValueError):
        AsyGCDSVC(selection="cyclic").fit(X, y)


@pytest.mark.parametrize("solver", ["asygcd", "pscd"])
def test_partitioned_with_asygcd(solver, multiclass):
    X, y, Xt, yt = multiclass
    clf = BKMSVC(n_partitions=3, solver=solver, random_state=0, C=2.0).fit(X, y)
    ref = BKMSVC(n_partitions=3, solver="libsvm", random_state=0, C=2.0).fit(X, y)
    assert clf.score(Xt, yt) >= ref.score(Xt, yt) - 0.05
    t = CASVC(n_partitions=2, solver=solver, backend="threads", n_jobs=2, random_state=0).fit(X, y)
    assert t.score(Xt, yt) > 0.8


def test_sparse_equals_dense(binary):
    X, y, Xt, yt = binary
    X = X.copy()
    X[np.abs(X) < 0.7] = 0.0
    kw = dict(C=3.0, n_threads=1, random_state=0)
    dense = AsyGCDSVC(**kw).fit(X, y)
    sparse = AsyGCDSVC(**kw).fit(sp.csr_matrix(X), y)
    np.testing.assert_array_equal(sparse.support_, dense.support_)
    np.testing.assert_allclose(sparse.decision_function(Xt), dense.decision_function(Xt),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sparse.decision_function(sp.csr_matrix(Xt)),
                               dense.decision_function(Xt), rtol=1e-12, atol=1e-12)
    two = AsyGCDSVC(C=3.0, n_threads=2, random_state=0).fit(sp.csr_matrix(X), y)
    assert np.mean(two.predict(Xt) == dense.predict(Xt)) >= 0.97


def test_fit_intercept(binary):
    X, y, Xt, yt = binary
    y = y.copy()
    y[np.flatnonzero(y == 1)[:120]] = 0  # imbalanced
    clf = AsyGCDSVC(C=2.0, fit_intercept=True, intercept_scaling=2.0, n_threads=1,
                    random_state=0).fit(X, y)
    m = clf.model_
    K = np.exp(-clf.gamma_ * ((Xt[:, None] - m.support_vectors_[None]) ** 2).sum(-1))
    coef = m.dual_coef_[0]
    np.testing.assert_allclose(clf.decision_function(Xt), K @ coef + 4.0 * coef.sum(),
                               rtol=1e-10, atol=1e-10)
    assert clf.intercept_[0] == pytest.approx(4.0 * coef.sum())
    assert AsyGCDSVC(n_threads=1, random_state=0).fit(X, y).intercept_[0] == 0.0


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
def test_intercepts_have_the_sign_of_their_decision_values(multiclass, multi_class):
    # one-vs-one intercepts were stored positive for a pair's second class: the
    # opposite sign of the estimator's own (and SVC's) one-vs-one decision values
    X, y, _, _ = multiclass
    clf = AsyGCDSVC(kernel="linear", fit_intercept=True, intercept_scaling=3.0,
                    multi_class=multi_class, n_threads=1, random_state=0).fit(X, y)
    at_zero = clf.model_.decision_function(np.zeros((1, X.shape[1])))[0]
    np.testing.assert_allclose(clf.intercept_, at_zero, rtol=1e-12, atol=1e-12)
    if multi_class == "ovo":  # SVC's convention, on the same kind of problem
        svc = SVC(kernel="linear", decision_function_shape="ovo").fit(X, y)
        assert np.all(np.sign(clf.intercept_) == np.sign(svc.intercept_))


def test_a_cache_too_small_is_rounded_up_through_the_estimator(binary):
    """As LIBSVM (SVC(cache_size=1e-4) fits), the estimators round a cache too
    small for two kernel columns up to them: the same model as a large cache
    (whether a fit worked depended on the partition sizes)."""
    X, y, _, _ = binary
    for make in (lambda c: AsyGCDSVC(cache_size=c, n_threads=1, random_state=0),
                 lambda c: CASVC(n_partitions=1, solver="smo", cache_size=c),
                 lambda c: CASVC(n_partitions=2, solver="pscd", cache_size=c,
                                 random_state=0)):
        tiny, large = make(1e-4).fit(X, y), make(200).fit(X, y)
        np.testing.assert_allclose(tiny.decision_function(X), large.decision_function(X),
                                   rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("bad", [-1.0, np.nan])
def test_negative_or_nan_class_weight_is_named(bad):
    # it was "every class needs a sample with positive weight" (negative) or an
    # overflow (NaN): the message of the other SVMs
    X, y = make_classification(n_samples=80, random_state=0)
    with pytest.raises(ValueError, match="class_weight must be finite and non-negative"):
        AsyGCDSVC(class_weight={0: bad}).fit(X, y)
