"""One communicator wrapper through which every message of the package goes.

:class:`Communicator` wraps an mpi4py communicator; :class:`SelfCommunicator` is
the same interface for one process without MPI, so that the distributed
algorithms keep their maths in one function with serial defaults (rank 0 of
1). Every call counts what this rank sends in a :class:`CommCounter`, by phase
and by operation, so that no estimator counts by hand.

What is counted (the volume each rank injects, as the reference's Tables 2.6
and 2.7 count it: every datum once, when it leaves its rank):

=====================  ===========================================================
operation              bytes and messages counted on a rank
=====================  ===========================================================
Send                   the buffer, 1 message
Bcast, bcast_obj       the root: the buffer (or its pickle) once, 1 message
Scatterv               the root: the chunks for other ranks, 1 message per non-empty chunk
Gatherv                every rank but the root: its chunk, 1 message if non-empty
Allgatherv, allgather  every rank: its chunk (or pickle) once, 1 message if non-empty
Allreduce, allreduce   every rank: its buffer once, 1 message
Alltoallv              every rank: the chunks for other ranks, 1 message per non-empty
Barrier, Recv          nothing
=====================  ===========================================================

The shapes and dtypes that buffer calls exchange before their payload are
counted too, under the operation ``metadata`` (so that ``by_op`` shows every
payload exactly and the totals include everything). Nothing is counted on a communicator of one process. NumPy arrays travel
with the buffer (upper-case) calls; only small Python objects are pickled.
"""

import contextlib
import os
import pickle
import sys
import time

import numpy as np

#: the phases of a fit and of a prediction, in the order they happen
PHASES = ("setup", "partitioning", "redistribution", "training", "model_gather",
          "validation", "prediction")


class CollectiveError(ValueError):
    """An error raised on every rank of a communicator with the same message.

    Bad input on some rank, found by a collective check, or another rank's
    failure (the failing rank raises its own exception, the others this one,
    naming it), so that an SPMD job ends on every rank instead of waiting. A
    ``ValueError``: code that catches scikit-learn's input errors catches it.

    Examples
    --------
    >>> from cakernels.backends import CollectiveError
    >>> issubclass(CollectiveError, ValueError)
    True
    """


class CommCounter:
    """Bytes and messages this rank sent, by phase and by operation.

    Every communicator owns one (``comm.counter``); the calls made inside
    ``with comm.phase(name):`` are counted under that phase (one of
    :data:`PHASES`). A fitted estimator's ``fit_stats_['comm']`` is built
    from every rank's :meth:`summary` (:func:`comm_report`).

    Examples
    --------
    >>> from cakernels.backends import CommCounter
    >>> counter = CommCounter()
    >>> with counter.phase("training"):
    ...     counter.record("Allreduce", nbytes=800, messages=1)
    >>> s = counter.summary()
    >>> s["bytes"], s["by_phase"]["training"], s["by_op"]["Allreduce"]["calls"]
    (800, {'bytes': 800, 'messages': 1}, 1)
    """

    def __init__(self):
        self.current = "setup"
        self.table = {}  # (phase, op) -> [bytes, messages, calls]

    @contextlib.contextmanager
    def phase(self, name):
        """Count the calls made inside the block under phase ``name``."""
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r}; expected one of {PHASES}")
        previous, self.current = self.current, name
        try:
            yield self
        finally:
            self.current = previous

    def record(self, op, nbytes, messages):
        """Count one call of ``op`` that sent ``nbytes`` in ``messages`` messages,
        under the current phase."""
        row = self.table.setdefault((self.current, op), [0, 0, 0])
        row[0] += int(nbytes)
        row[1] += int(messages)
        row[2] += 1

    def summary(self):
        """``{'bytes', 'messages', 'by_phase', 'by_op'}`` of this rank (plain dicts)."""
        by_phase = {p: {"bytes": 0, "messages": 0} for p in PHASES}
        by_op = {}
        total_b = total_m = 0
        for (phase, op), (b, m, calls) in sorted(self.table.items()):
            by_phase[phase]["bytes"] += b
            by_phase[phase]["messages"] += m
            o = by_op.setdefault(op, {"bytes": 0, "messages": 0, "calls": 0})
            o["bytes"] += b
            o["messages"] += m
            o["calls"] += calls
            total_b += b
            total_m += m
        return {"bytes": total_b, "messages": total_m, "by_phase": by_phase, "by_op": by_op}


def comm_report(rank_summaries):
    """``fit_stats_['comm']``: every rank's summary and their totals.

    Parameters
    ----------
    rank_summaries : list of dict
        Every rank's :meth:`CommCounter.summary`, in rank order.

    Returns
    -------
    report : dict
        ``n_ranks``, ``ranks`` (the summaries) and ``total`` (``bytes``,
        ``messages``, ``by_phase`` and ``by_op`` summed over the ranks).

    Examples
    --------
    >>> from cakernels.backends import CommCounter, comm_report
    >>> a, b = CommCounter(), CommCounter()
    >>> with a.phase("model_gather"):
    ...     a.record("Gatherv", 96, 1)
    >>> b.record("metadata", 40, 1)
    >>> report = comm_report([a.summary(), b.summary()])
    >>> report["n_ranks"], report["total"]["bytes"], report["total"]["by_phase"]["setup"]
    (2, 136, {'bytes': 40, 'messages': 1})
    """
    total = {"bytes": 0, "messages": 0, "by_phase": {p: {"bytes": 0, "messages": 0}
                                                      for p in PHASES}, "by_op": {}}
    for s in rank_summaries:
        total["bytes"] += s["bytes"]
        total["messages"] += s["messages"]
        for p, v in s["by_phase"].items():
            total["by_phase"][p]["bytes"] += v["bytes"]
            total["by_phase"][p]["messages"] += v["messages"]
        for op, v in s["by_op"].items():
            t = total["by_op"].setdefault(op, {"bytes": 0, "messages": 0, "calls": 0})
            for k in t:
                t[k] += v[k]
    return {"n_ranks": len(rank_summaries), "ranks": list(rank_summaries), "total": total}


def _as_array(a, dtype=None):
    return np.ascontiguousarray(a if dtype is None else np.asarray(a, dtype=dtype))


class _BaseCommunicator:
    """Shared logic; subclasses provide the transport."""

    rank = 0
    size = 1

    def __init__(self):
        self.counter = CommCounter()

    def phase(self, name):
        """A context manager counting the calls made inside it under phase
        ``name`` (one of ``PHASES``) in ``counter`` (``fit_stats_['comm']``)."""
        return self.counter.phase(name)

    def _count(self, op, nbytes, messages):
        if self.size > 1:
            self.counter.record(op, nbytes, messages)

    # ------------------------------------------------------------- agreement
    def agree(self, error, same=None, mismatch=None, counted=True, failure=None, call=None):
        """Collective error check: ``error`` is this rank's message or None.

        When any rank has an error, every rank raises the same ``CollectiveError``
        (a ``ValueError``: the lowest failing rank's message, naming the rank
        unless every rank has that same message), so that an SPMD job ends
        cleanly on every rank. One process raises a plain ``ValueError``, as
        scikit-learn's estimators do.

        ``same`` (optional, in the same message): a value that must be equal on
        every rank; where it differs from rank 0's every rank raises
        ``CollectiveError("ranks [...] " + mismatch)``. ``counted=False``: a
        check outside the algorithm's traffic, not in the counters.
        ``failure``: an unexpected exception of this rank (when ``error`` is
        None): the others hear its type and message, and this rank re-raises it.
        ``call``: the name of the public collective call this check opens
        (``'load_svmlight_shard'``: calls that open no MPI session, whose
        opening exchanges the name), sent with it: ranks in different calls
        end the job (:func:`check_in_step`).
        """
        if failure is not None and error is None:
            if self.size == 1:
                raise failure
            error = failure_text(failure)
        else:
            failure = None
        if self.size == 1:  # one process: the plain ValueError scikit-learn raises
            if error is not None:
                raise ValueError(" ".join(str(error).split()))
            return
        try:
            self._agree(error, same, mismatch, counted, call)
        except CollectiveError:
            if failure is not None:  # this rank's own exception, as run_collectively
                failure.collective = True
                raise failure from None
            raise

    def _agree(self, error, same, mismatch, counted, call):
        gather = self.allgather if counted else self._allgather_uncounted
        if call is not None:
            pairs = [got[1:] for got in check_in_step(self, gather((call, error, same)), call)]
        elif same is None:
            pairs = [(e, None) for e in gather(error)]
        else:
            pairs = gather((error, same))
        errors = [e for e, _ in pairs]
        if same is not None:
            others = [r for r, (_, v) in enumerate(pairs) if v != pairs[0][1]]
            if others:
                raise CollectiveError(f"ranks {others} " + " ".join(str(mismatch).split()))
        bad = [(r, e) for r, e in enumerate(errors) if e is not None]
        if bad:
            rank, msg = bad[0]
            msg = " ".join(str(msg).split())  # one line
            if len(bad) == self.size and all(" ".join(str(e).split()) == msg for _, e in bad):
                raise CollectiveError(msg)  # every rank's own, the same: no rank to name
            raise CollectiveError(f"rank {rank}: " + msg)

    def run_collectively(self, func, *args, **kwargs):
        """Call ``func`` on this rank; if it raises on any rank, every rank raises.

        The failing rank re-raises its own exception (marked ``collective``);
        the others raise a :class:`CollectiveError` naming it, so that no rank
        waits forever in the next collective call.
        """
        try:
            result, failure = func(*args, **kwargs), None
        except Exception as exc:  # re-raised below, on every rank
            result, failure = None, exc
        self.raise_failures(failure)
        return result

    def raise_failures(self, failure, counted=True):
        """Collective: ``failure`` is this rank's exception or None; when any rank
        failed, every rank raises (the failing one its own exception).
        ``counted=False``: a control message outside the algorithm's traffic
        (the multi-level trees check after every layer), not in the counters."""
        text = failure_text(failure)
        texts = self.allgather(text) if counted else self._allgather_uncounted(text)
        raise_if_any_failed(failure, texts)

    def _allgather_uncounted(self, obj):
        return [obj]

    # ---------------------------------------- the interface, documented once here
    # (both subclasses implement it; ``help()`` and ``inspect.getdoc`` show these
    # texts for their methods)
    def bcast_obj(self, obj, root=0):
        """Broadcast a small picklable object from ``root``; returned on every rank
        (the other ranks' ``obj`` is ignored)."""
        raise NotImplementedError

    def allgather(self, obj):
        """Every rank's small picklable object, a list in rank order."""
        raise NotImplementedError

    def allreduce(self, value, op="sum"):
        """Reduce a number or an array over the ranks with ``op`` (``'sum'``,
        ``'max'`` or ``'min'``); the result on every rank, in ``value``'s shape."""
        raise NotImplementedError

    def Bcast(self, arr, root=0):
        """Broadcast an array from ``root``; other ranks may pass None (shape and
        dtype travel first). Returns the array on every rank."""
        raise NotImplementedError

    def Allreduce(self, arr, op="sum"):
        """Element-wise reduction of equal-shaped arrays over the ranks with ``op``
        (``'sum'``, ``'max'`` or ``'min'``); a new array on every rank."""
        raise NotImplementedError

    def Allgather(self, arr):
        """Every rank's array stacked in rank order, shape ``(size, *arr.shape)``.

        Every rank must pass the same shape and dtype (no metadata travels:
        one collective call, for the small fixed-size vectors of the
        distributed partitioners)."""
        raise NotImplementedError

    def Allgatherv(self, arr):
        """Every rank's array (same dtype and trailing shape, any length), a list
        in rank order."""
        raise NotImplementedError

    def Scatterv(self, chunks, root=0):
        """Rank ``root`` sends ``chunks[r]`` (arrays of one dtype) to every rank
        ``r``; every rank returns its own chunk. Other ranks pass None."""
        raise NotImplementedError

    def Gatherv(self, arr, root=0):
        """Rank ``root`` receives every rank's array (a list in rank order);
        other ranks return None."""
        raise NotImplementedError

    def Alltoallv(self, chunks):
        """Every rank sends ``chunks[r]`` to rank ``r`` (arrays of one dtype and
        trailing shape on every rank); returns the chunks received, by source."""
        raise NotImplementedError

    def Send(self, arr, dest, tag=0):
        """Blocking send of an array to rank ``dest`` (its shape and dtype go
        first, with ``tag``; the data with ``tag + 1``: use even tags)."""
        raise NotImplementedError

    def Isend(self, arr, dest, tag=0):
        """Non-blocking :meth:`Send`; returns the requests to complete with
        :meth:`waitall` (they hold the array until then)."""
        raise NotImplementedError

    def Recv(self, source, tag=0):
        """The array rank ``source`` sent with :meth:`Send` or :meth:`Isend` and
        the same ``tag``, as a new array."""
        raise NotImplementedError

    def waitall(self, requests):
        """Complete the requests of :meth:`Isend` calls (a list of their returns)."""
        raise NotImplementedError

    def Barrier(self):
        """Return when every rank has called it."""
        raise NotImplementedError


def check_in_step(comm, got, call):
    """``got``, the allgathered ``(call, ...)`` tuples that open the public
    collective call ``call`` on every rank, when every rank is in that call.

    Otherwise the ranks have fallen out of step: a rank skipped a collective
    call that the others made (an exception caught on that rank only, say by
    scikit-learn's ``cross_val_score`` or ``GridSearchCV``, which score a failed
    fit or scorer as NaN and go on unless ``error_score='raise'``), and each
    rank has read another call's message as its own. No rank can tell where
    the others will be next, so an error would leave the job hanging in a
    later call: one rank prints one line naming every rank's call and the job
    ends (``MPI_Abort``, exit status 1).
    """
    def name(g):
        if isinstance(g, bytes):  # a counted gather's pickle, met by an uncounted one
            try:
                g = pickle.loads(g)
            except Exception:
                return None
        return g[0] if isinstance(g, tuple) and g and isinstance(g[0], str) else None

    calls = [name(g) for g in got]
    if all(c == call for c in calls):
        return got
    where = ", ".join(f"rank {r} in {c or 'another collective step'}"
                      for r, c in enumerate(calls))
    # every rank that sees this aborts at once (waiting for another in a collective
    # could wait for ever: a rank whose own call sent no name does not look); the
    # first rank that sent a name, and so looked, prints the one line first
    if comm.rank == min(r for r, c in enumerate(calls) if c is not None):
        print(f"cakernels: the MPI ranks are in different collective calls ({where}): an "
              "exception was caught on some ranks only (scikit-learn's cross_val_score and "
              "searches catch a failed fit or scorer unless error_score='raise'); the ranks "
              "cannot agree any more: aborting the job", file=sys.stderr, flush=True)
        time.sleep(1)  # (the launcher forwards the line before the abort ends the job)
    else:
        time.sleep(5)  # (that rank's abort ends this one)
    comm.Abort(1)
    # (MPICH's MPI_Abort returns before the launcher ends the processes: this rank
    # must not go on reading the other call's messages meanwhile)
    time.sleep(60)
    os._exit(1)  # pragma: no cover - the launcher ended the job before


def failure_text(failure):
    """What a rank tells the others about its exception (None: no failure)."""
    return None if failure is None else f"{type(failure).__name__}: {failure}"


def raise_if_any_failed(failure, texts):
    """Given every rank's :func:`failure_text`, raise on every rank when any
    failed: the failing rank its own exception (marked ``collective``), the
    others a :class:`CollectiveError` naming the lowest failing rank."""
    failed = [(r, t) for r, t in enumerate(texts) if t is not None]
    if not failed:
        return
    if failure is not None:
        failure.collective = True  # every rank raises now
        raise failure
    rank, msg = failed[0]
    raise CollectiveError(f"rank {rank} failed: {msg}")


class SelfCommunicator(_BaseCommunicator):
    """The communicator of one process, without MPI (nothing is counted).

    The serial and threads backends' sessions use it, so that the
    distributed algorithms keep one code path: rank 0 of 1, and every
    collective call returns this process's own data.

    Examples
    --------
    >>> import numpy as np
    >>> from cakernels.backends import SelfCommunicator
    >>> comm = SelfCommunicator()
    >>> comm.rank, comm.size
    (0, 1)
    >>> comm.allreduce(2.5), comm.allgather("x"), comm.Allgatherv(np.arange(3))
    (2.5, ['x'], [array([0, 1, 2])])
    >>> comm.counter.summary()["bytes"]
    0
    """

    def Bcast(self, arr, root=0):
        return arr

    def bcast_obj(self, obj, root=0):
        return obj

    def allgather(self, obj):
        return [obj]

    def Allgather(self, arr):
        return np.array(arr, copy=True)[None]

    def Allgatherv(self, arr):
        return [np.asarray(arr)]

    def Scatterv(self, chunks, root=0):
        return chunks[0]

    def Gatherv(self, arr, root=0):
        return [np.asarray(arr)]

    def Allreduce(self, arr, op="sum"):
        return np.array(arr, copy=True)

    def allreduce(self, value, op="sum"):
        arr = np.asarray(value)
        return arr.copy() if arr.ndim else arr.item()

    def Alltoallv(self, chunks):
        return [np.asarray(chunks[0])]

    def Send(self, arr, dest, tag=0):  # pragma: no cover - one process has no peer
        raise RuntimeError("a one-process communicator has no other rank to send to")

    def Recv(self, source, tag=0):  # pragma: no cover
        raise RuntimeError("a one-process communicator has no other rank to receive from")

    def Isend(self, arr, dest, tag=0):  # pragma: no cover
        raise RuntimeError("a one-process communicator has no other rank to send to")

    def waitall(self, requests):
        return None

    def Barrier(self):
        return None


_MPI_OPS = {"sum": "SUM", "max": "MAX", "min": "MIN"}


def check_mpi_comm(comm):
    """``comm`` if it is an mpi4py intra-communicator; else a clear ``TypeError``
    (another object) or ``ValueError`` (``COMM_NULL``, an intercommunicator: its
    collectives talk to the remote group, so the ranks' models would differ).
    Local: every rank passing the same kind of object raises the same error."""
    from mpi4py import MPI

    if not isinstance(comm, MPI.Comm):
        raise TypeError(f"comm must be an mpi4py intra-communicator (MPI.COMM_WORLD or a "
                        f"sub-communicator such as COMM_WORLD.Split(...)), got "
                        f"{type(comm).__name__}")
    if comm == MPI.COMM_NULL:
        raise ValueError("comm is MPI.COMM_NULL: pass MPI.COMM_WORLD or a sub-communicator")
    if comm.Is_inter():
        raise ValueError("comm is an intercommunicator: cakernels needs an "
                         "intra-communicator (MPI.COMM_WORLD or a sub-communicator such as "
                         "COMM_WORLD.Split(...)); Merge() makes one of an intercommunicator")
    return comm


class Communicator(_BaseCommunicator):
    """A counted wrapper of an mpi4py communicator.

    NumPy arrays travel in the buffer (upper-case) calls, their shapes and
    dtypes first, so the receivers need not know them; small Python objects
    are pickled (lower-case calls). Every call is counted in ``counter``
    (see the module docstring for what is counted).

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        Any intra-communicator (``COMM_WORLD`` or a sub-communicator); a
        :class:`Communicator` is unwrapped.

    Raises
    ------
    TypeError
        ``comm`` is not an mpi4py communicator.
    ValueError
        ``comm`` is ``COMM_NULL`` or an intercommunicator.

    Examples
    --------
    A script run on every rank (``mpiexec -n 2 python -m mpi4py script.py``)::

        import numpy as np
        from mpi4py import MPI
        from cakernels.backends import Communicator

        comm = Communicator(MPI.COMM_WORLD)
        with comm.phase("training"):
            parts = comm.Allgatherv(np.full(comm.rank + 1, comm.rank))
        # every rank: [array([0]), array([1, 1])]
        print(comm.rank, parts, comm.counter.summary()["by_op"]["Allgatherv"])
    """

    def __init__(self, comm):
        super().__init__()
        from mpi4py import MPI

        self._MPI = MPI
        self.comm = check_mpi_comm(comm.comm if isinstance(comm, Communicator) else comm)
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()

    # ------------------------------------------------------------- objects
    def bcast_obj(self, obj, root=0):
        data = pickle.dumps(obj, protocol=5) if self.rank == root else None
        if self.rank == root:
            self._count("bcast", len(data), 1)
        data = self.comm.bcast(data, root=root)
        return obj if self.rank == root else pickle.loads(data)

    def _allgather_uncounted(self, obj):
        return self.comm.allgather(obj)

    def allgather(self, obj):
        data = pickle.dumps(obj, protocol=5)
        self._count("allgather", len(data), 1)
        # (not bytes: another rank's uncounted gather, in another call; check_in_step
        # tells the caller)
        return [pickle.loads(d) if isinstance(d, bytes) else d
                for d in self.comm.allgather(data)]

    def allreduce(self, value, op="sum"):
        arr = np.asarray(value)
        out = self.Allreduce(np.atleast_1d(arr), op)
        return out.reshape(arr.shape) if arr.ndim else out[0].item()

    # ------------------------------------------------------------- metadata
    def _bcast_meta(self, obj, root):
        data = pickle.dumps(obj, protocol=5) if self.rank == root else None
        if self.rank == root:
            self._count("metadata", len(data), 1)
        return pickle.loads(self.comm.bcast(data, root=root))

    def _gather_meta(self, obj, root):
        data = pickle.dumps(obj, protocol=5)
        if self.rank != root:
            self._count("metadata", len(data), 1)
        out = self.comm.gather(data, root=root)
        return None if out is None else [pickle.loads(d) for d in out]

    def _allgather_meta(self, obj):
        data = pickle.dumps(obj, protocol=5)
        self._count("metadata", len(data), 1)
        return [pickle.loads(d) for d in self.comm.allgather(data)]

    # ------------------------------------------------------------- buffers
    def _mpi_op(self, op):
        return getattr(self._MPI, _MPI_OPS[op])

    def Bcast(self, arr, root=0):
        meta = self._bcast_meta((arr.shape, arr.dtype.str) if self.rank == root else None,
                                root)
        if self.rank == root:
            buf = _as_array(arr)
            self._count("Bcast", buf.nbytes, 1)
        else:
            buf = np.empty(meta[0], dtype=np.dtype(meta[1]))
        self.comm.Bcast(buf, root=root)
        return buf

    def Allreduce(self, arr, op="sum"):
        buf = _as_array(arr)
        out = np.empty_like(buf)
        self._count("Allreduce", buf.nbytes, 1)
        self.comm.Allreduce(buf, out, op=self._mpi_op(op))
        return out

    def Allgather(self, arr):
        buf = _as_array(arr)
        out = np.empty((self.size,) + buf.shape, dtype=buf.dtype)
        self._count("Allgather", buf.nbytes, 1)
        self.comm.Allgather(buf, out)
        return out

    def Allgatherv(self, arr):
        buf = _as_array(arr)
        sizes = self._allgather_meta((buf.shape, buf.dtype.str))
        self._count("Allgatherv", buf.nbytes, int(buf.nbytes > 0))
        counts = np.array([int(np.prod(s)) for s, _ in sizes], dtype=np.int64)
        dtype = np.dtype(sizes[0][1])
        out = np.empty(int(counts.sum()), dtype=dtype)
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.comm.Allgatherv(buf.ravel(), [out, counts, displs, self._MPI._typedict[dtype.char]])
        return [out[d:d + c].reshape(s) for (s, _), d, c in zip(sizes, displs, counts)]

    def Scatterv(self, chunks, root=0):
        if self.rank == root:
            chunks = [_as_array(c) for c in chunks]
            meta = [(c.shape, c.dtype.str) for c in chunks]
            others = [c.nbytes for r, c in enumerate(chunks) if r != root]
            self._count("Scatterv", sum(others), sum(1 for b in others if b > 0))
        else:
            meta = None
        meta = self._bcast_meta(meta, root)
        shape, dt = meta[self.rank]
        dtype = np.dtype(dt)
        out = np.empty(shape, dtype=dtype)
        mpitype = self._MPI._typedict[dtype.char]
        if self.rank == root:
            counts = np.array([int(np.prod(s)) for s, _ in meta], dtype=np.int64)
            displs = np.concatenate([[0], np.cumsum(counts)[:-1]])
            send = np.concatenate([c.ravel() for c in chunks]) if chunks else np.empty(0, dtype)
            self.comm.Scatterv([send, counts, displs, mpitype], out.reshape(-1), root=root)
        else:
            self.comm.Scatterv(None, out.reshape(-1), root=root)
        return out

    def Gatherv(self, arr, root=0):
        buf = _as_array(arr)
        meta = self._gather_meta((buf.shape, buf.dtype.str), root)
        if self.rank != root:
            self._count("Gatherv", buf.nbytes, int(buf.nbytes > 0))
            self.comm.Gatherv(buf.ravel(), None, root=root)
            return None
        dtype = np.dtype(meta[0][1])
        counts = np.array([int(np.prod(s)) for s, _ in meta], dtype=np.int64)
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]])
        out = np.empty(int(counts.sum()), dtype=dtype)
        self.comm.Gatherv(buf.ravel(), [out, counts, displs, self._MPI._typedict[dtype.char]],
                          root=root)
        return [out[d:d + c].reshape(s) for (s, _), d, c in zip(meta, displs, counts)]

    def Alltoallv(self, chunks):
        chunks = [_as_array(c) for c in chunks]
        if len(chunks) != self.size:
            raise ValueError(f"Alltoallv needs {self.size} chunks, got {len(chunks)}")
        dtype = chunks[0].dtype
        tail = chunks[0].shape[1:]
        send_counts = np.array([c.size for c in chunks], dtype=np.int64)
        # counts and shapes first: one small all-to-all of integers
        recv_counts = np.empty(self.size, dtype=np.int64)
        self._count("metadata", 8 * (self.size - 1), self.size - 1)
        self.comm.Alltoall(send_counts, recv_counts)
        others = [c.nbytes for r, c in enumerate(chunks) if r != self.rank]
        self._count("Alltoallv", sum(others), sum(1 for b in others if b > 0))
        sdispl = np.concatenate([[0], np.cumsum(send_counts)[:-1]])
        rdispl = np.concatenate([[0], np.cumsum(recv_counts)[:-1]])
        send = np.concatenate([c.ravel() for c in chunks]) if chunks else np.empty(0, dtype)
        recv = np.empty(int(recv_counts.sum()), dtype=dtype)
        mpitype = self._MPI._typedict[dtype.char]
        self.comm.Alltoallv([send, send_counts, sdispl, mpitype],
                            [recv, recv_counts, rdispl, mpitype])
        return [recv[d:d + c].reshape((-1,) + tail) for d, c in zip(rdispl, recv_counts)]

    def Send(self, arr, dest, tag=0):
        buf = _as_array(arr)
        header = pickle.dumps((buf.shape, buf.dtype.str), protocol=5)
        self._count("metadata", len(header), 1)
        self.comm.send(header, dest=dest, tag=tag)
        self._count("Send", buf.nbytes, 1)
        self.comm.Send(buf, dest=dest, tag=tag + 1)

    def Isend(self, arr, dest, tag=0):
        buf = _as_array(arr)
        header = pickle.dumps((buf.shape, buf.dtype.str), protocol=5)
        self._count("metadata", len(header), 1)
        self._count("Send", buf.nbytes, 1)
        return [self.comm.isend(header, dest=dest, tag=tag),
                self.comm.Isend(buf, dest=dest, tag=tag + 1), buf]

    def waitall(self, requests):
        from mpi4py import MPI

        reqs = [r for group in requests for r in group[:2]]
        MPI.Request.Waitall(reqs)

    def Recv(self, source, tag=0):
        shape, dt = pickle.loads(self.comm.recv(source=source, tag=tag))
        buf = np.empty(shape, dtype=np.dtype(dt))
        self.comm.Recv(buf, source=source, tag=tag + 1)
        return buf

    def Barrier(self):
        self.comm.Barrier()

    def Abort(self, code=1):
        """End every process of the communicator (``MPI_Abort``) with exit status
        ``code``: the last resort of a rank that cannot tell the others it failed."""
        self.comm.Abort(code)
