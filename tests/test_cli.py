"""The ``cakernels`` command line: in-process through ``main(argv)``, a few via ``python -m``."""

import functools
import os
import pickle
import warnings
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import (dump_svmlight_file, load_svmlight_file, make_classification,
                              make_regression)

from cakernels import BKRR2, __version__
from cakernels.__main__ import main


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def read_model(path):
    """A model file's payload, trusting exactly the types it names (test use only)."""
    import skops.io as sio

    return sio.load(path, trusted=sio.get_untrusted_types(file=path))


def assert_one_line_error(code, err, *needles):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cakernels: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(autouse=True)
def empty_data_home(monkeypatch, tmp_path):
    """Every test runs with an empty data home (and conftest's pooch that refuses to
    download; without pooch every test ran skipped, even under CI=true)."""
    monkeypatch.setenv("CAKERNELS_DATA", str(tmp_path / "empty"))


@pytest.fixture(scope="module")
def clf_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("clf")
    X, y = make_classification(n_samples=160, n_features=6, n_informative=4,
                               class_sep=2.0, random_state=0)
    y = np.where(y == 1, 1, -1)
    X[:, -1] = np.abs(X[:, -1]) + 0.5  # the last feature is non-zero in every training row
    dump_svmlight_file(X[:120], y[:120], str(d / "train.svm"), zero_based=False)
    dump_svmlight_file(X[120:], y[120:], str(d / "test.svm"), zero_based=False)
    # the same test rows without the last feature: the file ends at feature 5
    dump_svmlight_file(X[120:, :-1], y[120:], str(d / "short.svm"), zero_based=False)
    Xw = np.hstack([X[120:], np.ones((40, 2))])
    dump_svmlight_file(Xw, y[120:], str(d / "wide.svm"), zero_based=False)
    return d


@pytest.fixture(scope="module")
def reg_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("reg")
    X, y = make_regression(n_samples=160, n_features=4, noise=1.0, random_state=0)
    dump_svmlight_file(X[:120], y[:120], str(d / "train.svm"), zero_based=False)
    dump_svmlight_file(X[120:], y[120:], str(d / "test.svm"), zero_based=False)
    return d


# --------------------------------------------------------------------------- version / info


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"cakernels {__version__}"


def test_info(capsys, tmp_path):
    code, out, err = run(capsys, "info")
    assert code == 0 and err == ""
    for key in ("cakernels", "numpy", "scikit-learn", "OpenMP", "BLAS", "MPI", "data home"):
        assert key in out
    # skops, which fit/predict/evaluate need, with its version (it was not listed)
    from importlib.metadata import version

    assert f"skops{' ' * 10}{version('skops')}" in out.splitlines()
    home_line = next(line for line in out.splitlines() if line.startswith("data home"))
    assert str(tmp_path / "empty") in home_line and "does not exist" in home_line


def test_info_names_a_data_home_that_is_a_file(capsys, tmp_path, monkeypatch):
    home = tmp_path / "home_file"
    home.write_text("not a folder\n")
    monkeypatch.setenv("CAKERNELS_DATA", str(home))
    code, out, _ = run(capsys, "info")
    home_line = next(line for line in out.splitlines() if line.startswith("data home"))
    assert code == 0 and "a file, not a folder" in home_line


def test_usage_errors_are_one_line(capsys):
    # as every other error: one line on stderr, exit 2, pointing to --help
    for argv, needle in (((), "the following arguments are required: COMMAND"),
                         (("fit", "demo"), "required: -o/--output"),
                         (("fit", "demo", "-o", "m", "--method", "bkmscv"), "invalid choice"),
                         (("search", "demo", "-o", "m", "--gammas", "scal"), "--gammas"),
                         # (2**63 was SciPy's OverflowError: "Python int too large")
                         (("fit", "demo", "-o", "m", "--n-features=9223372036854775808"),
                          "--n-features: expected a positive integer up to 2**62"),
                         (("fit", "demo", "-o", "m", "--gama", "0.1"),
                          "cakernels fit: error: unrecognized arguments: --gama 0.1")):
        code, out, err = run(capsys, *argv)
        lines = err.strip().splitlines()
        assert code == 2 and out == "" and len(lines) == 1, err
        assert needle in lines[0] and lines[0].endswith("--help)"), lines[0]
    # an option of a command is pointed to that command's help, which lists its options
    assert lines[0].endswith("(see cakernels fit --help)")


# ------------------------------------------------------------------ fit, predict, evaluate


def test_classification_round_trip(capsys, tmp_path, clf_files):
    model = tmp_path / "clf.pkl"
    code, out, err = run(capsys, "fit", clf_files / "train.svm", "-o", model, "--method", "bkmsvc",
                         "-p", "2", "--C", "10", "--standardize")
    assert code == 0, err
    assert "BKMSVC" in out and "2 partitions" in out and "standardized" in out
    assert [p.name for p in tmp_path.iterdir()] == ["clf.pkl"]  # no temporary file left over

    payload = read_model(model)
    meta = payload["metadata"]
    assert payload["format"] == "cakernels-model"
    assert meta["method"] == "bkmsvc" and meta["n_features"] == 6
    assert meta["cakernels_version"] == __version__
    assert meta["standardization"] == {"scaler": "StandardScaler", "with_mean": False,
                                       "target_centred": False}

    code, out, _ = run(capsys, "predict", model, clf_files / "test.svm")
    assert code == 0
    pred = out.split()
    assert len(pred) == 40 and set(pred) <= {"1", "-1"}

    out_file = tmp_path / "pred.txt"
    assert run(capsys, "predict", model, clf_files / "test.svm", "-o", out_file)[0] == 0
    assert out_file.read_text().split() == pred

    code, out, _ = run(capsys, "evaluate", model, clf_files / "test.svm")
    assert code == 0
    acc = float(out.split("accuracy:")[1].split()[0])
    y_true = [line.split()[0] for line in (clf_files / "test.svm").read_text().splitlines()]
    assert acc == pytest.approx(np.mean([int(float(a)) == int(b) for a, b in zip(y_true, pred)]))
    assert acc > 0.7 and "predict:" in out


def test_regression_round_trip(capsys, tmp_path, reg_files):
    model = tmp_path / "reg.pkl"
    code, out, err = run(capsys, "fit", reg_files / "train.svm", "-o", model, "-p", "2",
                         "--sigma", "3", "--lam", "1e-6", "--standardize")
    assert code == 0, err
    assert "BKRR2 (default for regression" in out  # continuous targets
    code, out, _ = run(capsys, "predict", model, reg_files / "test.svm")
    assert code == 0
    pred = np.array(out.split(), dtype=float)
    assert pred.shape == (40,)
    code, out, _ = run(capsys, "evaluate", model, reg_files / "test.svm")
    assert code == 0 and "MSE:" in out and "R^2:" in out
    assert float(out.split("R^2:")[1].split()[0]) > 0.5


def test_standardize_centres_a_regression_target(capsys, tmp_path):
    # the kernel ridge estimators fit no intercept (as KernelRidge): a model predicts 0
    # away from its training rows, so targets far from 0 (bodyfat's: mean 19, std 8) gave
    # R^2 near 0 or below, with --standardize too; it now centres the target as well
    X, y = make_regression(n_samples=400, n_features=4, noise=1.0, random_state=1)
    y = y / y.std() + 50.0
    for name, rows in (("train", slice(0, 300)), ("test", slice(300, None))):
        dump_svmlight_file(X[rows], y[rows], str(tmp_path / f"{name}.svm"), zero_based=False)
    model = tmp_path / "m.skops"
    code, out, err = run(capsys, "fit", tmp_path / "train.svm", "-o", model, "-p", "2",
                         "--standardize")
    assert code == 0, err
    assert "(2 partitions, standardized, target centred)" in out
    code, out, err = run(capsys, "evaluate", model, tmp_path / "test.svm")
    assert code == 0, err
    assert "standardized, target centred" in out
    assert float(out.split("R^2:")[1].split()[0]) > 0.8
    saved = read_model(model)
    assert saved["metadata"]["standardization"]["target_centred"] is True
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    ref = make_pipeline(StandardScaler(), BKRR2(n_partitions=2, random_state=0)).fit(
        X[:300], y[:300] - y[:300].mean())
    np.testing.assert_allclose(saved["estimator"].predict(X[300:]),
                               ref.predict(X[300:]) + y[:300].mean(), rtol=1e-12)
    # a classifier's labels are left alone
    code, out, err = run(capsys, "fit", "demo", "-o", tmp_path / "c.skops", "--method",
                         "cpsvc", "-p", "2", "--standardize")
    assert code == 0 and "standardized)" in out and "target" not in out, out
    assert read_model(tmp_path / "c.skops")["metadata"]["standardization"][
        "target_centred"] is False


@pytest.mark.parametrize("method, opts", [("svc", ["--C", "2"]), ("krr", ["--sigma", "3"])])
def test_scikit_learn_baselines(capsys, tmp_path, clf_files, reg_files, method, opts):
    files = clf_files if method == "svc" else reg_files
    model = tmp_path / "m.pkl"
    code, out, err = run(capsys, "fit", files / "train.svm", "-o", model, "--method", method, *opts)
    assert code == 0, err
    assert ("SVC" if method == "svc" else "KernelRidge") in out
    assert run(capsys, "evaluate", model, files / "test.svm")[0] == 0


@pytest.mark.parametrize("method, display, opts", [
    ("cascadesvc", "CascadeSVC", ["-p", "4"]), ("dcsvc", "DCSVC", ["-p", "4"]),
    ("dcfiltersvc", "DCFilterSVC", ["-p", "4"]), ("dissmosvc", "DisSMOSVC", [])])
def test_multilevel_and_dissmo_methods(capsys, tmp_path, clf_files, method, display, opts):
    """The chapter-2 methods train from the command line, and their predictions are the
    estimator's own."""
    from cakernels import svm

    model = tmp_path / "m.pkl"
    code, out, err = run(capsys, "fit", clf_files / "train.svm", "-o", model, "--method",
                         method, "--C", "4", *opts)
    assert code == 0, err
    assert out.startswith(f"{display}: fitted") and ("4 partitions" in out) == bool(opts)
    code, out, _ = run(capsys, "predict", model, clf_files / "test.svm")
    assert code == 0
    est = read_model(model)["estimator"]
    assert isinstance(est, getattr(svm, display)) and est.C == 4
    X, _ = load_svmlight_file(str(clf_files / "test.svm"), n_features=est.n_features_in_)
    assert out.split() == [str(int(v)) for v in est.predict(X)]


def test_dissmo_takes_no_partitions(capsys, tmp_path, clf_files):
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", tmp_path / "m.pkl",
                       "--method", "dissmosvc", "-p", "4")
    assert_one_line_error(code, err, "--n-partitions does not apply", "dissmosvc")


def test_bench_defaults_leave_out_the_slow_chapter_2_methods():
    from cakernels._cli.registry import BENCH_DEFAULTS, METHODS

    assert {"cascadesvc", "dcsvc", "dcfiltersvc", "dissmosvc"} <= set(METHODS)
    assert BENCH_DEFAULTS["classification"] == ("casvc", "fcfssvc", "bkmsvc", "cpsvc", "svc")


def test_krr_baseline_matches_bkrr2_with_one_partition(capsys, tmp_path, reg_files):
    outs = []
    for method, extra in (("krr", []), ("bkrr2", ["-p", "1"])):
        model = tmp_path / f"{method}.pkl"
        args = ["fit", reg_files / "train.svm", "-o", model, "--method", method,
                "--sigma", "2", "--lam", "1e-3", *extra]
        assert run(capsys, *args)[0] == 0
        code, out, _ = run(capsys, "predict", model, reg_files / "test.svm")
        outs.append(np.array(out.split(), dtype=float))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6, atol=1e-8)


def test_predict_pads_a_file_with_fewer_features(capsys, tmp_path, clf_files):
    model = tmp_path / "m.pkl"
    assert run(capsys, "fit", clf_files / "train.svm", "-o", model, "-p", "2")[0] == 0
    # the short file lacks the last feature: padded with zeros, same as explicit zeros
    code, short, _ = run(capsys, "predict", model, clf_files / "short.svm")
    assert code == 0 and len(short.split()) == 40
    full = [line.split() for line in (clf_files / "test.svm").read_text().splitlines()]
    zeroed = tmp_path / "zeroed.svm"
    zeroed.write_text("".join(" ".join(t for t in row if not t.startswith("6:")) + " 6:0\n"
                              for row in full))
    code, explicit, _ = run(capsys, "predict", model, zeroed)
    assert code == 0 and short == explicit


# --------------------------------------------------------------------------- errors


def test_error_more_features_than_the_model(capsys, tmp_path, clf_files):
    model = tmp_path / "m.pkl"
    assert run(capsys, "fit", clf_files / "train.svm", "-o", model, "-p", "2")[0] == 0
    code, out, err = run(capsys, "predict", model, clf_files / "wide.svm")
    assert_one_line_error(code, err, "8 features", "trained on 6", "fit ... --n-features 8",
                          "search ... --n-features 8")
    assert out == ""
    # the advice works: room for the test file's features at fit (fit and search)
    for command, extra in (("fit", ()), ("search", ("--Cs", "1", "-q", "--cv", "2"))):
        wide_model = tmp_path / f"wide_{command}.skops"
        code, _, err = run(capsys, command, clf_files / "train.svm", "-o", wide_model, "-p", "2",
                           "--n-features", "8", *extra)
        assert code == 0, err
        code, out, err = run(capsys, "predict", wide_model, clf_files / "wide.svm")
        assert code == 0 and len(out.split()) == 40, err
    # the model's feature count, and the narrower test file is padded as before
    assert read_model(tmp_path / "wide_fit.skops")["metadata"]["n_features"] == 8
    code, out, err = run(capsys, "predict", tmp_path / "wide_fit.skops", clf_files / "test.svm")
    assert code == 0 and len(out.split()) == 40, err
    code, _, err = run(capsys, "fit", clf_files / "wide.svm", "-o", model, "--n-features", "6")
    assert_one_line_error(code, err, "more than n_features=6")
    code, _, err = run(capsys, "fit", "demo", "-o", model, "--n-features", "6")
    assert_one_line_error(code, err, "--n-features applies to LIBSVM files")


def test_errors_are_one_line(capsys, tmp_path, clf_files, reg_files):
    model = tmp_path / "m.pkl"
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:0.5 2:oops\n-1 3:x\n")
    not_model = tmp_path / "not_a_model.pkl"
    not_model.write_text("hello\n")
    csv = tmp_path / "table.csv"
    csv.write_text("1.0,2.5,0\n0.5,1.0,1\n")
    table = tmp_path / "table.txt"
    table.write_text("# x1 x2 y\n\n1.0 2.5 0\n0.5 1.0 1\n")
    commented = tmp_path / "commented.svm"  # a LIBSVM file with a comment and a bad value
    commented.write_text("# my data\n1 1:0.5 2:1.0\n-1 1:0.25 2:oops\n")
    other_pickle = tmp_path / "other.pkl"
    other_pickle.write_bytes(pickle.dumps({"some": "dict"}))
    missing = tmp_path / "missing.svm"

    cases = [
        (["fit", missing, "-o", model], ["no such file", "missing.svm"]),
        (["fit", bad, "-o", model], ["bad.svm"]),
        (["fit", "ijcnn", "-o", model], ["unknown dataset", "ijcnn1"]),
        (["predict", not_model, clf_files / "test.svm"],
         ["not a cakernels model", "the model comes first"]),
        (["evaluate", clf_files / "test.svm", model], ["not a cakernels model",
                                                      "predict|evaluate MODEL DATA"]),
        (["fit", csv, "-o", model], ["looks like a CSV table", "dump_svmlight_file"]),
        (["fit", table, "-o", model], ["looks like a table of numbers"]),
        (["fit", commented, "-o", model], ["could not load it as a LIBSVM"]),
        (["evaluate", other_pickle, clf_files / "test.svm"], ["is a pickle", "--trust-pickle"]),
        (["evaluate", other_pickle, clf_files / "test.svm", "--trust-pickle"],
         ["not a cakernels model"]),
        (["predict", missing, clf_files / "test.svm"], ["no such model file"]),
        (["fit", clf_files / "train.svm", "-o", model, "--C", "-1"], ["'C' parameter", "CASVC"]),
        (["fit", clf_files / "train.svm", "-o", model, "-p", "0"], ["n_partitions"]),
        (["fit", reg_files / "train.svm", "-o", model, "--method", "krr", "--sigma", "0"],
         ["--sigma must be > 0"]),
        (["fit", reg_files / "train.svm", "-o", model, "--method", "dckrr", "--C", "3"],
         ["--C applies to SVM methods"]),
        (["fit", clf_files / "train.svm", "-o", model, "--method", "svc", "-p", "4"],
         ["--n-partitions does not apply"]),
        (["fit", clf_files / "train.svm", "-o", tmp_path / "no" / "dir" / "m.pkl"],
         ["does not exist"]),
        (["bench", "demo", "--methods", "casvc", "dckrr"], ["dckrr is for regression"]),
        (["bench", "demo", "--methods", "nope"], ["unknown method 'nope'"]),
    ]
    words = tmp_path / "words.svm"  # words, not numbers: not called a table either
    words.write_text("garbage line here\n1 1:0.5\n")
    tsv = tmp_path / "table.tsv"  # a tab-separated table with a header of names
    tsv.write_text("x1\tx2\ty\n1.0\t2.5\t0\n")
    cases += [(["fit", words, "-o", model], ["could not load it as a LIBSVM"]),
              (["fit", tsv, "-o", model], ["looks like a tab-separated table"])]
    for argv, needles in cases:
        code, out, err = run(capsys, *argv)
        assert_one_line_error(code, err, *needles)
        if argv[1] in (commented, words):  # a LIBSVM file with bad values is not a table
            assert "table" not in err
    # an error found by the fit itself follows the note on the task inferred from the file
    code, out, err = run(capsys, "fit", clf_files / "train.svm", "-o", model, "-p", "500")
    note, error = err.strip().splitlines()
    assert note.startswith("cakernels: note: ") and "classification inferred" in note
    assert_one_line_error(code, error, "n_partitions=500")
    assert not model.exists()


def test_offline_download_of_a_named_dataset_fails_cleanly(capsys, tmp_path):
    code, _, err = run(capsys, "fit", "ijcnn1", "-o", tmp_path / "m.pkl")
    assert_one_line_error(code, err, "could not download", "CAKERNELS_DATA")


def test_debug_shows_the_traceback(capsys, tmp_path):
    code, _, err = run(capsys, "--debug", "fit", tmp_path / "missing.svm", "-o", tmp_path / "m")
    assert code == 2 and "Traceback" in err and "cakernels: error: no such file" in err


def test_ctrl_c_exits_130_quietly(capsys, monkeypatch):
    import cakernels._info

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cakernels._info, "build_info", interrupted)
    code, out, err = run(capsys, "info")
    assert code == 130 and out == "" and err == ""


# --------------------------------------------------------------------------- bench


def test_bench_falls_back_to_the_demo_offline(capsys):
    code, out, err = run(capsys, "bench", "-p", "2")
    assert code == 0, err
    (note,) = err.splitlines()  # a note on stderr, as every other
    assert note.startswith("cakernels: note: ijcnn1 is not in the data home")
    assert "CAKERNELS_DATA" in note and "breast cancer" in note
    assert out.startswith("dataset:    ")
    table = out.split("-----------")[-1]
    for name in ("CASVC", "FCFSSVC", "BKMSVC", "CPSVC", "SVC"):
        row = next(line for line in table.splitlines() if line.split()[:1] == [name])
        acc = float(row.split()[4])
        assert 0.8 < acc <= 1.0
    assert "1.00x" in out  # the baseline's own speedup


def test_bench_demo_forced_with_chosen_methods(capsys):
    code, out, err = run(capsys, "bench", "--demo", "--methods", "cpsvc,svc", "-p", "2",
                         "--max-train", "150", "--max-test", "50")
    assert code == 0, err
    assert "ijcnn1" not in out and "150 train / 50 test" in out
    rows = [line.split()[0] for line in out.split("-----------")[-1].splitlines() if line.strip()]
    assert rows == ["SVC", "CPSVC"]
    assert "parameters: C=1 gamma=scale tol=0.001 kernel=rbf; 2 partitions" in out
    # the parameters line says the tolerance the fits used
    code, out, err = run(capsys, "bench", "--demo", "--methods", "cpsvc", "-p", "2",
                         "--max-train", "150", "--max-test", "50", "--tol", "0.25", "--C", "3")
    assert code == 0, err
    assert "parameters: C=3 gamma=scale tol=0.25 kernel=rbf; 2 partitions" in out
    # and the options that change the models (--halo, --routing, ...) when given
    code, out, err = run(capsys, "bench", "--demo", "--methods", "cpsvc", "-p", "2",
                         "--max-train", "150", "--max-test", "50", "--halo", "0.5",
                         "--routing", "vote", "--n-voters", "2")
    assert code == 0, err
    assert ("parameters: C=1 gamma=scale tol=0.001 halo=0.5 routing=vote n_voters=2 "
            "kernel=rbf; 2 partitions") in out


def test_bench_regression_demo(capsys):
    code, out, err = run(capsys, "bench", "demo_regression", "-p", "2")
    assert code == 0, err
    for name in ("DCKRR", "KKRR", "KKRR2", "BKRR", "BKRR2", "BKRR3", "KKRR3", "KernelRidge"):
        assert f"\n{name} " in out
    assert "test MSE" in out and "oracle bound" in out


def test_bench_centres_a_regression_target(capsys, tmp_path):
    # kernel ridge (every method of the table, KernelRidge too) fits no intercept:
    # targets far from 0 pulled every model to 0 away from its rows (MSEs in the
    # thousands here); the table's MSE stays in the target's units
    X, y = make_regression(n_samples=500, n_features=4, noise=1.0, random_state=2)
    y = y / y.std() + 50.0
    path = tmp_path / "reg.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    code, out, err = run(capsys, "bench", path, "--methods", "krr", "bkrr2", "-p", "2")
    assert code == 0, err
    assert "X standardized, y centred by the training mean" in out
    mses = {line.split()[0]: float(line.split()[4]) for line in out.splitlines()
            if line.startswith(("KernelRidge ", "BKRR2 "))}
    assert set(mses) == {"KernelRidge", "BKRR2"} and max(mses.values()) < 0.5, out


def test_bench_skips_kernel_ridge_over_the_memory_budget(capsys, monkeypatch):
    import cakernels._cli.bench

    monkeypatch.setattr(cakernels._cli.bench, "KRR_MEMORY_BUDGET", 1000)
    code, out, err = run(capsys, "bench", "demo_regression", "--methods", "dckrr", "krr", "-p", "2")
    assert code == 0, err
    assert "KernelRidge skipped" in out and "\nDCKRR " in out and "\nKernelRidge " not in out


def test_bench_skips_kernel_ridge_beyond_the_available_memory(capsys, monkeypatch):
    # one copy of the kernel within the budget, three beyond the machine: the system
    # killed bench without a message (32,614 rows on 23 GB)
    from cakernels import _memory

    monkeypatch.setattr(_memory, "available_bytes", lambda: 1_000_000.0)
    code, out, err = run(capsys, "bench", "demo_regression", "--methods", "dckrr", "krr", "-p", "2")
    assert code == 0, err
    assert "KernelRidge skipped: it needs about" in out and "3 copies" in out, out
    assert "\nDCKRR " in out and "\nKernelRidge " not in out


def test_registry_style_names_for_the_demo(capsys, tmp_path):
    model = tmp_path / "demo.pkl"
    assert run(capsys, "fit", "demo", "-o", model, "--method", "cpsvc", "-p", "2",
               "--standardize")[0] == 0
    code, out, _ = run(capsys, "evaluate", model, "demo")
    assert code == 0 and float(out.split("accuracy:")[1].split()[0]) > 0.9


def test_a_model_standardized_on_dense_data_predicts_a_libsvm_file(capsys, tmp_path):
    # the scaler centres (fitted on the dense demo table) and refused the sparse
    # rows of a LIBSVM file: "Cannot center sparse matrices"
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    path = tmp_path / "bc.svm"
    y = 2 * y - 1  # the demo's classes: -1, +1
    dump_svmlight_file(X[:100], y[:100], str(path), zero_based=False)
    model = tmp_path / "demo.skops"
    assert run(capsys, "fit", "demo", "-o", model, "--method", "cpsvc", "-p", "2",
               "--standardize")[0] == 0
    code, out, err = run(capsys, "evaluate", model, path)
    assert code == 0, err
    on_file = float(out.split("accuracy:")[1].split()[0])
    code, out, err = run(capsys, "predict", model, path)
    assert code == 0, err
    pred = np.array(out.split(), dtype=float)
    expected = read_model(model)["estimator"].predict(X[:100])
    np.testing.assert_array_equal(pred, expected)
    assert on_file == pytest.approx(np.mean(expected == y[:100]), abs=1e-4)
    # where the available memory is not known (no MemAvailable in /proc/meminfo), the
    # memory check of the dense copy failed: "TypeError: unsupported operand type(s)"
    from cakernels import _memory

    monkeypatch = pytest.MonkeyPatch()
    with monkeypatch.context() as patch:
        patch.setattr(_memory, "available_bytes", lambda: None)
        code, out, err = run(capsys, "predict", model, path)
    assert code == 0, err
    np.testing.assert_array_equal(np.array(out.split(), dtype=float), expected)


@pytest.mark.parametrize("flag", [["--n-jobs", "2"], ["--backend", "threads"], ["-v"]])
@pytest.mark.parametrize("method", ["svc", "krr"])
def test_options_a_baseline_ignores_are_refused(capsys, tmp_path, clf_files, reg_files,
                                                method, flag):
    files = clf_files if method == "svc" else reg_files
    code, _, err = run(capsys, "fit", files / "train.svm", "-o", tmp_path / "m.skops",
                       "--method", method, *flag)
    assert_one_line_error(code, err, "does not apply to --method " + method,
                          "scikit-learn's baseline")


def test_bench_on_a_libsvm_file(capsys, clf_files):
    code, out, err = run(capsys, "bench", clf_files / "train.svm", "--methods", "casvc", "svc",
                         "-p", "2")
    assert code == 0, err
    assert "96 train / 24 test" in out


def test_bench_help_mentions_the_openblas_workaround(capsys):
    code, out, _ = run(capsys, "bench", "--help")
    assert code == 0 and "OPENBLAS_CORETYPE=Haswell" in out and "16,000" in out


# --------------------------------------------------------------------------- python -m cakernels


def _module_run(tmp_path, *args):
    """``python -m cakernels ARGS`` run outside the source tree, on the package under test."""
    import os
    from pathlib import Path

    import cakernels

    env = dict(os.environ, PYTHONPATH=str(Path(cakernels.__file__).resolve().parent.parent))
    return subprocess.run([sys.executable, "-m", "cakernels", *args], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path, env=env)


def test_module_entry_point(tmp_path):
    res = _module_run(tmp_path, "--version")
    assert res.returncode == 0 and res.stdout.strip() == f"cakernels {__version__}"


def test_module_entry_point_error(tmp_path):
    res = _module_run(tmp_path, "evaluate", str(tmp_path / "m.pkl"), "demo")
    assert res.returncode == 2 and res.stdout == ""
    expected = f"cakernels: error: no such model file: {tmp_path / 'm.pkl'}"
    assert res.stderr.strip().splitlines() == [expected]


# ----------------------------------------------- data as users mean it (the real executable)

# cpusmall's targets: 56 whole numbers, 0, 1, 2 and most of 46..99 (not a range of class codes)
CPU_LIKE = np.r_[0, 1, 2, np.setdiff1d(np.arange(46, 100), [47])]


def lines(text):
    return text.strip().splitlines()


def metadata(model):
    return read_model(model)


def relabel(src, dst, new_label):
    """Copy a LIBSVM file with its labels replaced by ``new_label(i, label)``."""
    out = []
    for i, line in enumerate(src.read_text().splitlines()):
        label, rest = line.split(" ", 1)
        out.append(f"{new_label(i, label)} {rest}\n")
    dst.write_text("".join(out))
    return dst


def with_stray_index_0(src, dst, row):
    """Copy a one-based LIBSVM file with an extra ``0:1`` entry in one row."""
    text = src.read_text().splitlines(keepends=True)
    label, rest = text[row].split(" ", 1)
    text[row] = f"{label} 0:1 {rest}"
    dst.write_text("".join(text))
    return dst


@pytest.fixture(scope="module")
def whole_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("whole")
    rng = np.random.RandomState(0)
    X = rng.randn(224, 4)
    y = rng.permutation(np.resize(CPU_LIKE, 224)).astype(float)
    dump_svmlight_file(X, y, str(d / "cpu_like.svm"), zero_based=False)
    return d


@pytest.mark.parametrize("values, n, task, reason", [
    (CPU_LIKE, 8192, "regression",  # cpusmall
     "its targets take 56 distinct values (whole numbers, not a contiguous range of class codes)"),
    (np.arange(15000, 500001, 125), 20640, "regression", "3,881 distinct values (whole numbers"),
    (np.setdiff1d(np.arange(1, 30), [28]), 4177, "regression",  # abalone rings, as LIBSVM lists it
     "its targets take 28 distinct values (whole numbers, not a contiguous range"),
    (np.arange(1, 27), 15000, "classification", "26 distinct values, the class codes 1..26"),  # letter
    (np.arange(1, 1001), 108000, "classification", "the class codes 1..1000"),  # aloi
    (np.arange(0, 10), 60000, "classification", "10 distinct values (0, 1, 2, 3, 4, 5, ...)"),
    (np.array([1, 2, 3, 5, 6, 7]), 214, "classification", "6 distinct values (1, 2, 3, 5, 6, 7)"),
    (np.array([-1, 1]), 100, "classification", "its targets take 2 distinct values (-1, 1)"),
    (np.array([0, 1]), 100, "classification", "2 distinct values (0, 1)"),
    (np.arange(1922, 2012), 5000, "regression",  # years: a range class codes do not take
     "90 distinct values (whole numbers, the range 1922..2011, which class codes do not take)"),
    (np.arange(1, 41), 60, "regression", "too many for class codes of 60 samples"),
    (np.array([0.5, 1.5]), 100, "regression", "2 distinct values, not all whole numbers"),
    (np.linspace(0, 1, 300), 300, "regression", "300 distinct values, not all whole numbers"),
])
def test_infer_task(values, n, task, reason):
    from cakernels._cli.common import _infer_task

    y = np.random.RandomState(0).permutation(np.resize(values, n)).astype(float)
    got_task, got_reason = _infer_task(y)
    assert got_task == task and reason in got_reason, got_reason


def test_fit_infers_regression_for_many_whole_number_targets(cakernels_cli, tmp_path,
                                                             whole_files):
    data, model = whole_files / "cpu_like.svm", tmp_path / "m.pkl"
    res = cakernels_cli("fit", data, "-o", model, "-p", "2")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("BKRR2 (default for regression; choose with --method)")
    assert lines(res.stderr) == [(
        f"cakernels: note: {data}: regression inferred: its targets take 56 distinct values "
        "(whole numbers, not a contiguous range of class codes); use --task classification (or "
        "an SVM --method) to train a classifier")]
    assert metadata(model)["metadata"]["task"] == "regression"
    # --task overrides the inference (and says nothing)
    res = cakernels_cli("fit", data, "-o", model, "-p", "2", "--task", "classification")
    assert res.returncode == 0 and res.stderr == ""
    assert res.stdout.startswith("CASVC (default for classification")
    assert metadata(model)["metadata"]["classes"] == CPU_LIKE.tolist()


def test_kernel_ridge_options_choose_kernel_ridge(cakernels_cli, tmp_path, clf_files, reg_files):
    from cakernels import BKRR2
    from cakernels.datasets import load_svmlight

    train, model = clf_files / "train.svm", tmp_path / "m.pkl"
    res = cakernels_cli("fit", train, "-o", model, "-p", "2", "--sigma", "2", "--lam", "1e-3")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("BKRR2 (default for regression")
    assert lines(res.stderr) == [(
        f"cakernels: note: {train}: --sigma/--lam choose kernel ridge regression (bkrr2), although "
        "classification was inferred: its targets take 2 distinct values (-1, 1)")]
    est = metadata(model)["estimator"]
    X, y = load_svmlight(train)
    Xt, _ = load_svmlight(clf_files / "test.svm", n_features=6)
    ref = BKRR2(n_partitions=2, sigma=2.0, lam=1e-3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.predict(Xt), ref.predict(Xt))
    # SVM options on continuous targets: one clear error, not scikit-learn's "Unknown label type"
    res = cakernels_cli("fit", reg_files / "train.svm", "-o", tmp_path / "svm.pkl", "--C", "2")
    assert_one_line_error(res.returncode, res.stderr, "cannot train a classifier (chosen by --C)",
                          "targets are continuous (120 distinct values, not all whole numbers)",
                          "--method bkrr2")
    assert not (tmp_path / "svm.pkl").exists()


def test_option_and_task_errors(capsys, tmp_path, clf_files, reg_files):
    model = tmp_path / "m.pkl"
    cases = [
        (["fit", clf_files / "train.svm", "-o", model, "--C", "2", "--sigma", "1"],
         ["--C (SVM) and --sigma (kernel ridge) cannot be combined"]),
        (["fit", reg_files / "train.svm", "-o", model, "--method", "casvc"],
         ["cannot train a classifier (--method casvc)", "continuous"]),
        (["fit", reg_files / "train.svm", "-o", model, "--task", "classification"],
         ["cannot train a classifier (--task classification)", "continuous"]),
        (["fit", reg_files / "train.svm", "-o", model, "--task", "regression", "--method", "cpsvc"],
         ["--method cpsvc is for classification, but --task regression was given"]),
        (["fit", clf_files / "train.svm", "-o", model, "--task", "classification", "--lam", "1"],
         ["--lam applies to kernel ridge methods"]),
        # a dataset whose task is known keeps it: options of the other kind are an error
        (["fit", "demo", "-o", model, "--sigma", "2"], ["--sigma applies to kernel ridge methods"]),
        (["bench", reg_files / "train.svm", "--methods", "casvc"],
         ["cannot train a classifier (--methods casvc)", "--methods bkrr2"]),
        (["bench", reg_files / "train.svm", "--gamma", "2"], ["(chosen by --gamma)"]),
        (["bench", "demo", "--C", "1", "--lam", "1"], ["cannot be combined"]),
    ]
    for argv, needles in cases:
        code, _, err = run(capsys, *argv)
        assert_one_line_error(code, err, *needles)
        assert "Unknown label type" not in err
    assert not model.exists()


def test_evaluate_refuses_labels_the_model_never_saw(cakernels_cli, tmp_path, clf_files,
                                                    reg_files):
    from cakernels.datasets import load_svmlight

    model, test = tmp_path / "m.pkl", clf_files / "test.svm"
    assert cakernels_cli("fit", clf_files / "train.svm", "-o", model, "-p", "2").returncode == 0
    est = metadata(model)["estimator"]
    assert metadata(model)["metadata"]["classes"] == [-1.0, 1.0]
    Xt, yt = load_svmlight(test, n_features=6)
    pred = est.predict(Xt)

    # a regression file: no label is a class of the model
    res = cakernels_cli("evaluate", model, reg_files / "test.svm")
    assert_one_line_error(res.returncode, res.stderr, "none of its labels (40 distinct values: ",
                          "is a class of the model (-1, 1)", "every sample would count as wrong")
    assert res.stdout == ""
    # the same samples with the labels coded 0/1: label 1 is shared, but 0 was never seen
    zero_one = relabel(test, tmp_path / "01.svm", lambda i, lab: "0" if lab == "-1" else "1")
    n_zero = int(np.sum(yt == -1))
    res = cakernels_cli("evaluate", model, zero_one)
    assert_one_line_error(res.returncode, res.stderr,
                          "its labels (0, 1) are not the classes of the model (-1, 1): "
                          f"{n_zero} of 40 samples have labels it never saw (0)", "0/1 for -1/+1")
    # a regression file one of whose targets happens to be a class: most labels unseen
    mostly = relabel(reg_files / "test.svm", tmp_path / "mostly.svm",
                     lambda i, lab: "1" if i < 2 else lab)
    res = cakernels_cli("evaluate", model, mostly)
    assert_one_line_error(res.returncode, res.stderr, "most of its labels are not classes of "
                          "the model (-1, 1): 38 of 40 samples have labels it never saw")
    assert res.stdout == ""
    # a few unseen labels: a warning with the counts; they count as errors
    some = relabel(test, tmp_path / "some.svm", lambda i, lab: "7" if i < 3 else lab)
    res = cakernels_cli("evaluate", model, some)
    assert res.returncode == 0
    assert lines(res.stderr) == [(
        f"cakernels: warning: {some}: 3 of 40 samples have labels the model never saw (7; its "
        "classes: -1, 1): they count as errors in the accuracy")]
    y_some = np.where(np.arange(40) < 3, 7, yt)
    acc = float(res.stdout.split("accuracy:")[1].split()[0])
    assert acc == pytest.approx(np.mean(pred == y_some), abs=5e-5)
    # predict ignores the labels: the same predictions, and a warning
    res = cakernels_cli("predict", model, zero_one)
    assert res.returncode == 0
    assert res.stdout.split() == [str(int(p)) for p in pred]
    (warning,) = lines(res.stderr)
    assert warning.startswith(f"cakernels: warning: {zero_one}: its labels (0, 1) are not the "
                              "classes of the model (-1, 1)")
    assert "predict ignores the labels" in warning


def test_a_stray_index_0_is_dropped_for_a_one_based_model(cakernels_cli, capsys, tmp_path,
                                                          clf_files):
    from cakernels.datasets import load_svmlight

    model = tmp_path / "m.pkl"
    assert cakernels_cli("fit", clf_files / "train.svm", "-o", model, "-p", "2").returncode == 0
    payload = metadata(model)
    assert payload["format_version"] == 3 and payload["metadata"]["index_base"] == 1
    est = payload["estimator"]
    # short.svm ends at feature 5: read zero-based (as one 0: entry used to make it), every
    # feature moves one column up and still fits the model's 6 features
    short = clf_files / "short.svm"
    stray = with_stray_index_0(short, tmp_path / "stray.svm", row=4)
    clean_X, y = load_svmlight(short, n_features=6, zero_based=False)
    shifted_X, _ = load_svmlight(stray, n_features=6, zero_based="auto")
    clean, shifted = est.predict(clean_X), est.predict(shifted_X)
    assert np.any(clean != shifted)  # what a file-wide guess does to every row

    res = cakernels_cli("evaluate", model, stray)
    assert res.returncode == 0, res.stderr
    assert lines(res.stderr) == [(
        f"cakernels: warning: {stray}: feature index 0 occurs in 1 of 40 rows, but the model was "
        "trained on a one-based file (features 1..6): that entry was dropped (if this file is "
        "zero-based, every feature is shifted by one for this model)")]
    acc = float(res.stdout.split("accuracy:")[1].split()[0])
    assert acc == pytest.approx(np.mean(clean == y), abs=5e-5)

    # a model file without index_base (format 1, before it was recorded) decides per file
    payload["format_version"] = 1
    del payload["metadata"]["index_base"]
    old = tmp_path / "old.pkl"
    old.write_bytes(pickle.dumps(payload))
    code, out, err = run(capsys, "predict", old, stray, "--trust-pickle")
    assert code == 0 and "index 0" not in err
    assert out.split() == [str(int(p)) for p in shifted]


def test_a_zero_based_training_file(cakernels_cli, capsys, tmp_path, clf_files):
    from cakernels.datasets import load_svmlight

    X, y = load_svmlight(clf_files / "train.svm")
    Xt, yt = load_svmlight(clf_files / "test.svm", n_features=6)
    train0, test0 = tmp_path / "train0.svm", tmp_path / "test0.svm"
    dump_svmlight_file(X, y, str(train0), zero_based=True)
    dump_svmlight_file(Xt, yt, str(test0), zero_based=True)
    model = tmp_path / "m.pkl"
    res = cakernels_cli("fit", train0, "-o", model, "-p", "2")
    assert res.returncode == 0, res.stderr
    rows = int(np.sum(X[:, 0].toarray() != 0))
    assert lines(res.stderr)[1] == (
        f"cakernels: note: {train0}: read zero-based (feature indices from 0): index 0 occurs in "
        f"{rows} of 120 rows; the model reads prediction files zero-based too (if the file is "
        "one-based, as LIBSVM files are, remove its 0: entries: they shift every feature by one)")
    assert metadata(model)["metadata"]["index_base"] == 0
    # a one-based file for this model: it uses index 6 and never 0
    res = cakernels_cli("evaluate", model, clf_files / "test.svm")
    assert_one_line_error(res.returncode, res.stderr, "uses feature index 6 but never index 0",
                          "looks one-based", "zero-based file (features 0..5)")
    # the zero-based test file is read as the training file was
    code, out, err = run(capsys, "predict", model, test0)
    assert code == 0 and err == ""
    assert out.split() == [str(int(p)) for p in metadata(model)["estimator"].predict(Xt)]


def test_a_file_cut_off_mid_way_warns(cakernels_cli, tmp_path, clf_files):
    full = (clf_files / "train.svm").read_text().splitlines(keepends=True)
    partial = " ".join(full[50].split()[:3])  # a row cut after its second feature
    cut = tmp_path / "cut.svm"
    cut.write_text("".join(full[:50]) + partial)
    res = cakernels_cli("fit", cut, "-o", tmp_path / "m.pkl", "-p", "2")
    assert res.returncode == 0, res.stderr
    assert (f"cakernels: warning: {cut}: the last line has no newline at its end, so the file "
            "may be cut off (read 51 rows; the last one may be incomplete) (UserWarning)"
            in lines(res.stderr))
    assert metadata(tmp_path / "m.pkl")["metadata"]["n_samples"] == 51


def test_bench_on_a_file_says_what_it_inferred(cakernels_cli, clf_files, whole_files):
    data = whole_files / "cpu_like.svm"
    res = cakernels_cli("bench", data, "-p", "2", "--methods", "bkrr2", "krr", "--max-test", "20")
    assert res.returncode == 0, res.stderr
    assert "regression" in res.stdout and "\nBKRR2 " in res.stdout
    # --methods choose the task: no inference to report
    assert "note" not in res.stderr
    res = cakernels_cli("bench", data, "-p", "2", "--max-test", "20")
    assert res.returncode == 0, res.stderr
    assert (f"cakernels: note: {data}: regression inferred: its targets take 56 distinct values "
            "(whole numbers, not a contiguous range of class codes); use --task classification "
            "(or SVM --methods) to compare classifiers") in lines(res.stderr)
    assert "\nDCKRR " in res.stdout and "\nKernelRidge " in res.stdout
    res = cakernels_cli("bench", clf_files / "train.svm", "-p", "2", "--task", "regression")
    assert res.returncode == 0, res.stderr
    assert "6 features, regression" in res.stdout and "note" not in res.stderr


# --------------------------------------------------------------------------- untrusted files


def test_a_pickle_that_runs_code_is_refused(capsys, tmp_path, clf_files):
    """A model file that would run code when unpickled is refused before anything in it
    runs; --trust-pickle is needed to unpickle at all."""
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    bad = tmp_path / "evil.model"
    bad.write_bytes(pickle.dumps({"format": "cakernels-model", "format_version": 2,
                                  "metadata": {}, "estimator": Evil()}))
    for cmd in ("predict", "evaluate"):
        code, _, err = run(capsys, cmd, bad, clf_files / "test.svm")
        assert_one_line_error(code, err, "is a pickle", "--trust-pickle")
    assert not marker.exists()


def test_a_skops_file_with_foreign_types_is_refused(capsys, tmp_path, clf_files):
    import skops.io as sio

    model = tmp_path / "m.model"
    assert run(capsys, "fit", clf_files / "train.svm", "-o", model, "-p", "2")[0] == 0
    payload = read_model(model)
    payload["estimator"] = functools.partial(print, "hello")  # something that is not a model
    bad = tmp_path / "bad.model"
    sio.dump(payload, bad)
    code, out, err = run(capsys, "predict", bad, clf_files / "test.svm")
    assert_one_line_error(code, err, "refusing to load", "builtins.print")
    assert "hello" not in out


def test_a_skops_file_naming_a_function_under_a_trusted_module_is_refused(capsys, tmp_path,
                                                                          clf_files):
    """skops resolves a type's name as an attribute path: a prefix check of
    'cakernels.' would trust ``cakernels._cli.common.os.system`` (the os module this
    module imports) and a function that calls its argument. Only classes defined in
    cakernels (or SciPy's sparse matrices) pass; the crafted file runs nothing."""
    import json
    import zipfile

    from cakernels._cli.common import _trusted_class

    model, evil, marker = tmp_path / "m.skops", tmp_path / "evil.skops", tmp_path / "pwned"
    assert run(capsys, "fit", clf_files / "train.svm", "-o", model, "-p", "2")[0] == 0
    mod = "cakernels._cli.common"

    def text(v, i):
        return {"__class__": "str", "__module__": "builtins", "__loader__": "JsonNode",
                "content": json.dumps(v), "is_json": True, "__id__": i}

    os_mod = {"__class__": "os", "__module__": mod, "__loader__": "TypeNode", "__id__": 911}
    system = {"__class__": "os", "__module__": mod, "__loader__": "MethodNode",
              "content": {"obj": os_mod, "func": "system"}, "__id__": 912}
    comm = {"__class__": "SelfCommunicator", "__module__": "cakernels.backends._comm",
            "__loader__": "ObjectNode", "__id__": 922,
            "content": {"__class__": "dict", "__module__": "builtins",
                        "__loader__": "DictNode", "content": {}, "__id__": 920,
                        "key_types": {"__class__": "list", "__module__": "builtins",
                                      "__loader__": "ListNode", "content": [],
                                      "__id__": 921}}}
    call = {"__class__": "_collective", "__module__": mod,
            "__loader__": "ConstructorFromReduceNode", "__id__": 914,
            "content": {"__class__": "tuple", "__module__": "builtins",
                        "__loader__": "TupleNode", "__id__": 913,
                        "content": [comm, system, text(f"touch {marker}", 930)]}}
    with zipfile.ZipFile(model) as zin:
        schema = json.loads(zin.read("schema.json"))
        schema["content"]["metadata"]["content"]["note"] = call
        schema["content"]["metadata"]["key_types"]["content"].append(
            {"__class__": "str", "__module__": "builtins", "__loader__": "TypeNode",
             "__id__": 915})
        with zipfile.ZipFile(evil, "w") as zout:
            for name in zin.namelist():
                zout.writestr(name, json.dumps(schema) if name == "schema.json"
                              else zin.read(name))
    for cmd in ("predict", "evaluate"):
        code, _, err = run(capsys, cmd, evil, clf_files / "test.svm")
        assert_one_line_error(code, err, "refusing to load", "cakernels._cli.common._collective",
                              "cakernels._cli.common.os.system")
    assert not marker.exists()
    # the rule itself: classes by their own module and name only
    assert _trusted_class("cakernels.svm.CASVC")
    assert _trusted_class("cakernels.backends._comm.SelfCommunicator")
    assert _trusted_class("scipy.sparse._csr.csr_matrix")
    for name in ("cakernels._cli.common.os", "cakernels._cli.common.os.system",
                 "cakernels._cli.common._collective", "cakernels.svm.nothing",
                 "cakernels.nowhere.CASVC", "scipy.sparse.csr_matrix.__init__",
                 "numpy.ndarray", "builtins.print"):
        assert not _trusted_class(name), name


def test_legacy_pickle_with_trust_pickle(capsys, tmp_path, clf_files):
    model = tmp_path / "m.model"
    assert run(capsys, "fit", clf_files / "train.svm", "-o", model, "-p", "2")[0] == 0
    code, expected, _ = run(capsys, "predict", model, clf_files / "test.svm")
    assert code == 0
    legacy = tmp_path / "legacy.model"
    payload = read_model(model)
    payload["format_version"] = 2
    legacy.write_bytes(pickle.dumps(payload, protocol=5))
    code, _, err = run(capsys, "predict", legacy, clf_files / "test.svm")
    assert_one_line_error(code, err, "pickle", "--trust-pickle")
    code, out, err = run(capsys, "predict", legacy, clf_files / "test.svm", "--trust-pickle")
    assert code == 0, err
    assert out == expected


def test_garbage_model_file(capsys, tmp_path, clf_files):
    bad = tmp_path / "junk.model"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    code, _, err = run(capsys, "predict", bad, clf_files / "test.svm")
    assert code == 2 and "Traceback" not in err


def test_model_files_damaged_foreign_or_of_another_version(capsys, tmp_path, clf_files):
    import zipfile

    model = tmp_path / "m.skops"
    assert run(capsys, "fit", clf_files / "train.svm", "-o", model, "-p", "2")[0] == 0
    test = clf_files / "test.svm"
    # written compressed (skops's JSON schema was most of the file)
    with zipfile.ZipFile(model) as z:
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in z.infolist())
    # a damaged member: a bad CRC was "not a cakernels model file (reading it failed:
    # BadZipFile...)"
    data = bytearray(model.read_bytes())
    with zipfile.ZipFile(model) as z:
        info = z.getinfo("schema.json")
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + 5
    data[at] ^= 0xFF
    flipped = tmp_path / "flipped.skops"
    flipped.write_bytes(bytes(data))
    code, _, err = run(capsys, "predict", flipped, test)
    assert_one_line_error(code, err, "truncated or damaged model file")
    # --trust-pickle skipped the file-kind checks: a data file or a cut-off skops
    # file went to the unpickler ("UnpicklingError: could not find MARK")
    cut = tmp_path / "cut.skops"
    cut.write_bytes(model.read_bytes()[:200])
    for argv, needle in (((test, model), "the model comes first"),
                         ((cut, test), "truncated or damaged model file")):
        code, _, err = run(capsys, "predict", *argv, "--trust-pickle")
        assert_one_line_error(code, err, needle)
    # a class of cakernels this version does not have: another version wrote it (it
    # was "made or changed elsewhere")
    moved = tmp_path / "moved.skops"
    with zipfile.ZipFile(model) as src, zipfile.ZipFile(moved, "w") as dst:
        for item in src.infolist():
            body = src.read(item)
            if item.filename == "schema.json":
                body = body.replace(b"cakernels._solvers", b"cakernels._old_solvers")
            dst.writestr(item, body)
    code, _, err = run(capsys, "predict", moved, test)
    assert_one_line_error(code, err, "names classes of cakernels that this version",
                          "written by another cakernels version")


def test_saved_estimators_record_the_cakernels_version(monkeypatch):
    # pickle, joblib and skops saves held no cakernels version: a model of another
    # version loaded silently (scikit-learn records only its own classes' version)
    import cakernels._version as version
    import skops.io as sio
    from cakernels import CASVC, DKRR, AsyGCDSVC
    # a public name to filter it by (it lived in the private module only)
    from cakernels import CakernelsVersionWarning

    X, y = make_classification(n_samples=80, n_features=4, random_state=0)
    for est in (CASVC(n_partitions=2, random_state=0), AsyGCDSVC(), DKRR()):
        est.fit(X, y)
        saved = pickle.dumps(est)
        skops_bytes = sio.dumps(est)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            same = pickle.loads(saved)
            assert "_cakernels_version" not in same.__dict__
            np.testing.assert_array_equal(same.predict(X), est.predict(X))
        monkeypatch.setattr(version, "__version__", "0.0.1")
        with pytest.warns(CakernelsVersionWarning, match="saved by cakernels .* with "
                          "cakernels 0.0.1"):
            pickle.loads(saved)
        with pytest.warns(CakernelsVersionWarning):
            sio.loads(skops_bytes, trusted=sio.get_untrusted_types(data=skops_bytes))
        monkeypatch.undo()


# --------------------------------------------------------------------------- search


def test_search_on_libsvm_files_saves_the_refitted_best_model(capsys, tmp_path, clf_files,
                                                              reg_files):
    from cakernels import BKRR2CV, CASVCCV
    load = functools.partial(load_svmlight_file, zero_based=False)

    model = tmp_path / "svm.skops"
    code, out, err = run(capsys, "search", clf_files / "train.svm", "-o", model, "--Cs", "0.5",
                         "5", "--gammas", "0.1", "scale", "--cv", "3", "-p", "2")
    assert code == 0, err
    assert "search (partition, gamma)" in err  # the progress bar over the grid (stderr)
    lines = out.splitlines()
    assert lines[0].startswith("rank  mean accuracy") and lines[1].split()[0] == "1"
    assert lines[-1].startswith("CASVC (searched 4 candidates x 3 splits; best C=")
    X, y = load(str(clf_files / "train.svm"))
    ref = CASVCCV(n_partitions=2, Cs=[0.5, 5], gammas=[0.1, "scale"], cv=3,
                  random_state=0).fit(X, y)
    saved = read_model(model)["estimator"]
    assert saved.get_params() == ref.best_estimator_.get_params()
    code, out, _ = run(capsys, "evaluate", model, clf_files / "test.svm")
    assert code == 0 and "accuracy" in out
    code, out, err = run(capsys, "search", clf_files / "train.svm", "-o", model, "--Cs", "0.5",
                         "5", "--cv", "3", "-p", "2", "-q", "--scoring", "balanced_accuracy")
    assert code == 0, err
    assert out.splitlines()[0].startswith("rank  mean balanced_accuracy")
    ref = CASVCCV(n_partitions=2, Cs=[0.5, 5], cv=3, scoring="balanced_accuracy",
                  random_state=0).fit(X, y)
    assert f"{ref.best_score_:.6f}" in out.splitlines()[1]

    model = tmp_path / "krr.skops"
    code, out, err = run(capsys, "search", reg_files / "train.svm", "-o", model, "--sigmas", "1",
                         "4", "--lams", "1e-6", "1e-3", "--cv", "loo", "-p", "2",
                         "--standardize", "-q")
    assert code == 0, err
    assert "search (" not in err  # -q: no progress bar
    assert out.splitlines()[-1].startswith("BKRR2 (searched 4 candidates x 1 split; best ")
    Xr, yr = load(str(reg_files / "train.svm"))
    pipe = read_model(model)["estimator"]
    from sklearn.preprocessing import StandardScaler

    Xs = StandardScaler().fit_transform(Xr.toarray())
    # regression: the target centred too (as fit --standardize), the scores those of y
    ref = BKRR2CV(n_partitions=2, sigmas=[1, 4], lams=[1e-6, 1e-3], cv="loo",
                  random_state=0).fit(Xs, yr - yr.mean())
    assert f"{ref.best_score_:.6f}" in out
    assert pipe.regressor_[-1].get_params() == ref.best_estimator_.get_params()
    np.testing.assert_allclose(pipe.predict(Xr), ref.predict(Xs) + yr.mean(), rtol=1e-10)


def test_search_standardize_saves_the_searched_model_without_another_fit(
        capsys, tmp_path, reg_files, monkeypatch):
    # search --standardize on a regression target fitted its best candidate once more
    # through fit --standardize's wrapper; the search's own refit is that model
    fits = []
    real_fit = BKRR2.fit

    def counted(self, *args, **kwargs):
        fits.append(1)
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(BKRR2, "fit", counted)
    model = tmp_path / "m.skops"
    code, _, err = run(capsys, "search", reg_files / "train.svm", "-o", model, "--sigmas",
                       "1", "4", "--lams", "1e-3", "--cv", "loo", "-p", "2", "--standardize",
                       "-q")
    assert code == 0, err
    assert len(fits) == 1, fits  # the search's refit of the best candidate
    Xr, yr = load_svmlight_file(str(reg_files / "train.svm"))
    saved = read_model(model)["estimator"]
    ref = run_fit_standardized(Xr, yr, BKRR2(n_partitions=2, sigma=saved.regressor_[-1].sigma,
                                             lam=1e-3, random_state=0))
    assert repr(saved) == repr(ref)
    np.testing.assert_allclose(saved.predict(Xr), ref.predict(Xr), rtol=1e-10)


def run_fit_standardized(X, y, est):
    from cakernels._cli.fit import _feature_scaler, _standardized

    import scipy.sparse as sp

    return _standardized(est, "bkrr2", "regression", _feature_scaler(sp.issparse(X))).fit(X, y)


def test_a_huge_feature_index_is_refused_before_the_scaler_or_kernels(capsys, tmp_path,
                                                                       monkeypatch):
    # one feature index of 10^9 (hashed features): --standardize's scaler allocated ~39
    # bytes per column (37 GiB: killed by the system, or numpy's "Unable to allocate")
    # and --method krr's kernels 4; both are now refused with the reason first
    from cakernels import _memory

    path = tmp_path / "huge.svm"
    rows = [f"{i % 2} 1:{i * 0.1:g} 3:{i % 7}" for i in range(40)]
    rows[0] += " 1000000000:1"
    path.write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(_memory, "available_bytes", lambda: 4 * 2**30)
    for argv in (["fit", "--standardize"], ["search", "--standardize", "--Cs", "1", "-q"],
                 ["fit", "--method", "krr"]):
        code, _, err = run(capsys, argv[0], path, "-o", tmp_path / "m.skops", *argv[1:])
        what = "--method krr's kernels" if "krr" in argv else "--standardize's scaler"
        assert code == 2 and f"error: {what} on 1,000,000,000 features needs about" in err, err
        assert "renumber the file's feature indices" in err and "Traceback" not in err
    assert not (tmp_path / "m.skops").exists()
    code, out, err = run(capsys, "fit", path, "-o", tmp_path / "m.skops")  # no scaler
    assert code == 2 and "partition centres are dense vectors" in err, err


@pytest.mark.parametrize("sparse", [False, True])
def test_pooled_scalers_are_those_of_all_rows(sparse):
    # fit/search --standardize under --backend mpi: every rank's counts, means and
    # variances pooled give StandardScaler's fit on all rows (ranks with no rows and
    # one row, a constant feature, scales 1e-3..1e4), and the model assembled from
    # the parts fitted apart is fit --standardize's
    import scipy.sparse as sp
    from sklearn.preprocessing import StandardScaler
    from sklearn.utils.validation import check_is_fitted

    from cakernels import CASVC
    from cakernels._cli.fit import _assembled, _pooled, _row_stats, _standardized

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5)) * [1, 1e3, 1e-3, 5, 0] + [0, 1e4, 0, 3, 7]
    if sparse:
        X = sp.csr_matrix(np.where(rng.random(X.shape) < 0.5, X, 0.0))
    y = rng.normal(size=300) * 8 + 19
    cuts = [(0, 100), (100, 101), (101, 101), (101, 300)]
    stats = [_row_stats(X[a:b] if b > a else None, y[a:b], sparse, True) for a, b in cuts]
    features, target = _pooled(stats, sparse, True)
    ref = StandardScaler(with_mean=not sparse).fit(X)
    for name in ("mean_", "var_", "scale_"):
        np.testing.assert_allclose(getattr(features, name), getattr(ref, name), rtol=1e-13,
                                   atol=1e-13)
    assert features.with_mean == (not sparse) and features.n_samples_seen_ == 300
    assert features.n_features_in_ == 5 and (features.scale_[4] == 1.0 or sparse)  # constant
    np.testing.assert_allclose(target.mean_, [y.mean()], rtol=1e-14)
    assert target.var_ is None and target.scale_ is None

    est = BKRR2(n_partitions=2, sigma=2.0, random_state=0)
    est.fit(features.transform(X), y - target.mean_[0])
    model = _assembled(est, "bkrr2", "regression", features, target)
    check_is_fitted(model)
    one = run_fit_standardized(X, y, BKRR2(n_partitions=2, sigma=2.0, random_state=0))
    assert repr(model) == repr(one) and model.regressor_[-1] is est
    np.testing.assert_allclose(model.predict(X), one.predict(X), rtol=1e-10)
    assert model.transformer_ is target

    features, target = _pooled(stats, sparse, False)
    assert target is None
    clf = CASVC(n_partitions=2, random_state=0).fit(features.transform(X), y > 19)
    model = _assembled(clf, "casvc", "classification", features, None)
    one = _standardized(CASVC(n_partitions=2, random_state=0), "casvc", "classification",
                        StandardScaler(with_mean=not sparse)).fit(X, y > 19)
    assert repr(model) == repr(one)
    np.testing.assert_array_equal(model.predict(X), one.predict(X))


@pytest.mark.parametrize("argv, needles", [
    (["--Cs", "1", "--sigmas", "1"], ["SVM grids", "kernel ridge"]),
    (["--method", "bkrr2", "--Cs", "1"], ["--Cs", "do not apply", "bkrr2"]),
    (["--method", "casvc", "--cv", "loo"], ["--cv loo", "SVM"]),
    (["--cv", "three"], ["--cv must be"]),
    (["--Cs", "-1"], ["Cs"]),
    # the kernel-width note read the grid before it was checked ("gamma = nan")
    (["--Cs", "1", "--gammas", "nan"], ["gammas contains NaN"]),
    (["--method", "bkrr2", "--sigmas", "nan"], ["sigmas contains NaN"]),
    # a negative number in scientific notation was taken for an option by argparse
    # ("expected at least one argument")
    (["--method", "bkrr2", "--lams", "1e-3", "-1e-3"], ["every value of lams must be >= 0",
                                                        "[-0.001]"]),
    (["--method", "bkrr2", "--sigmas", "-INF"], ["sigmas contains NaN or infinite"]),
    (["--Cs", "-1E+2"], ["every value of Cs must be > 0", "[-100.0]"]),
    (["--method", "casvc", "--scoring", "r2"], ["--scoring r2", "classification",
                                                 "balanced_accuracy"]),
    (["--method", "casvc", "--scoring", "roc_auc"], ["--scoring roc_auc", "f1_macro"]),
    (["--method", "bkrr2", "--scoring", "f1"], ["--scoring f1", "regression",
                                                "neg_mean_squared_error"]),
])
def test_search_errors_are_one_line(capsys, tmp_path, clf_files, argv, needles):
    code, _, err = run(capsys, "search", clf_files / "train.svm", "-o", tmp_path / "m.skops",
                       "-p", "2", "-q", *argv)
    assert_one_line_error(code, err, *needles)


def test_a_search_grid_that_overrules_the_inferred_task_says_so(capsys, tmp_path, clf_files,
                                                               reg_files):
    # --lams on class labels searched kernel ridge and --Cs on whole-number targets a
    # classifier of one class per value, without a word (fit --lam/--C note it)
    model = tmp_path / "m.skops"
    code, _, err = run(capsys, "search", clf_files / "train.svm", "-o", model, "-p", "2",
                       "-q", "--cv", "3", "--lams", "1e-3")
    assert code == 0, err
    notes = [line for line in err.splitlines() if "note:" in line]
    assert len(notes) == 1 and "--lams trains kernel ridge regression on the class labels, " \
        "although classification was inferred" in notes[0], err
    whole = tmp_path / "whole.svm"  # 22 whole values, not 0..K: regression inferred
    whole.write_text("".join(f"{2 * (i % 22)} 1:{i / 10:.2f} 2:{(i * 7) % 5}\n"
                             for i in range(88)))
    code, _, err = run(capsys, "search", whole, "-o", model, "-p", "1", "-q", "--cv", "2",
                       "--Cs", "1", "--gammas", "0.5")
    assert code == 0, err
    notes = [line for line in err.splitlines() if "note:" in line]
    assert len(notes) == 1 and "--Cs and --gammas train classifiers of 22 classes (one per " \
        "distinct target value), although regression was inferred" in notes[0], err
    code, _, err = run(capsys, "search", reg_files / "train.svm", "-o", model, "-p", "2",
                       "-q", "--Cs", "1")
    assert_one_line_error(code, err, "cannot train a classifier (--Cs)",
                          "--sigmas/--lams without --method")


@pytest.mark.filterwarnings("default::RuntimeWarning")  # shown, as a user sees them
def test_a_search_without_a_finite_score_says_so(capsys, tmp_path):
    # every candidate NaN (lam=0 on repeated rows: singular leave-one-out): the model
    # was saved as "best" with exit 0 and no word beyond the solves' warnings
    data = tmp_path / "dup.svm"
    data.write_text("".join(f"{(i % 7) / 7:.3f} 1:{i % 5} 2:{(i % 5) / 2}\n"
                            for i in range(60)))
    code, out, err = run(capsys, "search", data, "-o", tmp_path / "m.skops", "-p", "1", "-q",
                         "--cv", "loo", "--lams", "0", "--sigmas", "1")
    assert code == 0, err
    assert "warning: no candidate has a finite mean score (its NaN): the saved model is the " \
        "first candidate's, not a selection" in err, err
    assert "1 candidate; partitions" in out and "(searched 1 candidate x 1 split; " in out, out


def test_fit_with_a_halo(capsys, tmp_path, clf_files, reg_files):
    model = tmp_path / "halo.skops"
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", model, "--method",
                       "bkmsvc", "-p", "3", "--halo", "0.5")
    assert code == 0, err
    est = read_model(model)["estimator"]
    assert est.halo == 0.5 and min(est.fit_stats_["halo_sizes"]) == 20  # round(0.5 * 120/3)
    code, out, _ = run(capsys, "evaluate", model, clf_files / "test.svm")
    assert code == 0 and "accuracy" in out
    code, _, err = run(capsys, "fit", reg_files / "train.svm", "-o", tmp_path / "r.skops",
                       "--method", "bkrr2", "-p", "2", "--halo", "0.25")
    assert code == 0, err
    # methods without a halo refuse it, in one line, before loading the data
    for method in ("svc", "cascadesvc", "dissmosvc"):
        code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", tmp_path / "x.skops",
                           "--method", method, "--halo", "0.5")
        assert_one_line_error(code, err, "--halo does not apply", method)
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", tmp_path / "x.skops",
                       "--method", "casvc", "--halo", "-1")
    assert code == 2 and "halo" in err


def test_fit_with_soft_routing(capsys, tmp_path, clf_files):
    model = tmp_path / "vote.skops"
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", model, "--method",
                       "fcfssvc", "-p", "3", "--routing", "vote", "--n-voters", "2")
    assert code == 0, err
    est = read_model(model)["estimator"]
    assert est.routing == "vote" and est.n_voters == 2
    code, out, _ = run(capsys, "evaluate", model, clf_files / "test.svm")
    assert code == 0 and "accuracy" in out
    # methods without soft routing refuse it, in one line, before loading the data
    for method, flag in (("svc", "--routing"), ("bkrr2", "--n-voters")):
        code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", tmp_path / "x.skops",
                           "--method", method, flag, "vote" if flag == "--routing" else "2")
        assert_one_line_error(code, err, f"{flag} does not apply", method)
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", tmp_path / "x.skops",
                       "--method", "casvc", "--n-voters", "0", "--routing", "vote")
    assert code == 2 and "n_voters" in err
    # --n-voters without --routing vote was ignored (a nearest-centre model, exit 0)
    for extra in ([], ["--routing", "nearest"]):
        code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", tmp_path / "y.skops",
                           "--method", "casvc", "--n-voters", "5", *extra)
        assert_one_line_error(code, err, "--n-voters applies to --routing vote only")
        assert not (tmp_path / "y.skops").exists()


def test_fit_dissmo_with_the_second_order_working_set(capsys, tmp_path, clf_files):
    model = tmp_path / "dis.skops"
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", model, "--method",
                       "dissmosvc", "--working-set", "second-order", "--C", "10")
    assert code == 0, err
    est = read_model(model)["estimator"]
    assert est.working_set == "second-order" and est.C == 10
    # other methods refuse it, in one line, before loading the data
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", tmp_path / "x.skops",
                       "--method", "casvc", "--working-set", "second-order")
    assert_one_line_error(code, err, "--working-set does not apply", "casvc")


def _fit_and_load(capsys, model, train, *argv):
    code, _, err = run(capsys, "fit", train, "-o", model, *argv)
    assert code == 0, err
    return read_model(model)["estimator"]


@pytest.mark.parametrize("method, opts", [("casvc", ["-p", "2"]), ("dcfiltersvc", ["-p", "4"]),
                                          ("dissmosvc", []), ("svc", [])])
def test_fit_with_a_stopping_tolerance(capsys, tmp_path, clf_files, method, opts):
    """--tol is LIBSVM's -e: every SVM method's estimator gets it, and the model is the
    Python API's with that tol."""
    from sklearn.base import clone

    from cakernels._cli.registry import REGISTRY
    from cakernels.datasets import load_svmlight

    est = _fit_and_load(capsys, tmp_path / "m.skops", clf_files / "train.svm", "--method",
                        method, "--C", "10", "--tol", "0.5", *opts)
    assert est.tol == 0.5 and est.C == 10
    X, y = load_svmlight(clf_files / "train.svm")
    Xt, _ = load_svmlight(clf_files / "test.svm", n_features=X.shape[1])
    params = {"C": 10, "tol": 0.5}
    if opts:
        params.update(n_partitions=int(opts[1]), random_state=0)
    ref = REGISTRY[method].estimator_class()(**params).fit(X, y)
    np.testing.assert_array_equal(est.predict(Xt), ref.predict(Xt))
    np.testing.assert_array_equal(est.decision_function(Xt), ref.decision_function(Xt))
    # the loose tolerance changed the model (the default's differs)
    default = clone(ref).set_params(tol=1e-3).fit(X, y)
    assert not np.array_equal(default.decision_function(Xt), ref.decision_function(Xt))


def test_tol_is_refused_for_kernel_ridge_and_checked(capsys, tmp_path, clf_files, reg_files):
    out = tmp_path / "x.skops"
    # kernel ridge has no tolerance: one line, before loading the data
    for method in ("bkrr2", "dkrr", "krr"):
        code, _, err = run(capsys, "fit", reg_files / "train.svm", "-o", out, "--method",
                           method, "--tol", "0.1")
        assert_one_line_error(code, err, f"--tol does not apply to --method {method}",
                              "stopping tolerance of the SVM methods", "dissmosvc, svc")
    code, _, err = run(capsys, "fit", "demo_regression", "-o", out, "--tol", "0.1")
    assert_one_line_error(code, err, "--tol does not apply to --method bkrr2")
    # a regression file without --method chooses bkrr2 (the note says why), then refuses
    code, _, err = run(capsys, "fit", reg_files / "train.svm", "-o", out, "--tol", "0.1")
    lines = err.strip().splitlines()
    assert code == 2 and "regression inferred" in lines[0] and len(lines) == 2, err
    assert lines[1].startswith("cakernels: error: --tol does not apply to --method bkrr2")
    # tol must be > 0: the estimator's error, in one line, before loading the data
    for method, value, name in (("casvc", "0", "CASVC"), ("svc", "-1", "SVC"),
                                ("dissmosvc", "0", "DisSMOSVC"), ("cascadesvc", "-0.1",
                                                                  "CascadeSVC")):
        code, _, err = run(capsys, "fit", tmp_path / "missing.svm", "-o", out, "--method",
                           method, "--tol", value)
        assert_one_line_error(code, err, f"The 'tol' parameter of {name} must be",
                              "range (0.0, inf)")
    assert not out.exists()


def test_search_with_a_stopping_tolerance(capsys, tmp_path, clf_files, reg_files):
    """search --tol: every fit of the SVM grid (and the refitted model) uses it, as the
    Python search with that tol; kernel ridge searches refuse it, bad values are one line."""
    from cakernels import CASVCCV
    from cakernels.datasets import load_svmlight

    model = tmp_path / "svm.skops"
    code, out, err = run(capsys, "search", clf_files / "train.svm", "-o", model, "--Cs", "1",
                         "10", "--cv", "3", "-p", "2", "-q", "--tol", "0.5")
    assert code == 0, err
    X, y = load_svmlight(clf_files / "train.svm")
    ref = CASVCCV(n_partitions=2, Cs=[1, 10], cv=3, tol=0.5, random_state=0).fit(X, y)
    saved = read_model(model)["estimator"]
    assert saved.tol == 0.5 and saved.get_params() == ref.best_estimator_.get_params()
    assert f"{ref.best_score_:.6f}" in out.splitlines()[1]
    assert "; tol=0.5)" in out.splitlines()[-1]  # the summary says the tolerance used
    Xt, _ = load_svmlight(clf_files / "test.svm", n_features=X.shape[1])
    np.testing.assert_array_equal(saved.decision_function(Xt),
                                  ref.best_estimator_.decision_function(Xt))
    code, _, err = run(capsys, "search", reg_files / "train.svm", "-o", model, "--method",
                       "bkrr2", "--tol", "0.1")
    assert_one_line_error(code, err, "--tol does not apply to --method bkrr2",
                          "no tolerance")
    code, _, err = run(capsys, "search", clf_files / "train.svm", "-o", model, "--method",
                       "casvc", "--tol", "-1")
    assert_one_line_error(code, err, "The 'tol' parameter of CASVCCV must be",
                          "range (0.0, inf)")


def test_fit_cascade_with_feedback_passes(capsys, tmp_path, clf_files):
    """--n-passes is CascadeSVC's n_passes: with enough passes the exact SVM."""
    from sklearn.svm import SVC

    from cakernels.datasets import load_svmlight
    from cakernels.svm import CascadeSVC

    est = _fit_and_load(capsys, tmp_path / "m.skops", clf_files / "train.svm", "--method",
                        "cascadesvc", "-p", "4", "--C", "10", "--n-passes", "5", "--tol", "1e-6")
    assert isinstance(est, CascadeSVC) and est.n_passes == 5 and est.tol == 1e-6
    assert est.n_passes_ == 2  # stopped early: no row violates the SVM by tol
    X, y = load_svmlight(clf_files / "train.svm")
    Xt, _ = load_svmlight(clf_files / "test.svm", n_features=X.shape[1])
    ref = CascadeSVC(4, C=10, n_passes=5, tol=1e-6, random_state=0).fit(X, y)
    np.testing.assert_array_equal(est.predict(Xt), ref.predict(Xt))
    np.testing.assert_array_equal(est.decision_function(Xt), ref.decision_function(Xt))
    # the exact SVM (one pass, the default, is not it on this data)
    svc = SVC(C=10, tol=1e-6).fit(X, y)
    np.testing.assert_allclose(est.decision_function(Xt), svc.decision_function(Xt), atol=1e-4)
    assert est.support_.size == svc.support_.size
    one = _fit_and_load(capsys, tmp_path / "one.skops", clf_files / "train.svm", "--method",
                        "cascadesvc", "-p", "4", "--C", "10")
    assert one.n_passes == 1 and one.support_.size < svc.support_.size
    # other methods refuse it, in one line, before loading the data; 0 is the estimator's error
    for method in ("casvc", "dcsvc", "svc", "bkrr2"):
        code, _, err = run(capsys, "fit", tmp_path / "missing.svm", "-o", tmp_path / "x.skops",
                           "--method", method, "--n-passes", "2")
        assert_one_line_error(code, err, f"--n-passes does not apply to --method {method}",
                              "it applies to cascadesvc")
    code, _, err = run(capsys, "fit", tmp_path / "missing.svm", "-o", tmp_path / "x.skops",
                       "--method", "cascadesvc", "--n-passes", "0")
    assert_one_line_error(code, err, "The 'n_passes' parameter of CascadeSVC", "[1, inf)")
    assert not (tmp_path / "x.skops").exists()


def test_fit_dc_svm_with_early_prediction(capsys, tmp_path, clf_files):
    """--predict-layer is DCSVC's predict_layer: DC-SVM's early prediction by the models
    of an earlier layer of the tree."""
    from cakernels.datasets import load_svmlight
    from cakernels.svm import DCSVC

    X, y = load_svmlight(clf_files / "train.svm")
    Xt, _ = load_svmlight(clf_files / "test.svm", n_features=X.shape[1])
    for layer in (1, 2):
        model = tmp_path / f"l{layer}.skops"
        est = _fit_and_load(capsys, model, clf_files / "train.svm", "--method", "dcsvc",
                            "-p", "4", "--predict-layer", str(layer))
        assert isinstance(est, DCSVC) and est.predict_layer == layer
        assert est.model_ is None and len(est.layer_models_) == 4 // 2 ** (layer - 1)
        ref = DCSVC(4, predict_layer=layer, random_state=0).fit(X, y)
        np.testing.assert_array_equal(est.predict(Xt), ref.predict(Xt))
        np.testing.assert_array_equal(est.decision_function(Xt), ref.decision_function(Xt))
        code, out, _ = run(capsys, "predict", model, clf_files / "test.svm")
        assert code == 0 and out.split() == [str(int(v)) for v in ref.predict(Xt)]
    # 4 partitions make 3 layers: layer 4 is the estimator's error, in one line, no model
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", tmp_path / "x.skops",
                       "--method", "dcsvc", "-p", "4", "--predict-layer", "4")
    assert_one_line_error(code, err, "predict_layer=4, but 4 partitions make 3 layers")
    code, _, err = run(capsys, "fit", tmp_path / "missing.svm", "-o", tmp_path / "x.skops",
                       "--method", "dcsvc", "--predict-layer", "0")
    assert_one_line_error(code, err, "The 'predict_layer' parameter of DCSVC", "[1, inf)")
    # other methods refuse it, in one line, before loading the data
    for method in ("casvc", "cascadesvc", "dcfiltersvc", "bkrr2"):
        code, _, err = run(capsys, "fit", tmp_path / "missing.svm", "-o", tmp_path / "x.skops",
                           "--method", method, "--predict-layer", "1")
        assert_one_line_error(code, err, f"--predict-layer does not apply to --method {method}",
                              "it applies to dcsvc")
    assert not (tmp_path / "x.skops").exists()


def test_bench_takes_the_svm_options_and_help_lists_them(capsys):
    # bench runs several methods: each option applies to the methods that take it
    code, out, err = run(capsys, "bench", "demo", "--methods", "cascadesvc", "dcsvc", "svc",
                         "-p", "4", "--tol", "1e-2", "--n-passes", "3", "--predict-layer", "1")
    assert code == 0, err
    assert all(name in out for name in ("CascadeSVC", "DCSVC", "SVC"))
    code, _, err = run(capsys, "bench", "demo", "--methods", "casvc", "svc", "--tol", "0")
    assert_one_line_error(code, err, "The 'tol' parameter")
    for command in ("fit", "bench"):
        code, out, _ = run(capsys, command, "--help")
        assert code == 0
        for flag in ("--tol TOL", "LIBSVM's -e", "--n-passes N", "cascadesvc's passes",
                     "--predict-layer L", "dcsvc's early prediction"):
            assert flag in out, (command, flag)


# --------------------------------------------------------------------------- kernel width and memory


@pytest.fixture(scope="module")
def unscaled_reg_file(tmp_path_factory):
    """Regression rows whose features span thousands (as cpusmall's): with the default
    sigma = 1 the RBF kernel is the identity on them."""
    d = tmp_path_factory.mktemp("unscaled")
    X, y = make_regression(n_samples=150, n_features=4, noise=1.0, random_state=0)
    dump_svmlight_file(X * 1000.0, y, str(d / "train.svm"), zero_based=False)
    return d / "train.svm"


def test_fit_notes_a_kernel_that_is_nearly_the_identity(capsys, tmp_path, unscaled_reg_file):
    code, _, err = run(capsys, "fit", unscaled_reg_file, "-o", tmp_path / "m.skops")
    assert code == 0
    note = [line for line in err.splitlines() if "nearly the identity" in line]
    assert len(note) == 1 and note[0].startswith("cakernels: note: "), err
    assert "sigma = 1 (the default)" in note[0] and "--standardize" in note[0]
    # the hint is the typical nearest-neighbour distance, thousands here
    hint = float(note[0].rsplit("around ", 1)[1])
    assert 100 < hint < 1e5
    # the remedies it names silence it (and give a model that generalises)
    for extra in (["--standardize"], ["--sigma", hint]):
        code, _, err = run(capsys, "fit", unscaled_reg_file, "-o", tmp_path / "m2.skops",
                           *extra)
        assert code == 0 and "nearly the identity" not in err, err
    # an SVM with a numeric --gamma gets the same check; gamma='scale' adapts to the data
    X, y = make_classification(n_samples=120, n_features=4, n_informative=3,
                               n_redundant=0, random_state=0)
    clf = tmp_path / "clf.svm"
    dump_svmlight_file(X * 1000.0, np.where(y == 1, 1, -1), str(clf), zero_based=False)
    code, _, err = run(capsys, "fit", clf, "-o", tmp_path / "c.skops", "--gamma", 2)
    assert code == 0 and "nearly the identity" in err and "--gamma around" in err, err
    code, _, err = run(capsys, "fit", clf, "-o", tmp_path / "c.skops", "--gamma", "scale")
    assert code == 0 and "nearly the identity" not in err, err


def test_search_notes_an_identity_kernel_grid_and_tied_candidates(capsys, tmp_path,
                                                                  unscaled_reg_file):
    code, _, err = run(capsys, "search", unscaled_reg_file, "-o", tmp_path / "m.skops",
                       "-q", "--n-partitions", 2, "--sigmas", 0.5, 2, "--lams", 1e-6, 1e-3)
    assert code == 0
    assert "every sigma of the grid (the largest 2)" in err, err
    assert "all 4 candidates scored the same" in err, err
    code, _, err = run(capsys, "search", unscaled_reg_file, "-o", tmp_path / "m.skops",
                       "-q", "--n-partitions", 2, "--sigmas", 0.5, 2, "--lams", 1e-6, 1e-3,
                       "--standardize")
    assert code == 0
    assert "nearly the identity" not in err and "scored the same" not in err, err


def test_fit_refuses_kernel_ridge_beyond_the_available_memory(capsys, tmp_path, reg_files,
                                                              monkeypatch):
    """scikit-learn's KernelRidge holds ~3 copies of its n x n kernel: beyond the
    machine's memory the system would kill it without a word; refused before the fit."""
    import cakernels._memory as memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 100_000)  # 120^2 * 24 = 345,600
    code, _, err = run(capsys, "fit", reg_files / "train.svm", "-o", tmp_path / "k.skops",
                       "--method", "krr")
    assert_one_line_error(code, err, "--method krr", "120 samples", "bkrr2")
    assert not (tmp_path / "k.skops").exists()
    monkeypatch.setattr(memory, "available_bytes", lambda: 10_000_000)
    code, _, err = run(capsys, "fit", reg_files / "train.svm", "-o", tmp_path / "k.skops",
                       "--method", "krr")
    assert code == 0, err


def test_output_links_and_devices_are_written_through(capsys, tmp_path, clf_files):
    """-o never replaces what the path is: a symbolic link keeps pointing at its
    (rewritten) target, and a device such as /dev/null stays the device."""
    target = tmp_path / "target.skops"
    link = tmp_path / "link.skops"
    link.symlink_to(target)
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", link, "-p", 2)
    assert code == 0, err
    assert link.is_symlink() and target.is_file() and target.stat().st_size > 0
    assert read_model(link)["estimator"].__class__.__name__ == "CASVC"
    pred = tmp_path / "pred.txt"
    pred_link = tmp_path / "pred_link.txt"
    pred.write_text("old\n")
    pred_link.symlink_to(pred)
    code, out, err = run(capsys, "predict", link, clf_files / "test.svm", "-o", pred_link)
    assert code == 0, err
    assert pred_link.is_symlink() and len(pred.read_text().split()) == 40
    # a FIFO (not /dev/null itself: a regression would replace the machine's device)
    import stat
    import threading

    fifo = tmp_path / "model.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", fifo, "-p", 2)
    reader.join(timeout=60)
    assert code == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got and got[0][:2] == b"PK"  # the skops zip went through the pipe


def test_bench_max_train_keeps_the_test_set(capsys, tmp_path):
    """--max-train subsamples the training rows of the fixed 80/20 split; the
    rows it leaves out went to the test set, so runs of several sizes were
    scored on different rows."""
    X, y = make_regression(n_samples=200, n_features=4, random_state=0)
    path = tmp_path / "reg.train"
    dump_svmlight_file(X, y, str(path))
    for max_train in (100, 150):
        code, out, err = run(capsys, "bench", path, "-p", "2", "--methods", "bkrr2",
                             "--max-train", max_train)
        assert code == 0, err
        assert f"{max_train} train / 40 test" in out


def test_a_registry_file_failing_its_checksum_names_a_command_line_way_out(
        capsys, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "bodyfat").mkdir(parents=True)
    X, y = make_regression(n_samples=30, n_features=3, random_state=0)
    dump_svmlight_file(X, y, str(home / "bodyfat" / "bodyfat"))  # not the official file
    monkeypatch.setenv("CAKERNELS_DATA", str(home))
    code, out, err = run(capsys, "fit", "bodyfat", "-o", tmp_path / "m.skops")
    assert code == 2
    (line,) = err.splitlines()
    assert "sha256 mismatch" in line and "verify=False" not in line
    assert "give its path instead of the name 'bodyfat'" in line
    code, out, err = run(capsys, "fit", home / "bodyfat" / "bodyfat", "-o",
                         tmp_path / "m.skops", "--method", "bkrr2")
    assert code == 0, err


def test_width_note_on_a_file_with_a_huge_feature_index(capsys, tmp_path, peak_bytes):
    # one row uses feature 2^27: the kernel-width note measures distances on the columns
    # its sample uses (it took ~4 bytes per column of the file: 512 MB here, 8 GiB at 2^31)
    rng = np.random.RandomState(0)
    lines = [f"{1 if i % 2 else -1} 1:{rng.randn():.6f} 2:{rng.randn():.6f}" for i in range(200)]
    lines[7] += f" {2**27}:1.0"
    data = tmp_path / "huge_index.svm"
    data.write_text("\n".join(lines) + "\n")
    (code, out, err), peak = peak_bytes(run, capsys, "fit", data, "-o", tmp_path / "m.skops",
                                        "--method", "svc", "--gamma", "1e-9")
    assert code == 0, err
    assert "nearly the identity" not in err  # gamma = 1e-9: a kernel near 1, no note
    assert peak < 200 * 2**20, peak
    # the note itself still works on such a file
    code, out, err = run(capsys, "fit", data, "-o", tmp_path / "m2.skops", "--method", "svc",
                         "--gamma", "1e6")
    assert code == 0 and "nearly the identity" in err, err


# --------------------------------------------------------------------------- from a CLI fuzz


def test_routing_without_a_method_trains_the_default_classifier(capsys, tmp_path, clf_files,
                                                                 reg_files):
    # the pre-check held --routing against both tasks' defaults and refused it for bkrr2
    code, out, err = run(capsys, "fit", clf_files / "train.svm", "-o", tmp_path / "m.skops",
                         "-p", "2", "--routing", "vote", "--n-voters", "2")
    assert code == 0 and out.startswith("CASVC"), err
    assert read_model(tmp_path / "m.skops")["estimator"].routing == "vote"
    # a regression file then chooses bkrr2 (the note says why), which takes no routing
    code, _, err = run(capsys, "fit", reg_files / "train.svm", "-o", tmp_path / "r.skops",
                       "--routing", "vote")
    lines = err.strip().splitlines()
    assert code == 2 and "regression inferred" in lines[0] and len(lines) == 2
    assert lines[1].startswith("cakernels: error: --routing does not apply to --method bkrr2")


def test_the_output_never_replaces_an_input(capsys, tmp_path, clf_files):
    import shutil

    train = tmp_path / "train.svm"
    shutil.copy(clf_files / "train.svm", train)
    before = train.read_bytes()
    model = tmp_path / "m.skops"
    (tmp_path / "link.svm").symlink_to(train)
    for argv in (("fit", train, "-o", train), ("fit", train, "-o", tmp_path / "link.svm"),
                 ("search", train, "-o", train, "-q")):
        code, _, err = run(capsys, *argv, "-p", "2")
        assert_one_line_error(code, err, "it is the input", "choose another output file")
    assert train.read_bytes() == before
    assert run(capsys, "fit", train, "-o", model, "-p", "2")[0] == 0
    saved = model.read_bytes()
    for target in (model, train):
        code, _, err = run(capsys, "predict", model, train, "-o", target)
        assert_one_line_error(code, err, "it is the input")
    assert model.read_bytes() == saved and train.read_bytes() == before
    # a file where a folder should be
    code, _, err = run(capsys, "predict", model, train, "-o", train / "pred.txt")
    assert_one_line_error(code, err, "is a file, not a folder")


def test_evaluate_refuses_non_finite_targets_before_any_output(capsys, tmp_path, reg_files):
    model = tmp_path / "r.skops"
    assert run(capsys, "fit", reg_files / "train.svm", "-o", model, "--method", "bkrr2")[0] == 0
    text = (reg_files / "test.svm").read_text().splitlines()
    text[3] = "nan" + text[3][text[3].index(" "):]
    (tmp_path / "nan.svm").write_text("\n".join(text) + "\n")
    code, out, err = run(capsys, "evaluate", model, tmp_path / "nan.svm")
    assert out == ""
    assert_one_line_error(code, err, "1 of 40 targets are NaN or infinite")


def test_clear_errors_for_damaged_models_directories_and_demo_subsets(capsys, tmp_path,
                                                                      clf_files):
    import skops.io as sio

    model = tmp_path / "m.skops"
    assert run(capsys, "fit", clf_files / "train.svm", "-o", model, "-p", "2")[0] == 0
    (tmp_path / "cut.skops").write_bytes(model.read_bytes()[:500])
    code, _, err = run(capsys, "evaluate", tmp_path / "cut.skops", clf_files / "test.svm")
    assert_one_line_error(code, err, "truncated or damaged model file")
    payload = read_model(model)
    for edit, needle in ((lambda p: p["metadata"].pop("n_features"), "its metadata"),
                         (lambda p: p.__setitem__("estimator", np.zeros(3)), "its estimator"),
                         (lambda p: p.__setitem__("format_version", "3"), "a whole number")):
        bad = read_model(model)
        edit(bad)
        sio.dump(bad, tmp_path / "bad.skops")
        code, _, err = run(capsys, "evaluate", tmp_path / "bad.skops", clf_files / "test.svm")
        assert_one_line_error(code, err, needle)
    assert payload["metadata"]["n_features"] == 6
    code, _, err = run(capsys, "bench", tmp_path)
    assert_one_line_error(code, err, "is a directory, not a LIBSVM file")
    code, _, err = run(capsys, "fit", "demo:train", "-o", tmp_path / "d.skops")
    assert_one_line_error(code, err, "the demo 'demo' has no subsets")


def test_an_output_file_replaced_keeps_its_mode(capsys, tmp_path, clf_files):
    # the temporary file got 0o666 & ~umask: a private (0600) model became 0644
    import stat

    model, preds = tmp_path / "m.skops", tmp_path / "p.txt"
    for path in (model, preds):
        path.write_text("old")
        path.chmod(0o600)
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", model)
    assert code == 0, err
    code, _, err = run(capsys, "predict", model, clf_files / "test.svm", "-o", preds)
    assert code == 0, err
    for path in (model, preds):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert path.read_bytes() != b"old"
    new = tmp_path / "new.txt"  # a new file: the umask's mode, as open() gives
    umask = os.umask(0)
    os.umask(umask)
    code, _, err = run(capsys, "predict", model, clf_files / "test.svm", "-o", new)
    assert code == 0 and stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask


# ----------------------------------------------------- a method of the other task


@pytest.mark.parametrize("command", ["fit", "search"])
@pytest.mark.parametrize("data, method, task", [("demo", "bkrr2", "classification"),
                                                ("demo-regression", "casvc", "regression")])
def test_a_method_of_the_other_task_on_a_known_dataset_is_refused(capsys, tmp_path, command,
                                                                   data, method, task):
    # (diabetes' targets are whole numbers: casvc trained one class per value, silently)
    code, _, err = run(capsys, command, data, "--method", method, "-o", tmp_path / "m.skops")
    assert_one_line_error(code, err, f"is a {task} dataset", f"--method {method} is for")
    listed = err.split("methods for it: ")[1].split(";")[0].split(", ")
    assert ("dcsvc" in listed or "dkrr" in listed) == (command == "fit"), listed  # search's own
    # --task is the explicit override: a note, then the fit (it was silent without a
    # --method, and refused with one)
    other = "regression" if task == "classification" else "classification"
    argv = ["--Cs", "1"] if command == "search" and other == "classification" else []
    code, _, err = run(capsys, command, data, "--method", method, "--task", other,
                       "-p", "2", *argv, "-o", tmp_path / "m.skops")
    assert code == 0, err
    assert f"is a {task} dataset; --task {other} overrides that" in err


def test_a_classifier_on_whole_number_regression_targets_says_so(capsys, tmp_path):
    d = tmp_path
    rng = np.random.RandomState(0)
    X = rng.randn(120, 3)
    y = np.round(50 + 20 * X[:, 0] + rng.randn(120)) * 3  # whole numbers with gaps
    dump_svmlight_file(X, y, str(d / "train.svm"), zero_based=False)
    k = np.unique(y).size
    for argv in (["fit", d / "train.svm", "--method", "casvc", "-o", d / "m.skops"],
                 ["search", d / "train.svm", "--method", "casvc", "--Cs", "1", "-p", "2",
                  "--cv", "2", "-o", d / "s.skops"]):
        code, _, err = run(capsys, *argv)
        assert code == 0, err
        notes = [line for line in err.splitlines() if "although regression was inferred" in line]
        assert len(notes) == 1, err
        assert f"--method casvc trains a classifier of {k} classes" in notes[0]
    code, _, err = run(capsys, "bench", d / "train.svm", "--methods", "casvc", "cpsvc",
                       "-p", "2")
    assert code == 0, err
    assert f"--methods casvc cpsvc train classifiers of {k} classes" in err


def test_kernel_ridge_on_class_labels_says_so(capsys, tmp_path, clf_files):
    code, _, err = run(capsys, "fit", clf_files / "train.svm", "--method", "bkrr2", "-p", "2",
                       "-o", tmp_path / "m.skops")
    assert code == 0, err
    assert ("--method bkrr2 trains kernel ridge regression on the class labels, although "
            "classification was inferred") in err


@pytest.mark.parametrize("command", ["fit", "search", "bench"])
@pytest.mark.parametrize("backend", [[], ["--backend", "serial"], ["--backend", "mpi"]])
def test_n_jobs_without_the_threads_backend_is_refused(capsys, tmp_path, command, backend):
    # (it was ignored: the serial backend ran one partition at a time)
    argv = [command, "demo", "--n-jobs", "2", *backend]
    if command != "bench":
        argv += ["-o", tmp_path / "m.skops"]
    code, _, err = run(capsys, *argv)
    assert_one_line_error(code, err, "--n-jobs", "mpiexec -n" if "mpi" in backend else "--backend threads")
    assert not (tmp_path / "m.skops").exists()


def test_a_test_split_the_registry_does_not_have_names_the_command_line_ways(capsys,
                                                                           tmp_path):
    # the library's advice (load subset='train', train_test_split) was passed through
    code, _, err = run(capsys, "fit", "bodyfat:test", "-o", tmp_path / "m.skops")
    assert_one_line_error(code, err, "bodyfat has no official test split", "bodyfat:train")
    assert "train_test_split" not in err


def test_the_task_override_counts_classes_and_follows_the_checks(capsys, tmp_path):
    # a classifier on the diabetes targets: one class per value, said only for files;
    # the override's note came before an error that contradicted it
    code, _, err = run(capsys, "fit", "demo_regression", "--task", "classification",
                       "--method", "casvc", "-p", "2", "-o", tmp_path / "m.skops")
    assert code == 0, err
    assert "--task classification overrides that (a classifier of 214 classes" in err
    for argv in (["search", "demo", "--task", "regression", "--method", "casvc", "-o",
                  tmp_path / "s.skops"],
                 ["bench", "demo", "--task", "regression", "--methods", "casvc"]):
        code, _, err = run(capsys, *argv)
        assert_one_line_error(code, err, "casvc is for classification")
    code, out, err = run(capsys, "bench", "demo", "--task", "regression", "--methods",
                         "dckrr", "-p", "2")
    assert code == 0, err
    assert "is a classification dataset; --task regression overrides that" in err


def test_out_of_memory_advice_names_the_features_too():
    # it said "use fewer samples (or ... more partitions)": for an allocation of a
    # huge feature index's width (the centres: P x n_features) more partitions are worse
    from cakernels._cli.common import _error_message

    msg = _error_message(MemoryError("Unable to allocate 1.79 GiB for an array with shape "
                                     "(8, 30000000)"))
    assert msg.startswith("out of memory (Unable to allocate 1.79 GiB")
    assert "fewer features (a LIBSVM file has as many as its largest feature index)" in msg


def test_random_state_is_refused_where_it_draws_nothing_and_defaults_to_0(capsys, tmp_path,
                                                                           clf_files,
                                                                           reg_files):
    # --random-state's default was 0 whether given or not: --method svc/krr took it
    # silently while --halo or --n-jobs there were refused as not applying
    for data, method in ((clf_files / "train.svm", "svc"), (clf_files / "train.svm",
                                                           "dissmosvc"),
                         (reg_files / "train.svm", "krr")):
        code, _, err = run(capsys, "fit", data, "-o", tmp_path / "m.skops", "--method", method,
                           "--random-state", "5")
        assert_one_line_error(code, err, "--random-state does not apply to --method " + method)
    # the partitioned methods: 0 when not given (the classes' default None draws anew)
    for seed in ((), ("--random-state", "0"), ("--random-state", "7")):
        model = tmp_path / f"c{len(seed)}.skops"
        code, _, err = run(capsys, "fit", clf_files / "train.svm", "-o", model, "-p", "2",
                           *seed)
        assert code == 0, err
        assert read_model(model)["estimator"].random_state == (int(seed[1]) if seed else 0)


def test_evaluate_on_the_demo_says_it_has_no_test_split(capsys, tmp_path):
    # the demo's rows are the training rows of a model fitted on it: no word was said
    model = tmp_path / "demo.skops"
    code, _, err = run(capsys, "fit", "demo", "-o", model, "-p", "2")
    assert code == 0, err
    code, out, err = run(capsys, "evaluate", model, "demo")
    assert code == 0 and "accuracy" in out
    assert "note: demo has no test split; using all its rows" in err


def test_krr_lam_overflowing_with_the_sample_count_names_lam(capsys, tmp_path, reg_files):
    # KernelRidge's alpha = lam * n overflowed: "The 'alpha' parameter of KernelRidge ...
    # Got inf", a parameter the user never gave
    code, _, err = run(capsys, "fit", reg_files / "train.svm", "-o", tmp_path / "m.skops",
                       "--method", "krr", "--lam", "1e307")
    assert_one_line_error(code, err, "--lam 1e+307 times the", "overflows")


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_non_finite_values_in_a_prediction_file_name_the_file(capsys, tmp_path, clf_files,
                                                             value):
    model = tmp_path / "m.skops"
    assert run(capsys, "fit", clf_files / "train.svm", "-o", model, "-p", "2")[0] == 0
    bad = tmp_path / "bad.svm"
    bad.write_text(f"1 1:1 2:2\n-1 1:{value} 2:1\n")
    for command in ("predict", "evaluate"):
        code, _, err = run(capsys, command, model, bad)
        assert_one_line_error(code, err, f"{bad}: 1 feature value is NaN or infinite "
                                         "(the first in sample 2)")
