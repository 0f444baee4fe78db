"""Benchmark datasets: a registry of LIBSVM-site sets, local copies first, pooch downloads.

The registry (``datasets/registry.json`` in the source tree, installed as the package
data ``cakernels._registry/registry.json``) describes every dataset: task, number of
features, official train/test sizes, the official LIBSVM download URLs and the local
files that may already lie in the *data home*.

Loading follows the :mod:`sklearn.datasets` conventions: :func:`load_dataset` returns a
:class:`sklearn.utils.Bunch` (or ``(X, y)`` with ``return_X_y=True``).  Files are looked
up in the data home first (see :func:`get_data_home`), local copies are verified against
the sha256 recorded in the registry, and only then is the official file downloaded with
``pooch``.  The LIBSVM site publishes no checksums, so official downloads are not verified
(``known_hash=None``); nothing in the registry is an invented checksum.

:func:`load_demo` and :func:`load_demo_regression` need neither the data home nor the
network: they wrap small datasets that ship with scikit-learn.
"""

from __future__ import annotations

import bz2
import copy
import gzip
import hashlib
import io
import json
import lzma
import numbers
import os
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch, check_random_state

from ._dataset_registry import record as _record
from ._svmlight_shard import _COMPRESSED
from ._dataset_registry import registry as _registry

__all__ = [
    "ENV_VAR",
    "ChecksumMismatchError",
    "DatasetDownloadError",
    "dataset_info",
    "get_data_home",
    "list_datasets",
    "load_dataset",
    "load_demo",
    "load_demo_regression",
    "load_svmlight",
    "load_svmlight_shard",
]

#: Environment variable naming the data home.
ENV_VAR = "CAKERNELS_DATA"

_DEFAULT_HOME = "~/cakernels_data"
_SUBSETS = ("train", "test", "all")
_TASKS = ("binary", "multiclass", "regression")
_FORMATS = (
    "libsvm",
    "libsvm-bz2",
    "libsvm-xz",
    "libsvm-gz",
    "csv-label-first",
    "txt-label-first",
    "csv-header-target",
    "tsv-header-target",
)
# Records the sha256 of files this module downloaded (per dataset folder), so that a later
# load can verify them even where an official file name equals a local-copy name.
_MANIFEST = ".cakernels-downloads.json"
_CHUNK = 1 << 20
# Compressed LIBSVM files up to this size are decompressed in memory before parsing.
_IN_MEMORY_MAX = 64 << 20


class DatasetDownloadError(OSError):
    """A dataset file could not be downloaded (for example: no network).

    An ``OSError``; the message names the URL and the local folder
    (``CAKERNELS_DATA``) where a copy of the file would be used instead.
    """


class ChecksumMismatchError(OSError):
    """A file's sha256 differs from the one the registry (or the download record) expects."""


# --------------------------------------------------------------------------- registry


def list_datasets() -> list[str]:
    """Return the names of all datasets in the registry.

    Returns
    -------
    names : list of str
        Registry names, sorted case-insensitively. Aliases (such as ``"abalone_scale"``)
        are accepted by :func:`load_dataset` but not listed.

    See Also
    --------
    dataset_info : The registry record of one dataset.

    Examples
    --------
    >>> from cakernels.datasets import list_datasets
    >>> "ijcnn1" in list_datasets()
    True
    """
    return sorted(_registry()["records"], key=str.lower)


def dataset_info(name: str) -> dict:
    """Return (a copy of) the registry record of a dataset.

    Parameters
    ----------
    name : str
        Registry name or alias (case-insensitive).

    Returns
    -------
    info : dict
        Keys include ``name``, ``task`` (``"binary"``, ``"multiclass"`` or
        ``"regression"``), ``n_features``, ``n_train``, ``n_test`` (``None`` when there is
        no official test split), ``classes``, ``dense``, ``official`` (URLs of the LIBSVM
        files per split, with ``checksum`` ``None`` because the site publishes none) and
        ``local`` (candidate files relative to the data home with their format, split and
        sha256).

    Raises
    ------
    ValueError
        If the name is not in the registry.

    Examples
    --------
    >>> from cakernels.datasets import dataset_info
    >>> info = dataset_info("ijcnn1")
    >>> info["task"], info["n_features"], info["n_train"], info["n_test"]
    ('binary', 22, 49990, 91701)
    """
    return copy.deepcopy(_record(name))


# --------------------------------------------------------------------------- data home


def get_data_home(data_home=None) -> Path:
    """Return the folder holding the benchmark datasets.

    The first of these that is set wins: the ``data_home`` argument, the environment
    variable ``CAKERNELS_DATA``, then ``~/cakernels_data``.  ``~`` is expanded and a
    relative path is taken relative to the current directory.  The folder is not created
    here (downloads create ``<data_home>/<dataset>/`` when needed).

    Parameters
    ----------
    data_home : str or path-like, default=None
        Explicit folder.

    Returns
    -------
    path : pathlib.Path
        Absolute path of the data home.

    Examples
    --------
    >>> from cakernels.datasets import get_data_home
    >>> get_data_home("some/folder").is_absolute()
    True
    """
    if data_home is None:
        data_home = os.environ.get(ENV_VAR) or _DEFAULT_HOME
    elif not os.fspath(data_home):  # (it meant the current directory, unlike an empty
        # CAKERNELS_DATA, which is unset)
        raise ValueError("data_home must not be empty: give a folder, or None for "
                         f"${ENV_VAR} or {_DEFAULT_HOME}")
    return Path(os.fspath(data_home)).expanduser().absolute()


# --------------------------------------------------------------------------- hashing


_HASH_CACHE: dict = {}


def _sha256(path: Path) -> str:
    """sha256 of a file, read in chunks; cached per (path, device, inode, size, mtime,
    ctime) in this process (an edit that keeps the size and restores the mtime, as
    ``touch -r`` or ``cp -p`` do, still changes the ctime; an inode number is one
    device's: another file system mounted at the same path may reuse it)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
           st.st_ctime_ns)
    digest = _HASH_CACHE.get(key)
    if digest is None:
        h = hashlib.sha256()
        try:
            fh = open(path, "rb")
        except PermissionError:  # the readers' message (it was a bare "[Errno 13]")
            raise PermissionError(_permission_denied(path)) from None
        with fh:
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                h.update(chunk)
        digest = h.hexdigest()
        _HASH_CACHE[key] = digest
    return digest


def _read_manifest(folder: Path) -> dict:
    try:
        return json.loads((folder / _MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_manifest(folder: Path, fname: str, url: str, digest: str) -> None:
    manifest = _read_manifest(folder)
    manifest[fname] = {"url": url, "sha256": digest}
    try:
        (folder / _MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    except OSError:  # read-only data home: the file is simply not verified next time
        pass


# --------------------------------------------------------------------------- readers


def _open_binary(path: Path):
    suffix = path.suffix.lower()
    if suffix == ".bz2":
        return bz2.open(path, "rb")
    if suffix == ".xz":
        return lzma.open(path, "rb")
    if suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _open_text(path: Path):
    suffix = path.suffix.lower()
    if suffix == ".bz2":
        return bz2.open(path, "rt", encoding="utf-8")
    if suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    if suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _LastLine:
    """A binary line iterator that remembers the last line it gave (for a stream that
    cannot be re-read: does the decompressed file end with a newline?)."""

    def __init__(self, fh):
        self._fh = fh
        self.last = b""

    def read(self, *args):  # scikit-learn's reader takes objects with a ``read``
        return self._fh.read(*args)

    def __iter__(self):
        for line in self._fh:
            self.last = line
            yield line


def _load_raw_svmlight(path: Path):
    """``(X, y, last_byte)``: the file parsed with its indices as written (column ``i``
    holds index ``i``) and the last byte of its (decompressed) content."""
    from sklearn.datasets import load_svmlight_file

    kwargs = {"dtype": np.float64, "zero_based": True}
    if path.suffix.lower() not in _COMPRESSED:
        X, y = load_svmlight_file(str(path), **kwargs)
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() == 0:
                return X, y, b""
            fh.seek(-1, os.SEEK_END)
            return X, y, fh.read(1)
    if path.stat().st_size <= _IN_MEMORY_MAX:
        # sklearn's line reader is slow on decompressing file objects: decompress first
        with _open_binary(path) as fh:
            content = fh.read()
        X, y = load_svmlight_file(io.BytesIO(content), **kwargs)
        return X, y, content[-1:]
    with _open_binary(path) as fh:
        lines = _LastLine(fh)
        X, y = load_svmlight_file(lines, **kwargs)
    return X, y, lines.last[-1:]


def _check_zero_based(zero_based):
    if zero_based == "auto" or isinstance(zero_based, (bool, np.bool_)):
        return zero_based if zero_based == "auto" else bool(zero_based)
    raise ValueError(f"zero_based must be 'auto', True or False, got {zero_based!r}")


def _parse_error(path, exc, bad_line=None):
    """The one-line message of a LIBSVM file the reader could not parse.

    ``bad_line``: a callable returning :func:`_first_bad_line`'s answer for the file
    (called for a format error only), so that the message names the line."""
    if isinstance(exc, OverflowError):  # scikit-learn's reader keeps indices in 32-bit ints
        return (f"{path}: a feature index is beyond 2,147,483,647, the largest index the "
                "LIBSVM reader takes")
    why = _one_line(exc)
    if "\\xef\\xbb\\xbf" in why:  # the bytes of a UTF-8 byte-order mark
        why = "it starts with a UTF-8 byte-order mark (as some editors write); save it without one"
    else:
        packed = _compression_hint(path)
        hint = packed or _table_hint(path)
        if packed:  # (the reader's message quoted ~900 of the compressed bytes)
            why = "its bytes are not text"
        found = None
        if not hint and type(exc) is ValueError and bad_line is not None:
            try:
                found = bad_line()
            except Exception:  # (an unreadable stream: the message stays without the line)
                found = None
        if found is not None:
            number, text = found
            text = " ".join(text.decode("utf-8", "replace").split())
            text = text if len(text) <= 60 else text[:57] + "..."
            why = f"line {number:,} ({text!r}): {why}"
        why += hint
    return f"{path}: could not load it as a LIBSVM/svmlight file: {why}"


def _first_bad_line(lines, first=1, block=1 << 16):
    """``(number, line)`` of the first line that scikit-learn's LIBSVM reader refuses,
    or None. ``lines`` yields lines with their newlines, numbered from ``first``.

    The reader's format errors (a value or label that is no number, an index below 0,
    indices not increasing) are each about one line, so blocks of lines are parsed
    alone and a block that fails is halved until one line is left: about one more
    parse of the file, at the reader's speed, and only after it failed.
    """
    from sklearn.datasets import load_svmlight_file

    def parses(chunk):
        text = b"".join(chunk)
        if not text.strip():
            return True
        try:
            load_svmlight_file(io.BytesIO(text), zero_based=True)
        except (ValueError, OverflowError):
            return False
        return True

    def search(chunk, number):
        if parses(chunk):
            return None
        lo, hi = 0, len(chunk)  # the first refused line is in chunk[lo:hi]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if parses(chunk[lo:mid]):
                lo = mid
            else:
                hi = mid
        return number + lo, chunk[lo]

    chunk = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == block:
            found = search(chunk, first)
            if found is not None:
                return found
            first, chunk = first + len(chunk), []
    return search(chunk, first) if chunk else None


def _first_bad_line_of(path):
    """:func:`_first_bad_line` of a (possibly compressed) file."""
    with _open_binary(path) as fh:
        return _first_bad_line(fh)


#: the first bytes of the compressed formats the readers open (by suffix)
_MAGIC = ((b"\x1f\x8b", ".gz", "gzip"), (b"BZh", ".bz2", "bzip2"),
          (b"\xfd7zXZ\x00", ".xz", "xz"))


def _compression_hint(path):
    """When a file whose suffix says "not compressed" starts as a compressed one:
    what to do ('' otherwise; its bytes looked like a CSV table to the table hint)."""
    if path.suffix.lower() in _COMPRESSED:
        return ""
    try:
        with open(path, "rb") as fh:
            head = fh.read(6)
    except OSError:
        return ""
    for magic, suffix, name in _MAGIC:
        if head.startswith(magic):
            return (f" (it is {name}-compressed, but its name does not end in {suffix}: the "
                    f"suffix selects the decompression; rename it to {path.name}{suffix})")
    return ""


def _permission_denied(path):
    """The message of a file this user cannot read (an I/O error, not a format one)."""
    return f"{path}: permission denied (the file cannot be read by this user)"


def check_regular_file(path):
    """``FileNotFoundError``, ``IsADirectoryError``, or a ``ValueError`` for a path
    that is not a regular file (a pipe, ``<(zcat f.gz)``, or a device: the readers
    open a file more than once, and the sharded reader seeks in it)."""
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory, not a LIBSVM file")
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if not path.is_file():
        raise ValueError(f"{path}: not a regular file (a pipe or a device?): the LIBSVM "
                         "readers open a file more than once; save the data to a file first "
                         "(a compressed file can be given as it is, named .gz, .bz2 or .xz)")


def _table_hint(path):
    """What to do when the first line of ``path`` is a table row (CSV, or numbers
    without ``index:value`` pairs) instead of a LIBSVM line; '' otherwise."""
    first = b""
    try:
        with _open_binary(path) as fh:
            for _ in range(100):  # the first line that is not blank or a comment
                line = fh.readline(1 << 16)
                if not line:
                    break
                first = line.split(b"#", 1)[0].strip()
                if first:
                    break
    except (OSError, EOFError, lzma.LZMAError):
        return ""
    tokens = first.replace(b",", b" ").replace(b";", b" ").replace(b"\t", b" ").split()
    if len(tokens) < 2 or any(b":" in t for t in tokens[1:]):
        return ""
    if b"," in first or b";" in first:
        kind = "a CSV table"
    elif b"\t" in first:
        kind = "a tab-separated table"
    else:  # words separated by spaces may be anything: only numbers are a table
        try:
            [float(t) for t in tokens]
        except ValueError:
            return ""
        kind = "a table of numbers"
    return (f" (its first line looks like {kind}; a LIBSVM line is 'label index:value "
            "index:value ...': convert the table with sklearn.datasets.dump_svmlight_file(X, y, "
            "path, zero_based=False), one-based as LIBSVM files are)")


def _parse_svmlight(path: Path, n_features=None, zero_based="auto", index_0="error",
                    _stacklevel=3, warn_truncated=True):
    """Read a (possibly compressed) LIBSVM file; errors become one-line ValueErrors.

    ``zero_based``: ``"auto"`` reads the file zero-based when feature index 0 occurs
    anywhere in it and one-based otherwise (as scikit-learn decides);
    ``True``/``False`` force the base. In a file read one-based, entries with index 0
    cannot be placed: ``index_0="error"`` raises, ``"drop"`` drops them (and counts
    them). Warns (``UserWarning``) when the file does not end with a newline, unless
    ``warn_truncated=False`` (the caller reads ``truncated`` and warns itself: a
    ``warnings.catch_warnings`` around this call would swap the process-wide filters,
    which races with other threads before Python 3.14).

    Returns a Bunch: ``X`` (CSR, float64), ``y`` (float64), ``index_base`` (0 or 1),
    ``rows_with_index_0`` (rows that use index 0; a row holds each index at most
    once), ``dropped_index_0`` (entries dropped), ``uses_index_0`` and ``truncated``
    (the last line has no newline).
    """
    check_regular_file(path)
    try:
        X, y, last = _load_raw_svmlight(path)
    except (ValueError, EOFError, OSError, lzma.LZMAError, UnicodeDecodeError,
            OverflowError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        if isinstance(exc, PermissionError):  # an I/O error, not a format one: its own type
            raise PermissionError(_permission_denied(path)) from None
        raise ValueError(_parse_error(path, exc, lambda: _first_bad_line_of(path))) from None
    n_rows = X.shape[0]
    if n_rows == 0:
        raise ValueError(f"{path}: the file is empty (no samples)")
    truncated = last not in (b"", b"\n")
    if truncated and warn_truncated:
        import warnings

        warnings.warn(
            f"{path}: the last line has no newline at its end, so the file may be cut off "
            f"(read {n_rows:,} rows; the last one may be incomplete)",
            UserWarning, stacklevel=_stacklevel,
        )
    X = X.tocsr()
    data, indices, indptr = X.data, X.indices, X.indptr
    at_0 = indices == 0  # indices are sorted and unique per row: index 0 comes first
    n_index_0 = int(np.count_nonzero(at_0))
    if zero_based == "auto":
        base = 0 if n_index_0 else 1
    else:
        base = 0 if zero_based else 1
    dropped = 0
    if base == 1:
        if n_index_0:
            if index_0 != "drop":
                first = int(np.searchsorted(indptr, np.flatnonzero(at_0)[0], side="right"))
                raise ValueError(
                    f"{path}: feature index 0 occurs in {n_index_0:,} rows (the first is row "
                    f"{first:,}), but the file is read one-based (indices from 1): pass "
                    "zero_based=True or 'auto' to read it zero-based"
                )
            keep = ~at_0
            removed = np.concatenate([[0], np.cumsum(at_0)])
            data, indices, indptr = data[keep], indices[keep], indptr - removed[indptr]
            dropped = n_index_0
        indices -= 1  # the raw matrix is not used any more
    max_index = int(indices.max()) if indices.size else -1  # a column number
    width = max(max_index + 1, 1)
    if n_features is not None:
        if width > n_features:
            raise ValueError(
                f"{path}: the file has {width} features (largest index {max_index + base}, "
                f"read {'zero' if base == 0 else 'one'}-based), more than n_features={n_features}"
            )
        width = n_features
    X = type(X)((data, indices, indptr), shape=(n_rows, width))
    return Bunch(X=X, y=np.asarray(y, dtype=np.float64), index_base=base,
                 rows_with_index_0=n_index_0, dropped_index_0=dropped,
                 uses_index_0=n_index_0 > 0, truncated=truncated)


def _read_svmlight(path: Path, n_features=None, zero_based="auto"):
    """Read a (possibly compressed) LIBSVM file; errors become one-line ValueErrors."""
    read = _parse_svmlight(path, n_features=n_features, zero_based=zero_based, _stacklevel=5)
    return read.X, read.y


def _read_delimited(path: Path, fmt: str, target_column=None):
    """Read a CSV/TSV/whitespace table; returns dense (X, y)."""
    kind, layout = fmt.split("-", 1)
    delimiter = {"csv": ",", "tsv": "\t", "txt": None}[kind]
    try:
        with _open_text(path) as fh:
            if layout == "header-target":
                header = [c.strip().strip('"') for c in fh.readline().rstrip("\r\n").split(delimiter)]
                column = target_column or "target"
                if column not in header:
                    raise ValueError(f"no target column {column!r} in the header {header[:8]}...")
                col = header.index(column)
            else:
                col = 0
            table = np.loadtxt(fh, delimiter=delimiter, dtype=np.float64, ndmin=2)
    except (ValueError, EOFError, OSError, lzma.LZMAError, UnicodeDecodeError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{path}: could not read it as {fmt} ({_one_line(exc)})") from None
    if table.shape[0] == 0:
        raise ValueError(f"{path}: the file is empty (no samples)")
    y = table[:, col].copy()
    X = np.ascontiguousarray(np.delete(table, col, axis=1))
    return X, y


def _read_file(path: Path, fmt: str, n_features: int, target_column=None):
    if fmt not in _FORMATS:
        raise ValueError(f"{path}: unsupported format {fmt!r} (known: {', '.join(_FORMATS)})")
    if fmt.startswith("libsvm"):
        # the LIBSVM site's files are one-based: a stray index 0 is an error, never a
        # zero-based reading that shifts every feature (a file placed by hand is not
        # always checked against a hash)
        return _read_svmlight(path, n_features=n_features, zero_based=False)
    X, y = _read_delimited(path, fmt, target_column)
    if X.shape[1] != n_features:
        raise ValueError(f"{path}: expected {n_features} feature columns, found {X.shape[1]}")
    return X, y


def _apply_label_map(y, label_map, path):
    if not label_map:
        return y
    mapping = {float(k): float(v) for k, v in label_map.items()}
    values, inverse = np.unique(y, return_inverse=True)
    unknown = [float(v) for v in values if float(v) not in mapping]
    if unknown:
        raise ValueError(
            f"{path}: labels {unknown[:5]} are not covered by the registry label_map {label_map}"
        )
    return np.array([mapping[float(v)] for v in values], dtype=np.float64)[inverse].ravel()


#: the widest matrix a LIBSVM file addresses: feature indices stop at 2^31 - 1
MAX_FEATURES = 2**31


def _check_n_features(n_features):
    if isinstance(n_features, bool) or not isinstance(n_features, numbers.Integral) \
            or n_features < 1:
        raise ValueError(f"n_features must be a positive int or None, got {n_features!r}")
    if n_features > MAX_FEATURES:
        raise ValueError(f"n_features={n_features} is wider than any LIBSVM file can "
                         f"address: feature indices stop at 2^31 - 1, so n_features <= 2^31")


def load_svmlight(path, n_features=None, *, zero_based="auto"):
    """Load a user file in LIBSVM/svmlight format.

    Compressed files (``.gz``, ``.bz2``, ``.xz``) are read directly.

    Feature indices in LIBSVM files start at 1 (the LIBSVM convention, followed by
    every file on the LIBSVM site), but zero-based files exist too (scikit-learn's
    :func:`~sklearn.datasets.dump_svmlight_file` writes them by default) and the two
    kinds do not identify themselves.  With ``zero_based="auto"`` (scikit-learn's
    heuristic) a file is read zero-based when index 0 occurs anywhere in it: one
    stray ``0:`` entry in a one-based file therefore shifts every feature by one.
    Pass ``zero_based=False`` for a file that is known to be one-based (then an index 0
    is an error) and use the same base for a training file and the files predicted
    with its model.

    Parameters
    ----------
    path : str or path-like
        The file.
    n_features : int, default=None
        Number of features; pass it so that a train and a test file agree.  By default
        it is the largest feature index in the file (plus one when zero-based).
    zero_based : {"auto", True, False}, default="auto"
        Whether the feature indices start at 0 (``True``) or 1 (``False``; column
        ``j`` of ``X`` holds index ``j + 1``).  ``"auto"``: zero-based if index 0
        occurs in the file, one-based otherwise.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features), dtype float64
    y : ndarray of shape (n_samples,), dtype float64

    Raises
    ------
    FileNotFoundError, IsADirectoryError
        If the file does not exist, or is a directory.
    PermissionError
        If the file cannot be read by this user.
    ValueError
        If the file is empty or malformed, has more features than ``n_features``, or
        uses index 0 with ``zero_based=False``, or is not a regular file (a pipe), or
        is compressed under a name without the matching suffix (a one-line message
        naming the file).

    Warns
    -----
    UserWarning
        If the file does not end with a newline: it may have been cut off (the
        message names the file and the number of rows read).

    See Also
    --------
    sklearn.datasets.load_svmlight_file : The reader this wraps.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from cakernels.datasets import load_svmlight
    >>> path = Path(tempfile.mkdtemp()) / "tiny.svm"
    >>> _ = path.write_text("+1 1:0.5 3:1\\n-1 2:2\\n")
    >>> X, y = load_svmlight(path, n_features=4)
    >>> X.shape, y.tolist()
    ((2, 4), [1.0, -1.0])
    >>> X.toarray()[0].tolist()  # index 1 is column 0
    [0.5, 0.0, 1.0, 0.0]
    >>> load_svmlight(path, zero_based=True)[0].toarray()[0].tolist()
    [0.0, 0.5, 0.0, 1.0]
    """
    path = Path(os.fspath(path)).expanduser()
    zero_based = _check_zero_based(zero_based)
    check_regular_file(path)
    if path.stat().st_size == 0:
        raise ValueError(f"{path}: the file is empty (no samples)")
    if n_features is not None:
        _check_n_features(n_features)
        n_features = int(n_features)
    read = _parse_svmlight(path, n_features=n_features, zero_based=zero_based)
    return read.X.tocsr(), read.y


def load_svmlight_shard(path, comm=None, *, n_features=None, zero_based="auto"):
    """Load this MPI rank's block of rows of a LIBSVM file (parallel IO).

    Every rank reads and parses only its own part of an uncompressed file: the
    file is split into equal byte ranges moved to line boundaries, so the
    shards hold contiguous blocks of rows, in file order by rank, of about
    equal size (where long lines left a rank with less than half the rows of
    another, none for example, and the file has a row for every rank, rows
    move so that every rank holds an equal contiguous block: a sharded fit
    needs rows on every rank).
    The ranks then agree on the number of features and the index
    base (two small reductions), so every shard has the same columns and the
    result equals the rows of :func:`load_svmlight` of the whole file. A
    compressed file (``.gz``, ``.bz2``, ``.xz``) cannot be split without
    decompressing it: rank 0 reads it and scatters the blocks. This is the
    input of ``MPIBackend(sharded=True)``.

    Collective: every rank of ``comm`` calls it with the same arguments (other
    ``n_features`` or ``zero_based``, or a compressed file on some ranks only,
    are a :class:`~cakernels.backends.CollectiveError` on every rank).

    Parameters
    ----------
    path : str or path-like
        The file (the same path on every rank, on a shared file system).
    comm : mpi4py.MPI.Comm, default=None
        The communicator (None: ``MPI.COMM_WORLD`` when mpi4py is installed,
        else the whole file in one process).
    n_features : int, default=None
        Number of features (default: the largest index over all shards).
    zero_based : {'auto', True, False}, default='auto'
        The index base, as in :func:`load_svmlight`; ``'auto'`` reads the file
        zero-based when index 0 occurs on any rank.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_local, n_features), dtype float64
    y : ndarray of shape (n_local,), dtype float64

    Raises
    ------
    FileNotFoundError, IsADirectoryError
        As :func:`load_svmlight`, on every rank (a rank that does not see the
        file is named).
    ValueError
        A file it cannot read, or not a regular file (a pipe): on every rank
        (:class:`~cakernels.backends.CollectiveError` under MPI); a rank that
        sees a file of another size than rank 0's under the path (every rank
        reads its own byte range of the same file) is a ``CollectiveError`` on
        every rank.

    See Also
    --------
    load_svmlight : The whole file in one process.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from cakernels.datasets import load_svmlight_shard
    >>> path = Path(tempfile.mkdtemp()) / "tiny.svm"
    >>> _ = path.write_text("+1 1:0.5 3:1\\n-1 2:2\\n")
    >>> X, y = load_svmlight_shard(path)  # one process: every row
    >>> X.shape, y.tolist()
    ((2, 3), [1.0, -1.0])
    """
    from ._svmlight_shard import read_shard
    from .backends import Communicator, SelfCommunicator

    if comm is None:
        import importlib.util

        if importlib.util.find_spec("mpi4py") is None:
            wrapped = SelfCommunicator()
        else:  # (an mpi4py that cannot load its MPI library: the [mpi] hint)
            from .backends._backend import import_mpi

            wrapped = Communicator(import_mpi(
                "load_svmlight_shard(comm=None) reads with MPI.COMM_WORLD when mpi4py is "
                'installed, which needs an MPI library: pip install "cakernels[mpi]"'
            ).COMM_WORLD)
    else:
        wrapped = comm if hasattr(comm, "agree") else Communicator(comm)
    error = None
    try:  # a bad argument on one rank: the same error on every rank, not a hang
        zero_based = _check_zero_based(zero_based)
        if n_features is not None:
            _check_n_features(n_features)
    except ValueError as exc:
        error = str(exc)
    wrapped.agree(error, call="load_svmlight_shard")
    X, y, _ = read_shard(path, wrapped, n_features=n_features, zero_based=zero_based)
    return X, y


# --------------------------------------------------------------------------- file lookup


def _official_fname(entry) -> str:
    return Path(urlsplit(entry["url"]).path).name


def _decompressed(fname: str) -> str | None:
    for ext in (".bz2", ".xz", ".gz"):
        if fname.endswith(ext):
            return fname[: -len(ext)]
    return None


def _candidates(rec, split, home: Path):
    """Candidate files for one split: registry local files, then official names."""
    out, seen = [], {}

    def add(path, fmt, label_map, target_column, kind):
        key = os.path.normcase(str(path))
        if key in seen:  # e.g. a9a/a9a is both a local-copy name and the official name
            seen[key]["official_name"] |= kind == "official"
            return
        seen[key] = {"path": path, "format": fmt, "label_map": label_map,
                     "target_column": target_column, "kind": kind,
                     "official_name": kind == "official"}
        out.append(seen[key])

    for loc in rec["local"]:
        if loc["split"] == split:
            add(home / loc["path"], loc["format"], loc.get("label_map"), loc.get("target_column"), "local")
    entry = (rec.get("official") or {}).get(split)
    if entry:
        folders = [home / rec["name"]]
        folders += [(home / loc["path"]).parent for loc in rec["local"]]
        fname = _official_fname(entry)
        plain = _decompressed(fname)
        for folder in dict.fromkeys(folders):
            add(folder / fname, entry["format"], entry.get("label_map"), None, "official")
            if plain:
                add(folder / plain, "libsvm", entry.get("label_map"), None, "official")
    return out


def _expected_hashes(rec, path: Path, home: Path) -> dict:
    """Known sha256 values for a file path: registry local copies and our download record."""
    expected = {}
    for loc in rec["local"]:
        if loc.get("sha256") and os.path.normcase(str(home / loc["path"])) == os.path.normcase(str(path)):
            expected[loc["sha256"]] = "registry (local copy, PROVENANCE.md)"
    record = _read_manifest(path.parent).get(path.name)
    if record and record.get("sha256"):
        expected.setdefault(record["sha256"], f"download record {path.parent / _MANIFEST}")
    return expected


def _verify(rec, path: Path, home: Path, is_official_name: bool) -> str:
    expected = _expected_hashes(rec, path, home)
    if not expected:
        return "unverified: no checksum known for this file (the LIBSVM site publishes none)"
    actual = _sha256(path)
    if actual in expected:
        return f"sha256 verified against the {expected[actual]}"
    want = " or ".join(expected)
    advice = (
        "replace it; if it is the official LIBSVM file (the site publishes no checksums, so it cannot "
        "be verified), pass verify=False"
        if is_official_name
        else "replace it, or pass verify=False to skip the check"
    )
    raise ChecksumMismatchError(
        f"sha256 mismatch for {path} (dataset {rec['name']!r}): expected {want}, got {actual}. "
        f"The file is corrupted or a different version: {advice}."
    )


def _where_to_put(rec, split, home: Path) -> str:
    entry = (rec.get("official") or {}).get(split)
    folder = home / rec["name"]
    if entry:
        return (
            f"download {entry['url']} into {folder}{os.sep} "
            f"(or set {ENV_VAR} to a data folder that holds {rec['name']}/{_official_fname(entry)})"
        )
    locs = [loc["path"] for loc in rec["local"] if loc["split"] == split]
    return (
        f"this dataset has no download URL: put {' or '.join(locs)} under {home} "
        f"(or set {ENV_VAR} to a data folder that holds it)"
    )


def _download(rec, split, home: Path) -> Path:
    entry = rec["official"][split]
    url, fname = entry["url"], _official_fname(entry)
    folder = home / rec["name"]
    try:
        import pooch
    except ImportError:
        raise ImportError(
            f"downloading dataset {rec['name']!r} needs pooch: pip install \"cakernels[datasets]\" "
            f"(or put the file in {folder}{os.sep}; it is at {url})"
        ) from None
    try:
        import tqdm  # noqa: F401

        progress = True
    except ImportError:
        progress = False
    # the folders pooch creates for the file: removed again (when empty) if the download
    # fails, so that a failed attempt leaves no data home or dataset folder behind
    created = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        path = pooch.retrieve(
            url, known_hash=entry.get("checksum"), path=folder, fname=fname, progressbar=progress
        )
    except Exception as exc:
        for p in created:  # deepest first
            try:
                p.rmdir()
            except OSError:  # not empty, or already gone
                pass
        raise DatasetDownloadError(
            f"could not download dataset {rec['name']!r} ({split}) from {url} ({_one_line(exc)}); "
            f"to work offline put {fname} in {folder}{os.sep} or set {ENV_VAR} to a data folder holding "
            f"{rec['name']}/{fname}"
        ) from None
    path = Path(path)
    if not entry.get("checksum"):
        _write_manifest(folder, fname, url, _sha256(path))
    return path


def _locate(rec, split, home: Path, download_if_missing: bool, verify: bool):
    """Return (path, candidate, how) for one split, downloading if allowed."""
    candidates = _candidates(rec, split, home)
    for cand in candidates:
        if cand["path"].is_file():
            how = (
                _verify(rec, cand["path"], home, cand["official_name"])
                if verify
                else "not verified: verify=False"
            )
            return cand["path"], cand, how
    entry = (rec.get("official") or {}).get(split)
    looked = ", ".join(str(c["path"]) for c in candidates) or "(no candidate files)"
    if entry is None or not download_if_missing:
        why = "download_if_missing=False" if entry is not None else "no local file"
        raise FileNotFoundError(
            f"dataset {rec['name']!r} ({split}): {why} and none of these exists: {looked}; "
            + _where_to_put(rec, split, home)
        )
    path = _download(rec, split, home)
    cand = {"path": path, "format": entry["format"], "label_map": entry.get("label_map"),
            "target_column": None, "kind": "official"}
    return path, cand, "downloaded from the LIBSVM site (not verified: the site publishes no checksums)"


# --------------------------------------------------------------------------- loading


def _check_n_samples(n_samples):
    if n_samples is None:
        return None
    if isinstance(n_samples, bool) or not isinstance(n_samples, numbers.Integral) or n_samples < 1:
        raise ValueError(f"n_samples must be a positive int or None, got {n_samples!r}")
    return int(n_samples)


def _subsample(X, y, n_samples, random_state, what):
    if n_samples is None:
        return X, y
    n = X.shape[0]
    if n_samples > n:
        raise ValueError(f"n_samples={n_samples} is larger than the {n} rows of {what}")
    if n_samples == n:
        return X, y
    rng = check_random_state(random_state)
    idx = np.sort(rng.choice(n, size=n_samples, replace=False))
    return X[idx], y[idx]


def _finish(X, y, want_dense: bool):
    if want_dense:
        X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    else:
        X = sp.csr_matrix(X, dtype=np.float64) if not sp.issparse(X) else X.tocsr()
    return X, np.asarray(y, dtype=np.float64)


def _check_labels(rec, y, paths):
    classes = rec.get("classes")
    if rec["task"] == "regression" or not classes:
        return
    found = np.unique(y)
    extra = sorted(set(found.tolist()) - {float(c) for c in classes})
    if extra:
        raise ValueError(
            f"dataset {rec['name']!r}: unexpected labels {extra[:5]} in {', '.join(map(str, paths))} "
            f"(the registry expects {classes})"
        )


def load_dataset(
    name,
    *,
    subset="train",
    data_home=None,
    download_if_missing=True,
    return_X_y=False,
    dense=None,
    n_samples=None,
    random_state=None,
    verify=True,
):
    """Load a registry dataset from the data home, downloading it if needed.

    Lookup order for each split: the registry's local files (``local``, paths relative
    to the data home, e.g. ``ijcnn1/ijcnn1.trn.bz2``), then the official LIBSVM file
    names in ``<data_home>/<name>/`` (also uncompressed), then a download of the official
    file with ``pooch`` into ``<data_home>/<name>/``.

    A local file whose sha256 is known (from the registry, or recorded when this module
    downloaded it) is verified; hashes are computed in chunks and cached per (path, inode,
    size, mtime, ctime) for the life of the process.  Official downloads are not verified: the LIBSVM
    site publishes no checksums.

    Parameters
    ----------
    name : str
        Registry name or alias (case-insensitive), see :func:`list_datasets`.
    subset : {"train", "test", "all"}, default="train"
        Which split.  ``"all"`` stacks train and test (just the data when there is no
        official test split).  ``"test"`` raises ``ValueError`` for datasets without an
        official test split.
    data_home : str or path-like, default=None
        Data folder; see :func:`get_data_home`.
    download_if_missing : bool, default=True
        If False and no local file exists, raise ``FileNotFoundError`` instead of
        downloading.
    return_X_y : bool, default=False
        Return ``(X, y)`` instead of a Bunch.
    dense : bool, default=None
        ``True``: dense ``ndarray``; ``False``: ``scipy.sparse.csr_matrix``; ``None``: the
        registry default (sparse for a9a, webspam, mushrooms; dense otherwise).
    n_samples : int, default=None
        Return a random subset of this many rows (without replacement, in file order).
        Must not exceed the number of rows.
    random_state : int, RandomState instance or None, default=None
        Seed of the subset drawn with ``n_samples``.
    verify : bool, default=True
        Check local files against the known sha256; ``False`` skips the check.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        With ``data`` (float64, dense or CSR), ``target`` (float64: -1/+1 for binary sets,
        the given class labels for multiclass ones, e.g. 1..10 for usps, real values for
        regression), ``feature_names`` (``None``), ``DESCR``, ``filename`` (the file read,
        or a list of two for ``subset="all"`` with a test split), ``subset``, ``name``
        and ``task``.
    (X, y) : tuple
        If ``return_X_y`` is True.

    Raises
    ------
    ValueError
        Unknown name, bad ``subset``/``n_samples``, ``subset="test"`` without a test
        split, or a malformed file.
    FileNotFoundError
        No local file and ``download_if_missing=False`` (or no download URL).
    ChecksumMismatchError
        A local file's sha256 differs from the registry's (an ``OSError``).
    DatasetDownloadError
        The download failed, e.g. offline (an ``OSError``).
    ImportError
        A download is needed but ``pooch`` is not installed
        (``pip install "cakernels[datasets]"``).

    See Also
    --------
    load_demo : Small binary dataset that needs no data files.

    Examples
    --------
    The real datasets need the data folder (``CAKERNELS_DATA``) or the network:

    >>> from cakernels.datasets import load_dataset
    >>> X, y = load_dataset("ijcnn1", n_samples=1000, random_state=0,
    ...                     return_X_y=True)  # doctest: +SKIP
    >>> X.shape  # doctest: +SKIP
    (1000, 22)
    >>> Xt, yt = load_dataset("a9a", subset="test", return_X_y=True)  # doctest: +SKIP
    >>> Xt.shape  # doctest: +SKIP
    (16281, 123)
    """
    rec = _record(name)
    if subset not in _SUBSETS:
        raise ValueError(f"subset must be one of {_SUBSETS}, got {subset!r}")
    has_test = rec.get("n_test") is not None
    if subset == "test" and not has_test:
        raise ValueError(
            f"dataset {rec['name']!r} has no official test split; load subset='train' and split it "
            "with sklearn.model_selection.train_test_split"
        )
    if dense is not None and not isinstance(dense, (bool, np.bool_)):
        raise ValueError(f"dense must be None, True or False, got {dense!r}")
    for name, value in (("download_if_missing", download_if_missing), ("verify", verify),
                        ("return_X_y", return_X_y)):
        _check_flag(name, value)
    n_samples = _check_n_samples(n_samples)
    home = get_data_home(data_home)
    splits = ["train", "test"] if (subset == "all" and has_test) else ["train" if subset == "all" else subset]

    parts, paths, hows = [], [], []
    for split in splits:
        path, cand, how = _locate(rec, split, home, download_if_missing, verify)
        X, y = _read_file(path, cand["format"], rec["n_features"], cand.get("target_column"))
        y = _apply_label_map(y, cand.get("label_map"), path)
        _check_row_count(rec, split, cand, X.shape[0], path, how)
        parts.append((X, y))
        paths.append(path)
        hows.append(how)
    if len(parts) == 1:
        X, y = parts[0]
    else:
        Xs = [p[0] for p in parts]
        X = sp.vstack(Xs, format="csr") if any(sp.issparse(x) for x in Xs) else np.vstack(Xs)
        y = np.concatenate([p[1] for p in parts])
    _check_labels(rec, y, paths)

    want_dense = rec["dense"] if dense is None else bool(dense)
    X, y = _subsample(X, y, n_samples, random_state, f"{rec['name']} ({subset})")
    X, y = _finish(X, y, want_dense)
    if return_X_y:
        return X, y
    return Bunch(
        data=X,
        target=y,
        feature_names=None,
        DESCR=_descr(rec, subset, paths, hows),
        filename=str(paths[0]) if len(paths) == 1 else [str(p) for p in paths],
        subset=subset,
        name=rec["name"],
        task=rec["task"],
    )


def _check_row_count(rec, split, cand, n_rows, path, how):
    """Warn when a file that was not verified by its checksum (an official name placed
    by hand or downloaded, or ``verify=False``) has another number of rows than the
    registry's split: a cut or truncated copy was taken for the whole split silently."""
    expected = cand.get("n_samples", rec.get(f"n_{split}"))
    if expected is None or n_rows == expected or how.startswith("sha256 verified"):
        return
    import warnings

    warnings.warn(f"{path}: {n_rows:,} rows, but the {split} split of {rec['name']} has "
                  f"{expected:,}: a cut or other copy? ({how})", UserWarning, stacklevel=3)


def _descr(rec, subset, paths, hows) -> str:
    split = (
        f"official split {rec['n_train']:,} train / {rec['n_test']:,} test"
        if rec.get("n_test") is not None
        else f"{rec['n_train']:,} samples, no official test split"
    )
    lines = [
        f"{rec['name']} ({rec['task']}, {rec['n_features']} features; {split})",
        "",
        rec["description"],
    ]
    if rec.get("notes"):
        lines += ["", rec["notes"]]
    lines += ["", f"Source: {rec.get('source_page') or 'see the registry'}", f"Subset: {subset}"]
    lines += [f"File: {p} ({h})" for p, h in zip(paths, hows)]
    return "\n".join(lines)


# --------------------------------------------------------------------------- demos


def load_demo(*, return_X_y=False, n_samples=None, random_state=None):
    """Load a small binary dataset that needs no data files and no network.

    This is scikit-learn's Wisconsin diagnostic breast cancer data
    (:func:`sklearn.datasets.load_breast_cancer`, shipped inside scikit-learn): 569
    samples, 30 dense features, with the labels mapped to -1/+1 (malignant -> -1,
    benign -> +1) as in the LIBSVM convention.  It is the offline fallback of the
    command line.

    Parameters
    ----------
    return_X_y : bool, default=False
        Return ``(X, y)`` instead of a Bunch.
    n_samples : int, default=None
        Random subset of this many rows (in the original order).
    random_state : int, RandomState instance or None, default=None
        Seed of the subset.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data`` (569, 30) float64, ``target`` in {-1, +1}, ``feature_names``,
        ``DESCR``, ``filename``, ``subset`` (``"all"``), ``name`` and ``task``.
    (X, y) : tuple
        If ``return_X_y`` is True.

    Examples
    --------
    >>> from cakernels.datasets import load_demo
    >>> X, y = load_demo(return_X_y=True)
    >>> X.shape, sorted(set(y.tolist()))
    ((569, 30), [-1.0, 1.0])
    """
    from sklearn.datasets import load_breast_cancer

    raw = load_breast_cancer()
    X = np.asarray(raw.data, dtype=np.float64)
    y = np.where(raw.target == 1, 1.0, -1.0)
    return _demo_bunch(raw, X, y, "demo (breast cancer)", "binary", return_X_y, n_samples, random_state,
                       "Labels: malignant -> -1, benign -> +1.")


def load_demo_regression(*, return_X_y=False, n_samples=None, random_state=None):
    """Load a small regression dataset that needs no data files and no network.

    This is scikit-learn's diabetes data (:func:`sklearn.datasets.load_diabetes`,
    shipped inside scikit-learn): 442 samples, 10 dense (already scaled) features, target
    = disease progression after one year.  It is the offline fallback of the command line.

    Parameters
    ----------
    return_X_y : bool, default=False
        Return ``(X, y)`` instead of a Bunch.
    n_samples : int, default=None
        Random subset of this many rows (in the original order).
    random_state : int, RandomState instance or None, default=None
        Seed of the subset.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data`` (442, 10) float64, ``target`` float64, ``feature_names``, ``DESCR``,
        ``filename``, ``subset`` (``"all"``), ``name`` and ``task``.
    (X, y) : tuple
        If ``return_X_y`` is True.

    Examples
    --------
    >>> from cakernels.datasets import load_demo_regression
    >>> X, y = load_demo_regression(return_X_y=True)
    >>> X.shape, y.dtype
    ((442, 10), dtype('float64'))
    """
    from sklearn.datasets import load_diabetes

    raw = load_diabetes()
    X = np.asarray(raw.data, dtype=np.float64)
    y = np.asarray(raw.target, dtype=np.float64)
    return _demo_bunch(raw, X, y, "demo_regression (diabetes)", "regression", return_X_y, n_samples,
                       random_state, "")


def _check_flag(name, value):
    """A True/False argument (the string 'False' is true: it started a download,
    and returned a tuple for return_X_y)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def _demo_bunch(raw, X, y, name, task, return_X_y, n_samples, random_state, note):
    _check_flag("return_X_y", return_X_y)
    n_samples = _check_n_samples(n_samples)
    X, y = _subsample(X, y, n_samples, random_state, name)
    if return_X_y:
        return X, y
    return Bunch(
        data=X,
        target=y,
        feature_names=list(raw.feature_names),
        DESCR=(f"{name}: shipped with scikit-learn, no download needed. {note}\n\n" + raw.DESCR).strip(),
        filename=getattr(raw, "filename", None),
        subset="all",
        name=name.split(" ")[0],
        task=task,
    )
