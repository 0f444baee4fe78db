/*
 * _nativemodule.c -- thin CPython binding of the cakernels native core.
 *
 * Module `cakernels._native`.  Arrays arrive through the buffer protocol
 * (no NumPy headers needed at build time); everything is validated here,
 * the GIL is released around the core call, and ck_status codes become
 * Python exceptions (CK_ERR_NOMEM -> MemoryError, others -> ValueError).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <string.h>

#include "cakernels.h"
#include "ck_internal.h" /* ck_agcd_opts: asygcd_solve's private switches */

/* ------------------------------------------------------------------------ */
/* helpers                                                                  */
/* ------------------------------------------------------------------------ */

/* ---- Ctrl-C during a solve (ck_poll_fn, cakernels.h) ----
 * A solve polls from its calling thread.  On the main thread of the main
 * interpreter the poll takes the GIL back at most every CK_POLL_SECONDS and
 * runs the pending signal handlers (PyErr_CheckSignals): a handler that
 * raises (KeyboardInterrupt for SIGINT) ends the solve, and the exception
 * propagates.  Threads never get signals: a solve given a `cancel` buffer
 * (its pool's token, cakernels.backends._pool.CancelToken) stops as soon as
 * the buffer's first byte is nonzero, and raises KeyboardInterrupt. */
#define CK_POLL_SECONDS 0.05
static unsigned long ck_main_ident = 0; /* main thread of the main interpreter */

typedef struct {
    PyThreadState *tstate;        /* saved while the GIL is released */
    const unsigned char *cancel;  /* the token's byte, or NULL */
    int main_thread;
    double next;                  /* ck_wtime() of the next signal check */
} ck_py_poll;

static int ck_py_poll_fn(void *ctx)
{
    ck_py_poll *p = (ck_py_poll *)ctx;
    double now;
    int stop;
    if (p->cancel != NULL) {
        /* written by another thread (with the GIL), read here without it */
#if defined(__GNUC__) || defined(__clang__)
        if (__atomic_load_n(p->cancel, __ATOMIC_RELAXED))
            return 1;
#else
        if (*(const volatile unsigned char *)p->cancel)
            return 1;
#endif
    }
    if (!p->main_thread)
        return 0;
    now = ck_wtime();
    if (now < p->next)
        return 0;
    p->next = now + CK_POLL_SECONDS;
    PyEval_RestoreThread(p->tstate);
    stop = PyErr_CheckSignals() < 0; /* the handler's exception stays set */
    p->tstate = PyEval_SaveThread();
    return stop;
}

static void ck_reraise_as_value_error(const char *msg);

/* The cancel buffer (None or an object with a writable buffer of at least one
 * byte, held in *view until ck_poll_release) for the poll; -1 with a
 * ValueError on a bad object. */
static int ck_poll_cancel(ck_py_poll *p, PyObject *cancel, Py_buffer *view)
{
    p->cancel = NULL;
    view->obj = NULL;
    if (cancel == NULL || cancel == Py_None)
        return 0;
    if (PyObject_GetBuffer(cancel, view, PyBUF_WRITABLE) < 0) {
        ck_reraise_as_value_error("cancel must be a writable buffer (a bytearray)");
        return -1;
    }
    if (view->len < 1) {
        PyBuffer_Release(view);
        view->obj = NULL;
        PyErr_SetString(PyExc_ValueError, "cancel must hold at least one byte");
        return -1;
    }
    p->cancel = (const unsigned char *)view->buf;
    return 0;
}

static void ck_poll_release(Py_buffer *view)
{
    if (view->obj != NULL)
        PyBuffer_Release(view);
    view->obj = NULL;
}

/* Release the GIL for a solve with the poll (GIL held on entry). */
static void ck_poll_begin(ck_py_poll *p)
{
    p->main_thread = ck_main_ident != 0 &&
                     PyThread_get_thread_ident() == ck_main_ident;
    p->next = 0.0;
    p->tstate = PyEval_SaveThread();
}

/* Take the GIL back; for CK_ERR_INTERRUPTED make sure an exception is set
 * (a signal handler's, else KeyboardInterrupt for a cancelled solve). */
static void ck_poll_end(ck_py_poll *p, ck_status status)
{
    PyEval_RestoreThread(p->tstate);
    if (status == CK_ERR_INTERRUPTED && !PyErr_Occurred())
        PyErr_SetString(PyExc_KeyboardInterrupt,
                        "the solve was cancelled: its fit was stopped in "
                        "another thread (Ctrl-C, or an error in another task "
                        "of the same fit)");
}

/* Raise the Python exception matching a non-OK status. */
static PyObject *ck_raise_status(ck_status status, const char *where)
{
    if (status == CK_ERR_NOMEM)
        return PyErr_Format(PyExc_MemoryError, "%s: %s", where,
                            ck_status_string(status));
    return PyErr_Format(PyExc_ValueError, "%s: %s (status %d)", where,
                        ck_status_string(status), (int)status);
}

/* Replace the current exception (raised by an exporter's getbuffer) with a
 * ValueError carrying `msg` and the original message, chained as __cause__. */
static void ck_reraise_as_value_error(const char *msg)
{
    PyObject *cause, *exc;
#if PY_VERSION_HEX >= 0x030C0000
    cause = PyErr_GetRaisedException();
#else
    PyObject *type, *tb;
    PyErr_Fetch(&type, &cause, &tb);
    PyErr_NormalizeException(&type, &cause, &tb);
    if (cause != NULL && tb != NULL)
        PyException_SetTraceback(cause, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
#endif
    if (cause != NULL)
        PyErr_Format(PyExc_ValueError, "%s (%S)", msg, cause);
    else
        PyErr_SetString(PyExc_ValueError, msg);
    if (cause == NULL)
        return;
#if PY_VERSION_HEX >= 0x030C0000
    exc = PyErr_GetRaisedException();
    if (exc != NULL)
        PyException_SetCause(exc, cause); /* steals `cause` */
    else
        Py_DECREF(cause);
    PyErr_SetRaisedException(exc);
#else
    {
        PyObject *etype, *etb;
        PyErr_Fetch(&etype, &exc, &etb);
        PyErr_NormalizeException(&etype, &exc, &etb);
        if (exc != NULL)
            PyException_SetCause(exc, cause); /* steals `cause` */
        else
            Py_DECREF(cause);
        PyErr_Restore(etype, exc, etb);
    }
#endif
}

/* The type code of a buffer format string without its byte-order prefix,
 * or NULL when there is no format (unsigned bytes) or the prefix asks for
 * the non-native byte order. */
static const char *ck_format_code(const char *fmt)
{
    if (fmt == NULL) /* no format requested/provided means unsigned bytes */
        return NULL;
    if (fmt[0] == '@' || fmt[0] == '=')
        ++fmt;
#if PY_BIG_ENDIAN
    else if (fmt[0] == '>' || fmt[0] == '!')
        ++fmt;
#else
    else if (fmt[0] == '<')
        ++fmt;
#endif
    return fmt;
}

/* 1 when a buffer format string denotes a native-endian C double. */
static int ck_format_is_double(const char *fmt)
{
    fmt = ck_format_code(fmt);
    return fmt != NULL && fmt[0] == 'd' && fmt[1] == '\0';
}

static int ck_ranges_overlap(const void *a, Py_ssize_t a_len, const void *b,
                             Py_ssize_t b_len)
{
    const char *pa = (const char *)a, *pb = (const char *)b;
    if (a_len <= 0 || b_len <= 0)
        return 0;
    return pa < pb + b_len && pb < pa + a_len;
}

/* Get a read-only 1-D C-contiguous float64 buffer of exactly `n` elements
 * from `obj`.  Returns 1 when a buffer was acquired (release it), 0 when obj
 * is None (nothing acquired), -1 with ValueError set (nothing acquired). */
static int ck_get_norms(PyObject *obj, Py_buffer *view, Py_ssize_t n,
                        const char *name)
{
    if (obj == Py_None)
        return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        char msg[160];
        PyOS_snprintf(msg, sizeof msg,
                      "%s must be None or a C-contiguous 1-D float64 array",
                      name);
        ck_reraise_as_value_error(msg);
        return -1;
    }
    if (view->ndim != 1 || view->itemsize != (Py_ssize_t)sizeof(double) ||
        !ck_format_is_double(view->format)) {
        PyErr_Format(PyExc_ValueError,
                     "%s must be a 1-D float64 array (got ndim=%d, "
                     "format '%s', itemsize %zd)",
                     name, view->ndim, view->format ? view->format : "B",
                     view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    if (view->shape == NULL || view->shape[0] != n) {
        PyErr_Format(PyExc_ValueError,
                     "%s has %zd elements but G has %zd along that axis",
                     name, view->shape != NULL ? view->shape[0] : (Py_ssize_t)-1,
                     n);
        PyBuffer_Release(view);
        return -1;
    }
    return 1;
}

/* ------------------------------------------------------------------------ */
/* functions                                                                */
/* ------------------------------------------------------------------------ */

PyDoc_STRVAR(openmp_enabled_doc,
             "openmp_enabled()\n--\n\n"
             "True when the native core was compiled with OpenMP.");

/* Kernel parameters shared by every entry point: 0 when valid, else -1 with
 * a ValueError set. */
static int ck_check_kernel_params(int kind, double gamma, double coef0,
                                  double degree)
{
    if (kind < CK_KERNEL_LINEAR || kind > CK_KERNEL_SIGMOID) {
        PyErr_Format(PyExc_ValueError,
                     "unknown kernel kind %d (expected 0 linear, 1 rbf, "
                     "2 poly, 3 sigmoid)",
                     kind);
        return -1;
    }
    if (!isfinite(gamma) || !isfinite(coef0) || !isfinite(degree)) {
        char msg[200];
        PyOS_snprintf(msg, sizeof msg,
                      "gamma, coef0 and degree must be finite "
                      "(got %g, %g, %g)", gamma, coef0, degree);
        PyErr_SetString(PyExc_ValueError, msg);
        return -1;
    }
    if (kind == CK_KERNEL_POLY && degree < 0.0) {
        char msg[120];
        PyOS_snprintf(msg, sizeof msg,
                      "degree must be non-negative for the poly kernel, "
                      "got %g", degree);
        PyErr_SetString(PyExc_ValueError, msg);
        return -1;
    }
    return 0;
}

/* Kernel parameters plus the stopping tolerance and cache budget of the
 * solvers: 0 when valid, else -1 with a ValueError set. */
static int ck_check_solver_params(int kind, double gamma, double coef0,
                                  double degree, double tol, double cache_mb)
{
    if (ck_check_kernel_params(kind, gamma, coef0, degree) < 0)
        return -1;
    if (!(tol > 0.0) || !isfinite(tol)) {
        char msg[120];
        PyOS_snprintf(msg, sizeof msg,
                      "tol must be positive and finite, got %g", tol);
        PyErr_SetString(PyExc_ValueError, msg);
        return -1;
    }
    if (!(cache_mb > 0.0)) {
        char msg[120];
        PyOS_snprintf(msg, sizeof msg,
                      "cache_size_mb must be positive, got %g", cache_mb);
        PyErr_SetString(PyExc_ValueError, msg);
        return -1;
    }
    return 0;
}

static PyObject *py_openmp_enabled(PyObject *module, PyObject *Py_UNUSED(args))
{
    (void)module;
    return PyBool_FromLong(ck_openmp_enabled());
}

PyDoc_STRVAR(smo_team_hint_doc,
             "smo_team_hint(set_seconds=-1.0)\n--\n\n"
             "The SMO's memory of its last team collapse (tests): returns\n"
             "(seconds until the team is tried again, the wait a retry\n"
             "doubles), zeros when none.  set_seconds > 0 then keeps the teams\n"
             "of the solves that start off for that long, as a collapse does;\n"
             "0 forgets the collapse.  Always zeros without OpenMP.");

static PyObject *py_smo_team_hint(PyObject *module, PyObject *args)
{
    double set_seconds = -1.0, remaining, wait;
    (void)module;
    if (!PyArg_ParseTuple(args, "|d:smo_team_hint", &set_seconds))
        return NULL;
    if (!(set_seconds == set_seconds) || set_seconds > 1e9) {
        PyErr_SetString(PyExc_ValueError,
                        "smo_team_hint: set_seconds must be a number <= 1e9");
        return NULL;
    }
    ck_smo_team_hint(set_seconds, &remaining, &wait);
    return Py_BuildValue("dd", remaining, wait);
}

PyDoc_STRVAR(max_threads_doc,
             "max_threads()\n--\n\n"
             "OpenMP's omp_get_max_threads(), or 1 without OpenMP (and in a\n"
             "forked child that fork_clamped() reports).");

PyDoc_STRVAR(fork_clamped_doc,
             "fork_clamped()\n--\n\n"
             "True in a child process forked from a thread that had run an\n"
             "OpenMP team of the native core: GNU libgomp's thread pool does\n"
             "not survive fork(), so the child runs every team on one thread\n"
             "(a team of more than one would wait forever).");

static PyObject *py_fork_clamped(PyObject *module, PyObject *Py_UNUSED(args))
{
    (void)module;
    return PyBool_FromLong(ck_fork_clamped());
}

static PyObject *py_max_threads(PyObject *module, PyObject *Py_UNUSED(args))
{
    (void)module;
    return PyLong_FromLong((long)ck_max_threads());
}

PyDoc_STRVAR(simd_path_doc,
             "simd_path()\n--\n\n"
             "Instruction set of the vectorised loops chosen for this CPU:\n"
             "'avx512f', 'avx2' or 'baseline'.");

static PyObject *py_simd_path(PyObject *module, PyObject *Py_UNUSED(args))
{
    (void)module;
    return PyUnicode_FromString(ck_simd_path());
}

PyDoc_STRVAR(
    kernel_from_gram_doc,
    "kernel_from_gram(G, row_sqnorm, col_sqnorm, kind, gamma, coef0, degree, "
    "n_threads)\n--\n\n"
    "Transform the dot products G = X @ Y.T into kernel values, in place.\n\n"
    "G must be a writable C-contiguous 2-D float64 array of shape (n, m).\n"
    "row_sqnorm (n,) and col_sqnorm (m,) are the squared row norms of X and\n"
    "Y, required for the RBF kernel (kind 1) and may be None otherwise.\n"
    "kind: 0 linear, 1 rbf, 2 poly, 3 sigmoid.  n_threads <= 0 uses the\n"
    "OpenMP default.  The GIL is released during the computation.\n"
    "Raises ValueError on any invalid argument.");

static PyObject *py_kernel_from_gram(PyObject *module, PyObject *args,
                                     PyObject *kwargs)
{
    static char *kwlist[] = {"G",     "row_sqnorm", "col_sqnorm",
                             "kind",  "gamma",      "coef0",
                             "degree", "n_threads", NULL};
    PyObject *g_obj, *rn_obj, *cn_obj;
    int kind, n_threads;
    double gamma, coef0, degree;
    Py_buffer g_view, rn_view, cn_view;
    Py_ssize_t n_rows, n_cols;
    int have_rn = 0, have_cn = 0;
    ck_status status;

    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOidddi:kernel_from_gram",
                                     kwlist, &g_obj, &rn_obj, &cn_obj, &kind,
                                     &gamma, &coef0, &degree, &n_threads))
        return NULL;

    if (ck_check_kernel_params(kind, gamma, coef0, degree) < 0)
        return NULL;

    /* ---- G: writable, C-contiguous, 2-D, float64 ---- */
    if (PyObject_GetBuffer(g_obj, &g_view,
                           PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS |
                               PyBUF_FORMAT) < 0) {
        ck_reraise_as_value_error(
            "G must be a writable C-contiguous 2-D float64 array");
        return NULL;
    }
    if (g_view.ndim != 2 || g_view.itemsize != (Py_ssize_t)sizeof(double) ||
        !ck_format_is_double(g_view.format) || g_view.shape == NULL ||
        !PyBuffer_IsContiguous(&g_view, 'C')) {
        PyErr_Format(PyExc_ValueError,
                     "G must be a writable C-contiguous 2-D float64 array "
                     "(got ndim=%d, format '%s', itemsize %zd)",
                     g_view.ndim, g_view.format ? g_view.format : "B",
                     g_view.itemsize);
        PyBuffer_Release(&g_view);
        return NULL;
    }
    n_rows = g_view.shape[0];
    n_cols = g_view.shape[1];

    /* ---- norms: None or 1-D float64 of matching length ---- */
    have_rn = ck_get_norms(rn_obj, &rn_view, n_rows, "row_sqnorm");
    if (have_rn < 0) {
        have_rn = 0;
        goto fail;
    }
    have_cn = ck_get_norms(cn_obj, &cn_view, n_cols, "col_sqnorm");
    if (have_cn < 0) {
        have_cn = 0;
        goto fail;
    }
    if (kind == CK_KERNEL_RBF && (!have_rn || !have_cn)) {
        PyErr_SetString(PyExc_ValueError,
                        "the RBF kernel needs row_sqnorm and col_sqnorm "
                        "(got None)");
        goto fail;
    }
    if ((have_rn &&
         ck_ranges_overlap(g_view.buf, g_view.len, rn_view.buf, rn_view.len)) ||
        (have_cn &&
         ck_ranges_overlap(g_view.buf, g_view.len, cn_view.buf, cn_view.len))) {
        PyErr_SetString(PyExc_ValueError,
                        "row_sqnorm and col_sqnorm must not share memory with G");
        goto fail;
    }

    Py_BEGIN_ALLOW_THREADS
    status = ck_kernel_from_gram(
        (double *)g_view.buf, (int64_t)n_rows, (int64_t)n_cols,
        (int64_t)n_cols,
        have_rn ? (const double *)rn_view.buf : NULL,
        have_cn ? (const double *)cn_view.buf : NULL, kind, gamma,
        coef0, degree, n_threads);
    Py_END_ALLOW_THREADS

    if (status != CK_OK) {
        ck_raise_status(status, "kernel_from_gram");
        goto fail;
    }
    if (have_cn)
        PyBuffer_Release(&cn_view);
    if (have_rn)
        PyBuffer_Release(&rn_view);
    PyBuffer_Release(&g_view);
    Py_RETURN_NONE;

fail: /* g_view is always held here; the norm views when have_* is set */
    if (have_cn)
        PyBuffer_Release(&cn_view);
    if (have_rn)
        PyBuffer_Release(&rn_view);
    PyBuffer_Release(&g_view);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* module                                                                   */
/* ------------------------------------------------------------------------ */

PyDoc_STRVAR(
    cholesky_task_doc,
    "cholesky_task(A, task, k0, k1, r0, r1, routines)\n--\n\n"
    "Run one task of a blocked Cholesky of A in place, GIL released (see\n"
    "ck_cholesky_task in cakernels.h).\n\n"
    "A: writable C-contiguous square float64 array, read as the column-major\n"
    "matrix of its buffer (a symmetric A is its own transpose), so that L ends up\n"
    "in the upper triangle of A as numpy indexes it.  task: 0 (factor the\n"
    "diagonal block [k0, k1)), 1 (panel rows [r0, r1)), 2 (update the block column\n"
    "[r0, r1) from step [k0, k1)).\n"
    "routines: the PyCapsules (dpotrf, dtrsm, dgemm, dsyrk) of\n"
    "scipy.linalg.cython_lapack / cython_blas.  Returns info: 0, or for task 0 the\n"
    "order of the leading minor found not positive definite.");

/* The function pointer in a scipy cython_blas/cython_lapack capsule, or NULL
 * with an exception set. */
static void *ck_capsule_pointer(PyObject *capsule, const char *what)
{
    const char *name;
    if (!PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_ValueError,
                     "%s must be a PyCapsule of scipy.linalg.cython_blas or "
                     "cython_lapack's __pyx_capi__", what);
        return NULL;
    }
    name = PyCapsule_GetName(capsule);
    if (name == NULL && PyErr_Occurred())
        return NULL;
    return PyCapsule_GetPointer(capsule, name);
}

/* Get a C-contiguous square float64 buffer (writable when asked).  Returns 0
 * on success (release it), -1 with ValueError set (nothing acquired). */
static int ck_get_square(PyObject *obj, Py_buffer *view, int writable)
{
    const char *msg = writable ? "A must be a writable C-contiguous square float64 array"
                               : "A must be a C-contiguous square float64 array";
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        ck_reraise_as_value_error(msg);
        return -1;
    }
    if (view->ndim != 2 || view->itemsize != (Py_ssize_t)sizeof(double) ||
        !ck_format_is_double(view->format) || view->shape == NULL ||
        view->shape[0] != view->shape[1]) {
        PyErr_SetString(PyExc_ValueError, msg);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *py_cholesky_task(PyObject *module, PyObject *args)
{
    PyObject *a_obj, *routines;
    Py_buffer view;
    ck_chol_routines f;
    int task;
    long long k0, k1, r0, r1;
    int64_t info = 0;
    ck_status status;

    (void)module;
    if (!PyArg_ParseTuple(args, "OiLLLLO!:cholesky_task", &a_obj, &task, &k0, &k1, &r0,
                          &r1, &PyTuple_Type, &routines))
        return NULL;
    if (PyTuple_GET_SIZE(routines) != 4) {
        PyErr_SetString(PyExc_ValueError,
                        "routines must be the 4 capsules (dpotrf, dtrsm, dgemm, dsyrk)");
        return NULL;
    }
    if ((f.potrf = (ck_dpotrf_fn)ck_capsule_pointer(PyTuple_GET_ITEM(routines, 0), "dpotrf")) == NULL ||
        (f.trsm = (ck_dtrsm_fn)ck_capsule_pointer(PyTuple_GET_ITEM(routines, 1), "dtrsm")) == NULL ||
        (f.gemm = (ck_dgemm_fn)ck_capsule_pointer(PyTuple_GET_ITEM(routines, 2), "dgemm")) == NULL ||
        (f.syrk = (ck_dsyrk_fn)ck_capsule_pointer(PyTuple_GET_ITEM(routines, 3), "dsyrk")) == NULL)
        return NULL;
    if (ck_get_square(a_obj, &view, 1) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    status = ck_cholesky_task(&f, task, (double *)view.buf, (int64_t)view.shape[0],
                              (int64_t)view.shape[0], (int64_t)k0, (int64_t)k1,
                              (int64_t)r0, (int64_t)r1, &info);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (status != CK_OK)
        return ck_raise_status(status, "cholesky_task");
    return PyLong_FromLongLong((long long)info);
}

/* Get a C-contiguous 1-D float64 buffer of exactly `n` elements (writable
 * when asked).  Returns 0 on success (release it), -1 with ValueError set
 * (nothing acquired). */
static int ck_get_vector(PyObject *obj, Py_buffer *view, Py_ssize_t n,
                         int writable, const char *name)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
    if (writable)
        flags |= PyBUF_WRITABLE;
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        char msg[160];
        PyOS_snprintf(msg, sizeof msg,
                      "%s must be a %sC-contiguous 1-D float64 array", name,
                      writable ? "writable " : "");
        ck_reraise_as_value_error(msg);
        return -1;
    }
    if (view->ndim != 1 || view->itemsize != (Py_ssize_t)sizeof(double) ||
        !ck_format_is_double(view->format) || view->shape == NULL) {
        PyErr_Format(PyExc_ValueError,
                     "%s must be a 1-D float64 array (got ndim=%d, "
                     "format '%s', itemsize %zd)",
                     name, view->ndim, view->format ? view->format : "B",
                     view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    if (view->shape[0] != n) {
        PyErr_Format(PyExc_ValueError,
                     "%s has %zd elements but X has %zd rows", name,
                     view->shape[0], n);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(
    eigh_inplace_doc,
    "eigh_inplace(A, w, syevd)\n--\n\n"
    "Eigendecomposition of the symmetric A by LAPACK dsyevd, in place, GIL\n"
    "released (see ck_eigh in cakernels.h).\n\n"
    "A: writable C-contiguous square float64 array, read as the column-major\n"
    "matrix of its buffer (a symmetric A is its own transpose); its rows are\n"
    "overwritten with the eigenvectors.  w: writable C-contiguous float64 array of\n"
    "A's order, gets the eigenvalues in ascending order.  syevd: the PyCapsule of\n"
    "scipy.linalg.cython_lapack's dsyevd.  Returns dsyevd's info: 0, or > 0 when\n"
    "an eigenvalue failed to converge.");

static PyObject *py_eigh_inplace(PyObject *module, PyObject *args)
{
    PyObject *a_obj, *w_obj, *capsule;
    Py_buffer view, w_view;
    ck_dsyevd_fn syevd;
    int64_t info = 0;
    ck_status status;

    (void)module;
    if (!PyArg_ParseTuple(args, "OOO:eigh_inplace", &a_obj, &w_obj, &capsule))
        return NULL;
    if ((syevd = (ck_dsyevd_fn)ck_capsule_pointer(capsule, "syevd")) == NULL)
        return NULL;
    if (ck_get_square(a_obj, &view, 1) < 0)
        return NULL;
    if (ck_get_vector(w_obj, &w_view, view.shape[0], 1, "w") < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = ck_eigh(syevd, (double *)view.buf, (int64_t)view.shape[0],
                     (int64_t)view.shape[0], (double *)w_view.buf, &info);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&w_view);
    PyBuffer_Release(&view);
    if (status != CK_OK)
        return ck_raise_status(status, "eigh_inplace");
    return PyLong_FromLongLong((long long)info);
}

PyDoc_STRVAR(
    norm1_doc,
    "norm1(A)\n--\n\n"
    "The 1-norm of the square float64 A read as the column-major matrix of its\n"
    "C-contiguous buffer (for a symmetric A, its 1-norm), GIL released; the\n"
    "same bits as LAPACK dlange('1') (see ck_norm1 in cakernels.h).");

static PyObject *py_norm1(PyObject *module, PyObject *a_obj)
{
    Py_buffer view;
    double norm = 0.0;
    ck_status status;

    (void)module;
    if (ck_get_square(a_obj, &view, 0) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    status = ck_norm1((const double *)view.buf, (int64_t)view.shape[0],
                      (int64_t)view.shape[0], &norm);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (status != CK_OK)
        return ck_raise_status(status, "norm1");
    return PyFloat_FromDouble(norm);
}

PyDoc_STRVAR(
    chol_solve_doc,
    "chol_solve(L, B, anorm, routines)\n--\n\n"
    "After a Cholesky factorization in place of L (as cholesky_task leaves it):\n"
    "the reciprocal condition number estimate (dpocon) from anorm, the 1-norm of\n"
    "the matrix before the factorization, then the solution in place of B\n"
    "(dpotrs), GIL released (see ck_chol_solve in cakernels.h).\n\n"
    "L: C-contiguous square float64 array, read as the column-major matrix of its\n"
    "buffer (the factor in its lower triangle).  B: writable C-contiguous float64\n"
    "array of shape (nrhs, n), read as the column-major n x nrhs right-hand sides.\n"
    "routines: the PyCapsules (dpocon, dpotrs) of scipy.linalg.cython_lapack.\n"
    "Returns rcond.");

static PyObject *py_chol_solve(PyObject *module, PyObject *args)
{
    PyObject *l_obj, *b_obj, *routines;
    Py_buffer view, b_view;
    double anorm, rcond = 0.0;
    ck_dpocon_fn pocon;
    ck_dpotrs_fn potrs;
    ck_status status;

    (void)module;
    if (!PyArg_ParseTuple(args, "OOdO!:chol_solve", &l_obj, &b_obj, &anorm, &PyTuple_Type,
                          &routines))
        return NULL;
    if (PyTuple_GET_SIZE(routines) != 2) {
        PyErr_SetString(PyExc_ValueError, "routines must be the 2 capsules (dpocon, dpotrs)");
        return NULL;
    }
    if ((pocon = (ck_dpocon_fn)ck_capsule_pointer(PyTuple_GET_ITEM(routines, 0), "dpocon")) == NULL ||
        (potrs = (ck_dpotrs_fn)ck_capsule_pointer(PyTuple_GET_ITEM(routines, 1), "dpotrs")) == NULL)
        return NULL;
    if (ck_get_square(l_obj, &view, 1) < 0)
        return NULL;
    if (PyObject_GetBuffer(b_obj, &b_view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyBuffer_Release(&view);
        ck_reraise_as_value_error("B must be a writable C-contiguous float64 array of shape "
                                  "(nrhs, n)");
        return NULL;
    }
    if (b_view.ndim != 2 || b_view.itemsize != (Py_ssize_t)sizeof(double) ||
        !ck_format_is_double(b_view.format) || b_view.shape == NULL ||
        b_view.shape[1] != view.shape[0]) {
        PyErr_Format(PyExc_ValueError,
                     "B must be a float64 array of shape (nrhs, %zd)", view.shape[0]);
        PyBuffer_Release(&b_view);
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = ck_chol_solve(pocon, potrs, (double *)view.buf, (int64_t)view.shape[0],
                           (int64_t)view.shape[0], anorm, (double *)b_view.buf,
                           (int64_t)b_view.shape[0], (int64_t)view.shape[0], &rcond);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b_view);
    PyBuffer_Release(&view);
    if (status != CK_OK)
        return ck_raise_status(status, "chol_solve");
    return PyFloat_FromDouble(rcond);
}


/* 1 when a buffer format string denotes a native-endian signed integer
 * (the caller checks itemsize == 8). */
static int ck_format_is_int(const char *fmt)
{
    fmt = ck_format_code(fmt);
    return fmt != NULL && (fmt[0] == 'q' || fmt[0] == 'l') && fmt[1] == '\0';
}


/* ------------------------------------------------------------------------ */
/* training data of the solvers: dense array or CSR tuple                   */
/* ------------------------------------------------------------------------ */

typedef struct {
    Py_buffer v[3]; /* dense: v[0]; CSR: values, indices, indptr */
    int held;       /* views held */
    ck_matrix m;
} ck_matrix_arg;

static void ck_matrix_release(ck_matrix_arg *a)
{
    int k;
    for (k = 0; k < a->held; ++k)
        PyBuffer_Release(&a->v[k]);
    a->held = 0;
}

/* 1 when [p, p + len) overlaps one of the buffers of the matrix. */
static int ck_matrix_overlaps(const ck_matrix_arg *a, const void *p,
                              Py_ssize_t len)
{
    int k;
    for (k = 0; k < a->held; ++k) {
        if (ck_ranges_overlap(p, len, a->v[k].buf, a->v[k].len))
            return 1;
    }
    return 0;
}

/* A C-contiguous 1-D buffer of 8-byte items, float64 (is_int == 0) or
 * int64 (is_int == 1), into a->v[a->held]. */
static int ck_get_csr_part(PyObject *obj, ck_matrix_arg *a, int is_int,
                           const char *name)
{
    Py_buffer *v = &a->v[a->held];
    if (PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        char msg[120];
        PyOS_snprintf(msg, sizeof msg,
                      "CSR %s must be a C-contiguous 1-D %s array", name,
                      is_int ? "int64" : "float64");
        ck_reraise_as_value_error(msg);
        return -1;
    }
    ++a->held;
    if (v->ndim != 1 || v->itemsize != 8 || v->shape == NULL ||
        !(is_int ? ck_format_is_int(v->format)
                 : ck_format_is_double(v->format))) {
        PyErr_Format(PyExc_ValueError,
                     "CSR %s must be a 1-D %s array (got ndim=%d, format "
                     "'%s', itemsize %zd)", name,
                     is_int ? "int64" : "float64", v->ndim,
                     v->format ? v->format : "B", v->itemsize);
        return -1;
    }
    return 0;
}

/* X is a C-contiguous 2-D float64 array, or a CSR tuple
 * (values, indices, indptr, n_cols) with float64 values, int64 indices
 * (strictly increasing within each row) and int64 indptr.  Checks the
 * structure and that every value is finite.  0 on success (release with
 * ck_matrix_release), -1 with ValueError set (nothing held). */
static int ck_get_matrix(PyObject *obj, ck_matrix_arg *a)
{
    memset(a, 0, sizeof *a);
    if (PyTuple_Check(obj)) {
        long long n_cols;
        Py_ssize_t nnz, n;
        if (PyTuple_GET_SIZE(obj) != 4) {
            PyErr_SetString(PyExc_ValueError,
                            "a CSR X must be a tuple (values, indices, "
                            "indptr, n_cols)");
            return -1;
        }
        n_cols = PyLong_AsLongLong(PyTuple_GET_ITEM(obj, 3));
        if (n_cols == -1 && PyErr_Occurred())
            return -1;
        if (n_cols < 0) {
            PyErr_SetString(PyExc_ValueError, "CSR n_cols must be >= 0");
            return -1;
        }
        if (ck_get_csr_part(PyTuple_GET_ITEM(obj, 0), a, 0, "values") < 0 ||
            ck_get_csr_part(PyTuple_GET_ITEM(obj, 1), a, 1, "indices") < 0 ||
            ck_get_csr_part(PyTuple_GET_ITEM(obj, 2), a, 1, "indptr") < 0)
            goto fail;
        nnz = a->v[0].shape[0];
        n = a->v[2].shape[0] - 1;
        if (a->v[1].shape[0] != nnz || n < 0 ||
            ((const int64_t *)a->v[2].buf)[n] != (int64_t)nnz) {
            PyErr_SetString(PyExc_ValueError,
                            "CSR arrays are inconsistent: need len(values) "
                            "== len(indices) == indptr[-1]");
            goto fail;
        }
        a->m.n_rows = (int64_t)n;
        a->m.n_cols = (int64_t)n_cols;
        a->m.dense = NULL;
        a->m.values = (const double *)a->v[0].buf;
        a->m.indices = (const int64_t *)a->v[1].buf;
        a->m.indptr = (const int64_t *)a->v[2].buf;
        if (ck_matrix_check(&a->m) != CK_OK) {
            PyErr_SetString(PyExc_ValueError,
                            "invalid CSR X: indptr must start at 0 and not "
                            "decrease, indices must be strictly increasing "
                            "within each row and in [0, n_cols), and values "
                            "must be finite (no NaN or infinity)");
            goto fail;
        }
        return 0;
    }
    if (PyObject_GetBuffer(obj, &a->v[0], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) <
        0) {
        ck_reraise_as_value_error(
            "X must be a C-contiguous 2-D float64 array or a CSR tuple");
        return -1;
    }
    a->held = 1;
    if (a->v[0].ndim != 2 || a->v[0].itemsize != (Py_ssize_t)sizeof(double) ||
        !ck_format_is_double(a->v[0].format) || a->v[0].shape == NULL) {
        PyErr_Format(PyExc_ValueError,
                     "X must be a C-contiguous 2-D float64 array "
                     "(got ndim=%d, format '%s', itemsize %zd)",
                     a->v[0].ndim, a->v[0].format ? a->v[0].format : "B",
                     a->v[0].itemsize);
        goto fail;
    }
    a->m.n_rows = (int64_t)a->v[0].shape[0];
    a->m.n_cols = (int64_t)a->v[0].shape[1];
    a->m.dense = (const double *)a->v[0].buf;
    if (ck_matrix_check(&a->m) != CK_OK) {
        PyErr_SetString(PyExc_ValueError,
                        "X must not contain NaN or infinity");
        goto fail;
    }
    return 0;
fail:
    ck_matrix_release(a);
    return -1;
}

/* The binary problem shared by the solvers: X (dense or CSR, at least one
 * row), labels y of -1/+1 and upper bounds > 0 and finite, one per row. */
typedef struct {
    ck_matrix_arg x;
    Py_buffer y, u;
} ck_problem_arg;

static void ck_problem_release(ck_problem_arg *p)
{
    PyBuffer_Release(&p->u);
    PyBuffer_Release(&p->y);
    ck_matrix_release(&p->x);
}

/* Acquire and check the problem; returns its number of rows (release with
 * ck_problem_release) or -1 with ValueError set (nothing held). */
static Py_ssize_t ck_get_problem(PyObject *x_obj, PyObject *y_obj,
                                 PyObject *u_obj, ck_problem_arg *p)
{
    Py_ssize_t n, i;
    const double *yp, *up;
    if (ck_get_matrix(x_obj, &p->x) < 0)
        return -1;
    n = (Py_ssize_t)p->x.m.n_rows;
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "X must have at least one row");
        ck_matrix_release(&p->x);
        return -1;
    }
    if (ck_get_vector(y_obj, &p->y, n, 0, "y") < 0) {
        ck_matrix_release(&p->x);
        return -1;
    }
    if (ck_get_vector(u_obj, &p->u, n, 0, "upper") < 0) {
        PyBuffer_Release(&p->y);
        ck_matrix_release(&p->x);
        return -1;
    }
    yp = (const double *)p->y.buf;
    up = (const double *)p->u.buf;
    for (i = 0; i < n; ++i) {
        char msg[160];
        if (yp[i] != 1.0 && yp[i] != -1.0) {
            PyOS_snprintf(msg, sizeof msg,
                          "y must contain only -1 and +1 (y[%zd] = %g)", i,
                          yp[i]);
        } else if (!(up[i] > 0.0) || !isfinite(up[i])) {
            PyOS_snprintf(msg, sizeof msg,
                          "upper bounds must be positive and finite "
                          "(upper[%zd] = %g)", i, up[i]);
        } else {
            continue;
        }
        PyErr_SetString(PyExc_ValueError, msg);
        ck_problem_release(p);
        return -1;
    }
    return n;
}

/* 1 when alpha's buffer shares memory with the problem's. */
static int ck_problem_overlaps(const ck_problem_arg *p, const Py_buffer *a)
{
    return ck_matrix_overlaps(&p->x, a->buf, a->len) ||
           ck_ranges_overlap(a->buf, a->len, p->y.buf, p->y.len) ||
           ck_ranges_overlap(a->buf, a->len, p->u.buf, p->u.len);
}

/* ValueError unless a cache of cache_mb MiB holds `columns` columns of n
 * float64 values; 0 when it does. */
static int ck_check_cache(double cache_mb, Py_ssize_t n, int columns)
{
    const double need = (double)columns * (double)n * (double)sizeof(double);
    char msg[240];
    if (cache_mb * 1048576.0 >= need)
        return 0;
    PyOS_snprintf(msg, sizeof msg,
                  "cache_size_mb=%g is too small: the kernel cache must hold "
                  "at least %s of %zd float64 values (%.6g MB)",
                  cache_mb, columns == 1 ? "one column" : "two columns", n,
                  need / 1048576.0);
    PyErr_SetString(PyExc_ValueError, msg);
    return -1;
}

PyDoc_STRVAR(
    smo_solve_doc,
    "smo_solve(X, y, upper, alpha, kind, gamma, coef0, degree, tol, max_iter, "
    "cache_size_mb, n_threads=1, min_work=0, collapse_at=0, "
    "return_stats=False, page_doubles=0, cancel=None, grad=None,\n"
    "grad_in=False)\n--\n\n"
    "Solve the binary SVM dual with bias by SMO (LIBSVM's second-order\n"
    "working set and shrinking, always on, as cakernels' solver='smo'),\n"
    "GIL released:\n"
    "min 0.5 a^T Q a - sum(a)  s.t.  y^T a = 0, 0 <= a <= upper,\n"
    "Q_ij = y_i y_j K(x_i, x_j).\n\n"
    "X: C-contiguous (n, d) float64, or a CSR tuple (values float64,\n"
    "indices int64 sorted within rows, indptr int64, n_features); y: (n,)\n"
    "float64 of -1/+1; upper: (n,)\n"
    "float64, > 0 and finite; alpha: writable (n,) float64, a feasible warm\n"
    "start on input (zeros for a cold start), the solution on output.\n"
    "kind: 0 linear, 1 rbf, 2 poly, 3 sigmoid.  Stops when the maximal\n"
    "violating pair gap is < tol (LIBSVM's test), or after max_iter steps (<= 0: no\n"
    "limit).  cache_size_mb: kernel column cache in MiB (inf: unlimited;\n"
    "must hold at least two columns, 16 * n bytes).\n"
    "n_threads >= 1: the OpenMP team of the passes over long ranges of\n"
    "variables (the result is the same bit for bit); min_work > 0: the\n"
    "smallest pass run on the team, in multiply-adds of a kernel column\n"
    "(0: the default); collapse_at (tests): > 0 collapses the team after\n"
    "that many parallel regions, -1 never (0: when its threads wait);\n"
    "page_doubles (tests): the cache's page size (rounded up to a power\n"
    "of two; 0: the default).\n"
    "grad: None, or a writable (n,) float64 array (sharing no memory with\n"
    "the others) that receives the gradient Q alpha - e at the solution;\n"
    "with grad_in=True its values on input are the gradient of the warm\n"
    "start alpha (the grad of a solve on the same X, y and kernel: it does\n"
    "not depend on upper), used instead of computing it from alpha's kernel\n"
    "columns (ignored when the warm start's repair moved alpha; non-finite\n"
    "values are refused either way).\n\n"
    "Returns (rho, objective, n_iter, converged); decision function\n"
    "f(x) = sum_i alpha_i y_i K(x_i, x) - rho; return_stats=True appends a\n"
    "dict: threads_used, regions, region_seconds, wait_seconds, collapses,\n"
    "columns, column_entries, column_madds, column_seconds (kernel columns\n"
    "computed), active_sum (active variables summed over the steps),\n"
    "feature_major (bytes per element of the copy, 0: none), page_doubles\n"
    "and pool_bytes (the cache's page size and its pool).\n"
    "Interruption: on the main thread the solve runs Python's signal\n"
    "handlers every 0.05 s (Ctrl-C raises KeyboardInterrupt from it);\n"
    "cancel (a bytearray, or any writable buffer) stops it with\n"
    "KeyboardInterrupt once its first byte is nonzero (set by another\n"
    "thread).\n"
    "Raises ValueError on any invalid argument, MemoryError when out of\n"
    "memory.");

static PyObject *py_smo_solve(PyObject *module, PyObject *args,
                              PyObject *kwargs)
{
    static char *kwlist[] = {"X",     "y",      "upper",   "alpha",
                             "kind",  "gamma",  "coef0",   "degree",
                             "tol",   "max_iter", "cache_size_mb",
                             "n_threads", "min_work", "collapse_at",
                             "return_stats", "page_doubles", "cancel", "grad",
                             "grad_in", NULL};
    PyObject *x_obj, *y_obj, *u_obj, *a_obj, *cancel_obj = NULL;
    PyObject *g_obj = Py_None;
    Py_buffer cancel_view, gv;
    int kind, n_threads = 1, return_stats = 0, grad_in = 0, have_grad = 0;
    long long min_work = 0, collapse_at = 0, page_doubles = 0;
    ck_smo_opts opts;
    ck_py_poll poll;
    double gamma, coef0, degree, tol, cache_mb, rho = 0.0, objective = 0.0;
    long long max_iter;
    ck_problem_arg pa;
    Py_buffer av;
    Py_ssize_t n;
    int64_t n_iter = 0;
    int converged = 0;
    ck_status status;

    (void)module;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOiddddLd|iLLpLOOp:smo_solve",
                                     kwlist, &x_obj, &y_obj, &u_obj, &a_obj,
                                     &kind, &gamma, &coef0, &degree, &tol,
                                     &max_iter, &cache_mb, &n_threads,
                                     &min_work, &collapse_at, &return_stats,
                                     &page_doubles, &cancel_obj, &g_obj,
                                     &grad_in))
        return NULL;
    if (grad_in && g_obj == Py_None) {
        PyErr_SetString(PyExc_ValueError,
                        "smo_solve: grad_in=True needs grad (the gradient of "
                        "alpha)");
        return NULL;
    }
    if (n_threads < 1 || min_work < 0 || collapse_at < -1 ||
        page_doubles < 0 || page_doubles > (1LL << 30)) {
        PyErr_SetString(PyExc_ValueError,
                        "smo_solve: n_threads must be >= 1, min_work >= 0, "
                        "collapse_at >= -1 and 0 <= page_doubles <= 2**30");
        return NULL;
    }
    memset(&opts, 0, sizeof opts);
    opts.min_work = (int64_t)min_work;
    opts.collapse_at = (int64_t)collapse_at;
    opts.page_doubles = (int64_t)page_doubles;
    if (ck_check_solver_params(kind, gamma, coef0, degree, tol, cache_mb) < 0)
        return NULL;

    n = ck_get_problem(x_obj, y_obj, u_obj, &pa);
    if (n < 0)
        return NULL;
    if (ck_get_vector(a_obj, &av, n, 1, "alpha") < 0) {
        ck_problem_release(&pa);
        return NULL;
    }
    if (ck_problem_overlaps(&pa, &av)) {
        PyErr_SetString(PyExc_ValueError,
                        "alpha must not share memory with X, y or upper");
        goto fail;
    }
    if (g_obj != Py_None) {
        if (ck_get_vector(g_obj, &gv, n, 1, "grad") < 0)
            goto fail;
        have_grad = 1;
        if (ck_problem_overlaps(&pa, &gv) ||
            ck_ranges_overlap(gv.buf, gv.len, av.buf, av.len)) {
            PyErr_SetString(PyExc_ValueError,
                            "grad must not share memory with X, y, upper or "
                            "alpha");
            goto fail;
        }
        opts.grad_out = (double *)gv.buf;
        if (grad_in) {
            const double *g = (const double *)gv.buf;
            Py_ssize_t i;
            for (i = 0; i < n; ++i) {
                if (!isfinite(g[i])) {
                    char msg[160];
                    PyOS_snprintf(msg, sizeof msg,
                                  "smo_solve: grad must be finite with "
                                  "grad_in=True (grad[%zd] = %g)", i, g[i]);
                    PyErr_SetString(PyExc_ValueError, msg);
                    goto fail;
                }
            }
            opts.grad_in = g;
        }
    }
    if (ck_check_cache(cache_mb, n, 2) < 0)
        goto fail;
    if (ck_poll_cancel(&poll, cancel_obj, &cancel_view) < 0)
        goto fail;

    opts.poll = ck_py_poll_fn;
    opts.poll_ctx = &poll;
    ck_poll_begin(&poll);
    status = ck_smo_solve_ex(&pa.x.m, (const double *)pa.y.buf,
                             (const double *)pa.u.buf, kind, gamma, coef0,
                             degree, tol, (int64_t)max_iter,
                             cache_mb * 1048576.0, n_threads,
                             (double *)av.buf, &rho, &objective, &n_iter,
                             &converged, &opts);
    ck_poll_end(&poll, status);
    ck_poll_release(&cancel_view);

    if (status == CK_ERR_INTERRUPTED)
        goto fail;
    if (status == CK_ERR_ARG) {
        PyErr_SetString(PyExc_ValueError,
                        "smo_solve: infeasible warm start alpha (outside "
                        "[0, upper] or y^T alpha != 0) or invalid argument");
        goto fail;
    }
    if (status != CK_OK) {
        ck_raise_status(status, "smo_solve");
        goto fail;
    }
    if (have_grad)
        PyBuffer_Release(&gv);
    PyBuffer_Release(&av);
    ck_problem_release(&pa);
    if (return_stats)
        return Py_BuildValue(
            "ddLO{s:i,s:L,s:d,s:d,s:i,s:L,s:L,s:d,s:d,s:d,s:i,s:L,s:d}", rho,
            objective, (long long)n_iter, converged ? Py_True : Py_False,
            "threads_used", opts.threads_used, "regions",
            (long long)opts.regions, "region_seconds", opts.region_seconds,
            "wait_seconds", opts.wait_seconds, "collapses", opts.collapses,
            "columns", (long long)opts.columns, "column_entries",
            (long long)opts.column_entries, "column_madds",
            opts.column_madds, "column_seconds", opts.column_seconds,
            "active_sum", opts.active_sum, "feature_major",
            opts.feature_major, "page_doubles", (long long)opts.page_doubles,
            "pool_bytes", opts.pool_bytes);
    return Py_BuildValue("ddLO", rho, objective, (long long)n_iter,
                         converged ? Py_True : Py_False);

fail:
    if (have_grad)
        PyBuffer_Release(&gv);
    PyBuffer_Release(&av);
    ck_problem_release(&pa);
    return NULL;
}

PyDoc_STRVAR(
    asygcd_solve_doc,
    "asygcd_solve(X, y, upper, block, alpha, kind, gamma, coef0, degree, "
    "n_threads, greedy, seed, tol, max_iter, cache_size_mb, shrinking=False, "
    "shift=0.0, max_delay=0, feature_major=True, return_stats=False, "
    "collapse_at=0, page_doubles=0, cancel=None)"
    "\n--\n\n"
    "Solve the binary SVM dual WITHOUT bias by asynchronous greedy\n"
    "coordinate descent (Asy-GCD), GIL released:\n"
    "min 0.5 a^T Q a - sum(a)  s.t.  0 <= a <= upper,\n"
    "Q_ij = y_i y_j K(x_i, x_j).\n\n"
    "X: C-contiguous (n, d) float64, or a CSR tuple (values float64,\n"
    "indices int64 sorted within rows, indptr int64, n_features); y: (n,)\n"
    "float64 of -1/+1; upper: (n,)\n"
    "float64, > 0 and finite; block: C-contiguous (n,) int64, the block\n"
    "(thread) of every variable, in [0, n_threads); alpha: writable (n,)\n"
    "float64 in [0, upper], the warm start on input, the solution on\n"
    "output.  kind: 0 linear, 1 rbf, 2 poly, 3 sigmoid.  n_threads >= 1.\n"
    "greedy: True for Asy-GCD (largest projected gradient of the block),\n"
    "False for PSCD (random coordinate of the block, seeded by seed).\n"
    "shrinking: drop bounded variables from the thread's active set\n"
    "(rebuilt before the stopping test; see cakernels.h); off by default\n"
    "here (cakernels.AsyGCDSVC and asygcd_fit turn it on).\n"
    "shift >= 0: added to every kernel value (a regularised bias, the\n"
    "intercept is shift * sum(alpha * y)).\n"
    "Stops when max |projected gradient| <= tol, or after max_iter\n"
    "coordinate updates in total (<= 0: no limit).  cache_size_mb: total\n"
    "kernel cache in MiB; every thread caches the slices of the columns\n"
    "over its own variables (inf: unlimited; at least one column,\n"
    "8 * n bytes).  max_delay: the delay bound, the steps a thread may be\n"
    "behind the team (0: ceil(n / 8), at least 8 per thread; at most\n"
    "4096).\n\n"
    "Private switches, for benchmarks and tests: feature_major=False\n"
    "never builds the feature-major copies of the threads' rows and\n"
    "computes every kernel slice from the rows of X, with the same number\n"
    "of cached slices as the copy leaves (same slices computed, same\n"
    "bits); return_stats=True appends a dict to the result: n_slices\n"
    "(kernel slices computed, all threads), slice_seconds (wall time spent\n"
    "computing them, summed over the threads), fm_threads (threads that\n"
    "used a copy), capacity (full-length slices a thread's budget holds;\n"
    "more while variables are shrunk), page_doubles (the cache's page\n"
    "size), rebuilds (gradient rebuilds of the shrinking, all threads),\n"
    "active_sum (active variables of the stepping thread at every step,\n"
    "summed), max_delay\n"
    "(the delay bound used), forced_steps (steps taken while the team\n"
    "had stalled, against the stepping rule), collapsed (True when the\n"
    "team handed the rest of the solve to one thread) and collapse_reason\n"
    "(None, 'waits': its threads kept waiting for descheduled peers,\n"
    "'cpu_share': the OS ran them for less than 0.8 of their time, or\n"
    "'on_demand'); collapse_at > 0\n"
    "makes a team of several threads hand over after that many steps\n"
    "(tests of the hand-over, whatever the timing); page_doubles > 0 sets\n"
    "the cache's page size in doubles (rounded up to a power of two;\n"
    "tests of the page walks; 0: automatic).\n\n"
    "Returns (objective, n_updates, converged, grad) with grad = Q a - e\n"
    "(every step applied; a 1-D float64 memoryview).  Decision function\n"
    "f(x) = sum_i alpha_i y_i K(x_i, x).  With more than one thread the\n"
    "results depend on timing.  Interruption and cancel: as smo_solve's\n"
    "(thread 0, the calling thread, polls).  Raises ValueError on\n"
    "any invalid argument, MemoryError when out of memory.");

static PyObject *py_asygcd_solve(PyObject *module, PyObject *args,
                                 PyObject *kwargs)
{
    static char *kwlist[] = {"X",         "y",      "upper", "block",
                             "alpha",     "kind",   "gamma", "coef0",
                             "degree",    "n_threads", "greedy", "seed",
                             "tol",       "max_iter", "cache_size_mb",
                             "shrinking", "shift", "max_delay",
                             "feature_major", "return_stats", "collapse_at",
                             "page_doubles", "cancel", NULL};
    PyObject *x_obj, *y_obj, *u_obj, *b_obj, *a_obj, *grad_obj = NULL;
    int kind, n_threads, greedy, shrinking = 0, feature_major = 1;
    long long max_delay = 0, collapse_at = 0, page_doubles = 0;
    int return_stats = 0;
    double shift = 0.0;
    ck_agcd_opts opts;
    ck_py_poll poll;
    unsigned long long seed;
    double gamma, coef0, degree, tol, cache_mb, objective = 0.0;
    long long max_iter;
    ck_problem_arg pa;
    Py_buffer bv, av, gv, cancel_view;
    PyObject *cancel_obj = NULL;
    int held = 0; /* views held after the problem, in the order b, a */
    Py_ssize_t n, i;
    int64_t n_updates = 0;
    int converged = 0;
    ck_status status;
    const double *up;
    const int64_t *bp;

    (void)module;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwargs, "OOOOOidddipKdLd|pdLppLLO:asygcd_solve", kwlist, &x_obj,
            &y_obj, &u_obj, &b_obj, &a_obj, &kind, &gamma, &coef0, &degree,
            &n_threads, &greedy, &seed, &tol, &max_iter, &cache_mb, &shrinking, &shift,
            &max_delay, &feature_major, &return_stats, &collapse_at,
            &page_doubles, &cancel_obj))
        return NULL;
    if (page_doubles < 0 || page_doubles > ((long long)1 << 30))
        return PyErr_Format(PyExc_ValueError,
                            "page_doubles must be in [0, 2**30], got %lld",
                            page_doubles);
    if (ck_check_solver_params(kind, gamma, coef0, degree, tol, cache_mb) < 0)
        return NULL;
    if (!(shift >= 0.0) || !isfinite(shift)) {
        char msg[80];
        PyOS_snprintf(msg, sizeof msg, "shift must be finite and >= 0, got %g",
                      shift);
        PyErr_SetString(PyExc_ValueError, msg);
        return NULL;
    }
    if (n_threads < 1)
        return PyErr_Format(PyExc_ValueError,
                            "n_threads must be >= 1, got %d", n_threads);
    if (max_delay < 0 || max_delay > CK_AGCD_LOG_CAPACITY)
        return PyErr_Format(PyExc_ValueError,
                            "max_delay must be in [0, %d], got %lld",
                            CK_AGCD_LOG_CAPACITY, max_delay);

    n = ck_get_problem(x_obj, y_obj, u_obj, &pa);
    if (n < 0)
        return NULL;
    /* ---- block: C-contiguous 1-D int64 ---- */
    if (PyObject_GetBuffer(b_obj, &bv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        ck_reraise_as_value_error(
            "block must be a C-contiguous 1-D int64 array");
        goto fail;
    }
    held = 1;
    if (bv.ndim != 1 || bv.itemsize != 8 || !ck_format_is_int(bv.format) ||
        bv.shape == NULL) {
        PyErr_Format(PyExc_ValueError,
                     "block must be a 1-D int64 array (got ndim=%d, "
                     "format '%s', itemsize %zd)",
                     bv.ndim, bv.format ? bv.format : "B", bv.itemsize);
        goto fail;
    }
    if (bv.shape[0] != n) {
        PyErr_Format(PyExc_ValueError,
                     "block has %zd elements but X has %zd rows", bv.shape[0],
                     n);
        goto fail;
    }
    if (ck_get_vector(a_obj, &av, n, 1, "alpha") < 0)
        goto fail;
    held = 2;
    if (ck_problem_overlaps(&pa, &av) ||
        ck_ranges_overlap(av.buf, av.len, bv.buf, bv.len)) {
        PyErr_SetString(PyExc_ValueError,
                        "alpha must not share memory with X, y, upper or "
                        "block");
        goto fail;
    }
    up = (const double *)pa.u.buf;
    bp = (const int64_t *)bv.buf;
    {
        const double *ap = (const double *)av.buf;
        for (i = 0; i < n; ++i) {
            if (bp[i] < 0 || bp[i] >= n_threads) {
                PyErr_Format(PyExc_ValueError,
                             "block ids must be in [0, n_threads=%d) "
                             "(block[%zd] = %lld)",
                             n_threads, i, (long long)bp[i]);
                goto fail;
            }
            if (!isfinite(ap[i]) || ap[i] < -1e-8 * up[i] ||
                ap[i] > up[i] + 1e-8 * up[i]) {
                char msg[200];
                PyOS_snprintf(msg, sizeof msg,
                              "warm start alpha must lie in [0, upper] "
                              "(alpha[%zd] = %g, upper = %g)",
                              i, ap[i], up[i]);
                PyErr_SetString(PyExc_ValueError, msg);
                goto fail;
            }
        }
    }
    if (ck_check_cache(cache_mb, n, 1) < 0)
        goto fail;

    grad_obj = PyByteArray_FromStringAndSize(NULL,
                                             n * (Py_ssize_t)sizeof(double));
    if (grad_obj == NULL)
        goto fail;
    if (PyObject_GetBuffer(grad_obj, &gv, PyBUF_WRITABLE) < 0)
        goto fail;

    memset(&opts, 0, sizeof opts);
    opts.feature_major = feature_major;
    opts.time_slices = return_stats;
    opts.max_delay = (int64_t)max_delay;
    opts.collapse_at = collapse_at > 0 ? (int64_t)collapse_at : 0;
    opts.page_doubles = (int64_t)page_doubles;
    if (ck_poll_cancel(&poll, cancel_obj, &cancel_view) < 0) {
        PyBuffer_Release(&gv);
        goto fail;
    }
    opts.poll = ck_py_poll_fn;
    opts.poll_ctx = &poll;
    ck_poll_begin(&poll);
    status = ck_asygcd_solve_ex(
        &pa.x.m, (const double *)pa.y.buf, up, kind, gamma,
        coef0, degree, shift, bp, n_threads, greedy, shrinking,
        (uint64_t)seed, tol,
        (int64_t)max_iter, cache_mb * 1048576.0, (double *)av.buf,
        (double *)gv.buf, &objective, &n_updates, &converged, &opts);
    ck_poll_end(&poll, status);
    ck_poll_release(&cancel_view);
    PyBuffer_Release(&gv);

    if (status != CK_OK) {
        if (status != CK_ERR_INTERRUPTED)
            ck_raise_status(status, "asygcd_solve");
        goto fail;
    }
    PyBuffer_Release(&av);
    PyBuffer_Release(&bv);
    ck_problem_release(&pa);
    {
        /* grad as a 1-D float64 memoryview (np.asarray gives an array) */
        PyObject *mv = PyMemoryView_FromObject(grad_obj), *cast, *res;
        Py_DECREF(grad_obj);
        if (mv == NULL)
            return NULL;
        cast = PyObject_CallMethod(mv, "cast", "s", "d");
        Py_DECREF(mv);
        if (cast == NULL)
            return NULL;
        if (return_stats)
            res = Py_BuildValue(
                "dLOO{s:L,s:d,s:i,s:L,s:L,s:L,s:d,s:L,s:L,s:O,s:z}",
                objective, (long long)n_updates,
                converged ? Py_True : Py_False, cast, "n_slices",
                (long long)opts.n_slices, "slice_seconds",
                opts.slice_seconds, "fm_threads", opts.fm_threads,
                "capacity", (long long)opts.capacity, "page_doubles",
                (long long)opts.page_doubles, "rebuilds",
                (long long)opts.rebuilds, "active_sum", opts.active_sum,
                "max_delay",
                (long long)opts.max_delay, "forced_steps",
                (long long)opts.forced_steps, "collapsed",
                opts.collapsed ? Py_True : Py_False, "collapse_reason",
                opts.collapsed == CK_AGCD_COLLAPSE_WAITS     ? "waits"
                : opts.collapsed == CK_AGCD_COLLAPSE_STARVED ? "cpu_share"
                : opts.collapsed == CK_AGCD_COLLAPSE_ON_DEMAND
                    ? "on_demand"
                    : NULL);
        else
            res = Py_BuildValue("dLOO", objective, (long long)n_updates,
                                converged ? Py_True : Py_False, cast);
        Py_DECREF(cast);
        return res;
    }

fail:
    Py_XDECREF(grad_obj);
    if (held >= 2)
        PyBuffer_Release(&av);
    if (held >= 1)
        PyBuffer_Release(&bv);
    ck_problem_release(&pa);
    return NULL;
}

static PyMethodDef ck_methods[] = {
    {"cholesky_task", (PyCFunction)py_cholesky_task, METH_VARARGS,
     cholesky_task_doc},
    {"eigh_inplace", (PyCFunction)py_eigh_inplace, METH_VARARGS, eigh_inplace_doc},
    {"norm1", (PyCFunction)py_norm1, METH_O, norm1_doc},
    {"chol_solve", (PyCFunction)py_chol_solve, METH_VARARGS, chol_solve_doc},
    {"openmp_enabled", (PyCFunction)py_openmp_enabled, METH_NOARGS,
     openmp_enabled_doc},
    {"max_threads", (PyCFunction)py_max_threads, METH_NOARGS, max_threads_doc},
    {"smo_team_hint", (PyCFunction)py_smo_team_hint, METH_VARARGS,
     smo_team_hint_doc},
    {"fork_clamped", (PyCFunction)py_fork_clamped, METH_NOARGS, fork_clamped_doc},
    {"simd_path", (PyCFunction)py_simd_path, METH_NOARGS, simd_path_doc},
    {"kernel_from_gram", (PyCFunction)(void (*)(void))py_kernel_from_gram,
     METH_VARARGS | METH_KEYWORDS, kernel_from_gram_doc},
    {"smo_solve", (PyCFunction)(void (*)(void))py_smo_solve,
     METH_VARARGS | METH_KEYWORDS, smo_solve_doc},
    {"asygcd_solve", (PyCFunction)(void (*)(void))py_asygcd_solve,
     METH_VARARGS | METH_KEYWORDS, asygcd_solve_doc},
    {NULL, NULL, 0, NULL}};

#ifndef CK_SOURCE_HASH
#define CK_SOURCE_HASH "unknown"
#endif

static int ck_exec(PyObject *module)
{
    /* a forked child must not wait for the parent's OpenMP threads */
    ck_fork_guard();
    /* the thread whose solves check for signals (Ctrl-C) */
    if (PyInterpreterState_Get() == PyInterpreterState_Main()) {
        PyObject *threading = PyImport_ImportModule("threading"), *main, *ident;
        if (threading == NULL)
            return -1;
        main = PyObject_CallMethod(threading, "main_thread", NULL);
        Py_DECREF(threading);
        if (main == NULL)
            return -1;
        ident = PyObject_GetAttrString(main, "ident");
        Py_DECREF(main);
        if (ident == NULL)
            return -1;
        ck_main_ident = PyLong_AsUnsignedLong(ident);
        Py_DECREF(ident);
        if (PyErr_Occurred())
            return -1;
    }
    /* sha256 of the C sources this module was built from (setup.py) */
    if (PyModule_AddStringConstant(module, "SOURCE_HASH", CK_SOURCE_HASH) < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "KERNEL_LINEAR", CK_KERNEL_LINEAR) < 0 ||
        PyModule_AddIntConstant(module, "KERNEL_RBF", CK_KERNEL_RBF) < 0 ||
        PyModule_AddIntConstant(module, "KERNEL_POLY", CK_KERNEL_POLY) < 0 ||
        PyModule_AddIntConstant(module, "KERNEL_SIGMOID", CK_KERNEL_SIGMOID) < 0)
        return -1;
    return 0;
}

static PyModuleDef_Slot ck_slots[] = {
    {Py_mod_exec, (void *)ck_exec},
#if PY_VERSION_HEX >= 0x030C0000
    /* no module state: safe in sub-interpreters with their own GIL */
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    /* no global Python state is touched without the GIL's protection */
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL}};

PyDoc_STRVAR(module_doc,
             "Native core of cakernels (C, optionally OpenMP).\n\n"
             "KERNEL_* constants give the `kind` codes of kernel_from_gram;\n"
             "SOURCE_HASH is the sha256 of the C sources it was built from.");

static struct PyModuleDef ck_module = {
    PyModuleDef_HEAD_INIT,
    "cakernels._native", /* m_name */
    module_doc,          /* m_doc */
    0,                   /* m_size */
    ck_methods,          /* m_methods */
    ck_slots,            /* m_slots */
    NULL,                /* m_traverse */
    NULL,                /* m_clear */
    NULL                 /* m_free */
};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModuleDef_Init(&ck_module);
}
