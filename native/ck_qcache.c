/*
 * ck_qcache.c -- the LRU cache of kernel columns in pages, shared by the SMO
 * (ck_smo.c) and the Asy-GCD threads (ck_asygcd.c): LIBSVM's Cache with
 * variable-length columns.
 *
 * Plain C99; no Python.h.  See ck_internal.h for the interface.
 *
 * A cache holds columns 0 .. n-1 (keys) of a matrix whose columns have
 * `len` entries; the SMO caches the columns of Q (n = len, keys and
 * entries both positions in its permutation), an Asy-GCD thread the slices
 * Q[S_t, i] (n keys = all variables, len = |S_t| entries in the thread's
 * own order).  The owner fills entries [start, end) of a column through a
 * callback.  The owners keep their active variables in a prefix of the
 * entries (LIBSVM's shrinking by swaps): a cached column holds only its
 * first slot_len entries, and is extended on demand, so columns fetched
 * while variables are shrunk cost the active part in time and in memory:
 * the budget counts the entries held, as LIBSVM's does, and holds more
 * columns the more the problem is shrunk.
 *
 * The entries live in pages of 2^shift doubles (256 to 2,048: len/64
 * rounded up to a power of two, see ck_qcache_shift) from a pool of the
 * budget's size, allocated in blocks as the solve first needs them
 * (ck_qcache_init); a column is a table of pages, entry k on page
 * k >> shift.  When the budget holds every column at full length, a column
 * is one page of len (shift CK_ONE_PAGE).  Columns of every length come and
 * go in LRU order, and with one allocation per column (as LIBSVM's
 * realloc) the freed blocks rarely fit the next ones: the heap grew to
 * 1.1-1.2x the budget (benchmarks/bench_smo.py, peak memory).  Pages of one
 * size always fit, so the memory is the budget; freed pages are reused most
 * recently freed first.  The price is the unused end of a column's last
 * page (at most 1/64 of a full column from len = 16,384; columns of small
 * problems are mostly all cached) and passes that walk a column page by
 * page (inside the vectorised loops where a call per page would cost: the
 * kernel columns' axpys; the SMO team's pieces cut across pages freely).
 * SMO fits take about the time they took with one allocation per column
 * (0.75-1.07x: ijcnn1, a9a, covtype_5000 at 100-2,000 MB).  Every column
 * has at most one slot, and a column in use at least one page, so there
 * are min(n, pages + 2) slots; a slot is free (slot_col -1, no pages,
 * outside the LRU list) or holds one column.
 */
#include "ck_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CK_PAGE_MIN_SHIFT 8  /* 256 doubles */
#define CK_PAGE_MAX_SHIFT 11 /* 2,048 doubles: the fmajor chunk */
#define CK_QCACHE_BLOCK 65536 /* bytes of the pool allocated at once */

/* The page size for columns of n entries: n/64 rounded up to a power of two, in
 * [256, 2048] (at most n rounded up): the last page's unused end costs a
 * full column at most 1/64, and a segment is long enough for its vectorised
 * pass to amortise the walk (benchmarks/bench_smo.py).  requested > 0
 * (tests): that size rounded up to a power of two. */
static int ck_qcache_shift(int64_t n, int64_t requested)
{
    int shift = 0;
    if (requested > 0) {
        while (((int64_t)1 << shift) < requested && shift < 30)
            ++shift;
        return shift;
    }
    while (((int64_t)1 << shift) * 64 < n)
        ++shift;
    if (shift < CK_PAGE_MIN_SHIFT) {
        shift = CK_PAGE_MIN_SHIFT;
        while (shift > 0 && ((int64_t)1 << (shift - 1)) >= n)
            --shift;
    }
    return shift > CK_PAGE_MAX_SHIFT ? CK_PAGE_MAX_SHIFT : shift;
}

void ck_qcache_free(ck_qcache *c)
{
    int64_t s;
    if (c->slot_pg != NULL) {
        for (s = 0; s < c->n_slots; ++s)
            free(c->slot_pg[s]);
    }
    if (c->blocks != NULL) {
        for (s = c->n_blocks - 1; s >= 0; --s)
            free(c->blocks[s]);
    }
    free(c->blocks);
    free(c->slot_pg);
    free(c->slot_np);
    free(c->slot_col);
    free(c->slot_len);
    free(c->col_slot);
    free(c->free_slots);
    free(c->free_pages);
    ck_lru_free(&c->lru);
    c->slot_pg = NULL;
    c->blocks = c->free_pages = NULL;
    c->slot_np = c->slot_col = c->slot_len = c->col_slot = NULL;
    c->free_slots = NULL;
}

/* A cache of columns 0 .. n-1 with len entries each, filled by
 * fill(ctx, ...).  budget: doubles the columns may hold together; at least
 * 2 len (the caller checks it); page > 0 (tests): that page size, rounded
 * up to a power of two.  The pool holds at least two full columns (so the
 * two of an SMO iteration always fit; this may exceed the budget by two
 * pages), and every column when the budget does.  Its pages are allocated when first
 * needed, in blocks of CK_QCACHE_BLOCK bytes (or one page): blocks of one
 * size never fragment the heap, and below the C library's mapping
 * threshold they come from its heap, which keeps freed memory for the next
 * solve (a fresh mapping per solve cost 1.4x on the 16 solves of a
 * partitioned ijcnn1 fit: a page fault per 4 KB). */
ck_status ck_qcache_init(ck_qcache *c, int64_t n, int64_t len, int64_t budget,
                         int64_t page, ck_qcache_fill_fn fill, void *ctx)
{
    int64_t i;
    double pages;
    memset(c, 0, sizeof *c);
    c->n = n;
    c->fill = fill;
    c->ctx = ctx;
    if (page <= 0 && (double)budget >= (double)n * (double)len) {
        /* every column fits at full length: one page of len per column (no
         * walk at all; columns of one length never fragment the heap) */
        c->full = 1;
        c->shift = CK_ONE_PAGE;
        c->page = len > 0 ? len : 1;
        c->per_col = 1;
        c->n_pages = n;
        c->per_block = 1;
    } else {
        c->shift = ck_qcache_shift(len, page);
        c->page = (int64_t)1 << c->shift;
        c->per_col = (len + c->page - 1) >> c->shift;
        if (c->per_col < 1)
            c->per_col = 1;
        pages = (double)(budget >> c->shift);
        c->full = pages >= (double)n * (double)c->per_col;
        if (c->full)
            pages = (double)n * (double)c->per_col;
        if (pages < 2.0 * (double)c->per_col)
            pages = 2.0 * (double)c->per_col;
        if (pages > (double)(SIZE_MAX / 4 / sizeof(double) >> c->shift))
            pages = (double)(SIZE_MAX / 4 / sizeof(double) >> c->shift);
        c->n_pages = (int64_t)pages;
        c->per_block =
            (int64_t)(CK_QCACHE_BLOCK / sizeof(double)) >> c->shift;
        if (c->per_block < 1)
            c->per_block = 1;
    }
    /* a column in use holds a page at least (a slot without pages is taken
     * only for an empty column, and then reclaimed by ck_qcache_get), so
     * slots beyond the pool's pages would never be used: the slot tables
     * take min(n, pages) entries, not n for every thread's cache */
    c->n_slots = c->n_pages + 2 < n ? c->n_pages + 2 : n;
    c->n_made = c->n_blocks = c->n_free_pages = 0;
    c->blocks = (double **)malloc(
        (size_t)((c->n_pages + c->per_block - 1) / c->per_block) *
        sizeof(double *));
    c->free_pages = (double **)malloc((size_t)c->n_pages * sizeof(double *));
    c->slot_pg = (double ***)calloc((size_t)c->n_slots, sizeof(double **));
    c->slot_np = (int64_t *)calloc((size_t)c->n_slots, sizeof(int64_t));
    c->slot_col = (int64_t *)malloc((size_t)c->n_slots * sizeof(int64_t));
    c->slot_len = (int64_t *)calloc((size_t)c->n_slots, sizeof(int64_t));
    c->col_slot = (int64_t *)malloc((size_t)n * sizeof(int64_t));
    c->free_slots = (int64_t *)malloc((size_t)c->n_slots * sizeof(int64_t));
    if (ck_lru_init(&c->lru, c->n_slots) != CK_OK || c->blocks == NULL ||
        c->free_pages == NULL || c->slot_pg == NULL || c->slot_np == NULL ||
        c->slot_col == NULL || c->slot_len == NULL || c->col_slot == NULL ||
        c->free_slots == NULL) {
        ck_qcache_free(c);
        return CK_ERR_NOMEM;
    }
    for (i = 0; i < n; ++i)
        c->col_slot[i] = -1;
    for (i = 0; i < c->n_slots; ++i) {
        c->slot_col[i] = -1;
        c->free_slots[i] = c->n_slots - 1 - i; /* slot 0 on top */
    }
    c->n_free = c->n_slots;
    return CK_OK;
}

/* One more block of pages onto the free stack (its first page on top);
 * 0 when the system has no memory for it. */
static int ck_qcache_grow(ck_qcache *c)
{
    const int64_t k = c->n_pages - c->n_made < c->per_block
                          ? c->n_pages - c->n_made
                          : c->per_block;
    double *mem = (double *)malloc((size_t)k * (size_t)c->page *
                                   sizeof(double));
    int64_t p;
    if (mem == NULL)
        return 0;
    c->blocks[c->n_blocks++] = mem;
    for (p = k - 1; p >= 0; --p)
        c->free_pages[c->n_free_pages++] = mem + p * c->page;
    c->n_made += k;
    return 1;
}

/* Drop the column of slot s (in use): its pages back to the free stack
 * (the first page on top, reused first), the slot to the free stack. */
static void ck_qcache_drop(ck_qcache *c, int64_t s)
{
    int64_t p;
    ck_lru_unlink(&c->lru, s);
    c->col_slot[c->slot_col[s]] = -1;
    c->slot_col[s] = -1;
    for (p = c->slot_np[s] - 1; p >= 0; --p)
        c->free_pages[c->n_free_pages++] = c->slot_pg[s][p];
    c->slot_len[s] = 0;
    c->slot_np[s] = 0;
    free(c->slot_pg[s]);
    c->slot_pg[s] = NULL;
    c->free_slots[c->n_free++] = s;
}

/* `need` free pages on the stack: from new blocks while the pool has not
 * reached its size, else by evicting least recently used columns other
 * than k1 and k2.  CK_ERR_INTERNAL when they cannot be found (the pool
 * holds two full columns), CK_ERR_NOMEM when the system's memory ran out
 * before the pool reached that. */
static ck_status ck_qcache_reserve(ck_qcache *c, int64_t need, int64_t k1,
                                   int64_t k2)
{
    int64_t t = c->lru.tail;
    while (c->n_free_pages < need) {
        if (c->n_made < c->n_pages) {
            if (ck_qcache_grow(c))
                continue;
            /* out of memory: the pool stays at what it has */
            c->n_pages = c->n_made;
            c->full = 0;
        }
        while (t >= 0 && (t == k1 || t == k2))
            t = c->lru.prev[t];
        if (t < 0)
            return c->n_pages < 2 * c->per_col ? CK_ERR_NOMEM
                                               : CK_ERR_INTERNAL;
        {
            const int64_t prev = c->lru.prev[t];
            ck_qcache_drop(c, t);
            t = prev;
        }
    }
    return CK_OK;
}

/* Fill entries [start, len) of col with column i (the owner's callback),
 * counting the columns, their entries and the time. */
static ck_status ck_qcache_compute(ck_qcache *c, int64_t i, ck_col col,
                                   int64_t start, int64_t len)
{
    const double t0 = ck_wtime();
    const ck_status st = c->fill(c->ctx, i, col, c->shift, start, len);
    c->seconds += ck_wtime() - t0;
    ++c->n_computed;
    c->n_entries += len - start;
    return st;
}

/* Give slot s pages for len entries (all when the pool holds every column),
 * evicting other columns (never slot s or `keep`) when the pool is full. */
static ck_status ck_qcache_resize(ck_qcache *c, int64_t s, int64_t len,
                                  int64_t keep)
{
    const int64_t want =
        c->full ? c->per_col
                : (len + ((int64_t)1 << c->shift) - 1) >> c->shift;
    double **pg;
    int64_t p;
    ck_status st;
    if (c->slot_np[s] >= want)
        return CK_OK;
    st = ck_qcache_reserve(c, want - c->slot_np[s], s, keep);
    if (st != CK_OK)
        return st;
    pg = (double **)realloc(c->slot_pg[s], (size_t)want * sizeof(double *));
    if (pg == NULL)
        return CK_ERR_NOMEM;
    c->slot_pg[s] = pg;
    for (p = c->slot_np[s]; p < want; ++p)
        pg[p] = c->free_pages[--c->n_free_pages];
    c->slot_np[s] = want;
    return CK_OK;
}

/* The first len entries of column i, from the cache or computed
 * (evicting least recently used columns when the pool is full).  The
 * returned table stays valid until the next call that has to extend or
 * evict, or the next ck_qcache_apply_swaps; the column returned by the
 * previous call (the most recently used one) is never evicted by this one,
 * since the pool holds two full columns. */
ck_status ck_qcache_get(ck_qcache *c, int64_t i, int64_t len, ck_col *out)
{
    int64_t s = c->col_slot[i];
    const int64_t keep = c->lru.head; /* the previous call's column */
    ck_status st;
    if (s >= 0) {
        ck_lru_unlink(&c->lru, s);
        ck_lru_push_front(&c->lru, s);
        if (c->slot_len[s] < len) {
            const int64_t old = c->slot_len[s];
            st = ck_qcache_resize(c, s, len, keep);
            if (st != CK_OK)
                return st;
            st = ck_qcache_compute(c, i, c->slot_pg[s], old, len);
            if (st != CK_OK) {
                ck_qcache_drop(c, s);
                return st;
            }
            c->slot_len[s] = len;
        }
        *out = c->slot_pg[s];
        return CK_OK;
    }
    if (c->n_free == 0) {
        /* every slot in use: some hold empty columns (no pages); reclaim
         * the least recently used one other than `keep` */
        int64_t t = c->lru.tail;
        while (t >= 0 && t == keep)
            t = c->lru.prev[t];
        if (t < 0)
            return CK_ERR_INTERNAL;
        ck_qcache_drop(c, t);
    }
    s = c->free_slots[--c->n_free];
    c->slot_col[s] = i;
    c->slot_len[s] = 0;
    c->col_slot[i] = s;
    ck_lru_push_front(&c->lru, s);
    st = ck_qcache_resize(c, s, len, keep);
    if (st == CK_OK)
        st = ck_qcache_compute(c, i, c->slot_pg[s], 0, len);
    if (st != CK_OK) {
        ck_qcache_drop(c, s);
        return st;
    }
    c->slot_len[s] = len;
    *out = c->slot_pg[s];
    return CK_OK;
}

/* The entries column i holds (0 when not cached), its table in *out;
 * neither the LRU order nor anything else changes. */
int64_t ck_qcache_peek(const ck_qcache *c, int64_t i, ck_col *out)
{
    const int64_t s = c->col_slot[i];
    if (s < 0)
        return 0;
    *out = c->slot_pg[s];
    return c->slot_len[s];
}

/* Positions a and b exchange their variables, where the keys are positions
 * too (the SMO): relabel the cached columns (their entries are permuted
 * later, in one pass per column, by ck_qcache_apply_swaps). */
void ck_qcache_swap_labels(ck_qcache *c, int64_t a, int64_t b)
{
    const int64_t sa = c->col_slot[a], sb = c->col_slot[b];
    c->col_slot[a] = sb;
    c->col_slot[b] = sa;
    if (sa >= 0)
        c->slot_col[sa] = b;
    if (sb >= 0)
        c->slot_col[sb] = a;
}

/* Apply the transpositions pairs[2p] < pairs[2p + 1] (in order) to the
 * entries of every cached column, as LIBSVM's Cache::swap_index does one at
 * a time: a column that holds only one of the two entries is dropped. */
void ck_qcache_apply_swaps(ck_qcache *c, const int64_t *pairs,
                           int64_t n_pairs)
{
    const int shift = c->shift;
    int64_t s, p;
    for (s = 0; s < c->n_slots; ++s) {
        const int64_t len = c->slot_len[s];
        if (c->slot_col[s] < 0)
            continue;
        for (p = 0; p < n_pairs; ++p) {
            const int64_t a = pairs[2 * p], b = pairs[2 * p + 1];
            if (len > a) {
                if (len > b) {
                    double *da = ck_page_at(c->slot_pg[s], shift, 0, a);
                    double *db = ck_page_at(c->slot_pg[s], shift, 0, b);
                    const double t = *da;
                    *da = *db;
                    *db = t;
                } else { /* give up this column */
                    ck_qcache_drop(c, s);
                    break;
                }
            }
        }
    }
}
