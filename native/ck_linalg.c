/*
 * ck_linalg.c -- dense linear algebra helpers of the cakernels native core.
 *
 * Plain C99; no Python.h.  LAPACK itself is not linked here: the caller
 * passes the routines (on the Python side, SciPy's LAPACK from
 * scipy.linalg.cython_lapack and cython_blas), so the core uses exactly the
 * BLAS/LAPACK that SciPy ships and the binding can call it with the GIL
 * released -- SciPy's own f2py wrappers hold the GIL, which would serialise
 * the tasks of a blocked factorization and the per-partition factorizations
 * of the 'threads' backend.
 */
#include "cakernels.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

ck_status ck_cholesky_task(const ck_chol_routines *f, int task, double *A,
                           int64_t n, int64_t lda, int64_t k0, int64_t k1,
                           int64_t r0, int64_t r1, int64_t *info)
{
    int kb, m, below, ld, sub_info = 0;
    double one = 1.0, minus_one = -1.0;
    char L = 'L', N = 'N', R = 'R', T = 'T';
    double *Akk, *Ark;

    if (info == NULL)
        return CK_ERR_ARG;
    *info = 0;
    if (f == NULL || A == NULL || n < 1 || n > INT_MAX || lda < n || lda > INT_MAX ||
        k0 < 0 || k1 <= k0 || k1 > n)
        return CK_ERR_ARG;
    kb = (int)(k1 - k0);
    ld = (int)lda;
    Akk = A + k0 + k0 * lda;
    if (task == CK_CHOL_DIAG) {
        if (f->potrf == NULL)
            return CK_ERR_ARG;
        f->potrf(&L, &kb, Akk, &ld, &sub_info);
        if (sub_info < 0)
            return CK_ERR_ARG;
        *info = sub_info > 0 ? k0 + sub_info : 0;
        return CK_OK;
    }
    if (r0 < k1 || r1 <= r0 || r1 > n)
        return CK_ERR_ARG;
    m = (int)(r1 - r0);
    Ark = A + r0 + k0 * lda; /* L[r0:r1, k0:k1] */
    if (task == CK_CHOL_PANEL) {
        if (f->trsm == NULL)
            return CK_ERR_ARG;
        f->trsm(&R, &L, &T, &N, &m, &kb, &one, Akk, &ld, Ark, &ld);
        return CK_OK;
    }
    if (task == CK_CHOL_UPDATE) {
        if (f->gemm == NULL || f->syrk == NULL)
            return CK_ERR_ARG;
        below = (int)(n - r1);
        f->syrk(&L, &N, &m, &kb, &minus_one, Ark, &ld, &one, A + r0 + r0 * lda, &ld);
        if (below > 0)
            f->gemm(&N, &T, &below, &m, &kb, &minus_one, A + r1 + k0 * lda, &ld, Ark, &ld,
                    &one, A + r1 + r0 * lda, &ld);
        return CK_OK;
    }
    return CK_ERR_ARG;
}

ck_status ck_eigh(ck_dsyevd_fn syevd, double *A, int64_t n, int64_t lda, double *w,
                  int64_t *info)
{
    char V = 'V', L = 'L';
    int nn, ld, lwork = -1, liwork = -1, iwork_query = 0, sub_info = 0;
    double work_query = 0.0;
    double *work;
    int *iwork;

    if (info == NULL)
        return CK_ERR_ARG;
    *info = 0;
    if (syevd == NULL || A == NULL || w == NULL || n < 1 || n > INT_MAX || lda < n ||
        lda > INT_MAX)
        return CK_ERR_ARG;
    nn = (int)n;
    ld = (int)lda;
    syevd(&V, &L, &nn, A, &ld, w, &work_query, &lwork, &iwork_query, &liwork, &sub_info);
    if (sub_info != 0 || !(work_query >= 1.0) || work_query > (double)INT_MAX ||
        iwork_query < 1)
        return CK_ERR_ARG;
    lwork = (int)work_query;
    if ((double)lwork < work_query && lwork < INT_MAX)
        lwork += 1; /* a size reported as a double may have been rounded down */
    liwork = iwork_query;
    work = (double *)malloc((size_t)lwork * sizeof(double));
    iwork = (int *)malloc((size_t)liwork * sizeof(int));
    if (work == NULL || iwork == NULL) {
        free(work);
        free(iwork);
        return CK_ERR_NOMEM;
    }
    syevd(&V, &L, &nn, A, &ld, w, work, &lwork, iwork, &liwork, &sub_info);
    free(work);
    free(iwork);
    if (sub_info < 0)
        return CK_ERR_ARG;
    *info = sub_info;
    return CK_OK;
}

ck_status ck_norm1(const double *A, int64_t n, int64_t lda, double *norm)
{
    int64_t i, j;
    double value = 0.0, sum;
    const double *col;

    if (A == NULL || norm == NULL || n < 1 || lda < n)
        return CK_ERR_ARG;
    for (j = 0; j < n; j++) {
        col = A + j * lda;
        sum = 0.0;
        for (i = 0; i < n; i++) /* dlange's order: one running sum per column */
            sum += fabs(col[i]);
        if (value < sum || isnan(sum))
            value = sum;
    }
    *norm = value;
    return CK_OK;
}

ck_status ck_chol_solve(ck_dpocon_fn pocon, ck_dpotrs_fn potrs, double *L, int64_t n,
                        int64_t lda, double anorm, double *B, int64_t nrhs, int64_t ldb,
                        double *rcond)
{
    char U = 'L';
    int nn, ld, nr, ldbb, sub_info = 0;
    double *work;
    int *iwork;

    if (pocon == NULL || potrs == NULL || L == NULL || B == NULL || rcond == NULL ||
        n < 1 || nrhs < 1 || lda < n || ldb < n || lda > INT_MAX || ldb > INT_MAX ||
        nrhs > INT_MAX || n > INT_MAX / 3 || !(anorm >= 0.0) || isinf(anorm))
        return CK_ERR_ARG;
    nn = (int)n;
    ld = (int)lda;
    nr = (int)nrhs;
    ldbb = (int)ldb;
    work = (double *)malloc((size_t)n * 3 * sizeof(double));
    iwork = (int *)malloc((size_t)n * sizeof(int));
    if (work == NULL || iwork == NULL) {
        free(work);
        free(iwork);
        return CK_ERR_NOMEM;
    }
    *rcond = 0.0;
    pocon(&U, &nn, L, &ld, &anorm, rcond, work, iwork, &sub_info);
    free(work);
    free(iwork);
    if (sub_info < 0)
        return CK_ERR_ARG;
    potrs(&U, &nn, &nr, L, &ld, B, &ldbb, &sub_info);
    if (sub_info < 0)
        return CK_ERR_ARG;
    return CK_OK;
}
