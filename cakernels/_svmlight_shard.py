"""One rank's contiguous block of rows of a LIBSVM file (parallel IO).

An uncompressed file is split into byte ranges, one per rank, moved to line
boundaries (a line belongs to the rank whose range holds its first byte), so
every rank reads and parses only its own part of the file. The number of
features and the index base are then agreed with two small reductions, so
that all shards have the same columns. A compressed file cannot be split
without decompressing it: rank 0 reads it and scatters contiguous blocks of
rows (counted as communication).
"""

import io
import os
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

_COMPRESSED = (".gz", ".bz2", ".xz")


def _line_start_at_or_after(fh, offset):
    """First position >= offset that starts a line."""
    if offset <= 0:
        return 0
    fh.seek(offset - 1)
    if fh.read(1) == b"\n":
        return offset
    rest = fh.readline()
    return offset + len(rest)


def _parse(chunk, dtype):
    from sklearn.datasets import load_svmlight_file

    if not chunk.strip():
        return sp.csr_matrix((0, 0), dtype=dtype), np.zeros(0)
    X, y = load_svmlight_file(io.BytesIO(chunk), zero_based=True, dtype=dtype)
    return X.tocsr(), np.asarray(y, dtype=np.float64)


def _with_columns(X, n_columns):
    X = X.tocsr()
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_columns))


def read_shard(path, comm, *, n_features=None, zero_based="auto", dtype=np.float64):
    """Rows of ``path`` for ``comm.rank`` (see :func:`cakernels.datasets.load_svmlight_shard`).

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_local, n_features)
    y : ndarray of shape (n_local,)
    info : dict
        ``offset`` (global index of the first local row), ``n_samples``
        (all ranks), ``index_base`` (0 or 1) and ``truncated`` (the file's
        last line has no newline).
    """
    path = Path(os.fspath(path)).expanduser()
    error = None
    if not path.is_file():
        error = f"no such file: {path}"
    comm.agree(error)
    truncated = False
    if path.suffix.lower() in _COMPRESSED:
        parts = None
        if comm.rank == 0:
            from .datasets import load_svmlight

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                Xa, ya = load_svmlight(path, n_features=None)
            truncated = any("newline" in str(w.message) for w in caught)
            Xa = Xa.tocsr()
            bounds = np.linspace(0, Xa.shape[0], comm.size + 1).astype(np.int64)
            parts = [(Xa[a:b], ya[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
        X, y = _scatter_rows(comm, parts)
        truncated = comm.bcast_obj(truncated)
        raw_base_zero = False  # load_svmlight already chose the base
        one_based_shift = False
    else:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            lo = _line_start_at_or_after(fh, size * comm.rank // comm.size)
            hi = _line_start_at_or_after(fh, size * (comm.rank + 1) // comm.size)
            fh.seek(lo)
            chunk = fh.read(max(0, hi - lo))
            if comm.rank == comm.size - 1 and size:
                fh.seek(size - 1)
                truncated = fh.read(1) != b"\n"
        try:
            X, y = _parse(chunk, dtype)
            error = None
        except ValueError as exc:
            X, y, error = None, None, f"{path}: could not parse it as a LIBSVM file: {exc}"
        comm.agree(error)
        truncated = bool(comm.allreduce(int(truncated), "max"))
        uses_zero = bool(X.nnz and X.indices.min() == 0)
        raw_base_zero = bool(comm.allreduce(int(uses_zero), "max"))
        if zero_based == "auto":
            one_based_shift = not raw_base_zero
        else:
            one_based_shift = not zero_based
            if one_based_shift and raw_base_zero:
                comm.agree(f"{path}: zero_based=False but the file uses index 0" if uses_zero
                           else None)
        if one_based_shift and X.shape[1]:  # column 0 is empty: drop it
            X = sp.csr_matrix((X.data, X.indices - 1, X.indptr),
                              shape=(X.shape[0], X.shape[1] - 1))
    width = comm.allreduce(int(X.shape[1]), "max")
    if n_features is not None:
        if width > n_features:
            comm.agree(f"{path} has {width} features, more than n_features={n_features}")
        width = int(n_features)
    X = _with_columns(X, width)
    counts = comm.allgather(int(X.shape[0]))
    if sum(counts) == 0:
        comm.agree(f"{path}: the file is empty (no samples)")
    info = {"offset": int(sum(counts[:comm.rank])), "n_samples": int(sum(counts)),
            "index_base": 1 if one_based_shift else 0, "truncated": truncated}
    if truncated and comm.rank == 0:
        warnings.warn(f"{path}: the last line has no newline: the file may be cut off "
                      f"({sum(counts):,} rows read)", UserWarning, stacklevel=3)
    return X, y, info


def _scatter_rows(comm, parts):
    """Rank 0's list of (CSR, y) blocks, one per rank, scattered (buffer calls)."""
    if comm.rank == 0:
        width = parts[0][0].shape[1]
        indptr = [p[0].indptr.astype(np.int64) for p in parts]
        indices = [p[0].indices.astype(np.int64) for p in parts]
        data = [p[0].data.astype(np.float64) for p in parts]
        ys = [np.asarray(p[1], dtype=np.float64) for p in parts]
    else:
        width = indptr = indices = data = ys = None
    width = comm.bcast_obj(width)
    ip = comm.Scatterv(indptr)
    ix = comm.Scatterv(indices)
    dv = comm.Scatterv(data)
    y = comm.Scatterv(ys)
    X = sp.csr_matrix((dv, ix, ip), shape=(ip.size - 1, width))
    return X, y
