"""Shared fixtures."""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_home():
    """The local benchmark folder from ``CAKERNELS_DATA``.

    Skipped when missing on a developer machine; under ``CI=true`` missing
    data is a failure, never a silent skip.
    """
    value = os.environ.get("CAKERNELS_DATA")
    home = Path(value).expanduser().absolute() if value else None
    if home is None or not home.is_dir():
        msg = (
            "CAKERNELS_DATA is unset" if home is None else f"CAKERNELS_DATA={value} is not a folder"
        ) + ": the local benchmark datasets are needed for this test"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return home
