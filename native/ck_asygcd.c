/*
 * ck_asygcd.c -- asynchronous greedy coordinate descent (Asy-GCD) for the
 * binary SVM dual WITHOUT bias (thesis ch. 4, eq. 4.9, Algorithms 13-14).
 *
 * Plain C99 (+ optional OpenMP); no Python.h.  See cakernels.h for the
 * contract.  Outline:
 *   - the variables are split into blocks (block[i] in 0..n_threads-1); the
 *     OpenMP thread t owns the blocks b with b % team_size == t (normally
 *     exactly block t) and repeatedly picks, among its own variables, the
 *     one with the largest |projected gradient| (greedy, Asy-GCD) or a
 *     random one (PSCD, per-thread xorshift64* generator);
 *   - one-variable Newton step delta = clip(a_i - g_i / Q_ii, 0, C_i) - a_i
 *     (eq. 4.10; Q_ii <= 0 is replaced by tau = 1e-12 as in LIBSVM);
 *   - the gradient g = Q a - e is shared as in Algorithm 14, but every
 *     entry g_j is written by one thread only, the owner of variable j
 *     ("owner computes"): a step (i, delta) is published once in a
 *     lock-free log (a ring buffer), and every thread applies the logged
 *     steps, in log order, to the entries of g it owns,
 *     g[S_t] += delta * Q[S_t, i].  This replaces the per-entry atomic adds
 *     of Algorithm 14 (see "Deviation" below);
 *   - every thread keeps its own LRU cache of the slices Q[S_t, i] it needs
 *     (ck_qcache.c, the SMO's paged cache; every thread's budget holds the
 *     same number of full-length slices, so the budget splits in
 *     proportion to |S_t|), so a kernel column is computed by all threads
 *     together, each its own slice, in parallel;
 *   - the per-step O(|S_t|) loops (the greedy scan, on two +-1 sign arrays
 *     so that it vectorises, and the gradient axpy) are compiled for
 *     AVX-512F / AVX2 / baseline and picked at load time;
 *   - optional shrinking (LIBLINEAR's rule on the thread's own variables,
 *     LIBSVM's swaps, variable-length slices, G_bar and gradient
 *     reconstruction; see "Shrinking" below) and an optional kernel shift
 *     (Q + shift * y y^T: a regularised intercept);
 *   - a thread stops when its own variables satisfy the KKT conditions
 *     within tol and it has applied every logged step; the solve ends when
 *     all threads are in that state at the same log position (then no
 *     thread can make another step), or after max_iter steps.
 *
 * Deviations from Algorithm 14.
 *
 * 1. Owner computes instead of atomic adds on one shared g: with the
 * atomic version every step costs n atomic read-modify-writes (a locked
 * compare-and-swap loop per entry on x86) on cache lines that bounce
 * between the cores; measured here it made 2 threads no faster than 1.
 * Owner-computes performs the same updates with plain vectorised stores on
 * thread-private memory.  The iteration is still asynchronous: a thread
 * selects with the steps it has applied so far, i.e. with a gradient that
 * may miss up to D steps of the others -- the bounded-delay inconsistent
 * read that the convergence analysis of Asy-GCD (Theorem 4.1) assumes.
 * The delay bound D scales with the problem: ceil(n / 8), at least 8 per
 * thread and at most the log's capacity of 4,096 (a fixed 4,096 let a
 * thread of a 400-variable problem run ten sweeps ahead of a descheduled
 * peer, and the stale steps cost up to 6x the updates; the theorem's
 * T(T+1) <= O(sqrt(n)) made a thread of 20,000 variables wait for a peer
 * busy computing kernel slices, on idle cores).  At the end every thread has applied every step, so g is
 * Q a - e up to rounding, with no stale entries.  A thread applies its own
 * step at once (else a step of another thread still in flight holds it
 * back and the thread steps the same variable again from the same
 * gradient), and drains only the steps published when it starts draining
 * (else a thread that applies the others' steps no faster than they take
 * them never gets to step: the threads took turns of ~10^4 steps).
 *
 * 2. A thread steps only when its largest violation is at least
 * CK_AGCD_RHO = 0.5 times the largest one the team published (each thread
 * publishes its own after every scan); otherwise it keeps applying the
 * others' steps.  Algorithm 14 lets every thread step on its own block
 * whatever the others' violations; on a strongly coupled kernel (a9a,
 * gamma = 0.05: K >= 0.25 everywhere) one block then often holds all the
 * large violations, and half of the steps went to the other block's small
 * ones (a9a, 2 threads, even with every step consistent: 75-108k updates
 * and 5.4-6.1 s; with the rule 42-61k updates and 3.9-4.8 s, where serial
 * GCD makes 63.6k; rho = 0.8 was no better on ijcnn1).  The thread with
 * the largest violation always qualifies, so the team never stalls while
 * it runs; when that thread is descheduled (more threads than free cores)
 * the others would wait for it, so the wait is bounded: a thread that sees
 * no new step in the log for CK_AGCD_PATIENCE polls (its spins and then
 * CK_AGCD_PATIENCE_SLEEPS sleeps of the back-off, about 1.3 ms) steps
 * anyway.  Stepping right after the spins (no sleep) made the waiting
 * thread take ~10^4 forced steps on its own block's small violations while
 * its peer was descheduled, 2.5-4x the updates of one thread (a9a, C = 1,
 * gamma = 0.05, 10,000 rows, one other process on the 2 cores); sleeping
 * first gives the core to the descheduled peer, and ~20 forced steps remain.
 *
 * 3. Waiting is bounded and gives the core away.  A thread with nothing to
 * do (idle near the end, behind the delay bound, or held by the stepping
 * rule) polls CK_AGCD_SPIN times (behind the delay bound: polls while the
 * slowest peer's cursor does not move), then sleeps with an exponential backoff
 * from 20 us to 250 us: with more threads than free cores, a spinning waiter
 * took the core its descheduled peer needed, and sched_yield gave it to a
 * busy process for a whole time slice.
 *
 * 4. The team collapses to one thread when its threads keep waiting.  A
 * team with a descheduled member advances at the speed of its slowest
 * thread (the delay bound, the stepping rule and the final test all wait
 * for it): 400 variables on 2 threads while two other processes kept both
 * cores busy took 24-52 ms against 2-7 ms for one thread.  When a thread
 * has slept behind the delay bound (a step to take, a peer that does not
 * apply the log) for more than a quarter of the solve and 2 ms, the team
 * stops claiming steps, applies every step taken, and one thread finishes
 * the solve from the team's alpha and gradient (its own cache, cold).  On
 * a machine with free cores the waits are microseconds and this never
 * happens; ck_agcd_opts.collapsed reports it
 * (benchmarks/bench_contention.py).
 *
 * 5. The team also collapses when the OS does not run it: a thread whose
 * CPU time (CLOCK_THREAD_CPUTIME_ID) stays below CK_AGCD_SHARE_MIN = 0.8 of
 * its waking wall time (its own sleeps in the waits excluded) in
 * CK_AGCD_SHARE_WINDOWS = 3 consecutive windows of >= 30 ms, and for at
 * least CK_AGCD_SHARE_STREAK = a tenth of the solve so far, shares its core
 * with another runnable thread.  With one other process on 2 cores (three
 * runnable threads, ~2/3 of a core each) the team never stalls long enough
 * for deviation 4, but while one thread is descheduled the other steps up
 * to the delay bound ahead on its own block's violations, which on a
 * strongly coupled kernel cost 2-4x the updates of one thread (a9a, C = 1,
 * gamma = 0.05, 10,000 rows: 1.5-1.8x the 1-thread time; collapsed after
 * ~0.1 s: 0.9-1.3x).  Three windows let a transient (OpenBLAS threads spin
 * ~0.1 s after a call) pass, the tenth a longer burst in a long solve (a
 * second of another program in a minute's solve would otherwise leave it on
 * one thread for the rest); on a machine with free cores the whole solve is
 * the team's.  The test is off where the thread CPU clock is missing.
 *
 * 6. The greedy choice is by LIBLINEAR's projected gradient (g inside the
 * box, min(g, 0) at 0, max(g, 0) at C: ck_agcd_pg, the stopping test's
 * measure), not by equation 4.11's |alpha - P_[0,C](alpha - g)|, which caps
 * it by the distance to the bound the step moves towards.  The two choose
 * the same variable unless the step of eq. 4.11's choice would be clipped:
 * a variable 0.2 from its bound with |g| = 3 is chosen here over one with
 * |g| = 1.0001 in the open box (a three-variable warm start).  On 150 rows,
 * one thread without shrinking, this took 324 updates against a literal
 * Algorithm 13's 325, both stopping within tol; the counts differ most where
 * many steps are clipped (five problems of 150-250 rows, one thread: 0.15x
 * to 1.1x the literal rule's updates, 198 against 1,308 for a linear kernel
 * at C = 0.1, where eq. 4.11's cap makes the variables look alike).
 *
 * 7. PSCD (selection = random) draws one of the thread's active variables
 * uniformly, but steps, and counts an update, only when the draw violates
 * the optimality conditions by more than tol; otherwise it draws again
 * (after the same scan for the thread's largest violation that greedy
 * selection does, which the stopping test needs).  The chapter's PSCD
 * updates every draw: near the optimum almost every one is a step of nearly
 * 0 that still costs a kernel slice.  This PSCD is therefore a stronger
 * baseline than the chapter's (a single violator among 2,000 variables at
 * the optimum takes 1 update here, about 2,000 draws there), and its update
 * counts are not the chapter's.
 *
 * Shrinking.  A thread keeps its active variables in the prefix [0, na)
 * of its arrays: a shrink swaps the variables it drops behind them (the
 * per-variable arrays, the feature-major copy and the entries of every
 * cached slice, as LIBSVM's swap_index), so the scan and the axpys run
 * over contiguous memory, and slices are computed and cached at the
 * active length (a budget then holds more of them).  The first version
 * kept an index list instead: its loops gathered, slices stayed full
 * length, and with two threads it was slower than no shrinking (ijcnn1,
 * 200 MB: 23.4 s against 13.4 s).  Three rules of the team matter as much:
 *   - a thread shrinks every 1000 steps it APPLIES (the others' included),
 *     not only its own: a thread whose block is nearly optimal steps
 *     rarely and otherwise applied every step of the others to all its
 *     variables; the interval doubles after each of its rebuilds (on a9a
 *     two threads otherwise rebuilt 15 times each);
 *   - a thread whose active set is optimal waits, applying the others'
 *     steps to its active set, until every thread is optimal on its own,
 *     and only then rebuilds (besides LIBSVM's one early rebuild at 10 tol):
 *     rebuilding as soon as its own were optimal made 9-11 rebuilds per
 *     thread on ijcnn1, each a pass over the support vectors' slices;
 *   - a rebuild counts as progress for the delay bound (ck_agcd_beat, as a
 *     slice computation does): the peer waiting for this thread's cursor
 *     polls on instead of sleeping towards deviation 4's collapse (a
 *     rebuild takes ~0.1 s on ijcnn1; while threads rebuilt at full length
 *     and shrank only after their own steps, every ijcnn1 fit collapsed);
 * and LIBSVM's G_bar makes a rebuild cost the free support vectors'
 * slices only (a9a, C = 1: 844 of 11,572 support vectors are free).
 * Measured (benchmarks/README.md): ijcnn1 2 threads 2-4.5x faster than
 * without shrinking; a9a 0.8-2.0x the time of none (its rebuilds keep
 * finding violators among the dropped variables of a coupled kernel).
 */
#include "ck_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#if defined(__unix__) || defined(__APPLE__)
#define CK_AGCD_HAVE_SLEEP 1 /* nanosleep */
#endif
#endif

#define CK_AGCD_TAU 1e-12
#define CK_AGCD_LOG CK_AGCD_LOG_CAPACITY /* log capacity (power of two) */
typedef char ck_agcd_log_is_pow2[(CK_AGCD_LOG & (CK_AGCD_LOG - 1)) == 0 ? 1 : -1];
/* waiting (deviation 3): polls before sleeping, and the polls without a new
 * step after which a thread steps against the stepping rule */
#define CK_AGCD_SPIN 512
#ifndef CK_AGCD_PATIENCE_SLEEPS
#define CK_AGCD_PATIENCE_SLEEPS 8
#endif
#define CK_AGCD_PATIENCE (CK_AGCD_SPIN + CK_AGCD_PATIENCE_SLEEPS)
#define CK_AGCD_SLEEP_MIN_NS 20000L
#define CK_AGCD_SLEEP_MAX_NS 250000L
#define CK_AGCD_RHO 0.5  /* step only with >= RHO x the team's top violation */

/* values of the shared stop flag */
#define CK_AGCD_RUN 0
#define CK_AGCD_DONE 1    /* every thread optimal and up to date */
#define CK_AGCD_MAXITER 2 /* max_iter steps claimed                */
#define CK_AGCD_ERROR 3   /* a thread failed (status in err)        */
#define CK_AGCD_COLLAPSE 4 /* the team hands over to one thread      */
/* set in the log head when the team collapses: later claims are refused */
#define CK_AGCD_COLLAPSE_BIT ((int64_t)1 << 62)
/* deviation 5: collapse when a thread ran for less than this share of its
 * wall time (not counting its own sleeps) over a window of at least
 * CK_AGCD_SHARE_WINDOW_S seconds, tested every CK_AGCD_SHARE_EVERY steps */
#define CK_AGCD_SHARE_MIN 0.8
#define CK_AGCD_SHARE_WINDOW_S 0.03
#define CK_AGCD_SHARE_WINDOWS 3
#define CK_AGCD_SHARE_STREAK 0.1
#define CK_AGCD_SHARE_EVERY 64
/* collapse when a thread has slept, waiting for the others, for more than
 * this share of the solve's time, and at least this many seconds */
#define CK_AGCD_COLLAPSE_SHARE 0.25
#define CK_AGCD_COLLAPSE_MIN_S 0.002

/* ======================================================================== */
/* Problem and workers                                                      */
/* ======================================================================== */

typedef struct {
    const ck_matrix *X;
    ck_kparams kp;
    const double *y, *sq; /* labels, |x_i|^2 (all n)                  */
    const double *upper;  /* the bounds C_i (all n)                    */
} ck_agcd_problem;

/* One thread's state: its variables S_t and everything only it writes.
 * Positions 0 .. m-1 are the thread's variables in its own order; with
 * shrinking the active ones are the prefix [0, na) (LIBSVM's shrinking by
 * swaps: every per-variable array below, the feature-major copy and the
 * entries of the cached slices exchange two positions together), so that
 * the greedy scan and the gradient updates run over contiguous memory. */
typedef struct {
    const ck_agcd_problem *p;
    int64_t m;            /* |S_t|                                       */
    int64_t *rows;        /* position -> variable (row of X)             */
    double *ry, *rsq;     /* y and |x|^2 by position                     */
    double *a, *u, *qd;   /* alpha, upper bound and Q_jj by position     */
    double *s1, *s2;      /* signs of the projected gradient (see scan)  */
    double *g;            /* the owned part of the gradient              */
    double *gbar;         /* with shrinking, LIBSVM's G_bar: sum of      */
                          /* C_i Q[S_t, i] over the variables i at their */
                          /* upper bound (all n), by position; or NULL   */
    double *work;         /* n_cols zeros (CSR scratch)                  */
    double *alpha_all;    /* alpha of all n variables, as of the cursor  */
    int64_t na, since_shrink; /* the active prefix; steps since a shrink */
    int64_t *pairs, n_pairs;  /* the swaps (a < b) of the current shrink */
    double *scratch;      /* m doubles: the shrunk entries of a slice    */
    int unshrunk;
    int64_t *beat;        /* the thread's heartbeat (ck_agcd_beat)       */
    int64_t capacity;     /* full-length slices the budget holds         */
    ck_qcache cache;      /* the slices Q[S_t, i], keyed by variable i   */
    ck_fmajor fm;         /* feature-major copy of S_t's rows, or none   */
    uint64_t rng;
    /* counters for ck_asygcd_solve_ex (see ck_agcd_opts), besides the
     * cache's: slices computed for the un-shrinking, outside the cache */
    int time_slices;
    int64_t n_slices;
    double slice_seconds;
    int64_t n_rebuilds;   /* gradient rebuilds (un-shrinkings)          */
    double active_sum;    /* active variables at its steps, summed      */
    double blocked; /* seconds spent asleep behind the delay bound */
    /* the CPU share test (deviation 5): seconds asleep in waits, and the
     * thread CPU time, wall time and sleep of the current window */
    double slept, win_cpu, win_wall, win_slept;
    int64_t since_share;
    int starved; /* consecutive windows below CK_AGCD_SHARE_MIN */
    double starved_since; /* wall time at the start of those windows */
} ck_agcd_worker;

static void ck_agcd_worker_free(ck_agcd_worker *w)
{
    free(w->rows);
    free(w->ry);
    free(w->rsq);
    free(w->a);
    free(w->u);
    free(w->qd);
    free(w->s1);
    free(w->s2);
    free(w->g);
    free(w->gbar);
    free(w->work);
    free(w->alpha_all);
    free(w->pairs);
    free(w->scratch);
    ck_qcache_free(&w->cache);
    ck_fmajor_free(&w->fm);
    memset(w, 0, sizeof *w);
}

/* CPU seconds of the calling thread, or -1 where there is no such clock
 * (then the CPU share test of deviation 5 is off). */
static double ck_agcd_thread_cpu(void)
{
#if defined(CK_AGCD_HAVE_SLEEP) && defined(CLOCK_THREAD_CPUTIME_ID)
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif
    return -1.0;
}

/* Entries [start, end) of the slice Q[S_t, i] (positions of the worker's
 * variables) into the page table col, entry k at ck_page_at(col, shift,
 * base, k): from the feature-major copy, else by rows of X. */
static ck_status ck_agcd_fill_at(const ck_agcd_worker *w, int64_t i,
                                 ck_col col, int shift, int64_t base,
                                 int64_t start, int64_t end)
{
    const ck_agcd_problem *p = w->p;
    ck_status st = CK_OK;
    int64_t e;
    if (ck_fmajor_built(&w->fm))
        return ck_q_range_fmajor(p->X, &w->fm, &p->kp, i, p->y[i], p->sq[i],
                                 w->ry, w->rsq, start, end, col, shift, base);
    for (; start < end && st == CK_OK; start = e) {
        e = ck_page_end(start, end, shift, base);
        st = ck_q_row(p->X, &p->kp, i, p->y[i], p->sq[i], w->rows + start,
                      w->ry + start, w->rsq + start, e - start,
                      ck_page_at(col, shift, base, start), w->work);
    }
    return st;
}

/* The thread is alive and working (a kernel slice, a column of a gradient
 * rebuild): a peer waiting for its cursor at the delay bound polls on
 * instead of sleeping and counting towards the collapse (deviation 4). */
static void ck_agcd_beat(const ck_agcd_worker *w)
{
    if (w->beat != NULL) {
#ifdef _OPENMP
#pragma omp atomic
#endif
        *w->beat += 1;
    }
}

/* The cache's callback (ck_qcache): the worker computes its slices. */
static ck_status ck_agcd_fill(void *ctx, int64_t i, ck_col col, int shift,
                              int64_t start, int64_t end)
{
    const ck_agcd_worker *w = (const ck_agcd_worker *)ctx;
    ck_agcd_beat(w);
    return ck_agcd_fill_at(w, i, col, shift, 0, start, end);
}

/* Projected gradient of a variable (0 when its KKT conditions hold). */
static double ck_agcd_pg(double a, double g, double u)
{
    if (a <= 0.0)
        return g < 0.0 ? g : 0.0;
    if (a >= u)
        return g > 0.0 ? g : 0.0;
    return g;
}

/* |projected gradient| = max(s1 * g, s2 * g, 0) with signs that depend on
 * where alpha is: (s1, s2) = (-1, -1) at 0 (only g < 0 violates), (1, 1)
 * at the upper bound (only g > 0), (1, -1) in between (|g|).  The worker
 * keeps the two signs of each of its variables, so the scan is three
 * loads, two multiplications by +-1 (exact) and two maxima per variable. */
static void ck_agcd_signs(double a, double u, double *s1, double *s2)
{
    if (a <= 0.0) {
        *s1 = -1.0;
        *s2 = -1.0;
    } else if (a >= u) {
        *s1 = 1.0;
        *s2 = 1.0;
    } else {
        *s1 = 1.0;
        *s2 = -1.0;
    }
}

#define CK_AGCD_CHUNK 512

/* The two O(|S_t|) loops of every step (scan and axpy) are compiled for
 * AVX-512F, AVX2 and the baseline ISA and picked at load time (CK_CLONES,
 * ck_internal.h).  Same operations in the same order (no FMA contraction,
 * see setup.py): identical results. */
#define CK_AGCD_CLONES CK_CLONES

/* Largest |projected gradient| of the worker's active variables, and the
 * first place where it occurs (-1 when all are 0); NaN when a gradient
 * entry is NaN or infinite.  One vectorised pass of chunk maxima, then a
 * rescan of the best chunk only. */
CK_AGCD_CLONES
static double ck_agcd_scan(const ck_agcd_worker *w, int64_t *where)
{
    const double *CK_RESTRICT g = w->g, *CK_RESTRICT s1 = w->s1,
                           *CK_RESTRICT s2 = w->s2;
    const int64_t m = w->na;
    double best = 0.0, nan_check = 0.0;
    int64_t c0, j, best_c = -1;
    for (c0 = 0; c0 < m; c0 += CK_AGCD_CHUNK) {
        const int64_t c1 = c0 + CK_AGCD_CHUNK < m ? c0 + CK_AGCD_CHUNK : m;
        double cm = 0.0;
#if defined(_OPENMP) || defined(CK_OPENMP_SIMD)
#pragma omp simd reduction(max : cm) reduction(+ : nan_check)
#endif
        for (j = c0; j < c1; ++j) {
            const double v1 = s1[j] * g[j], v2 = s2[j] * g[j];
            const double v = v1 > v2 ? v1 : v2;
            cm = v > cm ? v : cm;
            nan_check += g[j];
        }
        if (cm > best) {
            best = cm;
            best_c = c0;
        }
    }
    *where = -1;
    if (nan_check - nan_check != 0.0) /* NaN or inf somewhere */
        return NAN;
    if (best_c >= 0) {
        const int64_t c1 = best_c + CK_AGCD_CHUNK < m ? best_c + CK_AGCD_CHUNK
                                                      : m;
        for (j = best_c; j < c1; ++j) {
            const double v1 = s1[j] * g[j], v2 = s2[j] * g[j];
            if ((v1 > v2 ? v1 : v2) == best) {
                *where = j;
                break;
            }
        }
    }
    return best;
}

/* g[lo, hi) += delta * q[lo, hi) for a column q in pages of 2^shift
 * doubles: one vectorised loop per page, inside one call. */
CK_AGCD_CLONES
static void ck_agcd_axpy(int64_t lo, int64_t hi, double delta, ck_col q,
                         int shift, double *CK_RESTRICT g)
{
    int64_t k, e, j;
    for (k = lo; k < hi; k = e) {
        const double *CK_RESTRICT qp = ck_page_at(q, shift, 0, k);
        double *CK_RESTRICT gp = g + k;
        e = ck_page_end(k, hi, shift, 0);
        for (j = 0; j < e - k; ++j)
            gp[j] += delta * qp[j];
    }
}

/* Positions a < b exchange their variables (the cached slices' entries are
 * swapped at the end of the shrink, ck_qcache_apply_swaps). */
static void ck_agcd_swap(ck_agcd_worker *w, int64_t a, int64_t b)
{
    CK_SWAP(int64_t, w->rows[a], w->rows[b]);
    CK_SWAP(double, w->ry[a], w->ry[b]);
    CK_SWAP(double, w->rsq[a], w->rsq[b]);
    CK_SWAP(double, w->a[a], w->a[b]);
    CK_SWAP(double, w->u[a], w->u[b]);
    CK_SWAP(double, w->qd[a], w->qd[b]);
    CK_SWAP(double, w->g[a], w->g[b]);
    if (w->gbar != NULL)
        CK_SWAP(double, w->gbar[a], w->gbar[b]);
    CK_SWAP(double, w->s1[a], w->s1[b]);
    CK_SWAP(double, w->s2[a], w->s2[b]);
    ck_fmajor_swap(&w->fm, a, b, w->rows[a], w->rows[b]);
    w->pairs[2 * w->n_pairs] = a;
    w->pairs[2 * w->n_pairs + 1] = b;
    ++w->n_pairs;
}

/* LIBLINEAR's rule, with the largest violation M as threshold: a variable
 * at 0 with g > M, or at its bound with g < -M, cannot become a violator
 * soon. */
static int ck_agcd_be_shrunk(const ck_agcd_worker *w, int64_t j, double M)
{
    return (w->a[j] <= 0.0 && w->g[j] > M) ||
           (w->a[j] >= w->u[j] && w->g[j] < -M);
}

/* Shrinking: the variables to drop leave the active prefix [0, na), swapped
 * with active ones from its end as LIBSVM's do_shrinking; their gradient
 * entries are no longer updated. */
static void ck_agcd_shrink(ck_agcd_worker *w, double M)
{
    int64_t i, na = w->na;
    w->n_pairs = 0;
    for (i = 0; i < na; ++i) {
        if (!ck_agcd_be_shrunk(w, i, M))
            continue;
        --na;
        while (na > i) {
            if (!ck_agcd_be_shrunk(w, na, M)) {
                ck_agcd_swap(w, i, na);
                break;
            }
            --na;
        }
    }
    w->na = na;
    if (w->n_pairs > 0)
        ck_qcache_apply_swaps(&w->cache, w->pairs, w->n_pairs);
}

static uint64_t ck_agcd_splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static uint64_t ck_agcd_xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* ======================================================================== */
/* Shared state of the asynchronous phase                                   */
/* ======================================================================== */

typedef struct {
    int64_t i;
    double delta, value; /* the step and the new alpha_i */
    int64_t owner;       /* the thread that took it (applied it at once) */
    int64_t seq; /* == the entry's position once published */
} ck_agcd_entry;

/* per-thread counters on their own cache lines */
typedef struct {
    int64_t cursor;  /* log entries applied by this thread          */
    int64_t idle_at; /* log position where it went idle, -1: busy   */
    double viol;     /* its latest largest violation (active set)   */
    int64_t beat;    /* counts the columns of its gradient rebuilds */
    char pad[64 - 3 * sizeof(int64_t) - sizeof(double)];
} ck_agcd_slot;
typedef char ck_agcd_slot_is_one_line[sizeof(ck_agcd_slot) == 64 ? 1 : -1];

typedef struct {
    ck_agcd_entry *log;
    ck_agcd_slot *slots; /* one per thread of the team */
    int64_t head;        /* log positions claimed so far */
    int stop;
    ck_status err;
    int nt;
    int64_t max_iter;
    int64_t delay;        /* the delay bound D (<= CK_AGCD_LOG)         */
    int64_t forced_steps; /* steps against the rule (team stalled)      */
    int64_t limit;        /* on collapse: the steps the team took       */
    int64_t collapse_at;  /* tests: collapse after this many steps      */
    int collapse_reason;  /* CK_AGCD_COLLAPSE_*, 0 while the team runs   */
    double t0;            /* start of the asynchronous phase            */
    ck_poll_fn poll;      /* the caller's poll (thread 0 only), or NULL */
    void *poll_ctx;
} ck_agcd_shared;

static int ck_agcd_load_stop(ck_agcd_shared *sh)
{
    int v;
#ifdef _OPENMP
#pragma omp atomic read seq_cst
#endif
    v = sh->stop;
    return v;
}

static void ck_agcd_set_stop(ck_agcd_shared *sh, int v)
{
#ifdef _OPENMP
#pragma omp critical(ck_agcd_stop)
#endif
    {
        /* the first reason wins, except that an error overrides */
        if (sh->stop == CK_AGCD_RUN || v == CK_AGCD_ERROR) {
#ifdef _OPENMP
#pragma omp atomic write seq_cst
#endif
            sh->stop = v;
        }
    }
}

/* End the solve now (a NaN gradient), whatever the team was doing: its
 * threads may not wait for this one's cursor any more. */
static void ck_agcd_halt(ck_agcd_shared *sh)
{
#ifdef _OPENMP
#pragma omp critical(ck_agcd_stop)
#endif
    {
        if (sh->stop != CK_AGCD_ERROR) {
#ifdef _OPENMP
#pragma omp atomic write seq_cst
#endif
            sh->stop = CK_AGCD_DONE;
        }
    }
}

static void ck_agcd_fail(ck_agcd_shared *sh, ck_status st)
{
#ifdef _OPENMP
#pragma omp critical(ck_agcd_stop)
#endif
    {
        if (sh->err == CK_OK)
            sh->err = st;
    }
    ck_agcd_set_stop(sh, CK_AGCD_ERROR);
}

/* Bring every variable back: recompute the gradient entries of the shrunk
 * positions [na, m) from alpha_all as LIBSVM's reconstruct_gradient,
 * g_j = -1 + G_bar_j + sum_i alpha_i Q_ji over the free variables i (in
 * the order of i; over every nonzero alpha_i without G_bar): from the
 * cached slices where they hold those entries, the rest computed into the
 * scratch (not cached: extending every support vector's slice would evict
 * the short slices the shrunk solve uses, when the budget does not hold
 * them all).  G_bar matters where most support vectors are bounded (a9a,
 * C = 1: 10,728 of 11,572; a rebuild over all of them took ~0.5 s). */
static ck_status ck_agcd_unshrink(ck_agcd_shared *sh, ck_agcd_worker *w,
                                   int tid)
{
    const int64_t n = w->p->X->n_rows, na = w->na, m = w->m;
    double *const one[1] = {w->scratch};
    int64_t i, j, cols = 0;
    if (na == m)
        return CK_OK;
    ++w->n_rebuilds;
    for (j = na; j < m; ++j)
        w->g[j] = w->gbar != NULL ? -1.0 + w->gbar[j] : -1.0;
    for (i = 0; i < n; ++i) {
        const double ai = w->alpha_all[i];
        ck_col q;
        int64_t have;
        if (ai == 0.0 || (w->gbar != NULL && ai >= w->p->upper[i]))
            continue;
        ck_agcd_beat(w);
        have = ck_qcache_peek(&w->cache, i, &q);
        if (have > na) {
            if (have > m)
                have = m;
            ck_agcd_axpy(na, have, ai, q, w->cache.shift, w->g);
        } else {
            have = na;
        }
        if (have < m) {
            const double t0 = w->time_slices ? ck_wtime() : 0.0;
            ck_status st;
            /* O(support vectors) slices: the caller's poll (thread 0) and
             * another thread's failure end it, as they end the steps */
            if ((++cols & 63) == 0 &&
                ((tid == 0 && ck_poll_stop(sh->poll, sh->poll_ctx)) ||
                 ck_agcd_load_stop(sh) == CK_AGCD_ERROR))
                return CK_ERR_INTERRUPTED;
            st = ck_agcd_fill_at(w, i, one, CK_ONE_PAGE, have, have, m);
            if (w->time_slices)
                w->slice_seconds += ck_wtime() - t0;
            ++w->n_slices;
            if (st != CK_OK)
                return st;
            for (j = have; j < m; ++j)
                w->g[j] += ai * w->scratch[j - have];
        }
    }
    w->na = m;
    return CK_OK;
}

/* Hand the rest of the solve to one thread (deviation 4): refuse every
 * later claim of a log position, and let the team apply the steps taken
 * so far and leave.  No-op when the team already stops. */
static void ck_agcd_collapse(ck_agcd_shared *sh, int reason)
{
#ifdef _OPENMP
#pragma omp critical(ck_agcd_stop)
#endif
    {
        if (sh->stop == CK_AGCD_RUN) {
            int64_t old;
#ifdef _OPENMP
#pragma omp atomic capture seq_cst
#endif
            {
                old = sh->head;
                sh->head += CK_AGCD_COLLAPSE_BIT;
            }
            /* a claim at or past max_iter is refused, never published */
            if (sh->max_iter > 0 && old > sh->max_iter)
                old = sh->max_iter;
            sh->limit = old;
            sh->collapse_reason = reason;
#ifdef _OPENMP
#pragma omp atomic write seq_cst
#endif
            sh->stop = CK_AGCD_COLLAPSE;
        }
    }
}

/* A thread waiting for the others (deviation 3): poll, then sleep with an
 * exponential backoff, so that with more threads than free cores the peer
 * it waits for gets the core (sched_yield was no help: under CFS it gave
 * the core to a busy process for a whole time slice).  `polls` counts the
 * polls of the current wait (reset to 0 when the thread makes progress).
 * With `blocked` (a thread that has a step to take, held by the delay
 * bound) the time asleep adds up in w->blocked, and a thread blocked for
 * more than CK_AGCD_COLLAPSE_SHARE of the solve collapses the team
 * (deviation 4); an idle thread's sleep is not counted (on a quiet machine
 * a thread whose variables are optimal may idle for long). */
static void ck_agcd_backoff(ck_agcd_shared *sh, ck_agcd_worker *w,
                            int64_t *polls, int blocked)
{
    const int64_t k = (*polls)++;
    if (sh->nt <= 1 || k < CK_AGCD_SPIN)
        return;
#ifdef CK_AGCD_HAVE_SLEEP
    {
        const int64_t e = k - CK_AGCD_SPIN;
        long ns = CK_AGCD_SLEEP_MIN_NS;
        struct timespec ts;
        double t;
        if (e < 6)
            ns <<= e;
        if (e >= 6 || ns > CK_AGCD_SLEEP_MAX_NS)
            ns = CK_AGCD_SLEEP_MAX_NS;
        ts.tv_sec = 0;
        ts.tv_nsec = ns;
        t = ck_wtime();
        nanosleep(&ts, NULL);
        t = ck_wtime() - t;
        w->slept += t;
        if (!blocked)
            return;
        w->blocked += t;
        if (w->blocked > CK_AGCD_COLLAPSE_MIN_S &&
            w->blocked > CK_AGCD_COLLAPSE_SHARE * (ck_wtime() - sh->t0))
            ck_agcd_collapse(sh, CK_AGCD_COLLAPSE_WAITS);
    }
#else
    (void)w;
#endif
}

/* Deviation 5, the CPU share test: a thread that the OS runs for less than
 * CK_AGCD_SHARE_MIN of its waking time (other processes share the cores)
 * collapses the team.  Counted over windows of at least
 * CK_AGCD_SHARE_WINDOW_S seconds awake, checked every CK_AGCD_SHARE_EVERY
 * steps; `start` opens the first window. */
static void ck_agcd_share_test(ck_agcd_shared *sh, ck_agcd_worker *w,
                               int start)
{
    double cpu, wall, awake;
    if (sh->nt <= 1)
        return;
    if (!start && ++w->since_share < CK_AGCD_SHARE_EVERY)
        return;
    w->since_share = 0;
    cpu = ck_agcd_thread_cpu();
    if (cpu < 0.0)
        return;
    wall = ck_wtime();
    if (!start) {
        awake = (wall - w->win_wall) - (w->slept - w->win_slept);
        if (awake < CK_AGCD_SHARE_WINDOW_S)
            return;
        if (cpu - w->win_cpu >= CK_AGCD_SHARE_MIN * awake) {
            w->starved = 0;
        } else {
            if (w->starved++ == 0)
                w->starved_since = w->win_wall;
            /* and starved for a tenth of the solve so far: a transient
             * (another program's burst) does not end a long solve's team */
            if (w->starved >= CK_AGCD_SHARE_WINDOWS &&
                wall - w->starved_since >=
                    CK_AGCD_SHARE_STREAK * (wall - sh->t0))
                ck_agcd_collapse(sh, CK_AGCD_COLLAPSE_STARVED);
        }
    }
    w->win_cpu = cpu;
    w->win_wall = wall;
    w->win_slept = w->slept;
}

static int64_t ck_agcd_load64(int64_t *p)
{
    int64_t v;
#ifdef _OPENMP
#pragma omp atomic read seq_cst
#endif
    v = *p;
    return v;
}

static void ck_agcd_store64(int64_t *p, int64_t v)
{
#ifdef _OPENMP
#pragma omp atomic write seq_cst
#endif
    *p = v;
}

/* Apply the step alpha_i += delta (new value `value`) to the thread's copy
 * of alpha, its active gradient entries and, when alpha_i reaches or
 * leaves its upper bound, G_bar (from the slice at full length, as LIBSVM's
 * update of G_bar); 0, or -1 on error (reported in sh). */
static int ck_agcd_apply(ck_agcd_shared *sh, ck_agcd_worker *w,
                         const ck_agcd_problem *p, int64_t i, double delta,
                         double value)
{
    const double old = w->alpha_all[i], ui = p->upper[i];
    w->alpha_all[i] = value;
    ++w->since_shrink;
    if (delta != 0.0 && w->m > 0) {
        const int moved = w->gbar != NULL && (old >= ui) != (value >= ui);
        const int64_t len = moved ? w->m : w->na;
        ck_col q;
        ck_status st;
        if (len == 0)
            return 0;
        st = ck_qcache_get(&w->cache, i, len, &q);
        if (st != CK_OK) {
            ck_agcd_fail(sh, st);
            return -1;
        }
        if (moved)
            ck_agcd_axpy(0, w->m, value >= ui ? ui : -ui, q, w->cache.shift,
                         w->gbar);
        ck_agcd_axpy(0, w->na, delta, q, w->cache.shift, w->g);
    }
    return 0;
}

/* Apply every published log entry not applied yet; returns the number
 * applied, or -1 on error (reported in sh).  Stops at `limit` entries. */
static int64_t ck_agcd_drain(ck_agcd_shared *sh, ck_agcd_worker *w,
                             const ck_agcd_problem *p, int tid,
                             int64_t limit)
{
    int64_t cur = sh->slots[tid].cursor, done = 0;
    for (; cur < limit; ++cur) {
        ck_agcd_entry *e = &sh->log[cur & (CK_AGCD_LOG - 1)];
        const int64_t seq = ck_agcd_load64(&e->seq);
        if (seq != cur)
            break; /* not published yet */
        /* skipped: a thread without variables, or its own step (applied
         * when it was taken) */
        if (w->m > 0 && e->owner != tid &&
            ck_agcd_apply(sh, w, p, e->i, e->delta, e->value) != 0)
            return -1;
        ck_agcd_store64(&sh->slots[tid].cursor, cur + 1);
        ++done;
    }
    return done;
}

/* Smallest cursor of the team. */
static int64_t ck_agcd_min_cursor(ck_agcd_shared *sh)
{
    int64_t m = INT64_MAX;
    int t;
    for (t = 0; t < sh->nt; ++t) {
        const int64_t c = ck_agcd_load64(&sh->slots[t].cursor);
        if (c < m)
            m = c;
    }
    return m;
}

/* The largest violation the team has published, and `own` (the caller's
 * latest, perhaps not published yet). */
static double ck_agcd_team_viol(ck_agcd_shared *sh, double own)
{
    double M = own;
    int t;
    for (t = 0; t < sh->nt; ++t) {
        double v;
#ifdef _OPENMP
#pragma omp atomic read
#endif
        v = sh->slots[t].viol;
        if (v > M)
            M = v;
    }
    return M;
}

/* The asynchronous loop of one thread. */
static void ck_agcd_run(ck_agcd_shared *sh, ck_agcd_worker *w,
                        const ck_agcd_problem *p, int tid, int greedy,
                        int shrinking, double tol)
{
    const int64_t shrink_every = w->m < 1000 ? (w->m > 0 ? w->m : 1) : 1000;
    int64_t best_j = -1;
    double best = INFINITY;
    int dirty = 1; /* g or a changed since the last scan */
    int64_t polls = 0;      /* polls of the current wait          */
    int64_t seen_head = -1; /* the log head when the rule held us */
    int64_t last_min = -1;  /* the team's smallest cursor, last seen */
    int64_t last_beats = -1; /* the team's rebuild heartbeats, last seen */
    unsigned passes = 0;     /* thread 0: passes since the last poll      */

    w->beat = &sh->slots[tid].beat;
    ck_agcd_share_test(sh, w, 1);
    for (;;) {
        const int stop = ck_agcd_load_stop(sh);
        int64_t got, j;
        if (stop == CK_AGCD_ERROR || stop == CK_AGCD_DONE)
            return;
        /* the caller's poll (Ctrl-C), from the calling thread: ends the
         * team as an error does */
        if (tid == 0 && sh->poll != NULL && (passes++ & 255) == 0 &&
            ck_poll_stop(sh->poll, sh->poll_ctx)) {
            ck_agcd_fail(sh, CK_ERR_INTERRUPTED);
            return;
        }
        /* the steps published so far, not those that appear meanwhile:
         * draining "until the log is empty" let a thread that applies the
         * others' steps no faster than they take them drain forever and
         * never step (the threads then took turns of ~10^4 steps each) */
        got = ck_agcd_drain(
            sh, w, p, tid,
            stop == CK_AGCD_MAXITER    ? sh->max_iter
            : stop == CK_AGCD_COLLAPSE ? sh->limit
                                       : ck_agcd_load64(&sh->head));
        if (got < 0)
            return;
        if (got > 0)
            dirty = 1;
        if (stop == CK_AGCD_MAXITER || stop == CK_AGCD_COLLAPSE) {
            /* apply every step taken before the limit, then leave */
            if (sh->slots[tid].cursor >=
                (stop == CK_AGCD_MAXITER ? sh->max_iter : sh->limit))
                break;
            if (got > 0)
                polls = 0;
            ck_agcd_backoff(sh, w, &polls, 0);
            continue;
        }

        /* ---- selection ---- */
        if (dirty) {
            best = ck_agcd_scan(w, &best_j);
            dirty = 0;
#ifdef _OPENMP
#pragma omp atomic write
#endif
            sh->slots[tid].viol = best;
        }
        if (best != best) { /* NaN/inf gradient: give up (caller reports) */
            ck_agcd_halt(sh);
            return;
        }
        if (shrinking && w->na > 0 &&
            w->since_shrink >=
                shrink_every << (w->n_rebuilds < 20 ? w->n_rebuilds : 20)) {
            /* every shrink_every steps applied (the team's, not only its
             * own: a thread whose variables are optimal applies the
             * others' steps to every active variable), twice as many after
             * each of its rebuilds, while the team is not optimal.  The
             * back-off: a rebuild that finds violators among the dropped
             * variables says the shrinking was too eager; without it two
             * threads on a9a (C = 1, gamma = 0.05, a strongly coupled
             * kernel) rebuilt 15 times each and took 1.4-2x the updates
             * of no shrinking (5-6 rebuilds with it, the same updates).
             * Threshold: the largest violation of the whole team, so that
             * a thread whose own block is nearly optimal does not drop
             * variables that the others' steps will move.  Positions
             * move: scan again. */
            const double M = ck_agcd_team_viol(sh, best);
            w->since_shrink = 0;
            if (M > tol) {
                ck_agcd_shrink(w, M);
                dirty = 1;
                continue;
            }
        }
        if (w->na < w->m && best <= 10.0 * tol) {
            /* optimal (or nearly) on the active set: check them all, once
             * early (within 10 tol, as LIBSVM), else only when every
             * thread is optimal on its active set: a thread whose own
             * variables are optimal while the others still step would
             * otherwise rebuild its gradient again and again (ijcnn1,
             * 2 threads: 9-11 rebuilds each, as many kernel slices as the
             * solve itself), or stay unshrunk, applying every step of the
             * others to all its variables */
            if ((!w->unshrunk && best > tol) ||
                (best <= tol && ck_agcd_team_viol(sh, best) <= tol)) {
                ck_status st = ck_agcd_unshrink(sh, w, tid);
                if (st != CK_OK) {
                    ck_agcd_fail(sh, st);
                    return;
                }
                if (best > tol)
                    w->unshrunk = 1;
                dirty = 1;
                continue;
            }
            if (best <= tol) {
                /* wait, applying the team's steps to the active set */
                if (got > 0)
                    polls = 0;
                ck_agcd_backoff(sh, w, &polls, 0);
                continue;
            }
        }
        j = -1;
        if (best > tol) {
            if (greedy) {
                /* step only with a violation of at least CK_AGCD_RHO times
                 * the team's largest (see "Deviations" above) */
                if (!(best >= CK_AGCD_RHO * ck_agcd_team_viol(sh, best))) {
                    /* wait (applying the others' steps meanwhile) while
                     * the team steps; step anyway when it has stalled,
                     * its best thread perhaps descheduled (deviation 2) */
                    const int64_t h = ck_agcd_load64(&sh->head);
                    if (h != seen_head) {
                        seen_head = h;
                        polls = 0;
                    }
                    if (polls < CK_AGCD_PATIENCE) {
                        ck_agcd_backoff(sh, w, &polls, 0);
                        continue;
                    }
#ifdef _OPENMP
#pragma omp atomic
#endif
                    sh->forced_steps += 1;
                }
                j = best_j;
            } else {
                /* the active variables are the prefix [0, na) */
                const int64_t t = (int64_t)(ck_agcd_xorshift(&w->rng) %
                                            (uint64_t)w->na);
                if (fabs(ck_agcd_pg(w->a[t], w->g[t], w->u[t])) > tol)
                    j = t;
            }
        }

        if (j >= 0) {
            /* ---- one coordinate step ---- */
            int64_t s;
            double q, an, delta;
            ck_agcd_entry *e;
#ifdef _OPENMP
#pragma omp atomic capture seq_cst
#endif
            s = sh->head++;
            if (s & CK_AGCD_COLLAPSE_BIT)
                continue; /* the team collapses: the step is not taken */
            if (sh->max_iter > 0 && s >= sh->max_iter) {
                ck_agcd_set_stop(sh, CK_AGCD_MAXITER);
                continue;
            }
            /* wait until every thread has applied the entry that slot s
             * overwrites (applying published entries meanwhile) */
            polls = 0;
            for (;;) {
                /* a peer that applies the log, however slowly, is running:
                 * poll on; only a peer that does not move puts us to sleep */
                const int64_t mc = ck_agcd_min_cursor(sh);
                int64_t beats = 0;
                int t;
                if (s - sh->delay < mc)
                    break;
                /* a peer rebuilding its gradient runs too (it may take
                 * longer than the others need to reach the delay bound) */
                for (t = 0; t < sh->nt; ++t)
                    beats += ck_agcd_load64(&sh->slots[t].beat);
                if (mc != last_min || beats != last_beats) {
                    last_min = mc;
                    last_beats = beats;
                    polls = 0;
                }
                got = ck_agcd_drain(sh, w, p, tid, s);
                if (got < 0)
                    return;
                if (got > 0)
                    dirty = 1;
                else
                    ck_agcd_backoff(sh, w, &polls, 1);
                {
                    const int now_stop = ck_agcd_load_stop(sh);
                    if (now_stop == CK_AGCD_ERROR || now_stop == CK_AGCD_DONE)
                        return; /* failed or halted: the step is dropped */
                }
            }
            w->active_sum += (double)w->na;
            /* the step from the gradient as it is now */
            q = w->qd[j] > 0.0 ? w->qd[j] : CK_AGCD_TAU;
            an = w->a[j] - w->g[j] / q;
            an = an < 0.0 ? 0.0 : (an > w->u[j] ? w->u[j] : an);
            delta = an - w->a[j];
            w->a[j] = an;
            ck_agcd_signs(an, w->u[j], &w->s1[j], &w->s2[j]);
            e = &sh->log[s & (CK_AGCD_LOG - 1)];
            e->i = w->rows[j];
            e->delta = delta;
            e->value = an;
            e->owner = tid;
            ck_agcd_store64(&e->seq, s); /* publish */
            if (sh->collapse_at > 0 && s + 1 == sh->collapse_at)
                ck_agcd_collapse(sh, CK_AGCD_COLLAPSE_ON_DEMAND);
            ck_agcd_share_test(sh, w, 0);
            /* Apply the own step at once, not in log order: an earlier
             * entry still in flight (its thread preempted between claiming
             * and publishing) would otherwise hold it back, and the next
             * scan would step variable j again from the same gradient,
             * overshooting by a whole step each time. */
            if (ck_agcd_apply(sh, w, p, w->rows[j], delta, an) != 0)
                return;
            dirty = 1;
            polls = 0;
            if (sh->slots[tid].idle_at >= 0)
                ck_agcd_store64(&sh->slots[tid].idle_at, -1);
            continue;
        }
        if (best > tol)
            continue; /* PSCD picked a variable within tol: pick again */

        /* ---- nothing to do here: idle until new steps or the end ---- */
        {
            const int64_t cur = sh->slots[tid].cursor;
            const int64_t h = ck_agcd_load64(&sh->head);
            int t, all = 1;
            if (h != cur) {
                polls = 0;
                continue; /* steps not applied yet */
            }
            ck_agcd_store64(&sh->slots[tid].idle_at, cur);
            for (t = 0; t < sh->nt && all; ++t)
                all = ck_agcd_load64(&sh->slots[t].idle_at) == cur;
            if (all && ck_agcd_load64(&sh->head) == cur) {
                ck_agcd_set_stop(sh, CK_AGCD_DONE);
                return;
            }
            ck_agcd_backoff(sh, w, &polls, 0);
        }
    }
    /* stopped by max_iter or the collapse: every gradient entry */
    {
        ck_status st = ck_agcd_unshrink(sh, w, tid);
        if (st != CK_OK)
            ck_agcd_fail(sh, st);
    }
}

/* Build the worker of thread tid (team nt): its variables are the blocks b
 * with b % nt == tid, in block order. */
static ck_status ck_agcd_worker_init(ck_agcd_worker *w,
                                     const ck_agcd_problem *p,
                                     const int64_t *bstart,
                                     const int64_t *bidx, int T, int tid,
                                     int nt, const double *alpha,
                                     const double *upper, const double *QD,
                                     int64_t capacity, int64_t page,
                                     int want_fm, int fm_float,
                                     int time_slices, uint64_t seed,
                                     int shrinking, const double *g0,
                                     const double *gbar0, ck_agcd_shared *sh)
{
    const int64_t n = p->X->n_rows;
    int64_t m = 0, k, i, cols = 0;
    int b;
    ck_status st;
    memset(w, 0, sizeof *w);
    w->p = p;
    w->time_slices = time_slices;
    for (b = tid; b < T; b += nt)
        m += bstart[b + 1] - bstart[b];
    w->m = m;
    {
        uint64_t s0 = ck_agcd_splitmix(seed + (uint64_t)tid);
        w->rng = s0 != 0 ? s0 : 0x9E3779B97F4A7C15ULL;
    }
    if (m == 0)
        return CK_OK;
    w->rows = (int64_t *)malloc((size_t)m * sizeof(int64_t));
    w->ry = (double *)malloc((size_t)m * sizeof(double));
    w->rsq = (double *)malloc((size_t)m * sizeof(double));
    w->a = (double *)malloc((size_t)m * sizeof(double));
    w->u = (double *)malloc((size_t)m * sizeof(double));
    w->qd = (double *)malloc((size_t)m * sizeof(double));
    w->g = (double *)malloc((size_t)m * sizeof(double));
    w->s1 = (double *)malloc((size_t)m * sizeof(double));
    w->s2 = (double *)malloc((size_t)m * sizeof(double));
    w->alpha_all = (double *)malloc((size_t)n * sizeof(double));
    w->pairs = (int64_t *)malloc((size_t)m * 2 * sizeof(int64_t));
    w->scratch = (double *)malloc((size_t)m * sizeof(double));
    if (shrinking) {
        w->gbar = (double *)malloc((size_t)m * sizeof(double));
        if (w->gbar == NULL)
            return CK_ERR_NOMEM;
    }
    /* CSR scratch (T of them at most at a time; too wide: merged dots) */
    if (ck_csr_scratch(p->X, T))
        w->work = (double *)calloc((size_t)p->X->n_cols, sizeof(double));
    if (w->rows == NULL || w->ry == NULL || w->rsq == NULL || w->a == NULL ||
        w->u == NULL || w->qd == NULL || w->g == NULL || w->s1 == NULL ||
        w->s2 == NULL || w->alpha_all == NULL || w->pairs == NULL ||
        w->scratch == NULL ||
        (ck_csr_scratch(p->X, T) && w->work == NULL))
        return CK_ERR_NOMEM;
    m = 0;
    for (b = tid; b < T; b += nt) {
        for (k = bstart[b]; k < bstart[b + 1]; ++k) {
            const int64_t r = bidx[k];
            w->rows[m] = r;
            w->ry[m] = p->y[r];
            w->rsq[m] = p->sq[r];
            w->a[m] = alpha[r];
            w->u[m] = upper[r];
            w->qd[m] = QD[r];
            w->g[m] = g0 != NULL ? g0[r] : -1.0;
            if (w->gbar != NULL)
                w->gbar[m] = gbar0 != NULL ? gbar0[r] : 0.0;
            ck_agcd_signs(w->a[m], w->u[m], &w->s1[m], &w->s2[m]);
            ++m;
        }
    }
    memcpy(w->alpha_all, alpha, (size_t)n * sizeof(double));
    w->na = m;
    /* an optimisation only: without memory for it, the rows of X serve */
    if (want_fm &&
        ck_fmajor_init(&w->fm, p->X, w->rows, m, fm_float) != CK_OK)
        ck_fmajor_free(&w->fm);
    /* every thread's budget holds `capacity` slices at full length (more
     * the shorter they are while variables are shrunk) */
    w->capacity = capacity < n ? capacity : n;
    st = ck_qcache_init(&w->cache, n, m, w->capacity * m, page, ck_agcd_fill,
                        w);
    if (st != CK_OK)
        return st;
    /* the owned part of the gradient (and G_bar) of a warm start, in
     * variable order (given in g0 and gbar0 when a collapsed team hands
     * over) */
    for (i = 0; i < n && g0 == NULL; ++i) {
        if (alpha[i] != 0.0) {
            ck_col q;
            /* O(n) slices before the first step: the caller's poll (thread
             * 0; Ctrl-C waited seconds here) and another thread's failure */
            if ((++cols & 63) == 0 &&
                ((tid == 0 && ck_poll_stop(sh->poll, sh->poll_ctx)) ||
                 ck_agcd_load_stop(sh) == CK_AGCD_ERROR))
                return CK_ERR_INTERRUPTED;
            st = ck_qcache_get(&w->cache, i, m, &q);
            if (st != CK_OK)
                return st;
            ck_agcd_axpy(0, m, alpha[i], q, w->cache.shift, w->g);
            if (w->gbar != NULL && alpha[i] >= upper[i])
                ck_agcd_axpy(0, m, upper[i], q, w->cache.shift, w->gbar);
        }
    }
    return CK_OK;
}

/* ======================================================================== */
/* Solver                                                                   */
/* ======================================================================== */

ck_status ck_asygcd_solve(const ck_matrix *X, const double *y,
                          const double *upper, int kind, double gamma,
                          double coef0, double degree, double shift,
                          const int64_t *block, int n_threads, int greedy,
                          int shrinking, uint64_t seed, double tol,
                          int64_t max_iter, double cache_bytes,
                          double *alpha, double *grad, double *objective,
                          int64_t *n_updates, int *converged)
{
    return ck_asygcd_solve_ex(X, y, upper, kind, gamma, coef0, degree, shift,
                              block, n_threads, greedy, shrinking, seed, tol,
                              max_iter, cache_bytes, alpha, grad, objective,
                              n_updates, converged, NULL);
}

ck_status ck_asygcd_solve_ex(const ck_matrix *X, const double *y,
                             const double *upper, int kind, double gamma,
                             double coef0, double degree, double shift,
                             const int64_t *block, int n_threads, int greedy,
                             int shrinking, uint64_t seed, double tol,
                             int64_t max_iter, double cache_bytes,
                             double *alpha, double *grad, double *objective,
                             int64_t *n_updates, int *converged,
                             ck_agcd_opts *opts)
{
    ck_agcd_problem prob;
    ck_agcd_shared sh;
    void *slots_raw = NULL;
    ck_agcd_worker *workers = NULL;
    double *QD = NULL, *sq = NULL, *a2 = NULL, *gbar_all = NULL;
    int64_t *bstart = NULL, *bidx = NULL, *fill = NULL;
    ck_status st = CK_OK;
    int64_t i, n, capacity;
    int T, team, b, t, want_fm = 0, fm_float = 0, collapsed = 0;
    int64_t n_slices = 0, n_rebuilds = 0; /* of a collapsed team's threads */
    double slice_seconds = 0.0, active_sum = 0.0;
    const int time_slices = opts != NULL && opts->time_slices;
    const int64_t page = opts != NULL ? opts->page_doubles : 0;

    /* ---- validation ---- */
    if (X == NULL || block == NULL || alpha == NULL || grad == NULL ||
        objective == NULL || n_updates == NULL || converged == NULL)
        return CK_ERR_ARG;
    prob.kp.kind = kind;
    prob.kp.gamma = gamma;
    prob.kp.coef0 = coef0;
    prob.kp.degree = degree;
    prob.kp.shift = shift;
    /* every thread caches the same number of slices of its variables, so
     * the slices of `capacity` whole columns fit in cache_bytes */
    st = ck_check_problem(X, y, upper, &prob.kp, tol, cache_bytes, 1,
                          &capacity);
    if (st != CK_OK)
        return st;
    n = X->n_rows;
    if ((uint64_t)n > (uint64_t)(SIZE_MAX / sizeof(double)) / (uint64_t)n)
        return CK_ERR_ARG; /* n x n doubles must be addressable */
    T = n_threads > 0 ? n_threads : ck_max_threads();
    if (T < 1)
        T = 1;
    for (i = 0; i < n; ++i) {
        if (block[i] < 0 || block[i] >= T)
            return CK_ERR_ARG;
    }
    /* Feature-major copies of the threads' rows (ck_fmajor: kernel slices
     * as contiguous axpys: 3.1-3.5x faster per slice than row-wise dot
     * products on a9a, CSR, 2.4-2.6x on dense ijcnn1, 1.3-2.1x per fit;
     * benchmarks/bench_feature_major.py)
     * when they take at most a quarter of the budget, never more than the
     * whole n x n matrix (+inf, or a budget far past the matrix, built
     * copies of wide sparse data tens of times its size, no faster); their
     * bytes come out of the budget, so the memory used stays within
     * cache_bytes.  In float when that is exact: half the bytes to stream
     * per slice. */
    if (X->n_cols > 0) {
        double fm_bytes;
        const double matrix = (double)n * (double)n * (double)sizeof(double);
        fm_float = ck_matrix_float_exact(X);
        fm_bytes = (double)n * (double)X->n_cols *
                   (double)(fm_float ? sizeof(float) : sizeof(double));
        if (fm_bytes > matrix) {
            want_fm = 0;
        } else if (isinf(cache_bytes)) {
            want_fm = 1;
        } else if (fm_bytes <= 0.25 * cache_bytes) {
            const double cols = (cache_bytes - fm_bytes) /
                                ((double)n * (double)sizeof(double));
            if (cols >= 1.0) {
                want_fm = 1;
                capacity = cols >= (double)n ? n : (int64_t)cols;
            }
        }
    }
    /* the private switch: the same capacity, slices from the rows of X */
    if (opts != NULL && !opts->feature_major)
        want_fm = 0;

    /* ---- warm start: clip tiny violations, reject the rest ---- */
    a2 = (double *)malloc((size_t)n * sizeof(double));
    if (a2 == NULL)
        return CK_ERR_NOMEM;
    for (i = 0; i < n; ++i) {
        const double a = alpha[i], u = upper[i];
        if (!isfinite(a) || a < -1e-8 * u || a > u + 1e-8 * u) {
            free(a2);
            return CK_ERR_ARG;
        }
        a2[i] = a < 0.0 ? 0.0 : (a > u ? u : a);
    }

    memset(&sh, 0, sizeof sh);
    QD = (double *)malloc((size_t)n * sizeof(double));
    sq = (double *)malloc((size_t)n * sizeof(double));
    bstart = (int64_t *)calloc((size_t)T + 1, sizeof(int64_t));
    bidx = (int64_t *)malloc((size_t)n * sizeof(int64_t));
    fill = (int64_t *)calloc((size_t)T, sizeof(int64_t));
    workers = (ck_agcd_worker *)calloc((size_t)T, sizeof(ck_agcd_worker));
    sh.log = (ck_agcd_entry *)malloc(CK_AGCD_LOG * sizeof(ck_agcd_entry));
    /* one cache line per thread, starting on a line boundary (calloc aligns to
       16 bytes only): one spare slot of room, the pointer rounded up to 64 */
    slots_raw = calloc((size_t)T + 1, sizeof(ck_agcd_slot));
    sh.slots = slots_raw == NULL ? NULL
             : (ck_agcd_slot *)(((uintptr_t)slots_raw + 63) & ~(uintptr_t)63);
    if (QD == NULL || sq == NULL || bstart == NULL || bidx == NULL ||
        fill == NULL || workers == NULL || sh.log == NULL ||
        sh.slots == NULL) {
        st = CK_ERR_NOMEM;
        goto cleanup;
    }
    for (i = 0; i < CK_AGCD_LOG; ++i)
        sh.log[i].seq = -1;

    ck_matrix_sqnorms(X, sq);
    st = ck_kernel_diag(&prob.kp, sq, n, QD);
    if (st != CK_OK)
        goto cleanup;
    prob.X = X;
    prob.y = y;
    prob.sq = sq;
    prob.upper = upper;

    /* ---- blocks: counting sort of the indices by block ---- */
    for (i = 0; i < n; ++i)
        ++bstart[block[i] + 1];
    for (b = 0; b < T; ++b)
        bstart[b + 1] += bstart[b];
    for (i = 0; i < n; ++i) {
        const int64_t bb = block[i];
        bidx[bstart[bb] + fill[bb]++] = i;
    }

#ifdef _OPENMP
    team = ck_team_threads(T); /* 1 in a child clamped by ck_fork_guard */
#else
    team = 1;
#endif
    sh.max_iter = max_iter;
    /* the delay bound (see "Deviations" 1) */
    {
        int64_t d = opts != NULL ? opts->max_delay : 0;
        if (d <= 0) {
            d = (n + 7) / 8;
            if (d < 8 * (int64_t)team)
                d = 8 * (int64_t)team;
        }
        sh.delay = d > CK_AGCD_LOG ? CK_AGCD_LOG : d;
    }
    sh.err = CK_OK;
    sh.stop = CK_AGCD_RUN;
    sh.nt = team;
    sh.t0 = ck_wtime();
    sh.collapse_at = team > 1 && opts != NULL ? opts->collapse_at : 0;
    sh.poll = opts != NULL ? opts->poll : NULL;
    sh.poll_ctx = opts != NULL ? opts->poll_ctx : NULL;

#ifdef _OPENMP
    ck_note_team(team);
#pragma omp parallel num_threads(team)
#endif
    {
        int tid = 0, nt = 1;
        ck_status lst;
#ifdef _OPENMP
        tid = omp_get_thread_num();
        nt = omp_get_num_threads();
#pragma omp single
        sh.nt = nt; /* implicit barrier: every thread sees the team size */
#endif
        /* each thread allocates and first-touches its own memory */
        lst = ck_agcd_worker_init(&workers[tid], &prob, bstart, bidx, T, tid,
                                  nt, a2, upper, QD, capacity, page,
                                  want_fm, fm_float, time_slices, seed,
                                  shrinking, NULL, NULL, &sh);
        if (lst != CK_OK)
            ck_agcd_fail(&sh, lst);
        sh.slots[tid].idle_at = -1;
        sh.slots[tid].cursor = 0;
#ifdef _OPENMP
#pragma omp barrier
#endif
        /* not when init failed; a team that collapses (its other threads
         * already running) still needs this thread's cursor to advance */
        if (ck_agcd_load_stop(&sh) != CK_AGCD_ERROR)
            ck_agcd_run(&sh, &workers[tid], &prob, tid, greedy, shrinking,
                        tol);
    }
    if (sh.err != CK_OK) {
        st = sh.err;
        goto cleanup;
    }
    if (sh.stop == CK_AGCD_COLLAPSE) {
        /* deviation 4: one thread finishes from the team's alpha, g (and
         * G_bar) */
        const int64_t taken = sh.limit;
        if (shrinking) {
            gbar_all = (double *)malloc((size_t)n * sizeof(double));
            if (gbar_all == NULL) {
                st = CK_ERR_NOMEM;
                goto cleanup;
            }
        }
        for (t = 0; t < sh.nt; ++t) {
            const ck_agcd_worker *w = &workers[t];
            int64_t k;
            for (k = 0; k < w->m; ++k) {
                a2[w->rows[k]] = w->a[k];
                grad[w->rows[k]] = w->g[k];
                if (w->gbar != NULL)
                    gbar_all[w->rows[k]] = w->gbar[k];
            }
            n_slices += w->n_slices + w->cache.n_computed;
            slice_seconds += w->slice_seconds + w->cache.seconds;
            n_rebuilds += w->n_rebuilds;
            active_sum += w->active_sum;
        }
        for (t = 0; t < T; ++t)
            ck_agcd_worker_free(&workers[t]);
        collapsed = sh.collapse_reason;
        sh.head = taken;
        if (max_iter <= 0 || taken < max_iter) {
            for (i = 0; i < CK_AGCD_LOG; ++i)
                sh.log[i].seq = -1;
            sh.head = 0;
            sh.stop = CK_AGCD_RUN;
            sh.nt = 1;
            sh.collapse_at = 0;
            sh.max_iter = max_iter > 0 ? max_iter - taken : max_iter;
            sh.slots[0].cursor = 0;
            sh.slots[0].idle_at = -1;
            sh.slots[0].viol = 0.0;
            st = ck_agcd_worker_init(&workers[0], &prob, bstart, bidx, T, 0,
                                     1, a2, upper, QD, capacity, page,
                                     want_fm, fm_float, time_slices, seed,
                                     shrinking, grad, gbar_all, &sh);
            if (st != CK_OK)
                goto cleanup;
            ck_agcd_run(&sh, &workers[0], &prob, 0, greedy, shrinking, tol);
            if (sh.err != CK_OK) {
                st = sh.err;
                goto cleanup;
            }
            if (sh.max_iter > 0 && sh.head > sh.max_iter)
                sh.head = sh.max_iter;
            sh.head += taken;
            sh.max_iter = max_iter;
        } else {
            /* max_iter reached by the team: report what it left */
            for (i = 0; i < n; ++i)
                alpha[i] = a2[i];
        }
    }

    /* ---- gather alpha and g ---- */
    for (t = 0; t < sh.nt; ++t) {
        const ck_agcd_worker *w = &workers[t];
        int64_t k;
        for (k = 0; k < w->m; ++k) {
            alpha[w->rows[k]] = w->a[k];
            grad[w->rows[k]] = w->g[k];
        }
    }
    {
        double obj = 0.0, maxpg = 0.0;
        int64_t total = sh.head & ~CK_AGCD_COLLAPSE_BIT;
        for (i = 0; i < n; ++i) {
            const double v = fabs(ck_agcd_pg(alpha[i], grad[i], upper[i]));
            if (!(v <= maxpg))
                maxpg = v; /* NaN wins */
            obj += alpha[i] * (grad[i] - 1.0);
        }
        if (max_iter > 0 && total > max_iter)
            total = max_iter; /* the over-claims were not performed */
        *objective = 0.5 * obj;
        *n_updates = total;
        *converged = maxpg <= tol;
    }
    if (opts != NULL) {
        opts->n_slices = 0;
        opts->slice_seconds = 0.0;
        opts->fm_threads = 0;
        opts->capacity = 0;
        opts->max_delay = sh.delay;
        opts->forced_steps = sh.forced_steps;
        opts->collapsed = collapsed;
        opts->n_slices = n_slices;
        opts->slice_seconds = slice_seconds;
        opts->rebuilds = n_rebuilds;
        opts->active_sum = active_sum;
        for (t = 0; t < sh.nt; ++t) {
            const ck_agcd_worker *w = &workers[t];
            if (w->capacity > opts->capacity)
                opts->capacity = w->capacity;
            if (w->m > 0)
                opts->page_doubles = w->cache.page;
            opts->n_slices += w->n_slices + w->cache.n_computed;
            opts->slice_seconds += w->slice_seconds + w->cache.seconds;
            opts->rebuilds += w->n_rebuilds;
            opts->active_sum += w->active_sum;
            opts->fm_threads += ck_fmajor_built(&w->fm);
        }
    }

cleanup:
    if (workers != NULL) {
        for (t = 0; t < T; ++t)
            ck_agcd_worker_free(&workers[t]);
    }
    free(workers);
    free(sh.log);
    free(slots_raw);
    free(QD);
    free(sq);
    free(a2);
    free(gbar_all);
    free(bstart);
    free(bidx);
    free(fill);
    return st;
}
