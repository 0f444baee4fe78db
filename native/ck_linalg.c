/*
 * ck_linalg.c -- dense linear algebra helpers of the cakernels native core.
 *
 * Plain C99; no Python.h.  LAPACK itself is not linked here: the caller
 * passes the routine (on the Python side, SciPy's LAPACK from
 * scipy.linalg.cython_lapack), so the core uses exactly the BLAS/LAPACK that
 * SciPy ships and the binding can call it with the GIL released -- SciPy's
 * own f2py wrapper of ?potrf holds the GIL, which serialises the per-partition
 * Cholesky factorizations of the 'threads' backend.
 */
#include "cakernels.h"

#include <limits.h>
#include <stddef.h>

ck_status ck_cholesky(ck_dpotrf_fn potrf, double *A, int64_t n, int64_t lda,
                      int lower, int64_t *info)
{
    char uplo = lower ? 'L' : 'U';
    int n_i, lda_i, info_i = 0;

    if (info == NULL)
        return CK_ERR_ARG;
    *info = 0;
    if (potrf == NULL || n < 0 || lda < (n > 1 ? n : 1) || n > INT_MAX ||
        lda > INT_MAX)
        return CK_ERR_ARG;
    if (n == 0)
        return CK_OK;
    if (A == NULL)
        return CK_ERR_ARG;
    n_i = (int)n;
    lda_i = (int)lda;
    potrf(&uplo, &n_i, A, &lda_i, &info_i);
    *info = info_i;
    return info_i < 0 ? CK_ERR_ARG : CK_OK;
}
