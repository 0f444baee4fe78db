/*
 * ck_rows.c -- rows of the kernel matrix for the solvers, on dense or CSR
 * training data (ck_matrix).  Plain C99; no Python.h.
 *
 * Dense dot products run four rows at a time (four independent dependency
 * chains, each summed in the order k = 0 .. d-1, so the values do not
 * depend on the blocking).  CSR rows scatter x_i into a dense scratch
 * vector once and then gather along each row's stored entries, again in
 * increasing column order: the products skipped are exact zeros, so CSR and
 * dense give the same bits.  Rows too wide for a scratch per thread
 * (ck_csr_scratch) merge the two rows' sorted indices instead, with the
 * same sums.
 *
 * A feature-major copy of a row subset (ck_fmajor) turns a kernel row into
 * one contiguous, vectorised axpy per nonzero feature of x_i; the Asy-GCD
 * workers use it when the copy is small next to the cache budget.
 */
#include "ck_internal.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

ck_status ck_matrix_check(const ck_matrix *X)
{
    int64_t i;
    if (X == NULL || X->n_rows < 0 || X->n_cols < 0)
        return CK_ERR_ARG;
    if (X->n_cols > 0 && X->n_rows > INT64_MAX / X->n_cols)
        return CK_ERR_ARG;
    if (X->dense != NULL) {
        const int64_t nd = X->n_rows * X->n_cols;
        for (i = 0; i < nd; ++i) {
            if (!isfinite(X->dense[i]))
                return CK_ERR_ARG;
        }
        return CK_OK;
    }
    if (X->indptr == NULL || X->indptr[0] != 0)
        return CK_ERR_ARG;
    if (X->indptr[X->n_rows] > 0 && (X->indices == NULL || X->values == NULL))
        return CK_ERR_ARG;
    /* the row pointers first: 0 = indptr[0] <= ... <= indptr[n_rows] (the
     * caller's nnz), so that no row's scan below leaves the arrays */
    for (i = 0; i < X->n_rows; ++i) {
        if (X->indptr[i + 1] < X->indptr[i])
            return CK_ERR_ARG;
    }
    for (i = 0; i < X->n_rows; ++i) {
        const int64_t lo = X->indptr[i], hi = X->indptr[i + 1];
        int64_t k, last = -1;
        if (hi < lo)
            return CK_ERR_ARG;
        for (k = lo; k < hi; ++k) {
            const int64_t c = X->indices[k];
            if (c <= last || c >= X->n_cols || !isfinite(X->values[k]))
                return CK_ERR_ARG;
            last = c;
        }
    }
    return CK_OK;
}

ck_status ck_kparams_check(const ck_kparams *kp)
{
    if (kp->kind < CK_KERNEL_LINEAR || kp->kind > CK_KERNEL_SIGMOID)
        return CK_ERR_UNKNOWN_KERNEL;
    if (!isfinite(kp->gamma) || !isfinite(kp->coef0) ||
        !isfinite(kp->degree) || !(kp->shift >= 0.0) || !isfinite(kp->shift))
        return CK_ERR_ARG;
    if (kp->kind == CK_KERNEL_POLY && kp->degree < 0.0)
        return CK_ERR_ARG;
    return CK_OK;
}

ck_status ck_check_problem(const ck_matrix *X, const double *y,
                           const double *upper, const ck_kparams *kp,
                           double tol, double cache_bytes,
                           int64_t min_columns, int64_t *capacity)
{
    int64_t i, n;
    double col_bytes;
    ck_status st;
    if (y == NULL || upper == NULL || capacity == NULL)
        return CK_ERR_ARG;
    st = ck_matrix_check(X);
    if (st != CK_OK)
        return st;
    n = X->n_rows;
    if (n < 1)
        return CK_ERR_ARG;
    st = ck_kparams_check(kp);
    if (st != CK_OK)
        return st;
    if (!(tol > 0.0) || !isfinite(tol))
        return CK_ERR_ARG;
    for (i = 0; i < n; ++i) {
        if (y[i] != 1.0 && y[i] != -1.0)
            return CK_ERR_ARG;
        if (!(upper[i] > 0.0) || !isfinite(upper[i]))
            return CK_ERR_ARG;
    }
    col_bytes = (double)n * (double)sizeof(double);
    if (!(cache_bytes > 0.0) || cache_bytes < (double)min_columns * col_bytes)
        return CK_ERR_ARG; /* NaN too */
    *capacity = cache_bytes >= (double)n * col_bytes
                    ? n : (int64_t)(cache_bytes / col_bytes);
    return CK_OK;
}

void ck_matrix_sqnorms(const ck_matrix *X, double *out)
{
    const int64_t n = X->n_rows, d = X->n_cols;
    int64_t i, k;
    for (i = 0; i < n; ++i) {
        double s = 0.0;
        if (X->dense != NULL) {
            const double *xi = X->dense + i * d;
            for (k = 0; k < d; ++k)
                s += xi[k] * xi[k];
        } else {
            for (k = X->indptr[i]; k < X->indptr[i + 1]; ++k)
                s += X->values[k] * X->values[k];
        }
        out[i] = s;
    }
}

ck_status ck_kernel_diag(const ck_kparams *kp, const double *sq, int64_t n,
                         double *out)
{
    int64_t i;
    ck_status st;
    if (kp->kind == CK_KERNEL_RBF) {
        for (i = 0; i < n; ++i)
            out[i] = 1.0 + kp->shift;
        return CK_OK;
    }
    for (i = 0; i < n; ++i)
        out[i] = sq[i];
    /* K(x_i, x_i) = transform of <x_i, x_i>, an n x 1 block */
    st = ck_kernel_from_gram(out, n, 1, 1, NULL, NULL, kp->kind, kp->gamma,
                             kp->coef0, kp->degree, 1);
    if (st != CK_OK)
        return st;
    for (i = 0; i < n; ++i) {
        out[i] += kp->shift;
        if (!isfinite(out[i]))
            return CK_ERR_ARG;
    }
    return CK_OK;
}

/* out[j] = <x_i, x_rows[j]> for dense X */
static void ck_dots_dense(const double *X, int64_t d, int64_t i,
                          const int64_t *rows, int64_t len, double *out)
{
    const double *xi = X + i * d;
    int64_t j = 0, k;
    for (; j + 4 <= len; j += 4) {
        const double *x0 = X + rows[j] * d, *x1 = X + rows[j + 1] * d;
        const double *x2 = X + rows[j + 2] * d, *x3 = X + rows[j + 3] * d;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        for (k = 0; k < d; ++k) {
            const double v = xi[k];
            s0 += v * x0[k];
            s1 += v * x1[k];
            s2 += v * x2[k];
            s3 += v * x3[k];
        }
        out[j] = s0;
        out[j + 1] = s1;
        out[j + 2] = s2;
        out[j + 3] = s3;
    }
    for (; j < len; ++j) {
        const double *xj = X + rows[j] * d;
        double s = 0.0;
        for (k = 0; k < d; ++k)
            s += xi[k] * xj[k];
        out[j] = s;
    }
}

int ck_csr_scratch(const ck_matrix *X, int T)
{
    return X->dense == NULL && X->n_cols > 0 && T >= 1 &&
           X->n_cols <= CK_CSR_SCRATCH_MAX_DOUBLES / T;
}

/* out[j] = <x_i, x_rows[j]> for CSR X without scratch: the stored indices of
 * both rows merged (sorted and unique within rows, ck_matrix_check), the
 * products summed in row j's column order as ck_dots_csr does (the zero
 * products it adds leave a sum that is never -0 unchanged) */
static void ck_dots_csr_merge(const ck_matrix *X, int64_t i, const int64_t *rows,
                              int64_t len, double *out)
{
    const int64_t *indptr = X->indptr, *ind = X->indices;
    const double *val = X->values;
    const int64_t a0 = indptr[i], a1 = indptr[i + 1];
    int64_t j;
    for (j = 0; j < len; ++j) {
        const int64_t r = rows[j];
        int64_t a = a0, b = indptr[r];
        const int64_t b1 = indptr[r + 1];
        double s = 0.0;
        while (a < a1 && b < b1) {
            if (ind[a] == ind[b]) {
                s += val[a] * val[b];
                ++a;
                ++b;
            } else if (ind[a] < ind[b]) {
                ++a;
            } else {
                ++b;
            }
        }
        out[j] = s;
    }
}

/* out[j] = <x_i, x_rows[j]> for CSR X; work: n_cols zeros in and out (NULL:
 * ck_dots_csr_merge) */
static void ck_dots_csr(const ck_matrix *X, int64_t i, const int64_t *rows,
                        int64_t len, double *out, double *work)
{
    const int64_t *indptr = X->indptr, *ind = X->indices;
    const double *val = X->values;
    int64_t j, k;
    if (work == NULL) {
        ck_dots_csr_merge(X, i, rows, len, out);
        return;
    }
    for (k = indptr[i]; k < indptr[i + 1]; ++k)
        work[ind[k]] = val[k];
    for (j = 0; j < len; ++j) {
        const int64_t r = rows[j];
        double s = 0.0;
        for (k = indptr[r]; k < indptr[r + 1]; ++k)
            s += work[ind[k]] * val[k];
        out[j] = s;
    }
    for (k = indptr[i]; k < indptr[i + 1]; ++k)
        work[ind[k]] = 0.0;
}

/* out[j] = yi * row_y[j] * (K + shift) from the dot products in out */
static ck_status ck_q_finish(const ck_kparams *kp, double yi, double sqi,
                             const double *row_y, const double *row_sq,
                             int64_t len, double *out)
{
    int64_t j;
    ck_status st;
    st = ck_kernel_from_gram(out, 1, len, len,
                             kp->kind == CK_KERNEL_RBF ? &sqi : NULL,
                             kp->kind == CK_KERNEL_RBF ? row_sq : NULL,
                             kp->kind, kp->gamma, kp->coef0, kp->degree, 1);
    if (st != CK_OK)
        return st;
    if (kp->shift != 0.0) {
        for (j = 0; j < len; ++j)
            out[j] = (out[j] + kp->shift) * (yi * row_y[j]);
    } else {
        for (j = 0; j < len; ++j)
            out[j] *= yi * row_y[j];
    }
    return CK_OK;
}

ck_status ck_q_row(const ck_matrix *X, const ck_kparams *kp, int64_t i,
                   double yi, double sqi, const int64_t *rows,
                   const double *row_y, const double *row_sq, int64_t len,
                   double *out, double *work)
{
    if (len <= 0)
        return CK_OK;
    if (X->dense != NULL)
        ck_dots_dense(X->dense, X->n_cols, i, rows, len, out);
    else
        ck_dots_csr(X, i, rows, len, out, work);
    return ck_q_finish(kp, yi, sqi, row_y, row_sq, len, out);
}

/* ------------------------------------------------------------------------ */
/* Feature-major copies                                                     */
/* ------------------------------------------------------------------------ */

int ck_matrix_float_exact(const ck_matrix *X)
{
    const double *v = X->dense != NULL ? X->dense : X->values;
    const int64_t len = X->dense != NULL ? X->n_rows * X->n_cols
                                         : X->indptr[X->n_rows];
    int64_t k;
    for (k = 0; k < len; ++k) {
        /* out of float's range the conversion is undefined: test first */
        if (!(fabs(v[k]) <= (double)FLT_MAX) || (double)(float)v[k] != v[k])
            return 0;
    }
    return 1;
}

/* element k * m + j of the copy */
static void ck_fmajor_set(ck_fmajor *f, int64_t pos, double v)
{
    if (f->xf != NULL)
        f->xf[pos] = (float)v;
    else
        f->xt[pos] = v;
}

ck_status ck_fmajor_init(ck_fmajor *f, const ck_matrix *X,
                         const int64_t *rows, int64_t m, int use_float)
{
    const int64_t d = X->n_cols;
    const size_t esize = use_float ? sizeof(float) : sizeof(double);
    int64_t j, k;
    void *mem;
    f->m = m;
    f->d = d;
    f->X = X;
    f->xt = NULL;
    f->xf = NULL;
    if (m <= 0 || d <= 0)
        return CK_OK;
    if ((uint64_t)d > (uint64_t)(SIZE_MAX / esize) / (uint64_t)m)
        return CK_ERR_NOMEM;
    /* dense: every element is written; CSR: zeros first */
    mem = X->dense != NULL ? malloc((size_t)m * (size_t)d * esize)
                           : calloc((size_t)m * (size_t)d, esize);
    if (mem == NULL)
        return CK_ERR_NOMEM;
    if (use_float)
        f->xf = (float *)mem;
    else
        f->xt = (double *)mem;
    if (X->dense != NULL) {
        /* by blocks of rows, so that the reads stay in cache */
        for (j = 0; j < m; j += 16) {
            const int64_t j1 = j + 16 < m ? j + 16 : m;
            int64_t jj;
            for (k = 0; k < d; ++k) {
                for (jj = j; jj < j1; ++jj)
                    ck_fmajor_set(f, k * m + jj, X->dense[rows[jj] * d + k]);
            }
        }
    } else {
        for (j = 0; j < m; ++j) {
            const int64_t r = rows[j];
            for (k = X->indptr[r]; k < X->indptr[r + 1]; ++k)
                ck_fmajor_set(f, X->indices[k] * m + j, X->values[k]);
        }
    }
    return CK_OK;
}

void ck_fmajor_free(ck_fmajor *f)
{
    free(f->xt);
    free(f->xf);
    f->xt = NULL;
    f->xf = NULL;
}

/* Output in pages (ck_page_at, ck_internal.h).
 *
 * out[a .. b) += v * x[a .. b), out in pages (the loop over the pages inside
 * the vectorised clone: a call per page cost 20% of the SMO's kernel
 * columns on 256-entry pages); T: double, or float for an exact float copy
 * ((double)x[j] is the original value) */
#define CK_DEFINE_FMAJOR_AXPY(NAME, T)                                       \
    CK_CLONES static void NAME(int64_t a, int64_t b, double v,               \
                               const T *CK_RESTRICT x, double *const *pages,    \
                               int shift, int64_t base)                      \
    {                                                                        \
        int64_t k, e, j;                                                     \
        for (k = a; k < b; k = e) {                                          \
            double *CK_RESTRICT out = ck_page_at(pages, shift, base, k);        \
            const T *CK_RESTRICT xk = x + k;                                    \
            e = ck_page_end(k, b, shift, base);                              \
            for (j = 0; j < e - k; ++j)                                      \
                out[j] += v * (double)xk[j];                                 \
        }                                                                    \
    }

CK_DEFINE_FMAJOR_AXPY(ck_fmajor_axpy, double)
CK_DEFINE_FMAJOR_AXPY(ck_fmajor_axpy_f, float)

/* Four of those axpys in one pass: out[j] = (((out[j] + v0 x0[j]) + v1 x1[j])
 * + v2 x2[j]) + v3 x3[j], the same roundings in the same order as four
 * passes (no FMA contraction, setup.py), so the same bits, with out loaded
 * and stored once instead of four times (the passes were bound by those
 * loads and stores: kernel columns 1.2x faster on ijcnn1, SMO fits on
 * usps' 256 features 1.24x); init: out starts from 0.0 (not read). */
#define CK_DEFINE_FMAJOR_AXPY4(NAME, T)                                      \
    CK_CLONES static void NAME(int64_t a, int64_t b, const double *v,        \
                               const T *const *x, int init,                  \
                               double *const *pages, int shift,              \
                               int64_t base)                                 \
    {                                                                        \
        const double v0 = v[0], v1 = v[1], v2 = v[2], v3 = v[3];             \
        int64_t k, e, j;                                                     \
        for (k = a; k < b; k = e) {                                          \
            double *CK_RESTRICT out = ck_page_at(pages, shift, base, k);        \
            const T *CK_RESTRICT x0 = x[0] + k, *CK_RESTRICT x1 = x[1] + k;        \
            const T *CK_RESTRICT x2 = x[2] + k, *CK_RESTRICT x3 = x[3] + k;        \
            e = ck_page_end(k, b, shift, base);                              \
            /* two loops: one with `init ? 0.0 : out[j]` measured 2-4%    \
             * slower (ijcnn1's columns) */                                  \
            if (init) {                                                      \
                for (j = 0; j < e - k; ++j) {                                \
                    double o = 0.0;                                          \
                    o += v0 * (double)x0[j];                                 \
                    o += v1 * (double)x1[j];                                 \
                    o += v2 * (double)x2[j];                                 \
                    o += v3 * (double)x3[j];                                 \
                    out[j] = o;                                              \
                }                                                            \
            } else {                                                         \
                for (j = 0; j < e - k; ++j) {                                \
                    double o = out[j];                                       \
                    o += v0 * (double)x0[j];                                 \
                    o += v1 * (double)x1[j];                                 \
                    o += v2 * (double)x2[j];                                 \
                    o += v3 * (double)x3[j];                                 \
                    out[j] = o;                                              \
                }                                                            \
            }                                                                \
        }                                                                    \
    }

CK_DEFINE_FMAJOR_AXPY4(ck_fmajor_axpy4, double)
CK_DEFINE_FMAJOR_AXPY4(ck_fmajor_axpy4_f, float)

/* out[c0 .. c1) += v * (row k of the copy)[c0 .. c1) */
static void ck_fmajor_add(const ck_fmajor *f, int64_t k, int64_t c0,
                          int64_t c1, double v, double *const *pages,
                          int shift, int64_t base)
{
    if (f->xf != NULL)
        ck_fmajor_axpy_f(c0, c1, v, f->xf + k * f->m, pages, shift, base);
    else
        ck_fmajor_axpy(c0, c1, v, f->xt + k * f->m, pages, shift, base);
}

/* out[c0 .. c1) (+)= sum_t v[t] * (row k[t] of the copy)[c0 .. c1), t = 0..3
 * in order (init: out starts from 0) */
static void ck_fmajor_add4(const ck_fmajor *f, const int64_t *k, int64_t c0,
                           int64_t c1, const double *v, int init,
                           double *const *pages, int shift, int64_t base)
{
    int t;
    if (f->xf != NULL) {
        const float *x[4];
        for (t = 0; t < 4; ++t)
            x[t] = f->xf + k[t] * f->m;
        ck_fmajor_axpy4_f(c0, c1, v, x, init, pages, shift, base);
    } else {
        const double *x[4];
        for (t = 0; t < 4; ++t)
            x[t] = f->xt + k[t] * f->m;
        ck_fmajor_axpy4(c0, c1, v, x, init, pages, shift, base);
    }
}

/* out[a .. b) = 0, out in pages */
static void ck_pages_zero(int64_t a, int64_t b, double *const *pages,
                          int shift, int64_t base)
{
    int64_t k, e;
    for (k = a; k < b; k = e) {
        e = ck_page_end(k, b, shift, base);
        memset(ck_page_at(pages, shift, base, k), 0,
               (size_t)(e - k) * sizeof(double));
    }
}

/* x_i's nonzeros in increasing feature order (as ck_q_row sums them), into
 * out[c0 .. c1): four at a time, the rest one by one */
static void ck_fmajor_chunk(const ck_matrix *X, const ck_fmajor *f,
                            int64_t i, int64_t c0, int64_t c1,
                            double *const *pages, int shift, int64_t base)
{
    const int64_t p0 = X->dense != NULL ? 0 : X->indptr[i];
    const int64_t p1 = X->dense != NULL ? f->d : X->indptr[i + 1];
    const double *xv = X->dense != NULL ? X->dense + i * f->d : X->values;
    int64_t p, k[4];
    double v[4];
    int g = 0, written = 0, t;
    for (p = p0; p < p1; ++p) {
        if (xv[p] == 0.0)
            continue;
        k[g] = X->dense != NULL ? p : X->indices[p];
        v[g] = xv[p];
        if (++g == 4) {
            ck_fmajor_add4(f, k, c0, c1, v, !written, pages, shift, base);
            written = 1;
            g = 0;
        }
    }
    if (!written)
        ck_pages_zero(c0, c1, pages, shift, base);
    for (t = 0; t < g; ++t)
        ck_fmajor_add(f, k[t], c0, c1, v[t], pages, shift, base);
}

/* the output in pieces that stay in L1 while x_i's features stream by */
#define CK_FMAJOR_CHUNK 2048

ck_status ck_q_range_fmajor(const ck_matrix *X, const ck_fmajor *f,
                            const ck_kparams *kp, int64_t i, double yi,
                            double sqi, const double *row_y,
                            const double *row_sq, int64_t start, int64_t end,
                            double *const *pages, int shift, int64_t base)
{
    int64_t c0, k, e;
    ck_status st = CK_OK;
    if (end <= start)
        return CK_OK;
    for (c0 = start; c0 < end; c0 += CK_FMAJOR_CHUNK)
        ck_fmajor_chunk(X, f, i, c0,
                        c0 + CK_FMAJOR_CHUNK < end ? c0 + CK_FMAJOR_CHUNK : end,
                        pages, shift, base);
    for (k = start; k < end && st == CK_OK; k = e) {
        e = ck_page_end(k, end, shift, base);
        st = ck_q_finish(kp, yi, sqi, row_y + k, row_sq + k, e - k,
                         ck_page_at(pages, shift, base, k));
    }
    return st;
}

void ck_fmajor_swap(ck_fmajor *f, int64_t a, int64_t b, int64_t row_a,
                    int64_t row_b)
{
    const int64_t m = f->m;
    const ck_matrix *X = f->X;
    int64_t k;
    if (!ck_fmajor_built(f))
        return;
    if (X->dense == NULL) {
        /* CSR: only the two rows' nonzero features hold anything, so the
         * exchange touches nnz(row_a) + nnz(row_b) features, not all n_cols
         * (a wide sparse X made every shrink's swaps O(n_cols) each).
         * Position a held row_b and b held row_a: clear those entries,
         * then write the rows where they now stand, as ck_fmajor_init
         * does (the same values, bit for bit). */
        for (k = X->indptr[row_b]; k < X->indptr[row_b + 1]; ++k)
            ck_fmajor_set(f, X->indices[k] * m + a, 0.0);
        for (k = X->indptr[row_a]; k < X->indptr[row_a + 1]; ++k)
            ck_fmajor_set(f, X->indices[k] * m + b, 0.0);
        for (k = X->indptr[row_a]; k < X->indptr[row_a + 1]; ++k)
            ck_fmajor_set(f, X->indices[k] * m + a, X->values[k]);
        for (k = X->indptr[row_b]; k < X->indptr[row_b + 1]; ++k)
            ck_fmajor_set(f, X->indices[k] * m + b, X->values[k]);
    } else if (f->xf != NULL) {
        for (k = 0; k < f->d; ++k) {
            const float t = f->xf[k * m + a];
            f->xf[k * m + a] = f->xf[k * m + b];
            f->xf[k * m + b] = t;
        }
    } else {
        for (k = 0; k < f->d; ++k) {
            const double t = f->xt[k * m + a];
            f->xt[k * m + a] = f->xt[k * m + b];
            f->xt[k * m + b] = t;
        }
    }
}
