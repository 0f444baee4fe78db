"""The notebooks in notebooks/ run top to bottom (their code cells, offline)."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path):
    nb = json.loads(path.read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert cells
    namespace = {"__name__": "__notebook__"}
    exec(compile("\n\n".join(cells), str(path), "exec"), namespace)


def test_there_are_notebooks():
    assert NOTEBOOKS
