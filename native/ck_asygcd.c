/*
 * ck_asygcd.c -- asynchronous greedy coordinate descent (Asy-GCD) for the
 * binary SVM dual WITHOUT bias (thesis ch. 4, eq. 4.9, Algorithms 13-14).
 *
 * Plain C99 (+ optional OpenMP); no Python.h.  See cakernels.h for the
 * contract.  Outline:
 *   - the variables are split into blocks (block[i] in 0..n_threads-1); the
 *     OpenMP thread t owns the blocks b with b % team_size == t (normally
 *     exactly block t) and repeatedly picks, inside one of its blocks, the
 *     variable with the largest |projected gradient| (greedy, Asy-GCD) or a
 *     random one (PSCD, per-block xorshift64* generator);
 *   - one-variable Newton step delta = clip(a_i - g_i / Q_ii, 0, C_i) - a_i
 *     (eq. 4.10; Q_ii <= 0 is replaced by tau = 1e-12 as in LIBSVM);
 *   - the shared gradient g = Q a - e is updated with `omp atomic` adds
 *     (the asynchronous part), and read without locks by the other threads;
 *   - every block has its own LRU cache of Q columns (only columns of its
 *     own variables are ever needed), one contiguous allocation of at most
 *     cache_bytes / n_threads bytes;
 *   - only variables with |projected gradient| > tol are stepped (PSCD
 *     skips random picks already within tol);
 *   - a thread checks the global max |projected gradient| every
 *     |block| updates or when its own blocks have nothing left to do, and
 *     raises a shared stop flag when it is <= tol or when max_iter updates
 *     were made in total;
 *   - after the parallel phase g is recomputed exactly (column by column)
 *     and the KKT test is repeated on it; when the exact test fails (stale
 *     reads, rounding drift of the incrementally updated g) and max_iter is
 *     not reached, another phase is run (at most CK_AGCD_MAX_PHASES).
 */
#include "cakernels.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#if defined(__unix__) || defined(__APPLE__)
#include <sched.h>
#define CK_AGCD_HAVE_SCHED_YIELD 1
#endif
#endif

#define CK_AGCD_TAU 1e-12
#define CK_AGCD_MAX_PHASES 16

/* ======================================================================== */
/* Per-block LRU cache of Q columns                                         */
/* ======================================================================== */

typedef struct {
    const double *X;
    const double *y;
    const double *sqnorm; /* |x_i|^2 (RBF only, else NULL) */
    int64_t n, d;
    int kind;
    double gamma, coef0, degree;
} ck_agcd_problem;

typedef struct {
    int64_t m;          /* number of variables of the block               */
    int64_t capacity;   /* columns held (1 <= capacity <= m), 0 if m == 0  */
    double *mem;        /* capacity * n doubles, contiguous               */
    int64_t *slot_col;  /* slot -> local column index, -1 when free       */
    int64_t *col_slot;  /* local column -> slot, -1 when not cached       */
    int64_t *prev, *next;
    int64_t head, tail; /* head: most recently used                       */
    int64_t n_used;     /* slots used so far                              */
} ck_agcd_cache;

static void ck_agcd_cache_free(ck_agcd_cache *c)
{
    free(c->mem);
    free(c->slot_col);
    free(c->col_slot);
    free(c->prev);
    free(c->next);
    c->mem = NULL;
    c->slot_col = c->col_slot = c->prev = c->next = NULL;
}

/* Allocate a cache of at most `capacity` columns of n doubles for a block
 * of m variables; the capacity is halved while the allocation fails. */
static ck_status ck_agcd_cache_init(ck_agcd_cache *c, int64_t m, int64_t n,
                                    int64_t capacity)
{
    int64_t s;
    memset(c, 0, sizeof *c);
    c->m = m;
    c->head = c->tail = -1;
    if (m == 0)
        return CK_OK;
    if (capacity > m)
        capacity = m;
    if (capacity < 1)
        capacity = 1;
    for (;;) {
        c->mem = (double *)malloc((size_t)capacity * (size_t)n *
                                  sizeof(double));
        if (c->mem != NULL)
            break;
        if (capacity == 1)
            return CK_ERR_NOMEM;
        capacity /= 2;
    }
    c->capacity = capacity;
    c->slot_col = (int64_t *)malloc((size_t)capacity * sizeof(int64_t));
    c->prev = (int64_t *)malloc((size_t)capacity * sizeof(int64_t));
    c->next = (int64_t *)malloc((size_t)capacity * sizeof(int64_t));
    c->col_slot = (int64_t *)malloc((size_t)m * sizeof(int64_t));
    if (c->slot_col == NULL || c->prev == NULL || c->next == NULL ||
        c->col_slot == NULL) {
        ck_agcd_cache_free(c);
        return CK_ERR_NOMEM;
    }
    for (s = 0; s < capacity; ++s)
        c->slot_col[s] = -1;
    for (s = 0; s < m; ++s)
        c->col_slot[s] = -1;
    return CK_OK;
}

static void ck_agcd_unlink(ck_agcd_cache *c, int64_t s)
{
    if (c->prev[s] >= 0)
        c->next[c->prev[s]] = c->next[s];
    else
        c->head = c->next[s];
    if (c->next[s] >= 0)
        c->prev[c->next[s]] = c->prev[s];
    else
        c->tail = c->prev[s];
}

static void ck_agcd_push_front(ck_agcd_cache *c, int64_t s)
{
    c->prev[s] = -1;
    c->next[s] = c->head;
    if (c->head >= 0)
        c->prev[c->head] = s;
    c->head = s;
    if (c->tail < 0)
        c->tail = s;
}

/* Fill `col` with Q[:, i] (serially: the caller is one thread of a team). */
static ck_status ck_agcd_compute(const ck_agcd_problem *p, int64_t i,
                                 double *col)
{
    const int64_t n = p->n, d = p->d;
    const double *xi = p->X + i * d;
    const double yi = p->y[i];
    int64_t j;
    ck_status st;
    for (j = 0; j < n; ++j) {
        const double *xj = p->X + j * d;
        double s = 0.0;
        int64_t k;
        for (k = 0; k < d; ++k)
            s += xi[k] * xj[k];
        col[j] = s;
    }
    st = ck_kernel_from_gram(col, 1, n, n,
                             p->sqnorm != NULL ? p->sqnorm + i : NULL,
                             p->sqnorm, p->kind, p->gamma, p->coef0,
                             p->degree, 1);
    if (st != CK_OK)
        return st;
    for (j = 0; j < n; ++j)
        col[j] *= yi * p->y[j];
    return CK_OK;
}

/* Column i (local index li in its block) of Q, from the block's cache or
 * computed, evicting the least recently used column.  The pointer is valid
 * until the next call on the same cache. */
static ck_status ck_agcd_get(ck_agcd_cache *c, const ck_agcd_problem *p,
                             int64_t i, int64_t li, const double **out)
{
    int64_t s = c->col_slot[li];
    ck_status st;
    if (s >= 0) {
        ck_agcd_unlink(c, s);
        ck_agcd_push_front(c, s);
        *out = c->mem + s * p->n;
        return CK_OK;
    }
    if (c->n_used < c->capacity) {
        s = c->n_used++;
    } else {
        s = c->tail;
        if (s < 0)
            return CK_ERR_INTERNAL;
        ck_agcd_unlink(c, s);
        if (c->slot_col[s] >= 0)
            c->col_slot[c->slot_col[s]] = -1;
        c->slot_col[s] = -1;
    }
    st = ck_agcd_compute(p, i, c->mem + s * p->n);
    if (st != CK_OK) {
        ck_agcd_push_front(c, s); /* free slot, still linked */
        return st;
    }
    c->slot_col[s] = li;
    c->col_slot[li] = s;
    ck_agcd_push_front(c, s);
    *out = c->mem + s * p->n;
    return CK_OK;
}

/* ======================================================================== */
/* Helpers                                                                  */
/* ======================================================================== */

/* Projected gradient of variable i (0 when the KKT conditions hold). */
static double ck_agcd_pg(double a, double g, double u)
{
    if (a <= 0.0)
        return g < 0.0 ? g : 0.0;
    if (a >= u)
        return g > 0.0 ? g : 0.0;
    return g;
}

/* An idle thread waiting for the others: give the core away (matters when
 * the team oversubscribes the machine). */
static void ck_agcd_yield(int nt)
{
#ifdef CK_AGCD_HAVE_SCHED_YIELD
    if (nt > 1)
        sched_yield();
#else
    (void)nt;
#endif
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

/* Exact g = Q a - e: every block adds its columns into its own row of acc
 * (n_blocks x n), then the rows are summed in block order (deterministic
 * for a given alpha). */
static ck_status ck_agcd_exact_grad(const ck_agcd_problem *p,
                                    ck_agcd_cache *caches, int n_blocks,
                                    const int64_t *bstart,
                                    const int64_t *bidx, const double *alpha,
                                    double *acc, int team, double *g)
{
    const int64_t n = p->n;
    ck_status st = CK_OK;
    int b;
    int64_t j;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
#endif
    for (b = 0; b < n_blocks; ++b) {
        double *row = acc + (int64_t)b * n;
        int64_t k, jj;
        ck_status lst = CK_OK;
        for (jj = 0; jj < n; ++jj)
            row[jj] = 0.0;
        for (k = bstart[b]; k < bstart[b + 1] && lst == CK_OK; ++k) {
            const int64_t i = bidx[k];
            const double ai = alpha[i];
            const double *Qi;
            if (ai == 0.0)
                continue;
            lst = ck_agcd_get(&caches[b], p, i, k - bstart[b], &Qi);
            if (lst == CK_OK) {
                for (jj = 0; jj < n; ++jj)
                    row[jj] += ai * Qi[jj];
            }
        }
        if (lst != CK_OK) {
#ifdef _OPENMP
#pragma omp critical(ck_agcd_status)
#endif
            st = lst;
        }
    }
    (void)team;
    if (st != CK_OK)
        return st;
    for (j = 0; j < n; ++j)
        g[j] = -1.0;
    for (b = 0; b < n_blocks; ++b) {
        const double *row = acc + (int64_t)b * n;
        for (j = 0; j < n; ++j)
            g[j] += row[j];
    }
    return CK_OK;
}

/* ======================================================================== */
/* Solver                                                                   */
/* ======================================================================== */

ck_status ck_asygcd_solve(const double *X, int64_t n, int64_t d,
                          const double *y, const double *upper, int kind,
                          double gamma, double coef0, double degree,
                          const int64_t *block, int n_threads, int greedy,
                          uint64_t seed, double tol, int64_t max_iter,
                          double cache_bytes, double *alpha, double *grad,
                          double *objective, int64_t *n_updates,
                          int *converged)
{
    ck_agcd_problem prob;
    ck_agcd_cache *caches = NULL;
    double *QD = NULL, *sq = NULL, *acc = NULL, *a2 = NULL;
    int64_t *bstart = NULL, *bidx = NULL, *fill = NULL;
    uint64_t *rng = NULL; /* one xorshift64* state per block */
    ck_status st = CK_OK;
    int64_t i, total = 0, started = 0;
    double col_bytes, budget, maxpg = INFINITY;
    int T, team, b, phase, hit_max = 0;

    /* ---- validation ---- */
    if (X == NULL || y == NULL || upper == NULL || block == NULL ||
        alpha == NULL || grad == NULL || objective == NULL ||
        n_updates == NULL || converged == NULL)
        return CK_ERR_ARG;
    if (n < 1 || d < 0)
        return CK_ERR_ARG;
    if (d > 0 && n > INT64_MAX / d)
        return CK_ERR_ARG;
    if ((uint64_t)n > (uint64_t)(SIZE_MAX / sizeof(double)) / (uint64_t)n)
        return CK_ERR_ARG; /* n x n doubles must be addressable */
    if (kind < CK_KERNEL_LINEAR || kind > CK_KERNEL_SIGMOID)
        return CK_ERR_UNKNOWN_KERNEL;
    if (!isfinite(gamma) || !isfinite(coef0) || !isfinite(degree))
        return CK_ERR_ARG;
    if (kind == CK_KERNEL_POLY && degree < 0.0)
        return CK_ERR_ARG;
    if (!(tol > 0.0) || !isfinite(tol))
        return CK_ERR_ARG;
    if (!(cache_bytes > 0.0))
        return CK_ERR_ARG;
    T = n_threads > 0 ? n_threads : ck_max_threads();
    if (T < 1)
        T = 1;
    for (i = 0; i < n; ++i) {
        if (y[i] != 1.0 && y[i] != -1.0)
            return CK_ERR_ARG;
        if (!(upper[i] > 0.0) || !isfinite(upper[i]))
            return CK_ERR_ARG;
        if (block[i] < 0 || block[i] >= T)
            return CK_ERR_ARG;
    }
    col_bytes = (double)n * (double)sizeof(double);
    budget = cache_bytes / (double)T;
    if (budget < col_bytes)
        return CK_ERR_ARG;

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

    QD = (double *)malloc((size_t)n * sizeof(double));
    sq = (double *)malloc((size_t)n * sizeof(double));
    bstart = (int64_t *)calloc((size_t)T + 1, sizeof(int64_t));
    bidx = (int64_t *)malloc((size_t)n * sizeof(int64_t));
    fill = (int64_t *)calloc((size_t)T, sizeof(int64_t));
    caches = (ck_agcd_cache *)calloc((size_t)T, sizeof(ck_agcd_cache));
    rng = (uint64_t *)calloc((size_t)T, sizeof(uint64_t));
    if (rng == NULL || QD == NULL || sq == NULL || bstart == NULL ||
        bidx == NULL || fill == NULL || caches == NULL) {
        st = CK_ERR_NOMEM;
        goto cleanup;
    }

    /* squared norms with the same loop as the column dot products, so that
     * the diagonal equals the cached columns' diagonal bit for bit */
    for (i = 0; i < n; ++i) {
        const double *xi = X + i * d;
        double s = 0.0;
        int64_t k;
        for (k = 0; k < d; ++k)
            s += xi[k] * xi[k];
        sq[i] = s;
        QD[i] = s;
    }
    if (kind == CK_KERNEL_RBF) {
        for (i = 0; i < n; ++i)
            QD[i] = 1.0;
    } else {
        st = ck_kernel_from_gram(QD, n, 1, 1, NULL, NULL, kind, gamma, coef0,
                                 degree, 1);
        if (st != CK_OK)
            goto cleanup;
        for (i = 0; i < n; ++i) {
            if (!isfinite(QD[i])) { /* e.g. an overflowing poly kernel */
                st = CK_ERR_ARG;
                goto cleanup;
            }
        }
    }
    prob.X = X;
    prob.y = y;
    prob.sqnorm = kind == CK_KERNEL_RBF ? sq : NULL;
    prob.n = n;
    prob.d = d;
    prob.kind = kind;
    prob.gamma = gamma;
    prob.coef0 = coef0;
    prob.degree = degree;

    /* ---- blocks: counting sort of the indices by block ---- */
    for (i = 0; i < n; ++i)
        ++bstart[block[i] + 1];
    for (b = 0; b < T; ++b)
        bstart[b + 1] += bstart[b];
    for (i = 0; i < n; ++i) {
        const int64_t bb = block[i];
        bidx[bstart[bb] + fill[bb]++] = i;
    }

    /* ---- per-block caches (budget / col_bytes columns each) ---- */
    {
        const double cols = floor(budget / col_bytes);
        const int64_t capacity = cols >= (double)n ? n : (int64_t)cols;
        for (b = 0; b < T; ++b) {
            st = ck_agcd_cache_init(&caches[b], bstart[b + 1] - bstart[b], n,
                                    capacity);
            if (st != CK_OK)
                goto cleanup;
        }
    }
    acc = (double *)malloc((size_t)T * (size_t)n * sizeof(double));
    if (acc == NULL) {
        st = CK_ERR_NOMEM;
        goto cleanup;
    }
#ifdef _OPENMP
    team = T;
#else
    team = 1;
#endif

    memcpy(alpha, a2, (size_t)n * sizeof(double));
    st = ck_agcd_exact_grad(&prob, caches, T, bstart, bidx, alpha, acc, team,
                            grad);
    if (st != CK_OK)
        goto cleanup;

    for (phase = 0;; ++phase) {
        /* exact KKT test */
        maxpg = 0.0;
        for (i = 0; i < n; ++i) {
            const double v = fabs(ck_agcd_pg(alpha[i], grad[i], upper[i]));
            if (!(v <= maxpg))
                maxpg = v; /* NaN wins */
        }
        if (maxpg <= tol || hit_max || phase >= CK_AGCD_MAX_PHASES ||
            (max_iter > 0 && total >= max_iter))
            break;

        /* ---- asynchronous phase ---- */
        {
            int stop = 0;
            int64_t finished = total; /* updates whose g writes are done */
            ck_status pst = CK_OK;
            double *g = grad;
            started = total;          /* updates claimed (= total)       */
#ifdef _OPENMP
#pragma omp parallel num_threads(team)
#endif
            {
                int tid = 0, nt = 1, n_owned, k = 0, idle = 0, my_stop, ob;
                int64_t since_check = 0, check_every = 1, last_seen = -1;
                ck_status lst = CK_OK;
#ifdef _OPENMP
                tid = omp_get_thread_num();
                nt = omp_get_num_threads();
#endif
                n_owned = tid < T ? (T - 1 - tid) / nt + 1 : 0;
                for (ob = 0; ob < n_owned; ++ob) {
                    const int bb = tid + ob * nt;
                    const int64_t m = bstart[bb + 1] - bstart[bb];
                    uint64_t s0 = ck_agcd_splitmix(
                        seed + (uint64_t)bb +
                        0x632BE59BD9B4E019ULL * (uint64_t)phase);
                    rng[bb] = s0 != 0 ? s0 : 0x9E3779B97F4A7C15ULL;
                    if (m > check_every)
                        check_every = m;
                }

                while (n_owned > 0) {
                    int bb;
                    int64_t m, li = -1;
#ifdef _OPENMP
#pragma omp atomic read
#endif
                    my_stop = stop;
                    if (my_stop)
                        break;
                    if (idle >= n_owned) {
                        /* nothing to do in our blocks: global check, unless
                         * no update finished since the last one */
                        int64_t fin;
#ifdef _OPENMP
#pragma omp atomic read seq_cst
#endif
                        fin = finished;
                        if (fin == last_seen) {
                            ck_agcd_yield(nt);
                            continue;
                        }
                        last_seen = fin; /* scans below see at least this */
                    }
                    ob = k;
                    k = (k + 1) % n_owned;
                    bb = tid + ob * nt;
                    m = bstart[bb + 1] - bstart[bb];
                    if (m > 0) {
                        const int64_t *idx = bidx + bstart[bb];
                        double best = tol;
                        if (greedy) {
                            int64_t t;
                            for (t = 0; t < m; ++t) {
                                const int64_t j = idx[t];
                                double gj, v;
#ifdef _OPENMP
#pragma omp atomic read
#endif
                                gj = g[j];
                                v = fabs(ck_agcd_pg(alpha[j], gj, upper[j]));
                                if (v > best) {
                                    best = v;
                                    li = t;
                                }
                            }
                        } else {
                            /* PSCD: a random coordinate; those already
                             * within tol are skipped (no update) */
                            const int64_t t = (int64_t)(
                                ck_agcd_xorshift(&rng[bb]) % (uint64_t)m);
                            const int64_t j = idx[t];
                            double gj;
#ifdef _OPENMP
#pragma omp atomic read
#endif
                            gj = g[j];
                            if (fabs(ck_agcd_pg(alpha[j], gj, upper[j])) > best)
                                li = t;
                            ++since_check; /* a pick, even a skipped one */
                        }
                    }
                    if (li >= 0) {
                        const int64_t ii = bidx[bstart[bb] + li];
                        const double ai = alpha[ii], ui = upper[ii];
                        const double q = QD[ii] > 0.0 ? QD[ii] : CK_AGCD_TAU;
                        double gi, an, delta;
                        int64_t mine;
                        /* claim one update of the global budget */
#ifdef _OPENMP
#pragma omp atomic capture seq_cst
#endif
                        mine = started++;
                        if (max_iter > 0 && mine >= max_iter) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
                            stop = 1;
                            break;
                        }
#ifdef _OPENMP
#pragma omp atomic read
#endif
                        gi = g[ii];
                        an = ai - gi / q;
                        an = an < 0.0 ? 0.0 : (an > ui ? ui : an);
                        delta = an - ai;
                        if (delta != 0.0) {
                            const double *Qi;
                            int64_t j;
                            lst = ck_agcd_get(&caches[bb], &prob, ii, li, &Qi);
                            if (lst != CK_OK) {
#ifdef _OPENMP
#pragma omp critical(ck_agcd_status)
#endif
                                pst = lst;
#ifdef _OPENMP
#pragma omp atomic write
#endif
                                stop = 1;
                                break;
                            }
#ifdef _OPENMP
#pragma omp atomic write
#endif
                            alpha[ii] = an;
                            if (nt > 1) {
                                for (j = 0; j < n; ++j) {
                                    const double v = delta * Qi[j];
#ifdef _OPENMP
#pragma omp atomic
#endif
                                    g[j] += v;
                                }
                            } else {
                                for (j = 0; j < n; ++j)
                                    g[j] += delta * Qi[j];
                            }
                        }
#ifdef _OPENMP
#pragma omp atomic seq_cst
#endif
                        ++finished;
                        if (greedy)
                            ++since_check;
                        idle = 0;
                    } else if (greedy || m == 0) {
                        ++idle;
                    }
                    if (idle >= n_owned || since_check >= check_every) {
                        /* global check of max |projected gradient|, valid
                         * only on a quiet snapshot: every update started
                         * before the scan ended had finished before it
                         * began */
                        double gmax = 0.0;
                        int64_t j, f0, s1;
                        since_check = 0;
#ifdef _OPENMP
#pragma omp atomic read seq_cst
#endif
                        f0 = finished;
                        for (j = 0; j < n; ++j) {
                            double gj, aj, v;
#ifdef _OPENMP
#pragma omp atomic read
#endif
                            gj = g[j];
#ifdef _OPENMP
#pragma omp atomic read
#endif
                            aj = alpha[j];
                            v = fabs(ck_agcd_pg(aj, gj, upper[j]));
                            if (!(v <= gmax))
                                gmax = v;
                        }
#ifdef _OPENMP
#pragma omp atomic read seq_cst
#endif
                        s1 = started;
                        if ((gmax <= tol && s1 == f0) || isnan(gmax)) {
#ifdef _OPENMP
#pragma omp atomic write
#endif
                            stop = 1;
                        }
                        if (idle > n_owned)
                            idle = n_owned; /* stay idle until a change */
                    }
                }
            }
            if (pst != CK_OK) {
                st = pst;
                goto cleanup;
            }
            total = started;
            if (max_iter > 0 && total > max_iter) {
                total = max_iter; /* the over-claims were not performed */
                hit_max = 1;
            }
        }
        /* ---- exact gradient after the phase ---- */
        st = ck_agcd_exact_grad(&prob, caches, T, bstart, bidx, alpha, acc,
                                team, grad);
        if (st != CK_OK)
            goto cleanup;
    }

    {
        double obj = 0.0;
        for (i = 0; i < n; ++i)
            obj += alpha[i] * (grad[i] - 1.0);
        *objective = 0.5 * obj;
    }
    *n_updates = total;
    *converged = maxpg <= tol;

cleanup:
    if (caches != NULL) {
        for (b = 0; b < T; ++b)
            ck_agcd_cache_free(&caches[b]);
    }
    free(caches);
    free(QD);
    free(sq);
    free(acc);
    free(a2);
    free(bstart);
    free(bidx);
    free(fill);
    free(rng);
    return st;
}
