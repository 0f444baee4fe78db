"""Find the compiled module ``cakernels._native`` when the package is imported
from its source tree.

Python started in the repository root imports the source folder
``cakernels/`` (the current directory comes first on ``sys.path``), which
holds no compiled module after ``python -m pip install .``: the build put it
into the installed copy only. Instead of failing with a
partially-initialised-module traceback, the package then loads the installed
copy's compiled module, provided it was built from the same C sources
(``_native.SOURCE_HASH``, written by ``setup.py``). Where no usable compiled
module exists, the ``ImportError`` says what happened and what to run, as
numpy's and scikit-learn's do.

Only the standard library is used here: this runs at ``import cakernels``.
"""

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

_NAME = "cakernels._native"

#: the files setup.py hashes (keep in sync with setup.py's NATIVE_SOURCES/HEADERS)
_NATIVE_FILES = (
    "native/_nativemodule.c",
    "native/cakernels.h",
    "native/ck_asygcd.c",
    "native/ck_internal.h",
    "native/ck_kernel.c",
    "native/ck_linalg.c",
    "native/ck_qcache.c",
    "native/ck_rows.c",
    "native/ck_smo.c",
)

_BUILD_HINT = (
    "run `python -m pip install .` in the repository root (Python started there then "
    "uses the installed compiled module) or, for development, build it in place with "
    "`python setup.py build_ext --inplace`."
)


def source_hash(root):
    """sha256 of the C sources under ``root`` (the function setup.py compiles in),
    or None when they are not all there."""
    h = hashlib.sha256()
    for rel in sorted(_NATIVE_FILES):
        try:
            data = (Path(root) / rel).read_bytes().replace(b"\r\n", b"\n")
        except OSError:
            return None
        h.update(rel.encode() + b"\0" + data + b"\0")
    return h.hexdigest()


def _compiled_in(folder):
    """Path of a compiled ``_native`` module in ``folder``, or None."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = Path(folder) / f"_native{suffix}"
        if path.is_file():
            return path
    return None


def _other_copies(package_dir):
    """Compiled modules of other ``cakernels`` folders on ``sys.path`` (the
    installed copies), in ``sys.path`` order."""
    here = package_dir.resolve()
    found = []
    for entry in sys.path:
        folder = Path(entry or os.curdir) / "cakernels"
        try:
            if folder.resolve() == here:
                continue
        except OSError:
            continue
        path = _compiled_in(folder)
        if path is not None and path not in found:
            found.append(path)
    return found


def _load(path):
    spec = importlib.util.spec_from_file_location(_NAME, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ensure_native(package_dir):
    """Make ``cakernels._native`` importable for the package in ``package_dir``.

    Nothing happens when the compiled module lies in the package folder (an
    installed package, or a source tree built in place). Otherwise the
    installed copy's module is loaded and registered in ``sys.modules``
    when its ``SOURCE_HASH`` matches this source tree's C sources; else an
    ``ImportError`` explains what to run.
    """
    package_dir = Path(package_dir)
    if _NAME in sys.modules or _compiled_in(package_dir) is not None:
        return
    root = package_dir.parent
    where = (f"cakernels is imported from the source folder {package_dir}, which has no "
             "compiled native module (cakernels._native)")
    wanted = source_hash(root)
    if wanted is None:
        raise ImportError(f"{where}, and no C sources lie beside it. Reinstall cakernels "
                          "with `python -m pip install cakernels` (or `python -m pip install .` "
                          "from its source tree).")
    stale = []
    for path in _other_copies(package_dir):
        try:
            module = _load(path)
        except ImportError as exc:  # a broken or foreign build: try the next one
            stale.append(f"{path} ({exc})")
            continue
        if getattr(module, "SOURCE_HASH", None) == wanted:
            sys.modules[_NAME] = module
            return
        stale.append(f"{path} (built from other C sources)")
    if stale:
        raise ImportError(f"{where}, and the installed compiled module does not match its C "
                          f"sources: {'; '.join(stale)}. To rebuild it, {_BUILD_HINT}")
    raise ImportError(f"{where}, and no installed cakernels was found. To build it, "
                      f"{_BUILD_HINT}")
