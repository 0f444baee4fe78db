/*
 * ck_internal.h -- helpers shared by the solvers of the native core (not
 * part of the public API; no Python.h).
 */
#ifndef CK_INTERNAL_H
#define CK_INTERNAL_H

#include <stdlib.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cakernels.h"

/* C99's restrict, spelled so that every compiler takes it (MSVC's C mode
 * knows only __restrict). */
#ifndef CK_RESTRICT
#if defined(__GNUC__) || defined(__clang__)
#define CK_RESTRICT __restrict__
#elif defined(_MSC_VER)
#define CK_RESTRICT __restrict
#else
#define CK_RESTRICT restrict
#endif
#endif

/* Wall-clock seconds (CPU seconds without OpenMP: one thread only). */
static inline double ck_wtime(void)
{
#ifdef _OPENMP
    return omp_get_wtime();
#else
    return (double)clock() / (double)CLOCKS_PER_SEC;
#endif
}

/* Nonzero when the caller's poll (ck_poll_fn, may be NULL) asks the
 * solve to stop; call from the solver's calling thread only. */
static inline int ck_poll_stop(ck_poll_fn poll, void *ctx)
{
    return poll != NULL && poll(ctx) != 0;
}

/* The largest team a routine runs (larger requests run this many). */
#define CK_MAX_TEAM 256

/* Threads a team asked for n_threads may use (n_threads <= 0: every
 * thread OpenMP offers; at most CK_MAX_TEAM); 1 in a child clamped by
 * ck_fork_guard(). */
int ck_team_threads(int n_threads);

/* Call just before a parallel region of nt threads: a child forked from
 * this thread afterwards is clamped to one thread (see ck_fork_guard). */
void ck_note_team(int nt);

/* Function multi-versioning for the hot O(n) loops: compiled for
 * AVX-512F, AVX2 and the baseline ISA and picked at load time (GCC on
 * x86-64 ELF; elsewhere, or with CK_NO_SIMD_DISPATCH, the baseline only).
 * The clones perform the same operations in the same order (no FMA
 * contraction, see setup.py), so results do not depend on the CPU. */
#if !defined(CK_NO_SIMD_DISPATCH) && defined(__x86_64__) &&                \
    defined(__ELF__) && !defined(__clang__) && defined(__GNUC__) &&        \
    __GNUC__ >= 6
#define CK_CLONES                                                          \
    __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CK_CLONES
#endif

/* Kernel function and its parameters (see ck_kernel_from_gram). */
typedef struct {
    int kind;
    double gamma, coef0, degree;
    double shift; /* added to every kernel value (0: none), see ck_q_row */
} ck_kparams;

/* Check a kernel kind and its parameters: CK_OK, CK_ERR_UNKNOWN_KERNEL or
 * CK_ERR_ARG (non-finite parameter, negative poly degree or shift). */
ck_status ck_kparams_check(const ck_kparams *kp);

/*
 * Checks shared by the solvers: X well formed with finite values and at
 * least one row, y[i] in {-1, +1}, upper[i] > 0 and finite, the kernel
 * parameters, 0 < tol < inf, and a cache of cache_bytes (> 0; +inf:
 * unlimited) holding at least min_columns columns of n doubles.
 * *capacity receives the number of whole columns the budget holds (n at
 * most).  CK_OK, CK_ERR_ARG or CK_ERR_UNKNOWN_KERNEL.
 */
ck_status ck_check_problem(const ck_matrix *X, const double *y,
                           const double *upper, const ck_kparams *kp,
                           double tol, double cache_bytes,
                           int64_t min_columns, int64_t *capacity);

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
 * X->n_cols doubles, all zero on entry and on return (CSR: x_i is scattered
 * into it; NULL for dense X, and for CSR rows too wide for a scratch per
 * thread, see ck_csr_scratch, whose dot products then merge the sorted
 * indices: the same products in the same order, the same bits).  The values
 * equal ck_kernel_from_gram applied to the same dot products, bit for bit,
 * whatever the row list.
 */
ck_status ck_q_row(const ck_matrix *X, const ck_kparams *kp, int64_t i,
                   double yi, double sqi, const int64_t *rows,
                   const double *row_y, const double *row_sq, int64_t len,
                   double *out, double *work);

/* Most doubles of CSR scratch (n_cols per thread) a solve allocates: 64 MiB;
 * wider rows (hashed features, up to 2^31 columns) merge sorted indices */
#define CK_CSR_SCRATCH_MAX_DOUBLES ((int64_t)1 << 23)

/* Whether a CSR solve on T threads takes a scratch of n_cols doubles each */
int ck_csr_scratch(const ck_matrix *X, int T);

/*
 * A feature-major copy of the rows `rows[0 .. m)` of X:
 *     xt[k * m + j] = X[rows[j], k]     (zeros included, m * n_cols doubles).
 * With it, a row of Q restricted to those rows is a sum of n_nonzero(x_i)
 * contiguous axpys (ck_q_range_fmajor) instead of m scattered dot products:
 * vectorised, and on sparse data it reads the copy's rows of x_i's features
 * only.  Bit for bit equal to ck_q_row (same products, same order; the
 * products it skips or adds are exact zeros).
 */
typedef struct {
    int64_t m, d;
    const ck_matrix *X; /* the matrix it copies (for sparse swaps)      */
    double *xt; /* the copy in double, or NULL                            */
    float *xf;  /* or in float, when every value of X is a float exactly  */
} ck_fmajor;

/* 1 when every stored value of X converts to float and back unchanged
 * (binary or small-integer features, say): a float copy is then exact. */
int ck_matrix_float_exact(const ck_matrix *X);

/* Build the copy, in float when use_float (the caller checked
 * ck_matrix_float_exact), else in double; nothing is built when m or
 * n_cols is 0 (ck_fmajor_built is then 0).  CK_ERR_NOMEM when it cannot be
 * allocated (nothing to free then).  Single-threaded; the calling thread
 * first-touches it. */
ck_status ck_fmajor_init(ck_fmajor *f, const ck_matrix *X,
                         const int64_t *rows, int64_t m, int use_float);

static inline int ck_fmajor_built(const ck_fmajor *f)
{
    return f->xt != NULL || f->xf != NULL;
}
void ck_fmajor_free(ck_fmajor *f);

/* Exchange two lvalues of type T (the solvers' swaps of two positions) */
#define CK_SWAP(T, a, b)                                                   \
    do {                                                                   \
        T ck_t_ = (a);                                                     \
        (a) = (b);                                                         \
        (b) = ck_t_;                                                       \
    } while (0)

/* Paged arrays (the SMO's column cache): entry k (k >= base) at
 * pages[r >> shift][r & (2^shift - 1)], r = k - base; a contiguous array is
 * one page (shift CK_ONE_PAGE, pages = &array). */
#define CK_ONE_PAGE 62

/* The end of k's page, or hi when that comes first */
static inline int64_t ck_page_end(int64_t k, int64_t hi, int shift,
                                  int64_t base)
{
    const int64_t e = ((((k - base) >> shift) + 1) << shift) + base;
    return e < hi ? e : hi;
}

/* &entry k, the rest of its page contiguous from there */
static inline double *ck_page_at(double *const *pages, int shift,
                                 int64_t base, int64_t k)
{
    const int64_t r = k - base;
    return pages[r >> shift] + (r & (((int64_t)1 << shift) - 1));
}

/* The entries start .. end-1 of that row (the copy's rows t in [start,
 * end), row_y and row_sq indexed like them) into pages of 2^shift doubles:
 * entry t at pages[(t - base) >> shift][(t - base) & (2^shift - 1)] (the
 * SMO's paged cache: base 0; an array out holding entries base .. : pages
 * &out, shift 62). */
ck_status ck_q_range_fmajor(const ck_matrix *X, const ck_fmajor *f,
                            const ck_kparams *kp, int64_t i, double yi,
                            double sqi, const double *row_y,
                            const double *row_sq, int64_t start, int64_t end,
                            double *const *pages, int shift, int64_t base);

/* Exchange the copy's positions a and b (the solvers' permutations):
 * row_a and row_b are the rows of X that stand at a and b after the swap
 * (for CSR only their nonzero features are touched). */
void ck_fmajor_swap(ck_fmajor *f, int64_t a, int64_t b, int64_t row_a,
                    int64_t row_b);

/*
 * Private switches and counters of the Asy-GCD solver, for benchmarks and
 * tests (ck_asygcd_solve_ex in ck_asygcd.c; ck_asygcd_solve is the same
 * with the defaults and no counters).
 *   feature_major  in:  1 (default) builds the feature-major copies when
 *                       they fit in a quarter of the budget (and in the
 *                       whole matrix's bytes); 0 never builds
 *                       them and computes every slice from the rows of X,
 *                       with the SAME number of cached slices as the copy
 *                       would leave (its bytes still come out of the
 *                       budget), so that both paths compute the same slices;
 *   time_slices    in:  nonzero: time every slice computation;
 *   n_slices       out: kernel slices Q[S_t, i] computed or extended, all
 *                       threads (the un-shrinking's included);
 *   slice_seconds  out: wall time spent computing them, summed over the
 *                       threads (the cache's time always; the
 *                       un-shrinking's only with time_slices);
 *   fm_threads     out: threads that computed their slices from a copy;
 *   capacity       out: full-length slices each thread's budget holds
 *                       (more while variables are shrunk: shorter slices);
 *   page_doubles   in:  tests: the cache's page size (rounded up to a power
 *                       of two), 0: automatic (ck_qcache.c);
 *                  out: the page size used;
 *   rebuilds       out: gradient rebuilds (un-shrinkings), all threads;
 *   active_sum     out: active variables of the stepping thread at every
 *                       step, summed (/ n_updates: the mean active set);
 *   max_delay      in:  the delay bound (steps a thread may be behind the
 *                       team, <= CK_AGCD_LOG_CAPACITY), 0: automatic;
 *                  out: the bound used;
 *   forced_steps   out: steps taken against the stepping rule because the
 *                       team made no progress while the thread waited;
 *   collapsed      out: nonzero when the team handed the rest of the solve
 *                       to one thread, and why: CK_AGCD_COLLAPSE_WAITS (its
 *                       threads kept waiting for descheduled peers),
 *                       CK_AGCD_COLLAPSE_STARVED (the OS ran its threads
 *                       for less than 0.8 of their time: more runnable
 *                       threads than cores) or CK_AGCD_COLLAPSE_ON_DEMAND
 *                       (collapse_at);
 *   collapse_at    in:  tests: > 0 collapses a team of several threads
 *                       after that many steps, whatever the timing;
 *   poll, poll_ctx in:  the cancellation poll (cakernels.h; NULL: none),
 *                       called by thread 0 (the calling thread) every 256
 *                       passes of its loop: nonzero ends the solve with
 *                       CK_ERR_INTERRUPTED.
 */
#define CK_AGCD_LOG_CAPACITY 4096
#define CK_AGCD_COLLAPSE_WAITS 1
#define CK_AGCD_COLLAPSE_STARVED 2
#define CK_AGCD_COLLAPSE_ON_DEMAND 3
typedef struct {
    int feature_major;
    int time_slices;
    int64_t n_slices;
    double slice_seconds;
    int fm_threads;
    int64_t capacity;
    int64_t page_doubles;
    int64_t rebuilds;
    double active_sum;
    int64_t max_delay;
    int64_t forced_steps;
    int collapsed;
    int64_t collapse_at;
    ck_poll_fn poll;
    void *poll_ctx;
} ck_agcd_opts;

/*
 * The SMO's memory of its last team collapse (ck_smo.c: a solve that starts
 * before the retry time runs its passes on the calling thread): the seconds
 * until the retry and the wait it doubles, 0 when none.  set_seconds > 0
 * keeps the team off that long (as a collapse would), 0 forgets the
 * collapse, < 0 only reads.  For tests; nothing without OpenMP.
 */
void ck_smo_team_hint(double set_seconds, double *remaining, double *wait);

ck_status ck_asygcd_solve_ex(const ck_matrix *X, const double *y,
                             const double *upper, int kind, double gamma,
                             double coef0, double degree, double shift,
                             const int64_t *block, int n_threads, int greedy,
                             int shrinking, uint64_t seed, double tol,
                             int64_t max_iter, double cache_bytes,
                             double *alpha, double *grad, double *objective,
                             int64_t *n_updates, int *converged,
                             ck_agcd_opts *opts);

/*
 * Switches and counters of the SMO solver's team of threads, for
 * benchmarks and tests (ck_smo_solve_ex in ck_smo.c; ck_smo_solve is the
 * same with defaults and no counters).  The team never changes the result:
 * every parallel pass splits a range of the variables into pieces whose
 * entries are computed exactly as on one thread, and reductions keep the
 * serial scan's choice, ties included.
 *   min_work     in:  a pass with less work (multiply-adds of a kernel
 *                     column, see ck_smo.c) runs on the calling thread
 *                     (<= 0: the default, CK_SMO_MIN_WORK);
 *   collapse_at  in:  tests: > 0 collapses the team after that many
 *                     parallel regions (and never again), -1 never
 *                     collapses it, whatever the timing; 0: the timing
 *                     rule of ck_smo.c;
 *   page_doubles in/out: doubles per page of the column cache (<= 0: the
 *                     default, n/64 as a power of two in [256, 2048];
 *                     tests: any size, rounded up to a power of two);
 *                     out: the size used (n: one page per column,
 *                     when the budget holds every column at full length);
 *   pool_bytes   out: the bytes of the cache's pages allocated (as the
 *                     solve needed them; within cache_bytes less the
 *                     feature-major copy, but at least two full columns);
 *   threads_used out: the largest team a region ran on (1: none);
 *   regions      out: parallel regions run;
 *   region_seconds, wait_seconds
 *                out: their wall time, and the part of it the calling
 *                     thread did not spend on its own piece (waiting for
 *                     the team to start and to finish);
 *   collapses    out: times the team handed the passes to one thread
 *                     because its threads kept waiting (see ck_smo.c);
 *   columns, column_entries, column_madds, column_seconds
 *                out: kernel columns computed (extensions of a cached
 *                     column count again), their entries, multiply-adds
 *                     (entries times the nonzeros of x_i) and wall time;
 *   active_sum   out: active variables summed over the steps (the
 *                     length of the selection and update passes);
 *   feature_major out: bytes per element of the feature-major copy
 *                     (4 float, 8 double), 0 when none was built;
 *   poll, poll_ctx in: the cancellation poll (cakernels.h; NULL: none),
 *                     called every 64 steps (and every 64 columns of a
 *                     warm start's gradient): nonzero ends the solve
 *                     with CK_ERR_INTERRUPTED;
 *   grad_in      in:  NULL, or n values: the gradient Q alpha - e of the
 *                     warm start alpha (the grad_out of a solve on the same
 *                     X, y and kernel: the gradient does not depend on the
 *                     bounds), used instead of computing it from alpha's
 *                     kernel columns (a path over C); ignored when the
 *                     warm start's repair changed alpha; non-finite values
 *                     are CK_ERR_ARG;
 *   grad_out     out: NULL, or n values: the gradient at the solution.
 */
typedef struct {
    int64_t min_work;
    int64_t collapse_at;
    int64_t page_doubles;
    double pool_bytes;
    int threads_used;
    int64_t regions;
    double region_seconds;
    double wait_seconds;
    int collapses;
    int64_t columns;
    int64_t column_entries;
    double column_madds;
    double column_seconds;
    double active_sum;
    int feature_major;
    ck_poll_fn poll;
    void *poll_ctx;
    const double *grad_in;
    double *grad_out;
} ck_smo_opts;

ck_status ck_smo_solve_ex(const ck_matrix *X, const double *y,
                          const double *upper, int kind, double gamma,
                          double coef0, double degree, double tol,
                          int64_t max_iter, double cache_bytes, int n_threads,
                          double *alpha, double *rho, double *objective,
                          int64_t *n_iter, int *converged, ck_smo_opts *opts);

/*
 * Doubly linked LRU list over the slots 0 .. capacity-1 of a kernel cache
 * (shared by the SMO and Asy-GCD caches).  head: most recently used,
 * tail: least; -1 ends the list.
 */
typedef struct {
    int64_t *prev, *next;
    int64_t head, tail;
} ck_lru;

/* Allocate the links of `capacity` slots (none linked yet). */
static inline ck_status ck_lru_init(ck_lru *l, int64_t capacity)
{
    l->head = l->tail = -1;
    l->prev = (int64_t *)malloc((size_t)capacity * sizeof(int64_t));
    l->next = (int64_t *)malloc((size_t)capacity * sizeof(int64_t));
    if (l->prev == NULL || l->next == NULL) {
        free(l->prev);
        free(l->next);
        l->prev = l->next = NULL;
        return CK_ERR_NOMEM;
    }
    return CK_OK;
}

static inline void ck_lru_free(ck_lru *l)
{
    free(l->prev);
    free(l->next);
    l->prev = l->next = NULL;
}

static inline void ck_lru_unlink(ck_lru *l, int64_t s)
{
    if (l->prev[s] >= 0)
        l->next[l->prev[s]] = l->next[s];
    else
        l->head = l->next[s];
    if (l->next[s] >= 0)
        l->prev[l->next[s]] = l->prev[s];
    else
        l->tail = l->prev[s];
}

static inline void ck_lru_push_front(ck_lru *l, int64_t s)
{
    l->prev[s] = -1;
    l->next[s] = l->head;
    if (l->head >= 0)
        l->prev[l->head] = s;
    l->head = s;
    if (l->tail < 0)
        l->tail = s;
}

static inline void ck_lru_push_back(ck_lru *l, int64_t s)
{
    l->next[s] = -1;
    l->prev[s] = l->tail;
    if (l->tail >= 0)
        l->next[l->tail] = s;
    l->tail = s;
    if (l->head < 0)
        l->head = s;
}

/* ---- the paged LRU cache of kernel columns (ck_qcache.c) ---- */

/* A column for its readers: its page table (entry k at col[k >> shift]
 * [k & mask], see ck_page_at). */
typedef double *const *ck_col;

/* Fill entries [start, end) of column i (page table col, pages of
 * 2^shift doubles) */
typedef ck_status (*ck_qcache_fill_fn)(void *ctx, int64_t i, ck_col col,
                                       int shift, int64_t start, int64_t end);

typedef struct {
    ck_qcache_fill_fn fill; /* the owner computes the entries            */
    void *ctx;
    int64_t n;          /* columns (keys 0 .. n-1), and slots            */
    int shift;          /* entry k on page k >> shift                    */
    int64_t page;       /* doubles of a page: 2^shift, or a full column */
    int64_t per_col;    /* pages of a full column                        */
    int64_t n_pages;    /* the pool's size in pages                      */
    int64_t n_made;     /* pages allocated so far (in blocks)            */
    int64_t per_block;  /* pages of a block                              */
    double **blocks;    /* the blocks allocated                          */
    int64_t n_blocks;
    double **free_pages; /* stack of the free pages (allocated)         */
    int64_t n_free_pages;
    double ***slot_pg;  /* slot -> its page table (slot_np pages)       */
    int64_t *slot_np;   /* slot -> pages held                           */
    int64_t *slot_col;  /* slot -> column index, -1 when free           */
    int64_t *slot_len;  /* slot -> number of valid leading entries      */
    int64_t n_slots;    /* slots: min(n, n_pages + 2)                   */
    int64_t *col_slot;  /* column -> slot, -1 when not cached           */
    int full;           /* the pool holds all n columns at full length: */
                        /* give each its full length at once            */
    int64_t *free_slots, n_free; /* stack of the free slots             */
    ck_lru lru;         /* LRU order of the slots in use                */
    /* counters: columns computed (extensions included), their entries,  */
    /* seconds                                                          */
    int64_t n_computed, n_entries;
    double seconds;
} ck_qcache;

ck_status ck_qcache_init(ck_qcache *c, int64_t n, int64_t len, int64_t budget,
                         int64_t page, ck_qcache_fill_fn fill, void *ctx);
void ck_qcache_free(ck_qcache *c);
ck_status ck_qcache_get(ck_qcache *c, int64_t i, int64_t len, ck_col *out);
int64_t ck_qcache_peek(const ck_qcache *c, int64_t i, ck_col *out);
void ck_qcache_swap_labels(ck_qcache *c, int64_t a, int64_t b);
void ck_qcache_apply_swaps(ck_qcache *c, const int64_t *pairs,
                           int64_t n_pairs);

#endif /* CK_INTERNAL_H */
