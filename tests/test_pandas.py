"""pandas input: every estimator and partitioner takes DataFrames and handles
``feature_names_in_`` as scikit-learn's own estimators do (same warnings, same
errors), also inside a Pipeline that passes DataFrames."""

import re
import warnings
from functools import partial

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.cluster import KMeans
from sklearn.kernel_ridge import KernelRidge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from cakernels import (
    BKMSVC,
    BKRR,
    BKRR2,
    BKRR2CV,
    CASVC,
    CASVCCV,
    CPSVC,
    DCKRR,
    DCSVC,
    FCFSSVC,
    KKRR,
    KKRR2,
    AsyGCDSVC,
    CascadeSVC,
    PartitionedKernelRidge,
    PartitionedSVC,
    oracle_score,
)
from cakernels.partition import (
    BKMPartitioner,
    FCFSPartitioner,
    KBalancePartitioner,
    KMeansPartitioner,
    RandomPartitioner,
)

ESTIMATORS = [
    CASVC(n_partitions=3, random_state=0),
    FCFSSVC(n_partitions=3, random_state=0),
    BKMSVC(n_partitions=3, random_state=0),
    CPSVC(n_partitions=3, random_state=0),
    PartitionedSVC(partitioner="kbalance", n_partitions=3, solver="smo", random_state=0),
    AsyGCDSVC(n_threads=1, random_state=0),
    DCKRR(n_partitions=3, sigma=3.0, random_state=0),
    KKRR(n_partitions=3, sigma=3.0, random_state=0),
    KKRR2(n_partitions=3, sigma=3.0, random_state=0),
    BKRR(n_partitions=3, sigma=3.0, random_state=0),
    BKRR2(n_partitions=3, sigma=3.0, random_state=0),
    PartitionedKernelRidge(partitioner="fcfs", combine="average", n_partitions=3,
                           sigma=3.0, random_state=0),
]
PARTITIONERS = [
    RandomPartitioner(3, random_state=0),
    KMeansPartitioner(3, random_state=0),
    KBalancePartitioner(3, assign_order="regret", random_state=0),
    FCFSPartitioner(3, random_state=0),
    BKMPartitioner(3, random_state=0),
]
COLUMNS = [f"feat_{i}" for i in range(6)]


def _ids(objs):
    return [type(o).__name__ + str(i) for i, o in enumerate(objs)]


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(180, 6)
    X[:60, 0] += 4.0
    score = X @ rng.randn(6)
    return X, score, rng.randn(40, 6)


def _y(est, score):
    if is_classifier(est):
        return np.digitize(score, np.quantile(score, [0.4, 0.75]))  # three classes
    return score + np.sin(score)


def _reference(est):
    """The scikit-learn estimator whose behaviour ours must reproduce."""
    if is_classifier(est):
        return SVC()
    if is_regressor(est):
        return KernelRidge()
    return KMeans(n_clusters=3, n_init=1, random_state=0)


def _method(est):
    return "assign" if hasattr(est, "assign") else "predict"


def _outcome(est, call):
    """What ``call()`` does: ``('ok',)``, ``('warn', category, message)`` or
    ``('raise', type, message)``, with the estimator's class name masked."""
    name = type(est).__name__
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        try:
            call()
        except Exception as exc:  # noqa: BLE001 (compared with scikit-learn's)
            return ("raise", type(exc), str(exc).replace(name, "EST"))
    rec = [w for w in rec if "feature names" in str(w.message)]
    if rec:
        return ("warn", rec[0].category, str(rec[0].message).replace(name, "EST"))
    return ("ok",)


def _scenarios(X, T):
    df, tdf = pd.DataFrame(X, columns=COLUMNS), pd.DataFrame(T, columns=COLUMNS)
    return {
        "DataFrame fit, DataFrame predict": (df, tdf),
        "DataFrame fit, ndarray predict": (df, T),
        "ndarray fit, DataFrame predict": (X, tdf),
        "other column names": (df, tdf.rename(columns=lambda c: c.upper())),
        "columns reordered": (df, tdf[COLUMNS[::-1]]),
        "a column missing": (df, tdf[COLUMNS[:-1]]),
    }


@pytest.mark.parametrize("est", ESTIMATORS + PARTITIONERS, ids=_ids(ESTIMATORS + PARTITIONERS))
def test_feature_names_behave_as_in_scikit_learn(est, data):
    X, score, T = data
    y = _y(est, score)
    ref = _reference(est)
    for what, (A, B) in _scenarios(X, T).items():
        ours, theirs = clone(est).fit(A, y), clone(ref).fit(A, y)
        got = _outcome(ours, partial(getattr(ours, _method(ours)), B))
        expected = _outcome(theirs, partial(theirs.predict, B))
        assert got == expected, what
        if isinstance(A, pd.DataFrame):
            assert isinstance(ours.feature_names_in_, np.ndarray)
            assert ours.feature_names_in_.dtype == object
            np.testing.assert_array_equal(ours.feature_names_in_, COLUMNS)
        else:
            assert not hasattr(ours, "feature_names_in_")
    # refitting on an ndarray forgets the names, as in scikit-learn
    ours = clone(est).fit(pd.DataFrame(X, columns=COLUMNS), y).fit(X, y)
    assert not hasattr(ours, "feature_names_in_")
    assert _outcome(ours, lambda: getattr(ours, _method(ours))(T)) == ("ok",)


@pytest.mark.parametrize("est", ESTIMATORS + PARTITIONERS, ids=_ids(ESTIMATORS + PARTITIONERS))
def test_dataframe_gives_the_model_of_the_array(est, data):
    X, score, T = data
    y = _y(est, score)
    df, tdf = pd.DataFrame(X, columns=COLUMNS), pd.DataFrame(T, columns=COLUMNS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no feature-name warning on the happy path
        from_df = clone(est).fit(df, pd.Series(y, name="target"))
        out_df = getattr(from_df, _method(from_df))(tdf)
    from_array = clone(est).fit(X, y)
    np.testing.assert_array_equal(out_df, getattr(from_array, _method(from_array))(T))
    if hasattr(from_df, "partitioner_"):
        np.testing.assert_array_equal(from_df.partitioner_.labels_,
                                      from_array.partitioner_.labels_)
        # the inner partitioner is fitted on the validated array, and named as
        # the estimator: it routes the DataFrame as the estimator does (it had
        # no names and warned on a DataFrame)
        np.testing.assert_array_equal(from_df.partitioner_.feature_names_in_, COLUMNS)
        assert not hasattr(from_array.partitioner_, "feature_names_in_")
        part = from_df.partitioner_
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_array_equal(part.assign(tdf), from_array.partitioner_.assign(T))
        with pytest.raises(ValueError, match="feature names should match"):
            part.assign(tdf.rename(columns=str.upper))
        # refitting on an array forgets them there too
        assert not hasattr(clone(est).fit(df, y).fit(X, y).partitioner_, "feature_names_in_")
    if hasattr(from_df, "labels_"):
        np.testing.assert_array_equal(from_df.labels_, from_array.labels_)
        np.testing.assert_array_equal(from_df.fit_assign(df), from_array.labels_)
    if hasattr(from_df, "decision_function"):
        np.testing.assert_array_equal(from_df.decision_function(tdf),
                                      from_array.decision_function(T))
    if hasattr(from_df, "score"):
        assert from_df.score(tdf, pd.Series(_y(est, T @ np.ones(6)))) == \
            from_array.score(T, _y(est, T @ np.ones(6)))


@pytest.mark.parametrize("make", [
    lambda: CascadeSVC(n_partitions=3, random_state=0),
    lambda: DCSVC(n_partitions=3, random_state=0),
    lambda: BKRR2CV(n_partitions=3, sigmas=[3.0], lams=[1e-3], cv=2, random_state=0),
    lambda: CASVCCV(n_partitions=3, Cs=[1.0], gammas=[0.2], cv=2, random_state=0),
], ids=["CascadeSVC", "DCSVC", "BKRR2CV", "CASVCCV"])
def test_multilevel_and_search_partitioners_get_the_names(make, data):
    # the multi-level SVMs and the searches name their partitioner_ too
    X, score, T = data
    est = make()
    y = _y(est, score)
    df, tdf = pd.DataFrame(X, columns=COLUMNS), pd.DataFrame(T, columns=COLUMNS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = est.fit(df, y)
        model.predict(tdf)
        labels = model.partitioner_.assign(tdf)
    np.testing.assert_array_equal(model.partitioner_.feature_names_in_, COLUMNS)
    np.testing.assert_array_equal(labels, make().fit(X, y).partitioner_.assign(T))


def test_oracle_score_takes_dataframes(data):
    X, score, _ = data
    y = score + np.sin(score)
    df = pd.DataFrame(X, columns=COLUMNS)
    model = BKRR2(n_partitions=3, sigma=3.0, random_state=0).fit(df, pd.Series(y))
    ref = BKRR2(n_partitions=3, sigma=3.0, random_state=0).fit(X, y)
    assert oracle_score(model, df, pd.Series(y)) == oracle_score(ref, X, y)


@pytest.mark.parametrize("est", ESTIMATORS, ids=_ids(ESTIMATORS))
def test_in_a_pipeline_with_pandas_output(est, data):
    X, score, T = data
    y = _y(est, score)
    df, tdf = pd.DataFrame(X, columns=COLUMNS), pd.DataFrame(T, columns=COLUMNS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe = make_pipeline(StandardScaler().set_output(transform="pandas"), clone(est))
        pipe.fit(df, y)
        got = pipe.predict(tdf)
    final = pipe[-1]
    np.testing.assert_array_equal(final.feature_names_in_, COLUMNS)
    # the same numbers as the pipeline whose scaler passes arrays on (fitted on
    # the same DataFrame: the scaler's statistics round differently on the
    # column-major array a DataFrame gives than on a C-ordered one)
    ref = make_pipeline(StandardScaler(), clone(est)).fit(df, y)
    assert not hasattr(ref[-1], "feature_names_in_")
    np.testing.assert_array_equal(got, ref.predict(tdf))
    # other columns are refused by the scaler first, as in any scikit-learn pipeline
    with pytest.raises(ValueError, match=re.escape("The feature names should match")):
        pipe.predict(tdf.rename(columns=str.upper))
