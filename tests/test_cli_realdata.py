"""The command line on real LIBSVM files (small, fast): the task inferred from cpusmall's
targets and a9a read with its training file's index base, through the real executable."""


import numpy as np
import pytest

from cakernels import BKRR2
from cakernels.datasets import load_svmlight

pytestmark = pytest.mark.realdata


def _lines(text):
    return text.strip().splitlines()


def _estimator(model):
    import skops.io as sio

    payload = sio.load(model, trusted=sio.get_untrusted_types(file=model))
    return payload["estimator"], payload["metadata"]


def test_cpusmall_is_fitted_as_regression(cakernels_cli, data_home, tmp_path):
    """cpusmall's targets are whole numbers (0, 1, 2, 46..99 with gaps): regression, and
    kernel ridge options need no --method (they used to train an SVM classifier, or be
    refused as "kernel ridge options")."""
    data, model = data_home / "cpusmall" / "cpusmall", tmp_path / "cpusmall.pkl"
    res = cakernels_cli("fit", data, "-o", model, "--sigma", "3", "--lam", "1e-6")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("BKRR2 (default for regression; choose with --method): fitted "
                                 "on 8,192 samples x 12 features")
    notes = _lines(res.stderr)
    assert notes[0] == (
        f"cakernels: note: {data}: regression inferred: its targets take 56 distinct values "
        "(whole numbers, not a contiguous range of class codes); use --task classification (or "
        "an SVM --method) to train a classifier")
    # cpusmall's features reach millions: sigma = 3 makes the kernel the identity
    assert len(notes) == 2 and notes[1].startswith("cakernels: note: the RBF kernel is nearly "
                                                   "the identity on this data")
    assert "sigma = 3," in notes[1] and "--standardize" in notes[1]
    est, meta = _estimator(model)
    assert meta["task"] == "regression" and meta["index_base"] == 1 and "classes" not in meta
    X, y = load_svmlight(data, zero_based=False)
    ref = BKRR2(n_partitions=8, sigma=3.0, lam=1e-6, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.predict(X[:500]), ref.predict(X[:500]))


def _accuracy(out):
    return float(out.split("accuracy:")[1].split()[0])


def test_a9a_with_a_stray_index_0_scores_as_the_clean_file(cakernels_cli, data_home, tmp_path):
    """One ``0:1`` entry in an a9a test file: the model reads it one-based like its training
    file (and says what it dropped); the old file-wide guess read the whole file zero-based
    and shifted every feature."""
    train_lines = (data_home / "a9a" / "a9a").read_text().splitlines(keepends=True)
    # 3,000 rows and the only one with feature 123, so that the model has all 123 features
    train = tmp_path / "a9a_train.svm"
    train.write_text("".join(train_lines[:3000] + [next(t for t in train_lines if " 123:" in t)]))
    test_lines = (data_home / "a9a" / "a9a.t").read_text().splitlines(keepends=True)[:2000]
    clean, stray = tmp_path / "a9a_test.svm", tmp_path / "a9a_stray.svm"
    clean.write_text("".join(test_lines))
    label, rest = test_lines[10].split(" ", 1)
    stray.write_text("".join(test_lines[:10] + [f"{label} 0:1 {rest}"] + test_lines[11:]))

    model = tmp_path / "a9a.pkl"
    res = cakernels_cli("fit", train, "-o", model)
    assert res.returncode == 0, res.stderr
    est, meta = _estimator(model)
    assert meta["index_base"] == 1 and meta["n_features"] == 123
    Xc, yc = load_svmlight(clean, n_features=123, zero_based=False)
    acc_clean = float(np.mean(est.predict(Xc) == yc))

    res = cakernels_cli("evaluate", model, stray)
    assert res.returncode == 0, res.stderr
    assert _lines(res.stderr) == [(
        f"cakernels: warning: {stray}: feature index 0 occurs in 1 of 2,000 rows, but the model "
        "was trained on a one-based file (features 1..123): that entry was dropped (if this "
        "file is zero-based, every feature is shifted by one for this model)")]
    assert _accuracy(res.stdout) == pytest.approx(acc_clean, abs=5e-5)
    # the old behaviour: index 0 anywhere made the whole file zero-based
    Xs, ys = load_svmlight(stray, n_features=123, zero_based="auto")
    acc_shifted = float(np.mean(est.predict(Xs) == ys))
    assert acc_shifted < acc_clean - 0.05, (acc_shifted, acc_clean)


def test_registry_data_records_the_index_base_of_its_files(data_home, monkeypatch):
    from cakernels._cli.common import _load_data

    monkeypatch.setenv("CAKERNELS_DATA", str(data_home))
    assert _load_data("cpusmall", split="train").index_base == 1  # the LIBSVM file
    assert _load_data("a9a:all", split="train").index_base == 1
    assert _load_data("pmlb_197_cpu_act", split="train").index_base is None  # a table


def test_output_never_replaces_a_registry_datasets_file(cakernels_cli, data_home, tmp_path):
    """-o naming the file a registry name reads (the name is no path, so only the
    loaded data know it): the model replaced the data set, whose checksum then failed."""
    import os
    import shutil

    home = tmp_path / "home"
    shutil.copytree(data_home / "bodyfat", home / "bodyfat")
    env = dict(os.environ, CAKERNELS_DATA=str(home))
    target = home / "bodyfat" / "bodyfat"
    before = target.read_bytes()
    res = cakernels_cli("fit", "bodyfat", "-p", "2", "-o", target, env=env)
    assert res.returncode == 2 and "it is the input" in res.stderr, res.stderr
    model = tmp_path / "m.skops"
    assert cakernels_cli("fit", "bodyfat", "-p", "2", "-o", model, env=env).returncode == 0
    res = cakernels_cli("predict", model, "bodyfat", "-o", target, env=env)
    assert res.returncode == 2 and "it is the input" in res.stderr, res.stderr
    assert target.read_bytes() == before


def test_a_task_override_that_cannot_hold_is_an_error_without_the_note(cakernels_cli,
                                                                       data_home, tmp_path):
    """``--task classification`` on space_ga (continuous targets): the override's note
    ("a classifier of 3,105 classes") was printed, then the error that contradicted it."""
    import os

    for argv in (["fit", "space_ga", "--task", "classification", "--method", "casvc"],
                 ["fit", "space_ga", "--task", "classification"],
                 ["search", "space_ga", "--task", "classification"],
                 ["search", "space_ga", "--task", "classification", "--method", "casvc"]):
        res = cakernels_cli(*argv, "-o", tmp_path / "m.skops",  # (CI's path is relative)
                            env=dict(os.environ, CAKERNELS_DATA=str(data_home)))
        assert res.returncode == 2
        lines = _lines(res.stderr)
        assert len(lines) == 1 and "cannot train a classifier" in lines[0], res.stderr
        assert "--method bkrr2" in lines[0]
