"""Multi-level SVMs: Cascade SVM, DC-SVM and DC-Filter (section 2.2, Figure 2.1).

The training set is split into P partitions (layer 1); every layer merges two
neighbouring nodes of the layer above (nodes ``2q`` and ``2q + 1`` become node
``q``) and solves the merged problem by SMO, warm-started with the dual
variables of the two children, until one node is left (``ceil(log2 P) + 1``
layers). When a layer has an odd number of nodes, its last node is carried
down unchanged (no merge, no solve). What a node passes down is the methods'
difference:

==================  ===================  =========================================
estimator           partitions           passed to the next layer
==================  ===================  =========================================
:class:`CascadeSVC`   random, balanced     the support vectors (with their alpha)
:class:`DCSVC`        K-means              every sample (with its alpha)
:class:`DCFilterSVC`  K-means              the support vectors (with their alpha)
==================  ===================  =========================================

The merged problem's warm start is feasible: every child's dual variables
satisfy its own box and equality constraints, so their union does too. More
than two classes are solved one-vs-one, every pair of classes by its own tree.
Under MPI a node's owner is the owner of its left child; when the right child
lives on another rank, its passed rows move by point-to-point messages (as in
the reference's code; this is what makes these methods communication-heavy,
and the counters show it per layer).
"""

import time

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import StrOptions

from .._engine import (
    PartitionedEstimator,
    _set_partitions,
    draw_seed,
    drop_zero_weight_rows,
    keeps_state_on_failure,
    validate_params_for,
)
from .._params import Count
from .._solvers.local import _check_numerics_before, solve_binary_svm
from .._solvers.native_svc import NativeKernelSVC
from ..backends._comm import comm_report, failure_text, raise_if_any_failed
from ._full_model import _FullModelSVC
from ._partitioned import _SVM_CONSTRAINTS

__all__ = ["CascadeSVC", "DCSVC", "DCFilterSVC"]


def tree_layers(n_leaves):
    """Number of nodes of every layer of the reduction tree (``[P, ceil(P/2), ..., 1]``)."""
    sizes = [int(n_leaves)]
    while sizes[-1] > 1:
        sizes.append((sizes[-1] + 1) // 2)
    return sizes


def tree_owners(leaf_owners):
    """Owner rank of every node of every layer: a merged node lives where its left
    child lives."""
    owners = [np.asarray(leaf_owners, dtype=np.int64)]
    while owners[-1].size > 1:
        owners.append(owners[-1][0::2].copy())
    return owners


class _Node:
    """One node's binary problem on the rank that owns it."""

    __slots__ = ("X", "y", "w", "index", "alpha", "solution", "seconds")

    def __init__(self, X, y, w, index, alpha=None, solution=None):
        self.X, self.y, self.w, self.index = X, y, w, index
        self.alpha = alpha          # warm start (None: cold)
        self.solution = solution    # LocalSolution once solved
        self.seconds = 0.0          # time of its solve

    def passed(self, what):
        """The node passed to the next layer: its support vectors or every row,
        with their dual variables as the warm start. A node whose rows hold one
        class only has no SVM to filter with and passes every row (filtering
        would drop that class from the tree)."""
        alpha = self.solution.alpha
        one_class = not (np.any(self.y > 0) and np.any(self.y < 0))
        if what != "sv" or one_class:  # every row: the node's own arrays, no copy
            return _Node(self.X, self.y, self.w, self.index, alpha)
        rows = np.flatnonzero(alpha > 0)
        return _Node(self.X[rows], self.y[rows], self.w[rows], self.index[rows], alpha[rows])

    def pack(self):
        from .._engine import _pack_rows

        packed = _pack_rows(self.X, np.arange(self.X.shape[0]))
        packed.update(y=self.y, w=self.w, index=self.index,
                      alpha=np.zeros(0) if self.alpha is None else self.alpha)
        return packed

    @classmethod
    def unpack(cls, packed, n_features, sparse):
        from .._engine import _unpack_rows

        X = _unpack_rows(packed, n_features, sparse)
        alpha = packed["alpha"] if packed["alpha"].size else None
        return cls(X, packed["y"], packed["w"], packed["index"], alpha)

    @staticmethod
    def merge(left, right, shared=True):
        """The union of two nodes' rows. A sample in both (Cascade's feedback
        gives the final support vectors to every first-layer node, so two
        children can share them) is kept once, with the mean of its two dual
        variables (each approximates the same optimum); the solve then repairs
        the warm start's equality constraint (:func:`_feasible_warm_start`).
        ``shared=False``: the caller knows the two hold no common sample (no
        search for one)."""
        la = None if left.alpha is None else np.array(left.alpha, dtype=np.float64)
        ra = right.alpha
        if shared and (dup := np.isin(right.index, left.index)).any():
            if la is not None or ra is not None:
                la = np.zeros(left.y.size) if la is None else la
                rdup = np.zeros(int(dup.sum())) if ra is None else ra[dup]
                order = np.argsort(left.index, kind="stable")
                loc = order[np.searchsorted(left.index[order], right.index[dup])]
                la[loc] = 0.5 * (la[loc] + rdup)
            keep = np.flatnonzero(~dup)
            right = _Node(right.X[keep], right.y[keep], right.w[keep], right.index[keep],
                          None if ra is None else ra[keep])
            ra = right.alpha
        X = (sp.vstack([left.X, right.X], format="csr") if sp.issparse(left.X)
             else np.vstack([left.X, right.X]))
        cat = np.concatenate
        alpha = None
        if la is not None or ra is not None:
            alpha = cat([la if la is not None else np.zeros(left.y.size),
                         ra if ra is not None else np.zeros(right.y.size)])
        return _Node(X, cat([left.y, right.y]), cat([left.w, right.w]),
                     cat([left.index, right.index]), alpha)


def _feasible_warm_start(alpha, y, upper):
    """``alpha`` clipped to ``[0, upper]`` and put back on ``y^T alpha = 0`` by
    scaling down the side (positive or negative class) that weighs more; a no-op
    for the union of feasible children without shared samples."""
    a = np.clip(alpha, 0.0, upper)
    pos, neg = a[y > 0].sum(), a[y < 0].sum()
    if abs(pos - neg) <= 1e-12 * max(pos + neg, 1.0):
        return a
    if pos > neg:
        a[y > 0] *= neg / pos
    else:
        a[y < 0] *= pos / neg
    return a


class _MultiLevelSVC(_FullModelSVC):
    """The shared driver of the multi-level SVMs (see the module docstring)."""

    _parameter_constraints = {
        **PartitionedEstimator._parameter_constraints,
        **_SVM_CONSTRAINTS,
        "solver": [StrOptions({"smo", "libsvm"})],
        "break_ties": ["boolean"],
    }
    #: what a node passes down: 'sv' (Cascade, DC-Filter) or 'all' (DC-SVM)
    _pass = "sv"

    # ------------------------------------------------------------------ fit
    @keeps_state_on_failure
    def fit(self, X, y, sample_weight=None):
        """Partition, solve the layers of the reduction tree, keep the final SVM.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training samples (under MPI: rank 0's in root mode, every rank's own
            rows in sharded mode).
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample multipliers of C. Rows of weight 0 take no part (as in
            LIBSVM): they are left out before partitioning, so the tree is
            the tree of the other rows (``support_`` keeps the row numbers of
            ``X``); ``gamma='scale'`` and ``class_weight='balanced'`` count
            them, as SVC does.

        Returns
        -------
        self : object
        """
        validate_params_for(self)  # under MPI: raised on every rank
        with self._session() as s:
            X, y_idx, w, index = self._prepare_classifier(s, X, y, sample_weight)
            self._fit_tree(s, X, y_idx, w, index)
        return self

    def _check_layers(self, comm, n_leaves):
        """Hook: refuse parameters that do not fit the tree of ``n_leaves`` leaves."""

    def _fit_tree(self, s, X, y, w, index):
        comm = s.comm
        t0 = time.perf_counter()
        compact = index
        if self._n_zero_weight:  # rows of zero weight take no part (as in LIBSVM)
            X, y, w, compact, index = drop_zero_weight_rows(s, X, y, w, index,
                                                                self._partition_count())
        with comm.phase("partitioning"):
            part, labels = self._partition_rows(s, X, compact)
        t_part = time.perf_counter() - t0
        sizes = np.asarray(part.sizes_, dtype=np.int64)
        if (sizes == 0).any():
            comm.agree(f"partitions {np.flatnonzero(sizes == 0).tolist()} are empty; use "
                       "fewer partitions or another partitioner")
        self._n_leaves = sizes.size
        self._check_layers(comm, sizes.size)
        leaf_owners = self._place_partitions(s, part, y, labels, sizes)
        with comm.phase("redistribution"):
            tasks = self._distribute(s, X, y, w, index, labels, leaf_owners, part)
        leaves = {t.j: t.materialize() for t in tasks}
        owners = tree_owners(leaf_owners)
        k = self.classes_.size
        pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
        ctx = {"threads": s.threads, "seed": draw_seed(comm, self.random_state)}
        # every node's rows come from the leaves: their norms and kernel diagonal
        # are checked here once, not once per node of every class pair's tree
        self._check_leaf_numerics(comm, leaves)
        layer_stats = [dict(layer=i + 1, nodes=n, solved=0, samples_in=0, support_vectors=0,
                            n_iter=0, seconds=0.0) for i, n in enumerate(tree_layers(sizes.size))]
        comm_layers = [np.zeros(2) for _ in layer_stats]
        profile = [{} for _ in layer_stats]  # layer -> {node: [samples, SVs, iter, seconds]}
        ctx["profile"] = profile
        finals, early = [], []
        for n_pair, (a, b) in enumerate(pairs):
            nodes = {}
            for j, p in leaves.items():  # layer 1: the pair's rows of every partition
                rows = np.flatnonzero((p.y == a) | (p.y == b))
                Xr = p.X if rows.size == p.y.size else p.X[rows]  # binary: no copy
                nodes[j] = _Node(Xr, np.where(p.y[rows] == b, 1.0, -1.0),
                                 p.sample_weight[rows], p.index[rows])
            if n_pair + 1 == len(pairs):
                # the last pair's nodes hold what they need: each merge can then
                # free its children's rows (binary: the partitions themselves)
                leaves = None
            final, kept = self._run_passes(s, nodes, owners, ctx, layer_stats, comm_layers)
            finals.append(final)
            early.append(kept)
        if "passes" in ctx:  # Cascade: the most passes any class pair's tree ran
            self.n_passes_ = max(ctx["passes"])
        if ctx.get("short"):  # Cascade's passes stopped before the optimum: once per fit
            import warnings

            from sklearn.exceptions import ConvergenceWarning

            gap, why = max(ctx["short"])
            pairs_note = (f"; {len(ctx['short'])} class pairs short"
                          if len(ctx["short"]) > 1 else "")
            advice = ("raise n_passes for the SVM of all rows" if why == "out of passes" else
                      "more passes would repeat them: DCSVC's last layer or DisSMOSVC give "
                      "the SVM of all rows")
            if self.solver == "libsvm":  # its kernel values are single precision
                advice += ("; with solver='libsvm' a tol this small may be out of reach "
                           "(LIBSVM's kernel cache holds float32 values): solver='smo' "
                           "or a larger tol")
            warnings.warn(
                f"{type(self).__name__} stopped before the optimum ({why}, after "
                f"{self.n_passes_} of n_passes={self.n_passes}): the final SVM violates the "
                f"optimality conditions on its training rows by {gap:.3g} (tol={self.tol}"
                f"{pairs_note}); {advice}", ConvergenceWarning, stacklevel=4)
        # the final model travels from the root's owner to every rank
        t0 = time.perf_counter()
        with comm.phase("model_gather"):
            root = int(owners[-1][0])
            if self._stop_layer() is None:
                models = comm.bcast_obj(self._pair_models(finals) if comm.rank == root
                                        else None, root=root)
                early_models = None
            else:
                models = None
                early_models = self._gather_early(comm, early, part, sizes, owners)
        t_gather = time.perf_counter() - t0
        self._set_model(models, early_models, part, sizes, owners)
        timings = comm.allgather(((t_part, t_gather, [ls["seconds"] for ls in layer_stats]),
                                  comm.counter.summary(), [c.tolist() for c in comm_layers],
                                  (comm.rank, profile)))
        for i, ls in enumerate(layer_stats):
            nodes = {q: [r] + v for g in timings for r, prof in [g[3]] for q, v in prof[i].items()}
            ls["node_profile"] = [dict(node=q, rank=v[0], samples=v[1], support_vectors=v[2],
                                       n_iter=v[3], seconds=v[4])
                                  for q, v in sorted(nodes.items())]
            ls["critical_seconds"] = max((v[4] for v in nodes.values()), default=0.0)
        report = comm_report([g[1] for g in timings])
        for i, ls in enumerate(layer_stats):
            ls["seconds"] = float(max(g[0][2][i] for g in timings))
            totals = np.sum([g[2][i] for g in timings], axis=0)
            ls["comm_bytes"], ls["comm_messages"] = int(totals[0]), int(totals[1])
        # the counts of every rank, summed (each rank counted its own solves)
        self._sum_layer_counts(comm, layer_stats)
        self.fit_stats_ = {
            "partition_seconds": float(max(g[0][0] for g in timings)),
            "gather_seconds": float(max(g[0][1] for g in timings)),
            "layers": layer_stats,
            "busy_nodes": _busy_nodes(layer_stats),
            "n_problems": len(pairs),
            "partition_sizes": sizes.tolist(),
            "owners": [o.tolist() for o in owners],
            "comm": report,
            "comm_bytes": int(report["total"]["bytes"]),
            "comm_messages": int(report["total"]["messages"]),
            "backend": s.backend.name,
            "sharded": s.sharded,
            "n_ranks": s.size,
            "threads_per_worker": s.threads,
        }
        # the layers solved (early prediction stops the tree at its layer)
        solved = layer_stats[:self._stop_layer() or len(layer_stats)]
        self.n_iter_ = np.array([ls["n_iter"] for ls in solved])

    @staticmethod
    def _sum_layer_counts(comm, layer_stats):
        keys = ("solved", "samples_in", "support_vectors", "n_iter")
        mine = np.array([[ls[k] for k in keys] for ls in layer_stats], dtype=np.int64)
        total = comm.Allreduce(mine) if comm.size > 1 else mine
        for ls, row in zip(layer_stats, total):
            for k, v in zip(keys, row):
                ls[k] = int(v)

    # ------------------------------------------------------------------ one tree
    def _stop_layer(self):
        return None

    def _routes_by_centre(self):
        # the final model predicts every row; early prediction (DCSVC's
        # predict_layer) routes by centre
        return getattr(self, "predict_layer", None) is not None

    def _run_passes(self, s, nodes, owners, ctx, layer_stats, comm_layers):
        """Solve the tree (Cascade: up to ``n_passes`` times); return the final
        node on the root's owner (None elsewhere) and the nodes kept for early
        prediction."""
        return self._run_tree(s, nodes, owners, ctx, layer_stats, comm_layers,
                              stop=self._stop_layer())

    def _check_leaf_numerics(self, comm, leaves):
        """Collective: the clear error of an overflowing row norm or kernel diagonal
        (in the solver's precision) on every rank, before any node is solved."""
        dtype = np.float32 if self.solver == "libsvm" else np.float64  # LIBSVM's Qfloat
        try:
            for p in leaves.values():
                _check_numerics_before(p.X, self._kernel_params(), dtype)
            failure = None
        except (ValueError, FloatingPointError) as exc:
            failure = exc
        comm.raise_failures(failure, counted=False)

    def _solve(self, node, ctx):
        t0 = time.perf_counter()
        self._solve_node(node, ctx)
        node.seconds = time.perf_counter() - t0
        return node

    def _solve_node(self, node, ctx):
        from .._solvers.local import LocalSolution

        labels = np.unique(node.y)
        if labels.size < 2 or not (node.w > 0).any():
            # no rows of this pair, or one class only: alpha = 0, a constant decision
            sign = float(labels[0]) if labels.size == 1 else 0.0
            node.solution = LocalSolution(node.index, np.zeros(node.y.size), node.y, sign,
                                          0.0, 0)
            return node
        warm = None
        if self.solver == "smo" and node.alpha is not None:
            warm = _feasible_warm_start(node.alpha, node.y, self.C * node.w)
        node.solution = solve_binary_svm(
            node.X, node.y, self.C, kernel_params=self._kernel_params(), solver=self.solver,
            sample_weight=node.w, tol=self.tol, max_iter=self.max_iter,
            cache_size=self.cache_size, n_threads=ctx["threads"], random_state=ctx["seed"],
            index=node.index, alpha0=warm, check_numerics=False)  # the leaves' check
        return node

    def _run_tree(self, s, nodes, owners, ctx, layer_stats, comm_layers, stop=None):
        """Solve the layers (down to layer ``stop`` when given); return the final node
        on the root's owner (None elsewhere) and, with ``stop``, this rank's nodes of
        that layer."""
        comm = s.comm
        kept = None
        for layer, layer_owners in enumerate(owners):
            t0 = time.perf_counter()
            before = comm.counter.summary()
            with comm.phase("training"):
                if layer > 0:
                    nodes = self._merge_layer(s, nodes, owners[layer - 1], layer_owners,
                                              ctx.get("shared_rows", False))
                todo = [q for q, n in nodes.items() if n.solution is None]
                try:
                    solved, failure = s.map(lambda q: self._solve(nodes[q], ctx), todo,
                                            "solve nodes"), None
                except Exception as exc:  # raised on every rank just below
                    solved, failure = [], exc
                # before the next layer's messages: a rank whose solve failed would
                # never send its node, and its partner would wait in Recv forever
                comm.raise_failures(failure, counted=False)
                for q, n in zip(todo, solved):
                    nodes[q] = n
            after = comm.counter.summary()
            comm_layers[layer] += [after["bytes"] - before["bytes"],
                                   after["messages"] - before["messages"]]
            ls = layer_stats[layer]
            ls["seconds"] += time.perf_counter() - t0
            ls["solved"] += len(todo)
            for q in todo:
                sol = nodes[q].solution
                ls["samples_in"] += int(sol.index.size)
                ls["support_vectors"] += int(sol.support.size)
                ls["n_iter"] += int(sol.n_iter)
                prof = ctx["profile"][layer].setdefault(q, [0, 0, 0, 0.0])
                prof[0] += int(sol.index.size)
                prof[1] += int(sol.support.size)
                prof[2] += int(sol.n_iter)
                prof[3] += nodes[q].seconds
            if stop is not None and layer + 1 == stop:
                return None, dict(nodes)  # early prediction: the models of this layer
        root_owner = int(owners[-1][0])
        return (nodes.get(0) if comm.rank == root_owner else None), kept

    def _merge_layer(self, s, nodes, up_owners, owners, shared_rows):
        """The nodes of a layer from those of the layer above (point-to-point
        messages where a right child lives on another rank than its left one).
        ``shared_rows``: two nodes may hold the same sample (Cascade's feedback);
        otherwise every sample is in one node of a layer."""
        comm = s.comm
        n_up = up_owners.size
        sends, received, merged = [], {}, {}
        for q in range(owners.size):
            right = 2 * q + 1
            if right < n_up and up_owners[right] == comm.rank and owners[q] != comm.rank:
                packed = nodes[right].passed(self._pass).pack()
                sends.append(comm.Isend(_to_bytes(packed), int(owners[q]), tag=2 * q))
        for q in range(owners.size):
            right = 2 * q + 1
            if owners[q] != comm.rank or right >= n_up:
                continue
            if up_owners[right] != comm.rank:
                received[q] = _Node.unpack(_from_bytes(comm.Recv(int(up_owners[right]),
                                                                 tag=2 * q)),
                                           self.n_features_in_, self._fit_sparse)
        comm.waitall(sends)
        for q in range(owners.size):
            if owners[q] != comm.rank:
                continue
            left, right = 2 * q, 2 * q + 1
            if right >= n_up:
                merged[q] = nodes.pop(left)  # an odd node is carried down unchanged
                continue
            lnode = nodes.pop(left).passed(self._pass)
            rnode = (received.pop(q) if q in received
                     else nodes.pop(right).passed(self._pass))
            # the children are released as their union is made: the layer's rows
            # are held about once, not twice
            merged[q] = _Node.merge(lnode, rnode, shared_rows)
            del lnode, rnode
        nodes.clear()  # the children that went to other ranks
        return merged

    # ------------------------------------------------------------------ models
    def _pair_models(self, finals):
        """``(models, n_iter, objectives, support)`` of the final nodes, one per pair."""
        models, n_iter, objectives, support = [], [], [], set()
        for node in finals:
            sol = node.solution
            sv = sol.support
            Xs = node.X[sv] if sp.issparse(node.X) else np.ascontiguousarray(node.X[sv])
            models.append((Xs, sol.dual_coef[None, :], np.array([sol.intercept])))
            n_iter.append(sol.n_iter)
            objectives.append(sol.objective)
            support.update(sol.index[sv].tolist())
        return models, n_iter, objectives, sorted(support)

    def _gather_early(self, comm, early, part, sizes, owners):
        """The models of the nodes of the layer prediction stops at, on every rank:
        ``[(centre, models of every pair)]`` by node."""
        layer = self._stop_layer()
        span = 2 ** (layer - 1)
        mine = {}
        for q in early[0]:
            leaves = np.arange(q * span, min((q + 1) * span, sizes.size))
            weight = sizes[leaves].astype(np.float64)
            centre = (part.centers_[leaves] * weight[:, None]).sum(0) / weight.sum()
            mine[q] = (centre, self._pair_models([pair_nodes[q] for pair_nodes in early]))
        gathered = comm.allgather(mine)
        return [g for part_ in gathered for g in sorted(part_.items())]

    def _set_model(self, models, early_models, part, sizes, owners):
        _set_partitions(self, part, sizes)
        if early_models is not None:
            early_models.sort(key=lambda item: item[0])
            self.layer_centers_ = np.array([m[1][0] for m in early_models])
            self.layer_models_ = [
                NativeKernelSVC.from_models(self.classes_, self._kernel_params(), m[1][1][0],
                                            n_iter=m[1][1][1], objectives=m[1][1][2],
                                            support=m[1][1][3], solver=self.solver)
                for m in early_models]
            self.model_ = None
            support = sorted(set().union(*(set(m.support_.tolist())
                                            for m in self.layer_models_)))
            self.support_ = np.asarray(support, dtype=np.intp)
            self.objective_ = np.concatenate([m.objective_ for m in self.layer_models_])
            # a node of that layer holds the partitions [q * span, (q + 1) * span)
            self._early_span = 2 ** (self._stop_layer() - 1)
            return
        for name in ("layer_centers_", "layer_models_", "_early_span"):  # of an earlier
            self.__dict__.pop(name, None)                                  # early prediction
        models, n_iter, objectives, support = models
        self.model_ = NativeKernelSVC.from_models(self.classes_, self._kernel_params(), models,
                                                  n_iter=n_iter, objectives=objectives,
                                                  support=support, solver=self.solver)
        self.support_ = np.asarray(support, dtype=np.intp)
        self.objective_ = self.model_.objective_

    # ------------------------------------------------------------------ predict
    # decision_function/predict of _FullModelSVC; with early prediction
    # (DCSVC(predict_layer=...)) the nearest node's model answers instead
    def _decision(self, X):
        if self.model_ is not None:
            return super()._decision(X)
        return self._routed(X, lambda m, Xg, t: m.decision_function(Xg, t)
                            if self.classes_.size == 2 else m.ovr_decision(Xg, t),
                            np.empty((X.shape[0],) if self.classes_.size == 2
                                     else (X.shape[0], self.classes_.size)))

    def _predict_checked(self, X):
        if self.model_ is not None:
            return super()._predict_checked(X)
        return self._routed(X, lambda m, Xg, t: m.predict(Xg, t),
                            np.empty(X.shape[0], dtype=self.classes_.dtype))

    def _routed(self, X, local, out):
        from ..partition import _storage, nearest_center

        with self._local_session(X.shape[0] / len(self.layer_models_), self.support_.size) as s:
            # CSR rows densified block by block (as the whole dense copy, bit for bit),
            # in blocks whose dense copy stays within DENSE_BUDGET_BYTES, as the
            # partitioners' assign (65,536 rows at once: 49 GiB of 100,000 columns)
            storage = "dense" if sp.issparse(X) else "as_is"
            block = ({"block_rows": _storage.dense_block_rows(X.shape[1])}
                     if sp.issparse(X) else {})
            span = getattr(self, "_early_span", None)
            if span is None:  # a model pickled before 2026-11-27
                route = nearest_center(X, self.layer_centers_, storage=storage, **block)
            else:
                # the nearest partition's centre, then the node that trained on that
                # partition's rows: the tree merges partitions by index, and the
                # mean of two far-apart partitions' centres (layer_centers_) lay
                # nearer other nodes' rows (a quarter of the training rows went to a
                # node that never saw them)
                route = nearest_center(X, self.centers_, storage=storage, **block) // span
            for q in np.unique(route):
                rows = np.flatnonzero(route == q)
                out[rows] = local(self.layer_models_[q], X[rows], s.threads)
        return out


def _to_bytes(packed):
    import pickle

    return np.frombuffer(pickle.dumps(packed, protocol=5), dtype=np.uint8)


def _from_bytes(buf):
    import pickle

    return pickle.loads(np.asarray(buf, dtype=np.uint8).tobytes())


def _busy_nodes(layer_stats):
    """Equation 2.13: the average number of nodes at work, every layer weighted
    by its time. A layer's time is its slowest node's solve (the layer's time
    when every node has a worker of its own, whatever the backend ran), its
    nodes at work those that solved a problem."""
    total = sum(ls["critical_seconds"] for ls in layer_stats)
    if total <= 0:
        return float(layer_stats[0]["nodes"])
    return float(sum(len(ls["node_profile"]) * ls["critical_seconds"]
                     for ls in layer_stats) / total)


_COMMON_DOC = """
    Parameters
    ----------
    n_partitions : int, default=8
        Number of partitions P (the nodes of the first layer).
    C, kernel, degree, gamma, coef0, tol, cache_size, class_weight, max_iter
        As in :class:`sklearn.svm.SVC`; ``gamma='scale'`` is resolved on the
        whole training set; ``max_iter=-1`` (or 0) is LIBSVM's limit for the
        native SMO (100 iterations per sample, at least 10**7; scikit-learn's
        SVC has none), and 0 means the same for ``'libsvm'`` (SVC runs no
        iteration at 0).
    break_ties : bool, default=False
        As in :class:`~sklearn.svm.SVC`: when True (more than two classes),
        ``predict`` returns the argmax of ``decision_function`` (one-vs-rest
        scores, which break tied votes by confidence); otherwise the
        one-vs-one vote, a tie going to the first class in ``classes_``.
    solver : {'smo', 'libsvm'}, default='smo'
        Local solver: the native SMO takes the children's dual variables as a
        warm start; LIBSVM solves every node from scratch.
"""

# the parameters after each class's own (the signatures' order)
_RUN_DOC = """    backend : {'serial', 'threads', 'mpi'} or Backend, default='serial'
        Where the nodes of a layer are solved (see :mod:`cakernels.backends`).
    n_jobs : int, default=None
        Workers of the ``'threads'`` backend.
    random_state : int, RandomState instance or None, default=None
        Seed of the partitioner.
    verbose : bool, default=False
        Show a progress bar over the nodes of every layer (needs tqdm).
"""

_COMMON_ATTRS = """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    model_ : NativeKernelSVC
        The final SVM (one binary model per pair of classes).
    support_ : ndarray
        Global indices of the final support vectors (over all pairs).
    objective_ : ndarray of shape (n_problems,)
        Dual objective of every final binary problem.
    gamma_ : float
    partitioner_, centers_, partition_sizes_
        The first layer's partitions.
    n_iter_ : ndarray of shape (n_layers,)
        SMO iterations of every layer solved (summed over its nodes, the pairs
        and CascadeSVC's passes; with DCSVC's early prediction, the layers down
        to ``predict_layer``).
    fit_stats_ : dict
        ``layers``: one dict per layer of the tree (with DCSVC's early
        prediction the layers after ``predict_layer`` are listed with
        ``solved``, ``samples_in`` and ``n_iter`` 0) with ``nodes``, ``solved``
        (nodes that solved a problem, summed over the pairs of classes and
        CascadeSVC's passes, as ``n_iter`` and ``seconds``), ``samples_in``,
        ``support_vectors`` (out), ``n_iter``, ``seconds`` (the slowest rank),
        ``comm_bytes`` and ``comm_messages`` (all ranks: the tree's messages
        into that layer; CascadeSVC's feedback between passes, the support
        vectors' broadcast and the violators' allgathers, is counted in
        ``comm``'s ``training`` phase only), ``node_profile``
        (every node that solved: ``node``, ``rank``, ``samples``,
        ``support_vectors``, ``n_iter``, ``seconds``; Table 2.5 of the
        reference) and ``critical_seconds`` (its slowest node); ``busy_nodes``
        (equation 2.13: the average number of nodes at work, every layer
        weighted by its slowest node's time); ``comm`` as for the partitioned
        estimators.
    n_support_total_ : int
        Support vectors of the final model (over all pairs of classes).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit (a DataFrame with string column
        names only).
"""


def _multilevel_init(self, n_partitions, C, kernel, degree, gamma, coef0, tol, cache_size,
                     class_weight, max_iter, break_ties, solver, backend, n_jobs, random_state,
                     verbose):
    self.n_partitions = n_partitions
    self.C = C
    self.kernel = kernel
    self.degree = degree
    self.gamma = gamma
    self.coef0 = coef0
    self.tol = tol
    self.cache_size = cache_size
    self.class_weight = class_weight
    self.max_iter = max_iter
    self.break_ties = break_ties
    self.solver = solver
    self.backend = backend
    self.n_jobs = n_jobs
    self.random_state = random_state
    self.verbose = verbose


class CascadeSVC(_MultiLevelSVC):
    __doc__ = ("""Cascade SVM (Graf et al., Figure 2.1 of the reference).

    P balanced random partitions; a binary reduction tree of
    ``ceil(log2 P) + 1`` layers in which every node passes only its support
    vectors, with their dual variables as the warm start of the next node. With
    ``n_passes > 1`` the final support vectors (and the worst rows that
    violate the final SVM's optimality conditions) are fed back to every node
    of the first layer and the tree runs again, until no training row violates
    them by ``tol``.
    """ + _COMMON_DOC + """    n_passes : int, default=1
        Passes over the tree (Graf et al.'s feedback loop): after a pass the
        final SVM is checked on every training row (LIBSVM's maximal violation,
        one kernel product of the rows with its support vectors); it stops
        early when no row violates by ``tol`` (the full SVM, whose intercept is
        then computed over every row as LIBSVM does), else the support vectors
        and up to 16 of the worst violators of each side go back to every
        first-layer node. (Deviation: Graf et al. feed back the support
        vectors only and stop when they repeat; with every alpha at a bound,
        at a small C, a violating pair could lie in two leaves that no leaf can
        move alone, and the passes stopped at another SVM.) When the passes
        run out, or the support vectors repeat, while rows still violate by
        ``tol``, a ``ConvergenceWarning`` gives the violation (``n_passes=1``,
        the single pass of the reference, does not check).
""" + _RUN_DOC + _COMMON_ATTRS + """    n_passes_ : int
        Passes the tree ran (with several classes, every one-vs-one pair's tree
        stops on its own: the most any pair ran).

    See Also
    --------
    DCFilterSVC : the same passing on K-means partitions.
    DCSVC : every sample passed down; the last layer is the full SVM.

    Notes
    -----
    An odd node of a layer is carried down unchanged (no merge, no solve)
    until it finds a partner. Under MPI, a merged node lives on the rank of
    its left child; the right child's support vectors reach it by a
    point-to-point message when the two live on different ranks.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import CascadeSVC
    >>> X, y = make_classification(n_samples=400, random_state=0)
    >>> clf = CascadeSVC(n_partitions=4, C=10, random_state=0).fit(X, y)
    >>> [layer["nodes"] for layer in clf.fit_stats_["layers"]]
    [4, 2, 1]
    >>> float(clf.score(X, y)) > 0.9
    True
    """)

    _default_partitioner = "random"
    _pass = "sv"
    _parameter_constraints = {
        **_MultiLevelSVC._parameter_constraints,
        "n_passes": [Count(1)],
    }

    def __init__(self, n_partitions=8, *, C=1.0, kernel="rbf", degree=3, gamma="scale",
                 coef0=0.0, tol=1e-3, cache_size=200, class_weight=None, max_iter=-1,
                 break_ties=False, solver="smo", n_passes=1, backend="serial", n_jobs=None, random_state=None,
                 verbose=False):
        _multilevel_init(self, n_partitions, C, kernel, degree, gamma, coef0, tol, cache_size,
                         class_weight, max_iter, break_ties, solver, backend, n_jobs,
                         random_state, verbose)
        self.n_passes = n_passes

    def _run_passes(self, s, nodes, owners, ctx, layer_stats, comm_layers):
        comm = s.comm
        # the first layer's nodes, kept for the feedback of a further pass
        leaves, root = (dict(nodes) if self.n_passes > 1 else None), int(owners[-1][0])
        previous = None
        current = dict(nodes)
        ctx["shared_rows"] = False  # the first pass: every sample in one node of a layer
        for n_pass in range(self.n_passes):
            final, _ = self._run_tree(s, current, owners, ctx, layer_stats, comm_layers)
            if self.n_passes == 1:
                break
            # the final support vectors go back to every node of the first layer (and,
            # after the last pass too, are checked on every row for the intercept)
            packed = final.passed("sv").pack() if comm.rank == root else None
            with comm.phase("training"):
                packed = comm.bcast_obj(packed, root=root)
            back = _Node.unpack(packed, self.n_features_in_, self._fit_sparse)
            svs = frozenset(back.index.tolist())
            if not svs:
                # no support vectors (every alpha 0, e.g. a large tol): feeding back
                # nothing would solve the same tree again
                break
            alpha_of = dict(zip(back.index.tolist(), back.alpha.tolist()))
            with comm.phase("training"):
                gap, violators, rho = self._violators(comm, leaves, back, alpha_of)
            if gap < self.tol:
                # the SVM of every training row of the pair: the optimum. Its
                # intercept is LIBSVM's over every row (the root node saw only the
                # support vectors: with every alpha at a bound, its midpoint of the
                # bounded rows' interval was another one, 0 for SVC's +1 at C=1e-6)
                if final is not None:
                    final.solution.intercept = 0.0 - rho  # (not -0.0)
                break
            if n_pass + 1 == self.n_passes:
                # out of passes: the tree's own SVM (not the optimum), said once per fit
                ctx.setdefault("short", []).append((float(gap), "out of passes"))
                break
            if violators is not None:
                back = _Node.merge(back, violators, shared=False)
            elif svs == previous:
                # every violator is a support vector already: Graf's fixed point
                ctx.setdefault("short", []).append((float(gap), "support vectors repeat"))
                break
            previous = svs
            current = {}
            for q, leaf in leaves.items():
                own = np.array([alpha_of.get(i, 0.0) for i in leaf.index.tolist()])
                extra = np.flatnonzero(~np.isin(back.index, leaf.index))
                fed = _Node(back.X[extra], back.y[extra], back.w[extra], back.index[extra],
                            back.alpha[extra])
                current[q] = _Node.merge(_Node(leaf.X, leaf.y, leaf.w, leaf.index, own), fed,
                                         shared=False)  # ``extra``: not in the leaf
            ctx["shared_rows"] = True  # every leaf now holds the fed-back rows
        ctx.setdefault("passes", []).append(n_pass + 1)
        return final, None

    #: violators of each side fed back with the support vectors after a pass
    FEED_VIOLATORS = 16

    def _violators(self, comm, leaves, back, alpha_of):
        """The final SVM's maximal violation of the optimality conditions over
        every training row of the pair (LIBSVM's ``m - M`` with ``F = y - f``,
        the same on every rank) and, when it is at least ``tol``, its worst
        violators that are not support vectors, up to :attr:`FEED_VIOLATORS` of
        each side (a node with their current dual variables; None when every
        violator is a support vector already).

        Graf et al.'s fixed point (the support vectors repeat) is the SVM only
        when no row violates: with every alpha at a bound (a small C), a
        violating pair can lie in two different leaves, which no leaf can move
        alone (the equality ``y^T alpha = 0``), and the passes stopped at
        another SVM (at C = 1e-6: intercept 0 for SVC's +1).

        Returns ``(gap, violators, rho)``: ``rho`` is LIBSVM's over every row
        (the mean ``y G`` of the free rows, else the midpoint of the bounded
        rows' interval), the intercept of the optimum when ``gap < tol``."""
        from .._kernels import kernel_dot, row_sq_norms
        from ._dissmo import bound_masks, libsvm_rho

        kp = self._kernel_params()
        coef = back.alpha * back.y
        sq = row_sq_norms(back.X) if kp["kernel"] == "rbf" else None
        rows = []  # this rank's leaves: (leaf, F, I_up, I_low, alpha)
        m, M = -np.inf, np.inf
        # LIBSVM's rho (y G = -F): the free rows' sums per leaf, added in leaf order
        # on every rank (rank by rank, the sum's rounding followed the leaves' placement)
        sums, n_free, ub, lb = [], 0, np.inf, -np.inf
        failure = None
        try:  # this rank's leaves
            for key, leaf in leaves.items():
                a = np.array([alpha_of.get(i, 0.0) for i in leaf.index.tolist()])
                upper = self.C * leaf.w
                F = leaf.y - kernel_dot(leaf.X, back.X, coef, Y_sq_norms=sq, **kp)
                at_up, at_lo, ub_mask, lb_mask = bound_masks(a, leaf.y, upper)
                up = ((leaf.y > 0) & ~at_up) | ((leaf.y < 0) & ~at_lo)
                low = ((leaf.y > 0) & ~at_lo) | ((leaf.y < 0) & ~at_up)
                if up.any():
                    m = max(m, float(F[up].max()))
                if low.any():
                    M = min(M, float(F[low].min()))
                rows.append((leaf, F, up, low, a))
                free = ~(at_up | at_lo)
                sums.append((key, float(-F[free].sum())))
                n_free += int(free.sum())
                if ub_mask.any():
                    ub = min(ub, float(-F[ub_mask].max()))
                if lb_mask.any():
                    lb = max(lb, float(-F[lb_mask].min()))
        except Exception as exc:  # (a MemoryError...): every rank raises, not a hang
            if comm.size == 1:
                raise
            failure = exc
        if comm.size > 1:
            # (the failure rides on the allgather the check needs anyway)
            every = comm.allgather((m, M, sums, n_free, ub, lb, failure_text(failure)))
            raise_if_any_failed(failure, [e[6] for e in every])
            m, M = max(e[0] for e in every), min(e[1] for e in every)
            sums, n_free = [x for e in every for x in e[2]], sum(e[3] for e in every)
            ub, lb = min(e[4] for e in every), max(e[5] for e in every)
        sum_free = 0.0
        for _, partial in sorted(sums, key=lambda t: t[0]):
            sum_free += partial
        rho = libsvm_rho(sum_free, n_free, ub, lb)
        gap = m - M
        if not gap >= self.tol:
            return gap, None, rho
        k = self.FEED_VIOLATORS
        mine = []  # (side, F, global index, row in its leaf, leaf, alpha)
        for leaf, F, up, low, a in rows:
            fresh = ~np.isin(leaf.index, back.index)
            for side, mask, sign in (("up", up & fresh & (F >= M + self.tol), -1.0),
                                     ("low", low & fresh & (F <= m - self.tol), 1.0)):
                cand = np.flatnonzero(mask)
                cand = cand[np.lexsort((leaf.index[cand], sign * F[cand]))][:k]
                mine += [(side, float(F[r]), int(leaf.index[r]), r, leaf, a[r]) for r in cand]
        # every rank's candidates, then the same global choice on every rank
        sendable = [(side, f, i) for side, f, i, *_ in mine]
        everyone = comm.allgather(sendable) if comm.size > 1 else [sendable]
        chosen = set()
        for side in ("up", "low"):
            cands = [(f, i) for part in everyone for sd, f, i in part if sd == side]
            cands.sort(key=lambda c: (-c[0] if side == "up" else c[0], c[1]))
            chosen.update(i for _, i in cands[:k])
        picked = {}
        for side, f, i, r, leaf, a in mine:
            if i in chosen and i not in picked:
                picked[i] = (leaf, r, a)
        order = sorted(picked)
        if order:
            Xs = [picked[i][0].X[[picked[i][1]]] for i in order]
            mine_node = _Node(sp.vstack(Xs, format="csr") if self._fit_sparse else np.vstack(Xs),
                              np.array([picked[i][0].y[picked[i][1]] for i in order]),
                              np.array([picked[i][0].w[picked[i][1]] for i in order]),
                              np.array(order, dtype=back.index.dtype),
                              np.array([picked[i][2] for i in order]))
            packed = mine_node.pack()
        else:
            packed = None
        parts = comm.allgather(packed) if comm.size > 1 else [packed]
        nodes = [_Node.unpack(pk, self.n_features_in_, self._fit_sparse)
                 for pk in parts if pk is not None]
        if not nodes:
            return gap, None, rho
        node = nodes[0]
        for other in nodes[1:]:
            node = _Node.merge(node, other, shared=False)
        order = np.argsort(node.index, kind="stable")  # the same order on every rank
        return gap, _Node(node.X[order], node.y[order], node.w[order], node.index[order],
                          node.alpha[order]), rho


class DCSVC(_MultiLevelSVC):
    __doc__ = ("""DC-SVM (divide-and-conquer SVM, Hsieh et al.): K-means partitions, every
    sample passed down with its dual variable as the warm start.

    The last layer solves the whole problem, warm-started from the layer above,
    so its model is the full SVM's (for a positive semi-definite kernel: with
    ``kernel='sigmoid'`` the dual is not convex, and the warm starts may reach
    another stationary point than ``SVC``'s). ``predict_layer`` stops the tree
    at an earlier layer and predicts with that layer's local models (DC-SVM's
    early prediction). Deviation from Hsieh et al., whose every level is a
    clustering of its own: the tree merges partitions ``2q`` and ``2q + 1``
    (the thesis' binary tree), so a sample goes to the node holding its nearest
    partition centre, the node trained on that partition's rows.
    """ + _COMMON_DOC + """    predict_layer : int, default=None
        Stop after this layer (1 = the partitions' own models) and predict
        each sample by the model of the node that holds its nearest partition
        centre (the node trained on that partition's rows); None: the last
        layer (the full SVM). A fit-time parameter: changing it after ``fit``
        takes effect at the next ``fit``.
""" + _RUN_DOC + _COMMON_ATTRS + """    layer_centers_, layer_models_
        With ``predict_layer``: the centres (size-weighted means of their
        partitions' centres; for reference: samples are routed by
        ``centers_``, see ``predict_layer``) and the models of that layer's nodes (``model_``
        is then None, ``support_`` the union of the nodes' support vectors
        and ``objective_`` every node's objectives, node after node: shape
        ``(n_layer_nodes * n_problems,)``).

    See Also
    --------
    CascadeSVC, DCFilterSVC : pass only the support vectors.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import DCSVC
    >>> X, y = make_classification(n_samples=400, random_state=0)
    >>> clf = DCSVC(n_partitions=4, C=10, random_state=0).fit(X, y)
    >>> clf.fit_stats_["layers"][-1]["samples_in"]  # the last layer: every sample
    400
    """)

    _default_partitioner = "kmeans"
    _pass = "all"
    _parameter_constraints = {
        **_MultiLevelSVC._parameter_constraints,
        "predict_layer": [Count(1), None],
    }

    def __init__(self, n_partitions=8, *, C=1.0, kernel="rbf", degree=3, gamma="scale",
                 coef0=0.0, tol=1e-3, cache_size=200, class_weight=None, max_iter=-1,
                 break_ties=False, solver="smo", predict_layer=None, backend="serial", n_jobs=None,
                 random_state=None, verbose=False):
        _multilevel_init(self, n_partitions, C, kernel, degree, gamma, coef0, tol, cache_size,
                         class_weight, max_iter, break_ties, solver, backend, n_jobs,
                         random_state, verbose)
        self.predict_layer = predict_layer

    def _check_layers(self, comm, n_leaves):
        layers = len(tree_layers(n_leaves))
        if self.predict_layer is not None and self.predict_layer > layers:
            comm.agree(f"predict_layer={self.predict_layer}, but {n_leaves} partitions make "
                       f"{layers} layers")

    def _stop_layer(self):
        layers = len(tree_layers(self._n_leaves))
        if self.predict_layer is None or self.predict_layer >= layers:
            return None
        return int(self.predict_layer)


class DCFilterSVC(_MultiLevelSVC):
    __doc__ = ("""DC-Filter: K-means partitions, only the support vectors passed down (as
    Cascade SVM does).
    """ + _COMMON_DOC + _RUN_DOC + _COMMON_ATTRS + """
    See Also
    --------
    CascadeSVC : the same passing on random partitions.
    DCSVC : every sample passed down.

    Notes
    -----
    K-means partitions are often nearly pure: a node may hold many samples of
    one class and a handful of the other, and the support vectors it passes
    are those of that local problem, not of the whole one. A node with one
    class only passes every row (it has no SVM to filter with; dropping them
    would remove the class from the tree). With more than two classes every
    pair of classes is its own tree over the same partitions; on usps (10
    classes) it still reached ``SVC``'s accuracy (95.42% against 95.27%, the
    comparison in ``benchmarks/README.md``), but its predictions depend on the
    order of the class labels more than Cascade's and DC-SVM's do (README,
    "Known limitations").

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from cakernels import DCFilterSVC
    >>> X, y = make_blobs(n_samples=300, centers=3, random_state=0)
    >>> clf = DCFilterSVC(n_partitions=4, random_state=0).fit(X, y)
    >>> clf.classes_.size, len(clf.model_.models_)  # one tree per pair of classes
    (3, 3)
    """)

    _default_partitioner = "kmeans"
    _pass = "sv"

    def __init__(self, n_partitions=8, *, C=1.0, kernel="rbf", degree=3, gamma="scale",
                 coef0=0.0, tol=1e-3, cache_size=200, class_weight=None, max_iter=-1,
                 break_ties=False, solver="smo", backend="serial", n_jobs=None,
                 random_state=None, verbose=False):
        _multilevel_init(self, n_partitions, C, kernel, degree, gamma, coef0, tol, cache_size,
                         class_weight, max_iter, break_ties, solver, backend, n_jobs,
                         random_state, verbose)
