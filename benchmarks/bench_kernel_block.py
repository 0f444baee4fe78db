"""Throughput of RBF kernel-block evaluation, against the machine's dgemm.

For square blocks ``K = exp(-gamma * ||x_i - y_j||^2)`` of n x n entries and
feature dimensions d, this times, in interleaved rounds (best of ``--repeat``
after one warm-up call of each):

* ``dgemm``            : ``np.matmul(X, Y.T, out=G)`` alone -- the "roof";
* ``cakernels``        : row norms, the same product, then
                         ``_native.kernel_from_gram`` on the whole block;
* ``cakernels panels`` : the same, one row panel at a time (product + in-place
                         transform while the panel is still in cache);
* ``kernel_block``     : what the package runs, ``cakernels._kernels.kernel_block``
                         (row blocks of at least 65,536 entries and 4 rows per
                         feature shared by the threads, each block's product and
                         transform on one core, BLAS on one thread); it returns
                         a new n x n array, so it pays the fresh pages the rows
                         above do not;
* ``kernel_block before``: the package's previous ``kernel_block``, which also
                         returned a new array: ``X @ Y.T`` (BLAS's threads), then
                         the transform (OpenMP threads);
* ``numpy naive``      : ``np.exp(-gamma * (xn[:,None] + yn[None,:] - 2 X@Y.T))``;
* ``sklearn``          : ``sklearn.metrics.pairwise.rbf_kernel``.

Flop count: every row, dgemm included, is credited with the same
``2*n*n*d`` flops of the product; the RBF rows' extra work (norms, the
distance formula, the exp) is not counted as flops but reported as time:
``extra ms`` is the row's time minus dgemm's, and ``ns/entry`` that extra
time per kernel entry.  So ``vs dgemm`` is simply ``t_dgemm / t``, the share
of the dgemm rate that a kernel block reaches, and ``vs sklearn`` is
``t_sklearn / t``.

Two thread settings, each a complete table: "all cores" (BLAS and the native
transform with their default thread counts; NumPy's ``exp`` is always one
thread) and "one core" (``threadpool_limits(1)`` and ``n_threads=1``).

Usage::

    python benchmarks/bench_kernel_block.py            # n = 4096, d in 16 64 256
    python benchmarks/bench_kernel_block.py --quick    # n = 2048, fewer repeats
    python benchmarks/bench_kernel_block.py --out kb.md
"""

import argparse
import time

import _common as common  # noqa: I001  (also puts a built checkout on sys.path)

import numpy as np
from sklearn.metrics.pairwise import rbf_kernel
from threadpoolctl import threadpool_limits

import cakernels._native as _native
from cakernels._kernels import kernel_block
from cakernels.backends import cpu_count


def best_times(methods, repeat):
    """Best wall time of each method over `repeat` interleaved rounds.

    Every round runs every method once, so background load (shared machine,
    CPU frequency changes) hits all methods alike and the ratios stay fair.
    """
    for _, fn in methods:  # warm-up: page faults, thread pools, caches
        fn()
    best = {name: float("inf") for name, _ in methods}
    for _ in range(repeat):
        for name, fn in methods:
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def run(n, dims, repeat, n_threads, panel_rows, check):
    """Rows (d, method, seconds, product GFLOP/s, vs dgemm, extra s, vs sklearn)."""
    rows = []
    for d in dims:
        rng = np.random.default_rng(d)
        X = rng.standard_normal((n, d))
        Y = rng.standard_normal((n, d))
        gamma = 1.0 / d
        G = np.empty((n, n))
        gram_flops = 2.0 * n * n * d

        def dgemm():
            np.matmul(X, Y.T, out=G)

        def ck_full():
            xn = np.einsum("ij,ij->i", X, X)
            yn = np.einsum("ij,ij->i", Y, Y)
            np.matmul(X, Y.T, out=G)
            _native.kernel_from_gram(G, xn, yn, 1, gamma, 0.0, 3.0, n_threads)

        def ck_panels():
            xn = np.einsum("ij,ij->i", X, X)
            yn = np.einsum("ij,ij->i", Y, Y)
            YT = Y.T
            for s in range(0, n, panel_rows):
                e = min(s + panel_rows, n)
                P = G[s:e]  # C-contiguous row panel
                np.matmul(X[s:e], YT, out=P)
                _native.kernel_from_gram(P, xn[s:e], yn, 1, gamma, 0.0, 3.0, n_threads)

        def package_block():
            return kernel_block(X, Y, gamma=gamma,
                                n_threads=n_threads if n_threads else cpu_count())

        def package_before():
            xn = np.einsum("ij,ij->i", X, X)
            yn = np.einsum("ij,ij->i", Y, Y)
            K = X @ Y.T
            _native.kernel_from_gram(K, xn, yn, 1, gamma, 0.0, 3.0, n_threads)
            return K

        def numpy_naive():
            xn = np.einsum("ij,ij->i", X, X)
            yn = np.einsum("ij,ij->i", Y, Y)
            return np.exp(-gamma * (xn[:, None] + yn[None, :] - 2 * X @ Y.T))

        def sklearn_rbf():
            return rbf_kernel(X, Y, gamma=gamma)

        if check:
            ref = sklearn_rbf()
            ck_full()
            np.testing.assert_allclose(G, ref, rtol=1e-9, atol=1e-12)
            G[...] = 0.0
            ck_panels()
            np.testing.assert_allclose(G, ref, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(package_block(), ref, rtol=1e-9, atol=1e-12)
            del ref

        methods = [
            ("dgemm (roof)", dgemm),
            ("cakernels", ck_full),
            (f"cakernels panels({panel_rows})", ck_panels),
            ("kernel_block (package)", package_block),
            ("kernel_block before", package_before),
            ("numpy naive", numpy_naive),
            ("sklearn rbf_kernel", sklearn_rbf),
        ]
        best = best_times(methods, repeat)
        t_gemm, t_skl = best["dgemm (roof)"], best["sklearn rbf_kernel"]
        for name, _ in methods:
            t = best[name]
            rows.append((d, name, t, gram_flops / t, t_gemm / t, t - t_gemm, t_skl / t))
    return rows


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--n", type=int, default=None, help="block size n (n x n); default 4096")
    ap.add_argument("--dims", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--repeat", type=common.positive_int, default=None, help="timed runs per case (best kept)")
    ap.add_argument("--panel-rows", type=int, default=512,
                    help="rows per panel of the panelled variant")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness check")
    args = ap.parse_args(argv)

    n = args.n or (2048 if args.quick else 4096)
    repeat = args.repeat or (3 if args.quick else 7)

    rep = common.Report()
    rep.line(f"## RBF kernel blocks vs dgemm ({n} x {n}{', QUICK' if args.quick else ''})\n")
    rep.machine([
        f"native     : openmp={_native.openmp_enabled()} max_threads={_native.max_threads()}"
        f" simd={_native.simd_path()}",
        f"block      : {n} x {n}, gamma = 1/d, best of {repeat} interleaved rounds "
        "after one warm-up call of each",
        "flops      : every row credited with the product's 2*n*n*d; the RBF work "
        "beyond it is reported as time (extra ms, ns/entry)",
    ])
    headers = ["d", "method", "time ms", "product GFLOP/s", "vs dgemm", "extra ms",
               "extra ns/entry", "vs sklearn"]
    settings = [("all cores", None, 0), ("one core", 1, 1)]
    for title, blas, nt in settings:
        print(f"\n{title} ...", flush=True)
        if blas is None:
            rows = run(n, args.dims, repeat, nt, args.panel_rows, not args.no_check)
        else:
            with threadpool_limits(blas):
                rows = run(n, args.dims, repeat, nt, args.panel_rows, not args.no_check)
        out = []
        for d, name, t, rate, vs_gemm, extra, vs_skl in rows:
            is_gemm = name.startswith("dgemm")
            out.append([d, name, f"{t * 1e3:.2f}", f"{rate / 1e9:.2f}", f"{vs_gemm:.2f}",
                        "-" if is_gemm else f"{extra * 1e3:.2f}",
                        "-" if is_gemm else f"{extra * 1e9 / (n * n):.2f}",
                        f"{vs_skl:.2f}x"])
        threads = ("BLAS default threads, kernel_from_gram n_threads=0 (OpenMP default)"
                   if blas is None else "threadpool_limits(1), kernel_from_gram n_threads=1")
        rep.table(f"{title}: {threads}", headers, out,
                  note="vs dgemm = t_dgemm / t (all rows credited with the same 2*n*n*d "
                       "flops); extra = t - t_dgemm; vs sklearn = t_sklearn / t. "
                       f"load avg now: {common.load_avg()}")
    rep.line(f"\nload avg at end: {common.load_avg()}")
    rep.write(args.out)


if __name__ == "__main__":
    main()
