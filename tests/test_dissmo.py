"""Dis-SMO (Algorithm 1): the rows split over workers, the serial SMO solution."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC

from cakernels import DisSMOSVC
from cakernels._solvers.smo import smo_fit
from cakernels.svm._dissmo import _pair_step


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(n_samples=500, n_features=8, n_informative=5, flip_y=0.08,
                               random_state=3)
    return X, y


def _support_up_to_ties(a, b, alpha_a, alpha_b, C):
    """Support sets equal except for samples whose alpha is ~0 in either solution."""
    diff = np.setxor1d(a, b)
    small = (alpha_a[diff] < 1e-3 * C) | (alpha_b[diff] < 1e-3 * C)
    return bool(np.all(small))


@pytest.mark.parametrize("n_jobs", [1, 2, 4])
def test_equals_serial_smo_on_1_2_4_workers(binary, n_jobs):
    X, y = binary
    ypm = np.where(y == 1, 1.0, -1.0)
    ref = smo_fit(X, ypm, 2.0, gamma=0.1, tol=1e-3)
    clf = DisSMOSVC(C=2.0, gamma=0.1, backend="threads", n_jobs=n_jobs).fit(X, y)
    assert clf.fit_stats_["n_workers"] == n_jobs
    assert sum(clf.fit_stats_["block_sizes"]) == X.shape[0]
    # the same dual optimum: objective to 1e-6 relative, same support up to ties
    assert clf.objective_[0] == pytest.approx(ref["objective"], rel=1e-6)
    alpha = np.zeros(X.shape[0])
    alpha[clf.support_] = np.abs(clf.model_.dual_coef_[0])
    assert _support_up_to_ties(clf.support_, ref["support"], alpha, ref["alpha"], 2.0)
    assert clf.model_.intercept_[0] == pytest.approx(ref["intercept"], abs=2e-3)
    # the iterations do not depend on the split (ties go to the smallest index)
    one = DisSMOSVC(C=2.0, gamma=0.1).fit(X, y)
    assert clf.n_iter_.tolist() == one.n_iter_.tolist()
    assert clf.objective_[0] == pytest.approx(one.objective_[0], rel=1e-12)


def test_tight_tolerance_reaches_svc(binary):
    X, y = binary
    clf = DisSMOSVC(C=2.0, gamma=0.1, tol=1e-6).fit(X, y)
    svc = SVC(C=2.0, gamma=0.1, tol=1e-6).fit(X, y)
    np.testing.assert_array_equal(clf.support_, np.sort(svc.support_))  # SVC: by class
    np.testing.assert_allclose(clf.decision_function(X), svc.decision_function(X),
                               atol=1e-4)
    np.testing.assert_array_equal(clf.predict(X), svc.predict(X))


def test_sparse_equals_dense_and_small_cache_changes_nothing(binary):
    X, y = binary
    Xs = X.copy()
    Xs[np.abs(Xs) < 0.5] = 0.0
    dense = DisSMOSVC(C=2.0, gamma=0.1).fit(Xs, y)
    csr = DisSMOSVC(C=2.0, gamma=0.1).fit(sp.csr_matrix(Xs), y)
    tiny = DisSMOSVC(C=2.0, gamma=0.1, cache_size=0.01).fit(Xs, y)
    for other in (csr, tiny):
        assert other.n_iter_.tolist() == dense.n_iter_.tolist()
        assert other.objective_[0] == pytest.approx(dense.objective_[0], rel=1e-12)
        np.testing.assert_array_equal(other.support_, dense.support_)
    assert tiny.fit_stats_["cache_hit_rate"] < dense.fit_stats_["cache_hit_rate"]
    assert 0 < dense.fit_stats_["cache_hit_rate"] < 1


@pytest.mark.parametrize("working_set", ["first-order", "second-order"])
def test_csr_with_duplicate_entries_is_the_same_matrix(binary, working_set):
    """A CSR matrix may store a (row, column) twice: the entries add up. The
    samples broadcast each iteration were rebuilt keeping the last entry."""
    X, y = binary
    X = X[:200]
    y = y[:200]
    rows, cols = np.nonzero(X)
    vals = X[rows, cols]
    order = np.argsort(np.r_[rows, rows], kind="stable")  # every entry twice: 0.3 v + 0.7 v
    dup = sp.csr_matrix((np.r_[0.3 * vals, 0.7 * vals][order], np.r_[cols, cols][order],
                         np.r_[0, np.cumsum(np.bincount(rows, minlength=X.shape[0]) * 2)]),
                        shape=X.shape)
    assert not dup.has_canonical_format and np.allclose(dup.toarray(), X)
    before = (dup.data.copy(), dup.indices.copy())
    got = DisSMOSVC(C=2.0, gamma=0.1, working_set=working_set).fit(dup, y)
    ref = DisSMOSVC(C=2.0, gamma=0.1, working_set=working_set).fit(X, y)
    assert got.objective_[0] == pytest.approx(ref.objective_[0], rel=1e-9)
    np.testing.assert_allclose(got.decision_function(X), ref.decision_function(X), atol=1e-7)
    np.testing.assert_array_equal(dup.data, before[0])  # the user's matrix as given
    np.testing.assert_array_equal(dup.indices, before[1])


def test_multiclass_weights_and_text_labels_as_svc():
    X, y = make_classification(n_samples=360, n_features=6, n_informative=4, n_classes=3,
                               random_state=0)
    labels = np.array(["a", "b", "c"])[y]
    w = np.random.RandomState(0).uniform(0.2, 2.0, size=y.size)
    kw = dict(C=3.0, gamma=0.3, tol=1e-5, class_weight={"a": 2.0, "b": 1.0, "c": 0.5})
    clf = DisSMOSVC(backend="threads", n_jobs=2, **kw).fit(X, labels, sample_weight=w)
    svc = SVC(**kw).fit(X, labels, sample_weight=w)
    np.testing.assert_array_equal(clf.classes_, svc.classes_)
    assert np.mean(clf.predict(X) == svc.predict(X)) >= 0.995
    np.testing.assert_allclose(clf.decision_function(X), svc.decision_function(X), atol=1e-2)
    assert clf.objective_.shape == (3,) and clf.n_iter_.shape == (3,)


def test_zero_weights_leave_samples_out(binary):
    X, y = binary
    w = np.ones(y.size)
    w[:50] = 0.0
    clf = DisSMOSVC(C=2.0, gamma=0.1, backend="threads", n_jobs=2).fit(X, y, sample_weight=w)
    ref = DisSMOSVC(C=2.0, gamma=0.1).fit(X[50:], y[50:])
    assert clf.objective_[0] == pytest.approx(ref.objective_[0], rel=1e-12)
    np.testing.assert_array_equal(clf.support_, ref.support_ + 50)


def test_max_iter_warns(binary):
    X, y = binary
    with pytest.warns(ConvergenceWarning, match="Dis-SMO did not converge"):
        clf = DisSMOSVC(max_iter=5).fit(X, y)
    assert clf.n_iter_.tolist() == [5]


def test_communication_is_counted_only_between_ranks(binary):
    X, y = binary
    clf = DisSMOSVC(backend="threads", n_jobs=2).fit(X, y)
    stats = clf.fit_stats_
    assert stats["comm_bytes"] == 0 and stats["comm_messages"] == 0  # one process
    assert stats["n_iter"] == clf.n_iter_.tolist() and stats["seconds"] > 0


def test_input_is_not_modified_and_errors_are_clear(binary):
    X, y = binary
    X0, y0 = X.copy(), y.copy()
    Xf = np.asfortranarray(X[:, ::-1])
    DisSMOSVC().fit(Xf, y)
    DisSMOSVC().fit(X.astype(np.float32), y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    with pytest.raises(ValueError, match="class"):
        DisSMOSVC().fit(X, np.zeros(y.size))
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DisSMOSVC().fit(Xn, y)
    with pytest.raises(ValueError, match="backend"):
        DisSMOSVC(backend="gpu").fit(X, y)


def test_pair_step_is_libsvms_update():
    # one step from alpha = 0 on two samples of opposite labels: the analytic
    # optimum of the two-variable problem, clipped to the box
    x = np.array([[0.0, 0.0], [1.0, 0.0]])
    kp = {"kernel": "linear", "gamma": 1.0, "degree": 3, "coef0": 0.0}
    # rec: F, index, y, alpha, C, K(x, x); F = -y G = y at alpha = 0
    ri = np.array([1.0, 0, 1.0, 0.0, 10.0, 0.0])
    rj = np.array([-1.0, 1, -1.0, 0.0, 10.0, 1.0])
    ai, aj, ci, cj = _pair_step(ri, rj, x[:1], x[1:], kp)
    # min 0.5 a^2 |x_i - x_j|^2 - 2a  ->  a = 2
    assert (ai, aj) == (2.0, 2.0) and (ci, cj) == (2.0, -2.0)
    ri[4] = rj[4] = 1.5  # the box clips both
    ai, aj, _, _ = _pair_step(ri, rj, x[:1], x[1:], kp)
    assert (ai, aj) == (1.5, 1.5)


def test_threads_workers_are_capped_at_the_rows():
    """n_jobs beyond the training rows used to make empty blocks (10,000 workers on
    240 rows ran for minutes); the workers are capped at one per row."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=30, n_features=4, random_state=0)
    many = DisSMOSVC(backend="threads", n_jobs=10_000).fit(X, y)
    assert many.fit_stats_["n_workers"] == 30
    one = DisSMOSVC().fit(X, y)
    # (one-row blocks: BLAS computes a 1-row kernel block in another order, which can
    # break a tie of the working-set selection differently; the same SVM to tol)
    np.testing.assert_array_equal(many.predict(X), one.predict(X))
    np.testing.assert_allclose(many.decision_function(X), one.decision_function(X),
                               atol=1e-2)


def _duplicates_of_opposite_labels(n=200, seed=0):
    """Two distinct points, each repeated with both labels: with a large C the
    optimum puts every alpha of a contradicting duplicate at C."""
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 2, (n, 1)).astype(float) * np.ones((1, 3))
    return X, rng.integers(0, 2, n)


@pytest.mark.parametrize("n_jobs", [1, 2, 4])
def test_second_order_working_set_reaches_the_same_svm(binary, n_jobs):
    X, y = binary
    ypm = np.where(y == 1, 1.0, -1.0)
    ref = smo_fit(X, ypm, 2.0, gamma=0.1, tol=1e-3)
    first = DisSMOSVC(C=2.0, gamma=0.1).fit(X, y)
    clf = DisSMOSVC(C=2.0, gamma=0.1, working_set="second-order", backend="threads",
                    n_jobs=n_jobs).fit(X, y)
    assert clf.objective_[0] == pytest.approx(ref["objective"], rel=1e-6)
    alpha = np.zeros(X.shape[0])
    alpha[clf.support_] = np.abs(clf.model_.dual_coef_[0])
    assert _support_up_to_ties(clf.support_, ref["support"], alpha, ref["alpha"], 2.0)
    # LIBSVM's choice: far fewer iterations than the first-order pair, about as
    # many as SVC without shrinking (which breaks ties the other way)
    svc = SVC(C=2.0, gamma=0.1, shrinking=False).fit(X, y)
    assert clf.n_iter_[0] < 0.7 * first.n_iter_[0]
    assert abs(clf.n_iter_[0] - svc.n_iter_[0]) <= 0.1 * svc.n_iter_[0]
    one = DisSMOSVC(C=2.0, gamma=0.1, working_set="second-order").fit(X, y)
    assert clf.n_iter_.tolist() == one.n_iter_.tolist()
    assert clf.objective_[0] == pytest.approx(one.objective_[0], rel=1e-12)


def test_second_order_sparse_and_multiclass_as_svc():
    X, y = make_classification(n_samples=300, n_features=6, n_informative=4, n_classes=3,
                               random_state=2)
    X[np.abs(X) < 0.4] = 0.0
    kw = dict(C=3.0, gamma=0.3, tol=1e-5, working_set="second-order")
    dense = DisSMOSVC(**kw).fit(X, y)
    csr = DisSMOSVC(**kw).fit(sp.csr_matrix(X), y)
    # (the CSR kernel rows can differ from the dense ones in the last bits, and a
    # second-order gain divides by a small a_it: a near tie may go the other way)
    np.testing.assert_allclose(csr.objective_, dense.objective_, rtol=1e-6)
    svc = SVC(C=3.0, gamma=0.3, tol=1e-5).fit(X, y)
    np.testing.assert_allclose(dense.decision_function(X), svc.decision_function(X),
                               atol=1e-3)


def test_second_order_takes_the_direct_step_on_a_large_c():
    """Duplicates of opposite labels with C=1e8: the first-order pair zigzags
    (each step moves the alphas by ~1 towards C); LIBSVM's second-order choice
    pairs the duplicates and clips them to C at once."""
    X, y = _duplicates_of_opposite_labels()
    clf = DisSMOSVC(C=1e8, working_set="second-order").fit(X, y)
    svc = SVC(C=1e8).fit(X, y)
    assert clf.n_iter_[0] < 10 * svc.n_iter_[0]
    np.testing.assert_array_equal(clf.predict(X), svc.predict(X))
    np.testing.assert_allclose(clf.decision_function(X), svc.decision_function(X),
                               atol=1e-4)


def test_default_limit_ends_a_zigzag_with_a_hint(binary, monkeypatch):
    """max_iter=-1 is LIBSVM's limit, 100 iterations per sample (at least
    AUTO_MIN_ITER, 10**6; lowered here to keep the test short): the first-order
    pair on a large C stops there with a warning that names the remedy."""
    import cakernels.svm._dissmo as dissmo

    assert (dissmo.AUTO_ITER_PER_SAMPLE, dissmo.AUTO_MIN_ITER) == (100, 10**6)
    monkeypatch.setattr(dissmo, "AUTO_MIN_ITER", 1000)
    X, y = _duplicates_of_opposite_labels(n=40)
    with pytest.warns(ConvergenceWarning, match="4,000 iterations.*working_set='second-order'"):
        clf = DisSMOSVC(C=1e8).fit(X, y)
    assert clf.n_iter_.tolist() == [4000]
    # zero-weight samples do not count; an explicit max_iter is the limit
    w = np.ones(40)
    w[:30] = 0.0
    with pytest.warns(ConvergenceWarning, match="1,000 iterations"):
        clf = DisSMOSVC(C=1e8).fit(X, y, sample_weight=w)
    assert clf.n_iter_.tolist() == [1000]
    X3, y3 = make_classification(n_samples=90, n_features=5, n_informative=3, n_classes=3,
                                 random_state=0)
    one_rank, pairs = type("One", (), {"size": 1})(), [(0, 1), (0, 2), (1, 2)]
    clf = DisSMOSVC().fit(X3, y3)
    monkeypatch.setattr(dissmo, "AUTO_MIN_ITER", 10**4)
    assert clf._iteration_budgets(one_rank, y3, np.ones(90), pairs) == [10**4] * 3
    monkeypatch.setattr(dissmo, "AUTO_MIN_ITER", 10)  # 100 per sample of the pair
    assert clf._iteration_budgets(one_rank, y3, np.ones(90), pairs) == [
        100 * int(np.sum((y3 == a) | (y3 == b))) for a, b in pairs]
    with pytest.warns(ConvergenceWarning, match="max_iter=5"):
        DisSMOSVC(C=1e8, max_iter=5, working_set="second-order").fit(X, y)


@pytest.mark.parametrize("working_set", ["first-order", "second-order"])
def test_wide_sparse_rows_are_never_densified(working_set, monkeypatch):
    """One LIBSVM feature index of 2^31: every iteration made the two samples
    dense vectors over all features (hours for 500 rows); the rows now stay
    sparse, and the fit is the one on the renumbered narrow columns with sparse
    rows too, bit for bit (narrow data makes its rows dense: other bits)."""
    import cakernels.svm._dissmo as dissmo

    rng = np.random.RandomState(0)
    X = sp.random(300, 30, density=0.2, format="csr", random_state=rng)
    y = (np.asarray(X.sum(axis=1)).ravel() > 0.9).astype(int)
    cols = np.arange(30) * 71_582_788  # the last is 2,075,900,852
    wide = sp.csr_matrix((X.data, cols[X.indices], X.indptr), shape=(300, 2**31 - 1))
    kw = dict(C=10.0, gamma=0.5, working_set=working_set)
    clf = DisSMOSVC(**kw).fit(wide, y)
    monkeypatch.setattr(dissmo, "DENSE_ROW_FEATURES", 0)
    ref = DisSMOSVC(**kw).fit(X, y)
    assert clf.n_iter_.tolist() == ref.n_iter_.tolist()
    assert clf.objective_[0] == ref.objective_[0]
    np.testing.assert_array_equal(clf.decision_function(wide), ref.decision_function(X))


def test_a_block_of_one_row_keeps_the_iterations_of_every_split():
    # rows sorted by class: with 2 workers, block 0 holds one row of the (1, 2) pair;
    # its 1 x d kernel products rounded otherwise than a longer block's (a dot
    # product, not a matrix-vector product) and the solver took another path
    X, y = make_classification(n_samples=300, n_features=5, n_informative=3, n_classes=3,
                               random_state=1)
    idx = np.concatenate([np.flatnonzero(y == 0)[:60], np.flatnonzero(y == 1)[:31],
                          np.flatnonzero(y == 2)[:31]])
    X, y = X[idx], y[idx]
    serial = DisSMOSVC(C=5).fit(X, y)
    for n_jobs in (2, 3):
        split = DisSMOSVC(C=5, backend="threads", n_jobs=n_jobs).fit(X, y)
        np.testing.assert_array_equal(split.n_iter_, serial.n_iter_)
        # (the objective is a sum over the blocks: its last bit depends on the split)
        np.testing.assert_allclose(split.objective_, serial.objective_, rtol=1e-13)


def test_a_bound_that_underflows_is_a_zero_weight():
    # C * sample_weight == 0 with sample_weight > 0: the rows take no part (they
    # joined the working sets, left them at F = +-inf and made the objective NaN)
    X, y = make_classification(n_samples=60, n_features=4, weights=[0.7], flip_y=0.3,
                               random_state=0)
    z = np.concatenate([np.flatnonzero(y == 1)[:3], np.flatnonzero(y == 0)[:3]])
    w = np.ones(60)
    w[z] = 1e-322
    keep = np.ones(60, bool)
    keep[z] = False
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        got = DisSMOSVC(C=1e-3, gamma=0.5).fit(X, y, sample_weight=w)
    ref = DisSMOSVC(C=1e-3, gamma=0.5).fit(X[keep], y[keep])
    np.testing.assert_array_equal(got.objective_, ref.objective_)
    np.testing.assert_array_equal(got.decision_function(X), ref.decision_function(X))


@pytest.mark.parametrize("working_set", ["first-order", "second-order"])
def test_verbose_reports_progress_and_libsvms_closing_line(working_set, monkeypatch, capsys):
    # verbose=True printed nothing; now a line every LOG_EVERY iterations and
    # LIBSVM's closing line of every binary problem, on standard error only
    import cakernels.svm._dissmo as dissmo

    X, y = make_classification(n_samples=150, n_classes=3, n_informative=4,
                               random_state=0)
    labels = np.array(["a", "b", "c"])[y]
    quiet = DisSMOSVC(C=10, working_set=working_set).fit(X, labels)
    assert capsys.readouterr() == ("", "")
    monkeypatch.setattr(dissmo, "LOG_EVERY", 20)
    clf = DisSMOSVC(C=10, working_set=working_set, verbose=True).fit(X, labels)
    out, err = capsys.readouterr()
    assert out == ""
    closing = [line for line in err.splitlines() if "optimization finished" in line]
    assert [line.split(":")[0] for line in closing] == [
        f"[cakernels] Dis-SMO classes {a} vs {b}" for a, b in ("ab", "ac", "bc")]
    for line, it, obj in zip(closing, clf.n_iter_, clf.objective_):
        assert f"#iter = {it}," in line
        assert f"obj = {obj:.6g}," in line
    progress = [line for line in err.splitlines() if "maximal violation" in line]
    assert len(progress) == sum(it // 20 - (it % 20 == 0) for it in clf.n_iter_)
    np.testing.assert_array_equal(clf.decision_function(X), quiet.decision_function(X))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # max_iter=50
def test_iterations_run_on_one_blas_thread(binary, monkeypatch):
    # every iteration's BLAS work is two matrix-vector products: the serial backend
    # left BLAS its own threads, and a second OpenBLAS thread waiting for a busy core
    # made 2,000 iterations on 10,000 rows take 25 s instead of 1 s
    import cakernels.svm._dissmo as dissmo
    from cakernels.backends import blas_limits

    seen = []
    real = dissmo.kernel_block

    def spy(*args, **kwargs):
        seen.append(blas_limits.current)
        return real(*args, **kwargs)

    monkeypatch.setattr(dissmo, "kernel_block", spy)
    X, y = binary
    for backend in ("serial", "threads"):
        seen.clear()
        DisSMOSVC(C=1.0, backend=backend, n_jobs=2, max_iter=50).fit(X, y)
        assert seen and set(seen) == {1}, (backend, set(seen))


@pytest.mark.parametrize("working_set", ["first-order", "second-order"])
def test_dissmo_stops_within_tol(working_set):
    # the maximal KKT violation of the returned alphas, recomputed in NumPy, is below
    # tol (a mutation stopping the second-order path at 2 tol survived the looser
    # iteration and objective comparisons)
    from sklearn.metrics.pairwise import rbf_kernel

    X, y = make_classification(n_samples=300, n_features=6, random_state=3)
    tol, C, gamma = 1e-2, 2.0, 0.1
    clf = DisSMOSVC(C=C, gamma=gamma, tol=tol, working_set=working_set).fit(X, y)
    ypm = np.where(y == clf.classes_[1], 1.0, -1.0)
    alpha = np.zeros(X.shape[0])
    alpha[clf.support_] = np.abs(clf.model_.dual_coef_[0])
    G = (ypm[:, None] * ypm[None, :] * rbf_kernel(X, gamma=gamma)) @ alpha - 1.0
    F = -ypm * G
    up = ((ypm > 0) & (alpha < C)) | ((ypm < 0) & (alpha > 0))
    low = ((ypm > 0) & (alpha > 0)) | ((ypm < 0) & (alpha < C))
    assert F[up].max() - F[low].min() < tol * (1 + 1e-6)


@pytest.mark.parametrize("backend, n_jobs", [("serial", None), ("threads", 2)])
def test_dissmo_intercept_without_free_support_vectors(backend, n_jobs):
    # every alpha at a bound: the intercept is the middle of the feasible range (the
    # largest lower bound of all blocks or ranks); a mutation taking the smallest
    # survived (intercept -0.0008 against SVC's -0.98)
    X, y = make_classification(n_samples=200, n_features=4, flip_y=0.3, random_state=0)
    C = 1e-3
    clf = DisSMOSVC(C=C, gamma=0.5, tol=1e-6, backend=backend, n_jobs=n_jobs).fit(X, y)
    svc = SVC(C=C, gamma=0.5, tol=1e-6).fit(X, y)
    assert np.all(np.abs(clf.model_.dual_coef_[0]) >= C * (1 - 1e-9))  # no free alpha
    np.testing.assert_allclose(clf.decision_function(X), svc.decision_function(X), atol=1e-6)


def test_the_convergence_warning_points_at_the_callers_line():
    # stacklevel=2 named the package's fit wrapper (cakernels/_engine.py) as the source
    X, y = make_classification(n_samples=200, random_state=0)
    with pytest.warns(ConvergenceWarning, match="did not converge within max_iter=5") as rec:
        DisSMOSVC(max_iter=5).fit(X, y)
    assert {r.filename for r in rec if issubclass(r.category, ConvergenceWarning)} == {__file__}
