"""The runnable examples in the docstrings of every module of the package."""

import doctest
import importlib
import pkgutil

import pytest

import cakernels

PUBLIC = ["cakernels.svm", "cakernels.kernel_ridge", "cakernels.partition",
          "cakernels.backends", "cakernels.datasets"]


def _modules():
    names = ["cakernels"]
    for info in pkgutil.walk_packages(cakernels.__path__, "cakernels."):
        if info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return sorted(names)


MODULES = _modules()


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


@pytest.mark.parametrize("public", PUBLIC)
def test_public_modules_have_examples(public):
    attempted = 0
    for name in MODULES:
        if name == public or name.startswith(public + "."):
            module = importlib.import_module(name)
            finder = doctest.DocTestFinder()
            attempted += sum(len(t.examples) for t in finder.find(module))
    assert attempted > 0, f"{public} has no runnable examples"
