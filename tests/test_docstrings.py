"""The runnable examples in the public docstrings."""

import doctest
import importlib

import pytest

MODULES = ["cakernels.svm", "cakernels.kernel_ridge", "cakernels.partition"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
