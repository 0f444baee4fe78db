/*
 * ck_smo.c -- SMO solver for the binary SVM dual with bias (C-SVC).
 *
 * Plain C99 with optional OpenMP (the team below); no Python.h.  See
 * cakernels.h for the contract.  The algorithm is LIBSVM's Solver (Fan, Chen
 * and Lin, JMLR 2005), shrinking always on:
 *   - second-order working-set selection ("WSS2") with tau = 1e-12 for
 *     non-positive-definite kernels;
 *   - the two-variable sub-problem solved analytically and clipped to the
 *     box [0, C_i] x [0, C_j] along the line y^T alpha = const;
 *   - shrinking as LIBSVM's do_shrinking / be_shrunk: every min(n, 1000)
 *     iterations the bounded variables that cannot enter a violating pair
 *     are moved out of the active set (kept as a prefix by a permutation of
 *     the variables, as LIBSVM's swap_index); the gradient G = Q alpha - e
 *     is kept up to date on the active set only (two kernel columns per
 *     iteration), and G_bar (the part of G due to variables at their upper
 *     bound) on all variables, so the inactive part of G can be rebuilt
 *     (reconstruct_gradient).  When the gap first falls below 10 tol all
 *     variables are brought back once; the final stopping test, and the
 *     rho and objective, always use the whole reconstructed gradient;
 *   - kernel columns computed on demand (dot products here, the kernel
 *     transform by ck_kernel_from_gram so the values match the rest of the
 *     package bit for bit), only over the active part when shrunk, and kept
 *     in an LRU cache under a byte budget that counts the entries held, as
 *     LIBSVM's Cache: a column holds the active length it was asked for
 *     and is extended when a longer part is needed, so shrinking lets the
 *     budget hold more columns; its entries live in fixed-size pages of
 *     one pool allocated once, so the cache's memory is the budget (one
 *     allocation per column fragmented the heap to 1.2x the budget); the
 *     columns come from a
 *     feature-major copy of X kept in the solver's permutation when a
 *     quarter of the budget holds it (and it is no larger than the whole
 *     matrix; contiguous, vectorised axpys instead
 *     of dot products with scattered rows: 1.7x faster fits on ijcnn1, 2-5x
 *     on a9a's CSR; benchmarks/bench_smo.py);
 *   - rho as in LIBSVM's calculate_rho (mean of y_i G_i over free vectors,
 *     else the midpoint of the feasible interval).
 */
#include "ck_internal.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif


#define CK_SMO_TAU 1e-12


/* ======================================================================== */
/* The team: passes over ranges of the variables on several threads         */
/* ======================================================================== */
/* SMO is sequential from step to step, but every step's work is passes     */
/* over the active variables: the kernel columns of the pair (when not      */
/* cached), the two selection passes and the gradient update, each O(n)     */
/* (O(n nnz) for a column).  With n_threads > 1 a pass with enough work     */
/* (min_work, below) is split into one piece per thread (boundaries on      */
/* multiples of 8 entries), in a fork-join OpenMP region: the entries are   */
/* computed exactly as on one thread (elementwise, no FMA contraction), and */
/* the selection's reductions combine the pieces' bests in index order, so  */
/* that the pair (ties included), and hence the whole solve, is the same    */
/* bit for bit whatever the team.  Two or three regions per step: on a      */
/* quiet machine a region's fork and join cost a few microseconds against   */
/* tens for a pass over 50,000 variables (benchmarks/bench_smo.py --parts   */
/* threads).                                                                */
/*                                                                          */
/* A fork-join team is as fast as its slowest thread: when other programs   */
/* hold the cores, the calling thread waits at the end of a region for a    */
/* descheduled peer, up to a time slice per region.  The calling thread     */
/* measures the part of each region it does not spend on its own piece     */
/* (waiting for the team to start and to finish); when that is more than   */
/* CK_SMO_WAIT_MAX of the regions' wall time in CK_SMO_BAD_WINDOWS          */
/* consecutive windows of CK_SMO_WINDOW_S (one after a first collapse),    */
/* the team collapses: every pass runs on the calling thread, and the team  */
/* is tried again after CK_SMO_RETRY_S, doubled at each collapse up to      */
/* CK_SMO_HINT_MAX_S (a long solve follows a load that comes and goes). On  */
/* an idle machine the wait share of a window is 4-9% (99th percentile 26%, */
/* a9a); with two busy processes a collapse takes 10-50 ms. Collapsing      */
/* never changes the result.                                                */
/*                                                                          */
/* A collapse is also remembered by the process (ck_hint_*): a solve that   */
/* starts before the team's retry time starts collapsed, and one that       */
/* starts after it retries with one bad window allowed, doubling the wait;  */
/* a good window of any solve forgets it, and so does a solve that starts   */
/* CK_SMO_HINT_MAX_S after the retry time (no window ran since); a collapse */
/* on demand (collapse_at, tests) is remembered too. A multiclass fit runs  */
/* a solve per pair of classes, each a few milliseconds: too short to see   */
/* two windows, they paid the busy team's waits one by one (usps, 45 pairs  */
/* of ~180 rows with two other busy processes: 5-8x the time on one         */
/* thread).                                                                 */

#ifndef CK_SMO_MIN_WORK
#define CK_SMO_MIN_WORK 32768
#endif
#define CK_SMO_WINDOW_S 0.005
#define CK_SMO_WAIT_MAX 0.4
#define CK_SMO_BAD_WINDOWS 2
#define CK_SMO_RETRY_S 0.25
#define CK_SMO_HINT_MAX_S 2.0 /* the longest wait before a retry */
#define CK_SMO_MAX_THREADS 256 /* larger requests run 256 threads */
/* The work of a pass, per variable, in units of one multiply-add of a
 * kernel column: a pass runs on the team when its work is at least
 * min_work (CK_SMO_MIN_WORK: a few tens of microseconds, against about a
 * microsecond for a region's fork and join).  A column costs the nonzeros
 * of x_i plus CK_COST_EXP for the kernel transform; the selection passes
 * run from 4,096 active variables, the gradient updates from 8,192 (the
 * weights were measured on ijcnn1 and a9a subsets of 3,000-12,000 rows,
 * bench_smo.py --parts threads). */
#define CK_COST_SELECT 8.0
#define CK_COST_UPDATE 4.0
#define CK_COST_EXP 8.0

/* fn(ctx, t, lo, hi): the work of piece t on [lo, hi) */
typedef void (*ck_range_fn)(void *ctx, int t, int64_t lo, int64_t hi);

typedef struct {
    int T;            /* threads of a region (1: every pass on the caller) */
    int on;           /* 0 while collapsed                                 */
    int64_t min_work; /* smaller passes run on the calling thread         */
    int64_t collapse_at;
    double win_wall, win_wait; /* the current window                       */
    int bad;                   /* consecutive windows with too much wait   */
    double retry_at, retry_wait;
    int retrying; /* started after the process's hint's retry time       */
    /* counters (ck_smo_opts) */
    int64_t regions;
    double wall, wait;
    int collapses, used;
} ck_team;

#ifdef _OPENMP
/* The process's memory of the last collapse (see the top of this file):
 * the team's retry time and wait, 0 when none.  Shared by the solves of
 * every thread (contention is the machine's), under one critical section,
 * taken at a solve's start and at most once per window. */
static double ck_hint_retry_at = 0.0, ck_hint_retry_wait = 0.0;

static void ck_hint_set(double retry_at, double retry_wait)
{
#pragma omp critical(ck_smo_hint)
    {
        if (retry_at > ck_hint_retry_at) {
            ck_hint_retry_at = retry_at;
            ck_hint_retry_wait = retry_wait;
        }
    }
}

static void ck_hint_clear(void)
{
    double wait;
#pragma omp atomic read
    wait = ck_hint_retry_wait;
    if (wait <= 0.0) /* (the common case: nothing to forget, no lock) */
        return;
#pragma omp critical(ck_smo_hint)
    {
        ck_hint_retry_at = 0.0;
        ck_hint_retry_wait = 0.0;
    }
}

void ck_smo_team_hint(double set_seconds, double *remaining, double *wait)
{
    const double now = ck_wtime();
#pragma omp critical(ck_smo_hint)
    {
        *remaining = ck_hint_retry_at > now ? ck_hint_retry_at - now : 0.0;
        *wait = ck_hint_retry_wait;
        if (set_seconds >= 0.0) {
            ck_hint_retry_at = set_seconds > 0.0 ? now + set_seconds : 0.0;
            ck_hint_retry_wait = set_seconds;
        }
    }
}

static void ck_hint_start(ck_team *tm)
{
    const double now = ck_wtime();
    double at, wait;
#pragma omp critical(ck_smo_hint)
    {
        /* a collapse long past (no solve has run a window since) is forgotten */
        if (ck_hint_retry_wait > 0.0 &&
            now > ck_hint_retry_at + CK_SMO_HINT_MAX_S) {
            ck_hint_retry_at = 0.0;
            ck_hint_retry_wait = 0.0;
        }
        at = ck_hint_retry_at;
        wait = ck_hint_retry_wait;
    }
    if (wait <= 0.0)
        return;
    tm->retry_wait = wait;
    tm->retrying = 1;
    if (now < at) { /* the team is off until the retry time */
        tm->on = 0;
        tm->retry_at = at;
    }
}
#endif

#ifndef _OPENMP
void ck_smo_team_hint(double set_seconds, double *remaining, double *wait)
{
    (void)set_seconds;
    *remaining = 0.0;
    *wait = 0.0;
}
#endif

static void ck_team_init(ck_team *tm, int n_threads, const ck_smo_opts *opts)
{
    memset(tm, 0, sizeof *tm);
    n_threads = ck_team_threads(n_threads);
    tm->T = n_threads > 1 ? n_threads : 1;
    if (tm->T > CK_SMO_MAX_THREADS)
        tm->T = CK_SMO_MAX_THREADS;
#ifndef _OPENMP
    tm->T = 1;
#endif
    tm->on = 1;
    tm->used = 1;
    tm->min_work = opts != NULL && opts->min_work > 0 ? opts->min_work
                                                       : CK_SMO_MIN_WORK;
    tm->collapse_at = opts != NULL ? opts->collapse_at : 0;
#ifdef _OPENMP
    if (tm->T > 1 && tm->collapse_at == 0)
        ck_hint_start(tm);
#endif
}

#ifdef _OPENMP
static void ck_team_collapse(ck_team *tm, double now)
{
    tm->on = 0;
    ++tm->collapses;
    tm->bad = 0;
    tm->win_wall = tm->win_wait = 0.0;
    tm->retry_wait = tm->retry_wait > 0.0 ? 2.0 * tm->retry_wait
                                          : CK_SMO_RETRY_S;
    if (tm->retry_wait > CK_SMO_HINT_MAX_S)
        tm->retry_wait = CK_SMO_HINT_MAX_S;
    tm->retry_at = now + tm->retry_wait;
    ck_hint_set(tm->retry_at, tm->retry_wait); /* collapse_at's too */
}

/* Run the next pass (work: its multiply-add units) on the team? */
static int ck_team_wants(ck_team *tm, double work)
{
    if (tm->T <= 1 || work < (double)tm->min_work)
        return 0;
    if (!tm->on && ck_wtime() >= tm->retry_at) {
        tm->on = 1;
        tm->bad = 0;
        tm->win_wall = tm->win_wait = 0.0;
    }
    return tm->on;
}

/* A region ran from t0 to t1, and the calling thread worked on its piece
 * for `own` seconds of it: the rest is waiting (for the team to start --
 * libgomp's master waits for the threads of the previous region to dock --
 * and for it to finish). */
static void ck_team_account(ck_team *tm, double t0, double own, double t1,
                            int used)
{
    const double wall = t1 - t0, wait = wall - own;
    ++tm->regions;
    tm->wall += wall;
    tm->wait += wait;
    if (used > tm->used)
        tm->used = used;
    if (tm->collapse_at != 0) { /* tests: on demand, or never */
        if (tm->collapse_at > 0 && tm->regions >= tm->collapse_at) {
            tm->collapse_at = -1;
            ck_team_collapse(tm, t1);
            /* for good: a retry after CK_SMO_RETRY_S made the regions after
             * it depend on the machine's speed (slow under ASan and load) */
            tm->retry_at = HUGE_VAL;
        }
        return;
    }
    tm->win_wall += wall;
    tm->win_wait += wait;
    if (tm->win_wall >= CK_SMO_WINDOW_S) {
        if (tm->win_wait > CK_SMO_WAIT_MAX * tm->win_wall) {
            /* a retry after a collapse needs one bad window */
            if (++tm->bad >= (tm->collapses > 0 || tm->retrying
                                  ? 1 : CK_SMO_BAD_WINDOWS)) {
                ck_team_collapse(tm, t1);
                return;
            }
        } else {
            /* the load has gone: forget the process's collapse (whichever
             * solve's it was) */
            tm->bad = 0;
            tm->retrying = 0;
            ck_hint_clear();
        }
        tm->win_wall = tm->win_wait = 0.0;
    }
}

/* Piece t of nt of [lo, hi), its boundaries on multiples of 8 entries from
 * lo (whole cache lines of the aligned arrays). */
static void ck_piece(int64_t lo, int64_t hi, int t, int nt, int64_t *a,
                     int64_t *b)
{
    int64_t per = (hi - lo + nt - 1) / nt;
    per = (per + 7) & ~(int64_t)7;
    *a = lo + per * t;
    if (*a > hi)
        *a = hi;
    *b = *a + per;
    if (*b > hi)
        *b = hi;
}

#endif /* _OPENMP */

/* fn over [lo, hi): on the team when the range is long enough (pieces
 * 0 .. nt-1 in index order, returns nt), else fn(ctx, 0, lo, hi) on the
 * calling thread (returns 1). */
static int ck_team_run(ck_team *tm, int64_t lo, int64_t hi, double cost,
                       ck_range_fn fn, void *ctx)
{
#ifdef _OPENMP
    if (ck_team_wants(tm, (double)(hi - lo) * cost)) {
        const double t0 = ck_wtime();
        double own = 0.0;
        int used = 1;
        ck_note_team(tm->T);
#pragma omp parallel num_threads(tm->T)
        {
            const int t = omp_get_thread_num(), nt = omp_get_num_threads();
            int64_t a, b;
            double t_start = 0.0;
            ck_piece(lo, hi, t, nt, &a, &b);
            if (t == 0)
                t_start = ck_wtime();
            fn(ctx, t, a, b);
            if (t == 0) {
                own = ck_wtime() - t_start;
                used = nt;
            }
        }
        ck_team_account(tm, t0, own, ck_wtime(), used);
        return used;
    }
#endif
    fn(ctx, 0, lo, hi);
    return 1;
}



/* ======================================================================== */
/* Kernel columns for the cache (ck_qcache.c: the paged LRU cache, LIBSVM's */
/* Cache with variable-length columns)                                      */
/* ======================================================================== */
/* Q_ij = y_i y_j K(x_i, x_j) is symmetric, so column j is also row j.      */
/* Keys and entries are positions in the solver's permutation (the active   */
/* set is the prefix [0, active)).                                           */

/* What the cache's callback needs to compute columns of Q */
typedef struct {
    const ck_matrix *X;
    ck_kparams kp;
    const int64_t *perm;       /* position -> row of X                      */
    const double *y;           /* permuted labels                          */
    const double *sq;          /* permuted |x_i|^2                         */
    double *work;              /* CSR scratch without the copy: n_cols     */
                               /* zeros per thread of the team, else NULL  */
    ck_team *team;             /* computes long columns in pieces          */
    const ck_fmajor *fm;       /* feature-major copy in position order, or */
                               /* NULL: columns from the rows of X         */
    double n_madds;            /* multiply-adds (entries x nonzeros of x_i) */
} ck_smo_cols;

typedef struct {
    const ck_smo_cols *c;
    int64_t i;
    ck_col col;
    int shift;
    ck_status *status; /* one per thread */
} ck_smo_col_job;

/* Entries [a, b) of column i by thread t: from the feature-major copy (its
 * loops walk the pages), else page by page from the rows of X (a dot
 * product per entry: the walk costs nothing there), with the thread's own
 * CSR scratch */
static void ck_smo_col_piece_fn(void *ctx, int t, int64_t a, int64_t b)
{
    const ck_smo_col_job *job = (const ck_smo_col_job *)ctx;
    const ck_smo_cols *c = job->c;
    const int64_t i = job->i;
    const int shift = job->shift;
    ck_status st = CK_OK;
    int64_t e;
    if (c->fm != NULL) {
        st = ck_q_range_fmajor(c->X, c->fm, &c->kp, c->perm[i], c->y[i],
                               c->sq[i], c->y, c->sq, a, b,
                               job->col, shift, 0);
    } else {
        double *scratch = c->work != NULL ? c->work + (int64_t)t * c->X->n_cols
                                          : NULL;
        for (; a < b && st == CK_OK; a = e) {
            e = ck_page_end(a, b, shift, 0);
            st = ck_q_row(c->X, &c->kp, c->perm[i], c->y[i], c->sq[i],
                          c->perm + a, c->y + a, c->sq + a, e - a,
                          ck_page_at(job->col, shift, 0, a), scratch);
        }
    }
    job->status[t] = st;
}

/* The nonzeros of x_i (position i): the multiply-adds per entry of its
 * column */
static double ck_smo_col_nnz(const ck_smo_cols *c, int64_t i)
{
    const int64_t r = c->perm[i];
    int64_t k, nnz = 0;
    if (c->X->dense != NULL) {
        const double *xr = c->X->dense + r * c->X->n_cols;
        for (k = 0; k < c->X->n_cols; ++k)
            nnz += xr[k] != 0.0;
    } else {
        nnz = c->X->indptr[r + 1] - c->X->indptr[r];
    }
    return (double)nnz;
}

/* The cache's callback: entries [start, len) of col with Q[start .. len, i],
 * on the team when the range is long (the entries do not depend on the
 * pieces). */
static ck_status ck_smo_col_fill(void *ctx, int64_t i, ck_col col, int shift,
                                 int64_t start, int64_t len)
{
    ck_status status[CK_SMO_MAX_THREADS];
    ck_smo_col_job job;
    ck_smo_cols *c = (ck_smo_cols *)ctx;
    const double nnz = ck_smo_col_nnz(c, i);
    int t, nt;
    job.c = c;
    job.i = i;
    job.col = col;
    job.shift = shift;
    job.status = status;
    nt = ck_team_run(c->team, start, len, nnz + CK_COST_EXP,
                     ck_smo_col_piece_fn, &job);
    c->n_madds += nnz * (double)(len - start);
    for (t = 0; t < nt; ++t) {
        if (status[t] != CK_OK)
            return status[t];
    }
    return CK_OK;
}

/* ======================================================================== */
/* Solver                                                                   */
/* ======================================================================== */

/* Relative distance to a bound within which rho counts a variable as bounded. */
#define CK_RHO_AT_BOUND 1e-12

/* Repair a warm start: clip to the box (tolerating tiny violations) and
 * restore y^T alpha = 0 by moving mass within the bounds.
 *
 * A residual at rounding level (n eps sum(alpha), or below 1e-12 of the
 * largest bound) is left as it is: moving a variable at a bound by 1e-21
 * made it "free", and with no other free variable rho (LIBSVM's mean of
 * y G over the free ones) became its y G, an end of the interval of optimal
 * intercepts instead of LIBSVM's midpoint (a warm start at C = 1e-6 from the
 * solver's own optimum moved the intercept from -8e-7 to -1). Free
 * variables take the mass first, so that no variable leaves its bound when
 * a free one can absorb it; a variable that reaches a bound is set to it
 * exactly. */
static ck_status ck_smo_project(int64_t n, const double *y,
                                const double *upper, double *alpha)
{
    int64_t i;
    int pass;
    double r = 0.0, scale = 0.0, umax = 0.0;
    for (i = 0; i < n; ++i) {
        const double a = alpha[i], u = upper[i];
        const double slack = 1e-8 * u;
        if (!isfinite(a) || a < -slack || a > u + slack)
            return CK_ERR_ARG;
        alpha[i] = a < 0.0 ? 0.0 : (a > u ? u : a);
        umax = u > umax ? u : umax;
    }
    for (i = 0; i < n; ++i) {
        r += y[i] * alpha[i];
        scale += alpha[i];
    }
    if (fabs(r) > 1e-6 * (scale > 1.0 ? scale : 1.0))
        return CK_ERR_ARG; /* not (nearly) feasible */
    if (fabs(r) <= (double)n * DBL_EPSILON * scale || fabs(r) <= 1e-12 * umax)
        return CK_OK; /* rounding: see above */
    /* r > 0: decrease alpha_i with y_i = +1 or increase those with -1;
     * r < 0: the mirror image. Pass 0: free variables; pass 1: the others. */
    for (pass = 0; pass < 2; ++pass) {
        for (i = 0; i < n && r != 0.0; ++i) {
            double room, step;
            const int up = (r > 0.0) == (y[i] < 0.0); /* increase alpha_i? */
            const int is_free = alpha[i] > 0.0 && alpha[i] < upper[i];
            if (is_free != (pass == 0))
                continue;
            room = up ? upper[i] - alpha[i] : alpha[i];
            if (room <= 0.0)
                continue;
            step = fabs(r) < room ? fabs(r) : room;
            if (step == room)
                alpha[i] = up ? upper[i] : 0.0; /* exactly at the bound */
            else
                alpha[i] += up ? step : -step;
            r += (r > 0.0 ? -step : step);
            if (alpha[i] < 0.0)
                alpha[i] = 0.0;
            if (alpha[i] > upper[i])
                alpha[i] = upper[i];
        }
    }
    return CK_OK;
}

/* State of one solve, in the solver's permutation: position k holds the
 * original variable perm[k]; [0, active) is the active set. */
typedef struct {
    int64_t n, active;
    double tol;
    double *y, *upper, *alpha, *G, *G_bar, *QD, *sq;
    int64_t *perm;
    int64_t *pairs, n_pairs; /* transpositions of the current shrinking */
    double *sel_v, *sel_obj; /* scratch of the working-set selection */
    ck_fmajor fm;            /* feature-major copy of X in position order */
    ck_qcache cache;
    ck_smo_cols cols; /* the cache's callback context */
    ck_team team;
    ck_poll_fn poll; /* the caller's poll (Ctrl-C), or NULL */
    void *poll_ctx;
} ck_smo_state;

static void ck_smo_swap(ck_smo_state *s, int64_t a, int64_t b)
{
    if (a == b)
        return;
    CK_SWAP(double, s->y[a], s->y[b]);
    CK_SWAP(double, s->upper[a], s->upper[b]);
    CK_SWAP(double, s->alpha[a], s->alpha[b]);
    CK_SWAP(double, s->G[a], s->G[b]);
    CK_SWAP(double, s->G_bar[a], s->G_bar[b]);
    CK_SWAP(double, s->QD[a], s->QD[b]);
    CK_SWAP(double, s->sq[a], s->sq[b]);
    CK_SWAP(int64_t, s->perm[a], s->perm[b]);
    ck_fmajor_swap(&s->fm, a, b, s->perm[a], s->perm[b]);
    ck_qcache_swap_labels(&s->cache, a, b);
    s->pairs[2 * s->n_pairs] = a < b ? a : b;
    s->pairs[2 * s->n_pairs + 1] = a < b ? b : a;
    ++s->n_pairs;
}

static int ck_is_upper(const ck_smo_state *s, int64_t i)
{
    return s->alpha[i] >= s->upper[i];
}

static int ck_is_lower(const ck_smo_state *s, int64_t i)
{
    return s->alpha[i] <= 0.0;
}

/* y += a * x over [lo, hi) */
static void ck_axpy(int64_t lo, int64_t hi, double a,
                    const double *CK_RESTRICT x, double *CK_RESTRICT y)
{
    int64_t k;
    for (k = lo; k < hi; ++k)
        y[k] += a * x[k];
}

/* G[0 .. m) += Qi * dai + Qj * daj */
static void ck_grad_update(int64_t m, const double *CK_RESTRICT Qi, double dai,
                           const double *CK_RESTRICT Qj, double daj,
                           double *CK_RESTRICT G)
{
    int64_t k;
    for (k = 0; k < m; ++k)
        G[k] += Qi[k] * dai + Qj[k] * daj;
}

/* columns x, x2 (x2 for the gradient update only) walked page by page:
 * both have the same pages, so their segments coincide */
typedef struct {
    ck_col x, x2;
    int shift;
    double a, a2;
    double *y;
} ck_axpy_job;

static void ck_axpy_fn(void *ctx, int t, int64_t lo, int64_t hi)
{
    const ck_axpy_job *job = (const ck_axpy_job *)ctx;
    int64_t e;
    (void)t;
    for (; lo < hi; lo = e) {
        e = ck_page_end(lo, hi, job->shift, 0);
        ck_axpy(0, e - lo, job->a, ck_page_at(job->x, job->shift, 0, lo),
                job->y + lo);
    }
}

static void ck_grad_update_fn(void *ctx, int t, int64_t lo, int64_t hi)
{
    const ck_axpy_job *job = (const ck_axpy_job *)ctx;
    int64_t e;
    (void)t;
    for (; lo < hi; lo = e) {
        e = ck_page_end(lo, hi, job->shift, 0);
        ck_grad_update(e - lo, ck_page_at(job->x, job->shift, 0, lo), job->a,
                       ck_page_at(job->x2, job->shift, 0, lo), job->a2,
                       job->y + lo);
    }
}

/* y[lo .. hi) += a * x[lo .. hi) for a cached column x, on the team when
 * long */
static void ck_team_axpy(ck_smo_state *s, int64_t lo, int64_t hi, double a,
                         ck_col x, double *y)
{
    ck_axpy_job job;
    job.x = x;
    job.x2 = NULL;
    job.shift = s->cache.shift;
    job.a = a;
    job.a2 = 0.0;
    job.y = y;
    ck_team_run(&s->team, lo, hi, CK_COST_UPDATE, ck_axpy_fn, &job);
}

/* LIBSVM's reconstruct_gradient: the inactive part of G from G_bar and the
 * free variables (all of which are active). */
static ck_status ck_smo_reconstruct(ck_smo_state *s)
{
    const int64_t n = s->n, active = s->active;
    int64_t i, j, nr_free = 0, cols = 0;
    ck_status st;
    if (active == n)
        return CK_OK;
    for (j = active; j < n; ++j)
        s->G[j] = s->G_bar[j] - 1.0;
    for (j = 0; j < active; ++j)
        if (!ck_is_upper(s, j) && !ck_is_lower(s, j))
            ++nr_free;
    if ((double)nr_free * (double)n >
        2.0 * (double)active * (double)(n - active)) {
        const int shift = s->cache.shift;
        for (i = active; i < n; ++i) {
            ck_col Qi;
            double g = 0.0;
            int64_t a, e;
            /* O(n) kernel columns: the caller's poll as in the main loop */
            if ((++cols & 63) == 0 && ck_poll_stop(s->poll, s->poll_ctx))
                return CK_ERR_INTERRUPTED;
            st = ck_qcache_get(&s->cache, i, active, &Qi);
            if (st != CK_OK)
                return st;
            for (a = 0; a < active; a = e) { /* page by page, in order */
                const double *q = ck_page_at(Qi, shift, 0, a);
                e = ck_page_end(a, active, shift, 0);
                for (j = a; j < e; ++j)
                    if (!ck_is_upper(s, j) && !ck_is_lower(s, j))
                        g += s->alpha[j] * q[j - a];
            }
            s->G[i] += g;
        }
    } else {
        for (i = 0; i < active; ++i) {
            if (!ck_is_upper(s, i) && !ck_is_lower(s, i)) {
                ck_col Qi;
                if ((++cols & 63) == 0 && ck_poll_stop(s->poll, s->poll_ctx))
                    return CK_ERR_INTERRUPTED;
                st = ck_qcache_get(&s->cache, i, n, &Qi);
                if (st != CK_OK)
                    return st;
                ck_team_axpy(s, active, n, s->alpha[i], Qi, s->G);
            }
        }
    }
    return CK_OK;
}

static int ck_be_shrunk(const ck_smo_state *s, int64_t i, double Gmax1,
                        double Gmax2)
{
    if (ck_is_upper(s, i)) {
        if (s->y[i] > 0.0)
            return -s->G[i] > Gmax1;
        return -s->G[i] > Gmax2;
    }
    if (ck_is_lower(s, i)) {
        if (s->y[i] > 0.0)
            return s->G[i] > Gmax2;
        return s->G[i] > Gmax1;
    }
    return 0;
}

/* LIBSVM's do_shrinking (with its one-time unshrinking when the gap first
 * falls below 10 tol). */
static ck_status ck_smo_shrink(ck_smo_state *s, int *unshrunk)
{
    double Gmax1 = -INFINITY; /* max { -y_i G_i | i in I_up } */
    double Gmax2 = -INFINITY; /* max {  y_i G_i | i in I_low } */
    int64_t i;
    ck_status st;
    for (i = 0; i < s->active; ++i) {
        const double g = s->G[i];
        if (s->y[i] > 0.0) {
            if (!ck_is_upper(s, i) && -g >= Gmax1)
                Gmax1 = -g;
            if (!ck_is_lower(s, i) && g >= Gmax2)
                Gmax2 = g;
        } else {
            if (!ck_is_upper(s, i) && -g >= Gmax2)
                Gmax2 = -g;
            if (!ck_is_lower(s, i) && g >= Gmax1)
                Gmax1 = g;
        }
    }
    if (!*unshrunk && Gmax1 + Gmax2 <= 10.0 * s->tol) {
        *unshrunk = 1;
        st = ck_smo_reconstruct(s);
        if (st != CK_OK)
            return st;
        s->active = s->n;
    }
    s->n_pairs = 0;
    for (i = 0; i < s->active; ++i) {
        if (ck_be_shrunk(s, i, Gmax1, Gmax2)) {
            --s->active;
            while (s->active > i) {
                if (!ck_be_shrunk(s, s->active, Gmax1, Gmax2)) {
                    ck_smo_swap(s, i, s->active);
                    break;
                }
                --s->active;
            }
        }
    }
    ck_qcache_apply_swaps(&s->cache, s->pairs, s->n_pairs);
    s->n_pairs = 0;
    return CK_OK;
}

/* The membership and value passes of the working-set selection: branch-free
 * loops the compiler vectorises (its masked selects are exact; AVX2 and
 * AVX-512 clones by CK_CLONES).  The labels
 * are exactly +-1 (checked on entry), so LIBSVM's branches per variable fold
 * into sign products that are exact: -y G, y G and 2 y_i y_j Q_ij differ from
 * the branches' values by signs only.
 *
 * v[t] = -y_t G_t on I_up = {y > 0, alpha < C} u {y < 0, alpha > 0}, NaN
 * elsewhere (NaN compares false, so the scan below never picks it). */
CK_CLONES static void ck_smo_select_up(int64_t m, const double *CK_RESTRICT y,
                             const double *CK_RESTRICT G,
                             const double *CK_RESTRICT alpha,
                             const double *CK_RESTRICT upper, double *CK_RESTRICT v)
{
    int64_t t;
    for (t = 0; t < m; ++t) {
        const int pos = y[t] > 0.0;
        const int up = (pos & (alpha[t] < upper[t])) | (!pos & (alpha[t] > 0.0));
        const double val = -y[t] * G[t];
        v[t] = up ? val : NAN;
    }
}

/* v[t] = y_t G_t on I_low = {y > 0, alpha > 0} u {y < 0, alpha < C}, -inf
 * elsewhere; obj[t] = LIBSVM's obj_diff of the pair (i, t) when t is in I_low
 * and violating (Gmax + y_t G_t > 0), a value <= 0, else +1. */
CK_CLONES static void ck_smo_select_low(int64_t m, const double *CK_RESTRICT y,
                              const double *CK_RESTRICT G,
                              const double *CK_RESTRICT alpha,
                              const double *CK_RESTRICT upper,
                              const double *CK_RESTRICT QD,
                              const double *CK_RESTRICT Qi, double Gmax,
                              double QDi, double two_yi, double *CK_RESTRICT v,
                              double *CK_RESTRICT obj)
{
    int64_t t;
    for (t = 0; t < m; ++t) {
        /* membership as 0/1 doubles: GCC if-converts (and vectorises)
         * selects of doubles, not this combination of int masks */
        const double ok_pos = alpha[t] > 0.0 ? 1.0 : 0.0;
        const double ok_neg = alpha[t] < upper[t] ? 1.0 : 0.0;
        const double low = y[t] > 0.0 ? ok_pos : ok_neg;
        const double yG = y[t] * G[t];
        const double grad_diff = Gmax + yG;
        const double quad_coef = QDi + QD[t] - (two_yi * y[t]) * Qi[t];
        const double q = quad_coef > 0.0 ? quad_coef : CK_SMO_TAU;
        const double od = -(grad_diff * grad_diff) / q;
        const double viol = grad_diff > 0.0 ? low : 0.0;
        v[t] = low > 0.0 ? yG : -INFINITY;
        obj[t] = viol > 0.0 ? od : 1.0;
    }
}

/* The two passes of the selection on a piece [lo, hi), with the piece's
 * best kept per thread; ck_smo_select combines the pieces in index order
 * with the scans' own comparisons, so it finds what one scan over the
 * whole range finds (the last index among ties). */
typedef struct {
    ck_smo_state *s;
    ck_col Qi;
    double Gmax, QDi, two_yi;
    double val[CK_SMO_MAX_THREADS], val2[CK_SMO_MAX_THREADS];
    int64_t idx[CK_SMO_MAX_THREADS];
} ck_select_job;

static void ck_select_up_fn(void *ctx, int t, int64_t lo, int64_t hi)
{
    ck_select_job *job = (ck_select_job *)ctx;
    const ck_smo_state *s = job->s;
    const double *CK_RESTRICT v = s->sel_v;
    double Gmax = -INFINITY;
    int64_t k, ii = -1;
    ck_smo_select_up(hi - lo, s->y + lo, s->G + lo, s->alpha + lo,
                     s->upper + lo, s->sel_v + lo);
    for (k = lo; k < hi; ++k) {
        if (v[k] >= Gmax) {
            Gmax = v[k];
            ii = k;
        }
    }
    job->val[t] = Gmax;
    job->idx[t] = ii;
}

static void ck_select_low_fn(void *ctx, int t, int64_t lo, int64_t hi)
{
    ck_select_job *job = (ck_select_job *)ctx;
    const ck_smo_state *s = job->s;
    const double *CK_RESTRICT v = s->sel_v;
    const double *CK_RESTRICT obj = s->sel_obj;
    double Gmax2 = -INFINITY, obj_min = 0.5;
    const int shift = s->cache.shift;
    int64_t k, e, jj = -1;
    for (k = lo; k < hi; k = e) { /* Q_i page by page */
        e = ck_page_end(k, hi, shift, 0);
        ck_smo_select_low(e - k, s->y + k, s->G + k, s->alpha + k,
                          s->upper + k, s->QD + k,
                          ck_page_at(job->Qi, shift, 0, k), job->Gmax,
                          job->QDi, job->two_yi, s->sel_v + k,
                          s->sel_obj + k);
    }
    for (k = lo; k < hi; ++k) {
        Gmax2 = v[k] > Gmax2 ? v[k] : Gmax2;
        if (obj[k] <= obj_min) {
            obj_min = obj[k];
            jj = k;
        }
    }
    job->val[t] = obj_min;
    job->val2[t] = Gmax2;
    job->idx[t] = jj;
}

/* WSS2 over the active set.  Returns 1 when optimal there (gap < tol or
 * no admissible pair), else 0 with the pair in *out_i, *out_j.
 *
 * LIBSVM's single loop has four data-dependent branches per variable, whose
 * mispredictions made this a quarter of a partitioned ijcnn1 fit.  Here the
 * values come from the branch-free passes above and the scans keep one
 * branch, taken only for a new best.  The selected pair, ties included (the
 * last index wins), is LIBSVM's. */
static ck_status ck_smo_select(ck_smo_state *s, int64_t *out_i,
                               int64_t *out_j, int *optimal)
{
    const int64_t m = s->active;
    double Gmax = -INFINITY, Gmax2 = -INFINITY, obj_min = 0.5;
    int64_t ii = -1, jj = -1;
    int t, nt;
    ck_select_job job;
    ck_status st;

    job.s = s;
    /* i maximises -y_t G_t over I_up (the last index among ties) */
    nt = ck_team_run(&s->team, 0, m, CK_COST_SELECT, ck_select_up_fn, &job);
    for (t = 0; t < nt; ++t) {
        if (job.idx[t] >= 0 && job.val[t] >= Gmax) {
            Gmax = job.val[t];
            ii = job.idx[t];
        }
    }
    *out_i = ii;
    *out_j = -1;
    *optimal = 1;
    if (ii < 0) /* I_up is empty */
        return CK_OK;
    st = ck_qcache_get(&s->cache, ii, m, &job.Qi);
    if (st != CK_OK)
        return st;
    /* j: largest decrease of the objective (the smallest obj_diff, <= 0, so
     * the bound 1/2 admits every violating t and no other; the last index
     * among ties); Gmax2 = max y_t G_t over I_low */
    job.Gmax = Gmax;
    job.QDi = s->QD[ii];
    job.two_yi = 2.0 * s->y[ii];
    nt = ck_team_run(&s->team, 0, m, CK_COST_SELECT, ck_select_low_fn, &job);
    for (t = 0; t < nt; ++t) {
        Gmax2 = job.val2[t] > Gmax2 ? job.val2[t] : Gmax2;
        if (job.idx[t] >= 0 && job.val[t] <= obj_min) {
            obj_min = job.val[t];
            jj = job.idx[t];
        }
    }
    *optimal = jj < 0 || Gmax + Gmax2 < s->tol; /* LIBSVM's test: strictly below */
    *out_j = jj;
    return CK_OK;
}

ck_status ck_smo_solve(const ck_matrix *X, const double *y,
                       const double *upper, int kind, double gamma,
                       double coef0, double degree, double tol,
                       int64_t max_iter, double cache_bytes, int n_threads,
                       double *alpha, double *rho, double *objective,
                       int64_t *n_iter, int *converged)
{
    return ck_smo_solve_ex(X, y, upper, kind, gamma, coef0, degree, tol,
                           max_iter, cache_bytes, n_threads, alpha, rho,
                           objective, n_iter, converged, NULL);
}

ck_status ck_smo_solve_ex(const ck_matrix *X, const double *y,
                          const double *upper, int kind, double gamma,
                          double coef0, double degree, double tol,
                          int64_t max_iter, double cache_bytes, int n_threads,
                          double *alpha, double *rho, double *objective,
                          int64_t *n_iter, int *converged, ck_smo_opts *opts)
{
    ck_smo_state S;
    ck_smo_state *s = &S;
    ck_status st = CK_OK;
    int64_t i, n, capacity, budget, iter = 0, counter, warm = 0;
    ck_kparams kp;
    int done = 0, unshrunk = 0, fm_want = 0, given_grad = 0;
    double active_sum = 0.0; /* active variables summed over the steps */

    /* ---- validation ---- */
    if (X == NULL || alpha == NULL || rho == NULL || objective == NULL ||
        n_iter == NULL || converged == NULL)
        return CK_ERR_ARG;
    kp.kind = kind;
    kp.gamma = gamma;
    kp.coef0 = coef0;
    kp.degree = degree;
    kp.shift = 0.0;
    st = ck_check_problem(X, y, upper, &kp, tol, cache_bytes, 2, &capacity);
    if (st != CK_OK)
        return st;
    n = X->n_rows;
    if ((uint64_t)n > (uint64_t)(SIZE_MAX / (2 * sizeof(double))))
        return CK_ERR_ARG;
    /* the cache's budget in doubles: cache_bytes (at least two full
     * columns, checked above), less the feature-major copy below, never more
     * than the whole matrix */
    {
        double b = cache_bytes / (double)sizeof(double);
        const double full = (double)n * (double)n;
        /* Kernel columns from a feature-major copy of X kept in the
         * solver's permutation (ck_fmajor: contiguous axpys instead of
         * scattered dot products, bit for bit the same values; rows swapped
         * with the variables when shrinking) when it takes at most a
         * quarter of cache_bytes, never more than the whole n x n matrix
         * (+inf, or a budget far past the matrix, built copies of wide
         * sparse data tens of times the matrix's size, no faster), and
         * leaves two full columns; its bytes come out of the budget, so the
         * memory used stays within cache_bytes.  In float when that is
         * exact. */
        if (X->n_cols > 0) {
            const int use_float = ck_matrix_float_exact(X);
            const double fm_doubles =
                (double)n * (double)X->n_cols *
                (use_float ? 0.5 : 1.0);
            if (fm_doubles <= full && (isinf(b) || fm_doubles <= 0.25 * b) &&
                b - fm_doubles >= 2.0 * (double)n) {
                fm_want = use_float ? 2 : 1;
                b -= fm_doubles;
            }
        }
        budget = b >= full ? n * n : (int64_t)b;
        if (budget < 2 * n)
            budget = 2 * n;
        (void)capacity;
    }

    memset(s, 0, sizeof *s);
    ck_team_init(&s->team, n_threads, opts);
    s->poll = opts != NULL ? opts->poll : NULL;
    s->poll_ctx = opts != NULL ? opts->poll_ctx : NULL;
    s->n = n;
    s->active = n;
    s->tol = tol;
    s->y = (double *)malloc((size_t)n * sizeof(double));
    s->upper = (double *)malloc((size_t)n * sizeof(double));
    s->alpha = (double *)malloc((size_t)n * sizeof(double));
    s->G = (double *)malloc((size_t)n * sizeof(double));
    s->G_bar = (double *)malloc((size_t)n * sizeof(double));
    s->QD = (double *)malloc((size_t)n * sizeof(double));
    s->sq = (double *)malloc((size_t)n * sizeof(double));
    s->perm = (int64_t *)malloc((size_t)n * sizeof(int64_t));
    if (ck_csr_scratch(X, s->team.T)) /* CSR scratch, one per thread */
        s->cols.work = (double *)calloc(
            (size_t)s->team.T * (size_t)X->n_cols, sizeof(double));
    s->pairs = (int64_t *)malloc((size_t)n * 2 * sizeof(int64_t));
    s->sel_v = (double *)malloc((size_t)n * sizeof(double));
    s->sel_obj = (double *)malloc((size_t)n * sizeof(double));
    if (s->sel_v == NULL || s->sel_obj == NULL || s->y == NULL || s->upper == NULL || s->alpha == NULL ||
        s->G == NULL || s->G_bar == NULL || s->QD == NULL || s->sq == NULL ||
        s->perm == NULL || s->pairs == NULL ||
        (ck_csr_scratch(X, s->team.T) && s->cols.work == NULL)) {
        st = CK_ERR_NOMEM;
        goto cleanup;
    }

    /* ---- warm start (alpha untouched when it is rejected) ---- */
    memcpy(s->alpha, alpha, (size_t)n * sizeof(double));
    st = ck_smo_project(n, y, upper, s->alpha);
    if (st != CK_OK)
        goto cleanup;

    memcpy(s->y, y, (size_t)n * sizeof(double));
    memcpy(s->upper, upper, (size_t)n * sizeof(double));
    for (i = 0; i < n; ++i)
        s->perm[i] = i;

    /* squared norms with the same sums as the kernel rows, so that the RBF
     * diagonal is exactly exp(0) = 1 */
    ck_matrix_sqnorms(X, s->sq);
    st = ck_kernel_diag(&kp, s->sq, n, s->QD);
    if (st != CK_OK)
        goto cleanup;

    s->cols.X = X;
    s->cols.kp = kp;
    s->cols.perm = s->perm;
    s->cols.y = s->y;
    s->cols.sq = s->sq;
    /* an optimisation only: without memory for it, the rows of X serve */
    if (fm_want &&
        ck_fmajor_init(&s->fm, X, s->perm, n, fm_want == 2) != CK_OK)
        ck_fmajor_free(&s->fm);
    s->cols.fm = ck_fmajor_built(&s->fm) ? &s->fm : NULL;
    s->cols.team = &s->team;
    st = ck_qcache_init(&s->cache, n, n, budget,
                        opts != NULL ? opts->page_doubles : 0,
                        ck_smo_col_fill, &s->cols);
    if (st != CK_OK)
        goto cleanup;

    /* ---- gradient G = Q alpha - e and G_bar = sum_{alpha_i = C_i} C_i Q_i:
     * the caller's G when given for this alpha (the permutation is still the
     * identity), then only the columns of the variables at their upper bound */
    if (opts != NULL && opts->grad_in != NULL) {
        for (i = 0; i < n; ++i)
            if (!isfinite(opts->grad_in[i])) {
                st = CK_ERR_ARG;
                goto cleanup;
            }
        if (memcmp(s->alpha, alpha, (size_t)n * sizeof(double)) != 0)
            given_grad = 0; /* the repair moved alpha: G is computed */
        else
            given_grad = 1;
    }
    for (i = 0; i < n; ++i) {
        s->G[i] = given_grad ? opts->grad_in[i] : -1.0;
        s->G_bar[i] = 0.0;
    }
    for (i = 0; i < n; ++i) {
        if (given_grad ? ck_is_upper(s, i) : !ck_is_lower(s, i)) {
            ck_col Qi;
            if ((++warm & 63) == 0 && opts != NULL &&
                ck_poll_stop(opts->poll, opts->poll_ctx)) {
                st = CK_ERR_INTERRUPTED;
                goto cleanup;
            }
            st = ck_qcache_get(&s->cache, i, n, &Qi);
            if (st != CK_OK)
                goto cleanup;
            if (!given_grad)
                ck_team_axpy(s, 0, n, s->alpha[i], Qi, s->G);
            if (ck_is_upper(s, i))
                ck_team_axpy(s, 0, n, s->upper[i], Qi, s->G_bar);
        }
    }

    /* ---- main loop (LIBSVM's Solver::Solve with shrinking) ---- */
    *converged = 0;
    counter = (n < 1000 ? n : 1000) + 1;
    for (;;) {
        int64_t ii, jj;
        int optimal;
        ck_col Qi, Qj;
        double Qij; /* Q[ii, jj] */

        /* the caller's poll (Ctrl-C), from this calling thread */
        if ((iter & 63) == 0 && opts != NULL &&
            ck_poll_stop(opts->poll, opts->poll_ctx)) {
            st = CK_ERR_INTERRUPTED;
            goto cleanup;
        }
        if (--counter == 0) {
            counter = n < 1000 ? n : 1000;
            st = ck_smo_shrink(s, &unshrunk);
            if (st != CK_OK)
                goto cleanup;
        }
        st = ck_smo_select(s, &ii, &jj, &optimal);
        if (st != CK_OK)
            goto cleanup;
        if (optimal) {
            /* optimal on the active set: check all variables */
            st = ck_smo_reconstruct(s);
            if (st != CK_OK)
                goto cleanup;
            s->active = n;
            st = ck_smo_select(s, &ii, &jj, &optimal);
            if (st != CK_OK)
                goto cleanup;
            if (optimal) {
                *converged = 1;
                break;
            }
            counter = 1; /* shrink at the next iteration */
        }
        if (max_iter > 0 && iter >= max_iter)
            break;

        /* column jj (ii stays cached: it was used last, and the budget holds
         * two full columns) */
        st = ck_qcache_get(&s->cache, jj, s->active, &Qj);
        if (st != CK_OK)
            goto cleanup;
        st = ck_qcache_get(&s->cache, ii, s->active, &Qi);
        if (st != CK_OK)
            goto cleanup;
        Qij = *ck_page_at(Qi, s->cache.shift, 0, jj);

        /* ---- analytic two-variable update (LIBSVM) ---- */
        {
            double *a = s->alpha;
            const double *G = s->G, *QD = s->QD;
            const double Ci = s->upper[ii], Cj = s->upper[jj];
            const double old_ai = a[ii], old_aj = a[jj];
            const int ui = ck_is_upper(s, ii), uj = ck_is_upper(s, jj);
            double ai = old_ai, aj = old_aj, dai, daj;
            if (s->y[ii] != s->y[jj]) {
                double quad_coef = QD[ii] + QD[jj] + 2.0 * Qij;
                double delta, diff;
                if (quad_coef <= 0.0)
                    quad_coef = CK_SMO_TAU;
                delta = (-G[ii] - G[jj]) / quad_coef;
                diff = ai - aj;
                ai += delta;
                aj += delta;
                if (diff > 0.0) {
                    if (aj < 0.0) {
                        aj = 0.0;
                        ai = diff;
                    }
                } else {
                    if (ai < 0.0) {
                        ai = 0.0;
                        aj = -diff;
                    }
                }
                if (diff > Ci - Cj) {
                    if (ai > Ci) {
                        ai = Ci;
                        aj = Ci - diff;
                    }
                } else {
                    if (aj > Cj) {
                        aj = Cj;
                        ai = Cj + diff;
                    }
                }
            } else {
                double quad_coef = QD[ii] + QD[jj] - 2.0 * Qij;
                double delta, sum;
                if (quad_coef <= 0.0)
                    quad_coef = CK_SMO_TAU;
                delta = (G[ii] - G[jj]) / quad_coef;
                sum = ai + aj;
                ai -= delta;
                aj += delta;
                if (sum > Ci) {
                    if (ai > Ci) {
                        ai = Ci;
                        aj = sum - Ci;
                    }
                } else {
                    if (aj < 0.0) {
                        aj = 0.0;
                        ai = sum;
                    }
                }
                if (sum > Cj) {
                    if (aj > Cj) {
                        aj = Cj;
                        ai = sum - Cj;
                    }
                } else {
                    if (ai < 0.0) {
                        ai = 0.0;
                        aj = sum;
                    }
                }
            }
            /* LIBSVM's step can leave one variable a rounding above its bound
             * (aj = Ci - diff with Ci >> Cj: weights 1e5 and 1e-5), and the
             * solver's own answer was then refused as a warm start: each
             * variable stays in its box */
            ai = ai < 0.0 ? 0.0 : (ai > Ci ? Ci : ai);
            aj = aj < 0.0 ? 0.0 : (aj > Cj ? Cj : aj);
            a[ii] = ai;
            a[jj] = aj;
            dai = ai - old_ai;
            daj = aj - old_aj;
            {
                ck_axpy_job job;
                job.x = Qi;
                job.a = dai;
                job.x2 = Qj;
                job.a2 = daj;
                job.shift = s->cache.shift;
                job.y = s->G;
                ck_team_run(&s->team, 0, s->active, CK_COST_UPDATE, ck_grad_update_fn, &job);
            }

            /* G_bar: full columns of the variables whose upper-bound
             * status changed (both hits: no eviction, Qi/Qj stay valid) */
            if (ui != ck_is_upper(s, ii)) {
                st = ck_qcache_get(&s->cache, ii, n, &Qi);
                if (st != CK_OK)
                    goto cleanup;
                ck_team_axpy(s, 0, n, ui ? -Ci : Ci, Qi, s->G_bar);
            }
            if (uj != ck_is_upper(s, jj)) {
                st = ck_qcache_get(&s->cache, jj, n, &Qj);
                if (st != CK_OK)
                    goto cleanup;
                ck_team_axpy(s, 0, n, uj ? -Cj : Cj, Qj, s->G_bar);
            }
        }
        ++iter;
        active_sum += s->active;
    }
    /* the whole gradient (also after max_iter) for rho and the objective */
    st = ck_smo_reconstruct(s);
    if (st != CK_OK)
        goto cleanup;
    s->active = n;
    done = 1;

cleanup:
    if (done) {
        /* ---- rho (LIBSVM calculate_rho) and objective ---- */
        double ub = INFINITY, lb = -INFINITY, sum_free = 0.0, obj = 0.0;
        int64_t nr_free = 0;
        for (i = 0; i < n; ++i) {
            const double yG = s->y[i] * s->G[i];
            /* a variable within CK_RHO_AT_BOUND * C of a bound is at it: LIBSVM's
             * update can leave one at C - 1 ulp (alpha_j = total - C_i), and
             * counted as free its y G alone became rho when no other variable
             * was free, an end of the interval of optimal intercepts instead
             * of its midpoint (a warm start at C = 0.01: intercept -0.64 for
             * LIBSVM's -0.008, every sample predicted as one class) */
            const double near = CK_RHO_AT_BOUND * s->upper[i];
            if (s->alpha[i] >= s->upper[i] - near) {
                if (s->y[i] < 0.0)
                    ub = yG < ub ? yG : ub;
                else
                    lb = yG > lb ? yG : lb;
            } else if (s->alpha[i] <= near) {
                if (s->y[i] > 0.0)
                    ub = yG < ub ? yG : ub;
                else
                    lb = yG > lb ? yG : lb;
            } else {
                ++nr_free;
                sum_free += yG;
            }
            obj += s->alpha[i] * (s->G[i] - 1.0);
        }
        if (nr_free > 0)
            *rho = sum_free / (double)nr_free;
        else if (isinf(ub) && isinf(lb))
            *rho = 0.0;
        else if (isinf(ub))
            *rho = lb;
        else if (isinf(lb))
            *rho = ub;
        else
            *rho = 0.5 * (ub + lb);
        *objective = 0.5 * obj;
        *n_iter = iter;
        for (i = 0; i < n; ++i)
            alpha[s->perm[i]] = s->alpha[i];
        if (opts != NULL && opts->grad_out != NULL)
            for (i = 0; i < n; ++i)
                opts->grad_out[s->perm[i]] = s->G[i];
    }
    if (opts != NULL) {
        opts->threads_used = s->team.used;
        opts->regions = s->team.regions;
        opts->region_seconds = s->team.wall;
        opts->wait_seconds = s->team.wait;
        opts->collapses = s->team.collapses;
        opts->columns = s->cache.n_computed;
        opts->column_entries = s->cache.n_entries;
        opts->column_madds = s->cols.n_madds;
        opts->column_seconds = s->cache.seconds;
        opts->active_sum = active_sum;
        opts->feature_major = s->fm.xf != NULL ? 4 : s->fm.xt != NULL ? 8 : 0;
        if (s->cache.n_pages > 0) {
            opts->page_doubles = s->cache.page;
            opts->pool_bytes = (double)s->cache.n_made *
                               (double)s->cache.page * sizeof(double);
        }
    }
    ck_qcache_free(&s->cache);
    free(s->y);
    free(s->upper);
    free(s->alpha);
    free(s->G);
    free(s->G_bar);
    free(s->QD);
    free(s->sq);
    free(s->perm);
    free(s->cols.work);
    free(s->pairs);
    free(s->sel_v);
    free(s->sel_obj);
    ck_fmajor_free(&s->fm);
    return st;
}
