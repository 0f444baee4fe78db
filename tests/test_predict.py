"""Prediction paths: every support vector's kernel row computed once for all
one-vs-one (or one-vs-rest) problems, and predictions that do not depend on
the threads they run on."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_limits

from cakernels import CASVC, BKRR2, DCSVC
from cakernels._solvers.native_svc import NativeKernelSVC, _distinct_rows


@pytest.fixture(scope="module")
def blobs():
    X, y = make_blobs(n_samples=400, centers=5, cluster_std=2.5, random_state=0)
    X = np.vstack([X, X[:40]])  # repeated rows: one distinct row, several problems
    y = np.concatenate([y, y[:40]])
    Xt = make_blobs(n_samples=600, centers=5, cluster_std=2.5, random_state=1)[0]
    return X, y, Xt


def _per_problem(model, Xt):
    """The decision of every problem on its own (the reference): brute force."""
    g = model.kernel_params["gamma"]
    cols = []
    for sv_X, coef, b in model.models_:
        sv = sv_X.toarray() if sp.issparse(sv_X) else sv_X
        cols.append(rbf_kernel(Xt, sv, gamma=g) @ coef[0] + b[0])
    return np.column_stack(cols)


@pytest.mark.parametrize("multi_class", ["ovo", "ovr"])
@pytest.mark.parametrize("sparse", [False, True])
def test_stacked_problems_equal_each_problem_alone(blobs, multi_class, sparse):
    X, y, Xt = blobs
    if sparse:
        X, Xt = sp.csr_matrix(X), sp.csr_matrix(Xt)
    model = NativeKernelSVC("smo", {"kernel": "rbf", "gamma": 0.2, "degree": 3, "coef0": 0.0},
                            1.0, 1e-3, -1, 50, multi_class=multi_class).fit(
        X, y, np.ones(X.shape[0]))
    ref = _per_problem(model, Xt.toarray() if sparse else Xt)
    sign = -1.0 if multi_class == "ovo" else 1.0
    dec = model.decision_function(Xt)
    np.testing.assert_allclose(dec, sign * ref, rtol=1e-11, atol=1e-11)
    # the support vectors shared by problems are stored once
    unique, coef, b = model._stacked()
    n_rows = sum(m[0].shape[0] for m in model.models_)
    assert unique.shape[0] < n_rows
    assert coef.shape == (unique.shape[0], len(model.models_))
    # threads: the same bits
    np.testing.assert_array_equal(model.decision_function(Xt, n_threads=2), dec)
    np.testing.assert_array_equal(model.predict(Xt, n_threads=2), model.predict(Xt))
    # the stacked form is rebuilt after pickling, not stored
    clone = pickle.loads(pickle.dumps(model))
    assert "_stacked_cache" not in clone.__dict__
    # each support vector is stored once, with sparse coefficients (it was stored
    # once per problem: 10 classes pickled to 4 times SVC's size)
    assert clone.models_._sv.shape[0] == unique.shape[0] and sp.issparse(clone.models_._coef)
    # a model saved before (a list of per-problem models) is stacked when loaded
    old = pickle.loads(pickle.dumps(model))
    old.models_ = [tuple(m) for m in model.models_]
    old.__dict__.pop("_stacked_cache", None)
    again = pickle.loads(pickle.dumps(old))
    assert again.models_._sv.shape[0] == unique.shape[0]
    np.testing.assert_array_equal(again.decision_function(Xt), dec)
    np.testing.assert_array_equal(clone.decision_function(Xt), dec)


def test_distinct_rows_dense_and_csr():
    rng = np.random.RandomState(0)
    A = rng.randn(6, 4)
    B = np.vstack([A[3], rng.randn(2, 4), A[0], A[3]])
    for blocks in ([A, B], [sp.csr_matrix(A), sp.csr_matrix(B)]):
        unique, inverse = _distinct_rows(blocks)
        stacked = np.vstack([A, B])
        got = unique.toarray() if sp.issparse(unique) else unique
        np.testing.assert_array_equal(got[inverse], stacked)
        assert got.shape[0] == 8
        # first appearance order: the first block's rows keep their places
        np.testing.assert_array_equal(inverse[:6], np.arange(6))
    unique, inverse = _distinct_rows([np.zeros((0, 3)), np.zeros((0, 3))])
    assert unique.shape == (0, 3) and inverse.size == 0


def test_sparse_coefficients_for_many_classes():
    # 12 classes: 66 one-vs-one problems, each support vector in 11 of them, so
    # the coefficient matrix is mostly zero and kept sparse above the dense cap
    X, y = make_blobs(n_samples=600, centers=12, cluster_std=3.0, random_state=2)
    model = NativeKernelSVC("smo", {"kernel": "rbf", "gamma": 0.1, "degree": 3, "coef0": 0.0},
                            10.0, 1e-3, -1, 50).fit(X, y, np.ones(X.shape[0]))
    import cakernels._solvers.native_svc as native_svc

    dense = model.decision_function(X)
    model.__dict__.pop("_stacked_cache")
    saved = native_svc._DENSE_COEF_ENTRIES
    native_svc._DENSE_COEF_ENTRIES = 0
    try:
        coef = model._stacked()[1]
        assert sp.issparse(coef)
        np.testing.assert_allclose(model.decision_function(X), dense, rtol=1e-12, atol=1e-12)
    finally:
        native_svc._DENSE_COEF_ENTRIES = saved
    np.testing.assert_allclose(dense, -_per_problem(model, X), rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("name", ["CASVC", "BKRR2", "CascadeSVC"])
def test_collective_prediction_warns_once_about_feature_names(name):
    # predict_sharded checked X, then predicted through _predict, which checked
    # it again: the feature-name warning came twice per call
    import warnings

    import pandas as pd
    from sklearn.datasets import make_classification

    import cakernels
    from cakernels.backends import SelfCommunicator

    X, y = make_classification(n_samples=200, n_features=4, random_state=0)
    est = getattr(cakernels, name)(n_partitions=4, random_state=0)
    est.fit(pd.DataFrame(X, columns=list("abcd")), y if name != "BKRR2" else y * 1.0)
    for call in (lambda: est.predict(X), lambda: est.predict_sharded(X, comm=SelfCommunicator()),
                 lambda: est.score_sharded(X, y, comm=SelfCommunicator())):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            call()
        assert sum("feature names" in str(w.message) for w in rec) == 1


@pytest.mark.parametrize("make", [
    lambda: CASVC(n_partitions=3, C=2.0, gamma=0.3, random_state=0),
    lambda: CASVC(n_partitions=3, C=2.0, gamma=0.3, routing="vote", random_state=0),
    lambda: DCSVC(n_partitions=2, C=2.0, gamma=0.3, random_state=0),
    lambda: BKRR2(n_partitions=3, sigma=2.0, lam=1e-3, random_state=0),
])
def test_predictions_do_not_depend_on_threads_or_backend(blobs, make):
    X, y, Xt = blobs
    est = make()
    target = y.astype(float) if isinstance(est, BKRR2) else y
    est.fit(X, target)
    out = est.decision_function(Xt) if hasattr(est, "decision_function") else est.predict(Xt)
    with threadpool_limits(1):  # one core: BLAS and OpenMP
        np.testing.assert_array_equal(
            est.decision_function(Xt) if hasattr(est, "decision_function")
            else est.predict(Xt), out)
    if "backend" in est.get_params():
        est.set_params(backend="threads", n_jobs=2)
        np.testing.assert_array_equal(
            est.decision_function(Xt) if hasattr(est, "decision_function")
            else est.predict(Xt), out)


@pytest.mark.parametrize("sparse", [False, True])
def test_libsvm_multiclass_models_predict_as_libsvm(blobs, sparse):
    # solver='libsvm': each partition's multiclass SVC predicts through the
    # package's kernel blocks (NativeKernelSVC.from_libsvm), as LIBSVM itself
    X, y, Xt = blobs
    if sparse:
        X, Xt = sp.csr_matrix(X), sp.csr_matrix(Xt)
    est = CASVC(n_partitions=2, C=3.0, gamma=0.2, solver="libsvm", random_state=0).fit(X, y)
    route = est.partitioner_.assign(Xt)
    for j, svc in enumerate(est.estimators_):
        rows = np.flatnonzero(route == j)
        view = NativeKernelSVC.from_libsvm(svc, est._kernel_params())
        np.testing.assert_allclose(view.decision_function(Xt[rows]),
                                   svc.decision_function(Xt[rows]), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(view.predict(Xt[rows]), svc.predict(Xt[rows]))
        np.testing.assert_array_equal(est.predict(Xt[rows]), svc.predict(Xt[rows]))
        # its pairs, made on demand from the shared support vectors, are the models
        # of the pairs on their own
        Xd = Xt[rows].toarray() if sparse else Xt[rows]
        np.testing.assert_allclose(-_per_problem(view, Xd), svc.decision_function(Xt[rows]),
                                   rtol=1e-11, atol=1e-11)
        assert len(view.models_) == len(view.problems_) == len(list(view.models_))
        # a negative index as a list's (the intercept was lost: b[-1:0] is empty)
        last = view.models_[-1]
        assert last[2].shape == (1,)
        np.testing.assert_array_equal(last[2], view.models_[len(view.models_) - 1][2])
        with pytest.raises(IndexError):
            view.models_[len(view.models_)]
    # the view is built once per model and not stored on the estimator or the model
    before = set(est.__dict__)
    est.predict(Xt)
    assert set(est.__dict__) == before
    assert not any(hasattr(svc, "_stacked_cache") for svc in est.estimators_)


@pytest.mark.parametrize("solver", ["smo", "libsvm"])
def test_many_class_prediction_holds_one_block_of_decisions(solver, monkeypatch,
                                                            peak_bytes):
    # 20 classes: 190 one-vs-one values per test row; predict and the decision function
    # go through the rows in blocks (n_rows x n_pairs at once grew as n k^2 / 2), with
    # the same answers as one block
    import cakernels._solvers.native_svc as native_svc

    X, y = make_blobs(n_samples=400, centers=20, n_features=5, random_state=0)
    Xt = np.random.RandomState(1).uniform(-12, 12, size=(20000, 5))
    clf = CASVC(n_partitions=1, solver=solver, random_state=0).fit(X, y)
    monkeypatch.setattr(native_svc, "BLOCK_BYTES", 2**40)  # one block
    whole = clf.predict(Xt), clf.decision_function(Xt)
    monkeypatch.setattr(native_svc, "BLOCK_BYTES", 2**20)
    pred, peak = peak_bytes(clf.predict, Xt)
    dec = clf.decision_function(Xt)
    assert (pred == whole[0]).all()
    np.testing.assert_allclose(dec, whole[1], rtol=1e-12, atol=1e-12)
    # one block's 190 values per row, not 20,000 x 190 x 8 bytes (30 MB) and its copies
    assert peak < 12 * 2**20, peak


def test_collective_prediction_takes_the_one_process_communicator():
    # fit_sharded takes a SelfCommunicator; predict_sharded/score_sharded raised a
    # TypeError for it (they wrapped it as an mpi4py communicator)
    from sklearn.datasets import make_classification

    from cakernels import BKRR2, CASVC
    from cakernels.backends import SelfCommunicator

    X, y = make_classification(n_samples=200, random_state=0)
    clf = CASVC(4, random_state=0).fit(X, y)
    np.testing.assert_array_equal(clf.predict_sharded(X, comm=SelfCommunicator()),
                                  clf.predict(X))
    assert clf.score_sharded(X, y, comm=SelfCommunicator()) == clf.score(X, y)
    reg = BKRR2(4, random_state=0).fit(X, y.astype(float))
    assert abs(reg.score_sharded(X, y.astype(float), comm=SelfCommunicator())
               - reg.score(X, y.astype(float))) < 1e-12


@pytest.mark.parametrize("make", [
    lambda: CASVC(n_partitions=1, C=0.1), lambda: CASVC(n_partitions=2, routing="vote"),
    lambda: BKRR2(n_partitions=2), lambda: DCSVC(n_partitions=2, C=0.1),
    lambda: __import__("cakernels").DisSMOSVC(C=0.1),
    lambda: __import__("cakernels").kernel_ridge.DKRR(sigma=2.0)])
def test_small_batches_predict_on_one_blas_thread_when_blas_would_thread(make, monkeypatch):
    # a small batch against a large model left BLAS its own threads: a product of 10
    # rows with thousands of stored rows waited ~1 ms for a busy core at every call
    # (200 batches of 10 rows took 2-3.6x the time next to one busy process). Tiny
    # products stay as they are (changing BLAS's threads costs 40-100 us)
    import cakernels._kernels as kernels
    from cakernels.backends import blas_limits
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=2000, n_features=4, n_informative=3,
                               n_redundant=0, flip_y=0.3, random_state=0)
    est = make().fit(X, y)
    small = make().fit(X[:100], y[:100])
    seen = []
    real = kernels._kernel_rows

    def spy(*args, **kwargs):
        seen.append(blas_limits.current)
        return real(*args, **kwargs)

    monkeypatch.setattr(kernels, "_kernel_rows", spy)
    est.predict(X[:20])  # 10-20 rows per model against ~1,000-2,000 stored rows
    assert seen and set(seen) == {1}, set(seen)
    seen.clear()
    small.predict(X[:2])  # 2 rows against at most 100: left alone
    assert seen and set(seen) == {None}, set(seen)


@pytest.mark.parametrize("routing", ["nearest", "vote"])
def test_prediction_validates_the_rows_once(routing, monkeypatch):
    # the routing validated the rows a second time (the partitioner's assign): ~100 us
    # of a small prediction's fixed cost
    import cakernels.partition._partitioners as partitioners

    X, y = make_blobs(n_samples=300, centers=2, n_features=4, random_state=0)
    est = CASVC(n_partitions=3, routing=routing, random_state=0).fit(X, y)
    expected = est.predict(X[:50])
    calls = []
    real = partitioners.validate_data
    monkeypatch.setattr(partitioners, "validate_data",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    np.testing.assert_array_equal(est.predict(X[:50]), expected)
    assert calls == []
    est.partitioner_.assign(X[:5])  # the public method still validates
    assert calls == [1]
