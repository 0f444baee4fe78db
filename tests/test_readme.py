"""The README's Python examples run as written (the quickstart, and every
example of the user guide; the MPI example runs under mpiexec in
``tests/test_mpi.py``), and print what the README says they print."""

import re
from pathlib import Path

import pytest

README = Path(__file__).parent.parent / "README.md"


def _blocks():
    """``(line, code)`` of every Python block of the README."""
    text = README.read_text()
    return [(text[:m.start()].count("\n") + 1, m.group(1))
            for m in re.finditer(r"```python\n(.*?)```", text, re.S)]


def _run(code, line, capsys):
    exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__readme__"})
    return capsys.readouterr().out.splitlines()


def test_readme_quickstart_runs(capsys):
    blocks = _blocks()
    assert blocks, "the README has no Python quickstart"
    out = _run(blocks[0][1], blocks[0][0], capsys)
    assert len(out) == 3
    ours, svc = map(float, out[0].split())
    assert svc > 0.85 and ours > svc - 0.03  # test accuracies of BKMSVC and SVC
    assert float(out[2].split()[0]) > 0.9  # test R^2 of BKRR2


def _guide_examples():
    """Every example after the quickstart, except the MPI one (a script for mpiexec)."""
    return [pytest.param(code, line, id=f"line{line}") for line, code in _blocks()[1:]
            if "from mpi4py import MPI" not in code]


def test_every_user_guide_example_is_collected():
    # the quickstart, the MPI script and the guide's examples: none is left out
    assert len(_guide_examples()) == len(_blocks()) - 2
    assert len(_guide_examples()) >= 5


@pytest.mark.parametrize("code, line", _guide_examples())
def test_readme_example_runs_and_prints_what_it_says(code, line, capsys, request):
    if "load_dataset" in code:  # needs the local datasets (a failure under CI=true)
        request.getfixturevalue("data_home")
    out = _run(code, line, capsys)
    # where a comment after a print shows its output, the output is that
    for stmt, shown in re.findall(r"^(print\(.*\))\s+#\s*(\[[\d, ]+.*?\]|[\d ]+)(?::|$)",
                                  code, re.M):
        printed = out.pop(0) if out else ""
        shown = shown.strip()
        if shown.endswith("...]"):  # '[125, 125, ...]': a prefix of the printed list
            assert printed.startswith(shown[:-4].rstrip()), (stmt, printed, shown)
        else:
            assert printed == shown, (stmt, printed, shown)
