"""Tests of cakernels.datasets: registry, local loading, verification, download errors.

Tests marked ``realdata`` read the local benchmark copies from ``CAKERNELS_DATA`` (small
subsets only). Without it they are skipped, except under ``CI=true`` where they fail.
Nothing here touches the network: downloads are simulated by monkeypatching pooch.
"""

import doctest
import json
import os
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from cakernels import datasets as cds

LIBSVM = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/"
SHA256 = re.compile(r"^[0-9a-f]{64}$")
FORMATS = {
    "libsvm", "libsvm-bz2", "libsvm-xz", "libsvm-gz",
    "csv-label-first", "txt-label-first", "csv-header-target", "tsv-header-target",
}

# Published facts of the official LIBSVM sets: n_features, n_train, n_test, file names.
OFFICIAL = {
    "ijcnn1": (22, 49990, 91701, "binary/ijcnn1.bz2", "binary/ijcnn1.t.bz2"),
    "a9a": (123, 32561, 16281, "binary/a9a", "binary/a9a.t"),
    "usps": (256, 7291, 2007, "multiclass/usps.bz2", "multiclass/usps.t.bz2"),
    "covtype.binary": (54, 581012, None, "binary/covtype.libsvm.binary.bz2", None),
    "webspam": (254, 350000, None, "binary/webspam_wc_normalized_unigram.svm.xz", None),
    "epsilon": (2000, 400000, 100000, "binary/epsilon_normalized.bz2", "binary/epsilon_normalized.t.bz2"),
    "YearPredictionMSD": (90, 463715, 51630, "regression/YearPredictionMSD.bz2",
                          "regression/YearPredictionMSD.t.bz2"),
    "cadata": (8, 20640, None, "regression/cadata", None),
    "space_ga": (6, 3107, None, "regression/space_ga", None),
    "mg": (6, 1385, None, "regression/mg", None),
    "cpusmall": (12, 8192, None, "regression/cpusmall", None),
    "abalone": (8, 4177, None, "regression/abalone_scale", None),
}


def _labels(y):
    return set(np.unique(y).tolist())


# --------------------------------------------------------------------------- registry


def test_registry_entries_are_well_formed():
    names = cds.list_datasets()
    assert len(names) == len(set(names)) >= 12
    seen_keys = {}
    for name in names:
        info = cds.dataset_info(name)
        assert info["name"] == name
        for key in [name, *info["aliases"]]:
            assert key.lower() not in seen_keys, f"{key} used by {seen_keys.get(key.lower())} and {name}"
            seen_keys[key.lower()] = name
        assert info["task"] in ("binary", "multiclass", "regression")
        assert isinstance(info["n_features"], int) and info["n_features"] > 0
        assert isinstance(info["n_train"], int) and info["n_train"] > 0
        assert info["n_test"] is None or (isinstance(info["n_test"], int) and info["n_test"] > 0)
        assert isinstance(info["dense"], bool)
        assert info["description"]
        if info["task"] == "regression":
            assert info["classes"] is None and info["n_classes"] is None
        else:
            assert info["n_classes"] == len(info["classes"]) >= 2
            if info["task"] == "binary":
                assert info["classes"] == [-1, 1]
        splits = ["train"] + (["test"] if info["n_test"] is not None else [])
        official = info["official"]
        if official is not None:
            assert set(official) == set(splits), name
            for entry in official.values():
                assert entry["url"].startswith(LIBSVM + ("multiclass/" if info["task"] == "multiclass"
                                                         else info["task"] + "/"))
                assert entry["checksum"] is None  # the LIBSVM site publishes no checksums
                assert entry["format"] in FORMATS
                assert entry["format"].startswith("libsvm")
                fname = entry["url"].rsplit("/", 1)[1]
                for ext in ("bz2", "xz", "gz"):
                    assert fname.endswith("." + ext) == entry["format"].endswith("-" + ext), fname
        for loc in info["local"]:
            assert not loc["path"].startswith(("/", "\\")) and ".." not in Path(loc["path"]).parts
            assert loc["format"] in FORMATS
            assert loc["split"] in splits, (name, loc["path"])
            assert SHA256.match(loc["sha256"]), (name, loc["path"])
            expected_rows = info["n_train"] if loc["split"] == "train" else info["n_test"]
            assert loc["n_samples"] == expected_rows, (name, loc["path"])
            if loc["label_map"]:
                assert info["task"] == "binary"
                assert sorted(loc["label_map"].values()) == [-1, 1]
        # every split must be reachable: a local file or a download URL
        for split in splits:
            has_local = any(loc["split"] == split for loc in info["local"])
            assert has_local or (official is not None and split in official), (name, split)


def test_registry_official_facts():
    for name, (n_features, n_train, n_test, train_file, test_file) in OFFICIAL.items():
        info = cds.dataset_info(name)
        assert (info["n_features"], info["n_train"], info["n_test"]) == (n_features, n_train, n_test)
        assert info["official"]["train"]["url"] == LIBSVM + train_file
        if test_file is None:
            assert "test" not in info["official"]
        else:
            assert info["official"]["test"]["url"] == LIBSVM + test_file
    assert cds.dataset_info("usps")["classes"] == list(range(1, 11))
    assert cds.dataset_info("a9a")["dense"] is False
    assert cds.dataset_info("ijcnn1")["dense"] is True
    # 1/2 labelled LIBSVM files are converted to -1/+1
    assert cds.dataset_info("covtype.binary")["official"]["train"]["label_map"] == {"1": -1, "2": 1}
    assert cds.dataset_info("mushrooms")["local"][0]["label_map"] == {"1": -1, "2": 1}


def test_registry_json_has_no_invented_checksums():
    path = Path(__file__).resolve().parent.parent / "datasets" / "registry.json"
    data = json.loads(path.read_text())
    for rec in data["datasets"]:
        for entry in (rec["official"] or {}).values():
            assert entry["checksum"] is None


def test_lookup_aliases_and_unknown_names():
    assert cds.dataset_info("abalone_scale")["name"] == "abalone"
    assert cds.dataset_info("IJCNN1")["name"] == "ijcnn1"
    with pytest.raises(ValueError, match="ijcnn1"):
        cds.dataset_info("ijcnn")
    info = cds.dataset_info("a9a")
    info["n_features"] = 0  # a copy: the registry is unchanged
    assert cds.dataset_info("a9a")["n_features"] == 123


def test_get_data_home_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("CAKERNELS_DATA", str(tmp_path / "env"))
    assert cds.get_data_home(tmp_path / "arg") == tmp_path / "arg"
    assert cds.get_data_home() == tmp_path / "env"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CAKERNELS_DATA", "rel/data")
    assert cds.get_data_home() == tmp_path / "rel" / "data"
    monkeypatch.delenv("CAKERNELS_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cds.get_data_home() == tmp_path / "home" / "cakernels_data"


def test_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="train_test_split"):
        cds.load_dataset("cadata", subset="test", data_home=tmp_path)
    with pytest.raises(ValueError, match="subset"):
        cds.load_dataset("cadata", subset="validation", data_home=tmp_path)
    with pytest.raises(ValueError, match="n_samples"):
        cds.load_dataset("cadata", n_samples=0, data_home=tmp_path)
    with pytest.raises(ValueError, match="unknown dataset"):
        cds.load_dataset("no-such-set", data_home=tmp_path)
    with pytest.raises(ValueError, match="dense must be None, True or False"):
        cds.load_dataset("cadata", dense="no", data_home=tmp_path)


# --------------------------------------------------------------------------- real data


@pytest.mark.realdata
def test_registry_hashes_match_provenance(data_home):
    prov = (data_home / "PROVENANCE.md").read_text()
    for name in cds.list_datasets():
        for loc in cds.dataset_info(name)["local"]:
            assert (data_home / loc["path"]).is_file(), loc["path"]
            row = next((line for line in prov.splitlines() if loc["sha256"] in line), None)
            assert row is not None, f"{loc['path']}: sha256 not in PROVENANCE.md"
            assert row.strip("| ").split("|")[0].strip() in (loc["path"], Path(loc["path"]).name)


@pytest.mark.realdata
def test_ijcnn1_train_and_test(data_home):
    for subset in ("train", "test"):
        bunch = cds.load_dataset("ijcnn1", subset=subset, n_samples=400, random_state=0)
        assert isinstance(bunch.data, np.ndarray) and bunch.data.dtype == np.float64
        assert bunch.data.shape == (400, 22)
        assert _labels(bunch.target) == {-1.0, 1.0}
        assert bunch.subset == subset and bunch.feature_names is None
        assert Path(bunch.filename).parent == data_home / "ijcnn1"
        assert "ijcnn1" in bunch.DESCR and "sha256 verified" in bunch.DESCR


@pytest.mark.realdata
def test_a9a_train_test_feature_counts_agree(data_home):
    Xtr, ytr = cds.load_dataset("a9a", n_samples=300, random_state=0, return_X_y=True)
    Xte, yte = cds.load_dataset("a9a", subset="test", n_samples=300, random_state=0, return_X_y=True)
    assert sp.issparse(Xtr) and Xtr.format == "csr"
    assert Xtr.shape == Xte.shape == (300, 123)
    assert _labels(ytr) == _labels(yte) == {-1.0, 1.0}
    Xd, _ = cds.load_dataset("a9a", subset="test", n_samples=10, random_state=0, dense=True,
                             return_X_y=True)
    assert isinstance(Xd, np.ndarray) and Xd.shape == (10, 123)


@pytest.mark.realdata
def test_usps_test_split(data_home):
    X, y = cds.load_dataset("usps", subset="test", return_X_y=True)
    assert isinstance(X, np.ndarray) and X.shape == (2007, 256)
    assert _labels(y) == set(float(c) for c in range(1, 11))
    assert X.min() >= -1 and X.max() <= 1


@pytest.mark.realdata
@pytest.mark.parametrize(
    "name, n_features",
    [("cadata", 8), ("space_ga", 6), ("cpusmall", 12), ("abalone", 8)],
)
def test_regression_sets(data_home, name, n_features):
    X, y = cds.load_dataset(name, n_samples=200, random_state=1, return_X_y=True)
    assert isinstance(X, np.ndarray) and X.shape == (200, n_features)
    assert y.dtype == np.float64 and np.isfinite(y).all() and len(np.unique(y)) > 5


@pytest.mark.realdata
def test_full_row_count_and_subset_all(data_home):
    bunch = cds.load_dataset("space_ga")
    assert bunch.data.shape == (3107, 6)
    assert cds.load_dataset("space_ga", subset="all").data.shape == (3107, 6)
    X, y = cds.load_dataset("covtype_1000", subset="all", return_X_y=True)
    assert X.shape == (976 + 1024, 54) and _labels(y) == {-1.0, 1.0}
    assert isinstance(cds.load_dataset("covtype_1000", subset="all").filename, list)


@pytest.mark.realdata
def test_n_samples_is_reproducible(data_home):
    a = cds.load_dataset("cadata", n_samples=50, random_state=3, return_X_y=True)
    b = cds.load_dataset("cadata", n_samples=50, random_state=3, return_X_y=True)
    c = cds.load_dataset("cadata", n_samples=50, random_state=4, return_X_y=True)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    with pytest.raises(ValueError, match="larger than"):
        cds.load_dataset("bodyfat", n_samples=253)


@pytest.mark.realdata
@pytest.mark.parametrize(
    "name, subset, shape, sparse",
    [
        ("mushrooms", "train", (8124, 112), True),  # labels 1/2 in the file
        ("higgs_subset", "test", (500, 28), False),  # labels 0/1 in the file
        ("madelon", "test", (600, 500), False),
        ("bodyfat", "train", (252, 14), False),
        ("covtype_5000", "test", (5142, 54), False),
    ],
)
def test_other_local_sets(data_home, name, subset, shape, sparse):
    X, y = cds.load_dataset(name, subset=subset, return_X_y=True)
    assert X.shape == shape and sp.issparse(X) == sparse
    if cds.dataset_info(name)["task"] == "binary":
        assert _labels(y) == {-1.0, 1.0}


@pytest.mark.realdata
def test_an_unreadable_registry_copy_is_the_readers_permission_error(data_home, tmp_path,
                                                                     monkeypatch):
    # the checksum's read raised a bare "[Errno 13] Permission denied: '<path>'"
    target = tmp_path / "bodyfat" / "bodyfat"
    target.parent.mkdir()
    shutil.copyfile(data_home / "bodyfat" / "bodyfat", target)

    def denied(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(cds, "open", denied, raising=False)
    with pytest.raises(PermissionError) as err:
        cds.load_dataset("bodyfat", data_home=tmp_path)
    assert str(err.value) == f"{target}: permission denied (the file cannot be read by this user)"


@pytest.mark.realdata
def test_sha256_mismatch_raises(data_home, tmp_path, monkeypatch):
    target = tmp_path / "bodyfat" / "bodyfat"
    target.parent.mkdir()
    shutil.copyfile(data_home / "bodyfat" / "bodyfat", target)
    expected = cds.dataset_info("bodyfat")["local"][0]["sha256"]

    calls = []
    real_sha256 = cds.hashlib.sha256
    monkeypatch.setattr(cds.hashlib, "sha256", lambda *a: calls.append(1) or real_sha256(*a))
    assert cds.load_dataset("bodyfat", data_home=tmp_path).data.shape == (252, 14)
    cds.load_dataset("bodyfat", data_home=tmp_path)
    assert len(calls) == 1  # cached per (path, size, mtime)

    with open(target, "a") as fh:  # still a valid file, but not the registry's copy
        fh.write("10.0 1:1 2:30\n")
    with pytest.raises(cds.ChecksumMismatchError) as err:
        cds.load_dataset("bodyfat", data_home=tmp_path, download_if_missing=False)
    msg = str(err.value)
    assert isinstance(err.value, OSError)
    assert str(target) in msg and expected in msg and cds._sha256(target) in msg
    assert "verify=False" in msg and "\n" not in msg
    with pytest.warns(UserWarning, match="253 rows, but the train split of bodyfat has 252"):
        bunch = cds.load_dataset("bodyfat", data_home=tmp_path, verify=False)
    assert bunch.data.shape == (253, 14) and "not verified" in bunch.DESCR

    # an edit that keeps the size and puts the mtime back (touch -r, cp -p) is checked
    shutil.copyfile(data_home / "bodyfat" / "bodyfat", target)
    cds.load_dataset("bodyfat", data_home=tmp_path)
    st = target.stat()
    text = target.read_bytes()
    first = text.index(b" ")
    target.write_bytes(b"9" * first + text[first:])  # the first target, same length
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.stat().st_size == st.st_size and target.stat().st_mtime_ns == st.st_mtime_ns
    with pytest.raises(cds.ChecksumMismatchError):
        cds.load_dataset("bodyfat", data_home=tmp_path, download_if_missing=False)
    # a registry LIBSVM file is one-based: a stray index 0 is an error, not a shift of
    # every feature by one (unverified files included)
    shutil.copyfile(data_home / "bodyfat" / "bodyfat", target)
    with open(target, "a") as fh:
        fh.write("10.0 0:1 1:1 2:30\n")
    with pytest.raises(ValueError, match="index 0"):
        cds.load_dataset("bodyfat", data_home=tmp_path, verify=False)


# --------------------------------------------------------------------------- downloads (no network)


def test_an_unverified_file_with_another_row_count_warns(tmp_path):
    # a cut copy under the official name (no checksum known) was taken for the whole
    # split silently (DESCR still said 49,990 train rows)
    import bz2

    folder = tmp_path / "ijcnn1"
    folder.mkdir()
    rows = "".join(f"{1 if i % 2 else -1} 1:{i / 10:.1f} 22:1\n" for i in range(6))
    (folder / "ijcnn1.bz2").write_bytes(bz2.compress(rows.encode()))
    with pytest.warns(UserWarning, match=r"ijcnn1\.bz2: 6 rows, but the train split of ijcnn1 "
                                         r"has 49,990: a cut or other copy\? \(unverified"):
        X, y = cds.load_dataset("ijcnn1", data_home=tmp_path, return_X_y=True)
    assert X.shape == (6, 22)
    with pytest.warns(UserWarning, match=r"6 rows.*\(not verified: verify=False\)"):
        cds.load_dataset("ijcnn1", data_home=tmp_path, verify=False)


def test_offline_download_raises_clear_error(tmp_path, monkeypatch, requires):
    pooch = requires("pooch")

    def offline(*args, **kwargs):
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(pooch, "retrieve", offline)
    with pytest.raises(cds.DatasetDownloadError) as err:
        cds.load_dataset("cadata", data_home=tmp_path)
    msg = str(err.value)
    assert isinstance(err.value, OSError) and "\n" not in msg
    assert "'cadata'" in msg and LIBSVM + "regression/cadata" in msg
    assert str(tmp_path / "cadata") in msg and "CAKERNELS_DATA" in msg


def test_failed_download_leaves_no_folders_behind(tmp_path, monkeypatch, requires):
    """pooch creates the dataset folder (and the data home) before it downloads; a
    failed download removes what it created, so that the data home does not look
    set up afterwards - but never a folder that existed or holds anything."""
    pooch = requires("pooch")

    def offline(url, known_hash=None, path=None, **kwargs):
        os.makedirs(path, exist_ok=True)  # as pooch does before it connects
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(pooch, "retrieve", offline)
    home = tmp_path / "new" / "home"
    with pytest.raises(cds.DatasetDownloadError):
        cds.load_dataset("cadata", data_home=home)
    assert list(tmp_path.iterdir()) == []  # new/, new/home/, new/home/cadata/ all gone
    kept = tmp_path / "kept"
    (kept / "cadata").mkdir(parents=True)
    (kept / "cadata" / "notes.txt").write_text("mine")
    with pytest.raises(cds.DatasetDownloadError):
        cds.load_dataset("cadata", data_home=kept)
    assert (kept / "cadata" / "notes.txt").read_text() == "mine"


def test_download_path_and_record(tmp_path, monkeypatch, requires):
    pooch = requires("pooch")
    calls = []

    def fake_retrieve(url, known_hash=None, fname=None, path=None, **kwargs):
        calls.append((url, known_hash, fname, Path(path)))
        Path(path).mkdir(parents=True, exist_ok=True)
        out = Path(path) / fname
        out.write_text("0.5 1:1 2:2 3:3 4:4 5:5 6:6\n0.7 1:2 6:1\n0.1 3:1\n")
        return str(out)

    monkeypatch.setattr(pooch, "retrieve", fake_retrieve)
    with pytest.warns(UserWarning, match="3 rows, but the train split of mg has 1,385"):
        bunch = cds.load_dataset("mg", data_home=tmp_path)
    assert calls == [(LIBSVM + "regression/mg", None, "mg", tmp_path / "mg")]
    assert bunch.data.shape == (3, 6) and bunch.filename == str(tmp_path / "mg" / "mg")
    assert "not verified" in bunch.DESCR

    # second load: the file is found locally (and checked against the download record)
    monkeypatch.setattr(pooch, "retrieve", lambda *a, **k: pytest.fail("downloaded twice"))
    assert cds.load_dataset("mg", data_home=tmp_path).data.shape == (3, 6)
    with open(tmp_path / "mg" / "mg", "a") as fh:
        fh.write("0.2 1:1\n")
    with pytest.raises(cds.ChecksumMismatchError, match="verify=False"):
        cds.load_dataset("mg", data_home=tmp_path)


def test_missing_pooch_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pooch", None)
    with pytest.raises(ImportError, match=re.escape('pip install "cakernels[datasets]"')):
        cds.load_dataset("mg", data_home=tmp_path)


def test_download_if_missing_false(tmp_path, monkeypatch, requires):
    pooch = requires("pooch")
    monkeypatch.setattr(pooch, "retrieve", lambda *a, **k: pytest.fail("must not download"))
    with pytest.raises(FileNotFoundError) as err:
        cds.load_dataset("ijcnn1", subset="test", data_home=tmp_path, download_if_missing=False)
    msg = str(err.value)
    assert LIBSVM + "binary/ijcnn1.t.bz2" in msg and str(tmp_path / "ijcnn1") in msg
    assert "CAKERNELS_DATA" in msg
    # local-only subsets have no URL: FileNotFoundError even when downloads are allowed
    with pytest.raises(FileNotFoundError, match="no download URL"):
        cds.load_dataset("covtype_1000", data_home=tmp_path)


# --------------------------------------------------------------------------- load_svmlight


def test_load_svmlight_ok(tmp_path):
    path = tmp_path / "ok.svm"
    path.write_text("+1 1:0.5 3:1\n-1 2:2\n")
    X, y = cds.load_svmlight(path, n_features=5)
    assert sp.issparse(X) and X.shape == (2, 5) and y.tolist() == [1.0, -1.0]
    assert cds.load_svmlight(str(path))[0].shape == (2, 3)


def test_load_svmlight_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        cds.load_svmlight(tmp_path / "missing.svm")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        cds.load_svmlight(tmp_path)
    empty = tmp_path / "empty.svm"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        cds.load_svmlight(empty)
    bad = tmp_path / "bad.svm"
    bad.write_text("+1 1:0.5\nthis is not a libsvm line\n")
    with pytest.raises(ValueError, match="as a LIBSVM/svmlight file") as err:
        cds.load_svmlight(bad)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    wide = tmp_path / "wide.svm"
    wide.write_text("1 7:1\n")
    with pytest.raises(ValueError, match="wide.svm"):
        cds.load_svmlight(wide, n_features=3)
    # wider than any file's indices: refused (an int64 beyond C long was an
    # OverflowError, 2^31 + 1 columns baffled the SVC baseline)
    for n in (2**31 + 1, 10**20):
        with pytest.raises(ValueError, match=r"n_features <= 2\^31"):
            cds.load_svmlight(wide, n_features=n)
        with pytest.raises(ValueError, match=r"n_features <= 2\^31"):
            cds.load_svmlight_shard(wide, n_features=n)
    assert cds.load_svmlight(wide, n_features=2**31)[0].shape == (1, 2**31)


# --------------------------------------------------------------------------- demos


def test_load_demo():
    bunch = cds.load_demo()
    assert bunch.data.shape == (569, 30) and bunch.data.dtype == np.float64
    assert _labels(bunch.target) == {-1.0, 1.0}
    assert (bunch.target == -1).sum() == 212  # malignant
    assert len(bunch.feature_names) == 30 and bunch.DESCR
    X, y = cds.load_demo(return_X_y=True, n_samples=100, random_state=0)
    assert X.shape == (100, 30)
    X, y = cds.load_demo_regression(return_X_y=True)
    assert X.shape == (442, 10) and y.dtype == np.float64


def test_docstring_examples_run_offline():
    result = doctest.testmod(cds, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 5


# --------------------------------------------------------------------------- index base


BASES = "+1 1:0.5 3:1\n-1 2:2 4:-1\n+1 3:4\n"  # one-based: never uses index 0
ZERO = "+1 0:7 1:0.5 3:1\n-1 2:2 4:-1\n+1 0:1 3:4\n"  # index 0 in two rows


@pytest.mark.parametrize("text", [BASES, ZERO])
@pytest.mark.parametrize("zero_based", ["auto", True, False])
def test_load_svmlight_index_base_matches_scikit_learn(tmp_path, text, zero_based):
    from sklearn.datasets import load_svmlight_file

    path = tmp_path / "f.svm"
    path.write_text(text)
    if zero_based is False and text == ZERO:
        with pytest.raises(ValueError) as err:
            cds.load_svmlight(path, zero_based=False)
        msg = str(err.value)
        assert str(path) in msg and "index 0 occurs in 2 rows" in msg and "row 1" in msg
        assert "\n" not in msg
        return
    X, y = cds.load_svmlight(path, zero_based=zero_based)
    Xr, yr = load_svmlight_file(str(path), zero_based=zero_based)
    assert X.shape == Xr.shape and X.dtype == np.float64 and X.format == "csr"
    np.testing.assert_array_equal(X.toarray(), Xr.toarray())
    np.testing.assert_array_equal(y, yr)


def test_load_svmlight_index_base_columns(tmp_path):
    path = tmp_path / "f.svm"
    path.write_text(BASES)
    # one-based: index j is column j - 1; zero-based: index j is column j
    assert cds.load_svmlight(path)[0].toarray()[1].tolist() == [0, 2, 0, -1]
    assert cds.load_svmlight(path, zero_based=True)[0].toarray()[1].tolist() == [0, 0, 2, 0, -1]
    assert cds.load_svmlight(path, n_features=6)[0].shape == (3, 6)
    with pytest.raises(ValueError, match="f.svm.*5 features.*largest index 4.*n_features=4"):
        cds.load_svmlight(path, zero_based=True, n_features=4)
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="zero_based must be 'auto', True or False"):
            cds.load_svmlight(path, zero_based=bad)


def test_parse_svmlight_drops_index_0_in_a_one_based_read(tmp_path):
    path = tmp_path / "f.svm"
    path.write_text(ZERO)
    read = cds._parse_svmlight(path, zero_based=False, index_0="drop")
    assert read.index_base == 1 and read.dropped_index_0 == 2 and read.rows_with_index_0 == 2
    # the same as the file without its 0: entries, read one-based
    clean = tmp_path / "clean.svm"
    clean.write_text(BASES)
    np.testing.assert_array_equal(read.X.toarray(), cds.load_svmlight(clean)[0].toarray())
    auto = cds._parse_svmlight(path)
    assert auto.index_base == 0 and auto.uses_index_0 and auto.dropped_index_0 == 0
    assert auto.X.shape == (3, 5)
    one = cds._parse_svmlight(clean)
    assert one.index_base == 1 and not one.uses_index_0


def _write(path, data: bytes):
    import bz2
    import gzip
    import lzma

    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(path.suffix, open)
    with opener(path, "wb") as fh:
        fh.write(data)
    return path


@pytest.mark.parametrize("suffix, streamed", [
    ("", False), (".gz", False), (".bz2", False), (".xz", False),
    # compressed files larger than _IN_MEMORY_MAX are parsed as a stream
    (".gz", True), (".bz2", True), (".xz", True),
])
def test_load_svmlight_warns_when_the_last_line_has_no_newline(tmp_path, monkeypatch, suffix,
                                                               streamed):
    import warnings

    if streamed:
        monkeypatch.setattr(cds, "_IN_MEMORY_MAX", 0)
    whole = _write(tmp_path / f"whole.svm{suffix}", BASES.encode())
    cut = _write(tmp_path / f"cut.svm{suffix}", BASES.encode()[:-4])  # "+1 3:4\n" -> "+1 3"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        X, y = cds.load_svmlight(whole)
    assert X.shape == (3, 4)
    with pytest.warns(UserWarning) as record:
        Xc, yc = cds.load_svmlight(cut)
    assert len(record) == 1
    msg = str(record[0].message)
    assert str(cut) in msg and "no newline" in msg and "cut off" in msg and "3 rows" in msg
    assert record[0].filename == __file__  # points at the caller
    # the rows before the cut are read as they are
    np.testing.assert_array_equal(Xc[:2].toarray(), X[:2].toarray())
    assert yc.tolist() == y.tolist()


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_load_svmlight_shard_warns_of_a_cut_file_without_swapping_the_filters(
        tmp_path, monkeypatch, suffix):
    # rank 0 read a compressed file inside warnings.catch_warnings(record=True) to learn
    # whether it was cut: before Python 3.14 that swaps the process-wide filters and
    # showwarning, so another thread's warnings were lost meanwhile
    import warnings

    from cakernels.backends import SelfCommunicator

    def swapped(*args, **kwargs):
        raise AssertionError("warnings.catch_warnings in the library")

    from cakernels._svmlight_shard import read_shard

    cut = _write(tmp_path / f"cut.svm{suffix}", BASES.encode()[:-4])
    whole = _write(tmp_path / f"whole.svm{suffix}", BASES.encode())
    with pytest.warns(UserWarning) as record, monkeypatch.context() as patch:
        patch.setattr(warnings, "catch_warnings", swapped)
        X, y = cds.load_svmlight_shard(cut, comm=SelfCommunicator())
    texts = [str(w.message) for w in record]
    assert len(texts) == 1 and "no newline" in texts[0] and "3 rows" in texts[0], texts
    assert X.shape[0] == 3
    for path, truncated in ((cut, True), (whole, False)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            info = read_shard(path, SelfCommunicator())[2]
        assert info["truncated"] is truncated


def test_svmlight_huge_index_and_byte_order_mark_are_clear_errors(tmp_path):
    big = tmp_path / "big.svm"
    big.write_text("1 1:1 2147483648:1\n-1 1:2\n")
    with pytest.raises(ValueError, match="beyond 2,147,483,647"):
        cds.load_svmlight(big)
    bom = tmp_path / "bom.svm"
    bom.write_bytes(b"\xef\xbb\xbf1 1:1 2:1\n-1 1:2\n")
    with pytest.raises(ValueError, match="UTF-8 byte-order mark"):
        cds.load_svmlight(bom)


@pytest.mark.parametrize("name", ["download_if_missing", "verify", "return_X_y"])
@pytest.mark.parametrize("bad", ["False", 0, None])
def test_download_and_verify_flags_must_be_booleans(tmp_path, name, bad):
    # the string 'False' is true: it started a download
    from cakernels.datasets import load_dataset

    with pytest.raises(ValueError, match=f"{name} must be True or False"):
        load_dataset("a9a", data_home=tmp_path, **{name: bad})


@pytest.mark.parametrize("loader", ["load_demo", "load_demo_regression"])
def test_the_demos_return_x_y_must_be_a_boolean(loader):
    # return_X_y='False' returned a tuple
    with pytest.raises(ValueError, match="return_X_y must be True or False"):
        getattr(cds, loader)(return_X_y="False")
    X, y = getattr(cds, loader)(return_X_y=True)
    assert X.shape[0] == y.shape[0]


def test_an_empty_data_home_is_refused(tmp_path, monkeypatch):
    # "" was the current directory (where a download would go), while an empty
    # CAKERNELS_DATA counts as unset
    with pytest.raises(ValueError, match="data_home must not be empty"):
        cds.get_data_home("")
    with pytest.raises(ValueError, match="data_home must not be empty"):
        cds.load_dataset("a9a", data_home="", download_if_missing=False)
    monkeypatch.setenv("CAKERNELS_DATA", "")
    assert cds.get_data_home() == cds.get_data_home("~/cakernels_data")


def test_a_compressed_file_without_its_suffix_is_named(tmp_path):
    # its bytes looked like a CSV line: the error said to convert a table
    import gzip

    plain = tmp_path / "d.svm"
    plain.write_text("1 1:0.5 2:1\n-1 1:0.25\n")
    for suffix, opener in ((".gz", gzip.open), (".bz2", __import__("bz2").open),
                           (".xz", __import__("lzma").open)):
        packed = tmp_path / f"packed{suffix[1:]}.svm"
        with opener(packed, "wb") as fh:
            fh.write(plain.read_bytes())
        with pytest.raises(ValueError, match=rf"compressed, but its name does not end in "
                           rf"\{suffix}.*rename it to packed{suffix[1:]}\.svm\{suffix}") as err:
            cds.load_svmlight(packed)
        # without the reader's message, which quoted the compressed bytes
        assert str(err.value) == (
            f"{packed}: could not load it as a LIBSVM/svmlight file: its bytes are not text "
            f"(it is {dict(gz='gzip', bz2='bzip2', xz='xz')[suffix[1:]]}-compressed, but its "
            f"name does not end in {suffix}: the suffix selects the decompression; rename it "
            f"to packed{suffix[1:]}.svm{suffix})"), str(err.value)
        renamed = packed.rename(tmp_path / f"packed{suffix[1:]}.svm{suffix}")
        np.testing.assert_array_equal(cds.load_svmlight(renamed)[1], [1, -1])


def test_a_pipe_is_refused_not_called_missing(tmp_path):
    # <(zcat f.gz) was "no such file" in the loaders; the CLI parsed it, then failed
    # to re-open it ("not seekable")
    from cakernels._cli import main

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    from cakernels.backends import SelfCommunicator

    for load in (cds.load_svmlight,
                 lambda p: cds.load_svmlight_shard(p, comm=SelfCommunicator())):
        with pytest.raises(ValueError, match="not a regular file \\(a pipe"):
            load(fifo)
    assert main(["fit", str(fifo), "-o", str(tmp_path / "m.skops")]) == 2


def test_a_format_error_names_its_line(tmp_path):
    # the reader's message named the bad token but not where it was in the file
    import gzip

    from cakernels.backends import SelfCommunicator

    rows = [f"{1 if i % 2 else -1} 1:{i / 10:.2f} 3:{i / 20:.2f}\n" for i in range(300)]
    cases = {"value": (250, "1 1:0.5 2:abc # a comment", "could not convert string to float"),
             "label": (1, "positive 1:0.5", "could not convert string to float"),
             "order": (299, "1 3:0.5 2:0.1", "sorted and unique"),
             "index": (120, "1 -4:0.5", "Invalid index -4")}
    for name, (number, line, why) in cases.items():
        bad = list(rows)
        bad.insert(number - 1, line + "\n")
        plain = tmp_path / f"{name}.svm"
        plain.write_text("".join(bad))
        packed = tmp_path / f"{name}.svm.gz"
        packed.write_bytes(gzip.compress(plain.read_bytes()))
        for path in (plain, packed):
            for load in (cds.load_svmlight,
                         lambda p: cds.load_svmlight_shard(p, comm=SelfCommunicator())):
                with pytest.raises(ValueError) as info:
                    load(path)
                assert f"file: line {number:,} ('{line}'): ValueError: " in str(info.value)
                assert why in str(info.value), str(info.value)
    # a block boundary of the search (blocks of 4 lines here)
    for number in range(1, 13):
        lines = [b"1 1:1\n"] * 12
        lines[number - 1] = b"1 1:x\n"
        assert cds._first_bad_line(iter(lines), block=4) == (number, b"1 1:x\n")
    assert cds._first_bad_line(iter([b"1 1:1\n", b"\n", b"-1 2:3\n"]), block=2) is None


def test_a_file_that_cannot_be_read_keeps_its_permission_error(tmp_path, monkeypatch):
    # it became a ValueError "could not load it as a LIBSVM/svmlight file"
    path = tmp_path / "d.svm"
    path.write_text("1 1:0.5\n")

    def denied(p):
        raise PermissionError(13, "Permission denied", str(p))

    monkeypatch.setattr(cds, "_load_raw_svmlight", denied)
    with pytest.raises(PermissionError, match="permission denied"):
        cds.load_svmlight(path)
    # the shard reader: one path in the message (compressed: it was written twice),
    # and no "could not load it as a LIBSVM/svmlight file" (a plain file)
    import gzip

    from cakernels import _svmlight_shard
    from cakernels.backends import SelfCommunicator

    packed = tmp_path / "d.svm.gz"
    with gzip.open(packed, "wb") as fh:
        fh.write(b"1 1:0.5\n")
    monkeypatch.setattr(_svmlight_shard, "open", lambda *a, **k: denied(a[0]), raising=False)
    for p in (packed, path):
        with pytest.raises(ValueError) as info:
            cds.load_svmlight_shard(p, comm=SelfCommunicator())
        assert str(info.value) == (f"{p}: permission denied (the file cannot be read by "
                                   "this user)"), str(info.value)
