"""The search engine shared by the fast searches (:mod:`._krr_search`,
:mod:`._svm_search`): Algorithm 10's protocol with validation splits (one
partitioning of all rows, validation rows included; see :mod:`._krr_search`).

A search fit

1. validates the data collectively (as the tuned estimator's ``fit``) and
   draws the validation splits once, on all rows (rank 0);
2. partitions once, places the partitions on ranks and moves their rows there
   (the engine's steps 2-3), together with the rows every partition predicts
   during validation (its nearest-centre rows, or every row for averaging);
3. runs a *job* on every partition: for every candidate and split, train on
   the partition's rows of the split's training set, predict its validation
   rows, keep additive sums (nothing is communicated);
4. adds the sums over the partitions (one reduction under MPI), scores every
   candidate and split, and refits the best candidate on all rows.

The subclasses provide the grid, the row encoding and the job.
"""

import numbers
import pickle
import sys
import threading
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import is_classifier
from sklearn.model_selection import KFold, StratifiedKFold, check_cv
from sklearn.utils import check_random_state
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .._engine import (
    PartitionedEstimator,
    _assign_rows,
    drop_zero_weight_rows,
    _group_by,
    _halo_of,
    _halo_sizes,
    _shard_halos,
    _partition_key,
    _LazyPartition,
    _pack_block,
    _set_partitions,
    _unpack_block,
    _unpack_rows,
    defer_param_error,
    draw_seed,
    route_collectively,
    validate_params_for,
)
from ..backends import comm_report
from ..partition._storage import nearest_center_stored
from ._results import build_cv_results


class _PartitionedSearchCV(PartitionedEstimator):
    """Base of the fast searches: the fit driver, results, predict and score.

    Subclasses implement ``_grid()`` (the candidate axes, validated),
    ``_prepare(s, X, y, w, index, masks)`` (the per-row float columns that
    travel with the rows, and the facts the job needs), ``_make_job(...)``,
    ``_make_estimator(**params)`` and ``_is_average``.
    """

    _is_average = False

    def _search_fit(self, X, y, sample_weight, groups=None):
        validate_params_for(self)  # under MPI: raised on every rank
        random_state = self.random_state
        try:
            return self._search_fit_seeded(X, y, sample_weight, groups)
        finally:
            self.random_state = random_state

    def _search_fit_seeded(self, X, y, sample_weight, groups):
        grid = defer_param_error(self, self._grid)
        loo = isinstance(self.cv, str) and self.cv == "loo"
        for attr in ("best_estimator_", "refit_time_"):
            if hasattr(self, attr):
                delattr(self, attr)
        # the grid's own progress bar replaces the per-partition one
        with self._backend().session(verbose=False) as s:
            comm = s.comm
            if not isinstance(self.random_state, numbers.Integral):
                # None or a RandomState instance: one int for the whole fit (the
                # splits, the partitions, the solvers and the refit), drawn by rank
                # 0; the refit drew again from the instance, another partition than
                # the one the scores describe (_search_fit restores the parameter)
                self.random_state = draw_seed(comm, self.random_state)
            Xl, yl, wl, index = self._collect(s, X, y, sample_weight)
            self._fit_sparse = bool(sp.issparse(Xl))
            masks, n_splits = self._split_masks(s, Xl, yl, index, loo, groups)
            cols, facts = self._prepare(s, Xl, yl, wl, index, masks)
            rows = np.hstack([cols, masks.astype(np.float64)])
            # the rows that train: all of them, or (as in the estimators' fit)
            # those of positive weight; every row is still validated
            Xt, rows_t, compact, place_y = Xl, rows, index, facts.get("placement_y")
            if facts.get("n_zero_weight"):
                Xt, rows_t, _, compact, _ = drop_zero_weight_rows(s, Xl, rows, wl, index,
                                                                 self._partition_count())
                if place_y is not None:
                    place_y = place_y[np.asarray(wl) > 0]
            t0 = time.perf_counter()
            with comm.phase("partitioning"):
                part, labels = self._partition_rows(s, Xt, compact)
            t_part = time.perf_counter() - t0
            # for the refit: its partitioner on the same rows gives this partition
            # (one process: _partition_rows takes it when the rows and the
            # partitioner's parameters are the same)
            key = (_partition_key(self._get_partitioner(), Xt) if s.size == 1 and self.refit
                   else None)
            reuse = None if key is None else (key, pickle.dumps(part))
            sizes = np.asarray(part.sizes_, dtype=np.int64)
            empty = np.flatnonzero(sizes == 0)
            if empty.size:
                comm.agree(f"partitions {empty.tolist()} are empty; use fewer partitions or "
                           "another partitioner")
            halo = _halo_sizes(part, sizes)
            # (placed by the rows they train on, halos included, as the estimators')
            owners = self._place_partitions(s, part, place_y, labels, sizes + halo)
            check = getattr(self, "_check_search_memory", None)
            if check is not None:  # before any row moves (collective under MPI)
                mine = (sizes + halo)[owners == comm.rank]
                # the largest share of rows a split trains on (of this rank's rows:
                # a custom splitter's may be far above (k - 1) / k)
                train = (float(np.max(masks[:, :n_splits].mean(axis=0)))
                         if not loo and masks.shape[0] else None)
                check(comm, mine, max(1, min(int(s.n_workers), mine.size)), s.threads,
                      n_splits, loo, grid, train)
            t0 = time.perf_counter()
            with comm.phase("redistribution"):
                tasks = self._distribute(s, Xt, rows_t, None, compact, labels, owners, part)
                counts = None
                if not loo:
                    counts = _training_counts(s, rows_t, labels, part, compact,
                                              cols.shape[1], n_splits)
                    # (summed over the ranks: the same error on every rank)
                    _check_every_split_trains(counts, facts.get("n_zero_weight"))
                queries = self._query_rows(s, Xl, rows, index, part, owners, loo, tasks,
                                           counts, cols.shape[1])
            t_move = time.perf_counter() - t0
            job = self._make_job(s, grid, n_splits, loo, facts, cols.shape[1], sizes.size)
            job.fold_hint = self._fold_hint()
            # the partitions with training rows in every split (an averaging search
            # averages those; None: leave-one-out)
            job.trained = None if counts is None else np.count_nonzero(counts, axis=0)
            progress = _Progress(self.verbose and comm.rank == 0, len(tasks) * job.n_steps,
                                 job.progress_label)
            t0 = time.perf_counter()
            position = {id(task): i for i, task in enumerate(tasks)}
            absorb = getattr(job, "absorb", lambda i, result: result)

            def run(task):  # absorb: a job may fold a result in as it comes
                return absorb(position[id(task)],
                              job.run(task.materialize(), queries(task.j), progress))

            with comm.phase("training"):  # nothing is communicated while searching
                try:
                    results, failure = s.map(run, tasks, "search partitions"), None
                except Exception as exc:  # raised on every rank just below
                    results, failure = None, exc
            progress.close()
            t_search = time.perf_counter() - t0
            with comm.phase("validation"):
                comm.raise_failures(failure)
                scores, fit_t, score_t, n_fact = job.combine(comm, results, queries)
            gathered = comm.allgather(((t_part, t_move, t_search), comm.counter.summary(),
                                       list(getattr(job, "reports", ()))))
        solve_reports = [r for g in gathered for r in g[2]]
        if solve_reports:  # (the same on every rank: one warning per kind)
            job.warn(solve_reports, int(n_fact))
        self._set_results(job.params, scores, fit_t, score_t,
                          getattr(job, "empty_splits", ()))
        _set_partitions(self, part, sizes)
        self.n_splits_ = int(n_splits)
        report = comm_report([g[1] for g in gathered])
        self.fit_stats_ = {
            "partition_seconds": float(max(g[0][0] for g in gathered)),
            "redistribution_seconds": float(max(g[0][1] for g in gathered)),
            "search_seconds": float(max(g[0][2] for g in gathered)),
            **job.stats(n_fact),
            "n_candidates": len(job.params),
            "partition_sizes": sizes.tolist(),
            "halo_sizes": halo.tolist(),
            "owners": owners.tolist(),
            "comm": report,
            "comm_bytes": int(report["total"]["bytes"]),
            "comm_messages": int(report["total"]["messages"]),
            "backend": s.backend.name,
            "n_ranks": s.size,
        }
        if self.refit:
            t0 = time.perf_counter()
            best = self._make_estimator(**self.best_params_)
            best.set_params(verbose=False)
            fit_args = () if sample_weight is None else (sample_weight,)
            if reuse is not None:
                best._search_partition = reuse
            try:
                self.best_estimator_ = best.fit(X, y, *fit_args)
            finally:
                best.__dict__.pop("_search_partition", None)
            self.refit_time_ = time.perf_counter() - t0
        return self

    # ------------------------------------------------------------------ results
    def _set_results(self, params, scores, fit_times, score_times, empty_splits=()):
        res = build_cv_results(params, scores, fit_times, score_times)
        if len(empty_splits):
            warnings.warn(f"the validation rows of split(s) {list(map(int, empty_splits))} "
                          "all have sample_weight 0: their scores are NaN for every "
                          "candidate (as GridSearchCV's), and so are the mean scores",
                          RuntimeWarning, stacklevel=4)
        elif np.any(np.isnan(res["mean_test_score"])):
            bad = int(np.sum(np.isnan(res["mean_test_score"])))
            warnings.warn(f"{bad} of {len(params)} candidates gave non-finite predictions "
                          "or scores (their scores are NaN)", RuntimeWarning, stacklevel=4)
        self.cv_results_ = res
        self.best_index_ = int(np.argmin(res["rank_test_score"]))
        self.best_params_ = dict(params[self.best_index_])
        self.best_score_ = float(res["mean_test_score"][self.best_index_])

    # ------------------------------------------------------------------ predict
    @available_if(lambda self: _refit_check(self, "predict"))
    def predict(self, X):
        """Predict with ``best_estimator_`` (needs ``refit=True``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        """
        return self._best().predict(X)

    def score(self, X, y, sample_weight=None):
        """``scorer_`` (the search's ``scoring``: r2 or accuracy by default) of
        ``best_estimator_`` on ``(X, y)`` (greater is better), as
        ``GridSearchCV.score``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        score : float
        """
        kw = {} if sample_weight is None else {"sample_weight": sample_weight}
        best = self._best()  # NotFittedError first (scorer_ is set by fit)
        return float(self.scorer_(best, X, y, **kw))

    @available_if(lambda self: _refit_check(self, "predict_sharded"))
    def predict_sharded(self, X, comm=None):
        """``best_estimator_``'s collective prediction of a test set sharded over
        MPI ranks (see the estimator's ``predict_sharded``; needs
        ``refit=True``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_local, n_features)
        comm : mpi4py.MPI.Comm, default=None

        Returns
        -------
        y_pred : ndarray of shape (n_local,) or (n_local, n_targets)
        """
        return self._best().predict_sharded(X, comm)

    @available_if(lambda self: _refit_check(self, "score_sharded"))
    def score_sharded(self, X, y, sample_weight=None, comm=None):
        """``best_estimator_``'s collective score of a test set sharded over MPI
        ranks: accuracy or R^2, as the estimator's ``score_sharded`` (not the
        search's ``scoring``, which :meth:`score` uses).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_local, n_features)
        y : array-like of shape (n_local,) or (n_local, n_targets)
        sample_weight : array-like of shape (n_local,), default=None
        comm : mpi4py.MPI.Comm, default=None

        Returns
        -------
        score : float
        """
        return self._best().score_sharded(X, y, sample_weight, comm)

    def _best(self):
        check_is_fitted(self, "cv_results_")
        if not hasattr(self, "best_estimator_"):
            raise AttributeError(f"{type(self).__name__} was fitted with refit=False: there "
                                 "is no best_estimator_ to predict with; refit the "
                                 "estimator with best_params_")
        return self.best_estimator_

    def _shares_seed(self):
        """The integer seed of a splitter ``cv`` (KFold(shuffle=True), ShuffleSplit,
        ...) that is the search's own ``random_state``, or None."""
        seed = getattr(self.cv, "random_state", None)
        if (not isinstance(self.cv, (numbers.Integral, str))
                and isinstance(seed, numbers.Integral)
                and isinstance(self.random_state, numbers.Integral)
                and int(seed) == int(self.random_state)):
            return int(seed)
        return None

    def _same_seed_message(self):
        return (f"cv draws with random_state={self._shares_seed()}, the search's own seed, "
                "which its partitioner draws with too: a random partitioner's partitions "
                "then follow the splits (one partition can hold every validation row); "
                "give cv another random_state")

    def _fold_hint(self):
        """Why a partition may lie inside one validation fold, for the error."""
        if self._shares_seed() is not None:
            return "; " + self._same_seed_message()
        if (self.cv is None or isinstance(self.cv, numbers.Integral)
                or getattr(self.cv, "shuffle", False)
                or getattr(self.cv, "random_state", None) is not None):
            return "; use fewer partitions or folds"  # the folds already shuffle
        return "; use fewer partitions or folds, or shuffled folds"

    # ------------------------------------------------------------------ setup helpers
    def _min_validation_rows(self):
        """``(rows, reason)``: the fewest validation rows a split needs for the
        search's scoring."""
        return 1, None

    def _split_masks(self, s, X, y, index, loo, groups=None):
        """``(masks, n_splits)``: for this rank's rows, 1 in column ``f`` when
        the row trains split ``f`` and in column ``n_splits + f`` when it
        validates it. The splits are drawn once on all rows (rank 0); in
        sharded mode the splitter sees only the number of rows (and the labels
        and ``groups`` of every row, gathered)."""
        comm = s.comm
        if loo:
            return np.zeros((X.shape[0], 0), dtype=np.int8), 1
        classifier = is_classifier(self)
        error = masks = failure = None
        if self._shares_seed() is not None:  # (every rank: the same parameters)
            warnings.warn(self._same_seed_message(), UserWarning, stacklevel=3)
        if s.size == 1 or not s.sharded:
            if comm.rank == 0:
                try:
                    masks = _masks_from_cv(self.cv, X, y, classifier, self.random_state,
                                           _check_groups(groups, X.shape[0]),
                                           self._min_validation_rows())
                except (ValueError, TypeError) as exc:
                    error = str(exc)
                except Exception as exc:  # a user's splitter: every rank raises
                    failure = exc
            if s.size == 1:
                if failure is not None:
                    raise failure
                if error is not None:
                    raise ValueError(error)
                return masks, masks.shape[1] // 2
            comm.agree(error, failure=failure)
            n_splits = comm.bcast_obj(masks.shape[1] // 2 if comm.rank == 0 else None)
            if comm.rank:
                masks = np.zeros((0, 2 * n_splits), dtype=np.int8)
            return masks, n_splits
        n_total = int(comm.allreduce(int(X.shape[0])))
        y_all = None
        if classifier:  # stratified splits need every label (n integers)
            y_all = np.concatenate(comm.allgather(np.asarray(y)))
        try:  # every rank its own rows' groups
            groups = _check_groups(groups, X.shape[0])
        except ValueError as exc:
            error = str(exc)
        comm.agree(error)
        got = comm.allgather(groups)
        if any(g is not None for g in got):
            comm.agree(None if groups is not None else
                       "groups must be given on every rank in sharded mode (its own rows' "
                       "labels) or on none")
            groups = np.concatenate(got)
        if comm.rank == 0:
            try:
                masks = _masks_from_cv(self.cv, np.zeros((n_total, 1)), y_all, classifier,
                                       self.random_state, groups, self._min_validation_rows())
            except (ValueError, TypeError) as exc:
                error = str(exc)
            except Exception as exc:  # a user's splitter: every rank raises
                failure = exc
        comm.agree(error, failure=failure)
        masks = comm.bcast_obj(masks)
        return masks[index], masks.shape[1] // 2

    def _query_rows(self, s, X, rows, index, part, owners, loo, tasks, counts=None,
                    first=None):
        """A function ``j -> (X, rows, index)`` of the rows partition ``j``
        predicts during validation: the rows whose nearest centre it is
        (nearest-centre searches, leave-one-out too), every row for averaging
        (moved once, with the partitions).

        ``counts`` (partitions x splits, nearest-centre searches with splits):
        the training rows of every partition in every split. A partition with
        none in a split (a K-means cluster of a few outlying rows, all
        validating that split) has no model there: in that split its
        validation rows go to the nearest centre of the partitions that have
        training rows (as K-means drops an empty cluster), as a copy of the row
        validating that split only (``first``: the column of the first split's
        training mask in ``rows``)."""
        average = self._is_average
        comm = s.comm
        if average:  # (counts: the job averages the partitions with training rows)
            if s.size == 1:
                every = (X, rows, index)
            else:
                block = _pack_block(X, rows, None, index, np.zeros(X.shape[0], np.int64),
                                    np.arange(X.shape[0]))
                got = [_unpack_block(b) for b in comm.Allgatherv(block)]
                keys = ("dense",) if not self._fit_sparse else ("nnz", "indices", "data")
                cat = {k: np.concatenate([g[k] for g in got]) for k in keys + ("y", "index")}
                Xa = _unpack_rows(cat, self.n_features_in_, self._fit_sparse)
                order = np.argsort(cat["index"], kind="stable")
                every = (Xa[order], cat["y"][order], cat["index"][order])
            return lambda j: every
        def assigned():
            return _assign_rows(part, X) if X.shape[0] else np.zeros(0, dtype=np.intp)

        # (under MPI a user's assign failing on one rank: every rank's error, not a hang)
        route = assigned() if s.size == 1 else route_collectively(s.comm, part, assigned)
        P = owners.size
        if counts is not None:
            X, rows, index, route = _reroute_from_untrained(X, rows, index, route, part,
                                                            counts, first)
        if s.size == 1:
            groups = _group_by(route, P)
            routed = {j: _LazyPartition(j, X, rows, None, groups[j], index) for j in range(P)}
        else:
            mine = [t.j for t in tasks]
            if not s.sharded:
                got = self._scatter_partitions(s, X, rows, None, index, _group_by(route, P),
                                               owners, mine)
            else:
                got = self._exchange_partitions(s, X, rows, None, index, route, owners, mine)
            routed = {t.j: t for t in got}

        def rows_of(j):
            p = routed[j].materialize()
            return p.X, p.y, p.index
        return rows_of


def _training_counts(s, rows, labels, part, index, first, n_splits):
    """``(P, n_splits)``: the training rows of every partition (its halo's
    included) in every split, over all ranks (one small reduction). ``rows``
    are this rank's training rows' columns (split ``f``'s training mask in
    column ``first + f``), ``labels`` their partitions, ``index`` their global
    indices (the halos' coordinates in sharded mode)."""
    P = np.asarray(part.sizes_).size
    counts = np.zeros((P, n_splits))
    if labels.size:
        train = rows[:, first:first + n_splits]
        for f in range(n_splits):
            counts[:, f] = np.bincount(labels, weights=train[:, f], minlength=P)
        halo = _halo_of(part)
        if halo is not None:
            if s.size > 1 and s.sharded:  # this shard's rows in every halo
                halo = _shard_halos(halo, index)
            for j, h in enumerate(halo):
                counts[j] += train[h].sum(axis=0)
    if s.size > 1:
        counts = s.comm.Allreduce(counts.ravel()).reshape(P, n_splits)
    return counts


def _check_every_split_trains(counts, zero_weights):
    """A ValueError when some split has no training row in any partition (the
    splitters give every split training rows, but rows of weight 0 train
    nowhere)."""
    empty = np.flatnonzero(counts.sum(axis=0) == 0)
    if empty.size:
        raise ValueError(f"split {int(empty[0])} has no training row"
                         + (" of positive sample_weight (rows of weight 0 train nowhere)"
                            if zero_weights else ""))


def _reroute_from_untrained(X, rows, index, route, part, counts, first):
    """``(X, rows, index, route)`` with the validation rows of partitions
    that have no training row in their split moved, for that split only, to
    the nearest centre of a partition that has (see
    :meth:`_PartitionedSearchCV._query_rows`). Splits without any training
    row are left as they are (the job's error names them)."""
    S = counts.shape[1]
    untrained = (counts == 0) & np.any(counts > 0, axis=0)  # (P, S)
    if not untrained.any() or not route.size:
        return X, rows, index, route
    val = rows[:, first + S:first + 2 * S] > 0
    moved, split = np.nonzero(val & untrained[route])
    if not moved.size:
        return X, rows, index, route
    storage = getattr(part, "_storage", "as_is")  # (as the partitioner's assign)
    centers = np.asarray(part.centers_, dtype=np.float64)
    to = np.empty(moved.size, dtype=np.intp)
    for f in np.unique(split):
        at = np.flatnonzero(split == f)
        trained = np.flatnonzero(counts[:, f] > 0)
        to[at] = trained[nearest_center_stored(X[moved[at]], centers[trained], storage)]
    rows = rows.copy()
    rows[moved, first + S + split] = 0.0  # no longer validated where they were
    extra = rows[moved]
    extra[:, first:] = 0.0  # the copies train nowhere and validate their split only
    extra[np.arange(moved.size), first + S + split] = 1.0
    if sp.issparse(X):  # (the index width kept)
        width = X.indices.dtype
        X = sp.vstack([X, X[moved]], format="csr")
        X.indices, X.indptr = X.indices.astype(width), X.indptr.astype(width)
    else:
        X = np.concatenate([X, X[moved]])
    return (X, np.concatenate([rows, extra]), np.concatenate([index, index[moved]]),
            np.concatenate([route, to]))


def check_training_rows(j, train, hint, needed=None):
    """A ValueError when partition ``j`` has no training row in some split
    (``train``: its rows x splits mask) where it is needed (``needed``: one
    bool per split; None: every split), with the ``hint`` of
    :meth:`_PartitionedSearchCV._fold_hint`."""
    counts = train.sum(axis=0)
    if needed is None:
        needed = np.ones(counts.size, dtype=bool)
    if np.any((counts == 0) & needed):
        f = int(np.flatnonzero((counts == 0) & needed)[0])
        raise ValueError(f"partition {j} has no training row in split {f} (all its "
                         f"{train.shape[0]} rows validate it){hint}")


def _refit_check(search, attr):
    """``available_if`` check of the methods of ``best_estimator_``: as for
    ``GridSearchCV``, a search initialised with ``refit=False`` has none."""
    if not search.refit:
        raise AttributeError(f"This {type(search).__name__} instance was initialized with "
                             f"refit=False: {attr} is available only after refitting on the "
                             "best parameters (refit the estimator with best_params_)")
    return True


def _check_groups(groups, n_rows):
    """``groups`` as a one-dimensional array of ``n_rows`` labels (or None)."""
    if groups is None:
        return None
    groups = np.asarray(groups)
    if groups.ndim != 1 or groups.shape[0] != n_rows:
        raise ValueError(f"groups must have one label per row: shape {groups.shape} for "
                         f"{n_rows} rows")
    return groups


def _masks_from_cv(cv, X, y, classifier=False, random_state=None, groups=None,
                   min_validation=(1, None)):
    """The splits of ``cv`` as row masks. An int is *shuffled* (Stratified)KFold:
    the partitioners depend on the data order (K-balance and FCFS fill their
    last partitions from the last rows), so unshuffled folds could leave a
    partition without training rows in some split. ``groups`` goes to the
    splitter, as ``GridSearchCV`` passes it. ``min_validation``: the fewest
    validation rows a split may have and the reason (a scoring undefined on
    fewer). None is 5, as in ``GridSearchCV`` (shuffled too)."""
    if cv is None:
        cv = 5
    if isinstance(cv, numbers.Integral):
        cls = StratifiedKFold if classifier and y is not None else KFold
        # a seed of its own: with random_state itself, a random partitioner's
        # permutation would make every partition exactly one fold
        seed = (None if random_state is None else
                check_random_state(random_state).randint(np.iinfo(np.int32).max))
        cv = cls(int(cv), shuffle=True, random_state=seed)
    splitter = check_cv(cv, y, classifier=classifier)
    n = X.shape[0]
    splits = list(splitter.split(X, y, groups))
    if not splits:
        raise ValueError("cv gave no split")
    masks = np.zeros((n, 2 * len(splits)), dtype=np.int8)
    for f, (train, val) in enumerate(splits):
        train, val = np.asarray(train), np.asarray(val)
        # (boolean masks, as GridSearchCV takes them: their rows' indices)
        train, val = (np.flatnonzero(a) if a.dtype == bool and a.shape == (n,) else a
                      for a in (train, val))
        if train.size == 0 or val.size == 0:
            raise ValueError(f"split {f} of cv has an empty training or validation set")
        for name, rows in (("training", train), ("validation", val)):
            if np.unique(rows).size != rows.size:  # a set of rows each: not a bootstrap
                raise ValueError(
                    f"split {f} of cv repeats {name} rows (sampling with replacement): "
                    "the fast search holds every split as a set of rows; use GridSearchCV "
                    "over the estimator for such splits")
        if val.size < min_validation[0]:
            raise ValueError(f"split {f} of cv validates {val.size} row(s): "
                             f"{min_validation[1]}")
        masks[train, f] = 1
        masks[val, len(splits) + f] = 1
    return masks


def split_columns(rows, n_cols, n_splits):
    """``(train, val)`` boolean masks ``(n_rows, n_splits)`` of the rows' columns."""
    return (rows[:, n_cols:n_cols + n_splits].astype(bool),
            rows[:, n_cols + n_splits:n_cols + 2 * n_splits].astype(bool))


def allreduce_parts(comm, parts):
    """Sum the arrays ``parts`` over the ranks in place, in one reduction."""
    if comm.size > 1:
        flat = comm.Allreduce(np.concatenate([a.ravel() for a in parts]))
        pos = 0
        for a in parts:
            a.ravel()[:] = flat[pos:pos + a.size]
            pos += a.size
    return parts


class _Progress:
    """A thread-safe progress bar over the steps of a search."""

    def __init__(self, verbose, total, label):
        self._bar = None
        self._lock = threading.Lock()
        self._verbose, self._total, self._done = verbose, total, 0
        self._desc = f"search ({label})"
        if verbose:
            try:
                from tqdm.auto import tqdm
            except ImportError:  # the 'progress' extra is not installed: log lines
                return
            self._bar = tqdm(total=total, desc=self._desc, leave=False, file=sys.stderr)

    def tick(self):
        if not self._verbose:
            return
        with self._lock:
            self._done += 1
            if self._bar is not None:
                self._bar.update(1)
            else:
                print(f"[cakernels] {self._desc}: {self._done}/{self._total}",
                      file=sys.stderr)

    def close(self):
        if self._bar is not None:
            self._bar.close()
