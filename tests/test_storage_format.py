"""Same data, same model: dense input, CSR with 32-bit indices and the CSR with
64-bit indices that ``load_svmlight_file`` returns give every estimator the same
partitions, bit for bit, and models that agree to rounding."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone, is_classifier
from sklearn.datasets import load_svmlight_file
from sklearn.svm import SVC

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
    AsyGCDSVC,
    PartitionedKernelRidge,
    PartitionedSVC,
)
from cakernels.partition import KBalancePartitioner, KMeansPartitioner

# A numeric gamma: gamma='scale' is resolved as sklearn.svm.SVC does, from
# X.var() for dense and from the means of X and X**2 for sparse input, which
# round differently (see test_gamma_scale_is_resolved_as_svc_does)
CLASSIFIERS = [
    CASVC(n_partitions=4, gamma=0.1, random_state=0),
    FCFSSVC(n_partitions=4, gamma=0.1, random_state=0),
    BKMSVC(n_partitions=4, gamma=0.1, random_state=0),
    CPSVC(n_partitions=4, gamma=0.1, random_state=0),
    PartitionedSVC(partitioner=KBalancePartitioner(4, assign_order="regret", random_state=1),
                   gamma=0.1),
    PartitionedSVC(partitioner=KMeansPartitioner(3, method="minibatch", random_state=2),
                   gamma=0.1),
    BKMSVC(n_partitions=3, gamma=0.1, solver="smo", random_state=0),
    AsyGCDSVC(n_threads=1, gamma=0.1, random_state=0),
]
REGRESSORS = [
    DCKRR(n_partitions=4, sigma=3.0, random_state=0),
    KKRR(n_partitions=4, sigma=3.0, random_state=0),
    KKRR2(n_partitions=4, sigma=3.0, random_state=0),
    BKRR(n_partitions=4, sigma=3.0, random_state=0),
    BKRR2(n_partitions=4, sigma=3.0, random_state=0),
    BKRR2(n_partitions=3, sigma=3.0, lam=1e-8, random_state=3),
    PartitionedKernelRidge(partitioner="fcfs", combine="average", n_partitions=4, sigma=3.0,
                           random_state=0),
    PartitionedKernelRidge(partitioner="bkm", n_partitions=3, sigma=3.0, random_state=1),
]


def _data(kind, seed=0, m=301, n=20):
    """Sparse-ish training data: 0/1 values (many tied distances, as in one-hot
    data such as mushrooms) or non-round values (every rounding shows)."""
    rng = np.random.RandomState(seed)
    if kind == "binary":
        X = (rng.rand(m, n) < 0.3).astype(np.float64)
    else:
        X = rng.randn(m, n) * (rng.rand(m, n) < 0.4)
    w = rng.randn(n)
    score = X @ w
    return X, score


def _targets(est, score):
    if is_classifier(est):
        # three classes (one-vs-one inside the partitions)
        return np.digitize(score, np.quantile(score, [0.35, 0.7]))
    return score + np.sin(3 * score)


def _ids(ests):
    return [f"{type(e).__name__}-{i}" for i, e in enumerate(ests)]


def _partition_state(est):
    part = getattr(est, "partitioner_", None)
    if part is None:  # AsyGCDSVC: no partitions, one serial solver
        return {}
    return {"labels_": part.labels_, "centers_": part.centers_, "sizes_": part.sizes_,
            "partition_sizes_": est.partition_sizes_}


@pytest.mark.parametrize("kind", ["binary", "gauss"])
@pytest.mark.parametrize("est", CLASSIFIERS + REGRESSORS, ids=_ids(CLASSIFIERS + REGRESSORS))
def test_same_partitions_and_model_for_every_storage_format(est, kind, storage_formats):
    X, score = _data(kind)
    y = _targets(est, score)
    T, _ = _data(kind, seed=1, m=150)
    formats = storage_formats(X)
    X64 = formats["csr64"]
    saved = (X64.data.copy(), X64.indices.copy(), X64.indptr.copy())
    fits = {name: clone(est).fit(Xf, y) for name, Xf in formats.items()}
    # the caller's int64 matrix is neither narrowed nor changed
    assert X64.indices.dtype == np.int64 and X64.indptr.dtype == np.int64
    for a, b in zip(saved, (X64.data, X64.indices, X64.indptr)):
        np.testing.assert_array_equal(a, b)
    ref = _partition_state(fits["dense"])
    for name in ("csr32", "csr64"):
        state = _partition_state(fits[name])
        for key in ref:
            assert np.array_equal(ref[key], state[key]), (name, key)  # bit for bit
    tests = storage_formats(T)
    ref_pred = fits["dense"].predict(T)
    for model in fits.values():
        for Tf in tests.values():
            pred = model.predict(Tf)
            if is_classifier(est):
                # the local SVMs compute CSR kernels with other rounding
                # (measured: decision values within 4e-15); the classes agree
                np.testing.assert_array_equal(pred, ref_pred)
                np.testing.assert_allclose(model.decision_function(Tf),
                                           fits["dense"].decision_function(T),
                                           rtol=0, atol=1e-10)
            else:
                # measured: within 7e-14 of the largest prediction
                scale = np.abs(ref_pred).max()
                np.testing.assert_allclose(pred, ref_pred, rtol=0, atol=1e-8 * scale)


@pytest.mark.parametrize("solver", ["libsvm", "smo"])
def test_gamma_scale_is_resolved_as_svc_does(storage_formats, solver):
    # gamma='scale' follows SVC for every format (SVC's own sparse formula can
    # differ from the dense one in the last bit); the partitions stay the same
    X, score = _data("gauss")  # (where the two formulas differ)
    y = _targets(CASVC(), score)
    fits = {name: BKMSVC(n_partitions=3, solver=solver, random_state=0).fit(Xf, y)
            for name, Xf in storage_formats(X).items()}
    formats = storage_formats(X)
    for name in formats:
        # (SVC itself refuses 64-bit indices: its reference is the int32 copy)
        ref = formats["dense"] if name == "dense" else formats["csr32"]
        assert fits[name].gamma_ == SVC().fit(ref, y)._gamma
        np.testing.assert_array_equal(fits[name].partitioner_.labels_,
                                      fits["dense"].partitioner_.labels_)
        np.testing.assert_array_equal(fits[name].predict(X), fits["dense"].predict(X))
        # the same problem up to the last bit of gamma, solved to tol=1e-3
        np.testing.assert_allclose(fits[name].decision_function(X),
                                   fits["dense"].decision_function(X), rtol=0, atol=1e-3)


@pytest.mark.realdata
def test_mushrooms_bkrr2_same_partitions_and_predictions_csr_and_dense(data_home):
    # the issue: BKRR2 on mushrooms failed on load_svmlight_file's CSR (int64
    # indices), and int32 CSR and dense gave different partitions (predictions
    # up to 0.54 apart). Train on every third sample (where the partitions
    # differed), predict the others.
    X, y = load_svmlight_file(str(data_home / "mushrooms" / "mushrooms"))
    # recent scikit-learn/SciPy return int64 indices (the case of the issue), older
    # ones int32: test the int64 case whatever the versions
    X.indices, X.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    train = np.arange(X.shape[0]) % 3 == 0
    # row selection narrows the indices: put back int64
    Xtr = X[np.flatnonzero(train)]
    Xtr.indices, Xtr.indptr = Xtr.indices.astype(np.int64), Xtr.indptr.astype(np.int64)
    Xte = X[np.flatnonzero(~train)]
    formats = {"csr64": (Xtr, Xte),
               "csr32": (sp.csr_matrix(Xtr.toarray()), sp.csr_matrix(Xte.toarray())),
               "dense": (Xtr.toarray(), Xte.toarray())}
    assert formats["csr64"][0].indices.dtype == np.int64
    assert formats["csr32"][0].indices.dtype == np.int32
    fits = {name: BKRR2(n_partitions=8, sigma=4.0, random_state=0).fit(A, y[train])
            for name, (A, _) in formats.items()}
    preds = {name: fits[name].predict(B) for name, (_, B) in formats.items()}
    for name in ("csr64", "csr32"):
        np.testing.assert_array_equal(fits[name].partitioner_.labels_,
                                      fits["dense"].partitioner_.labels_)
        np.testing.assert_array_equal(fits[name].centers_, fits["dense"].centers_)
        # 0/1 features: the CSR kernels are exact, so the predictions are equal
        np.testing.assert_allclose(preds[name], preds["dense"], rtol=0, atol=1e-12)
    assert fits["dense"].score(formats["dense"][1], y[~train]) > 0.9


def _duplicated_csr(X):
    """The CSR matrix of ``X`` storing every value as two entries (0.3 v and
    0.7 v: legal in SciPy, where duplicates add up), indices unsorted."""
    rows, cols = np.nonzero(X)
    vals = X[rows, cols]
    order = np.argsort(np.r_[rows, rows], kind="stable")
    counts = np.bincount(rows, minlength=X.shape[0]) * 2
    dup = sp.csr_matrix((np.r_[0.7 * vals, 0.3 * vals][order], np.r_[cols, cols][order],
                         np.r_[0, np.cumsum(counts)]), shape=X.shape)
    assert not dup.has_canonical_format and np.allclose(dup.toarray(), X)
    return dup


@pytest.mark.parametrize("est", [
    CASVC(n_partitions=3, gamma=0.1, random_state=0),
    CASVC(n_partitions=3, gamma=0.1, solver="libsvm", random_state=0),
    BKMSVC(n_partitions=3, gamma=0.1, solver="libsvm", random_state=0),
    AsyGCDSVC(n_threads=1, gamma=0.1, random_state=0),
    BKRR2(n_partitions=3, sigma=3.0, random_state=0),
], ids=lambda e: f"{type(e).__name__}-{e.get_params().get('solver', '')}")
def test_csr_with_duplicate_entries_is_the_same_matrix(est):
    """Every solver reads a non-canonical CSR matrix as the matrix it is
    (LIBSVM's sparse dot products take one entry per column: the LIBSVM path
    trained another SVM on it); the caller's matrix is not modified."""
    from cakernels import CascadeSVC

    X, score = _data("real")
    dup = _duplicated_csr(X)
    before = (dup.data.copy(), dup.indices.copy())
    for e in (est, CascadeSVC(n_partitions=3, gamma=0.1, solver="libsvm", random_state=0)):
        y = _targets(e, score)
        got = clone(e).fit(dup, y)
        ref = clone(e).fit(sp.csr_matrix(X), y)
        out = "decision_function" if is_classifier(e) else "predict"
        np.testing.assert_allclose(getattr(got, out)(X), getattr(ref, out)(X), atol=1e-6)
    np.testing.assert_array_equal(dup.data, before[0])
    np.testing.assert_array_equal(dup.indices, before[1])
