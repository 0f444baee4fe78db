"""The notebooks in notebooks/ are valid nbformat documents and run top to bottom
(their code cells, offline)."""

import json
import warnings
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_valid(path):
    import nbformat  # a test dependency

    with warnings.catch_warnings():
        # e.g. MissingIDFieldWarning: cells without ids are invalid since nbformat 4.5
        warnings.simplefilter("error")
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
    ids = [cell["id"] for cell in nb.cells]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs(path):
    nb = json.loads(path.read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert cells
    namespace = {"__name__": "__notebook__"}
    exec(compile("\n\n".join(cells), str(path), "exec"), namespace)


def test_there_are_notebooks():
    assert NOTEBOOKS
