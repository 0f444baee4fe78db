"""Distributed training under mpiexec: SPMD scripts in tests/mpi/ launched with the
environment's own ``mpiexec`` (``-n 1``, ``-n 2``, ``-n 4``), each with a time limit
and a process-group kill, compared with the serial estimators."""

import json
import os
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent / "mpi"
MPIEXEC = Path(sys.executable).with_name("mpiexec")


def _mpi_available():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install \".[test]\" installs it with MPICH)"
    if not MPIEXEC.exists():
        return f"no mpiexec next to {sys.executable} (the mpich wheel provides it)"
    return None


@pytest.fixture
def mpirun(spawn):
    """``mpirun(n, script, *args, mpi4py=True, timeout=...)``."""
    reason = _mpi_available()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)

    def run(n, script, *args, mpi4py=True, timeout=300, env=None):
        argv = [MPIEXEC, "-n", str(n), sys.executable]
        argv += ["-m", "mpi4py"] if mpi4py else []
        argv += [HERE / script, *args]  # an absolute script path stays as it is
        return spawn(argv, timeout=timeout, env=env)

    return run


def _lines(out):
    assert out.returncode == 0, out.stdout + out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("n", [1, 2, 4])
def test_every_estimator_under_mpi_equals_serial(mpirun, n, tmp_path):
    lines = _lines(mpirun(n, "spmd_equivalence.py", tmp_path, timeout=600))
    root = [line for line in lines if line["check"] == "root"]
    sharded = [line for line in lines if line["check"] == "sharded"]
    assert len(root) == len(sharded) == 12
    for line in root:
        # root mode: the same partitions, local models and predictions as serial
        assert line["equal"] and line["everywhere"], line
        if n > 1:
            assert len(set(line["owners"])) == min(n, line["n_partitions"]), line
    for line in sharded:
        # sharded mode: the same complete model on every rank; the collective
        # prediction (Algorithm 5) equals a local prediction of all rows
        assert line["everywhere"] and line["agree"], line
        assert line["score_sharded_ok"] and line["predicted_on_rank0"], line
        assert line["n"] == sum(line["sizes"]) and min(line["sizes"]) > 0
        if "KRR" in line["name"]:
            assert line["score"] <= 2 * line["serial_score"] + 0.01, line  # normalised MSE
        else:
            assert line["score"] >= line["serial_score"] - 0.05, line  # accuracy
    zero = [line for line in lines if line["check"] == "zero-weights"]
    assert len(zero) == 1 and zero[0]["serial_is_removal"] and zero[0]["root_equal"], zero
    assert zero[0]["sharded_is_removal"], zero
    assert zero[0]["sharded_rows"] == zero[0]["kept"], zero
    krr = [line for line in lines if line["check"] == "krr-weights"]
    assert len(krr) == 1 and krr[0]["root_rel"] <= 1e-10 and krr[0]["sharded_is_removal"], krr
    (inst,) = [line for line in lines if line["check"] == "random-state-instance"]
    assert inst["serial"] == inst["mpi"] and inst["everywhere"], inst
    assert len(set(inst["serial"][:3])) == 3, inst  # the instance is consumed fit by fit
    assert all(flag is True for flag in inst["serial"][3:][1::2]), inst  # refit partitions
    # models pickled on rank 0 predict the same without MPI
    for line in root:
        with open(tmp_path / f"{line['name']}.pkl", "rb") as fh:
            saved = pickle.load(fh)
        pred = saved["model"].predict(saved["X"])
        np.testing.assert_array_equal(pred, saved["pred"])


@pytest.mark.parametrize("n", [1, 2, 4])
def test_communication_counters(mpirun, n):
    (c,) = _lines(mpirun(n, "spmd_comm.py"))
    # root mode: one scatter sends exactly the rows of the partitions not on rank 0, one
    # message per rank, each with a few hundred bytes of field headers
    messages = c["expected_scatter_messages"]
    assert c["root_scatter_messages"] == messages
    assert c["root_scatter_calls"] == (1 if n > 1 else 0)
    overhead = c["root_scatter_bytes"] - c["expected_scatter_bytes"]
    assert 0 <= overhead <= 600 * messages, c
    assert c["root_training_bytes"] == 0  # training itself communicates nothing
    assert c["rank_sum"] == c["total_bytes"]
    assert c["root_ranks"] == n
    if n > 1:
        assert c["root_scatter_bytes"] > 0 and c["root_gather_bytes"] > 0
    # sharded CA-SVM: no training data moves, and training sends nothing
    assert c["sharded_redistribution"] == {"bytes": 0, "messages": 0}
    assert c["sharded_training"] == {"bytes": 0, "messages": 0}
    # one process: zeros
    assert c["serial_bytes"] == 0 and c["serial_messages"] == 0 and c["serial_ranks"] == 1
    # n_workers counts the workers of all ranks (one per rank here), as DisSMOSVC's
    # (it was each process's own count: 1 on any number of ranks)
    assert c["workers"] == [n, n, 1], c


BAD_INPUT = {
    "nan": "rank 3: Input X contains NaN",
    "features": "the shards have different numbers of features: rank 0 has 5, rank 3 has 4",
    "empty": "rank 3: this rank's shard is empty",
    "params": "ranks [3] were given other parameters than rank 0",
    "labels": "the ranks' labels have different types",
    "root-inf": "rank 0: Input X contains infinity",
    "root-scale": "gamma='scale' is 1 / (n_features * X.var()), and X.var() =",
    "zero-weights": "rank 3: every sample_weight of this rank's shard is 0: in sharded mode",
    # every squared distance underflowed: degenerate partitions without an error
    "tiny": "feature values too small: the largest |value| is",
    # (K-means made one partition of the clusters, silently)
    "tiny-partitioner": "feature values too small: the largest |value| is",
    "zero-weight-scalar": "rank 3: every sample_weight of this rank's shard is 0: in sharded "
                          "mode",
    "krr-weights": "sample_weight must be given on every rank",
    # both multi-output: the message said "(single and multi-output)"
    "krr-y-columns": "the shards' targets have different shapes: rank 0 passes y of shape "
                     "(n_local, 2), rank 3 y of shape (n_local, 3)",
    "svm-weights": "sample_weight must be given on every rank",
    # raised before any collective on that rank only, they left the others waiting
    "invalid-param": "rank 3: The 'C' parameter of CASVC must be",
    "invalid-grid": "rank 3: every value of lams must be >= 0",
    # the same global classes everywhere, but each rank raised it as its own ValueError
    # (the command line then aborted the job with one "rank N:" error per rank)
    "search-scoring": "scoring='f1' scores the positive class of a binary problem; these "
                      "data have 3 classes",
    "other-estimator": "ranks [3] were given other parameters than rank 0 (or another "
                       "estimator)",
    "mixed-storage": "the shards differ in storage: rank 0 passes a dense array, rank 3 a "
                     "sparse matrix",
    # raised on that rank only: the others waited in the collective prediction
    "predict-features": "rank 3: X has 4 features, but DCSVC is expecting 5 features",
    "score-short-y": "rank 3: X has 100 rows but y has 99",
    # prediction parameters set after fit are checked on every rank, with rows or not
    # every rank's own error (set on every rank): no rank named
    "predict-voters": "The 'n_voters' parameter of CASVC must be an int",
    # each rank's own fitted model: rows routed by other centres, or a hang
    "predict-other-model": "ranks [3] hold another model than rank 0: predict_sharded needs "
                           "the same fitted model on every rank",
    # score_sharded scored them: a NaN target (R^2 0.0), text labels against numbers
    "score-nan-y": "rank 3: Input y contains NaN or infinity",
    "score-labels": "rank 3: Mix of label input types (string and number)",
    # score_sharded counted the unweighted rank's rows with weight 1 (fit refuses it)
    "score-weights-some": "sample_weight must be given on every rank that has rows (each "
                          "its own rows' weights) or on none: rank 0 and rank 3 differ",
    # a user's fit_sharded that gave the ranks other partitions: other models per rank
    # (or, with another partition count, an MPI error later)
    "custom-sharded-differs": "ranks [3] got another partition than rank 0 from "
                              "Unshared.fit_sharded (labels_, sizes_ or centers_ differ)",
    # a partitioner's fit_sharded: one rank's error left the others waiting
    "part-invalid": "rank 3: The 'n_partitions' parameter of KBalancePartitioner must be",
    "part-params": "ranks [3] were given other parameters than rank 0; every rank must call "
                   "fit_sharded with the same partitioner",
    "part-nan": "rank 3: Input contains NaN",
    "part-features": "the shards differ: rank 0 has 5 features (dense), rank 3 4 (dense)",
    # DKRR fitted misaligned columns and held other feature names on that rank
    "dkrr-names": "the shards have different feature names (rank 0 and rank 3)",
}


def _raised(tmp_path, n=4):
    """What every rank raised (spmd_errors.py writes one file per rank)."""
    return [(tmp_path / f"rank{r}.txt").read_text() if (tmp_path / f"rank{r}.txt").exists()
            else None for r in range(n)]


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_on_one_rank_is_the_same_error_on_every_rank(mpirun, case, tmp_path):
    # launched without -m mpi4py: the collective check alone must end every rank
    out = mpirun(4, "spmd_errors.py", case, tmp_path, mpi4py=False, timeout=120)
    assert out.returncode != 0
    raised = _raised(tmp_path)
    assert all(r is not None for r in raised), (raised, out.stderr)
    assert len(set(raised)) == 1, raised  # the same error on every rank
    # CollectiveError is the ValueError raised on every rank with the same message
    assert raised[0].startswith(f"CollectiveError: {BAD_INPUT[case]}"), raised[0]
    assert "\n" not in raised[0]  # one line
    assert "finished without error" not in out.stdout


def _one_rank_failed(mpirun, case, tmp_path):
    """What every rank of ``spmd_errors.py case`` raised (4 ranks, launched without
    -m mpi4py: the library alone must end every rank)."""
    out = mpirun(4, "spmd_errors.py", case, tmp_path, mpi4py=False, timeout=120)
    assert out.returncode != 0
    raised = _raised(tmp_path)
    assert all(r is not None for r in raised), (raised, out.stderr)
    return raised


def test_a_test_row_that_overflows_on_its_owner_ends_every_rank(mpirun, tmp_path):
    # predict_sharded: the rank that evaluates a row whose kernel overflows raised, and
    # the others waited in the next Alltoallv for good
    raised = _one_rank_failed(mpirun, "predict-overflow", tmp_path)
    own = [r for r, text in enumerate(raised) if text.startswith("FloatingPointError: ")]
    assert len(own) == 1, raised  # the owner: its own exception
    for r, text in enumerate(raised):
        if r != own[0]:
            assert text.startswith(f"CollectiveError: rank {own[0]} failed: "
                                   "FloatingPointError: "), text
    assert "kernel values overflow float64 on these rows" in raised[own[0]]


def test_a_custom_assign_failing_on_one_rank_ends_every_rank(mpirun, tmp_path):
    # predict_sharded and a search's validation rows: a user's assign (or centres, for
    # the vote) failing on one rank left the others waiting in the exchange for good
    raised = _one_rank_failed(mpirun, "predict-custom-assign", tmp_path)
    for r, text in enumerate(raised):
        if r == 3:  # the failing rank: its own exception (the vote's missing centres)
            assert not text.startswith("CollectiveError"), text
        else:
            assert text.startswith("CollectiveError: rank 3 failed: "), text


def test_one_shard_of_tiny_features_is_fine_next_to_the_others(mpirun, tmp_path):
    # the check of features too small is on all shards together, as the data's scale
    out = mpirun(4, "spmd_errors.py", "tiny-one-shard", tmp_path, mpi4py=False, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("finished without error") == 4


def test_too_few_rows_of_positive_weight_for_a_ranks_partitions(mpirun, tmp_path):
    # rank 3 keeps 1 row of positive weight for its 2 random partitions: the error
    # said to give every rank at least 2 rows (it gave 100)
    out = mpirun(4, "spmd_errors.py", "zero-weights-partitions", tmp_path, mpi4py=False,
                 timeout=120)
    assert out.returncode != 0
    raised = _raised(tmp_path)
    assert all(r is not None and "would be empty" in r and "sample_weight 0" in r
               for r in raised), (raised, out.stderr)


def test_exception_in_a_local_solve_ends_every_rank(mpirun, tmp_path):
    out = mpirun(4, "spmd_errors.py", "solver-raises", tmp_path, mpi4py=False, timeout=120)
    assert out.returncode != 0
    raised = _raised(tmp_path)
    assert all(r is not None and "injected failure in a local solve" in r for r in raised), \
        (raised, out.stderr)


def test_exception_in_a_tree_node_solve_ends_every_rank(mpirun, tmp_path):
    # a rank whose node solve failed never sent its node: the others waited in Recv
    out = mpirun(4, "spmd_errors.py", "tree-solve-raises", tmp_path, mpi4py=False,
                 timeout=180)
    assert out.returncode != 0
    raised = _raised(tmp_path)
    assert all(r is not None and "injected failure in a node solve" in r for r in raised), \
        (raised, out.stderr)


def test_exception_inside_dis_smo_on_one_rank_ends_every_rank(mpirun, tmp_path):
    # the ranks waited in the iteration's Allgather for the failed one (a hang),
    # or, with the error caught, matched its next collective (MPI aborted)
    stages = ("__init__", "candidates", "first_candidate", "second_candidate", "summary",
              "support")
    out = mpirun(4, "spmd_errors.py", "dissmo-raises", tmp_path, mpi4py=False, timeout=180)
    assert out.returncode != 0
    raised = _raised(tmp_path)
    assert all(r is not None for r in raised), (raised, out.stderr)
    for rank, text in enumerate(raised):  # six failed fits on every rank, then a clean one
        fits = text.removeprefix("RuntimeError: ").split(" | ")  # (the script's summary)
        assert len(fits) == len(stages), text
        for stage, fit in zip(stages, fits):
            assert f"injected failure in Dis-SMO's {stage}" in fit, (rank, fit)
            assert fit.startswith("RuntimeError" if rank == 3 else
                                  "CollectiveError: rank 3 failed"), (rank, fit)


@pytest.mark.parametrize("case, own, message", [
    # Cascade's check between passes (kernel values of the rank's leaves): the
    # others took the failing rank's next message as the check's, then hung
    ("violators-raises", "MemoryError", "injected failure in the check between passes"),
    # a user's splits that do not fit the data: rank 0's IndexError left the others
    # waiting (only ValueError and TypeError were shared)
    ("cv-raises", "IndexError", "index 400 is out of bounds"),
    ("cv-raises-sharded", "IndexError", "index 400 is out of bounds"),
    # any other exception of rank 0's validation of the data (root mode)
    ("validation-raises", "KeyError", "injected failure in the validation"),
])
def test_other_exceptions_on_one_rank_end_every_rank(mpirun, case, own, message, tmp_path):
    out = mpirun(4, "spmd_errors.py", case, tmp_path, mpi4py=False, timeout=180)
    assert out.returncode != 0
    raised = _raised(tmp_path)
    assert all(r is not None for r in raised), (raised, out.stderr)
    failing = 0 if case in ("cv-raises", "cv-raises-sharded", "validation-raises") else 3
    for rank, text in enumerate(raised):
        text = text.removeprefix("RuntimeError: ")  # (the cv cases' summary)
        assert message in text, (rank, text)
        # the failing rank raises its own exception, the others name it
        assert text.startswith(f"{own}:" if rank == failing else
                               f"CollectiveError: rank {failing}"), (rank, text)
    assert "finished without error" not in out.stdout


def test_uncaught_exception_on_one_rank_aborts_the_job_with_mpi4py(mpirun, tmp_path):
    out = mpirun(4, "spmd_errors.py", "uncaught", tmp_path, mpi4py=True, timeout=120)
    assert out.returncode != 0
    assert "user code failed on one rank" in out.stderr


@pytest.mark.parametrize("case, calls", [
    # a scorer that failed on one rank under cross_val_score's error_score=nan: the
    # ranks fell out of step, each read another call's message as its own (a model
    # digest printed as an error, "another model") and the job hung
    ("cross_val_score", "rank 0 in predict_sharded, rank 1 in fit"),
    ("fit-vs-predict", "rank 0 in predict_sharded, rank 1 in fit"),
    ("partitioner-vs-load", "rank 0 in load_svmlight_shard, rank 1 in fit_sharded"),
    # a call opening an MPI session against one that does not: they hung
    ("fit-vs-load", "rank 0 in fit, rank 1 in load_svmlight_shard"),
    ("predict-vs-partitioner", "rank 0 in predict_sharded, rank 1 in fit_sharded"),
])
def test_ranks_out_of_step_end_the_job(mpirun, case, calls, tmp_path):
    from sklearn.datasets import dump_svmlight_file, make_classification

    X, y = make_classification(n_samples=40, n_features=6, random_state=0)
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, y, str(path), zero_based=False)
    for with_mpi4py in (True, False):
        out = mpirun(2, "spmd_out_of_step.py", case, path, mpi4py=with_mpi4py, timeout=120)
        assert out.returncode != 0 and "finished" not in out.stdout, out.stdout + out.stderr
        lines = [line for line in out.stderr.splitlines()
                 if "in different collective calls" in line]
        assert len(lines) == 1 and f"({calls})" in lines[0], out.stderr  # rank 0's line
        assert "error_score='raise'" in lines[0]


def test_ctrl_c_ends_the_job_during_the_solves(mpirun):
    # SIGINT to mpiexec reaches every rank; each rank's native solve stops (it ran
    # to its end before, here: never) and python -m mpi4py aborts the job
    import signal
    import subprocess
    import time

    import cakernels

    # the package under test first (as the mpirun fixture's children import it)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(cakernels.__file__).resolve().parent.parent)]
        + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.Popen([MPIEXEC, "-n", "2", sys.executable, "-m", "mpi4py",
                             HERE / "spmd_interrupt.py"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "start", proc.stderr.read()
        time.sleep(1.0)  # the solves run
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the job did not end within 120 s of SIGINT")
    assert proc.returncode != 0 and "finished without error" not in out
    assert "KeyboardInterrupt" in err and "smo_solve(" in err, err[-2000:]


def test_ctrl_c_ends_the_cli_job(mpirun, tmp_path):
    # the README's `mpiexec -n 4 cakernels fit ... --backend mpi` (not python -m mpi4py):
    # one rank returned 130 and waited in MPI_Finalize while the other spun in a
    # collective; the job ran on until a second Ctrl-C
    import signal
    import subprocess
    import time

    import cakernels
    from cakernels.datasets import get_data_home

    # 2,000 rows of a9a at C = 1e6: Dis-SMO's first-order pair zigzags for minutes
    # (README, DisSMOSVC: 10^6 iterations in 68 s on one process)
    source = Path(get_data_home()) / "a9a" / "a9a"
    if not source.exists():
        pytest.fail(f"{source} is missing: set CAKERNELS_DATA to the benchmark datasets")
    with open(source) as fh:
        (tmp_path / "slow.svm").write_text("".join(next(fh) for _ in range(2000)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(cakernels.__file__).resolve().parent.parent)]
        + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.Popen([MPIEXEC, "-n", "2", Path(sys.executable).with_name("cakernels"),
                             "fit", tmp_path / "slow.svm", "-o", tmp_path / "m.skops",
                             "--method", "dissmosvc", "--C", "1e6", "--backend", "mpi",
                             "--verbose"],
                            env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        # iterating: its first progress line (a fixed 5 s sleep was too short on a busy
        # machine: SIGINT reached the ranks before the command line's handler)
        seen, deadline = [], time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            seen.append(line)
            if not line or "iteration" in line:
                break
        assert "iteration" in seen[-1], "".join(seen)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        err = "".join(seen) + err
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the job did not end within 60 s of one SIGINT")
    assert proc.returncode == 130, err
    assert "interrupted (rank" in err and "aborting the MPI job" in err, err
    assert not (tmp_path / "m.skops").exists()


@pytest.mark.parametrize("case", ["dies", "interrupt-one-rank"])
def test_a_rank_that_dies_mid_fit_ends_the_job(mpirun, case, tmp_path):
    # (a KeyboardInterrupt on one rank alone is not shared: python -m mpi4py ends the job)
    out = mpirun(4, "spmd_errors.py", case, tmp_path, mpi4py=True, timeout=120)
    assert out.returncode != 0
    assert "finished without error" not in out.stdout


@pytest.mark.parametrize("n", [2, 4])
def test_sharded_libsvm_reading_equals_the_whole_file(mpirun, n, tmp_path, data_home):
    import gzip

    from sklearn.datasets import dump_svmlight_file, make_classification

    X, y = make_classification(n_samples=301, n_features=9, random_state=0)
    X[np.abs(X) < 0.8] = 0.0
    one = tmp_path / "one_based.svm"
    dump_svmlight_file(X, y, str(one), zero_based=False)
    zero = tmp_path / "zero_based.svm"
    dump_svmlight_file(X, y, str(zero), zero_based=True)
    gz = tmp_path / "one_based.svm.gz"
    gz.write_bytes(gzip.compress(one.read_bytes()))
    cut = tmp_path / "cut.svm"
    cut.write_bytes(one.read_bytes().rstrip(b"\n"))
    # a feature index beyond 32 bits on the last line: only the last rank reads it
    huge = tmp_path / "huge_index.svm"
    huge.write_bytes(one.read_bytes() + b"1 3000000000:1.0\n")
    # a missing file and a directory: load_svmlight's exceptions (it was a ValueError
    # "no such file" for both)
    missing, folder = tmp_path / "missing.svm", tmp_path
    # one line longer than a rank's byte range: that rank read no row, and a sharded
    # fit of the file refused its empty shard; now rows move to it
    long = tmp_path / "long_line.svm"
    rows = [f"{1 if i % 2 else -1} 1:{i / 40:.3f} 2:{i / 80:.3f}" for i in range(40)]
    rows[20] = "1 " + " ".join(f"{j}:1" for j in range(1, 300))
    long.write_text("\n".join(rows) + "\n")
    # a first line longer than half the file: rank 0 read 1 row, rank 1 300 (the
    # random partitioner then left partitions empty); rows move to equal blocks
    first = tmp_path / "long_first.svm"
    first.write_text("1 " + " ".join(f"{j}:1" for j in range(1, 40001)) + "\n"
                     + "".join(f"{1 if i % 2 else -1} 1:{i / 300:.3f} 2:{i / 600:.3f}\n"
                               for i in range(300)))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # a pipe (<(zcat f.gz)): refused, not read as "no such file"
    # a bad value on line 290, in the last rank's byte range: the message names the
    # line as numbered in the whole file (and in the compressed copy rank 0 reads)
    rows = one.read_bytes().splitlines(True)
    rows[289] = b"1 1:0.5 2:abc\n"
    bad = tmp_path / "bad_value.svm"
    bad.write_bytes(b"".join(rows))
    bad_gz = tmp_path / "bad_value.svm.gz"
    bad_gz.write_bytes(gzip.compress(bad.read_bytes()))
    files = [one, zero, gz, cut, data_home / "a9a" / "a9a", huge, missing, folder, long,
             first, fifo, bad, bad_gz]
    lines = _lines(mpirun(n, "spmd_shard.py", *files))
    assert len(lines) == len(files)
    errors = {line["path"]: line.pop("errors") for line in lines if "errors" in line}
    lines = [line for line in lines if "equal" in line]
    assert len(errors[str(huge)]) == n and all("beyond 2,147,483,647" in e
                                               for e in errors[str(huge)]), errors
    assert errors[str(missing)] == [f"FileNotFoundError: no such file: {missing}"] * n, errors
    assert errors[str(folder)] == [f"IsADirectoryError: {folder}: is a directory, not a "
                                   "LIBSVM file"] * n, errors
    assert len(errors[str(fifo)]) == n and all(
        e.startswith(f"ValueError: {fifo}: not a regular file (a pipe") for e in errors[str(fifo)])
    for path, rank in ((bad, n - 1), (bad_gz, 0)):
        assert errors[str(path)] == [
            f"CollectiveError: rank {rank}: {path}: could not load it as a LIBSVM/svmlight "
            "file: line 290 ('1 1:0.5 2:abc'): ValueError: could not convert string to "
            "float: b'abc'"] * n, errors
    for line in lines:
        assert line["equal"], line
        assert len(line["rows"]) == n
    # uncompressed files are split into blocks of about equal size
    a9a = next(line for line in lines if line["path"].endswith("a9a"))
    assert max(a9a["rows"]) - min(a9a["rows"]) < 0.01 * sum(a9a["rows"])
    # the long line's file: with 4 ranks, ranks 1 and 2 read none (their byte ranges
    # lie inside the long line): equal blocks now; with 2 ranks nothing moves
    assert lines[-2]["path"] == str(long)
    assert lines[-2]["rows"] == ([10] * 4 if n == 4 else [21, 19]), lines[-2]
    assert lines[-1]["path"] == str(first)
    assert lines[-1]["rows"] == ([75, 75, 75, 76] if n == 4 else [150, 151]), lines[-1]
    # arguments: one error on every rank (they hung), no rank named for the file's own
    cases = {line["case"]: line["errors"] for line in _lines(
        mpirun(n, "spmd_shard.py", "--arguments", zero))}
    mismatch = (f"CollectiveError: ranks [{n - 1}] were given other arguments than rank 0 "
                "(zero_based, n_features")
    expected = {"zero_based": mismatch, "n_features": mismatch,
                "invalid": f"CollectiveError: rank {n - 1}: n_features must be a positive int",
                "whole-file": f"CollectiveError: {zero}: feature index 0 occurs in",
                # a node's copy of another size: rows were lost or read twice, silently
                "other-size": f"CollectiveError: ranks [{n - 1}] see another file than "
                              "rank 0's",
                # a file of each rank's own rows, of one size: pointing to load_svmlight
                "own-file": f"CollectiveError: ranks {list(range(1, n))} see another file "
                            "than rank 0's"}
    for case, start in expected.items():
        errors = cases[case]
        assert len(errors) == n and len(set(errors)) == 1, (case, errors)
        assert errors[0].startswith(start), (case, errors)
    assert "load_svmlight(path, n_features=...)" in cases["own-file"][0]
    # identical copies under other paths (node-local staging): read as one file
    assert cases["copies"] == [None] * n, cases["copies"]

@pytest.mark.parametrize("n", [2, 4])
def test_collective_prediction_and_score_equal_serial(mpirun, n):
    # the last rank holds no test row; the searches delegate to best_estimator_;
    # labels as a column; R^2 of targets near 1e9
    lines = _lines(mpirun(n, "spmd_predict.py"))
    assert [line["check"] for line in lines] == [
        "DCSVC", "DisSMOSVC", "BKMSVC", "CASVCCV", "BKRR2-0", "BKRR2CV-0", "BKRR2-1e+09",
        "BKRR2CV-1e+09", "scale-DisSMOSVC", "scale-CASVCCV", "zero-weights-clf",
        "zero-weights-reg", "no-rows-clf", "no-rows-reg", "one-row-reg"]
    for line in lines:
        assert line["equal"], line
    got = {line["check"]: line["got"] for line in lines if "got" in line}
    for name in ("zero-weights-clf", "zero-weights-reg"):
        assert got[name].startswith("ValueError: Sample weights must contain at least one "
                                    "non-zero number"), got[name]
    for name in ("no-rows-clf", "no-rows-reg"):
        assert got[name] == "ValueError: no test rows on any rank: nothing to score", got
    assert got["one-row-reg"] == ("returned nan | warning: R^2 score is not well-defined "
                                  "with less than two samples."), got


@pytest.mark.parametrize("n", [1, 2])
def test_communicator_arguments(mpirun, n):
    # not an intra-communicator: one clear error on every rank (an intercommunicator
    # was accepted and the ranks ended with different models; other objects raised
    # AttributeErrors); a Communicator is unwrapped; fit_sharded takes a raw comm
    lines = _lines(mpirun(n, "spmd_comm_args.py"))
    got = {line["check"]: line["got"] for line in lines}
    assert all(line["same"] for line in lines), lines
    for name, kind in (("backend-str", "str"), ("predict-int", "int"),
                       ("partition-str", "str")):
        assert got[name] == ("TypeError: comm must be an mpi4py intra-communicator "
                             "(MPI.COMM_WORLD or a sub-communicator such as "
                             f"COMM_WORLD.Split(...)), got {kind}"), got
    assert got["null"].startswith("ValueError: comm is MPI.COMM_NULL"), got
    if n > 1:
        assert got["intercomm"].startswith("ValueError: comm is an intercommunicator"), got
    assert got["unwrapped"] == got["fit-sharded-raw-comm"] == got["empty-dense-shard"] == "ok"
    assert got["fit-sharded-override-halo"] == "ok", got  # its own partition's halos
    # its own partition's rows, not the base class's owners_/rows_stay_local_
    assert got["relabelled-random-sharded"] == "ok", got
    assert got["object-arrays"] == "ok object | ok", got  # object arrays by content
    # (one rank fits with fit itself)
    assert ("_Dealt overrides fit but not fit_sharded" in got["fit-override-sharded"]
            if n > 1 else got["fit-override-sharded"] == "ok"), got
    if n > 1:  # one rank's check of a user's partition failing otherwise than ValueError
        assert got["custom-unreadable-sharded"].startswith("CollectiveError: rank"), got
    for mode in ("sharded", "root"):  # a custom partitioner's labels outside its partitions
        assert "_Bad.fit's labels_ must give partition indices in [0, 2)" in \
            got[f"custom-labels-{mode}"], got


@pytest.mark.parametrize("n", [2, 4])
def test_exact_distributed_assignment_equals_serial(mpirun, n):
    # the exact distributed K-balance/FCFS assignment of unequal (even empty)
    # shards equals the serial assignment of the stacked rows, and
    # FCFSPartitioner.fit_sharded equals FCFSPartitioner.fit
    lines = _lines(mpirun(n, "spmd_partition.py"))
    assert [line["check"] for line in lines] == ["greedy"] * 6 + ["fcfs"] * 2 + [
        "random-small-shard", "seed-none", "seed-instance", "rare-distinct", "rare-distinct",
        "local-empty"]
    for line in lines:
        assert line["equal"], line
        if line["check"] == "greedy":
            assert 1 <= line["events"] <= line["P"] + 1, line
        elif line["check"] == "fcfs":
            assert line["centres"] and 0 < line["rows"] < line["m"], line
        elif line["check"] == "random-small-shard" and n > 1:  # one clear error
            assert "would be empty" in line["errors"][0], line
        elif line["check"] == "local-empty" and n == 4:
            assert "are empty" in line["errors"][0] and "'exact'" in line["errors"][0], line



@pytest.mark.parametrize("n", [1, 2, 4])
def test_dkrr_equals_kernel_ridge_under_mpi(mpirun, n):
    from cakernels._solvers import scalapack

    try:
        scalapack.load()
    except ImportError as exc:  # the mkl wheel (a test dependency) is missing
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(exc))
    lines = {line["check"]: line for line in _lines(mpirun(n, "spmd_dkrr.py"))}
    grid = {1: [1, 1], 2: [1, 2], 4: [2, 2]}[n]
    for check in ("single", "multi", "weights"):
        line = lines[check]
        assert line["rel_root"] <= 1e-8 and line["rel_sharded"] <= 1e-8, line
        assert line["grid"] == grid
        # the kernel matrix is spread: about 8 n^2 / P bytes per rank (blocks of 64)
        assert line["memory_per_rank"] <= 8 * 700 * 700 / n * 1.25
    assert lines["weights"]["kept"] == [525, 525]  # rows of weight 0 are not kept
    assert lines["huge-weights"]["rel"] <= 1e-8, lines["huge-weights"]
    # a shard of weight 0 (the last rank's) is fine: DKRR gathers every row
    assert lines["zero-shard"]["rel"] <= 1e-8, lines["zero-shard"]
    # five targets in blocks of 2 rows (root and sharded mode)
    assert max(lines["many-targets"]["rel"]) <= 1e-8, lines["many-targets"]
    # the overflow check of the one-process fit, on every rank (not 'not positive definite')
    messages = lines["magnitude"]["messages"]
    assert len(messages) == n and all(m and "feature values too large" in m for m in messages)
    messages = lines["memory"]["messages"]
    assert len(messages) == n and len(set(messages)) == 1 and messages[0] is not None
    assert "per rank" in messages[0] and "8 n^2 / P" in messages[0] and "BKRR2" in messages[0]
    # pdpocon's condition estimate: no warning on a well-conditioned system; the
    # one-process LinAlgWarning on every rank, with its estimate within 10x, on an
    # ill-conditioned one; an error on every rank on a numerically singular one
    # (ScaLAPACK had solved all three silently)
    well, ill, singular = (lines[f"rcond-{lam}"] for lam in ("1e-09", "1e-13", "1e-16"))
    assert well["serial"] == [] and well["ranks"] == [[[], None]] * n, well
    assert len(ill["serial"]) == 1 and len(ill["ranks"]) == n, ill
    for rconds, error in ill["ranks"]:
        assert error is None and len(rconds) == 1, ill
        assert 0.1 < rconds[0] / ill["serial"][0] < 10, ill
    assert len(singular["ranks"]) == n
    for rconds, error in singular["ranks"]:
        assert rconds == [] and "numerically singular" in error and "Increase lam" in error
    # partitioned KRR: the ranks of one node add up (each fits alone, not together)
    node = lines["node-memory"]["ranks"]
    assert len(node) == n and all(ok is None for _, ok in node), node
    if n > 1:
        assert len({e for e, _ in node}) == 1 and node[0][0] is not None, node
        assert f"the {n} ranks of this node solve at the same time" in node[0][0], node
        assert "fewer ranks per node" in node[0][0]
    else:
        assert node[0][0] is not None and "ranks of this node" not in node[0][0], node
    # kernel values that overflow: one FloatingPointError on every rank
    overflow = lines["kernel-overflow"]["ranks"]
    assert len(overflow) == n and all(
        e and e.startswith("FloatingPointError: kernel values overflow float64")
        for e in overflow), overflow
    # the one-process fit's diagnoses, on every rank; a block larger than n is one block
    for diagonal, coefficients, big_block in lines["one-process-diagnoses"]["ranks"]:
        assert diagonal.startswith("FloatingPointError: kernel values overflow float64: "
                                   "K(x, x) is not finite for 40 of 40 rows"), diagonal
        assert coefficients.startswith("FloatingPointError: kernel ridge (lam=0.001) "
                                       "produced non-finite coefficients"), coefficients
        assert big_block <= 1e-8
    assert len(lines["one-process-diagnoses"]["ranks"]) == n
    # root mode: every rank has the DataFrame's names, then none after an array refit
    names = [f"f{j}" for j in range(6)]
    assert lines["feature-names"]["ranks"] == [[names, None]] * n, lines["feature-names"]
    # a failure on one rank after the rows are gathered (its kernel block, before the
    # factorisation; its row norms, after it): every rank raises, none waits for good
    failures = lines["one-rank-failure"]["ranks"]
    assert len(failures) == n
    for r, (kernel, norms, again, scalar) in enumerate(failures):
        for message in (kernel, norms):
            if r == n - 1:  # the failing rank: its own exception
                assert message == "MemoryError: simulated: this rank's memory ran out"
            else:
                assert message.startswith(f"CollectiveError: rank {n - 1} failed: "
                                          "MemoryError: simulated"), message
        assert again <= 1e-8 and scalar <= 1e-8, failures


def test_backend_mpi_without_mpi4py_names_the_extra(spawn):
    # mpi4py hidden from the child: backend='mpi' is an ImportError naming the extra,
    # raised only when a fit starts (importing the package never imports mpi4py)
    code = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "mpi4py" or name.startswith("mpi4py."):
            raise ImportError("No module named 'mpi4py'")
sys.meta_path.insert(0, Hide())
import numpy as np
from cakernels import CASVC
from cakernels.backends import MPIBackend
X = np.random.RandomState(0).randn(40, 3); y = np.arange(40) % 2
assert "mpi4py" not in sys.modules
for backend in ("mpi", MPIBackend(sharded=True)):
    try:
        CASVC(2, backend=backend).fit(X, y)
    except ImportError as exc:
        print(exc)
from cakernels import DKRR
try:
    DKRR(backend="mpi").fit(X, y)
except ImportError as exc:
    print(exc)
# a model fitted without MPI: predict_sharded and score_sharded are one process's
# predict and score (they needed mpi4py)
clf = CASVC(2, random_state=0).fit(X, y)
assert (clf.predict_sharded(X) == clf.predict(X)).all()
assert clf.score_sharded(X, y) == clf.score(X, y)
"""
    out = spawn([sys.executable, "-c", code])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 3
    assert all('pip install "cakernels[mpi]"' in line for line in lines)
    # DKRR names the extra with ScaLAPACK (the mpi extra alone is not enough for it)
    assert 'pip install "cakernels[scalapack]"' in lines[2]


def test_an_mpi4py_that_cannot_load_its_mpi_library_names_the_extra(spawn, tmp_path, requires):
    # mpi4py installed, its MPI library not loadable (a removed MPI wheel, Windows
    # without MS-MPI): mpi4py raises RuntimeError("cannot load MPI library ..."), which
    # reached users raw (the CLI: "error: RuntimeError: cannot load MPI library")
    requires("mpi4py")
    env = dict(os.environ, MPI4PY_LIBMPI=str(tmp_path / "missing" / "libmpi.so"))
    code = """
import numpy as np
from cakernels import CASVC, DKRR
from cakernels.datasets import load_svmlight_shard
X = np.random.RandomState(0).randn(40, 3); y = np.arange(40) % 2
for fit in (lambda: CASVC(2, backend="mpi").fit(X, y),
            lambda: DKRR(backend="mpi").fit(X, y.astype(float)),
            lambda: load_svmlight_shard("unused.svm")):
    try:
        fit()
    except ImportError as exc:
        print(exc)
"""
    out = spawn([sys.executable, "-c", code], env=env)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 3, out.stdout
    for line in lines:
        assert 'pip install "cakernels[mpi]"' in line
        assert "mpi4py is installed but cannot load an MPI library: cannot load MPI " \
               "library" in line and "missing" in line
    assert 'pip install "cakernels[scalapack]"' in lines[1]
    data = tmp_path / "d.svm"
    data.write_text("".join(f"{1 if i % 2 else -1} 1:{i / 10}\n" for i in range(8)))
    cli = spawn([sys.executable, "-m", "cakernels", "fit", str(data), "-o",
                 str(tmp_path / "m.skops"), "--backend", "mpi"], env=env)
    assert cli.returncode != 0
    err = cli.stderr.strip().splitlines()
    assert len(err) == 1 and "RuntimeError" not in err[0], cli.stderr
    assert 'pip install "cakernels[mpi]"' in err[0] and "cannot load an MPI library" in err[0]
    info = spawn([sys.executable, "-m", "cakernels", "info"], env=env)
    assert info.returncode == 0, info.stderr
    mpi_line = [line for line in info.stdout.splitlines() if line.startswith("MPI ")]
    assert len(mpi_line) == 1 and "unusable (cannot load MPI library" in mpi_line[0], \
        info.stdout


# --------------------------------------------------------------------------- command line


@pytest.fixture
def mpi_cli(mpirun, spawn):
    """``mpi_cli(n, *args)``: the real ``cakernels`` executable under mpiexec."""
    exe = Path(sys.executable).with_name("cakernels")

    def run(n, *args, timeout=300):
        return spawn([MPIEXEC, "-n", str(n), exe, *args], timeout=timeout)

    return run


@pytest.fixture
def clf_split(tmp_path):
    from sklearn.datasets import dump_svmlight_file, make_classification

    X, y = make_classification(n_samples=1500, n_features=10, n_informative=6,
                               random_state=0)
    dump_svmlight_file(X[:1200], y[:1200], str(tmp_path / "train.svm"), zero_based=False)
    dump_svmlight_file(X[1200:], y[1200:], str(tmp_path / "test.svm"), zero_based=False)
    return tmp_path / "train.svm", tmp_path / "test.svm"


def _accuracy(out):
    line = next(line for line in out.stdout.splitlines() if line.startswith("accuracy:"))
    return float(line.split()[1])


@pytest.mark.parametrize("n", [2, 4])
def test_cli_fit_under_mpiexec_reads_sharded_and_writes_one_model(mpi_cli, cakernels_cli,
                                                                   clf_split, tmp_path, n):
    train, test = clf_split
    model = tmp_path / f"mpi{n}.pkl"
    out = mpi_cli(n, "fit", train, "-o", model, "--method", "bkmsvc", "--backend", "mpi",
                  "-p", "8")
    assert out.returncode == 0, out.stderr
    summary = [line for line in out.stdout.splitlines() if "saved to" in line]
    assert len(summary) == 1  # only rank 0 prints (and writes)
    assert f"{n} MPI ranks, sharded input" in summary[0]
    assert not list(tmp_path.glob(f".mpi{n}.pkl.*"))  # no temporary file left behind
    # evaluated later, without MPI
    mpi = cakernels_cli("evaluate", model, test)
    assert mpi.returncode == 0, mpi.stderr
    serial_model = tmp_path / "serial.pkl"
    assert cakernels_cli("fit", train, "-o", serial_model, "--method", "bkmsvc",
                         "-p", "8").returncode == 0
    serial = cakernels_cli("evaluate", serial_model, test)
    assert _accuracy(mpi) >= _accuracy(serial) - 0.03
    import skops.io as sio

    meta = sio.load(model, trusted=sio.get_untrusted_types(file=model))["metadata"]
    assert meta["mpi_ranks"] == n and meta["n_samples"] == 1200


def test_cli_fit_root_mode_equals_serial(mpi_cli, cakernels_cli, tmp_path):
    # a registry dataset or the demo is loaded by rank 0 (root mode): the serial model
    out = mpi_cli(2, "fit", "demo", "-o", tmp_path / "mpi.pkl", "--method", "fcfssvc",
                  "--backend", "mpi", "-p", "4")
    assert out.returncode == 0, out.stderr
    assert "root mode" in out.stdout
    assert cakernels_cli("fit", "demo", "-o", tmp_path / "serial.pkl", "--method", "fcfssvc",
                         "-p", "4").returncode == 0
    preds = [cakernels_cli("predict", tmp_path / m, "demo").stdout for m in ("mpi.pkl",
                                                                              "serial.pkl")]
    assert preds[0] == preds[1] and preds[0]


def test_cli_fit_root_mode_gives_the_kernel_width_note(mpi_cli, cakernels_cli, tmp_path):
    # the one-process fit's note that the RBF kernel is nearly the identity, once
    # (rank 0 holds every row in root mode); fit --backend mpi printed none
    args = ("fit", "demo_regression", "--sigma", "0.01")
    serial = cakernels_cli(*args, "-o", tmp_path / "serial.pkl")
    out = mpi_cli(2, *args, "-o", tmp_path / "mpi.pkl", "--backend", "mpi")
    assert serial.returncode == 0 and out.returncode == 0, out.stderr
    notes = [line for line in out.stderr.splitlines() if "nearly the identity" in line]
    assert len(notes) == 1, out.stderr
    # the one-process note itself (--standardize applies under --backend mpi too)
    assert "Standardize the features (--standardize)" in notes[0]
    assert notes[0] in serial.stderr


def test_cli_sharded_fit_and_search_give_the_kernel_width_note(mpi_cli, cakernels_cli,
                                                                tmp_path):
    # sharded mode printed no note: rank 0's rows give it when they are at least the
    # 1,000 rows the one-process note samples
    from sklearn.datasets import dump_svmlight_file, make_classification

    X, y = make_classification(n_samples=2200, n_features=10, random_state=0)
    data = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(data), zero_based=False)
    runs = {"fit": ("fit", data, "--gamma", "1e4", "-p", "4"),
            "search": ("search", data, "--method", "casvc", "--gammas", "1e4", "1e5",
                       "--Cs", "1", "-p", "4", "--cv", "2")}
    for name, args in runs.items():
        serial = cakernels_cli(*args, "-o", tmp_path / f"{name}-serial.skops")
        out = mpi_cli(2, *args, "-o", tmp_path / f"{name}-mpi.skops", "--backend", "mpi")
        assert serial.returncode == 0 and out.returncode == 0, (name, out.stderr)
        notes = [line for line in out.stderr.splitlines() if "nearly the identity" in line]
        assert len(notes) == 1 and "nearly the identity" in serial.stderr, (name, out.stderr)
    # 600 rows per rank: fewer than the note's sample, so no note (it could misfire)
    small = tmp_path / "small.svm"
    dump_svmlight_file(X[:1200], y[:1200], str(small), zero_based=False)
    out = mpi_cli(2, "fit", small, "--gamma", "1e4", "-p", "4", "-o", tmp_path / "s.skops",
                  "--backend", "mpi")
    assert out.returncode == 0 and "nearly the identity" not in out.stderr, out.stderr


def test_cli_errors_under_mpiexec_are_one_line(mpi_cli, clf_split, tmp_path):
    train, _ = clf_split
    out = mpi_cli(4, "fit", tmp_path / "missing.svm", "-o", tmp_path / "m.pkl",
                  "--backend", "mpi")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"cakernels: error: no such file: {tmp_path / 'missing.svm'}"]
    out = mpi_cli(2, "fit", train, "-o", tmp_path / "m.pkl")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "without --backend mpi" in lines[0]
    assert not (tmp_path / "m.pkl").exists()


def _per_rank(tmp_path, rank1_args, other_args):
    """A launcher for mpiexec that runs ``cakernels`` with ``rank1_args`` on rank 1 and
    ``other_args`` elsewhere: what differs between nodes (a file, a folder)."""
    import shlex

    exe = Path(sys.executable).with_name("cakernels")
    script = tmp_path / "per_rank.sh"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "${{PMI_RANK:-0}}" = 1 ]; then exec {shlex.quote(str(exe))} '
        f"{shlex.join(map(str, rank1_args))}; fi\n"
        f"exec {shlex.quote(str(exe))} {shlex.join(map(str, other_args))}\n")
    script.chmod(0o755)
    return script


def test_cli_mpi_input_on_some_ranks_only_is_one_error(mpirun, spawn, clf_split, tmp_path):
    # rank 0 read its shard of the file while rank 1, without it, loaded a registry
    # name in root mode: mismatched collectives, the job hung without a word
    train, _ = clf_split
    for command in ("fit", "search"):
        out_file = tmp_path / f"{command}.skops"
        rest = ["-o", out_file, "--backend", "mpi"] + (["--Cs", "1", "-q"]
                                                       if command == "search" else [])
        script = _per_rank(tmp_path, [command, tmp_path / "elsewhere.svm", *rest],
                           [command, train, *rest])
        out = spawn([MPIEXEC, "-n", "2", script], timeout=120)
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip().splitlines() == [
            f"cakernels: error: {train}: the file exists on ranks [0] but not on ranks [1]; "
            "with --backend mpi every rank reads its own rows of the same LIBSVM file: put it "
            "on a file system every node sees, or the same copy at the same path on every "
            "node"], out.stderr
        assert not out_file.exists()


def test_cli_mpi_output_folder_checked_by_the_writing_rank(mpirun, spawn, clf_split, tmp_path):
    # every rank checked -o before MPI started: rank 1 without the folder exited
    # silently and rank 0 waited in MPI_Init forever (and the other way round)
    train, _ = clf_split
    exe = Path(sys.executable).with_name("cakernels")
    (tmp_path / "out").mkdir()
    (tmp_path / "node2").mkdir()  # a working folder without out/
    script = tmp_path / "in_node2.sh"
    for command in ("fit", "search"):
        extra = " --Cs 1 -q" if command == "search" else ""
        for rank, ok in ((1, True), (0, False)):  # only rank 0 writes
            script.write_text(
                "#!/bin/sh\n"
                f'if [ "${{PMI_RANK:-0}}" = {rank} ]; then cd {tmp_path / "node2"}; fi\n'
                f"exec {exe} {command} {train} -o out/m.skops --backend mpi{extra}\n")
            script.chmod(0o755)
            out = spawn([MPIEXEC, "-n", "2", script], cwd=tmp_path, timeout=120)
            if ok:
                assert out.returncode == 0, out.stderr
                (tmp_path / "out" / "m.skops").unlink()
            else:  # one error on every rank, no hang
                assert out.returncode == 2
                assert out.stderr.strip().splitlines() == [
                    "cakernels: error: cannot write out/m.skops: the folder out does not "
                    "exist"], out.stderr


def test_cli_mpi_refuses_to_overwrite_a_registry_dataset(mpirun, spawn, tmp_path):
    # refused on one process ("it is the input"), replaced by the model under MPI
    import shutil

    from cakernels.datasets import get_data_home

    home = tmp_path / "data"
    (home / "bodyfat").mkdir(parents=True)
    source = Path(get_data_home()) / "bodyfat" / "bodyfat"
    if not source.exists():
        pytest.fail(f"{source} is missing: set CAKERNELS_DATA to the benchmark datasets")
    shutil.copy(source, home / "bodyfat" / "bodyfat")
    before = (home / "bodyfat" / "bodyfat").read_bytes()
    exe = Path(sys.executable).with_name("cakernels")
    env = dict(os.environ, CAKERNELS_DATA=str(home))
    for command in ("fit", "search"):
        extra = ["--sigmas", "1", "-q"] if command == "search" else []
        out = spawn([MPIEXEC, "-n", "2", exe, command, "bodyfat", "-o",
                     home / "bodyfat" / "bodyfat", "--backend", "mpi", *extra],
                    env=env, timeout=120)
        assert out.returncode == 2 and "it is the input" in out.stderr, out.stderr
        assert out.stderr.count("error") == 1, out.stderr
        assert (home / "bodyfat" / "bodyfat").read_bytes() == before


def test_cli_mpi_tie_note_advises_standardize(mpi_cli, tmp_path):
    # the one-process note's advice, --standardize, which --backend mpi now takes too
    from sklearn.datasets import dump_svmlight_file, make_regression

    X, y = make_regression(n_samples=150, n_features=4, noise=1.0, random_state=0)
    dump_svmlight_file(X * 1000.0, y, str(tmp_path / "train.svm"), zero_based=False)
    out = mpi_cli(2, "search", tmp_path / "train.svm", "-o", tmp_path / "m.skops", "-q",
                  "--n-partitions", "2", "--sigmas", "0.5", "2", "--lams", "1e-6", "1e-3",
                  "--backend", "mpi")
    assert out.returncode == 0, out.stderr
    (note,) = [line for line in out.stderr.splitlines() if "scored the same" in line]
    assert note.endswith("widen the grid (or standardize the features, --standardize)"), note


def test_cli_standardize_under_mpi_is_the_one_process_model(mpi_cli, cakernels_cli,
                                                             tmp_path):
    # --standardize was refused under --backend mpi ("standardize the file beforehand":
    # the features only, and a regression target far from 0 was then fitted without an
    # intercept, R^2 0.005 on bodyfat); the scalers of all ranks' rows (sharded: pooled
    # from every rank's counts, means and variances) now give fit --standardize's model
    from sklearn.datasets import dump_svmlight_file, make_regression

    X, y = make_regression(n_samples=300, n_features=5, noise=1.0, random_state=0)
    X = X * [1, 1e3, 1e-2, 5, 1] + [0, 1e4, 0, 3, 7]
    y = y / y.std() * 8 + 50
    train = tmp_path / "train.svm"
    dump_svmlight_file(X, y, str(train), zero_based=False)

    def predictions(model, data=train):
        out = cakernels_cli("predict", model, data, "-o", tmp_path / "p.txt")
        assert out.returncode == 0, out.stderr
        return np.loadtxt(tmp_path / "p.txt")

    runs = {"fit": ["-p", "4"], "search": ["-p", "2", "--sigmas", "1", "4", "--lams", "1e-3",
                                           "--cv", "3", "-q"]}
    for command, extra in runs.items():
        ref = cakernels_cli(command, train, "-o", tmp_path / "one.skops", "--standardize",
                            *extra)
        assert ref.returncode == 0, ref.stderr
        for n in (2, 3):
            out = mpi_cli(n, command, train, "-o", tmp_path / f"mpi{n}.skops",
                          "--standardize", "--backend", "mpi", *extra)
            assert out.returncode == 0, out.stderr
            last = out.stdout.splitlines()[-1]
            assert f"standardized, target centred, {n} MPI ranks, sharded input" in last
            assert out.stdout.splitlines()[:-1] == ref.stdout.splitlines()[:-1]
            np.testing.assert_allclose(predictions(tmp_path / f"mpi{n}.skops"),
                                       predictions(tmp_path / "one.skops"), rtol=1e-9)
        ev = cakernels_cli("evaluate", tmp_path / "mpi2.skops", train)
        assert "standardized, target centred" in ev.stdout, ev.stdout
        assert float(ev.stdout.split("R^2:")[1].split()[0]) > 0.9
    # root mode (rank 0 loads the demo), a classifier: its labels are left alone
    args = ("fit", "demo", "--method", "cpsvc", "-p", "2", "--standardize")
    ref = cakernels_cli(*args, "-o", tmp_path / "c1.skops")
    out = mpi_cli(2, *args, "-o", tmp_path / "c2.skops", "--backend", "mpi")
    assert ref.returncode == 0 and out.returncode == 0, out.stderr
    assert "support vectors, standardized, 2 MPI ranks, root mode)" in out.stdout, out.stdout
    preds = [cakernels_cli("predict", tmp_path / m, "demo").stdout for m in ("c1.skops",
                                                                            "c2.skops")]
    assert preds[0] == preds[1] and preds[0]
    # a rank without rows: the estimator's own error (the scaler's "Found array with 0
    # sample(s) ... required by StandardScaler" came first)
    dump_svmlight_file(X[:3], y[:3], str(tmp_path / "three.svm"), zero_based=False)
    out = mpi_cli(4, "fit", tmp_path / "three.svm", "-o", tmp_path / "t.skops", "--method",
                  "bkrr2", "-p", "1", "--standardize", "--backend", "mpi")
    assert out.returncode == 2 and "shard is empty" in out.stderr, out.stderr
    assert "StandardScaler" not in out.stderr


def test_cli_mpi_shows_the_warnings_of_every_rank(mpi_cli, cakernels_cli, tmp_path):
    # a partition solved on rank 1 warned in the one-process fit and was silent
    # under MPI (only rank 0 prints); then rank 0 showed it, naming the rank; now the
    # fit's one warning counts every rank's partitions, the same on every rank
    args = ("fit", "demo_regression", "--method", "bkrr2", "--sigma", "1e5", "--lam", "1e-13",
            "-p", "2")
    serial = cakernels_cli(*args, "-o", tmp_path / "s.skops")
    out = mpi_cli(2, *args, "-o", tmp_path / "m.skops", "--backend", "mpi")
    assert serial.returncode == 0 and out.returncode == 0, out.stderr
    ours = [line for line in out.stderr.splitlines() if "LinAlgWarning" in line]
    theirs = [line for line in serial.stderr.splitlines() if "LinAlgWarning" in line]
    assert len(theirs) == 1 and len(ours) == 1, (serial.stderr, out.stderr)
    for line in ours + theirs:
        assert "is ill-conditioned in 2 of 2 partitions" in line, line
    assert "rank" not in ours[0]  # every rank's own warning, the same text


def test_cli_mpi_progress_bar_says_whose_partitions_it_counts(mpi_cli, tmp_path):
    # rank 0's bar counted its own partitions (2 of 4) under the label "fit partitions"
    out = mpi_cli(2, "fit", "demo", "-o", tmp_path / "m.skops", "--backend", "mpi",
                  "-p", "4", "-v")
    assert out.returncode == 0, out.stderr
    assert "partitions of rank 0 (of 2 ranks)" in out.stderr, out.stderr
    assert "rank 1" not in out.stderr  # only rank 0 shows a bar


def test_cli_search_under_mpiexec_equals_serial(mpi_cli, cakernels_cli, clf_split, tmp_path):
    # sharded input: exact FCFS partitions are the serial ones, so the whole table is;
    # only rank 0 prints and writes, and the model predicts as the serial one
    train, test = clf_split
    grid = ["--Cs", "1", "10", "--gammas", "0.1", "--cv", "3", "-q"]
    out = mpi_cli(2, "search", train, "-o", tmp_path / "mpi.skops", "--method", "fcfssvc",
                  "--backend", "mpi", *grid)
    assert out.returncode == 0, out.stderr
    ref = cakernels_cli("search", train, "-o", tmp_path / "serial.skops", "--method",
                        "fcfssvc", *grid)
    assert ref.returncode == 0, ref.stderr
    lines, ref_lines = out.stdout.splitlines(), ref.stdout.splitlines()
    assert lines[:-1] == ref_lines[:-1] and len(lines) == len(ref_lines)  # once, as serial
    assert "2 MPI ranks, sharded input" in lines[-1] and "saved to" in lines[-1]
    preds = [cakernels_cli("predict", tmp_path / m, test).stdout
             for m in ("mpi.skops", "serial.skops")]
    assert preds[0] == preds[1] and preds[0]
    # root mode (the demo, rank 0 loads it): the kernel ridge search's closed-form
    # leave-one-out, the same selection as on one process
    krr = ["--task", "regression", "--sigmas", "2", "8", "--lams", "1e-4", "1e-2",
           "--cv", "loo", "-q"]
    out = mpi_cli(2, "search", "demo", "-o", tmp_path / "k.skops", "--backend", "mpi", *krr)
    assert out.returncode == 0, out.stderr
    ref = cakernels_cli("search", "demo", "-o", tmp_path / "k1.skops", *krr)
    best = [next(line for line in o.stdout.splitlines() if "best" in line).split("best ")[1]
            .split(")")[0] for o in (out, ref)]
    assert best[0] == best[1] and "root mode" in out.stdout


def test_cli_one_process_commands_refused_under_mpiexec(mpi_cli, clf_split, tmp_path):
    # search without --backend mpi, predict, evaluate, info: one line from rank 0, exit 2,
    # nothing written; a usage error is printed once
    train, _ = clf_split
    runs = {
        "search": ["search", train, "-o", tmp_path / "s.skops", "--Cs", "1", "-q"],
        "predict": ["predict", tmp_path / "none.skops", train, "-o", tmp_path / "p.txt"],
        "evaluate": ["evaluate", tmp_path / "none.skops", train],
        "info": ["info"],  # printed its whole report once per process
    }
    for name, args in runs.items():
        out = mpi_cli(2, *args)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1, (name, out.stderr)
        assert out.stdout == "", (name, out.stdout)
        assert "running under mpiexec with 2 processes" in lines[0], lines
    assert not list(tmp_path.glob("s.skops*")) and not (tmp_path / "p.txt").exists()
    out = mpi_cli(3, "fit", train, "-o", tmp_path / "m.skops", "--bogus")
    assert out.returncode == 2
    assert out.stderr.count("unrecognized arguments: --bogus") == 1, out.stderr


def test_cli_info_reports_the_mpi_library(cakernels_cli):
    reason = _mpi_available()  # (it failed, not skipped, without mpi4py)
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    out = cakernels_cli("info")
    assert out.returncode == 0
    mpi = next(line for line in out.stdout.splitlines() if line.startswith("MPI "))
    assert "mpi4py" in mpi and "Version" in mpi


def test_readme_mpi_example_runs(mpirun, tmp_path, data_home):
    """The README's SPMD example as written, from another folder: its files come from
    the data folder (CAKERNELS_DATA), not from a path relative to the checkout (it read
    ../shared/datasets/a9a/a9a, which only a checkout next to shared/ has)."""
    import re

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("## Running under MPI", 1)[1]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    assert "../" not in code
    script = tmp_path / "train.py"
    script.write_text(code)
    env = dict(os.environ, CAKERNELS_DATA=str(data_home))
    out = mpirun(2, script, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "'bytes'" in out.stdout and "messages" in out.stdout


@pytest.mark.parametrize("n", [1, 2, 4])
def test_multilevel_and_dissmo_under_mpi_equal_serial(mpirun, n, tmp_path):
    lines = _lines(mpirun(n, "spmd_multilevel.py", tmp_path, timeout=600))
    root = [line for line in lines if line["check"] == "root"]
    sharded = [line for line in lines if line["check"] == "sharded"]
    assert len(root) == len(sharded) == 10
    for line in root:
        # root mode: the same tree (or the same Dis-SMO iterations) as serial
        assert line["pred_equal"] and line["everywhere"], line
        assert line["dec_rel"] <= 1e-10 and line["objective_rel"] <= 1e-10, line
        assert line["support_equal"] and line["n_iter_equal"], line
        if not line["name"].startswith("DisSMOSVC"):
            # the same tree: the same bits (Cascade's passes summed LIBSVM's rho
            # rank by rank: the last bit of the intercept followed the ranks)
            assert line["dec_rel"] == 0.0, line
        if line["name"].startswith("DisSMOSVC"):
            assert line["n_workers"] == n, line
            # one allgather per iteration, two with the second-order working set
            # (plus one per problem at the end)
            per_iter = 2 if "second-order" in line["name"] else 1
            iters = per_iter * sum(line["n_iter"]) + 2 * len(line["n_iter"])
            assert (line["training"]["messages"] >= n * iters) == (n > 1), line
        elif n > 1:
            # a merge across ranks moves the passed rows point to point, and the
            # counters show it in the layer where it happens
            owners = line["owners"]
            crossing = [any(2 * q + 1 < len(up) and up[2 * q + 1] != up[2 * q]
                            for q in range(len(down)))
                        for up, down in zip(owners, owners[1:])]
            stop = 2 if line["name"] == "DCSVC-early" else len(owners)
            for layer, cross in enumerate(crossing[:stop - 1], start=1):
                assert (line["layer_messages"][layer] > 0) == cross, line
            assert line["training"]["bytes"] >= sum(line["layer_bytes"]), line
        else:
            assert line["training"] == {"bytes": 0, "messages": 0}, line
    for line in sharded:
        # sharded mode: one complete model on every rank, as accurate as serial
        assert line["everywhere"], line
        assert line["score"] >= line["serial_score"] - 0.05, line
        if line["first_layer_samples"] is not None:
            assert line["first_layer_samples"] == line["n_samples"], line
        if line["name"].startswith(("DisSMOSVC", "DCSVC")) and "early" not in line["name"]:
            # the exact SVM whatever the split of the rows
            assert line["objective_rel"] <= 1e-6, line
    zero = [line for line in lines if line["check"] == "zero-weights"]
    assert zero == [{"check": "zero-weights", "root": True, "sharded": True}], zero
    for line in root:
        with open(tmp_path / f"{line['name']}.pkl", "rb") as fh:
            saved = pickle.load(fh)
        np.testing.assert_array_equal(saved["model"].predict(saved["X"]), saved["pred"])


@pytest.mark.parametrize("n", [1, 2, 4])
def test_fast_searches_under_mpi(mpirun, n):
    lines = _lines(mpirun(n, "spmd_search.py"))
    assert [line["check"] for line in lines] == ["BKRR2CV", "DCKRRCV", "BKRR2CV-groups",
                                                  "KKRR2CV-outlier", "KKRRCV-outlier",
                                                  "BKRR2CV-loo", "BKRR2CV-weights",
                                                  "BKMSVCCV", "CASVCCV-weights",
                                                  "BKRR2CV-generator"]
    for line in lines:
        assert line["root_equal"] and line["everywhere"] and line["root_predict_equal"], line
        assert line.get("sharded_rel", 0.0) <= 1e-8, line
        # rows of zero weight are left out of the partitions
        expect = {"BKRR2CV-weights": 288, "CASVCCV-weights": 160}.get(line["check"])
        assert line.get("partitioned", [expect] * 2) == [expect] * 2, line
        if line["check"].endswith("-outlier"):  # its own partition, in both modes
            assert all(1 in sizes for sizes in line["sizes"]), line
        for mode in ("root_phases", "sharded_phases")[:2 if "sharded_rel" in line else 1]:
            # Algorithm 10: the partitions stay on their ranks for the whole
            # search; only the summed errors travel (phase 'validation')
            assert line[mode]["training"] == 0, line
            assert (line[mode]["validation"] > 0) == (n > 1), line


@pytest.mark.parametrize("n", [1, 2, 4])
def test_halo_partitions_and_soft_routing_under_mpi(mpirun, n):
    lines = _lines(mpirun(n, "spmd_halo.py"))
    select = [line for line in lines if line["check"] == "select"]
    assert [line["name"] for line in select] == ["fcfs", "kbalance", "random"]
    for line in select:
        # the distributed selection (margins gathered, no rows) is the serial one
        assert line["equal"] and min(line["halo_sizes"]) > 0, line
    assert select[0]["serial"]
    for line in (x for x in lines if x["check"] == "root"):
        assert line["equal"], line
        assert line["halo_sizes"] == line["serial_halo_sizes"] and min(line["halo_sizes"]) > 0
    (svc,) = [x for x in lines if x["check"] == "sharded_svc"]
    assert svc["worst"] <= 1e-6, svc  # every model: SVC on its own rows and its halo
    assert max(svc["sizes"]) - min(svc["sizes"]) <= 1, svc  # still balanced
    assert svc["training"] == {"bytes": 0, "messages": 0}
    assert svc["plain_redistribution"]["bytes"] == 0  # sharded random: rows stay put
    if n > 1:  # the halo rows move in the one all-to-all
        assert svc["redistribution"]["bytes"] > 0, svc
    (krr,) = [x for x in lines if x["check"] == "sharded_krr"]
    assert krr["rel"] <= 1e-8 and krr["training"] == {"bytes": 0, "messages": 0}, krr
    (vote,) = [x for x in lines if x["check"] == "vote"]
    assert vote["equal"] and vote["nearest_equal"] and vote["krr_rel"] <= 1e-12, vote
    assert vote["consistent"], vote
    # every rank's rows but the last rank's (none, when there are several) were predicted
    assert vote["n"] == vote["n_pred"] == (360 if n == 1 else (n - 1) * 360 // n), vote
    if n > 1:
        assert vote["bytes"] > 0, vote
