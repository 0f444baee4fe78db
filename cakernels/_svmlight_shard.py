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


def _fingerprint(path, span=1 << 16):
    """``(size, sha256 of the first and last span bytes)`` of a file (the digest
    None where it cannot be read): equal for copies of one file at other paths."""
    import hashlib

    size = path.stat().st_size
    try:
        with open(path, "rb") as fh:
            digest = hashlib.sha256(fh.read(span))
            fh.seek(max(0, size - span))
            digest.update(fh.read(span))
    except OSError:
        return size, None
    return size, digest.hexdigest()


def _parse(chunk, dtype):
    from sklearn.datasets import load_svmlight_file

    if not chunk.strip():
        return sp.csr_matrix((0, 0), dtype=dtype), np.zeros(0)
    X, y = load_svmlight_file(io.BytesIO(chunk), zero_based=True, dtype=dtype)
    return X.tocsr(), np.asarray(y, dtype=np.float64)


def _with_columns(X, n_columns):
    X = X.tocsr()
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_columns))


def read_shard(path, comm, *, n_features=None, zero_based="auto", index_0="error"):
    """Rows of ``path`` for ``comm.rank`` (see :func:`cakernels.datasets.load_svmlight_shard`).

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_local, n_features)
    y : ndarray of shape (n_local,)
    info : dict
        ``offset`` (global index of the first local row), ``n_samples``
        (all ranks), ``index_base`` (0 or 1), ``rows_with_index_0`` and
        ``dropped_index_0`` (over all ranks), ``truncated`` (the file's last
        line has no newline).
    """
    from .datasets import _check_zero_based, _parse_svmlight

    zero_based = _check_zero_based(zero_based)
    path = Path(os.fspath(path)).expanduser()
    # the reading below takes other collective steps for other arguments: compared first
    compressed = path.suffix.lower() in _COMPRESSED
    comm.agree(None, call="load_svmlight_shard",
               same=(zero_based, None if n_features is None else int(n_features), index_0,
                     compressed),
               mismatch="were given other arguments than rank 0 (zero_based, n_features, "
                        "or a compressed file where rank 0's is not, or the reverse): every "
                        "rank must call load_svmlight_shard with the same arguments")
    # as load_svmlight: FileNotFoundError / IsADirectoryError / not a regular file,
    # the same on every rank
    kind = ("dir" if path.is_dir() else None if path.is_file() else
            "other" if path.exists() else "missing")
    kinds = comm.allgather(kind) if comm.size > 1 else [kind]
    if "dir" in kinds:
        raise IsADirectoryError(f"{path}: is a directory, not a LIBSVM file")
    if "missing" in kinds:
        ranks = [r for r, k in enumerate(kinds) if k == "missing"]
        where = "" if len(ranks) == len(kinds) else f" (on rank{'s' * (len(ranks) > 1)} {ranks})"
        raise FileNotFoundError(f"no such file: {path}{where}")
    if "other" in kinds:
        ranks = [r for r, k in enumerate(kinds) if k == "other"]
        where = "" if len(ranks) == len(kinds) else f" (on rank{'s' * (len(ranks) > 1)} {ranks})"
        raise ValueError(f"{path}: not a regular file{where} (a pipe or a device?): the "
                         "sharded reader seeks in the file; save the data to a file first")
    if not compressed:
        # every rank reads its own byte range of the file: the same file everywhere
        # (a node-local copy of another size lost or repeated rows silently, and so
        # did a file of each rank's own rows): its size and the digest of its ends
        comm.agree(None, same=_fingerprint(path),
                   mismatch="see another file than rank 0's (of another size or other "
                            "contents, or unreadable): every rank must read the same file "
                            "(a node-local copy that is incomplete or older?); "
                            "load_svmlight_shard splits one file between the ranks, a file "
                            "of each rank's own rows is load_svmlight(path, n_features=...)")
    if compressed:
        # a compressed stream cannot be split: rank 0 reads it and scatters rows
        parts, info, error = None, None, None
        if comm.rank == 0:
            try:
                # (the truncation warning is raised below, after the scatter, once)
                read = _parse_svmlight(path, n_features=n_features, zero_based=zero_based,
                                       index_0=index_0, warn_truncated=False)
                Xa = read.X.tocsr()
                bounds = np.linspace(0, Xa.shape[0], comm.size + 1).astype(np.int64)
                parts = [(Xa[a:b], read.y[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
                info = {"index_base": read.index_base,
                        "rows_with_index_0": read.rows_with_index_0,
                        "dropped_index_0": read.dropped_index_0,
                        "truncated": bool(read.truncated)}
            except Exception as exc:  # every rank raises it below (none waits alone)
                error = f"{path}: {exc}" if isinstance(exc, (MemoryError, OSError)) and \
                    not str(exc).startswith(f"{path}:") \
                    else str(exc)
        comm.agree(error)
        X, y = _scatter_rows(comm, parts)
        info = comm.bcast_obj(info)
    else:
        X, y, info = _read_plain(path, comm, n_features, zero_based, index_0)
    counts = comm.allgather(int(X.shape[0]))
    info.update(offset=int(sum(counts[:comm.rank])), n_samples=int(sum(counts)))
    if info["truncated"] and comm.rank == 0:
        warnings.warn(f"{path}: the last line has no newline at its end, so the file may be "
                      f"cut off (read {info['n_samples']:,} rows; the last one may be "
                      "incomplete)", UserWarning, stacklevel=3)
    return X, y, info


def _read_plain(path, comm, n_features, zero_based, index_0):
    """Every rank parses the lines that start in its byte range of the file."""
    truncated, error = False, None
    try:  # any failure is raised on every rank by the agreement below (none waits alone)
        size = path.stat().st_size
        with open(path, "rb") as fh:
            lo = _line_start_at_or_after(fh, size * comm.rank // comm.size)
            hi = _line_start_at_or_after(fh, size * (comm.rank + 1) // comm.size)
            fh.seek(lo)
            chunk = fh.read(max(0, hi - lo))
            if comm.rank == comm.size - 1 and size:
                fh.seek(size - 1)
                truncated = fh.read(1) != b"\n"
        X, y = _parse(chunk, np.float64)
    except Exception as exc:
        from .datasets import _first_bad_line, _parse_error, _permission_denied

        def bad_line():  # numbered in the whole file: count the lines before the range
            with open(path, "rb") as fh:
                before = sum(fh.read(min(1 << 24, lo - at)).count(b"\n")
                             for at in range(0, lo, 1 << 24))
            return _first_bad_line(io.BytesIO(chunk), first=before + 1)

        # (an I/O error is not a format error: "permission denied", as load_svmlight)
        X, y, error = None, None, (_permission_denied(path) if isinstance(exc, PermissionError)
                                   else _parse_error(path, exc, bad_line))
    comm.agree(error)
    truncated = bool(comm.allreduce(int(truncated), "max"))
    at_0 = X.indices == 0
    rows_0 = int(comm.allreduce(int(np.count_nonzero(at_0))))
    base = (0 if rows_0 else 1) if zero_based == "auto" else (0 if zero_based else 1)
    dropped = 0
    if base == 1 and rows_0:
        if index_0 != "drop":
            comm.agree(f"{path}: feature index 0 occurs in {rows_0:,} rows, but the file is "
                       "read one-based (indices from 1): pass zero_based=True or 'auto' to "
                       "read it zero-based")
        keep = ~at_0
        removed = np.concatenate([[0], np.cumsum(at_0)])
        X = sp.csr_matrix((X.data[keep], X.indices[keep], X.indptr - removed[X.indptr]),
                          shape=X.shape)
        dropped = rows_0
    if base == 1 and X.shape[1]:  # column 0 is empty now: drop it
        X = sp.csr_matrix((X.data, X.indices - 1, X.indptr), shape=(X.shape[0], X.shape[1] - 1))
    width = comm.allreduce(int(X.shape[1]), "max")
    if n_features is not None:
        if width > n_features:
            comm.agree(f"{path}: the file has {width} features, more than "
                       f"n_features={n_features}")
        width = int(n_features)
    X = _with_columns(X, max(width, 1))
    if comm.allreduce(int(X.shape[0])) == 0:
        comm.agree(f"{path}: the file is empty (no samples)")
    X, y = _rebalance_thin_ranks(comm, X, y)
    return X, y, {"index_base": base, "rows_with_index_0": rows_0, "dropped_index_0": dropped,
                  "truncated": truncated}


def _rebalance_thin_ranks(comm, X, y):
    """Equal contiguous blocks of rows, in file order, when some rank read less
    than half the rows of another (a line longer than its byte range: none, or
    one row next to 300) and the file has a row for every rank: a sharded fit
    needs rows on every rank (the random partitioner as many as the partitions
    it owns). One all-to-all of the moved rows; nothing moves otherwise (byte
    ranges give rows within a few percent of each other)."""
    counts = np.array(comm.allgather(int(X.shape[0])), dtype=np.int64)
    if (comm.size == 1 or 2 * counts.min() >= counts.max()
            or counts.sum() < comm.size):
        return X, y
    bounds = np.linspace(0, counts.sum(), comm.size + 1).astype(np.int64)
    first = int(counts[:comm.rank].sum())  # global index of this rank's first row
    rows = first + np.arange(X.shape[0])
    dest = np.searchsorted(bounds, rows, side="right") - 1
    cut = np.searchsorted(dest, np.arange(comm.size + 1))  # rows are in rank order
    nnz = np.diff(X.indptr).astype(np.int64)
    blocks = [(cut[r], cut[r + 1]) for r in range(comm.size)]
    got_nnz = comm.Alltoallv([nnz[a:b] for a, b in blocks])
    got_y = comm.Alltoallv([np.asarray(y[a:b], dtype=np.float64) for a, b in blocks])
    got_ix = comm.Alltoallv([X.indices[X.indptr[a]:X.indptr[b]].astype(np.int64)
                             for a, b in blocks])
    got_data = comm.Alltoallv([X.data[X.indptr[a]:X.indptr[b]].astype(np.float64)
                               for a, b in blocks])
    nnz = np.concatenate(got_nnz)
    indptr = np.concatenate([[0], np.cumsum(nnz)]).astype(np.int64)
    X = sp.csr_matrix((np.concatenate(got_data), np.concatenate(got_ix), indptr),
                      shape=(nnz.size, X.shape[1]))
    return X, np.concatenate(got_y)


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
