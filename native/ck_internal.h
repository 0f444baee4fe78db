/*
 * ck_internal.h -- helpers shared by the solvers of the native core (not
 * part of the public API; no Python.h).
 */
#ifndef CK_INTERNAL_H
#define CK_INTERNAL_H

#include "cakernels.h"

/* Kernel function and its parameters (see ck_kernel_from_gram). */
typedef struct {
    int kind;
    double gamma, coef0, degree;
    double shift; /* added to every kernel value (0: none), see ck_q_row */
} ck_kparams;

/* Check a kernel kind and its parameters: CK_OK, CK_ERR_UNKNOWN_KERNEL or
 * CK_ERR_ARG (non-finite parameter, negative poly degree or shift). */
ck_status ck_kparams_check(const ck_kparams *kp);

/* out[i] = <x_i, x_i> for every row, summed exactly as ck_matrix_dots sums
 * <x_i, x_j>, so that RBF diagonals are exactly 1. */
void ck_matrix_sqnorms(const ck_matrix *X, double *out);

/* Diagonal K(x_i, x_i) + shift from the squared norms (n values);
 * CK_ERR_ARG when a value is not finite (e.g. an overflowing polynomial
 * kernel). */
ck_status ck_kernel_diag(const ck_kparams *kp, const double *sq, int64_t n,
                         double *out);

/*
 * One row of Q restricted to a list of rows:
 *     out[j] = yi * row_y[j] * (K(x_i, x_rows[j]) + kp->shift),  j < len,
 * with row_sq[j] = |x_rows[j]|^2 and sqi = |x_i|^2 (both used by RBF only,
 * from ck_matrix_sqnorms).  Single-threaded.  `work` is scratch space of
 * X->n_cols doubles, all zero on entry and on return (CSR only; may be NULL
 * for dense X).  The values equal ck_kernel_from_gram applied to the same
 * dot products, bit for bit, whatever the row list.
 */
ck_status ck_q_row(const ck_matrix *X, const ck_kparams *kp, int64_t i,
                   double yi, double sqi, const int64_t *rows,
                   const double *row_y, const double *row_sq, int64_t len,
                   double *out, double *work);

#endif /* CK_INTERNAL_H */
