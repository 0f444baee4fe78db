/*
 * cakernels.h -- public header of the cakernels native core.
 *
 * The core is plain C99 (optionally OpenMP) and never includes Python.h:
 * it works on raw pointers and reports failures through ck_status codes.
 * The CPython binding (_nativemodule.c) validates Python objects, releases
 * the GIL around these calls and maps status codes to Python exceptions.
 *
 * Conventions shared by every routine declared here (kernel blocks now, the
 * SMO and Asy-GCD solvers later):
 *   - sizes, leading dimensions and loop indices are signed 64-bit (int64_t);
 *   - matrices are row-major; `ld` is the distance, in elements, between the
 *     starts of consecutive rows (ld >= n_cols);
 *   - every routine returns a ck_status and never aborts or prints;
 *   - `n_threads <= 0` means "the OpenMP default" (omp_get_max_threads());
 *     a team has at most 256 threads (larger requests run 256); without
 *     OpenMP every routine runs serially and ignores n_threads;
 *   - routines do not keep pointers to caller memory after they return.
 */
#ifndef CAKERNELS_H
#define CAKERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CK_VERSION_MAJOR 0
#define CK_VERSION_MINOR 1
#define CK_VERSION_PATCH 0

/* ------------------------------------------------------------------------
 * Status codes.  Values are part of the ABI: new codes are appended, never
 * renumbered.
 * ------------------------------------------------------------------------ */
typedef enum {
    CK_OK = 0,                 /* success                                    */
    CK_ERR_ARG = 1,            /* invalid argument (NULL, size, non-finite)  */
    CK_ERR_NOMEM = 2,          /* memory allocation failed                   */
    CK_ERR_UNKNOWN_KERNEL = 3, /* kernel kind outside ck_kernel_kind         */
    CK_ERR_INTERNAL = 4,       /* broken invariant inside the core (a bug)   */
    CK_ERR_INTERRUPTED = 5     /* the caller's poll asked the solver to stop */
} ck_status;

/* Static, human-readable description of a status code (never NULL). */
const char *ck_status_string(ck_status status);

/*
 * Cancellation.  A solver given a poll function calls poll(ctx) now and
 * then from its calling thread only (never from its OpenMP team): about
 * every 64 steps of the SMO, every 256 passes of Asy-GCD's thread 0, and
 * every 64 kernel columns while either builds a warm start's gradient or
 * reconstructs a shrunk one, so that a solve stops within milliseconds
 * (per 64 columns); a nonzero return ends the solve
 * with CK_ERR_INTERRUPTED (all memory freed, alpha and the outputs
 * unspecified).  The poll must be cheap (it may throttle itself on a
 * clock); the CPython binding uses it to deliver Ctrl-C during a solve.
 * The plain entry points below never poll (they run to the end).
 */
typedef int (*ck_poll_fn)(void *ctx);

/* ------------------------------------------------------------------------
 * Runtime information.
 * ------------------------------------------------------------------------ */

/* 1 when the core was compiled with OpenMP, 0 otherwise. */
int ck_openmp_enabled(void);

/* omp_get_max_threads() with OpenMP, 1 without, and 1 in a child process
 * that ck_fork_guard() clamped. Always >= 1. */
int ck_max_threads(void);

/* Fork safety.  GNU libgomp's thread pool does not survive fork(): in a
 * child forked from a thread that had run an OpenMP team, the next parallel
 * region of more than one thread waits forever for the parent's threads.
 * ck_fork_guard() (idempotent, thread-safe; the Python module calls it when
 * it is imported) registers a pthread_atfork() handler after which such a
 * child runs every team of the core on one thread (a child forked from a
 * thread that never ran a team keeps its threads).  ck_fork_clamped() is 1
 * in a clamped child, 0 otherwise.  Without OpenMP or pthread_atfork() both
 * are no-ops (0). */
void ck_fork_guard(void);
int ck_fork_clamped(void);

/* Instruction set of the vectorised loops selected at run time on this CPU:
 * "avx512f", "avx2" (x86-64 with GCC/Clang) or "baseline".  Static string. */
const char *ck_simd_path(void);

/* ------------------------------------------------------------------------
 * Kernel functions (ck_kernel.c).
 * ------------------------------------------------------------------------ */
typedef enum {
    CK_KERNEL_LINEAR = 0,  /* <x, y>                                          */
    CK_KERNEL_RBF = 1,     /* exp(-gamma * max(|x|^2 + |y|^2 - 2 <x, y>, 0))  */
    CK_KERNEL_POLY = 2,    /* (gamma * <x, y> + coef0) ^ degree               */
    CK_KERNEL_SIGMOID = 3  /* tanh(gamma * <x, y> + coef0)                    */
} ck_kernel_kind;

/*
 * Transform, in place, a block of dot products G[i, j] = <x_i, y_j>
 * (n_rows x n_cols, row-major, leading dimension ld) into kernel values
 * K(x_i, y_j) of kernel `kind` (a ck_kernel_kind value).
 *
 * row_sqnorm[i] = |x_i|^2 (n_rows values) and col_sqnorm[j] = |y_j|^2
 * (n_cols values) are required for CK_KERNEL_RBF and ignored (may be NULL)
 * otherwise.  They must not overlap G.
 *
 * gamma, coef0 and degree must be finite; for CK_KERNEL_POLY degree must
 * also be >= 0.  Degrees follow NumPy's `**` special cases (0 -> 1, even
 * for NaN; 1 -> identity; 2 -> b * b) and otherwise use libm pow(), so
 * integer degrees are exact whenever the power is representable, negative
 * bases work, and results are within 1 ulp of the exact power otherwise.
 * Sigmoid uses libm tanh().
 *
 * NaN in G propagates to the result (the RBF clip at 0 is NaN-preserving).
 * The RBF exponential is a vectorisable, branch-free implementation that
 * agrees with libm exp() to within 2 ulp (underflows to 0 / overflows to
 * inf like exp()); RBF values do not depend on the SIMD path, the number of
 * threads or the libm in use (bit-identical everywhere).
 *
 * An empty block (n_rows == 0 or n_cols == 0) is a no-op returning CK_OK.
 * Returns CK_ERR_ARG for NULL pointers (where required), negative sizes,
 * ld < n_cols, sizes whose extent overflows int64, or invalid parameters;
 * CK_ERR_UNKNOWN_KERNEL for an unknown `kind`.  G is untouched on error.
 */
ck_status ck_kernel_from_gram(double *G, int64_t n_rows, int64_t n_cols,
                              int64_t ld, const double *row_sqnorm,
                              const double *col_sqnorm, int kind,
                              double gamma, double coef0, double degree,
                              int n_threads);

/* ------------------------------------------------------------------------
 * Dense linear algebra (ck_linalg.c).
 * ------------------------------------------------------------------------ */

/* LAPACK dpotrf with the reference (Fortran) calling convention, as exported
 * by scipy.linalg.cython_lapack: uplo, n, a (column-major), lda, info. */
typedef void (*ck_dpotrf_fn)(char *uplo, int *n, double *a, int *lda,
                             int *info);

/* BLAS level-3 routines with the reference (Fortran) calling convention, as
 * exported by scipy.linalg.cython_blas. */
typedef void (*ck_dtrsm_fn)(char *side, char *uplo, char *transa, char *diag,
                            int *m, int *n, double *alpha, double *a, int *lda,
                            double *b, int *ldb);
typedef void (*ck_dgemm_fn)(char *transa, char *transb, int *m, int *n, int *k,
                            double *alpha, double *a, int *lda, double *b,
                            int *ldb, double *beta, double *c, int *ldc);
typedef void (*ck_dsyrk_fn)(char *uplo, char *trans, int *n, int *k,
                            double *alpha, double *a, int *lda, double *beta,
                            double *c, int *ldc);

/* The routines a blocked Cholesky calls. */
typedef struct {
    ck_dpotrf_fn potrf;
    ck_dtrsm_fn trsm;
    ck_dgemm_fn gemm;
    ck_dsyrk_fn syrk;
} ck_chol_routines;

/* Tasks of a right-looking blocked Cholesky A = L L^T (lower triangle of the
 * column-major A; a row-major symmetric matrix can be passed as is, L then
 * lands in its upper triangle as row-major code indexes it). Step
 * [k0, k1) is one block column:
 *   CK_CHOL_DIAG    L[k0:k1, k0:k1] = chol(A[k0:k1, k0:k1])              (potrf)
 *   CK_CHOL_PANEL   L[r0:r1, k0:k1] = A[r0:r1, k0:k1] L[k0:k1, k0:k1]^-T  (trsm)
 *                   for rows k1 <= r0 < r1 <= n
 *   CK_CHOL_UPDATE  A[r0:n, r0:r1] -= L[r0:n, k0:k1] L[r0:r1, k0:k1]^T on and
 *                   below the diagonal, for the block column [r0, r1) with
 *                   k1 <= r0 (syrk on its diagonal tile, gemm below it)
 * A step's panel tasks need its diagonal task; an update of block column
 * [r0, r1) needs the panel rows [r0, n) of its step and the previous step's
 * update of the same block column. Tasks over disjoint rows (panel) or block
 * columns (update) may run concurrently. */
typedef enum {
    CK_CHOL_DIAG = 0,
    CK_CHOL_PANEL = 1,
    CK_CHOL_UPDATE = 2
} ck_chol_task_kind;

/*
 * Run one task of the blocked Cholesky of the n x n matrix A (leading
 * dimension lda) through the given routines. A task's arithmetic depends only
 * on (n, k0, k1, r0, r1), never on the thread that runs it or when, so a
 * fixed tiling gives the same bits for any number of threads. Entries above
 * the diagonal are never read or written.
 *
 * *info: for CK_CHOL_DIAG, 0 or the order (counted from A's first row) of the
 * leading minor found not positive definite (that tile is then partly
 * overwritten); 0 for the other tasks. Returns CK_ERR_ARG for a NULL matrix,
 * info pointer or needed routine, an unknown task, sizes outside
 * 0 <= k0 < k1 <= n (and k1 <= r0 < r1 <= n for panels and updates),
 * lda < n, n < 1, sizes beyond the int range of BLAS, or a negative info
 * from potrf; else CK_OK.
 */
ck_status ck_cholesky_task(const ck_chol_routines *f, int task, double *A,
                           int64_t n, int64_t lda, int64_t k0, int64_t k1,
                           int64_t r0, int64_t r1, int64_t *info);

/* LAPACK dsyevd with the reference (Fortran) calling convention, as exported
 * by scipy.linalg.cython_lapack. */
typedef void (*ck_dsyevd_fn)(char *jobz, char *uplo, int *n, double *a, int *lda,
                             double *w, double *work, int *lwork, int *iwork,
                             int *liwork, int *info);

/*
 * Eigendecomposition of the symmetric n x n matrix A (leading dimension lda,
 * column-major; its lower triangle is read) by LAPACK's divide and conquer
 * (dsyevd, jobz 'V'): the eigenvalues in ascending order into w[0..n), the
 * orthonormal eigenvectors into the columns of A. The workspace is queried
 * and allocated here. A row-major symmetric matrix can be passed as is (its
 * upper triangle is then read); the eigenvectors land in its rows.
 *
 * *info: 0, or dsyevd's positive info (an eigenvalue failed to converge; A
 * and w are then undefined). Returns CK_ERR_ARG for a NULL routine, matrix,
 * w or info, n < 1, lda < n, sizes beyond the int range of LAPACK, or a
 * negative info; CK_ERR_NOMEM when the workspace cannot be allocated; else
 * CK_OK.
 */
ck_status ck_eigh(ck_dsyevd_fn syevd, double *A, int64_t n, int64_t lda, double *w,
                  int64_t *info);

/* LAPACK dpocon and dpotrs with the reference (Fortran) calling convention,
 * as exported by scipy.linalg.cython_lapack. */
typedef void (*ck_dpocon_fn)(char *uplo, int *n, double *a, int *lda, double *anorm,
                             double *rcond, double *work, int *iwork, int *info);
typedef void (*ck_dpotrs_fn)(char *uplo, int *n, int *nrhs, double *a, int *lda,
                             double *b, int *ldb, int *info);

/*
 * The 1-norm (largest column sum of absolute values) of the n x n column-major
 * A (leading dimension lda), summed in LAPACK dlange's order so that the
 * result is dlange('1')'s, bit for bit; NaN when a column sum is NaN.
 * Returns CK_ERR_ARG for a NULL matrix or result, n < 1 or lda < n; else
 * CK_OK.
 */
ck_status ck_norm1(const double *A, int64_t n, int64_t lda, double *norm);

/*
 * After a Cholesky factorization A = L L^T (L in the lower triangle of the
 * column-major L, leading dimension lda): the reciprocal condition number of
 * A in the 1-norm (dpocon, from anorm = ||A||_1 before the factorization)
 * into *rcond, then the solution of A X = B (dpotrs) in place of the
 * column-major n x nrhs B (leading dimension ldb). The solve runs whatever
 * the estimate says; the caller judges it. The workspace (3n doubles, n
 * ints) is allocated here.
 *
 * Returns CK_ERR_ARG for a NULL routine, matrix or rcond, n < 1, nrhs < 1,
 * lda < n, ldb < n, sizes beyond the int range of LAPACK, a negative or
 * non-finite anorm, or a negative info from either routine (their only
 * failures); CK_ERR_NOMEM when the workspace cannot be allocated; else CK_OK.
 */
ck_status ck_chol_solve(ck_dpocon_fn pocon, ck_dpotrs_fn potrs, double *L, int64_t n,
                        int64_t lda, double anorm, double *B, int64_t nrhs, int64_t ldb,
                        double *rcond);

/* ------------------------------------------------------------------------
 * Training data of the solvers (ck_rows.c): dense or CSR.
 * ------------------------------------------------------------------------ */

/*
 * n_rows x n_cols matrix, either dense (`dense` != NULL: row-major, leading
 * dimension n_cols) or CSR (`dense` == NULL: row i holds the values
 * values[indptr[i] .. indptr[i+1]) in the columns indices[...], which must
 * be strictly increasing within a row and in [0, n_cols); indptr[0] == 0).
 * The solvers read it and never keep pointers to it after they return.
 * Dot products are summed in increasing column order, skipping only
 * entries that are zero in CSR, so a CSR matrix and its dense copy give
 * bit-identical kernel values and solver results.
 */
typedef struct {
    int64_t n_rows, n_cols;
    const double *dense;
    const int64_t *indptr;
    const int64_t *indices;
    const double *values;
} ck_matrix;

/*
 * Check the structure of X (sizes, CSR pointers and indices as above) and
 * that every stored value is finite.  CK_OK or CK_ERR_ARG.
 */
ck_status ck_matrix_check(const ck_matrix *X);

/* ------------------------------------------------------------------------
 * Solvers (SMO, Asy-GCD), one section each, with the same conventions
 * (ck_status return, int64_t sizes, n_threads).
 * ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------
 * SMO for the binary SVM dual with bias (ck_smo.c).
 * ------------------------------------------------------------------------ */

/*
 * Solve   min_a 0.5 a^T Q a - e^T a   s.t.  y^T a = 0,  0 <= a_i <= upper[i],
 * with Q_ij = y_i y_j K(x_i, x_j), by LIBSVM's SMO (Fan, Chen & Lin 2005):
 * second-order working-set selection (WSS2, tau = 1e-12 for non-PD
 * kernels), analytic two-variable steps, shrinking with gradient
 * reconstruction (LIBSVM's do_shrinking).
 *
 * X: n rows, dense or CSR (ck_matrix); y[i] in {-1, +1}; upper[i] > 0 finite
 * (C times class and sample weights).  The kernel `kind`, gamma, coef0 and
 * degree are those of ck_kernel_from_gram (same values, bit for bit); its
 * columns are computed on demand and kept in an LRU cache of at most
 * cache_bytes bytes (+inf: unlimited; fewer than two columns, i.e.
 * cache_bytes < 16 n, is CK_ERR_ARG).  As LIBSVM's cache, the budget counts
 * the entries held: a column fetched while variables are shrunk holds its
 * active part only (extended when needed), in fixed-size pages of one pool
 * (whole pages: a column holds at most a page more than its part; the pool
 * holds at least two full columns), so the heap does not fragment.  When a
 * feature-major copy of X
 * (in float when every value is a float exactly) takes at most a quarter of
 * cache_bytes and no more than the whole n x n matrix, and leaves two full
 * columns, the columns are computed from it
 * as contiguous axpys (same values, bit for bit) and its bytes come out of
 * the budget, so the memory used stays within cache_bytes plus O(n).
 *
 * alpha: in, a feasible warm start (all zeros for a cold start); entries
 * within 1e-8 * upper[i] outside the box are clipped and a residual
 * |y^T a| <= 1e-6 * max(1, sum a) is repaired, anything else is CK_ERR_ARG
 * (alpha then untouched); out, the solution.
 *
 * Stops when the maximal violating pair gap m(a) - M(a) < tol (tol > 0, LIBSVM's test),
 * with *converged = 1, or after max_iter steps (max_iter <= 0: no limit)
 * with *converged = 0 -- not an error.  Outputs: *rho (LIBSVM convention:
 * decision f(x) = sum_i a_i y_i K(x_i, x) - rho), *objective (dual value
 * 0.5 a^T Q a - e^T a), *n_iter (steps taken).  On error the outputs other
 * than alpha are unspecified.
 *
 * n_threads (<= 0: the OpenMP default; 1: the calling thread only): the
 * OpenMP team that computes kernel columns, the selection passes and the
 * gradient updates over long ranges of variables (shorter ones run on the
 * calling thread).  The result is the same bit for bit for every n_threads
 * (and without OpenMP).  A team whose threads keep waiting for each other
 * (other programs hold the cores) hands the passes to the calling thread
 * and tries again later (ck_smo.c).
 *
 * Returns CK_ERR_ARG for NULL pointers, n < 1, d < 0, bad labels/bounds,
 * non-finite parameters, tol <= 0, a too small cache or an infeasible warm
 * start; CK_ERR_UNKNOWN_KERNEL; CK_ERR_NOMEM.  All memory is freed.
 */
ck_status ck_smo_solve(const ck_matrix *X, const double *y,
                       const double *upper, int kind, double gamma,
                       double coef0, double degree, double tol,
                       int64_t max_iter, double cache_bytes, int n_threads,
                       double *alpha, double *rho, double *objective,
                       int64_t *n_iter, int *converged);

/* ------------------------------------------------------------------------
 * Asy-GCD for the binary SVM dual without bias (ck_asygcd.c).
 * ------------------------------------------------------------------------ */

/*
 * Solve   min_a 0.5 a^T Q a - e^T a   s.t.  0 <= a_i <= upper[i]
 * (no equality constraint; decision f(x) = sum_i a_i y_i K(x_i, x)), with
 * Q_ij = y_i y_j K(x_i, x_j), by asynchronous greedy coordinate descent
 * (thesis ch. 4, Algorithm 14; Algorithm 13 with one thread).
 *
 * X (n rows, dense or CSR), y, upper, kind, gamma, coef0, degree: as for
 * ck_smo_solve.  shift >= 0 (finite) is added to every kernel value:
 * Q_ij = y_i y_j (K(x_i, x_j) + shift), the kernel of the inputs extended by
 * a constant feature sqrt(shift) -- LIBLINEAR's regularised bias, with
 * decision f(x) = sum_i a_i y_i K(x_i, x) + shift * sum_i a_i y_i; 0 is the
 * problem without bias (eq. 4.9).  block[i] in [0, T) is the block of variable i,
 * T = n_threads (<= 0: the OpenMP default).  OpenMP thread t owns block t
 * (blocks t, t + team, ... when the team is smaller; without OpenMP one
 * thread owns them all) and repeatedly picks among its variables the one
 * with the largest |projected gradient| (greedy != 0) or a uniformly random
 * one (greedy == 0: PSCD, xorshift64* seeded from seed + thread), takes the
 * one-variable Newton step clip(a_i - g_i / Q_ii, 0, upper[i]) - a_i
 * (Q_ii <= 0 replaced by 1e-12) and publishes it in a lock-free log of at
 * most 4096 pending steps.  A greedy thread steps only while its largest
 * violation is at least half of the largest one the team has published
 * (a deviation from Algorithm 14, explained in ck_asygcd.c: the thread
 * holding the largest always steps).  Every thread applies the logged
 * steps to the gradient entries of its own variables (owner computes --
 * the deviation from the atomic adds of Algorithm 14 is explained in
 * ck_asygcd.c), its own steps at once.  Each
 * thread caches the slices Q[S_t, i] it needs in its own LRU cache of
 * pages (the SMO's, with variable-length slices: see ck_qcache.c), with a
 * budget of floor(cache_bytes / (8 n)) full-length slices, so the caches
 * hold at most cache_bytes (+inf: all columns); the pages are allocated as
 * the solve first needs them, and where the system has no more memory the
 * cache stops growing and evicts.  Less than one column (8 n bytes) is
 * CK_ERR_ARG.  When a feature-major copy of X (8 n n_cols bytes, zeros
 * included) takes at most a quarter of cache_bytes (any with +inf) and no
 * more than the whole matrix's 8 n^2 bytes, each
 * thread computes its slices from a copy of its own rows -- one contiguous
 * axpy per nonzero feature of x_i -- and the copy's bytes come out of the
 * budget (floor((cache_bytes - 8 n n_cols) / (8 n)) slices); the slices
 * are bit for bit the same either way.
 *
 * shrinking != 0: every 1000 steps (or |S_t|) that it applies, the team's
 * as well as its own, a thread drops from its active set the variables at
 * a bound whose gradient points out of the box by more than the team's
 * largest violation M (a = 0 and g > M, or a = upper and g < -M), as
 * LIBLINEAR's dual coordinate descent, by swapping them behind the active
 * ones as LIBSVM does (the active variables stay contiguous); their
 * gradient entries are then not updated, and kernel slices are computed
 * and cached over the active variables only (extended when needed).  Once
 * when its own violation first falls below 10 tol, and whenever every
 * thread is optimal on its active set, a thread rebuilds the dropped
 * gradient entries from alpha as LIBSVM's reconstruct_gradient (with
 * LIBSVM's G_bar, the sum of C_i Q_i over the variables at their upper
 * bound, kept up to date from full-length slices when a variable reaches
 * or leaves its bound) and continues with all its variables, so the
 * stopping test always covers every variable.  shrinking == 0 is
 * Algorithms 13/14 as printed.

 * alpha: in, a warm start in the box (entries within 1e-8 * upper[i]
 * outside are clipped, anything else is CK_ERR_ARG); out, the solution.
 * Stops when every variable has |projected gradient| <= tol on a gradient
 * that includes every step taken (*converged = 1), or after max_iter
 * coordinate steps in total (max_iter <= 0: no limit; *converged = 0 -- not
 * an error).  Outputs: grad (n values, Q a - e at the returned alpha,
 * accumulated step by step), *objective (0.5 a^T Q a - e^T a from grad),
 * *n_updates (coordinate steps taken; only variables with |projected
 * gradient| > tol are stepped, so random picks of variables already within
 * tol are skipped and not counted).  With T > 1 the result depends on
 * thread timing (not bit-reproducible); with one thread it is
 * deterministic, independent of the cache size, and a CSR X gives the
 * same bits as its dense copy.  On error alpha and the outputs are
 * unspecified (alpha untouched for argument errors).
 *
 * Returns CK_ERR_ARG for NULL pointers, a malformed X or non-finite
 * values, n < 1, bad labels, bounds or block ids, non-finite parameters or
 * kernel diagonal, tol <= 0, a too small cache or a bad warm start;
 * CK_ERR_UNKNOWN_KERNEL; CK_ERR_NOMEM.  All memory is freed.
 */
ck_status ck_asygcd_solve(const ck_matrix *X, const double *y,
                          const double *upper, int kind, double gamma,
                          double coef0, double degree, double shift,
                          const int64_t *block, int n_threads, int greedy,
                          int shrinking, uint64_t seed, double tol,
                          int64_t max_iter, double cache_bytes,
                          double *alpha, double *grad,
                          double *objective, int64_t *n_updates,
                          int *converged);

#ifdef __cplusplus
}
#endif

#endif /* CAKERNELS_H */
