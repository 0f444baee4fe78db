"""Halo partitions: every partition also trains on the outside samples nearest to
its border (cakernels.partition._halo), the estimators train on them and predict with
the owner, halo=0 is the reference's method, and the fast search handles halos."""

import warnings

import numpy as np
import scipy.sparse as sp
import pytest
from sklearn.datasets import make_blobs, make_classification, make_regression
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.svm import SVC

from cakernels import (
    BKMSVC,
    BKMSVCCV,
    BKRR,
    BKRR2,
    BKRR2CV,
    CASVC,
    CPSVC,
    DCKRR,
    FCFSSVC,
    KKRR2,
    KKRR2CV,
    PartitionedSVC,
)
from cakernels.partition import (
    BKMPartitioner,
    FCFSPartitioner,
    KBalancePartitioner,
    KMeansPartitioner,
    RandomPartitioner,
)
from cakernels.partition._halo import _row_keys, halo_indices

PARTITIONERS = [RandomPartitioner, KMeansPartitioner, KBalancePartitioner, FCFSPartitioner,
                BKMPartitioner]


def brute_force_halo(X, labels, centers, k):
    """The k outside samples nearest to partition j's border, one sample at a time:
    distance to the bisecting hyperplane of c_j and the sample's own centre; samples
    on j's side of it first, in the order of their row keys; ties to the lower index."""
    keys = _row_keys(X)
    out = []
    for j in range(centers.shape[0]):
        cand = []
        for i in range(X.shape[0]):
            o = labels[i]
            if o == j:
                continue
            normal = centers[j] - centers[o]
            mid = 0.5 * (centers[j] + centers[o])
            dist = (mid - X[i]) @ normal / np.linalg.norm(normal)
            cand.append((dist if dist >= 0 else keys[i] - 2.0, i))
        cand.sort()
        out.append(np.sort(np.array([i for _, i in cand[:k[j]]], dtype=np.int64)))
    return out


@pytest.mark.parametrize("cls", PARTITIONERS)
@pytest.mark.parametrize("halo", [0.1, 0.5, 1.0])
def test_halo_is_the_nearest_outside_samples(cls, halo):
    X, _ = make_blobs(n_samples=157, centers=5, n_features=3, random_state=2)
    part = cls(5, halo=halo, random_state=0).fit(X)
    if cls.balanced:
        k = np.full(5, int(np.floor(halo * 157 / 5 + 0.5)))
    else:  # unbalanced K-means: proportional to the partition's size
        k = np.floor(halo * part.sizes_ + 0.5).astype(int)
    ref = brute_force_halo(X, part.labels_, part.centers_, k)
    for j in range(5):
        np.testing.assert_array_equal(part.halo_indices_[j], ref[j])
        assert not np.isin(part.halo_indices_[j], np.flatnonzero(part.labels_ == j)).any()
        idx = part.training_indices(j)
        assert np.all(np.diff(idx) > 0)  # sorted, no sample twice in one partition
    np.testing.assert_array_equal(part.halo_sizes_, k)
    # the partition itself is unchanged
    plain = cls(5, random_state=0).fit(X)
    np.testing.assert_array_equal(plain.labels_, part.labels_)
    np.testing.assert_array_equal(plain.centers_, part.centers_)
    assert all(h.size == 0 for h in plain.halo_indices_)


@pytest.mark.parametrize("cls", [RandomPartitioner, KBalancePartitioner, FCFSPartitioner,
                                 BKMPartitioner])
def test_balanced_training_sets_stay_balanced(cls):
    X, _ = make_blobs(n_samples=203, centers=3, random_state=0)
    part = cls(8, halo=0.37, random_state=0).fit(X)
    sizes = [part.training_indices(j).size for j in range(8)]
    assert max(sizes) - min(sizes) <= 1


def test_ties_go_to_the_lower_index():
    # four copies of one point, equally far from the border of partition 1; a
    # halo of two takes the first two of them
    X = np.array([[0.0], [0.1], [1.0], [1.0], [1.0], [1.0], [3.9], [4.0]])
    labels = np.array([0, 0, 0, 0, 0, 0, 1, 1])
    centers = np.array([[0.5], [3.95]])
    halo = halo_indices(X, labels, centers, np.array([6, 2]), 1.0, balanced=False)
    np.testing.assert_array_equal(halo[1], [2, 3])  # k = round(1.0 * 2)
    np.testing.assert_array_equal(halo[0], [6, 7])  # k capped by the 2 outside rows


def test_outside_samples_in_the_partitions_cell_come_first_in_key_order():
    # balanced partitions own samples on another centre's side of the border; the
    # halo of partition 1 takes those (x = 6, 7, 8, 9) before x = 4.5 next to the
    # border, in the order of their row keys (an even sample), not the first rows
    # of the file (a clamp at the border tied them all)
    X = np.array([[6.0], [7.0], [8.0], [9.0], [4.5], [0.0], [10.0]])
    labels = np.array([0, 0, 0, 0, 0, 0, 1])
    centers = np.array([[0.0], [10.0]])
    keys = _row_keys(X)
    for k in (2, 4, 5):  # K-means rule: k = round(halo * 1)
        halo = halo_indices(X, labels, centers, np.array([6, 1]), float(k), balanced=False)
        expect = np.argsort(keys[:4])[:k] if k <= 4 else np.arange(5)
        np.testing.assert_array_equal(halo[1], np.sort(expect))


def test_partitions_with_the_same_centre_are_in_each_others_halos():
    # random partitions whose means coincide (distinct_means=False, DC-KRR's):
    # their rows had margin 0/0 for each other and were no candidates, so the
    # halo fell short of round(h m / P) (DCKRR(halo=0.5) trained without one)
    from cakernels import DCKRR

    X = np.r_[np.zeros((20, 1)), np.ones((20, 1))]  # one binary feature
    seeds = [s for s in range(50) if np.all(RandomPartitioner(
        2, distinct_means=False, random_state=s).fit(X).centers_ == 0.5)]
    part = RandomPartitioner(2, distinct_means=False, halo=0.5, random_state=seeds[0]).fit(X)
    assert part.halo_sizes_.tolist() == [10, 10]
    for j in range(2):
        assert set(part.halo_indices_[j]) <= set(np.flatnonzero(part.labels_ != j))
    est = DCKRR(n_partitions=2, halo=0.5, random_state=seeds[0]).fit(X, X[:, 0])
    assert est.fit_stats_["halo_sizes"] == [10, 10]


def test_row_keys_depend_on_the_values_only():
    rng = np.random.RandomState(0)
    X = rng.randn(300, 6)
    X[X < -0.5] = 0.0
    X[7] = X[3]  # equal rows, equal keys
    keys = _row_keys(X)
    S = sp.csr_matrix(X)
    S.data[:4] = 0.0  # explicit zeros are absent entries
    dense = S.toarray()
    np.testing.assert_array_equal(_row_keys(S), _row_keys(dense))
    np.testing.assert_array_equal(_row_keys(sp.csr_matrix(X)), keys)
    np.testing.assert_array_equal(_row_keys(np.asfortranarray(X)), keys)
    order = rng.permutation(300)
    np.testing.assert_array_equal(_row_keys(X[order]), keys[order])  # not the positions
    assert keys[7] == keys[3] and np.unique(keys).size == np.unique(X, axis=0).shape[0] == 299
    assert np.all((keys >= 0) & (keys < 1)) and 0.4 < keys.mean() < 0.6  # spread out


def test_halo_does_not_depend_on_the_order_of_the_rows():
    # label-sorted and shuffled files of the same rows: the same halos (as sets of
    # rows) for the same centres and owners (with a clamp at the border, the sorted
    # file's halos were its first rows: one class only)
    X, y = make_classification(n_samples=600, n_features=5, random_state=0)
    part = RandomPartitioner(6, random_state=0).fit(X)
    sizes = np.bincount(part.labels_, minlength=6)
    ref = halo_indices(X, part.labels_, part.centers_, sizes, 0.5, balanced=True)
    order = np.argsort(y, kind="stable")
    got = halo_indices(X[order], part.labels_[order], part.centers_, sizes, 0.5,
                       balanced=True)
    for j in range(6):
        np.testing.assert_array_equal(np.sort(order[got[j]]), ref[j])


def test_halo_is_capped_by_the_outside_samples():
    X, _ = make_blobs(n_samples=40, centers=2, random_state=0)
    part = RandomPartitioner(2, halo=5.0, random_state=0).fit(X)
    for j in range(2):
        assert part.training_indices(j).size == 40  # every sample, none twice


@pytest.mark.parametrize("halo", [1e18, 1e300])
def test_a_huge_halo_is_capped_not_emptied(halo):
    # round(h * m / P) overflowed int64 from h ~ 1.3e17: every halo became empty
    # (the thesis' method, silently) with NumPy's overflow warnings
    X, _ = make_blobs(n_samples=60, centers=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for part in (RandomPartitioner(3, halo=halo, random_state=0),
                     KMeansPartitioner(3, halo=halo, random_state=0)):
            part.fit(X)
            np.testing.assert_array_equal(part.halo_sizes_, 60 - part.sizes_)
            for j in range(3):
                assert part.training_indices(j).size == 60


@pytest.mark.parametrize("bad", [-0.1, np.nan, np.inf, "a"])
def test_bad_halo_is_a_value_error(bad):
    X, y = make_classification(n_samples=60, random_state=0)
    with pytest.raises((ValueError, TypeError), match="halo"):
        CASVC(2, halo=bad).fit(X, y)
    with pytest.raises((ValueError, TypeError), match="halo"):
        RandomPartitioner(2, halo=bad).fit(X)


def test_partitioner_without_halo_parameter_is_refused():
    class Plain:
        def __init__(self, n_partitions=2):
            self.n_partitions = n_partitions

        def get_params(self, deep=True):
            return {"n_partitions": self.n_partitions}

        def set_params(self, **kw):
            return self

        def fit(self, X):
            return self

        def assign(self, X):
            return np.zeros(len(X), dtype=int)

    X, y = make_classification(n_samples=60, random_state=0)
    with pytest.raises(ValueError, match="halo parameter"):
        PartitionedSVC(partitioner=Plain(), halo=0.2).fit(X, y)


def test_estimator_halo_replaces_the_instances():
    X, y = make_classification(n_samples=200, random_state=0)
    inst = KBalancePartitioner(4, halo=0.1, random_state=0)
    a = PartitionedSVC(partitioner=inst).fit(X, y)
    assert a.partitioner_.halo == 0.1 and inst.halo == 0.1  # the instance's own
    b = PartitionedSVC(partitioner=inst, halo=0.3).fit(X, y)
    assert b.partitioner_.halo == 0.3 and inst.halo == 0.1  # never modified


class _SplitAtMedian(KBalancePartitioner):
    """A subclass whose fit never calls the base class's: two halves of feature 0."""

    def fit(self, X, y=None):
        X = np.asarray(X)
        self.labels_ = (X[:, 0] > np.median(X[:, 0])).astype(np.intp)
        self.sizes_ = np.bincount(self.labels_, minlength=2)
        self.centers_ = np.array([X[self.labels_ == j].mean(0) for j in range(2)])
        self.n_partitions_ = 2
        return self


class _Relabel(KBalancePartitioner):
    """super().fit, then 30 rows of partition 1 moved to partition 0."""

    def fit(self, X, y=None):
        super().fit(X)
        rows = np.flatnonzero(self.labels_ == 1)[:30]
        self.labels_[rows] = 0
        self.sizes_ = np.bincount(self.labels_, minlength=self.n_partitions_)
        return self


@pytest.mark.parametrize("part", [_SplitAtMedian(2), _Relabel(3, random_state=0)])
def test_a_subclass_overriding_fit_gets_the_halo_of_its_own_partition(part):
    # the halos were those of the base class's fit: none when the subclass never
    # called it (halo=0.5 silently the thesis' method), and after a relabelling rows
    # of a partition in its own halo (trained twice, with double weight)
    X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    clf = PartitionedSVC(partitioner=part, halo=0.5, gamma=0.3, solver="libsvm",
                         random_state=0).fit(X, y)
    p = clf.partitioner_
    P = p.sizes_.size
    expected = halo_indices(X, p.labels_, p.centers_, p.sizes_, 0.5, True)
    assert p.halo_sizes_.tolist() == [round(0.5 * 300 / P)] * P
    assert clf.fit_stats_["halo_sizes"] == p.halo_sizes_.tolist()
    for j, est in enumerate(clf.estimators_):
        np.testing.assert_array_equal(p.halo_indices_[j], expected[j])
        rows = p.training_indices(j)
        assert np.unique(rows).size == rows.size and not np.any(
            p.labels_[p.halo_indices_[j]] == j)
        # every row once, with weight 1
        ref = SVC(gamma=0.3).fit(X[rows], y[rows])
        np.testing.assert_allclose(est.decision_function(X), ref.decision_function(X),
                                   atol=1e-8)


def test_a_subclass_keeps_the_halos_it_sets_itself_checked():
    # (its halos were recomputed from its partition, and with halo=0 dropped)
    class FixedHalo(KMeansPartitioner):
        def __init__(self, n_partitions=3, random_state=None, halo=0.0, own=False):
            super().__init__(n_partitions, random_state=random_state, halo=halo)
            self.own = own

        def fit(self, X, y=None):
            super().fit(X)
            P = self.n_partitions_
            mine = [np.sort(np.concatenate(
                [np.flatnonzero(self.labels_ == o)[:5] for o in range(P) if o != j]))
                for j in range(P)]
            if self.own == "inplace":  # the base class's list, edited (was recomputed)
                self.halo_indices_[:] = mine
            else:
                self.halo_indices_ = mine
            if self.own is True:  # rows of the partition itself: they would train twice
                self.halo_indices_[0] = np.flatnonzero(self.labels_ == 0)[:5]
            return self

    X, y = make_classification(n_samples=200, n_features=4, random_state=0)
    for own in (False, "inplace"):
        clf = PartitionedSVC(partitioner=FixedHalo(3, random_state=0, own=own)).fit(X, y)
        assert clf.fit_stats_["halo_sizes"] == [10, 10, 10]
        assert clf.partitioner_.halo_sizes_.tolist() == [10, 10, 10]
        for j in range(3):
            assert np.all(clf.partitioner_.labels_[clf.partitioner_.halo_indices_[j]] != j)
    with pytest.raises(ValueError, match=r"FixedHalo.halo_indices_\[0\] holds rows of "
                                         r"partition 0 itself"):
        PartitionedSVC(partitioner=FixedHalo(3, random_state=0, own=True)).fit(X, y)


def test_a_custom_partitioners_halo_is_checked():
    class Custom:
        def __init__(self, halo=0.0, bad="own"):
            self.halo, self.bad = halo, bad

        def get_params(self, deep=True):
            return {"halo": self.halo, "bad": self.bad}

        def set_params(self, **kw):
            for k, v in kw.items():
                setattr(self, k, v)
            return self

        def fit(self, X):
            X = np.asarray(X)
            self.labels_ = (np.arange(X.shape[0]) % 2).astype(np.intp)
            self.sizes_ = np.bincount(self.labels_, minlength=2)
            self.centers_ = np.array([X[self.labels_ == j].mean(0) for j in range(2)])
            other = {"own": [0, 2], "twice": [1, 1], "outside": [1, X.shape[0] + 1]}
            self.halo_indices_ = [np.array(other[self.bad]), np.array([0, 2])]
            return self

        def assign(self, X):
            return np.zeros(len(X), dtype=np.intp)

    X, y = make_classification(n_samples=60, random_state=0)
    for bad, match in (("own", "rows of partition 0 itself"), ("twice", "repeats rows"),
                       ("outside", r"row indices in \[0, 60\)")):
        with pytest.raises(ValueError, match=match):
            PartitionedSVC(partitioner=Custom(bad=bad), halo=0.2).fit(X, y)


# --------------------------------------------------------------------------- estimators
@pytest.mark.parametrize("cls", [CASVC, FCFSSVC, BKMSVC, CPSVC])
def test_svm_partitions_train_on_own_and_halo_rows(cls):
    X, y = make_classification(n_samples=300, n_features=5, random_state=0)
    w = np.random.RandomState(0).uniform(0.5, 2.0, size=300)
    clf = cls(4, halo=0.5, gamma=0.3, solver="libsvm", random_state=0).fit(X, y, sample_weight=w)
    part = clf.partitioner_
    assert clf.fit_stats_["halo_sizes"] == part.halo_sizes_.tolist()
    assert min(clf.fit_stats_["halo_sizes"]) > 0
    for j, est in enumerate(clf.estimators_):
        idx = part.training_indices(j)
        if np.unique(y[idx]).size < 2:
            continue
        # every row once in its partition, with its own weight
        ref = SVC(gamma=0.3).fit(X[idx], y[idx], sample_weight=w[idx])
        np.testing.assert_allclose(est.decision_function(X), ref.decision_function(X),
                                   atol=1e-8)
    # prediction stays with the owner (nearest centre)
    route = part.assign(X)
    for j, est in enumerate(clf.estimators_):
        rows = route == j
        if rows.any():
            np.testing.assert_array_equal(clf.predict(X[rows]), est.predict(X[rows]))


@pytest.mark.parametrize("cls", [DCKRR, KKRR2, BKRR, BKRR2])
def test_krr_partitions_train_on_own_and_halo_rows(cls):
    X, y = make_regression(n_samples=240, n_features=4, noise=3.0, random_state=0)
    y = y / y.std()
    sigma, lam = 2.0, 1e-3
    est = cls(4, sigma=sigma, lam=lam, halo=0.5, random_state=0).fit(X, y)
    part = est.partitioner_
    gamma = 1.0 / (2 * sigma ** 2)
    preds = []
    for j in range(4):
        idx = part.training_indices(j)
        K = rbf_kernel(X[idx], gamma=gamma) + lam * idx.size * np.eye(idx.size)
        alpha = np.linalg.solve(K, y[idx])
        preds.append(rbf_kernel(X, X[idx], gamma=gamma) @ alpha)
    preds = np.array(preds)
    if getattr(est, "combine", est._default_combine) == "average":
        ref = preds.mean(axis=0)
    else:
        ref = preds[part.assign(X), np.arange(X.shape[0])]
    np.testing.assert_allclose(est.predict(X), ref, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("make", [
    lambda **kw: BKMSVC(4, random_state=0, **kw),
    lambda **kw: CPSVC(4, solver="smo", random_state=0, **kw),
    lambda **kw: BKRR2(4, sigma=2.0, random_state=0, **kw),
    lambda **kw: DCKRR(4, sigma=2.0, random_state=0, **kw),
])
def test_halo_zero_is_the_reference_method(make):
    X, y = make_classification(n_samples=200, n_features=5, random_state=1)
    a = make().fit(X, y)
    b = make(halo=0.0).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert a.fit_stats_["halo_sizes"] == [0, 0, 0, 0]
    for j in range(4):  # every partition on exactly its own rows
        np.testing.assert_array_equal(a.partitioner_.training_indices(j),
                                      np.flatnonzero(a.partitioner_.labels_ == j))


def test_halo_on_the_threads_backend_equals_serial():
    X, y = make_classification(n_samples=300, random_state=0)
    a = BKMSVC(4, halo=0.3, random_state=0).fit(X, y)
    b = BKMSVC(4, halo=0.3, backend="threads", n_jobs=2, random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))


def test_halo_in_gridsearchcv():
    X, y = make_classification(n_samples=300, random_state=0)
    gs = GridSearchCV(BKMSVC(4, random_state=0), {"halo": [0.0, 0.25, 0.5]}, cv=3).fit(X, y)
    assert gs.best_params_["halo"] in (0.0, 0.25, 0.5)
    assert gs.best_estimator_.halo == gs.best_params_["halo"]


def test_halo_with_sparse_input_equals_dense():
    import scipy.sparse as sp

    X, y = make_classification(n_samples=200, random_state=0)
    X[np.abs(X) < 0.8] = 0.0
    a = BKMSVC(4, halo=0.4, solver="smo", random_state=0).fit(X, y)
    b = BKMSVC(4, halo=0.4, solver="smo", random_state=0).fit(sp.csr_matrix(X), y)
    for j in range(4):
        np.testing.assert_array_equal(a.partitioner_.halo_indices_[j],
                                      b.partitioner_.halo_indices_[j])
    np.testing.assert_array_equal(a.predict(X), b.predict(sp.csr_matrix(X)))


# --------------------------------------------------------------------------- fast search
def _brute_kfold(X, y, part, folds, sigma, lam):
    gamma = 1.0 / (2 * sigma ** 2)
    route = part.assign(X)
    sse = []
    for train, val in folds:
        tr = np.zeros(X.shape[0], bool)
        tr[train] = True
        pred = np.empty(val.size)
        for j in range(part.n_partitions_):
            idx = part.training_indices(j)
            T = idx[tr[idx]]
            alpha = np.linalg.solve(rbf_kernel(X[T], gamma=gamma) + lam * T.size * np.eye(T.size),
                                    y[T])
            rows = route[val] == j
            if rows.any():
                pred[rows] = rbf_kernel(X[val[rows]], X[T], gamma=gamma) @ alpha
        sse.append(np.mean((y[val] - pred) ** 2))
    return np.array(sse)


def test_fast_search_with_halo_equals_refits():
    X, y = make_regression(n_samples=240, n_features=4, noise=3.0, random_state=0)
    y = y / y.std()
    folds = list(KFold(3, shuffle=True, random_state=5).split(X))
    cv = BKRR2CV(4, sigmas=[1.0, 3.0], lams=[1e-4, 1e-2], cv=folds, halo=0.5,
                 scoring="neg_mean_squared_error", random_state=0).fit(X, y)
    part = cv.partitioner_
    assert min(part.halo_sizes_) > 0
    for i, params in enumerate(cv.cv_results_["params"]):
        ref = _brute_kfold(X, y, part, folds, params["sigma"], params["lam"])
        got = -np.array([cv.cv_results_[f"split{f}_test_score"][i] for f in range(3)])
        np.testing.assert_allclose(got, ref, rtol=1e-8)
    assert cv.best_estimator_.halo == 0.5
    # fit_stats_ reports the halos as the estimators' does (it had partition sizes only)
    assert cv.fit_stats_["halo_sizes"] == part.halo_sizes_.tolist() == \
        cv.best_estimator_.fit_stats_["halo_sizes"]


def test_an_outliers_partition_trains_on_its_halo_in_the_split_it_validates():
    # the search counts a partition's training rows with its halo's: the outlier's
    # partition of one row validates one split and still trains there on its halo
    # (its rows are not sent to another partition)
    X, y = make_regression(n_samples=240, n_features=4, noise=3.0, random_state=0)
    y = y / y.std()
    X[0] += 40.0
    folds = list(KFold(3, shuffle=True, random_state=5).split(X))
    cv = KKRR2CV(4, sigmas=[20.0, 60.0], lams=[1e-4], cv=folds, halo=0.6,
                 scoring="neg_mean_squared_error", random_state=0).fit(X, y)
    part = cv.partitioner_
    (j,) = np.flatnonzero(part.sizes_ == 1)  # the outlier's (K-means' halo: round(h m_j))
    (f,) = [f for f, (_, val) in enumerate(folds) if 0 in val]
    assert np.isin(part.halo_indices_[j], folds[f][0]).any()  # its halo trains split f
    for i, params in enumerate(cv.cv_results_["params"]):
        ref = _brute_kfold(X, y, part, folds, params["sigma"], params["lam"])
        got = -np.array([cv.cv_results_[f"split{f}_test_score"][i] for f in range(3)])
        np.testing.assert_allclose(got, ref, rtol=1e-8)


def test_leave_one_out_with_halo_equals_refits():
    X, y = make_regression(n_samples=90, n_features=3, noise=3.0, random_state=0)
    y = y / y.std()
    sigma, lam = 2.0, 1e-3
    cv = BKRR2CV(3, sigmas=[sigma], lams=[lam], cv="loo", halo=0.5,
                 scoring="neg_mean_squared_error", random_state=0).fit(X, y)
    part = cv.partitioner_
    gamma = 1.0 / (2 * sigma ** 2)
    err = []
    route = part.assign(X)
    assert np.any(route != part.labels_)
    for i in range(X.shape[0]):  # the nearest centre's model, without row i if it has it
        idx = part.training_indices(int(route[i]))
        T = idx[idx != i]
        alpha = np.linalg.solve(rbf_kernel(X[T], gamma=gamma) + lam * T.size * np.eye(T.size),
                                y[T])
        err.append((y[i] - rbf_kernel(X[i:i + 1], X[T], gamma=gamma) @ alpha)[0] ** 2)
    np.testing.assert_allclose(-cv.best_score_, np.mean(err), rtol=1e-8)


def test_svm_search_with_halo():
    X, y = make_classification(n_samples=240, random_state=0)
    cv = BKMSVCCV(4, Cs=[1.0, 10.0], cv=3, halo=0.3, random_state=0).fit(X, y)
    assert min(cv.partitioner_.halo_sizes_) > 0
    assert cv.best_estimator_.halo == 0.3
    assert cv.best_estimator_.fit_stats_["halo_sizes"] == cv.partitioner_.halo_sizes_.tolist()


def test_shared_centres_by_value():
    from cakernels.partition._halo import _shared_centres

    c = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [0.0, 0.0], [-0.0, 0.0], [5.0, 5.0]])
    assert _shared_centres(c).tolist() == [True, False, True, True, True, False]
    assert _shared_centres(np.zeros((0, 3))).size == 0


def test_halo_sizes_use_true_division():
    # a mutation taking m // P instead of m / P survived: with 157 rows on 5
    # partitions round(h m / P) and round(h (m // P)) agree for the tested h
    from cakernels.partition._halo import halo_sizes

    # m = 10, P = 4, h = 0.2: h m / P = 0.5 rounds up to 1 (m // P would give 0.4 -> 0)
    assert halo_sizes(np.array([3, 3, 2, 2]), 0.2, True).tolist() == [1, 1, 1, 1]
