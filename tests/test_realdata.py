"""Small subsets of real benchmark data (ijcnn1, usps, cadata) against the references."""

import numpy as np
import pytest
from sklearn.kernel_ridge import KernelRidge
from sklearn.metrics import mean_squared_error
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from cakernels import BKMSVC, BKRR2, CASVC, CPSVC, DCKRR, FCFSSVC, KKRR2, oracle_score
from cakernels.datasets import load_dataset

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def ijcnn1(data_home):
    X, y = load_dataset("ijcnn1", subset="train", data_home=data_home, return_X_y=True,
                        n_samples=4000, random_state=0, download_if_missing=False)
    Xt, yt = load_dataset("ijcnn1", subset="test", data_home=data_home, return_X_y=True,
                          n_samples=4000, random_state=0, download_if_missing=False)
    return X, y, Xt, yt


def test_ijcnn1_one_partition_is_svc(ijcnn1):
    X, y, Xt, _ = ijcnn1
    ours = CASVC(n_partitions=1, C=32, gamma=2).fit(X, y)
    ref = SVC(C=32, gamma=2).fit(X, y)
    np.testing.assert_array_equal(ours.predict(Xt), ref.predict(Xt))


@pytest.mark.parametrize("cls,floor", [(CASVC, 0.93), (FCFSSVC, 0.93), (BKMSVC, 0.94),
                                       (CPSVC, 0.94)])
def test_ijcnn1_partitioned_accuracy_close_to_svc(ijcnn1, cls, floor):
    X, y, Xt, yt = ijcnn1
    ref = SVC(C=32, gamma=2).fit(X, y).score(Xt, yt)
    clf = cls(n_partitions=4, C=32, gamma=2, random_state=0).fit(X, y)
    acc = clf.score(Xt, yt)
    # 1,000 training samples per partition: a few points below SVC on 4,000
    assert acc >= floor
    assert acc >= ref - 0.04
    assert sum(clf.fit_stats_["n_support"]) > 0


def test_usps_multiclass(data_home):
    X, y = load_dataset("usps", subset="train", data_home=data_home, return_X_y=True,
                        n_samples=2000, random_state=0, download_if_missing=False)
    Xt, yt = load_dataset("usps", subset="test", data_home=data_home, return_X_y=True,
                          n_samples=500, random_state=0, download_if_missing=False)
    clf = BKMSVC(n_partitions=2, C=10, random_state=0).fit(X, y)
    assert clf.classes_.size == 10
    assert clf.score(Xt, yt) > 0.85
    ref = CASVC(n_partitions=1, C=10).fit(X, y)
    np.testing.assert_array_equal(ref.predict(Xt), SVC(C=10).fit(X, y).predict(Xt))


def test_cadata_krr_family(data_home):
    X, y = load_dataset("cadata", data_home=data_home, return_X_y=True, n_samples=3000,
                        random_state=0, download_if_missing=False)
    scaler = StandardScaler().fit(X[:2400])
    X = scaler.transform(X)
    y = (y - y[:2400].mean()) / y[:2400].std()
    X, Xt, y, yt = X[:2400], X[2400:], y[:2400], y[2400:]
    sigma, lam = 0.5, 1e-4
    ref = KernelRidge(kernel="rbf", gamma=1 / (2 * sigma**2), alpha=lam * len(X)).fit(X, y)
    one = BKRR2(n_partitions=1, sigma=sigma, lam=lam).fit(X, y)
    assert np.max(np.abs(one.predict(Xt) - ref.predict(Xt))) / np.max(np.abs(ref.predict(Xt))) < 1e-8
    mse_ref = mean_squared_error(yt, ref.predict(Xt))
    for cls in (DCKRR, KKRR2, BKRR2):
        model = cls(n_partitions=4, sigma=sigma, lam=lam, random_state=0).fit(X, y)
        mse = mean_squared_error(yt, model.predict(Xt))
        assert mse < 1.5 * mse_ref, cls.__name__
        if cls is not DCKRR:
            assert oracle_score(model, Xt, yt) <= mse
