"""Duplicate points, tied centres, ties in routing and voting, and 64-bit
sparse indices.

* No partitioner produces two identical centres (a partition nearest-centre
  routing could never reach), also on data full of duplicates, and a clear
  error says so when the data have too few distinct samples.
* Ties break as scikit-learn's: routing to the lowest centre index (as
  ``KMeans.predict``), a binary decision of exactly 0 to ``classes_[1]`` (as
  ``SVC.predict``), one-vs-one votes to the lowest class, the one-vs-rest
  decision function as scikit-learn's ``_ovr_decision_function``.
* CSR input with 64-bit indices reaches the native solvers as it is; only
  LIBSVM (and scikit-learn's K-means) need 32-bit indices, and only they
  refuse a matrix with more than 2**31 - 1 non-zeros (tested with the limit
  lowered: such a matrix takes 24 GiB).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.cluster import KMeans
from sklearn.datasets import make_classification
from sklearn.svm import SVC
from sklearn.utils.multiclass import _ovr_decision_function

import cakernels.partition._storage as storage
from cakernels import CASVC, CPSVC, DCSVC, AsyGCDSVC, CascadeSVC, DCFilterSVC, DisSMOSVC
from cakernels._solvers.native_svc import ovr_from_ovo
from cakernels.partition import (
    BKMPartitioner,
    FCFSPartitioner,
    KBalancePartitioner,
    KMeansPartitioner,
    RandomPartitioner,
)
from cakernels.partition._partitioners import (
    _duplicate_rows,
    _make_distinct,
    _routable,
    _scan_distinct,
)
from cakernels.partition._storage import nearest_center

BALANCED = [RandomPartitioner, FCFSPartitioner, KBalancePartitioner, BKMPartitioner]


def reachable(part):
    """Every partition receives its own centre (so it can receive test points)."""
    return np.array_equal(part.assign(part.centers_), np.arange(part.n_partitions_))


# --------------------------------------------------------------------------
# distinct centres
# --------------------------------------------------------------------------
@pytest.mark.parametrize("cls", BALANCED + [KMeansPartitioner])
@pytest.mark.parametrize("seed", range(6))
def test_duplicate_heavy_data_gives_distinct_reachable_centres(cls, seed):
    rng = np.random.RandomState(seed)
    distinct = rng.randn(5, 3)
    X = distinct[rng.randint(0, 5, 60)]  # 60 rows, 5 distinct values
    X[:5] = distinct                     # every value present
    part = cls(n_partitions=4, random_state=seed).fit(X)
    assert not _duplicate_rows(part.centers_).any()
    assert reachable(part)
    if cls is not KMeansPartitioner:
        assert part.sizes_.max() - part.sizes_.min() <= 1


def test_kmeans_keeps_one_of_centres_equal_to_twelve_digits():
    # 81 * 0.1 * 3 and 81 * 3 / 10 differ in the last bit: K-means separates them,
    # their centres count as one point, and the partitioner raised its internal
    # "produced two identical centres" RuntimeError (KKRR, CPSVC, DCSVC too)
    from cakernels import KKRR

    a, b = 81 * 0.1 * 3, 81 * 3 / 10
    assert a != b
    X = np.array([[a]] * 5 + [[b]] * 5)
    part = KMeansPartitioner(n_partitions=2, random_state=0).fit(X)
    assert part.n_partitions_ == 1 and reachable(part)
    np.testing.assert_array_equal(part.assign(X), part.labels_)
    KKRR(n_partitions=2, random_state=0).fit(X, np.arange(10.0))
    rng = np.random.RandomState(0)
    X = np.r_[rng.randn(30, 2), [[a, 1.0]] * 3, [[b, 1.0]] * 3]
    part = KMeansPartitioner(n_partitions=32, random_state=0).fit(X)
    assert not _duplicate_rows(part.centers_).any() and reachable(part)
    np.testing.assert_array_equal(part.assign(X), part.labels_)


@pytest.mark.parametrize("cls", [FCFSPartitioner, KBalancePartitioner, BKMPartitioner])
def test_too_few_distinct_samples_is_a_clear_error(cls):
    X = np.repeat(np.array([[0.0, 1.0], [2.0, 3.0]]), 10, axis=0)  # 2 distinct rows
    with pytest.raises(ValueError, match="distinct"):
        cls(n_partitions=3, random_state=0).fit(X)
    with pytest.raises(ValueError, match="distinct"):
        RandomPartitioner(n_partitions=2, random_state=0).fit(np.ones((10, 2)))
    # K-means partitions drop the clusters that stay empty instead
    part = KMeansPartitioner(n_partitions=3, random_state=0).fit(X)
    assert part.n_partitions_ == 2 and reachable(part)


@pytest.mark.parametrize("cls", [FCFSPartitioner, KBalancePartitioner, BKMPartitioner])
@pytest.mark.parametrize("sparse", [False, True])
def test_rare_distinct_rows_among_many_duplicates_are_found(cls, sparse):
    # 7 distinct rows among 5,000: the random draws for distinct centres missed
    # the rare ones and blamed the data; a pass over all rows finds them
    rng = np.random.RandomState(3)
    X = np.zeros((5000, 3))
    X[rng.choice(5000, 6, replace=False)] = rng.randn(6, 3)
    Xf = sp.csr_matrix(X) if sparse else X
    part = cls(n_partitions=4, random_state=0).fit(Xf)
    assert part.sizes_.tolist() == [1250] * 4
    assert not _duplicate_rows(part.centers_).any() and reachable(part)
    with pytest.raises(ValueError, match=r"X has fewer than 8 distinct samples .*found 7 "):
        cls(n_partitions=8, random_state=0).fit(Xf)


@pytest.mark.parametrize("cls", [KBalancePartitioner, BKMPartitioner])
def test_too_few_distinct_samples_error_counts_no_kmeans_mean_as_a_sample(cls):
    # 3 distinct rows: the error said "X has only 4 distinct samples", counting a
    # K-means mean that is no sample
    rng = np.random.RandomState(0)
    X = np.repeat(rng.randn(3, 2), [40, 30, 30], axis=0)
    with pytest.raises(ValueError, match=r"X has fewer than 8 distinct samples \(to about 12 "
                                         r"significant digits; found 3 distinct centres\)"):
        cls(n_partitions=8, random_state=0).fit(X)


@pytest.mark.parametrize("method", ["kmeans", "minibatch"])
def test_kmeans_partitions_of_duplicates_touch_no_process_wide_warning_filter(monkeypatch,
                                                                              method):
    # scikit-learn's K-means warns when it finds fewer distinct clusters than asked;
    # the partitioner silenced that with warnings.catch_warnings, which (before Python
    # 3.14) swaps the process-wide filter list: two threads fitting at once left the
    # "ignore ConvergenceWarning" filter installed for good. Now K-means is asked for
    # no more clusters than distinct rows, and nothing is filtered.
    import warnings

    from sklearn.cluster import MiniBatchKMeans
    from sklearn.exceptions import ConvergenceWarning

    seen = []
    cls_km = KMeans if method == "kmeans" else MiniBatchKMeans
    real = cls_km.fit

    def spy(self, *args, **kwargs):
        seen.append([f for f in warnings.filters if f[2] is ConvergenceWarning])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls_km, "fit", spy)
    rng = np.random.RandomState(0)
    X = np.repeat(rng.randn(3, 2) * 5, [40, 30, 30], axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning escapes either
        part = KMeansPartitioner(n_partitions=5, method=method, random_state=0).fit(X)
    assert seen == [[]]
    assert part.n_partitions_ == 3 and sorted(part.sizes_.tolist()) == [30, 30, 40]
    brute = np.argmin(((X[:, None, :] - part.centers_[None]) ** 2).sum(axis=2), axis=1)
    np.testing.assert_array_equal(part.labels_, brute)
    # on distinct rows K-means is asked for all n_partitions, as before
    Xd = rng.randn(200, 2)
    assert KMeansPartitioner(n_partitions=5, method=method,
                             random_state=0).fit(Xd).n_partitions_ == 5


def test_asygcd_blocks_touch_no_process_wide_warning_filter(monkeypatch):
    # variable_blocks' k-means++ was wrapped in a catch_warnings that ignored
    # ConvergenceWarning and RuntimeWarning: the same process-wide race as above
    import warnings

    import cakernels._solvers.asygcd as asygcd

    seen = []
    real = asygcd.kmeans_plusplus

    def spy(*args, **kwargs):
        seen.append(list(warnings.filters))
        return real(*args, **kwargs)

    monkeypatch.setattr(asygcd, "kmeans_plusplus", spy)
    X = np.repeat(np.random.RandomState(0).randn(2, 3), 50, axis=0)  # 2 distinct rows
    before = list(warnings.filters)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        filters = list(warnings.filters)
        blocks = asygcd.variable_blocks(X, 4, random_state=0)
    assert seen == [filters] and list(warnings.filters) == before
    assert np.bincount(blocks, minlength=4).tolist() == [25] * 4


def test_the_pass_for_distinct_rows_keeps_wide_sparse_blocks_small(peak_bytes):
    # the pass densified 4,096 rows whatever their width (5,000 x 200,000: 6 GiB)
    rng = np.random.RandomState(0)
    rows = np.sort(rng.choice(3000, 6, replace=False))
    X = sp.csr_matrix((rng.rand(6) + 1.0, rng.choice(100_000, 6), np.searchsorted(
        rows, np.arange(3001), side="left")), shape=(3000, 100_000))
    part, peak = peak_bytes(FCFSPartitioner(n_partitions=7, random_state=0).fit, X)
    assert part.sizes_.sum() == 3000 and not _duplicate_rows(part.centers_).any()
    assert peak < 600 * 2**20, peak  # 4,096 dense rows alone are 3.1 GiB


@pytest.mark.parametrize("distinct", [3, 500])
def test_kmeans_counts_distinct_rows_without_dense_copies_of_wide_sparse_data(distinct,
                                                                             peak_bytes):
    # asking K-means for no more clusters than distinct rows densified 4,096 rows per
    # block to count them (3 GiB for 3,000 x 100,000 CSR, on every KMeans fit)
    from cakernels.partition._partitioners import _count_distinct

    rng = np.random.RandomState(0)
    base = sp.random(distinct, 100_000, density=2e-4, format="csr", random_state=0)
    base.data += 1.0
    X = sp.csr_matrix(base[rng.randint(0, distinct, 3000)])
    part, peak = peak_bytes(KMeansPartitioner(n_partitions=7, random_state=0).fit, X)
    assert part.n_partitions_ == min(7, distinct) and part.sizes_.sum() == 3000
    assert peak < 200 * 2**20, peak
    # the sparse count is the dense one (keys to 12 digits, explicit zeros, -0.0)
    for need in (2, 7, 600):
        assert _count_distinct(X, need) == min(need, distinct)
    Y = np.repeat(rng.randn(5, 4), 3, axis=0)
    Y[1] = Y[0] * (1 + 1e-15)  # equal to 12 digits
    for need in (1, 4, 5, 20):
        assert _count_distinct(sp.csr_matrix(Y), need) == _count_distinct(Y, need) \
            == min(need, 5)
    # an explicit zero and -0.0 are the same row as none
    twins = sp.csr_matrix((np.array([1.0, 0.0, 2.0, 1.0, 2.0, 1.0, -0.0, 2.0]),
                           np.array([0, 1, 2, 0, 2, 0, 1, 2]), np.array([0, 3, 5, 8])),
                          shape=(3, 3))
    assert _count_distinct(twins, 3) == 1


def test_cascade_takes_data_whose_random_partition_means_coincide():
    # the final model predicts every row: nothing is routed by centre (as DC-KRR)
    rng = np.random.RandomState(0)
    X = rng.randint(0, 2, (400, 1)).astype(float)
    y = (X[:, 0] + 0.3 * rng.randn(400) > 0.5).astype(int)
    est = CascadeSVC(n_partitions=8, random_state=0).fit(X, y)
    assert est.score(X, y) > 0.7


@pytest.mark.parametrize("cls", [FCFSPartitioner, KBalancePartitioner, BKMPartitioner])
def test_one_hot_data_with_fewer_distinct_rows_than_partitions(cls):
    """K-means returns centres such as (1 + 2e-16, -5.6e-17, -5.6e-17) for a
    cluster of (1, 0, 0): compared bit for bit they passed for new points, and
    two of five balanced partitions were never routed to; now an error."""
    X = np.repeat(np.eye(3), 10, axis=0)  # 30 rows, 3 distinct
    with pytest.raises(ValueError, match="distinct"):
        cls(n_partitions=5, random_state=0).fit(X)
    part = cls(n_partitions=3, random_state=0).fit(X)
    assert reachable(part)


def test_rows_equal_to_twelve_digits_are_duplicates():
    C = np.array([[1.0, 0.0, 0.0], [1.0 + 2.2e-16, -5.6e-17, -5.6e-17], [1.0, 1e-9, 0.0],
                  [0.0, 0.0, 0.0], [-0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    assert _duplicate_rows(C).tolist() == [False, True, False, False, True, False]
    # wide rows are hashed, not sorted column by column (np.unique(axis=0) took 10 s)
    wide = np.zeros((4, 1_000_000))
    wide[np.arange(4), np.arange(4)] = 1.0
    assert not _duplicate_rows(wide).any()


def test_random_partitions_of_symmetric_data_never_share_a_mean():
    # two random halves of {-1, 1, -1, 1} have equal means in a third of the
    # shuffles; the partitioner shuffles again
    X = np.array([[-1.0], [1.0], [-1.0], [1.0]])
    for seed in range(30):
        part = RandomPartitioner(n_partitions=2, random_state=seed).fit(X)
        assert not _duplicate_rows(part.centers_).any() and reachable(part)


def test_collapsed_kmeans_centres_are_replaced_by_distinct_samples(monkeypatch):
    X = np.random.RandomState(0).randn(40, 2)
    collapsed = np.array([X[3], X[3], X[3], X[7]])
    monkeypatch.setattr(KMeansPartitioner, "_kmeans", lambda self, X, rng: collapsed.copy())
    for cls in (KBalancePartitioner, BKMPartitioner):
        part = cls(n_partitions=4, recompute_centers=False, random_state=0).fit(X)
        assert not _duplicate_rows(part.centers_).any() and reachable(part)
        # the replacements are samples, the other centres stay
        assert np.array_equal(part.centers_[[0, 3]], collapsed[[0, 3]])
        assert all((X == c).all(axis=1).any() for c in part.centers_)


def test_make_distinct_and_routable_helpers():
    rng = np.random.RandomState(0)
    X = np.arange(12.0).reshape(6, 2)
    C = np.array([X[0], X[0], -0.0 * X[1] + X[1], X[1] + 0.0])
    out = _make_distinct(C, lambda i: X[i], 6, rng, "test",
                         lambda seen, need: _scan_distinct(X, seen, need))
    assert not _duplicate_rows(out).any() and np.array_equal(out[0], X[0])
    assert _duplicate_rows(np.array([[0.0], [-0.0]])).tolist() == [False, True]
    assigned = np.array([[0.0], [1.0]])
    assert _routable(np.array([[0.5], [0.5]]), assigned) is assigned
    means = np.array([[0.2], [0.7]])
    assert _routable(means, assigned) is means


# --------------------------------------------------------------------------
# ties in routing and voting
# --------------------------------------------------------------------------
def test_routing_ties_go_to_the_lowest_centre_as_kmeans_predict():
    C = np.array([[2.0, 0.0], [0.0, 0.0], [1.0, 2.0]])
    X = np.array([[1.0, 0.0], [1.0, 5.0], [1.0, -3.0], [0.5, 1.0]])
    km = KMeans(n_clusters=3, n_init=1, random_state=0).fit(np.r_[C, C + 0.01])
    km.cluster_centers_ = C
    assert np.array_equal(nearest_center(X, C), km.predict(X))
    assert nearest_center(X[:1], C)[0] == 0  # equidistant from centres 0 and 1


@pytest.mark.parametrize("solver", ["smo", "libsvm", "asygcd"])
@pytest.mark.parametrize("y", [[0, 1], [1, 0]])
def test_binary_decision_of_zero_predicts_as_svc(solver, y):
    X, y = np.array([[-1.0], [1.0]]), np.array(y)
    ref = SVC(kernel="linear").fit(X, y)
    est = CASVC(n_partitions=1, kernel="linear", solver=solver).fit(X, y)
    assert est.decision_function([[0.0]])[0] == 0.0 == ref.decision_function([[0.0]])[0]
    assert est.predict([[0.0]])[0] == ref.predict([[0.0]])[0]


def test_bias_free_and_full_model_zero_decisions_predict_as_svc():
    X, y = np.array([[-1.0], [1.0]]), np.array([0, 1])
    ref = SVC(kernel="linear").fit(X, y).predict([[0.0]])[0]
    assert AsyGCDSVC(kernel="linear").fit(X, y).predict([[0.0]])[0] == ref
    assert DisSMOSVC(kernel="linear").fit(X, y).predict([[0.0]])[0] == ref


def test_one_vs_rest_ties_match_scikit_learn():
    rng = np.random.RandomState(0)
    for n_classes in (3, 4, 5):
        n_pairs = n_classes * (n_classes - 1) // 2
        ovo = rng.choice([-1.0, 0.0, 1.0], size=(200, n_pairs)) * rng.choice([1.0, 0.5], 200)[:, None]
        ref = _ovr_decision_function(ovo < 0, -ovo, n_classes)
        np.testing.assert_allclose(ovr_from_ovo(ovo, n_classes), ref, rtol=1e-12, atol=1e-12)


def test_one_vs_one_vote_ties_go_to_the_lowest_class_as_libsvm():
    # three classes at 120 degrees: at the centre every pair is nearly tied;
    # predict the vote winner as SVC does on the same local model
    angles = np.deg2rad([90, 210, 330])
    rng = np.random.RandomState(0)
    X = np.vstack([np.c_[np.cos(a), np.sin(a)] * 3 + 0.3 * rng.randn(20, 2) for a in angles])
    y = np.repeat([0, 1, 2], 20)
    grid = np.c_[np.linspace(-1, 1, 41), np.zeros(41)]
    for solver in ("smo", "libsvm"):
        est = CASVC(n_partitions=1, solver=solver, C=1.0, gamma=0.5).fit(X, y)
        ref = SVC(C=1.0, gamma=0.5).fit(X, y)
        agree = est.predict(grid) == ref.predict(grid)
        assert agree.mean() >= 0.95  # the solvers differ within tol near the ties


def _votes(model, X):
    """One-vs-one votes of a final model (LIBSVM's rule: positive for the pair's first class)."""
    dec = model.decision_function(X)
    votes = np.zeros((X.shape[0], model.classes_.size), dtype=np.int64)
    for col, (i, j) in enumerate(model.problems_):
        votes[dec[:, col] > 0, i] += 1
        votes[dec[:, col] <= 0, j] += 1
    return votes


@pytest.mark.parametrize("make", [
    lambda bt: CascadeSVC(n_partitions=3, random_state=0, break_ties=bt),
    lambda bt: DCSVC(n_partitions=3, random_state=0, break_ties=bt),
    lambda bt: DCSVC(n_partitions=4, predict_layer=1, random_state=0, break_ties=bt),
    lambda bt: DCFilterSVC(n_partitions=3, random_state=0, break_ties=bt),
    lambda bt: DisSMOSVC(break_ties=bt),
], ids=["cascade", "dcsvc", "dcsvc-early", "dcfilter", "dissmo"])
def test_break_ties_of_the_full_model_svms_as_svc(make):
    # as SVC: break_ties=True predicts the argmax of the one-vs-rest decision,
    # False the one-vs-one vote (ties to the lowest class); three classes at
    # 120 degrees, and a grid over the small region near their centre where
    # the three pairwise decisions vote in a cycle (x > y > z > x)
    angles = np.deg2rad([90, 210, 330])
    rng = np.random.RandomState(0)
    X = np.vstack([np.c_[np.cos(a), np.sin(a)] * 3 + 0.8 * rng.randn(40, 2) for a in angles])
    y = np.repeat(["x", "y", "z"], 40)
    grid = np.mgrid[0.3:0.5:41j, 0.1:0.25:31j].reshape(2, -1).T
    voted, broken = make(False).fit(X, y), make(True).fit(X, y)
    np.testing.assert_array_equal(broken.decision_function(grid), voted.decision_function(grid))
    dec = broken.decision_function(grid)
    np.testing.assert_array_equal(broken.predict(grid), broken.classes_[np.argmax(dec, axis=1)])
    if voted.model_ is not None:  # the final model's votes (early prediction: its layer's)
        votes = _votes(voted.model_, grid)
        np.testing.assert_array_equal(voted.predict(grid), voted.classes_[np.argmax(votes, 1)])
        tied = (votes == 1).all(axis=1)
        assert tied.any()  # the test crosses tied votes ...
        # ... where the vote takes the lowest class and break_ties the most confident
        assert (voted.predict(grid)[tied] == "x").all()
        assert (broken.predict(grid)[tied] != "x").any()
    # binary problems: break_ties changes nothing (as SVC)
    two = y != "z"
    np.testing.assert_array_equal(make(True).fit(X[two], y[two]).predict(grid),
                                  make(False).fit(X[two], y[two]).predict(grid))


def test_break_ties_of_dissmo_equals_svc():
    angles = np.deg2rad([90, 210, 330])
    rng = np.random.RandomState(1)
    X = np.vstack([np.c_[np.cos(a), np.sin(a)] * 3 + 0.8 * rng.randn(40, 2) for a in angles])
    y = np.repeat([0, 1, 2], 40)
    grid = np.c_[np.linspace(-2, 2, 201), np.linspace(-1, 1, 201)]
    for break_ties in (False, True):
        ours = DisSMOSVC(C=1.0, gamma=0.5, tol=1e-6, break_ties=break_ties).fit(X, y)
        ref = SVC(C=1.0, gamma=0.5, tol=1e-6, break_ties=break_ties).fit(X, y)
        assert (ours.predict(grid) == ref.predict(grid)).mean() >= 0.99


# --------------------------------------------------------------------------
# 64-bit sparse indices
# --------------------------------------------------------------------------
def _int64_csr(X):
    X = sp.csr_matrix(X)
    X.indices, X.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    return X


@pytest.fixture
def small_int32_limit(monkeypatch):
    """Pretend that 32-bit indices hold only 50 non-zeros."""
    monkeypatch.setattr(storage, "INT32_LIMIT", 50)


@pytest.mark.parametrize("solver", ["smo", "asygcd"])
def test_native_solvers_take_64_bit_indices_beyond_the_32_bit_limit(small_int32_limit, solver):
    X, y = make_classification(n_samples=80, n_features=6, random_state=0)
    Xs = _int64_csr(X)
    assert Xs.nnz > storage.INT32_LIMIT and Xs.indices.dtype == np.int64
    est = CPSVC(n_partitions=2, solver=solver, random_state=0).fit(Xs, y)
    ref = CPSVC(n_partitions=2, solver=solver, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.predict(Xs), ref.predict(X))
    np.testing.assert_allclose(est.decision_function(Xs), ref.decision_function(X),
                               rtol=1e-10, atol=1e-12)
    if solver == "asygcd":
        one = AsyGCDSVC(n_threads=1, random_state=0).fit(Xs, y)
        np.testing.assert_array_equal(one.predict(Xs),
                                      AsyGCDSVC(n_threads=1, random_state=0).fit(X, y).predict(X))
    dis = DisSMOSVC().fit(Xs, y)
    np.testing.assert_array_equal(dis.predict(Xs), DisSMOSVC().fit(X, y).predict(X))


def test_libsvm_refuses_what_32_bit_indices_cannot_hold(small_int32_limit):
    X, y = make_classification(n_samples=80, n_features=6, random_state=0)
    with pytest.raises(ValueError, match=r"solver='libsvm'.*2\*\*31 - 1 non-zeros"):
        CPSVC(n_partitions=1, solver="libsvm", random_state=0).fit(_int64_csr(X), y)
    # below the limit the same matrix is narrowed on a copy, the caller's kept
    Xs = _int64_csr(X[:5])
    CASVC(n_partitions=1, solver="libsvm").fit(Xs, [0, 1, 0, 1, 0])
    assert Xs.indices.dtype == np.int64
