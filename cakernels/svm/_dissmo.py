"""Dis-SMO: SMO with the training rows distributed over ranks or threads
(Algorithm 1 of the reference, after Cao et al.).

Every worker (an MPI rank, or a thread of this process) owns a block of rows
and the gradient of its rows. One iteration:

1. every worker finds its rows' maximal violating candidates: the largest
   ``-y_t G_t`` over ``I_up`` and the smallest over ``I_low``;
2. one collective (an allgather of a fixed-size record per worker: the two
   candidates' values, global indices, labels, dual variables, bounds,
   kernel diagonals *and feature vectors*) gives every worker the global
   maximal violating pair ``(i, j)`` and the two samples: the reduction and
   the broadcast of Algorithm 1 in one message;
3. every worker computes the same two-variable update (LIBSVM's analytic
   step with clipping), the owners write the new ``alpha_i``, ``alpha_j``,
   and every worker updates its rows' gradients with the kernel rows
   ``K(x_i, .)`` and ``K(x_j, .)`` over its own rows (kept in a per-worker
   LRU cache).

It stops when ``max_{I_up} -y G - min_{I_low} -y G < tol`` (LIBSVM's rule;
Algorithm 1 writes it ``b_low <= b_high + 2 tau`` with ``tol = 2 tau``). The
work per iteration is O(n/P) per worker and one collective of
``P x 2 x (6 + d)`` doubles, so iterations are many and cheap: it is the
baseline the communication-avoiding methods are measured against.

Deviations from Algorithm 1, and why: the working set is the first-order
maximal violating pair, as in the algorithm, unless
``working_set='second-order'`` asks for LIBSVM's choice (``j`` by
second-order gain, which needs ``K(x_i, .)`` and so a second collective per
iteration: the first-order pair zigzags for millions of iterations on a large
C with duplicate samples of opposite labels); the update is LIBSVM's (it
clips both variables to their boxes, which the algorithm's formula leaves
implicit); ties between equal violations go to the smallest
global index, so that the iterations do not depend on how the rows are split
(with the second-order choice, near ties compare gains from kernel rows whose last
bits depend on the block a row is in: they may take another path on another split,
to the same model within ``tol``).
"""

import sys
import time
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import StrOptions

from .._engine import (
    PartitionedEstimator,
    _group_by,
    keeps_state_on_failure,
    validate_params_for,
)
from .._kernels import KERNEL_OVERFLOW, check_kernel_diagonal, kernel_block, row_sq_norms
from .._solvers.native_svc import NativeKernelSVC
from .._solvers.smo import LIBSVM_ITER_PER_VARIABLE, default_max_iter
from ..backends._backend import BACKEND_NAMES, Backend
from ..backends._budget import blas_limits
from ..backends._comm import comm_report, failure_text, raise_if_any_failed
from ._full_model import _FullModelSVC
from ._partitioned import _SVM_CONSTRAINTS

__all__ = ["DisSMOSVC", "dis_smo"]

_TAU = 1e-12  # LIBSVM's floor of the second derivative along the pair
RHO_AT_BOUND = 1e-12  # native/ck_smo.c's CK_RHO_AT_BOUND
_META = 6     # F, global index, y, alpha, upper bound, K(x, x)
#: max_iter=-1: LIBSVM's limit of 100 iterations per sample, at least AUTO_MIN_ITER
#: (LIBSVM: 10**7)
AUTO_ITER_PER_SAMPLE = LIBSVM_ITER_PER_VARIABLE
AUTO_MIN_ITER = 10**6


def _kernel_diag(sq_norms, kp):
    kind = kp["kernel"]
    if kind == "rbf":
        return np.ones_like(sq_norms)
    if kind == "linear":
        return sq_norms.copy()
    if kind == "poly":
        return (kp["gamma"] * sq_norms + kp["coef0"]) ** kp["degree"]
    return np.tanh(kp["gamma"] * sq_norms + kp["coef0"])


class _Block:
    """One worker's rows of one binary problem, their dual variables and gradients.

    ``F = -y * G`` (``G = Q alpha - 1``) is kept twice: ``Fu`` holds it on
    ``I_up`` and ``-inf`` elsewhere, ``Fl`` on ``I_low`` and ``+inf``
    elsewhere, so that a gradient update is two subtractions and the
    candidates are one argmax and one argmin (infinities stay infinite).
    """

    def __init__(self, X, y, upper, index, kp, cache_bytes, row_width):
        self.X, self.y, self.upper, self.index, self.kp = X, y, upper, index, kp
        self.sparse = sp.issparse(X)
        self.d = X.shape[1]
        self.norms = row_sq_norms(X) if X.shape[0] else np.zeros(0)
        self.diag = _kernel_diag(self.norms, kp)
        n = y.size
        self.alpha = np.zeros(n)
        self.up = y > 0          # alpha = 0: I_up holds the positives,
        self.low = y < 0         # I_low the negatives; F = -y G = y
        self.Fu = np.where(self.up, y, -np.inf)
        self.Fl = np.where(self.low, y, np.inf)
        self.row_width = row_width
        self.cache = OrderedDict()
        self.capacity = max(2, int(cache_bytes // max(8 * n, 1)))
        self.hits = self.misses = 0

    # ---------------------------------------------------------------- candidates
    def _row_payload(self, p):
        out = np.zeros(self.row_width)
        if not self.sparse:
            out[:] = self.X[p]
            return out
        lo, hi = self.X.indptr[p], self.X.indptr[p + 1]
        half = self.row_width // 2
        out[half:] = -1.0
        out[:hi - lo] = self.X.data[lo:hi]
        out[half:half + hi - lo] = self.X.indices[lo:hi]
        return out

    def _candidate(self, p, F):
        rec = np.empty(_META + self.row_width)
        if p < 0:
            rec[:_META] = (F, -1.0, 0.0, 0.0, 0.0, 0.0)
            rec[_META:] = 0.0
            return rec
        rec[:_META] = (F, self.index[p], self.y[p], self.alpha[p], self.upper[p],
                       self.diag[p])
        rec[_META:] = self._row_payload(p)
        return rec

    def candidates(self):
        """``(2, 6 + width)``: the block's best of ``I_up`` and of ``I_low``."""
        if self.y.size == 0:
            return np.stack([self._candidate(-1, -np.inf), self._candidate(-1, np.inf)])
        p, q = int(np.argmax(self.Fu)), int(np.argmin(self.Fl))
        fp, fq = self.Fu[p], self.Fl[q]
        return np.stack([self._candidate(p if fp > -np.inf else -1, fp),
                         self._candidate(q if fq < np.inf else -1, fq)])

    def first_candidate(self):
        """``(6 + width + 1,)``: the block's best of ``I_up`` and, appended, its
        smallest F over ``I_low`` (the first collective of second-order
        selection: the stopping test needs only that value, not the sample)."""
        if self.y.size == 0:
            return np.append(self._candidate(-1, -np.inf), np.inf)
        p = int(np.argmax(self.Fu))
        fp = self.Fu[p]
        return np.append(self._candidate(p if fp > -np.inf else -1, fp), self.Fl.min())

    def second_candidate(self, gi, xi, Fi, Kii):
        """``(6 + width + 1,)``: the block's ``j`` of LIBSVM's second-order
        selection for ``i`` (Fan, Chen and Lin 2005, WSS 2) and, appended, its
        gain: over ``t`` in ``I_low`` with ``F_t < F_i``, the smallest
        ``-(F_i - F_t)^2 / a_it`` with ``a_it = K_ii + K_tt - 2 K_it`` (tau when
        not positive). ``K(x_i, .)`` stays in the cache for the update."""
        if self.y.size == 0 or not self.Fl.min() < Fi:
            return np.append(self._candidate(-1, np.inf), np.inf)
        a = self._kernel_row(gi, xi) * -2.0
        a += self.diag
        a += Kii
        a[a <= 0] = _TAU
        b = np.subtract(Fi, self.Fl)  # -inf outside I_low
        np.maximum(b, 0.0, out=b)     # t with F_t >= F_i: no decrease
        b *= b
        b /= a
        q = int(np.argmax(b))  # the largest (F_i - F_t)^2 / a_it; ties: the smallest index
        if not b[q] > 0:
            return np.append(self._candidate(-1, np.inf), np.inf)
        return np.append(self._candidate(q, self.Fl[q]), -b[q])

    # ---------------------------------------------------------------- update
    def _kernel_row(self, g, x):
        row = self.cache.get(g)
        if row is not None:
            self.cache.move_to_end(g)
            self.hits += 1
            return row
        self.misses += 1
        Xb, norms = self.X, self.norms
        if Xb.shape[0] == 1 and not self.sparse:
            # a 1 x d by d x 1 product is a dot product, which rounds otherwise than
            # the matrix-vector product of a longer block: two rows keep the values
            # (and the iterations) the same for every split of the rows
            Xb, norms = np.vstack([Xb, Xb]), np.r_[norms, norms]
        # (BLAS rounds a row's product by the block's length and its place in it, in
        # the last bits: the second-order choice between near ties can then differ
        # by split; einsum's row-wise products, the same bits for every split, took
        # 10% longer and made Dis-SMO on features far from the origin zigzag)
        row = kernel_block(Xb, x, X_sq_norms=norms, Y_sq_norms=row_sq_norms(x),
                           **self.kp).ravel()[:self.X.shape[0]]
        # the sample's own entry is its diagonal (RBF: 1 exactly; the product form
        # cancels for rows far from the origin, and a row disagreeing with the
        # diagonal kept the solver from converging)
        p = int(np.searchsorted(self.index, g))  # (the block's indices increase)
        if p < self.index.size and self.index[p] == g:
            row[p] = self.diag[p]
        self.cache[g] = row
        if len(self.cache) > self.capacity:
            self.cache.popitem(last=False)
        return row

    def update(self, step):
        """Apply one global step: ``(g_i, x_i, c_i, alpha_i), (g_j, x_j, c_j, alpha_j)``
        with ``c = y * delta alpha``; ``F -= c_i K(x_i, .) + c_j K(x_j, .)``."""
        if self.y.size == 0:
            return
        (gi, xi, ci, ai), (gj, xj, cj, aj) = step
        d = ci * self._kernel_row(gi, xi)
        d += cj * self._kernel_row(gj, xj)
        self.Fu -= d
        self.Fl -= d
        for g, a in ((gi, ai), (gj, aj)):
            p = int(np.searchsorted(self.index, g))
            if p < self.index.size and self.index[p] == g:
                F = self.Fu[p] if self.up[p] else self.Fl[p]
                self.alpha[p] = a
                y, c = self.y[p], self.upper[p]
                self.up[p] = (y > 0 and a < c) or (y < 0 and a > 0)
                self.low[p] = (y > 0 and a > 0) or (y < 0 and a < c)
                self.Fu[p] = F if self.up[p] else -np.inf
                self.Fl[p] = F if self.low[p] else np.inf

    # ---------------------------------------------------------------- the end
    def summary(self):
        """``[sum_free yG, n_free, ub, lb, sum alpha (G - 1)]`` for LIBSVM's rho
        and the dual objective."""
        if self.y.size == 0:
            return np.array([0.0, 0.0, np.inf, -np.inf, 0.0])
        F = np.where(self.up, self.Fu, self.Fl)
        yG = -F
        a, y, c = self.alpha, self.y, self.upper
        # within RHO_AT_BOUND * C of a bound is at it (the native SMO's rule: an
        # update can leave a variable at C - 1 ulp, which as the only free one
        # made its y G rho instead of the midpoint of the bounded ones')
        at_upper, at_lower, ub_mask, lb_mask = bound_masks(a, y, c)
        free = ~(at_upper | at_lower)
        ub = yG[ub_mask].min() if ub_mask.any() else np.inf
        lb = yG[lb_mask].max() if lb_mask.any() else -np.inf
        G = -y * F
        return np.array([yG[free].sum(), float(free.sum()), ub, lb, float(a @ (G - 1.0))])

    def support(self):
        sv = np.flatnonzero(self.alpha > 0)
        Xs = self.X[sv] if self.sparse else np.ascontiguousarray(self.X[sv])
        return Xs, self.alpha[sv] * self.y[sv], self.index[sv]


#: widest sparse sample made a dense row for the kernel rows (a CSR times dense
#: product; a CSR row costs a sparse-sparse product per kernel row, 4x the fit
#: time on a9a); wider samples stay CSR (one LIBSVM index of 2^31 made every
#: iteration allocate and scan 16 GiB)
DENSE_ROW_FEATURES = 2**17


def _row_vector(payload, d, sparse):
    """The sample of a record's payload as a ``(1, d)`` row: dense, or for
    sparse data with more than ``DENSE_ROW_FEATURES`` features CSR."""
    if not sparse:
        return np.ascontiguousarray(payload)[None, :]
    half = payload.size // 2
    idx = payload[half:]
    keep = idx >= 0
    if d <= DENSE_ROW_FEATURES:
        x = np.zeros((1, d))
        # duplicate entries of a non-canonical CSR row add up, as in the matrix
        np.add.at(x[0], idx[keep].astype(np.int64), payload[:half][keep])
        return x
    return sp.csr_matrix((payload[:half][keep], idx[keep].astype(np.int64),
                          np.array([0, int(keep.sum())])), shape=(1, d))


def _pick(records, col=0, largest=False):
    """The row of ``records`` (k, w) with the largest (or smallest) value in
    column ``col``, ties to the smallest global index (column 1; -1, no
    candidate, last)."""
    sign = -1.0 if largest else 1.0
    r = min(range(len(records)), key=lambda r: (sign * records[r, col],
                                                records[r, 1] if records[r, 1] >= 0
                                                else np.inf))
    return records[r]


def _best(records):
    """The best ``I_up`` candidate (largest F, then smallest index) and the best
    ``I_low`` one (smallest F, then smallest index) over ``records`` of shape
    ``(k, 2, 6 + width)``."""
    return np.stack([_pick(records[:, 0], largest=True), _pick(records[:, 1])])


def _pair_step(rec_i, rec_j, xi, xj, kp):
    """LIBSVM's analytic update of the pair: new alphas and ``y * delta alpha``."""
    Fi, _, yi, ai, Ci, Kii = rec_i[:_META]
    Fj, _, yj, aj, Cj, Kjj = rec_j[:_META]
    Gi, Gj = -yi * Fi, -yj * Fj
    Kij = float(kernel_block(xi, xj, **kp)[0, 0])
    old_i, old_j = ai, aj
    if yi != yj:
        quad = max(Kii + Kjj - 2.0 * Kij, _TAU)  # Q_ii + Q_jj + 2 Q_ij, Q_ij = -K_ij
        delta = (-Gi - Gj) / quad
        diff = ai - aj
        ai += delta
        aj += delta
        if diff > 0:
            if aj < 0:
                aj, ai = 0.0, diff
        elif ai < 0:
            ai, aj = 0.0, -diff
        if diff > Ci - Cj:
            if ai > Ci:
                ai, aj = Ci, Ci - diff
        elif aj > Cj:
            aj, ai = Cj, Cj + diff
    else:
        quad = max(Kii + Kjj - 2.0 * Kij, _TAU)
        delta = (Gi - Gj) / quad
        total = ai + aj
        ai -= delta
        aj += delta
        if total > Ci:
            if ai > Ci:
                ai, aj = Ci, total - Ci
        elif aj < 0:
            aj, ai = 0.0, total
        if total > Cj:
            if aj > Cj:
                aj, ai = Cj, total - Cj
        elif ai < 0:
            ai, aj = 0.0, total
    # each variable in its box (a rounding of the partner's bound can spill over, as
    # in the native SMO)
    ai, aj = min(max(ai, 0.0), Ci), min(max(aj, 0.0), Cj)
    return ai, aj, yi * (ai - old_i), yj * (aj - old_j)


def bound_masks(alpha, y, upper):
    """LIBSVM's classes of the dual variables for ``rho``, a variable within
    ``RHO_AT_BOUND * upper`` of a bound counting as at it: ``(at_upper,
    at_lower, ub_mask, lb_mask)``, the last two the variables whose ``y G``
    bound ``rho`` from above and from below."""
    at_upper = alpha >= upper - RHO_AT_BOUND * upper
    at_lower = alpha <= RHO_AT_BOUND * upper
    ub_mask = (at_upper & (y < 0)) | (at_lower & (y > 0))
    lb_mask = (at_upper & (y > 0)) | (at_lower & (y < 0))
    return at_upper, at_lower, ub_mask, lb_mask


def libsvm_rho(sum_free, n_free, ub, lb):
    """LIBSVM's ``rho`` (``calculate_rho``): the mean ``y G`` of the free
    variables, else the midpoint of the bounded ones' interval ``[lb, ub]``
    (one end when the other is empty, 0 when both are)."""
    if n_free > 0:
        return sum_free / n_free
    if np.isfinite(ub) and np.isfinite(lb):
        return 0.5 * (ub + lb)
    return ub if np.isfinite(ub) else (lb if np.isfinite(lb) else 0.0)


#: iterations between two progress lines of ``DisSMOSVC(verbose=True)``
LOG_EVERY = 10_000


def _logger(name):
    def log(n_iter, gap):
        print(f"{name}: iteration {n_iter:,}, maximal violation {gap:.3g}",
              file=sys.stderr, flush=True)
    return log


class _RankFailed:
    """What a rank whose part failed sends in a gather of objects."""

    def __init__(self, text):
        self.text = text


def _gather_checked(comm, mine, failure, shape, flag=1):
    """Every rank's record (``comm.Allgather``), or, when this rank or another
    failed to make its record, that failure raised on every rank (the failing
    one its own exception, the others a ``CollectiveError``). A failed rank
    sends a record of the same ``shape`` with NaN in column ``flag`` (a
    column no record holds NaN in: the global index, or a count), so that
    nothing is added to the messages of a run without failure."""
    if comm.size == 1:
        if failure is not None:
            raise failure
        return mine[None]
    if failure is not None:
        mine = np.zeros(shape)
        mine[..., flag] = np.nan
    allrec = comm.Allgather(mine)
    if np.isnan(allrec[..., flag]).any():
        # the messages of the failure itself: outside the algorithm's traffic
        comm.raise_failures(failure, counted=False)
    return allrec


def dis_smo(blocks, comm, *, tol, max_iter, kp, n_features, sparse, row_width, pool=None,
            second_order=False, log=None, failure=None):
    """Run Algorithm 1 on this process's ``blocks`` (a list of :class:`_Block`);
    collective over ``comm``. ``max_iter <= 0``: no limit. With
    ``second_order`` the pair is LIBSVM's (``i`` by the first collective,
    ``j`` by second-order gain over ``K(x_i, .)`` in a second one). ``log``:
    called as ``log(n_iter, gap)`` every ``LOG_EVERY`` iterations (every
    rank computes the same values). An exception on one rank (in its blocks'
    work, or ``failure``: the blocks could not be made) is raised on every
    rank at the next collective. Returns ``(n_iter, converged, rho,
    objective)``."""
    n_iter, converged = 0, False
    step = None  # the last pair's update, applied by the next iteration's first task
    width = _META + row_width

    def each(task, reduce, shape, update=False):
        """This rank's record, ``reduce`` of ``task`` over its blocks, gathered
        from every rank (a failure on any rank raised on all)."""
        def run(b):
            if update and step is not None:
                b.update(step)
            return task(b)
        nonlocal failure
        mine = None
        if failure is None:
            try:
                # one pool.map per collective: the update rides with the candidates
                # (a map costs ~0.15 ms, as much as an iteration's work on 4,000 rows)
                mine = reduce(np.stack(list(pool.map(run, blocks)) if pool is not None
                                       else [run(b) for b in blocks]))
            except Exception as exc:  # raised on every rank by the gather
                failure = exc
        return _gather_checked(comm, mine, failure, shape)

    def first(mine):
        return np.append(_pick(mine[:, :-1], largest=True), mine[:, -1].min())

    while True:
        if second_order:
            # i: the largest F over I_up; the stopping test: the smallest F over I_low
            allrec = each(lambda b: b.first_candidate(), first, (width + 1,), update=True)
            rec_i, low = _pick(allrec[:, :-1], largest=True), allrec[:, -1].min()
            gap = rec_i[0] - low
            if rec_i[1] < 0 or gap < tol:
                converged = True
                break
            if 0 < max_iter <= n_iter:
                break
            if log is not None and n_iter and n_iter % LOG_EVERY == 0:
                log(n_iter, gap)
            xi = _row_vector(rec_i[_META:], n_features, sparse)
            gi, Fi, Kii = int(rec_i[1]), rec_i[0], rec_i[5]
            allrec = each(lambda b: b.second_candidate(gi, xi, Fi, Kii),
                          lambda mine: _pick(mine, col=-1), (width + 1,))
            rec_j = _pick(allrec, col=-1)[:-1]
        else:
            best = _best(each(lambda b: b.candidates(), _best, (2, width), update=True))
            rec_i, rec_j = best[0], best[1]
            gap = rec_i[0] - rec_j[0]
            if rec_i[1] < 0 or rec_j[1] < 0 or gap < tol:
                converged = True
                break
            if 0 < max_iter <= n_iter:
                break
            if log is not None and n_iter and n_iter % LOG_EVERY == 0:
                log(n_iter, gap)
            xi = _row_vector(rec_i[_META:], n_features, sparse)
        xj = _row_vector(rec_j[_META:], n_features, sparse)
        ai, aj, ci, cj = _pair_step(rec_i, rec_j, xi, xj, kp)
        step = ((int(rec_i[1]), xi, ci, ai), (int(rec_j[1]), xj, cj, aj))
        n_iter += 1
    try:
        sums = np.stack([b.summary() for b in blocks])
        mine = np.array([sums[:, 0].sum(), sums[:, 1].sum(), sums[:, 2].min(),
                         sums[:, 3].max(), sums[:, 4].sum()])
    except Exception as exc:
        mine, failure = None, exc
    allsum = _gather_checked(comm, mine, failure, (5,))  # (column 1: a count)
    sum_free, n_free = allsum[:, 0].sum(), allsum[:, 1].sum()
    ub, lb = allsum[:, 2].min(), allsum[:, 3].max()
    rho = libsvm_rho(sum_free, n_free, ub, lb)
    objective = 0.5 * allsum[:, 4].sum()
    return n_iter, converged, float(rho), float(objective)


class DisSMOSVC(_FullModelSVC):
    """Distributed SMO (Dis-SMO, Algorithm 1 of the reference, after Cao et al.).

    The exact SVM, by SMO with the rows split over workers: MPI ranks
    (``backend='mpi'``), threads of this process (``backend='threads'``), or
    one worker (``'serial'``). Every iteration finds the global maximal
    violating pair with one collective, which also carries the two samples,
    and every worker updates the gradients of its own rows. Its model is the
    full SVM's (the same dual objective as :class:`sklearn.svm.SVC` to the
    tolerance), whatever the number of workers; it is the baseline the
    communication-avoiding methods are measured against.

    Parameters
    ----------
    C, kernel, degree, gamma, coef0, tol
        As in :class:`sklearn.svm.SVC` (``gamma='scale'`` is resolved on the
        whole training set).
    cache_size : float, default=200
        Kernel-row cache of this process, in MB, shared by its workers: every
        worker keeps the kernel rows of recent pairs over its own rows.
    class_weight : dict or 'balanced', default=None
        As in :class:`sklearn.svm.SVC`.
    max_iter : int, default=-1
        Iteration limit of one binary problem; reaching it raises a
        ConvergenceWarning. -1 (or 0): LIBSVM's rule of 100 iterations per
        sample, but at least 10**6 (LIBSVM's floor is 10**7: every Dis-SMO
        iteration runs Python and a collective) (:class:`sklearn.svm.SVC` has no
        limit; its second-order working set rarely needs one, the first-order
        one can: see ``working_set``).
    break_ties : bool, default=False
        As in :class:`~sklearn.svm.SVC`: when True (more than two classes),
        ``predict`` returns the argmax of ``decision_function``; otherwise
        the one-vs-one vote (a tie goes to the first class in ``classes_``).
    working_set : {'first-order', 'second-order'}, default='first-order'
        How the pair of every iteration is chosen. 'first-order': Algorithm
        1's maximal violating pair, found with one collective per iteration.
        'second-order': LIBSVM's choice (Fan, Chen and Lin, 2005): ``i`` as
        before, ``j`` the sample of largest objective decrease with ``i``,
        which needs ``K(x_i, .)`` first, so two collectives per iteration; far
        fewer iterations, and no zigzag on large C: with duplicate samples of
        opposite labels and ``C=1e6``, 2,000 rows of a9a took 2.4 s where the
        first-order pair stopped at the limit of 10**6 iterations after 68 s,
        far from the optimum (``benchmarks/bench_dissmo.py``).
    backend : {'serial', 'threads', 'mpi'} or Backend, default='serial'
        Where the rows live: one block (serial), ``n_jobs`` blocks on threads,
        or one block per MPI rank (root mode: rank 0's rows are split into
        contiguous blocks; sharded mode: every rank keeps its own rows).
    n_jobs : int, default=None
        Workers (row blocks) of the ``'threads'`` backend, at most one per
        training row.
    verbose : bool, default=False
        Progress on standard error (rank 0 only under MPI): a line every
        10,000 iterations with the maximal violation still to go below
        ``tol``, and LIBSVM's closing line of every binary problem
        (iterations, dual objective, rho, support vectors).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    model_ : NativeKernelSVC
        One binary SVM per pair of classes (one-vs-one).
    support_ : ndarray
        Global indices of the support vectors (over all pairs).
    objective_ : ndarray of shape (n_problems,)
        Dual objective ``0.5 a^T Q a - sum(a)`` of every binary problem.
    n_iter_ : ndarray of shape (n_problems,)
        Iterations of every binary problem.
    gamma_ : float
    fit_stats_ : dict
        ``n_workers`` (row blocks over all ranks), ``block_sizes``,
        ``seconds``, ``n_iter``, ``cache_hit_rate`` and ``comm``
        (``comm_bytes``, ``comm_messages``: one allgather per iteration, two
        with ``working_set='second-order'``).
    n_support_total_ : int
        Support vectors of the final model (over all pairs of classes).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit (a DataFrame with string column
        names only).

    See Also
    --------
    CASVC : the communication-avoiding alternative (no communication in training).
    sklearn.svm.SVC : the same solution on one process (second-order working sets).

    Notes
    -----
    By default the working set is Algorithm 1's first-order maximal violating
    pair, so Dis-SMO needs more iterations than LIBSVM and the native SMO
    (which choose the second index by second-order information, as
    ``working_set='second-order'`` does); there is no shrinking, as in the
    reference. Ties go to the smallest global sample index, so the
    iterations are the same for any number of workers (the first-order pair;
    the second-order one's near ties may differ by split, to the same model
    within ``tol``). Under MPI, every rank
    keeps its own kernel-row cache of ``cache_size`` MB.

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from cakernels import DisSMOSVC
    >>> X, y = make_classification(n_samples=300, random_state=0)
    >>> clf = DisSMOSVC(C=10, backend="threads", n_jobs=2).fit(X, y)
    >>> clf.fit_stats_["n_workers"], float(clf.score(X, y)) > 0.9
    (2, True)
    """

    _parameter_constraints = {
        **{k: v for k, v in PartitionedEstimator._parameter_constraints.items()
           if k not in ("n_partitions", "random_state")},
        **_SVM_CONSTRAINTS,
        "backend": [StrOptions(set(BACKEND_NAMES)), Backend],
        "working_set": [StrOptions({"first-order", "second-order"})],
        "break_ties": ["boolean"],
    }

    def __init__(self, *, C=1.0, kernel="rbf", degree=3, gamma="scale", coef0=0.0, tol=1e-3,
                 cache_size=200, class_weight=None, max_iter=-1, break_ties=False,
                 working_set="first-order", backend="serial", n_jobs=None, verbose=False):
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
        self.working_set = working_set
        self.backend = backend
        self.n_jobs = n_jobs
        self.verbose = verbose

    @keeps_state_on_failure
    def fit(self, X, y, sample_weight=None):
        """Train the SVM with the rows split over the backend's workers.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training samples (under MPI: rank 0's in root mode, every rank's own
            rows in sharded mode).
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Per-sample multipliers of C.

        Returns
        -------
        self : object
        """
        validate_params_for(self)  # under MPI: raised on every rank
        with self._session() as s:
            comm = s.comm
            X, y_idx, w, index = self._prepare_classifier(s, X, y, sample_weight)
            self._check_kernel_overflow(comm, X)
            t0 = time.perf_counter()
            with comm.phase("redistribution"):
                X, y_idx, w, index = self._my_rows(s, X, y_idx, w, index)
            # no empty blocks: at most one worker per row
            n_local = min(max(1, s.n_workers), max(1, X.shape[0])) if comm.size == 1 else 1
            cuts = np.linspace(0, X.shape[0], n_local + 1).astype(np.int64)
            width = self._row_width(comm, X)
            kp = self._kernel_params()
            k = self.classes_.size
            pairs = [(a, b) for a in range(k) for b in range(a + 1, k)]
            budgets = self._iteration_budgets(comm, y_idx, w, pairs)
            pool = ThreadPoolExecutor(n_local) if n_local > 1 else None
            models, n_iter, objectives, support = [], [], [], set()
            hits = misses = 0
            try:
                # one BLAS thread: every iteration's BLAS work is two kernel rows (a
                # matrix-vector product each), too small to share, and a second
                # OpenBLAS thread that waits for a busy core made 2,000 iterations on
                # 10,000 rows take 25 s instead of 1 s
                with comm.phase("training"), blas_limits(1):
                    for (a, b), budget in zip(pairs, budgets):
                        blocks, failure = [], None
                        try:  # (a failure here is raised on every rank by dis_smo)
                            for lo, hi in zip(cuts[:-1], cuts[1:]):
                                rows = np.arange(lo, hi)
                                # (C * w, not w: a bound that underflows to 0 takes
                                # no part, as a zero weight; it gave NaN objectives)
                                rows = rows[((y_idx[rows] == a) | (y_idx[rows] == b))
                                            & (self.C * w[rows] > 0)]
                                blocks.append(_Block(
                                    X[rows], np.where(y_idx[rows] == b, 1.0, -1.0),
                                    self.C * w[rows], index[rows], kp,
                                    self.cache_size * 2**20 / n_local, width))
                        except Exception as exc:
                            failure = exc
                        name = (f"[cakernels] Dis-SMO classes {self.classes_[a]} vs "
                                f"{self.classes_[b]}")
                        it, conv, rho, obj = dis_smo(
                            blocks, comm, tol=self.tol, max_iter=budget, kp=kp,
                            n_features=self.n_features_in_, sparse=self._fit_sparse,
                            row_width=width, pool=pool,
                            second_order=self.working_set == "second-order",
                            log=_logger(name) if s.verbose else None, failure=failure)
                        if not (np.isfinite(obj) and np.isfinite(rho)):  # (every rank's)
                            raise FloatingPointError(
                                f"Dis-SMO (C={self.C:.3g}) reached a non-finite dual "
                                f"objective: {KERNEL_OVERFLOW}")
                        if not conv:
                            warnings.warn(self._not_converged(budget), ConvergenceWarning,
                                          stacklevel=3)
                        model = self._gather_support(comm, blocks, rho)
                        if s.verbose:  # LIBSVM's closing line of every binary problem
                            print(f"{name}: optimization finished, #iter = {it}, "
                                  f"obj = {obj:.6g}, rho = {rho:.6g}, "
                                  f"nSV = {model[3].size}", file=sys.stderr, flush=True)
                        models.append(model[:3])
                        support.update(model[3].tolist())
                        n_iter.append(it)
                        objectives.append(obj)
                        hits += sum(bl.hits for bl in blocks)
                        misses += sum(bl.misses for bl in blocks)
            finally:
                if pool is not None:
                    pool.shutdown()
            seconds = time.perf_counter() - t0
            self.model_ = NativeKernelSVC.from_models(
                self.classes_, kp, models, n_iter=n_iter, objectives=objectives,
                support=sorted(support), solver="dissmo")
            self.support_ = np.asarray(sorted(support), dtype=np.intp)
            self.objective_ = np.asarray(objectives)
            self.n_iter_ = np.asarray(n_iter)
            gathered = comm.allgather((seconds, np.diff(cuts).tolist(), hits, misses,
                                       comm.counter.summary()))
            report = comm_report([g[4] for g in gathered])
            total_hits = sum(g[2] for g in gathered)
            lookups = total_hits + sum(g[3] for g in gathered)
            self.fit_stats_ = {
                "seconds": float(max(g[0] for g in gathered)),
                "n_workers": int(sum(len(g[1]) for g in gathered)),
                "block_sizes": [c for g in gathered for c in g[1]],
                "n_iter": [int(i) for i in n_iter],
                "cache_hit_rate": float(total_hits / lookups) if lookups else 0.0,
                "comm": report,
                "comm_bytes": int(report["total"]["bytes"]),
                "comm_messages": int(report["total"]["messages"]),
                "backend": s.backend.name,
                "sharded": s.sharded,
                "n_ranks": s.size,
            }
        return self

    def _iteration_budgets(self, comm, y, w, pairs):
        """Iteration limit of every binary problem: ``max_iter`` when positive,
        else ``max(10**6, 100 * n)`` for its ``n`` samples of positive weight over
        all ranks (LIBSVM's rule, 100 iterations per sample, with a lower floor:
        a Dis-SMO iteration costs ~50x a LIBSVM one in this Python loop)."""
        if self.max_iter > 0:
            return [int(self.max_iter)] * len(pairs)
        counts = np.bincount(y[w > 0], minlength=self.classes_.size).astype(np.float64)
        if comm.size > 1:
            counts = comm.Allreduce(counts)
        return [default_max_iter(counts[a] + counts[b], at_least=AUTO_MIN_ITER)
                for a, b in pairs]

    def _not_converged(self, budget):
        limit = (f"max_iter={self.max_iter}" if self.max_iter > 0 else
                 f"{budget:,} iterations (max_iter=-1: {AUTO_ITER_PER_SAMPLE} per sample, "
                 f"at least {AUTO_MIN_ITER:,})")
        hint = ("; the first-order working set can zigzag for a very long time when C is "
                "large (duplicate samples with opposite labels): "
                "working_set='second-order' (LIBSVM's choice) takes the direct step"
                if self.working_set == "first-order" else "")
        return (f"Dis-SMO did not converge within {limit} (tol={self.tol}, C={self.C})"
                f"{hint}; or raise max_iter")

    def _check_kernel_overflow(self, comm, X):
        """``FloatingPointError`` when K(x, x) overflows for some row (the local
        solvers' check; under MPI the ranks agree on it)."""
        try:
            check_kernel_diagonal(row_sq_norms(X), self.kernel, float(self.gamma_),
                                  self.degree, self.coef0)
        except FloatingPointError as exc:
            if comm.size == 1:
                raise
            error = str(exc)
        else:
            error = None
        if comm.size > 1:
            comm.agree(error)

    def _my_rows(self, s, X, y, w, index):
        """This rank's block of rows: root mode scatters contiguous blocks from
        rank 0; sharded mode keeps every rank's own rows."""
        if s.size == 1 or s.sharded:
            return X, y, w, index
        comm = s.comm
        n = comm.bcast_obj(X.shape[0] if comm.rank == 0 else None)
        labels = (np.arange(n) * comm.size // max(n, 1)) if comm.rank == 0 else np.zeros(0, int)
        owners = np.arange(comm.size, dtype=np.int64)
        groups = _group_by(labels, comm.size)
        tasks = self._scatter_partitions(s, X, y, w, index, groups, owners, [comm.rank])
        p = tasks[0].materialize()
        return p.X, p.y, p.sample_weight, p.index

    def _row_width(self, comm, X):
        """Doubles per sample in the per-iteration record: the features (dense) or
        twice the largest row's non-zeros (sparse: values and column indices)."""
        if not sp.issparse(X):
            return int(self.n_features_in_)
        nnz = int(np.diff(X.indptr).max()) if X.shape[0] else 0
        nnz = int(comm.allreduce(nnz, op="max")) if comm.size > 1 else nnz
        return 2 * max(nnz, 1)

    def _gather_support(self, comm, blocks, rho):
        """The pair's support vectors on every rank, in global index order (a
        failure on one rank raised on every rank)."""
        from .._engine import _pack_rows, _unpack_rows

        try:
            parts = [b.support() for b in blocks]
            Xs = [p[0] for p in parts]
            coef = np.concatenate([p[1] for p in parts])
            idx = np.concatenate([p[2] for p in parts])
            Xs = sp.vstack(Xs, format="csr") if self._fit_sparse else np.vstack(Xs)
            mine = ((_pack_rows(Xs, np.arange(Xs.shape[0])), coef, idx) if comm.size > 1
                    else None)
            failure = None
        except Exception as exc:
            if comm.size == 1:
                raise
            mine, failure = None, exc
        if comm.size > 1:
            # a failed rank sends its message in place of its support vectors (the
            # others' payloads are unchanged: no byte added to a run without failure)
            got = comm.allgather(mine if failure is None else _RankFailed(failure_text(failure)))
            raise_if_any_failed(failure, [g.text if isinstance(g, _RankFailed) else None
                                          for g in got])
            Xs = [_unpack_rows(g[0], self.n_features_in_, self._fit_sparse) for g in got]
            Xs = sp.vstack(Xs, format="csr") if self._fit_sparse else np.vstack(Xs)
            coef = np.concatenate([g[1] for g in got])
            idx = np.concatenate([g[2] for g in got])
        order = np.argsort(idx, kind="stable")
        Xs = Xs[order]
        if self._fit_sparse:
            Xs = sp.csr_matrix(Xs)
        else:
            Xs = np.ascontiguousarray(Xs)
        return Xs, coef[order][None, :], np.array([0.0 - rho]), idx[order]
