"""The ``cakernels`` command line: in-process through ``main(argv)``, a few via ``python -m``."""

import pickle
import subprocess
import sys

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file, make_classification, make_regression

from cakernels import __version__
from cakernels.__main__ import main


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *needles):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cakernels: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(autouse=True)
def no_network(monkeypatch, tmp_path):
    """Every test runs with an empty data home and a pooch that refuses to download."""
    pooch = pytest.importorskip("pooch")

    def offline(url, *args, **kwargs):
        raise ConnectionError(f"offline test: {url}")

    monkeypatch.setattr(pooch, "retrieve", offline)
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
    home_line = next(line for line in out.splitlines() if line.startswith("data home"))
    assert str(tmp_path / "empty") in home_line and "does not exist" in home_line


def test_no_command_is_a_usage_error(capsys):
    code, _, err = run(capsys)
    assert code == 2 and "usage:" in err


# ------------------------------------------------------------------ fit, predict, evaluate


def test_classification_round_trip(capsys, tmp_path, clf_files):
    model = tmp_path / "clf.pkl"
    code, out, err = run(capsys, "fit", clf_files / "train.svm", "-o", model, "--method", "bkmsvc",
                         "-p", "2", "--C", "10", "--standardize")
    assert code == 0, err
    assert "BKMSVC" in out and "2 partitions" in out and "standardized" in out
    assert [p.name for p in tmp_path.iterdir()] == ["clf.pkl"]  # no temporary file left over

    with open(model, "rb") as fh:
        payload = pickle.load(fh)
    meta = payload["metadata"]
    assert payload["format"] == "cakernels-model"
    assert meta["method"] == "bkmsvc" and meta["n_features"] == 6
    assert meta["cakernels_version"] == __version__
    assert meta["standardization"] == {"scaler": "StandardScaler", "with_mean": False}

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


@pytest.mark.parametrize("method, opts", [("svc", ["--C", "2"]), ("krr", ["--sigma", "3"])])
def test_scikit_learn_baselines(capsys, tmp_path, clf_files, reg_files, method, opts):
    files = clf_files if method == "svc" else reg_files
    model = tmp_path / "m.pkl"
    code, out, err = run(capsys, "fit", files / "train.svm", "-o", model, "--method", method, *opts)
    assert code == 0, err
    assert ("SVC" if method == "svc" else "KernelRidge") in out
    assert run(capsys, "evaluate", model, files / "test.svm")[0] == 0


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
    assert_one_line_error(code, err, "8 features", "trained on 6")
    assert out == ""


def test_errors_are_one_line(capsys, tmp_path, clf_files, reg_files):
    model = tmp_path / "m.pkl"
    bad = tmp_path / "bad.svm"
    bad.write_text("1 1:0.5 2:oops\n-1 3:x\n")
    not_model = tmp_path / "not_a_model.pkl"
    not_model.write_text("hello\n")
    other_pickle = tmp_path / "other.pkl"
    other_pickle.write_bytes(pickle.dumps({"some": "dict"}))
    missing = tmp_path / "missing.svm"

    cases = [
        (["fit", missing, "-o", model], ["no such file", "missing.svm"]),
        (["fit", bad, "-o", model], ["bad.svm"]),
        (["fit", "ijcnn", "-o", model], ["unknown dataset", "ijcnn1"]),
        (["predict", not_model, clf_files / "test.svm"], ["not a cakernels model"]),
        (["evaluate", other_pickle, clf_files / "test.svm"], ["not a cakernels model"]),
        (["predict", missing, clf_files / "test.svm"], ["no such model file"]),
        (["fit", clf_files / "train.svm", "-o", model, "--C", "-1"], ["'C' parameter", "CASVC"]),
        (["fit", clf_files / "train.svm", "-o", model, "-p", "0"], ["n_partitions"]),
        (["fit", clf_files / "train.svm", "-o", model, "-p", "500"], ["n_partitions=500"]),
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
    for argv, needles in cases:
        code, out, err = run(capsys, *argv)
        assert_one_line_error(code, err, *needles)
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
    lines = out.splitlines()
    assert "ijcnn1 is not in the data home" in lines[0] and "breast cancer" in lines[0]
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


def test_bench_regression_demo(capsys):
    code, out, err = run(capsys, "bench", "demo_regression", "-p", "2")
    assert code == 0, err
    for name in ("DCKRR", "KKRR", "KKRR2", "BKRR", "BKRR2", "BKRR3", "KKRR3", "KernelRidge"):
        assert f"\n{name} " in out
    assert "test MSE" in out and "oracle bound" in out


def test_bench_skips_kernel_ridge_over_the_memory_budget(capsys, monkeypatch):
    import cakernels._cli

    monkeypatch.setattr(cakernels._cli, "KRR_MEMORY_BUDGET", 1000)
    code, out, err = run(capsys, "bench", "demo_regression", "--methods", "dckrr", "krr", "-p", "2")
    assert code == 0, err
    assert "KernelRidge skipped" in out and "\nDCKRR " in out and "\nKernelRidge " not in out


def test_registry_style_names_for_the_demo(capsys, tmp_path):
    model = tmp_path / "demo.pkl"
    assert run(capsys, "fit", "demo", "-o", model, "--method", "cpsvc", "-p", "2",
               "--standardize")[0] == 0
    code, out, _ = run(capsys, "evaluate", model, "demo")
    assert code == 0 and float(out.split("accuracy:")[1].split()[0]) > 0.9


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
