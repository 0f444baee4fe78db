"""Partitioned SVM classifiers: invariants against SVC and brute force."""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs, make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from cakernels import (
    BKMSVC,
    BKRR2,
    BKRR2CV,
    CASVC,
    CASVCCV,
    CPSVC,
    AsyGCDSVC,
    CascadeSVC,
    DCSVC,
    DisSMOSVC,
    FCFSSVC,
    PartitionedSVC,
)
from cakernels._kernels import kernel_dot
from cakernels._solvers.smo import smo_fit
from cakernels.partition import KBalancePartitioner

FRONT_DOORS = [CASVC, FCFSSVC, BKMSVC, CPSVC]


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=600, n_features=8, n_informative=5,
                               random_state=0)
    return X[:400], y[:400], X[400:], y[400:]


@pytest.fixture(scope="module")
def multiclass():
    X, y = make_blobs(n_samples=450, centers=4, n_features=5, cluster_std=3.0,
                      random_state=1)
    return X[:300], y[:300], X[300:], y[300:]


@pytest.mark.parametrize("params", [
    {},
    {"C": 10.0, "gamma": 0.1},
    {"kernel": "linear", "C": 0.5},
    {"kernel": "poly", "degree": 2, "coef0": 1.0, "gamma": "auto"},
    {"kernel": "sigmoid", "gamma": 0.01, "coef0": -1.0},
    {"class_weight": "balanced"},
    {"class_weight": {0: 1.0, 1: 3.0}, "tol": 1e-4},
])
def test_one_partition_is_svc(binary, params):
    X, y, Xt, _ = binary
    ours = CASVC(n_partitions=1, solver="libsvm", **params).fit(X, y)
    ref = SVC(**params).fit(X, y)
    np.testing.assert_array_equal(ours.predict(Xt), ref.predict(Xt))
    np.testing.assert_allclose(ours.decision_function(Xt), ref.decision_function(Xt),
                               rtol=1e-10, atol=1e-12)
    assert ours.n_support_total_ == ref.support_.size


def test_default_solver_is_native_smo(binary, multiclass):
    """solver='smo' is the default: one partition is the native SMO's solution
    of the whole problem (bit for bit), which agrees with SVC's to its tol."""
    X, y, Xt, _ = binary
    clf = CASVC(n_partitions=1).fit(X, y)
    assert clf.solver == "smo" and PartitionedSVC().solver == "smo"
    y_pm = np.where(y == clf.classes_[1], 1.0, -1.0)
    res = smo_fit(X, y_pm, 1.0, gamma=clf.gamma_)
    sv = res["support"]
    f = kernel_dot(Xt, X[sv], res["alpha"][sv] * y_pm[sv], kernel="rbf",
                   gamma=clf.gamma_) + res["intercept"]
    np.testing.assert_allclose(clf.decision_function(Xt), f, rtol=1e-12, atol=1e-12)
    ref = SVC().fit(X, y)
    np.testing.assert_allclose(clf.decision_function(Xt), ref.decision_function(Xt),
                               atol=1e-2)
    # more classes, CSR and weights as well: one-vs-one, as LIBSVM
    X, y, Xt, _ = multiclass
    w = np.random.RandomState(0).uniform(0.5, 2.0, size=len(y))
    ours = BKMSVC(n_partitions=1, C=3.0).fit(sp.csr_matrix(X), y, sample_weight=w)
    ref = SVC(C=3.0).fit(X, y, sample_weight=w)
    assert np.mean(ours.predict(sp.csr_matrix(Xt)) == ref.predict(Xt)) >= 0.98


def test_one_partition_is_svc_multiclass_sparse_weighted(multiclass):
    X, y, Xt, _ = multiclass
    w = np.random.RandomState(0).uniform(0.5, 2.0, size=len(y))
    Xs, Xts = sp.csr_matrix(X), sp.csr_matrix(Xt)
    ref = SVC(C=3.0).fit(Xs, y, sample_weight=w)
    for cls in FRONT_DOORS:
        ours = cls(n_partitions=1, C=3.0, solver="libsvm").fit(Xs, y, sample_weight=w)
        np.testing.assert_array_equal(ours.predict(Xts), ref.predict(Xts))
        np.testing.assert_allclose(ours.decision_function(Xts), ref.decision_function(Xts),
                                   rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cls", FRONT_DOORS)
def test_routing_is_nearest_centre_brute_force(cls, multiclass):
    X, y, Xt, _ = multiclass
    clf = cls(n_partitions=4, C=2.0, solver="libsvm", random_state=0).fit(X, y)
    route = np.argmin(((Xt[:, None, :] - clf.centers_[None]) ** 2).sum(-1), axis=1)
    expected = np.array([clf.estimators_[r].predict(Xt[i:i + 1])[0]
                         for i, r in enumerate(route)])
    np.testing.assert_array_equal(clf.predict(Xt), expected)
    # each local model is an SVC on exactly its partition's samples
    for j, est in enumerate(clf.estimators_):
        members = clf.partitioner_.labels_ == j
        if hasattr(est, "support_vectors_"):
            ref = SVC(C=2.0, gamma=clf.gamma_).fit(X[members], y[members])
            np.testing.assert_allclose(est.dual_coef_, ref.dual_coef_)


def test_gamma_scale_is_resolved_globally(binary):
    X, y, _, _ = binary
    clf = CASVC(n_partitions=4, solver="libsvm", random_state=0).fit(X, y)
    assert clf.gamma_ == pytest.approx(1.0 / (X.shape[1] * X.var()))
    assert all(est.gamma == clf.gamma_ for est in clf.estimators_)


@pytest.mark.parametrize("solver", ["smo", "libsvm"])
def test_kernel_set_after_fit_keeps_the_fitted_kernel(solver):
    # every local model predicts with the kernel it was fitted with: binary local
    # models read the estimator's current kernel, multiclass ones kept theirs, and
    # LIBSVM's cached view took the parameters of its first prediction
    rng = np.random.RandomState(0)
    centres = np.array([[0, 0], [20, 0], [0, 20], [20, 20]])
    X = np.vstack([c + rng.randn(60, 2) for c in centres])
    # partitions of 1, 2, 3 and 2 classes
    y = np.r_[np.zeros(60, int), rng.choice([0, 1], 60), rng.choice([1, 2], 60),
              rng.choice([0, 1, 2], 60)]
    Xt = np.vstack([c + rng.randn(20, 2) for c in centres])
    a = CPSVC(n_partitions=4, solver=solver, random_state=0).fit(X, y)
    assert sorted(len(m.classes_) for m in a.estimators_) == [1, 2, 2, 3]
    b = pickle.loads(pickle.dumps(a))  # never predicted before the change
    dec, pred = a.decision_function(Xt), a.predict(Xt)
    for est in (a, b):
        est.set_params(kernel="poly", degree=2, coef0=1.0, gamma=0.5)
        np.testing.assert_array_equal(est.decision_function(Xt), dec)
        np.testing.assert_array_equal(est.predict(Xt), pred)
    # the next fit takes the new kernel
    assert not np.allclose(a.fit(X, y).decision_function(Xt), dec)


def test_single_class_partition_predicts_its_class():
    rng = np.random.RandomState(0)
    # two well separated groups; the far group holds class 2 only
    X = np.r_[rng.randn(60, 2), rng.randn(30, 2) + 20]
    y = np.r_[rng.randint(0, 2, 60), np.full(30, 2)]
    clf = CPSVC(n_partitions=2, random_state=0).fit(X, y)
    assert clf.classes_.tolist() == [0, 1, 2]
    far = rng.randn(10, 2) + 20
    assert np.all(clf.predict(far) == 2)
    dec = clf.decision_function(far)
    assert dec.shape == (10, 3)
    assert np.all(np.argmax(dec, axis=1) == 2)
    assert 0 in clf.fit_stats_["n_support"]


def test_multiclass_scores_share_one_scale_across_partitions():
    """A partition's classes beat the classes it lacks: its one-vs-rest scores are
    raised by their number, so that a clear winner scores about n_classes - 1 in
    every partition (a partition of 2 classes of 5 gave its winner about 1, below
    the losers of a partition of all 5, and calibration read them wrong); the
    lacking classes get -1. One partition (every class) gives SVC's scores."""
    rng = np.random.RandomState(0)
    # two far-apart groups: classes 0-3 mixed in one, class 3 and 4 in the other
    A = rng.randn(160, 2)
    B = rng.randn(160, 2) + 30
    X = np.r_[A, B]
    y = np.r_[np.arange(160) % 4, np.where(np.arange(160) % 2 == 0, 3, 4)]
    clf = BKMSVC(n_partitions=2, C=10.0, gamma=0.5, break_ties=True, random_state=0).fit(X, y)
    parts = clf.partitioner_.assign(X)
    sizes = sorted(len(m.classes_) for m in clf.estimators_)
    assert sizes == [2, 4]
    dec = clf.decision_function(X)
    np.testing.assert_array_equal(clf.classes_[np.argmax(dec, axis=1)], clf.predict(X))
    for p, model in enumerate(clf.estimators_):
        rows = parts == p
        local = np.searchsorted(clf.classes_, model.classes_)
        lacking = np.setdiff1d(np.arange(5), local)
        assert np.all(dec[np.ix_(rows, lacking)] == -1.0)
        # votes + squashed confidences in (-1/3, 1/3), raised by the lacking classes
        scores = dec[np.ix_(rows, local)]
        assert np.all(scores > 5 - len(local) - 1 / 3) and np.all(scores < 4 + 1 / 3)
        if len(local) == 2:  # one duel: the winner has one vote, 1 + 3
            top = scores.max(axis=1)
            assert np.all((top > 4 - 1 / 3) & (top < 4 + 1 / 3)), top
    # one partition: SVC's one-vs-rest scores
    from sklearn.svm import SVC

    one = BKMSVC(n_partitions=1, C=10.0, gamma=0.5, solver="libsvm", random_state=0).fit(X, y)
    ref = SVC(C=10.0, gamma=0.5).fit(X, y)
    np.testing.assert_allclose(one.decision_function(X), ref.decision_function(X),
                               rtol=1e-9, atol=1e-9)
    # a partition of one class: its class is the clear winner, n_classes - 1
    Xs = np.r_[rng.randn(90, 2), rng.randn(30, 2) + 40]
    ys = np.r_[np.arange(90) % 3, np.full(30, 3)]
    single = CPSVC(n_partitions=2, random_state=0).fit(Xs, ys)
    far = single.decision_function(rng.randn(5, 2) + 40)
    np.testing.assert_array_equal(far, np.tile([-1.0, -1.0, -1.0, 3.0], (5, 1)))


def test_decision_function_consistent_with_predict(binary, multiclass):
    X, y, Xt, _ = binary
    for cls in FRONT_DOORS:
        clf = cls(n_partitions=4, random_state=0).fit(X, y)
        dec = clf.decision_function(Xt)
        np.testing.assert_array_equal(clf.classes_[(dec > 0).astype(int)], clf.predict(Xt))
    X, y, Xt, _ = multiclass
    for cls in FRONT_DOORS:
        clf = cls(n_partitions=3, random_state=0, break_ties=True).fit(X, y)
        dec = clf.decision_function(Xt)
        assert dec.shape == (len(Xt), 4)
        np.testing.assert_array_equal(clf.classes_[np.argmax(dec, axis=1)], clf.predict(Xt))
        assert clf.score(Xt, _) > 0.5


def test_string_labels_and_global_classes():
    X, y = make_blobs(n_samples=200, centers=3, random_state=3)
    names = np.array(["ant", "bee", "cat"])[y]
    clf = BKMSVC(n_partitions=3, random_state=0).fit(X, names)
    assert clf.classes_.tolist() == ["ant", "bee", "cat"]
    assert set(clf.predict(X)) <= set(names)
    assert clf.score(X, names) > 0.9


def test_sample_weight_is_honoured(binary):
    X, y, Xt, _ = binary
    w = np.where(y == 1, 10.0, 0.1)
    a = CASVC(n_partitions=2, random_state=0).fit(X, y)
    b = CASVC(n_partitions=2, random_state=0).fit(X, y, sample_weight=w)
    assert (b.predict(Xt) == 1).sum() > (a.predict(Xt) == 1).sum()
    # zero weight = sample absent from its local problem
    w0 = np.ones(len(y))
    w0[::3] = 0
    c = CASVC(n_partitions=1, solver="libsvm").fit(X, y, sample_weight=w0)
    ref = SVC(gamma=c.gamma_).fit(X[w0 > 0], y[w0 > 0])
    np.testing.assert_allclose(c.decision_function(Xt), ref.decision_function(Xt), rtol=1e-8)


def test_threads_backend_equals_serial(multiclass):
    X, y, Xt, _ = multiclass
    for cls in FRONT_DOORS:
        s = cls(n_partitions=4, random_state=0).fit(X, y)
        t = cls(n_partitions=4, random_state=0, backend="threads", n_jobs=2).fit(X, y)
        np.testing.assert_array_equal(s.predict(Xt), t.predict(Xt))
        np.testing.assert_allclose(s.decision_function(Xt), t.decision_function(Xt))
        assert t.fit_stats_["n_workers"] == 2


def test_fit_stats(binary):
    X, y, _, _ = binary
    clf = FCFSSVC(n_partitions=4, random_state=0).fit(X, y)
    st = clf.fit_stats_
    for key in ["partition_seconds", "solve_seconds", "n_iter", "n_support",
                "partition_sizes", "comm_bytes", "comm_messages"]:
        assert key in st
    assert len(st["solve_seconds"]) == len(st["n_iter"]) == len(st["n_support"]) == 4
    assert st["partition_sizes"] == [100] * 4
    assert st["comm_bytes"] == 0 and st["comm_messages"] == 0
    assert all(n > 0 for n in st["n_iter"])
    np.testing.assert_array_equal(clf.n_iter_, st["n_iter"])


def test_pipeline_gridsearch_pickle(binary):
    X, y, Xt, yt = binary
    pipe = make_pipeline(StandardScaler(), CASVC(n_partitions=2, random_state=0))
    grid = GridSearchCV(pipe, {"casvc__C": [0.5, 5.0], "casvc__gamma": ["scale", 0.05]},
                        cv=3).fit(X, y)
    assert set(grid.best_params_) == {"casvc__C", "casvc__gamma"}
    assert grid.score(Xt, yt) > 0.8
    clone = pickle.loads(pickle.dumps(grid.best_estimator_))
    np.testing.assert_array_equal(clone.predict(Xt), grid.predict(Xt))


def test_partitioner_instance(binary):
    X, y, _, _ = binary
    part = KBalancePartitioner(n_partitions=5, assign_order="regret", random_state=0)
    clf = PartitionedSVC(partitioner=part).fit(X, y)
    assert clf.partition_sizes_.tolist() == [80] * 5
    assert part.__dict__.get("labels_") is None  # the given instance is not fitted


class _Halves:
    """A partitioner of this package's protocol only: fit(X) and assign(X) (no
    get_params: it is deep-copied where a scikit-learn estimator is cloned)."""

    def fit(self, X, y=None):
        X = np.asarray(X)
        self.labels_ = (X[:, 0] > 0).astype(np.intp)
        self.centers_ = np.array([X[self.labels_ == j].mean(0) for j in range(2)])
        self.sizes_ = np.bincount(self.labels_, minlength=2)
        self.n_partitions_ = 2
        return self

    def assign(self, X):
        X = np.asarray(X)
        return ((X[:, None, :] - self.centers_[None]) ** 2).sum(-1).argmin(1)


@pytest.mark.parametrize("routing", ["nearest", "vote"])
def test_a_custom_partitioner_object_routes_predictions(binary, routing):
    # fit took an object with fit and assign (make_partitioner's protocol), and
    # predict called the package partitioners' private routing on it
    from cakernels import PartitionedKernelRidge

    X, y, Xt, _ = binary
    clf = PartitionedSVC(partitioner=_Halves(), routing=routing, n_voters=2).fit(X, y)
    reg = PartitionedKernelRidge(partitioner=_Halves(), combine=routing, n_voters=2).fit(
        X, y.astype(float))
    part = clf.partitioner_
    dec = np.column_stack([m.decision_function(Xt) for m in clf.estimators_])
    pred = np.column_stack([m.predict(Xt) for m in reg.estimators_])
    if routing == "nearest":  # each row by the model of its partition (assign's)
        weights = np.eye(2)[part.assign(Xt)]
    else:  # inverse squared distances to the object's centres_
        sq = ((Xt[:, None, :] - part.centers_[None]) ** 2).sum(-1)
        weights = (1.0 / sq) / (1.0 / sq).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(clf.decision_function(Xt), (weights * dec).sum(1),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(reg.predict(Xt), (weights * pred).sum(1), rtol=1e-9, atol=1e-12)
    if routing == "vote":  # one voter is nearest-centre routing
        one = clf.set_params(n_voters=1).decision_function(Xt)
        nearest = np.eye(2)[np.argmin(((Xt[:, None, :] - part.centers_[None]) ** 2).sum(-1), 1)]
        np.testing.assert_allclose(one, (nearest * dec).sum(1), rtol=1e-9, atol=1e-12)


def test_inputs_are_not_modified_and_dtypes(binary):
    X, y, Xt, _ = binary
    X32 = np.asfortranarray(X.astype(np.float32))
    X32_copy, y_copy = X32.copy(), y.copy()
    a = CASVC(n_partitions=2, random_state=0).fit(X32, y)
    np.testing.assert_array_equal(X32, X32_copy)
    np.testing.assert_array_equal(y, y_copy)
    b = CASVC(n_partitions=2, random_state=0).fit(X32.astype(np.float64), y)
    np.testing.assert_array_equal(a.predict(Xt[::2]), b.predict(Xt[::2]))
    # non-contiguous view
    Xv = np.repeat(X, 2, axis=1)[:, ::2]
    c = CASVC(n_partitions=2, random_state=0).fit(Xv, y)
    np.testing.assert_array_equal(c.predict(Xt), b.fit(X, y).predict(Xt))


def test_sparse_equals_dense(binary):
    X, y, Xt, _ = binary
    d = CASVC(n_partitions=3, random_state=0).fit(X, y)
    s = CASVC(n_partitions=3, random_state=0).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(d.decision_function(Xt), s.decision_function(sp.csr_matrix(Xt)),
                               rtol=1e-8, atol=1e-10)
    # dense test data on a sparse-fitted model (and vice versa) works
    np.testing.assert_array_equal(s.predict(Xt), d.predict(sp.csr_matrix(Xt)))


@pytest.mark.parametrize("cls", FRONT_DOORS)
def test_bad_input(cls, binary):
    X, y, _, _ = binary
    clf = cls(n_partitions=2, random_state=0)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.fit(Xn, y)
    Xi = X.copy()
    Xi[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        clf.fit(Xi, y)
    with pytest.raises(ValueError, match="number of classes"):
        clf.fit(X, np.zeros(len(y)))
    with pytest.raises(ValueError, match="n_partitions=500 is larger"):
        cls(n_partitions=500).fit(X, y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        clf.fit(X, y[:-1])
    with pytest.raises(ValueError, match="2D array"):
        clf.fit(X[:, 0], y)
    with pytest.raises(ValueError, match="Unknown label type"):
        clf.fit(X, np.linspace(0, 1, len(y)))
    with pytest.raises(ValueError, match="sample_weight"):
        clf.fit(X, y, sample_weight=-np.ones(len(y)))
    with pytest.raises(ValueError):
        cls(C=-1).fit(X, y)
    with pytest.raises(ValueError):
        cls(backend="gpu").fit(X, y)
    clf.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :3])
    Xn = X[:5].copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.predict(Xn)


def test_models_pickled_before_the_fitted_kernel_existed_still_predict():
    X, y = make_blobs(n_samples=120, centers=3, random_state=0)
    clf = CPSVC(n_partitions=2, random_state=0).fit(X, y)
    dec = clf.decision_function(X)
    state = clf.__getstate__()
    del state["_fit_kernel"]  # the state of a model pickled before 2026-11-27
    old = CPSVC.__new__(CPSVC)
    old.__setstate__(state)
    np.testing.assert_array_equal(old.decision_function(X), dec)


def test_a_failed_refit_keeps_the_fitted_kernel():
    # gamma_ and the fitted kernel were set before the refit failed: the old
    # local models then predicted with the new kernel
    X, y = make_blobs(n_samples=120, centers=2, random_state=0)
    clf = CASVC(n_partitions=2, random_state=0).fit(X, y)
    dec, gamma = clf.decision_function(X), clf.gamma_
    w = np.zeros(120)
    w[:3] = 1.0
    clf.set_params(kernel="poly", degree=5, gamma=3.0, n_partitions=4)
    with pytest.raises(ValueError, match="positive sample_weight"):
        clf.fit(X, y, sample_weight=w)
    assert clf.gamma_ == gamma
    np.testing.assert_array_equal(clf.decision_function(X), dec)


@pytest.mark.parametrize("make", [
    lambda: CASVC(n_partitions=4), lambda: CascadeSVC(n_partitions=4),
    lambda: BKRR2(n_partitions=4), lambda: CASVCCV(n_partitions=4, Cs=[1.0], cv=2)])
def test_too_few_rows_of_positive_weight_for_the_partitions(make):
    # 100 rows, 3 of positive weight: the error said "larger than the number of
    # samples (3)" about data of 100 rows, without a word of the weights
    rng = np.random.RandomState(0)
    X, y = rng.randn(100, 2), np.arange(100) % 2
    w = np.zeros(100)
    w[[0, 1, 2]] = 1.0
    with pytest.raises(ValueError, match=r"positive sample_weight \(3 of 100\)"):
        make().fit(X, y, sample_weight=w)


def test_the_positive_weight_count_is_checked_against_the_partitioners_own_count():
    # a partitioner instance keeps its n_partitions (the estimator's is ignored):
    # the check used the estimator's 8 and refused a fit of 2 partitions
    from cakernels import PartitionedKernelRidge, PartitionedSVCCV
    from cakernels.partition import RandomPartitioner

    rng = np.random.RandomState(0)
    X, y = rng.randn(40, 2), np.arange(40) % 2
    w = np.zeros(40)
    w[:6] = 1.0
    part = RandomPartitioner(n_partitions=2, random_state=0)
    clf = PartitionedSVC(partitioner=part, n_partitions=8).fit(X, y, sample_weight=w)
    assert clf.partition_sizes_.tolist() == [3, 3]
    PartitionedKernelRidge(partitioner=part, n_partitions=8).fit(X, y, sample_weight=w)
    w20 = np.r_[np.ones(20), np.zeros(20)]
    PartitionedSVCCV(partitioner=part, n_partitions=30, Cs=[1.0], cv=2,
                     random_state=1).fit(X, y, sample_weight=w20)
    with pytest.raises(ValueError, match=r"positive sample_weight \(6 of 40\)"):
        PartitionedSVC(partitioner=RandomPartitioner(n_partitions=8),
                       n_partitions=2).fit(X, y, sample_weight=w)


def test_rows_of_zero_weight_take_no_part():
    """A cluster whose rows all weigh 0 made a partition without a row to train on
    (an error): rows of zero weight now stay out of the partitions, so a fit
    equals one without them (gamma fixed: 'scale' uses all rows, as SVC)."""
    X = np.r_[np.zeros((10, 2)), np.ones((10, 2)) * 10]
    y = np.r_[np.arange(10) % 2, np.arange(10) % 2]  # both classes in both clusters
    X[::2] += 0.01
    w = np.r_[np.zeros(10), np.ones(10)]  # ... but one cluster weighs nothing
    for cls in FRONT_DOORS:
        a = cls(n_partitions=2, gamma=0.5, random_state=0).fit(X, y, sample_weight=w)
        b = cls(n_partitions=2, gamma=0.5, random_state=0).fit(X[10:], y[10:])
        assert a.partition_sizes_.sum() == 10
        np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    scale = CASVC(n_partitions=2, random_state=0).fit(X, y, sample_weight=w)
    assert scale.gamma_ == SVC().fit(X, y, sample_weight=w)._gamma


def test_bagging_with_small_bags_and_many_partitions():
    """BaggingClassifier bootstraps through sample_weight (0 outside the bag)."""
    from sklearn.ensemble import BaggingClassifier

    X, y = make_classification(n_samples=600, n_features=8, n_informative=5, n_classes=3,
                               random_state=0)
    for cls in FRONT_DOORS:
        bag = BaggingClassifier(cls(n_partitions=8, random_state=0), n_estimators=2,
                                max_samples=0.05, random_state=0).fit(X, y)
        assert bag.score(X, y) > 0.4


def test_sparse_with_int64_indices(binary):
    # what sklearn.datasets.load_svmlight_file returns
    X, y, Xt, _ = binary
    Xs = sp.csr_matrix(X)
    X64 = Xs.copy()
    X64.indices = X64.indices.astype(np.int64)
    X64.indptr = X64.indptr.astype(np.int64)
    a = CASVC(n_partitions=2, random_state=0).fit(X64, y)
    b = CASVC(n_partitions=2, random_state=0).fit(Xs, y)
    assert X64.indices.dtype == np.int64
    Xt64 = sp.csr_matrix(Xt)
    Xt64.indices = Xt64.indices.astype(np.int64)
    Xt64.indptr = Xt64.indptr.astype(np.int64)
    np.testing.assert_array_equal(a.predict(Xt64), b.predict(Xt))


# ------------------------------------------------------------------ solver='smo'
def _svc_objective(svc, X, gamma):
    """LIBSVM's dual objective 0.5 a^T Q a - sum(a) from a fitted binary SVC."""
    from sklearn.metrics.pairwise import rbf_kernel

    coef = svc.dual_coef_[0]  # alpha_i y_i
    K = rbf_kernel(svc.support_vectors_, svc.support_vectors_, gamma=gamma)
    return 0.5 * coef @ K @ coef - np.abs(coef).sum()


def test_smo_one_partition_matches_svc(binary):
    X, y, Xt, _ = binary
    ours = CASVC(n_partitions=1, C=4.0, solver="smo").fit(X, y)
    ref = SVC(C=4.0, gamma=ours.gamma_).fit(X, y)
    local = ours.estimators_[0]
    obj = _svc_objective(local, X, ours.gamma_)
    assert obj == pytest.approx(_svc_objective(ref, X, ours.gamma_), rel=1e-3)
    d_ours, d_ref = ours.decision_function(Xt), ref.decision_function(Xt)
    assert np.max(np.abs(d_ours - d_ref)) < 1e-2
    differ = ours.predict(Xt) != ref.predict(Xt)
    assert differ.sum() <= 2 and np.all(np.abs(d_ref[differ]) < 1e-2)


def test_smo_multiclass_weighted_matches_svc(multiclass):
    X, y, Xt, _ = multiclass
    w = np.random.RandomState(1).uniform(0.5, 2.0, len(y))
    ours = CASVC(n_partitions=1, C=2.0, solver="smo", class_weight="balanced").fit(
        X, y, sample_weight=w)
    ref = SVC(C=2.0, gamma=ours.gamma_, class_weight="balanced",
              decision_function_shape="ovo").fit(X, y, sample_weight=w)
    assert np.mean(ours.predict(Xt) == ref.predict(Xt)) >= 0.98
    np.testing.assert_allclose(ours.estimators_[0].decision_function(Xt),
                               ref.decision_function(Xt), atol=2e-2)


@pytest.mark.parametrize("cls", FRONT_DOORS)
def test_smo_partitioned_close_to_libsvm(cls, multiclass):
    X, y, Xt, yt = multiclass
    a = cls(n_partitions=3, random_state=0, solver="smo").fit(X, y)
    b = cls(n_partitions=3, random_state=0, solver="libsvm").fit(X, y)
    assert np.mean(a.predict(Xt) == b.predict(Xt)) >= 0.98
    t = cls(n_partitions=3, random_state=0, solver="smo", backend="threads", n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(t.predict(Xt), a.predict(Xt))


@pytest.mark.parametrize("solver", ["smo", "asygcd"])
def test_native_solvers_take_sparse_input(binary, solver):
    X, y, Xt, _ = binary
    X = X.copy()
    X[np.abs(X) < 0.5] = 0.0
    kw = dict(n_partitions=2, solver=solver, random_state=0)
    dense = CASVC(**kw).fit(X, y)
    sparse = CASVC(**kw).fit(sp.csr_matrix(X), y)
    if solver == "smo":  # single-threaded: the same solution, bit for bit
        for ms, md in zip(sparse.estimators_, dense.estimators_):
            np.testing.assert_array_equal(ms.dual_coef_, md.dual_coef_)
            np.testing.assert_array_equal(ms.intercept_, md.intercept_)
        np.testing.assert_allclose(sparse.decision_function(Xt),
                                   dense.decision_function(Xt), rtol=1e-12, atol=1e-12)
    else:
        assert np.mean(sparse.predict(Xt) == dense.predict(Xt)) >= 0.97


def _all_svms():
    from cakernels import AsyGCDSVC, CascadeSVC, DCFilterSVC, DCSVC, DisSMOSVC

    return [CASVC, FCFSSVC, BKMSVC, CPSVC, CascadeSVC, DCSVC, DCFilterSVC, DisSMOSVC,
            AsyGCDSVC]


@pytest.mark.parametrize("cls", _all_svms(), ids=lambda c: c.__name__)
def test_a_class_without_positive_weight_is_refused_everywhere(cls):
    """A class whose samples all weigh 0 (by sample_weight or class_weight) has bounds
    C_i = 0: no model can predict it. Every SVM refuses it with one message (some
    predicted only that class, others silently dropped it), and class weights must
    be finite and non-negative."""
    from cakernels import AsyGCDSVC, DisSMOSVC

    X, y = make_classification(240, 6, n_informative=4, n_redundant=0,
                               n_clusters_per_class=1, random_state=0)
    kw = {} if cls in (DisSMOSVC, AsyGCDSVC) else {"n_partitions": 4, "random_state": 0}
    with pytest.raises(ValueError, match="every class needs a sample with positive weight"):
        cls(**kw).fit(X, y, sample_weight=(y == 0).astype(float))
    with pytest.raises(ValueError, match="every class needs a sample with positive weight"):
        cls(class_weight={0: 0.0, 1: 1.0}, **kw).fit(X, y)
    # positive weights whose bounds C * w underflow to 0: the class was left out silently
    w = np.where(y == 0, 1e-30, 1.0)
    with pytest.raises(ValueError, match="every class needs a sample with positive weight"
                       ".*underflows"):
        cls(C=1e-300, **kw).fit(X, y, sample_weight=w)
    if cls is not AsyGCDSVC:  # (its message is the one above)
        for bad in (-1.0, np.nan):
            with pytest.raises(ValueError, match="class_weight must be finite and non-neg"):
                cls(class_weight={0: bad, 1: 1.0}, **kw).fit(X, y)
    # one class weighing zero on some rows only is fine
    w = np.ones(240)
    w[np.flatnonzero(y == 1)[:5]] = 0.0
    assert cls(**kw).fit(X, y, sample_weight=w).score(X, y) > 0.8


@pytest.mark.parametrize("cls", [CASVC, CascadeSVC])
def test_max_iter_zero_means_no_limit_for_every_solver(cls, binary):
    # 0 ran a full native solve but no iteration at all with solver='libsvm'
    # (scikit-learn's SVC at 0): one value, two meanings in one estimator
    X, y, Xt, _ = binary
    kw = dict(n_partitions=1 if cls is CASVC else 2, random_state=0)
    smo = cls(solver="smo", max_iter=0, **kw).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        lib = cls(solver="libsvm", max_iter=0, **kw).fit(X, y)
    assert np.mean(lib.predict(Xt) == smo.predict(Xt)) > 0.98
    np.testing.assert_allclose(lib.decision_function(Xt), smo.decision_function(Xt),
                               atol=2e-2)


def _failing_refit_data(kind):
    """5 features, other labels, and a failure after the input checks: fewer rows
    of positive weight than partitions, or kernel values that overflow."""
    rng = np.random.RandomState(1)
    X = rng.randn(40, 5) * (1.0 if kind == "partitions" else 50.0)
    y = np.where(np.arange(40) % 2, "b", "a")
    w = np.zeros(40)
    w[:3] = 1.0
    return X, y, (w if kind == "partitions" else None)


@pytest.mark.parametrize("make, kind", [
    (lambda: CASVC(n_partitions=4, random_state=0), "partitions"),
    (lambda: CascadeSVC(n_partitions=4, random_state=0), "partitions"),
    (lambda: CASVCCV(n_partitions=4, Cs=[1.0], cv=2, random_state=0), "partitions"),
    (lambda: DisSMOSVC(kernel="poly", degree=300, gamma=1.0), "overflow"),
    (lambda: AsyGCDSVC(kernel="poly", degree=300, gamma=1.0, n_threads=1), "overflow"),
])
def test_a_failed_fit_leaves_the_estimator_as_it_was(make, kind):
    # a refit that failed halfway had set the new data's classes_ and
    # n_features_in_ next to the old models (predict answered with the old
    # models' labels as strings, or refused the old data's width); a failed first
    # fit left attributes that made it look fitted
    from sklearn.exceptions import NotFittedError

    X, y = make_blobs(n_samples=80, centers=2, n_features=2, random_state=0)
    Xf, yf, wf = _failing_refit_data(kind)
    first = make()
    match = "positive sample_weight" if kind == "partitions" else "overflow float64"
    with pytest.raises((ValueError, FloatingPointError), match=match):
        first.fit(Xf, yf, sample_weight=wf)
    with pytest.raises(NotFittedError):
        first.predict(X)
    est = make().set_params(**({"kernel": "rbf"} if kind == "overflow" else {}))
    est.fit(X, y)
    before, pred = dict(est.__dict__), est.predict(X)
    est.set_params(**({"kernel": "poly"} if kind == "overflow" else {}))
    with pytest.raises((ValueError, FloatingPointError), match=match):
        est.fit(Xf, yf, sample_weight=wf)
    assert est.n_features_in_ == 2 and est.classes_.tolist() == [0, 1]
    assert sorted(est.__dict__) == sorted(before)
    est.set_params(kernel="rbf") if kind == "overflow" else None
    np.testing.assert_array_equal(est.predict(X), pred)


@pytest.mark.parametrize("make", [lambda: BKRR2(n_partitions=4, random_state=0),
                                  lambda: BKRR2CV(n_partitions=4, cv=2, random_state=0)])
def test_a_failed_krr_refit_leaves_the_estimator_as_it_was(make):
    rng = np.random.RandomState(0)
    X, y = rng.randn(60, 2), rng.randn(60)
    est = make().fit(X, y)
    before, pred = dict(est.__dict__), est.predict(X)
    Xf, _, wf = _failing_refit_data("partitions")
    with pytest.raises(ValueError, match="positive sample_weight"):
        est.fit(Xf, rng.randn(40), sample_weight=wf)
    assert sorted(est.__dict__) == sorted(before) and est.n_features_in_ == 2
    np.testing.assert_array_equal(est.predict(X), pred)


class _BadHalves(_Halves):
    """A partitioner object whose labels or routing break its own partitions."""

    def __init__(self, fault):
        self.fault = fault

    def fit(self, X, y=None):
        super().fit(X)
        if self.fault == "labels":  # noise rows (DBSCAN's -1)
            self.labels_ = self.labels_.copy()
            self.labels_[:5] = -1
        if self.fault == "centers":
            del self.centers_
        if self.fault == "nan-centers":  # routing='vote' gave NaN decisions, silently
            self.centers_ = np.array(self.centers_, dtype=float)
            self.centers_[1, 0] = np.nan
        return self

    def assign(self, X):
        out = super().assign(X)
        return out + 2 if self.fault == "assign" else out


@pytest.mark.parametrize("fault, match", [
    ("labels", r"labels_ must give partition indices in \[0, 2\), got values from -1"),
    ("centers", "must set labels_, sizes_ and centers_.*centers_ missing"),
    ("nan-centers", "_BadHalves.centers_ must be finite real numbers"),
    ("assign", r"assign\(X\) must give partition indices in \[0, 2\)")])
def test_a_custom_partitioner_that_breaks_its_partitions_is_refused(binary, fault, match):
    # labels outside [0, P) dropped training rows silently, and predictions of rows
    # routed outside were uninitialised memory (values not even in classes_)
    from cakernels import PartitionedKernelRidge

    X, y, Xt, _ = binary
    for est in (PartitionedSVC(partitioner=_BadHalves(fault)),
                PartitionedKernelRidge(partitioner=_BadHalves(fault))):
        target = y if isinstance(est, PartitionedSVC) else y.astype(float)
        if fault == "assign":
            est.fit(X, target)
            with pytest.raises(ValueError, match=match):
                est.predict(Xt)
        else:
            with pytest.raises(ValueError, match=match):
                est.fit(X, target)


def test_a_custom_partitioners_layout_attributes_are_not_trusted(binary):
    # owners_ of a user's object were used as they were (partitions on ranks that do
    # not exist: dropped under MPI, unfitted models), and its halo_sizes_ reported
    class Layout(_Halves):
        def fit(self, X, y=None):
            super().fit(X)
            self.owners_ = np.array([5, -1])
            self.halo_sizes_ = np.array([7, -3])
            self.halo_indices_ = [np.array([], dtype=np.int64),
                                  np.flatnonzero(self.labels_ == 0)[:4]]
            return self

    X, y, Xt, _ = binary
    clf = PartitionedSVC(partitioner=Layout()).fit(X, y)
    assert clf.fit_stats_["owners"] == [0, 0]
    assert clf.fit_stats_["halo_sizes"] == [0, 4]  # counted from its halo_indices_
    assert len(clf.estimators_) == 2


def test_a_subclass_of_a_package_partitioner_is_asked_as_a_custom_one(binary):
    # an overridden assign was ignored by predict (the base class's private routing
    # ran), and an overridden fit's labels were not checked (rows dropped silently)
    from cakernels.partition import KMeansPartitioner

    class AllToZero(KMeansPartitioner):
        def assign(self, X):
            return np.zeros(np.asarray(X).shape[0], dtype=int)

    class BadFit(KMeansPartitioner):
        def fit(self, X, y=None):
            super().fit(X)
            self.labels_ = self.labels_.copy()
            self.labels_[:5] = 7
            return self

    X, y, Xt, _ = binary
    clf = PartitionedSVC(partitioner=AllToZero(n_partitions=3, random_state=0)).fit(X, y)
    np.testing.assert_array_equal(clf.decision_function(Xt),
                                  clf.estimators_[0].decision_function(Xt))
    with pytest.raises(ValueError, match=r"BadFit.fit's labels_ must give partition indices"):
        PartitionedSVC(partitioner=BadFit(n_partitions=3, random_state=0)).fit(X, y)


def test_a_partitioner_class_or_an_uncopyable_object_is_a_clear_error(binary):
    import threading

    from cakernels.partition import KMeansPartitioner

    X, y, _, _ = binary
    with pytest.raises(TypeError, match="got the class KMeansPartitioner; pass"):
        PartitionedSVC(partitioner=KMeansPartitioner).fit(X, y)

    class Locked(_Halves):
        def __init__(self):
            self.lock = threading.Lock()

    with pytest.raises(TypeError, match="partitioner Locked cannot be cloned: it has no "
                                        "get_params and cannot be deep-copied"):
        PartitionedSVC(partitioner=Locked()).fit(X, y)

    from sklearn.base import BaseEstimator

    class LockedParam(BaseEstimator):  # get_params, but a parameter clone cannot copy
        def __init__(self, lock=None):
            self.lock = lock

        fit, assign = _Halves.fit, _Halves.assign

    with pytest.raises(TypeError, match="LockedParam cannot be cloned: one of its parameters "
                                        "cannot be deep-copied"):
        PartitionedSVC(partitioner=LockedParam(threading.Lock())).fit(X, y)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("make", [
    lambda: CASVC(n_partitions=1, gamma=0.5, tol=1e-10, random_state=0),
    lambda: DCSVC(n_partitions=1, gamma=0.5, tol=1e-10, random_state=0),
    lambda: CascadeSVC(n_partitions=1, gamma=0.5, tol=1e-10, random_state=0),
    lambda: DisSMOSVC(gamma=0.5, tol=1e-10),
    lambda: AsyGCDSVC(gamma=0.5, tol=1e-10, random_state=0)], ids=lambda m: type(m()).__name__)
def test_integer_weights_equal_repeated_rows_with_a_fixed_gamma(make):
    # the README's reason for the expected failure of scikit-learn's check: not the
    # bounds k C (the dual problem of k copies) but gamma='scale', tol and partitions
    from sklearn.utils.estimator_checks import check_sample_weight_equivalence_on_dense_data

    est = make()
    check_sample_weight_equivalence_on_dense_data(type(est).__name__, est)


def test_multiclass_decision_of_class_incomplete_partitions_is_their_own_svcs():
    # partitions holding 3 of 4 classes, 2 of them and 1 (K-means regions): the
    # decision of a row is its partition's own SVC's one-vs-rest scores raised by the
    # classes the partition lacks (which get -1); a single class scores n_classes - 1.
    # Only scikit-learn's generic checks caught sign errors here before
    from sklearn.svm import SVC
    from sklearn.utils.multiclass import _ovr_decision_function

    from cakernels import CPSVC

    rng = np.random.RandomState(0)

    def blob(centre, n):
        return rng.randn(n, 2) * 0.6 + centre

    regions = [
        (np.vstack([blob([0, 0], 40), blob([1.5, 0], 40), blob([0.7, 1.2], 40)]),
         np.repeat([0, 1, 2], 40)),
        (np.vstack([blob([20, 0], 40), blob([21.5, 0], 40)]), np.repeat([1, 2], 40)),
        (blob([0, 20], 30), np.full(30, 3)),
    ]
    X = np.vstack([r[0] for r in regions])
    y = np.concatenate([r[1] for r in regions])
    clf = CPSVC(n_partitions=3, solver="libsvm", C=1.0, gamma=0.5, random_state=0).fit(X, y)
    dec = clf.decision_function(X)
    start = 0
    for Xr, yr in regions:
        rows = slice(start, start + Xr.shape[0])
        start += Xr.shape[0]
        classes = np.unique(yr)
        expected = np.full((Xr.shape[0], 4), -1.0)
        if classes.size == 1:
            expected[:, classes[0]] = 3.0
        else:
            ref = SVC(C=1.0, gamma=0.5).fit(Xr, yr)
            d = ref.decision_function(Xr)
            ovr = (d if classes.size > 2 else  # a binary SVC: one-vs-one value -d
                   _ovr_decision_function(d[:, None] > 0, d[:, None], 2))
            expected[:, classes] = ovr + (4 - classes.size)
        np.testing.assert_allclose(dec[rows], expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(clf.classes_[np.argmax(dec, axis=1)], clf.predict(X))


def test_libsvm_objective_forms_no_support_vector_matrix(monkeypatch):
    # solver='libsvm' computed its dual objective from the dense n_sv x n_sv kernel
    # (7 GB at 30,000 support vectors, whatever cache_size): now K @ c in row blocks
    from sklearn.metrics.pairwise import rbf_kernel
    from sklearn.svm import SVC

    from cakernels._solvers import local

    def boom(*args, **kwargs):
        raise AssertionError("the support vectors' kernel matrix was formed")

    monkeypatch.setattr(local, "kernel_block", boom)
    X, y = make_classification(n_samples=300, random_state=0)
    y_pm = np.where(y == 1, 1.0, -1.0)
    sol = local.solve_binary_svm(X, y_pm, 2.0, solver="libsvm",
                                 kernel_params=dict(kernel="rbf", gamma=0.1, degree=3,
                                                    coef0=0.0, n_threads=1))
    ref = SVC(gamma=0.1, C=2.0).fit(X, y)
    c = ref.dual_coef_[0]
    K = rbf_kernel(ref.support_vectors_, gamma=0.1)
    assert sol.objective == pytest.approx(0.5 * c @ K @ c - np.abs(c).sum(), rel=1e-10)
    # and through an estimator whose trees report it
    from cakernels import DCSVC

    DCSVC(n_partitions=2, solver="libsvm", random_state=0).fit(X, y)
