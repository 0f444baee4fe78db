/*
 * ck_kernel.c -- kernel-block transform of the cakernels native core.
 *
 * Plain C99 (+ optional OpenMP); no Python.h.  See cakernels.h for the
 * contract.  The status/runtime helpers shared by the whole core also live
 * here until the solvers bring a ck_common.c.
 *
 * Floating-point notes (keep in mind when changing build flags):
 *   - must NOT be compiled with -ffast-math / -fassociative-math /
 *     -ffinite-math-only: ck_exp() relies on the exact rounding of
 *     (x + SHIFT) - SHIFT, and NaN must propagate;
 *   - setup.py compiles with -ffp-contract=off, so no FMA is formed behind
 *     our back and results are bit-identical for every SIMD width and ISA;
 *   - -fno-trapping-math (value-preserving) is what lets GCC if-convert and
 *     vectorise the RBF loop.
 */
#include "cakernels.h"
#include "ck_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

/* (CK_RESTRICT: ck_internal.h) */
#if defined(__GNUC__) || defined(__clang__)
#define CK_INLINE static inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define CK_INLINE static __forceinline
#else
#define CK_INLINE static inline
#endif

/* Below this many entries a block is transformed by the calling thread only:
 * starting a team costs more than it saves. */
#define CK_PARALLEL_MIN_ENTRIES ((int64_t)32768)

/* Minimum entries per call of a dispatched row-block function. */
#define CK_RBF_BLOCK_ENTRIES ((int64_t)1024)

/* ======================================================================== */
/* Status and runtime information                                           */
/* ======================================================================== */

const char *ck_status_string(ck_status status)
{
    switch (status) {
    case CK_OK:
        return "success";
    case CK_ERR_ARG:
        return "invalid argument";
    case CK_ERR_NOMEM:
        return "out of memory";
    case CK_ERR_UNKNOWN_KERNEL:
        return "unknown kernel kind";
    case CK_ERR_INTERNAL:
        return "internal error";
    case CK_ERR_INTERRUPTED:
        return "interrupted";
    }
    return "unknown status code";
}

int ck_openmp_enabled(void)
{
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

/* ---- fork safety (see ck_fork_guard in cakernels.h) ---- */
#if defined(_OPENMP) && (defined(__unix__) || defined(__APPLE__))
#define CK_FORK_GUARD 1
#include <pthread.h>
#include <signal.h>
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && \
    !defined(__STDC_NO_THREADS__)
#define CK_THREAD_LOCAL _Thread_local
#else
#define CK_THREAD_LOCAL __thread
#endif
/* this thread has started an OpenMP team of more than one thread */
static CK_THREAD_LOCAL int ck_ran_team = 0;
/* this process is a child forked from such a thread */
static volatile sig_atomic_t ck_forked = 0;
static pthread_once_t ck_guard_once = PTHREAD_ONCE_INIT;

static void ck_after_fork_child(void)
{
    /* runs in the child, on the thread that called fork(): its
     * thread-local flag is the forking thread's */
    if (ck_ran_team)
        ck_forked = 1;
}

static void ck_register_guard(void)
{
    (void)pthread_atfork(NULL, NULL, ck_after_fork_child);
}
#endif

void ck_fork_guard(void)
{
#ifdef CK_FORK_GUARD
    (void)pthread_once(&ck_guard_once, ck_register_guard);
#endif
}

int ck_fork_clamped(void)
{
#ifdef CK_FORK_GUARD
    return ck_forked ? 1 : 0;
#else
    return 0;
#endif
}

void ck_note_team(int nt)
{
#ifdef CK_FORK_GUARD
    if (nt > 1)
        ck_ran_team = 1;
#else
    (void)nt;
#endif
}

int ck_max_threads(void)
{
#ifdef _OPENMP
    int n = omp_get_max_threads();
    if (ck_fork_clamped())
        return 1;
    return n >= 1 ? n : 1;
#else
    return 1;
#endif
}

int ck_team_threads(int n_threads)
{
    if (n_threads <= 0)
        n_threads = ck_max_threads();
    if (ck_fork_clamped())
        return 1;
    /* a request of 10^5 threads made libgomp exit the process ("Thread
     * creation failed") or crash in GOMP_parallel */
    if (n_threads > CK_MAX_TEAM)
        n_threads = CK_MAX_TEAM;
    return n_threads >= 1 ? n_threads : 1;
}

/* ======================================================================== */
/* Vectorisable exp()                                                       */
/* ======================================================================== */
/*
 * libm's exp() is an opaque call the compiler cannot vectorise (without
 * -ffast-math and glibc's libmvec, neither acceptable for portable wheels),
 * and at ~15-20 cycles per call it would cost more than the dgemm that
 * produced the block.  ck_exp() uses only +, -, *, compares/selects and
 * 64-bit integer add/shift, all of which SSE2 (the x86-64 baseline) and NEON
 * vectorise, so the RBF inner loop compiles to straight SIMD code.
 *
 * Method (fdlibm-style): x = n ln2 + r with n = round(x / ln2), |r| <= ~0.35,
 * ln2 split in a high part with 21 trailing zero bits (n * LN2_HI is exact)
 * and a low part; exp(r) by its Taylor series to degree 13 (truncation error
 * < 5e-18 relative); 2^n applied as two power-of-two factors 2^n1 * 2^n2 so
 * that gradual underflow to subnormals and overflow to inf are exact.
 * Measured error vs. glibc's exp() over [-750, 710]: <= 1 ulp (the tests
 * check <= 2 ulp).
 * Rounding to an integer uses the 1.5 * 2^52 "shift" trick, so there is no
 * float -> int conversion (which would be undefined behaviour for NaN).
 * NaN propagates; +inf -> inf, -inf -> 0.
 */
#define CK_EXP_SHIFT 6755399441055744.0          /* 0x1.8p52 */
#define CK_EXP_LOG2E 1.4426950408889634074       /* 1 / ln 2 */
#define CK_EXP_LN2_HI 6.93147180369123816490e-01 /* 0x3FE62E42FEE00000 */
#define CK_EXP_LN2_LO 1.90821492927058770002e-10 /* 0x3DEA39EF35793C76 */
#define CK_EXP_XMIN (-746.0) /* exp(x) rounds to 0 below about -745.13 */
#define CK_EXP_XMAX 710.0    /* exp(x) overflows above about 709.78   */

/* 2^k for an integer-valued `shifted` = k + CK_EXP_SHIFT, -1022 <= k <= 1023.
 * The low mantissa bits of `shifted` hold k in two's complement; adding the
 * bias 1023 and shifting left by 52 moves k + 1023 into the exponent field
 * and shifts every other bit out. */
CK_INLINE double ck_exp_pow2(double shifted)
{
    uint64_t bits;
    double out;
    memcpy(&bits, &shifted, sizeof bits);
    bits = (bits + (uint64_t)1023) << 52;
    memcpy(&out, &bits, sizeof out);
    return out;
}

CK_INLINE double ck_exp(double x)
{
    double kd, n, r, q, p, kd1, n1, n2;

    /* clamp (NaN-preserving: comparisons with NaN are false) */
    x = x < CK_EXP_XMIN ? CK_EXP_XMIN : x;
    x = x > CK_EXP_XMAX ? CK_EXP_XMAX : x;

    kd = x * CK_EXP_LOG2E + CK_EXP_SHIFT; /* round(x / ln2) + SHIFT */
    n = kd - CK_EXP_SHIFT;
    r = x - n * CK_EXP_LN2_HI; /* exact */
    r = r - n * CK_EXP_LN2_LO;

    /* exp(r) = 1 + r + r^2 * q(r), q = sum_{k=2..13} r^(k-2) / k!
     * (Taylor coefficients), evaluated by Estrin's scheme: a dependency
     * chain of ~8 operations instead of Horner's 24 */
    {
        const double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
        const double a0 = 0.5 + r * 1.6666666666666666667e-01;   /* 2!, 3!   */
        const double a1 = 4.1666666666666666667e-02                /* 4!, 5!   */
                          + r * 8.3333333333333333333e-03;
        const double a2 = 1.3888888888888888889e-03                /* 6!, 7!   */
                          + r * 1.9841269841269841270e-04;
        const double a3 = 2.4801587301587301587e-05                /* 8!, 9!   */
                          + r * 2.7557319223985890653e-06;
        const double a4 = 2.7557319223985890653e-07                /* 10!, 11! */
                          + r * 2.5052108385441718775e-08;
        const double a5 = 2.0876756987868098979e-09                /* 12!, 13! */
                          + r * 1.6059043836821614599e-10;
        const double b0 = a0 + r2 * a1;
        const double b1 = a2 + r2 * a3;
        const double b2 = a4 + r2 * a5;
        q = (b0 + r4 * b1) + r8 * b2;
        p = 1.0 + (r + r2 * q);
    }

    /* 2^n = 2^n1 * 2^n2 with n1 = round(n / 2); after the clamp
     * n is in [-1076, 1024], so n1, n2 are in [-538, 512] and both factors
     * are normal numbers; the final product rounds only once. */
    kd1 = n * 0.5 + CK_EXP_SHIFT;
    n1 = kd1 - CK_EXP_SHIFT;
    n2 = n - n1;
    return (p * ck_exp_pow2(kd1)) * ck_exp_pow2(n2 + CK_EXP_SHIFT);
}

/* ======================================================================== */
/* Row transforms (inner loops)                                             */
/* ======================================================================== */
/* One row of the block each; no branches in the loops so they vectorise.  */

CK_INLINE void ck_row_rbf(double *CK_RESTRICT g,
                          const double *CK_RESTRICT col_sqnorm,
                          double row_sqnorm, double neg_gamma, int64_t n_cols)
{
    int64_t j;
    for (j = 0; j < n_cols; ++j) {
        double d = (row_sqnorm + col_sqnorm[j]) - 2.0 * g[j];
        /* clip rounding negatives; unlike fmax() this keeps NaN as NaN,
         * matching np.maximum, and still compiles to a SIMD select */
        d = d < 0.0 ? 0.0 : d;
        g[j] = ck_exp(neg_gamma * d);
    }
}

/* ------------------------------------------------------------------------
 * Runtime ISA dispatch for the RBF rows.
 *
 * The portable build targets the baseline ISA (SSE2 on x86-64).  On x86-64
 * with GCC/Clang the same source is also compiled for AVX2 and AVX-512F via
 * target attributes and picked at run time with __builtin_cpu_supports
 * (which also checks that the OS saves the wide registers), so wheels stay
 * portable while recent CPUs get 4- or 8-wide vectors.  All variants
 * perform the same IEEE operations in the same order (no FMA contraction,
 * see setup.py), so they return bit-identical results.  No global state:
 * the choice is recomputed per call (a few loads).  Define
 * CK_NO_SIMD_DISPATCH to build the baseline path only.
 * ------------------------------------------------------------------------ */
typedef void (*ck_rbf_rows_fn)(double *G, int64_t i0, int64_t i1, int64_t ld,
                               const double *row_sqnorm,
                               const double *col_sqnorm, double neg_gamma,
                               int64_t n_cols);

#define CK_DEFINE_RBF_ROWS(NAME, ATTR)                                         \
    ATTR static void NAME(double *G, int64_t i0, int64_t i1, int64_t ld,     \
                          const double *row_sqnorm,                          \
                          const double *col_sqnorm, double neg_gamma,        \
                          int64_t n_cols)                                    \
    {                                                                        \
        int64_t i;                                                           \
        for (i = i0; i < i1; ++i)                                            \
            ck_row_rbf(G + i * ld, col_sqnorm, row_sqnorm[i], neg_gamma,     \
                       n_cols);                                              \
    }

CK_DEFINE_RBF_ROWS(ck_rbf_rows_baseline, )

#if !defined(CK_NO_SIMD_DISPATCH) && (defined(__x86_64__) || defined(_M_X64)) \
    && (defined(__GNUC__) || defined(__clang__))
#define CK_X86_DISPATCH 1
CK_DEFINE_RBF_ROWS(ck_rbf_rows_avx2, __attribute__((target("avx2"))))
CK_DEFINE_RBF_ROWS(ck_rbf_rows_avx512f, __attribute__((target("avx512f"))))
#endif

static ck_rbf_rows_fn ck_select_rbf_rows(const char **name)
{
#ifdef CK_X86_DISPATCH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        *name = "avx512f";
        return ck_rbf_rows_avx512f;
    }
    if (__builtin_cpu_supports("avx2")) {
        *name = "avx2";
        return ck_rbf_rows_avx2;
    }
#endif
    *name = "baseline";
    return ck_rbf_rows_baseline;
}

const char *ck_simd_path(void)
{
    const char *name;
    (void)ck_select_rbf_rows(&name);
    return name;
}

CK_INLINE void ck_row_sigmoid(double *CK_RESTRICT g, double gamma,
                              double coef0, int64_t n_cols)
{
    int64_t j;
    for (j = 0; j < n_cols; ++j)
        g[j] = tanh(gamma * g[j] + coef0);
}

/* Same special cases as NumPy's `**` (degree 0, 1, 2); otherwise libm pow(),
 * which is exact for representable integer powers (NumPy may use a SIMD pow
 * that differs by an ulp). */
CK_INLINE void ck_row_poly(double *CK_RESTRICT g, double gamma, double coef0,
                           double degree, int64_t n_cols)
{
    int64_t j;
    if (degree == 0.0) {
        for (j = 0; j < n_cols; ++j)
            g[j] = 1.0; /* pow(x, 0) == 1 even for NaN, like NumPy */
    } else if (degree == 1.0) {
        for (j = 0; j < n_cols; ++j)
            g[j] = gamma * g[j] + coef0;
    } else if (degree == 2.0) {
        for (j = 0; j < n_cols; ++j) {
            double b = gamma * g[j] + coef0;
            g[j] = b * b;
        }
    } else {
        for (j = 0; j < n_cols; ++j)
            g[j] = pow(gamma * g[j] + coef0, degree);
    }
}

/* ======================================================================== */
/* Public routine                                                           */
/* ======================================================================== */

/* Rows [i0, i1) of G (leading dimension ld) from Gram values to kernel
 * values (not linear); rbf: the dispatched RBF rows */
static void ck_gram_rows(double *G, int64_t i0, int64_t i1, int64_t ld,
                         const double *row_sqnorm, const double *col_sqnorm,
                         int kind, double gamma, double coef0, double degree,
                         int64_t n_cols, ck_rbf_rows_fn rbf)
{
    int64_t i;
    switch (kind) {
    case CK_KERNEL_RBF:
        rbf(G, i0, i1, ld, row_sqnorm, col_sqnorm, -gamma, n_cols);
        break;
    case CK_KERNEL_POLY:
        for (i = i0; i < i1; ++i)
            ck_row_poly(G + i * ld, gamma, coef0, degree, n_cols);
        break;
    case CK_KERNEL_SIGMOID:
        for (i = i0; i < i1; ++i)
            ck_row_sigmoid(G + i * ld, gamma, coef0, n_cols);
        break;
    default:
        break;
    }
}

ck_status ck_kernel_from_gram(double *G, int64_t n_rows, int64_t n_cols,
                              int64_t ld, const double *row_sqnorm,
                              const double *col_sqnorm, int kind,
                              double gamma, double coef0, double degree,
                              int n_threads)
{
    int64_t i;
    int use_threads;

    /* ---- validation (nothing is written before it passes) ---- */
    if (n_rows < 0 || n_cols < 0 || ld < n_cols)
        return CK_ERR_ARG;
    if (kind < CK_KERNEL_LINEAR || kind > CK_KERNEL_SIGMOID)
        return CK_ERR_UNKNOWN_KERNEL;
    if (!isfinite(gamma) || !isfinite(coef0) || !isfinite(degree))
        return CK_ERR_ARG;
    if (kind == CK_KERNEL_POLY && degree < 0.0)
        return CK_ERR_ARG;
    if (n_rows == 0 || n_cols == 0)
        return CK_OK;
    /* the last element, (n_rows - 1) * ld + n_cols - 1, must fit in int64 */
    if (n_rows - 1 > (INT64_MAX - n_cols) / ld)
        return CK_ERR_ARG;
    if (G == NULL)
        return CK_ERR_ARG;
    if (kind == CK_KERNEL_RBF && (row_sqnorm == NULL || col_sqnorm == NULL))
        return CK_ERR_ARG;

    if (kind == CK_KERNEL_LINEAR)
        return CK_OK;

    use_threads = n_rows > 1 && n_rows * n_cols >= CK_PARALLEL_MIN_ENTRIES;
#ifdef _OPENMP
    n_threads = ck_team_threads(n_threads);
    if (n_threads == 1)
        use_threads = 0;
#else
    (void)n_threads;
    use_threads = 0;
#endif

    {
        const char *path = NULL;
        const ck_rbf_rows_fn rbf =
            kind == CK_KERNEL_RBF ? ck_select_rbf_rows(&path) : NULL;
        /* rows go in blocks of >= CK_RBF_BLOCK_ENTRIES entries so that the
         * calls are amortised even for very narrow blocks */
        const int64_t rb = n_cols >= CK_RBF_BLOCK_ENTRIES
                               ? 1 : CK_RBF_BLOCK_ENTRIES / n_cols;
        const int64_t n_blocks = (n_rows - 1) / rb + 1;
        if (!use_threads) {
            /* no parallel region at all: its set-up (even when not taken)
             * costs a microsecond, as much as a short row (the SMO's
             * kernel columns come here a page at a time) */
            ck_gram_rows(G, 0, n_rows, ld, row_sqnorm, col_sqnorm, kind,
                         gamma, coef0, degree, n_cols, rbf);
            return CK_OK;
        }
#ifdef _OPENMP
        ck_note_team(n_threads);
#pragma omp parallel for schedule(static) num_threads(n_threads)
#endif
        for (i = 0; i < n_blocks; ++i) {
            const int64_t i0 = i * rb;
            const int64_t i1 = n_rows - i0 < rb ? n_rows : i0 + rb;
            ck_gram_rows(G, i0, i1, ld, row_sqnorm, col_sqnorm, kind, gamma,
                         coef0, degree, n_cols, rbf);
        }
    }
    return CK_OK;
}
