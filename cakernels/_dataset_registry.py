"""The dataset registry (``datasets/registry.json``), read with the standard library
only, so that the command line can look a name up before NumPy loads."""

import difflib
import functools
import json
from pathlib import Path


@functools.lru_cache(maxsize=1)
def registry() -> dict:
    """Read the registry once: package data when installed, else the source tree."""
    text = None
    try:
        from importlib.resources import files

        text = (files("cakernels._registry") / "registry.json").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, OSError):
        pass
    if text is None:
        path = Path(__file__).resolve().parent.parent / "datasets" / "registry.json"
        text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    records = {rec["name"]: rec for rec in data["datasets"]}
    index = {}
    for rec in data["datasets"]:
        for key in [rec["name"], *rec.get("aliases", [])]:
            index[key.lower()] = rec["name"]
    return {"records": records, "index": index}


def record(name) -> dict:
    """The registry record of a name or alias (case-insensitive); ValueError if unknown."""
    if not isinstance(name, str):
        raise TypeError(f"dataset name must be a str, got {type(name).__name__}")
    reg = registry()
    key = reg["index"].get(name.lower())
    if key is None:
        close = difflib.get_close_matches(name.lower(), list(reg["index"]), n=3)
        hint = f" Did you mean {', '.join(repr(reg['index'][c]) for c in close)}?" if close else ""
        raise ValueError(
            f"unknown dataset {name!r}.{hint} See cakernels.datasets.list_datasets() for the names."
        )
    return reg["records"][key]
