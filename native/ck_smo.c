/*
 * ck_smo.c -- SMO solver for the binary SVM dual with bias (C-SVC).
 *
 * Plain C99 (+ optional OpenMP for the kernel columns); no Python.h.  See
 * cakernels.h for the contract.  The algorithm is LIBSVM's Solver (Fan, Chen
 * and Lin, JMLR 2005) without shrinking:
 *   - second-order working-set selection ("WSS2") with tau = 1e-12 for
 *     non-positive-definite kernels;
 *   - the two-variable sub-problem solved analytically and clipped to the
 *     box [0, C_i] x [0, C_j] along the line y^T alpha = const;
 *   - the full gradient G = Q alpha - e kept up to date (two kernel columns
 *     per iteration);
 *   - kernel columns computed on demand (dot products here, the kernel
 *     transform by ck_kernel_from_gram so the values match the rest of the
 *     package bit for bit) and kept in an LRU cache under a byte budget;
 *   - rho as in LIBSVM's calculate_rho (mean of y_i G_i over free vectors,
 *     else the midpoint of the feasible interval).
 */
#include "cakernels.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#define CK_SMO_TAU 1e-12

/* Dot products of one column: below this many multiply-adds the calling
 * thread does the work alone. */
#define CK_SMO_PARALLEL_MIN_FLOPS ((int64_t)262144)

/* ======================================================================== */
/* LRU cache of Q columns                                                   */
/* ======================================================================== */
/* Q_ij = y_i y_j K(x_i, x_j) is symmetric, so column j is also row j.      */

typedef struct {
    const double *X;
    const double *y;
    const double *sqnorm; /* |x_i|^2 (RBF only, else NULL) */
    int64_t n, d;
    int kind;
    double gamma, coef0, degree;

    int64_t capacity;  /* max. number of columns held                   */
    int64_t n_alloc;   /* slots allocated so far (<= capacity)          */
    double **slot;     /* slot -> column data (n doubles)               */
    int64_t *slot_col; /* slot -> column index, -1 when free            */
    int64_t *col_slot; /* column -> slot, -1 when not cached            */
    int64_t *prev, *next; /* doubly linked LRU list over slots          */
    int64_t head, tail;   /* head: most recently used; tail: least      */
} ck_qcache;

static void ck_qcache_free(ck_qcache *c)
{
    int64_t s;
    if (c->slot != NULL) {
        for (s = 0; s < c->n_alloc; ++s)
            free(c->slot[s]);
    }
    free(c->slot);
    free(c->slot_col);
    free(c->col_slot);
    free(c->prev);
    free(c->next);
    c->slot = NULL;
    c->slot_col = c->col_slot = c->prev = c->next = NULL;
}

static ck_status ck_qcache_init(ck_qcache *c, int64_t capacity)
{
    int64_t i;
    c->capacity = capacity;
    c->n_alloc = 0;
    c->head = c->tail = -1;
    c->slot = (double **)calloc((size_t)capacity, sizeof(double *));
    c->slot_col = (int64_t *)malloc((size_t)capacity * sizeof(int64_t));
    c->prev = (int64_t *)malloc((size_t)capacity * sizeof(int64_t));
    c->next = (int64_t *)malloc((size_t)capacity * sizeof(int64_t));
    c->col_slot = (int64_t *)malloc((size_t)c->n * sizeof(int64_t));
    if (c->slot == NULL || c->slot_col == NULL || c->prev == NULL ||
        c->next == NULL || c->col_slot == NULL) {
        ck_qcache_free(c);
        return CK_ERR_NOMEM;
    }
    for (i = 0; i < c->n; ++i)
        c->col_slot[i] = -1;
    for (i = 0; i < capacity; ++i)
        c->slot_col[i] = -1;
    return CK_OK;
}

static void ck_lru_unlink(ck_qcache *c, int64_t s)
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

static void ck_lru_push_front(ck_qcache *c, int64_t s)
{
    c->prev[s] = -1;
    c->next[s] = c->head;
    if (c->head >= 0)
        c->prev[c->head] = s;
    c->head = s;
    if (c->tail < 0)
        c->tail = s;
}

/* Fill `col` with Q[:, i]. */
static ck_status ck_qcache_compute(const ck_qcache *c, int64_t i, double *col)
{
    const int64_t n = c->n, d = c->d;
    const double *xi = c->X + i * d;
    const double yi = c->y[i];
    int64_t j;
    ck_status st;
#ifdef _OPENMP
    const int use_threads = n * d >= CK_SMO_PARALLEL_MIN_FLOPS;
#pragma omp parallel for schedule(static) if (use_threads)
#endif
    for (j = 0; j < n; ++j) {
        const double *xj = c->X + j * d;
        double s = 0.0;
        int64_t k;
        for (k = 0; k < d; ++k)
            s += xi[k] * xj[k];
        col[j] = s;
    }
    st = ck_kernel_from_gram(col, 1, n, n,
                             c->sqnorm != NULL ? c->sqnorm + i : NULL,
                             c->sqnorm, c->kind, c->gamma, c->coef0,
                             c->degree, 0);
    if (st != CK_OK)
        return st;
    for (j = 0; j < n; ++j)
        col[j] *= yi * c->y[j];
    return CK_OK;
}

/* Column i of Q, from the cache or computed (evicting the least recently
 * used column when the cache is full).  The returned pointer stays valid
 * until the next call that has to evict; with capacity >= 2 the column
 * returned by the previous call is never the one evicted. */
static ck_status ck_qcache_get(ck_qcache *c, int64_t i, const double **out)
{
    int64_t s = c->col_slot[i];
    ck_status st;
    if (s >= 0) {
        ck_lru_unlink(c, s);
        ck_lru_push_front(c, s);
        *out = c->slot[s];
        return CK_OK;
    }
    if (c->n_alloc < c->capacity) {
        double *mem = (double *)malloc((size_t)c->n * sizeof(double));
        if (mem != NULL) {
            s = c->n_alloc++;
            c->slot[s] = mem;
        } else if (c->n_alloc >= 2) {
            c->capacity = c->n_alloc; /* the system is out of memory: stop
                                         growing, recycle what we have */
        } else {
            return CK_ERR_NOMEM;
        }
    }
    if (s < 0) { /* evict the least recently used column */
        s = c->tail;
        if (s < 0)
            return CK_ERR_INTERNAL;
        ck_lru_unlink(c, s);
        if (c->slot_col[s] >= 0)
            c->col_slot[c->slot_col[s]] = -1;
        c->slot_col[s] = -1;
    }
    st = ck_qcache_compute(c, i, c->slot[s]);
    if (st != CK_OK) {
        /* leave the slot free (unlinked slots are re-linked on reuse) */
        ck_lru_push_front(c, s);
        return st;
    }
    c->slot_col[s] = i;
    c->col_slot[i] = s;
    ck_lru_push_front(c, s);
    *out = c->slot[s];
    return CK_OK;
}

/* ======================================================================== */
/* Solver                                                                   */
/* ======================================================================== */

/* Repair a warm start: clip to the box (tolerating tiny violations) and
 * restore y^T alpha = 0 by moving mass within the bounds. */
static ck_status ck_smo_project(int64_t n, const double *y,
                                const double *upper, double *alpha)
{
    int64_t i;
    double r = 0.0, scale = 0.0;
    for (i = 0; i < n; ++i) {
        const double a = alpha[i], u = upper[i];
        const double slack = 1e-8 * u;
        if (!isfinite(a) || a < -slack || a > u + slack)
            return CK_ERR_ARG;
        alpha[i] = a < 0.0 ? 0.0 : (a > u ? u : a);
    }
    for (i = 0; i < n; ++i) {
        r += y[i] * alpha[i];
        scale += alpha[i];
    }
    if (fabs(r) > 1e-6 * (scale > 1.0 ? scale : 1.0))
        return CK_ERR_ARG; /* not (nearly) feasible */
    /* r > 0: decrease alpha_i with y_i = +1 or increase those with -1;
     * r < 0: the mirror image. */
    for (i = 0; i < n && r != 0.0; ++i) {
        double room, step;
        const int up = (r > 0.0) == (y[i] < 0.0); /* increase alpha_i? */
        room = up ? upper[i] - alpha[i] : alpha[i];
        step = fabs(r) < room ? fabs(r) : room;
        if (step <= 0.0)
            continue;
        alpha[i] += up ? step : -step;
        r += (r > 0.0 ? -step : step);
        if (alpha[i] < 0.0)
            alpha[i] = 0.0;
        if (alpha[i] > upper[i])
            alpha[i] = upper[i];
    }
    return CK_OK;
}

ck_status ck_smo_solve(const double *X, int64_t n, int64_t d, const double *y,
                       const double *upper, int kind, double gamma,
                       double coef0, double degree, double tol,
                       int64_t max_iter, double cache_bytes, double *alpha,
                       double *rho, double *objective, int64_t *n_iter,
                       int *converged)
{
    ck_qcache cache;
    double *G = NULL, *QD = NULL, *sq = NULL;
    ck_status st = CK_OK;
    int64_t i, j, capacity, iter = 0;
    double col_bytes;
    int done = 0;

    /* ---- validation ---- */
    if (X == NULL || y == NULL || upper == NULL || alpha == NULL ||
        rho == NULL || objective == NULL || n_iter == NULL ||
        converged == NULL)
        return CK_ERR_ARG;
    if (n < 1 || d < 0)
        return CK_ERR_ARG;
    if (d > 0 && n > INT64_MAX / d)
        return CK_ERR_ARG;
    if ((uint64_t)n > (uint64_t)(SIZE_MAX / sizeof(double)))
        return CK_ERR_ARG;
    if (kind < CK_KERNEL_LINEAR || kind > CK_KERNEL_SIGMOID)
        return CK_ERR_UNKNOWN_KERNEL;
    if (!isfinite(gamma) || !isfinite(coef0) || !isfinite(degree))
        return CK_ERR_ARG;
    if (kind == CK_KERNEL_POLY && degree < 0.0)
        return CK_ERR_ARG;
    if (!(tol > 0.0) || !isfinite(tol))
        return CK_ERR_ARG;
    if (!(cache_bytes > 0.0)) /* NaN too; +inf means unlimited */
        return CK_ERR_ARG;
    for (i = 0; i < n; ++i) {
        if (y[i] != 1.0 && y[i] != -1.0)
            return CK_ERR_ARG;
        if (!(upper[i] > 0.0) || !isfinite(upper[i]))
            return CK_ERR_ARG;
    }
    col_bytes = (double)n * (double)sizeof(double);
    if (cache_bytes < 2.0 * col_bytes)
        return CK_ERR_ARG;
    capacity = cache_bytes >= (double)n * col_bytes
                   ? n : (int64_t)(cache_bytes / col_bytes);
    if (capacity > n)
        capacity = n;
    if (capacity < 2) /* n == 1: one column is all there is */
        capacity = n < 2 ? n : 2;

    /* ---- warm start (alpha untouched when it is rejected) ---- */
    {
        double *a2 = (double *)malloc((size_t)n * sizeof(double));
        if (a2 == NULL)
            return CK_ERR_NOMEM;
        memcpy(a2, alpha, (size_t)n * sizeof(double));
        st = ck_smo_project(n, y, upper, a2);
        if (st == CK_OK)
            memcpy(alpha, a2, (size_t)n * sizeof(double));
        free(a2);
        if (st != CK_OK)
            return st;
    }

    memset(&cache, 0, sizeof cache);
    G = (double *)malloc((size_t)n * sizeof(double));
    QD = (double *)malloc((size_t)n * sizeof(double));
    sq = (double *)malloc((size_t)n * sizeof(double));
    if (G == NULL || QD == NULL || sq == NULL) {
        st = CK_ERR_NOMEM;
        goto cleanup;
    }

    /* squared norms with the same loop as the column dot products, so that
     * the RBF diagonal is exactly exp(0) = 1 */
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
        /* diagonal K(x_i, x_i) = transform of <x_i, x_i>, an n x 1 block */
        st = ck_kernel_from_gram(QD, n, 1, 1, NULL, NULL, kind, gamma, coef0,
                                 degree, 0);
        if (st != CK_OK)
            goto cleanup;
    }

    cache.X = X;
    cache.y = y;
    cache.sqnorm = kind == CK_KERNEL_RBF ? sq : NULL;
    cache.n = n;
    cache.d = d;
    cache.kind = kind;
    cache.gamma = gamma;
    cache.coef0 = coef0;
    cache.degree = degree;
    st = ck_qcache_init(&cache, capacity);
    if (st != CK_OK)
        goto cleanup;

    /* ---- gradient G = Q alpha - e ---- */
    for (i = 0; i < n; ++i)
        G[i] = -1.0;
    for (i = 0; i < n; ++i) {
        if (alpha[i] != 0.0) {
            const double *Qi;
            const double ai = alpha[i];
            st = ck_qcache_get(&cache, i, &Qi);
            if (st != CK_OK)
                goto cleanup;
            for (j = 0; j < n; ++j)
                G[j] += ai * Qi[j];
        }
    }

    /* ---- main loop ---- */
    *converged = 0;
    for (;;) {
        double Gmax = -INFINITY, Gmax2 = -INFINITY, obj_diff_min = INFINITY;
        int64_t ii = -1, jj = -1;
        const double *Qi = NULL, *Qj;

        /* WSS2: i maximises -y_t G_t over I_up */
        for (i = 0; i < n; ++i) {
            if (y[i] > 0.0) {
                if (alpha[i] < upper[i] && -G[i] >= Gmax) {
                    Gmax = -G[i];
                    ii = i;
                }
            } else {
                if (alpha[i] > 0.0 && G[i] >= Gmax) {
                    Gmax = G[i];
                    ii = i;
                }
            }
        }
        if (ii >= 0) {
            st = ck_qcache_get(&cache, ii, &Qi);
            if (st != CK_OK)
                goto cleanup;
        }
        /* j: largest decrease of the objective among violating I_low */
        for (j = 0; j < n; ++j) {
            double grad_diff, quad_coef;
            if (y[j] > 0.0) {
                if (!(alpha[j] > 0.0))
                    continue;
                if (G[j] >= Gmax2)
                    Gmax2 = G[j];
                if (ii < 0)
                    continue;
                grad_diff = Gmax + G[j];
                if (grad_diff > 0.0) {
                    double obj_diff;
                    quad_coef = QD[ii] + QD[j] - 2.0 * y[ii] * Qi[j];
                    obj_diff = -(grad_diff * grad_diff) /
                               (quad_coef > 0.0 ? quad_coef : CK_SMO_TAU);
                    if (obj_diff <= obj_diff_min) {
                        jj = j;
                        obj_diff_min = obj_diff;
                    }
                }
            } else {
                if (!(alpha[j] < upper[j]))
                    continue;
                if (-G[j] >= Gmax2)
                    Gmax2 = -G[j];
                if (ii < 0)
                    continue;
                grad_diff = Gmax - G[j];
                if (grad_diff > 0.0) {
                    double obj_diff;
                    quad_coef = QD[ii] + QD[j] + 2.0 * y[ii] * Qi[j];
                    obj_diff = -(grad_diff * grad_diff) /
                               (quad_coef > 0.0 ? quad_coef : CK_SMO_TAU);
                    if (obj_diff <= obj_diff_min) {
                        jj = j;
                        obj_diff_min = obj_diff;
                    }
                }
            }
        }
        if (ii < 0 || jj < 0 || Gmax + Gmax2 <= tol) {
            *converged = 1;
            break;
        }
        if (max_iter > 0 && iter >= max_iter)
            break;

        /* column jj (ii stays cached: it was used last, capacity >= 2) */
        st = ck_qcache_get(&cache, jj, &Qj);
        if (st != CK_OK)
            goto cleanup;
        st = ck_qcache_get(&cache, ii, &Qi);
        if (st != CK_OK)
            goto cleanup;

        /* ---- analytic two-variable update (LIBSVM) ---- */
        {
            const double Ci = upper[ii], Cj = upper[jj];
            const double old_ai = alpha[ii], old_aj = alpha[jj];
            double ai = old_ai, aj = old_aj, dai, daj;
            if (y[ii] != y[jj]) {
                double quad_coef = QD[ii] + QD[jj] + 2.0 * Qi[jj];
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
                double quad_coef = QD[ii] + QD[jj] - 2.0 * Qi[jj];
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
            alpha[ii] = ai;
            alpha[jj] = aj;
            dai = ai - old_ai;
            daj = aj - old_aj;
            for (j = 0; j < n; ++j)
                G[j] += Qi[j] * dai + Qj[j] * daj;
        }
        ++iter;
    }
    done = 1;

cleanup:
    if (done) {
        /* ---- rho (LIBSVM calculate_rho) and objective ---- */
        double ub = INFINITY, lb = -INFINITY, sum_free = 0.0, obj = 0.0;
        int64_t nr_free = 0;
        for (i = 0; i < n; ++i) {
            const double yG = y[i] * G[i];
            if (alpha[i] >= upper[i]) {
                if (y[i] < 0.0)
                    ub = yG < ub ? yG : ub;
                else
                    lb = yG > lb ? yG : lb;
            } else if (alpha[i] <= 0.0) {
                if (y[i] > 0.0)
                    ub = yG < ub ? yG : ub;
                else
                    lb = yG > lb ? yG : lb;
            } else {
                ++nr_free;
                sum_free += yG;
            }
            obj += alpha[i] * (G[i] - 1.0);
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
    }
    ck_qcache_free(&cache);
    free(G);
    free(QD);
    free(sq);
    return st;
}
