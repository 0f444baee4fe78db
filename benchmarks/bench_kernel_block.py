"""Throughput of RBF kernel-block evaluation, against the machine's dgemm.

For square blocks ``K = exp(-gamma * ||x_i - y_j||^2)`` of n x n entries and
feature dimensions d, this times

* ``dgemm``            : ``np.matmul(X, Y.T, out=G)`` alone -- the "roof";
* ``cakernels``        : the same product, then ``_native.kernel_from_gram``
                         on the whole block (norms computed in the timing);
* ``cakernels panels`` : the same, one row panel at a time (product + in-place
                         transform while the panel is still in cache);
* ``numpy naive``      : ``np.exp(-gamma * (xn[:,None] + yn[None,:] - 2 X@Y.T))``;
* ``sklearn``          : ``sklearn.metrics.pairwise.rbf_kernel``.

Flop count (stated, identical for every RBF row so rates are comparable):
``2*n*m*d`` for the product plus ``6*n*m`` for the transform (norm sum,
``2*G``, subtraction, clip, scaling by -gamma, and the exp counted as one).
dgemm is credited with ``2*n*m*d`` only.  "vs dgemm" is the rate ratio.

Usage::

    python benchmarks/bench_kernel_block.py            # n = 4096, d in 16 64 256
    python benchmarks/bench_kernel_block.py --quick    # n = 2048, fewer repeats
"""

import argparse
import os
import time

import numpy as np
from _common import cpu_model  # noqa: I001  (also puts a built checkout on sys.path)

import cakernels._native as _native

TRANSFORM_FLOPS_PER_ENTRY = 6


def physical_cores():
    """(sockets x cores per socket) from /proc/cpuinfo, or None."""
    try:
        pairs = set()
        phys = core = None
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("physical id"):
                    phys = line.split(":")[1].strip()
                elif line.startswith("core id"):
                    core = line.split(":")[1].strip()
                elif not line.strip():
                    if core is not None:
                        pairs.add((phys, core))
                    phys = core = None
        if core is not None:
            pairs.add((phys, core))
        return len(pairs) or None
    except OSError:
        return None


def blas_info():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return ["threadpoolctl not installed"]
    out = []
    for pool in threadpool_info():
        out.append(
            "{user_api}: {internal_api} {version} ({arch}), {num_threads} threads, {lib}".format(
                user_api=pool.get("user_api"),
                internal_api=pool.get("internal_api"),
                version=pool.get("version"),
                arch=pool.get("architecture", "-"),
                num_threads=pool.get("num_threads"),
                lib=os.path.basename(pool.get("filepath", "")),
            )
        )
    return out or ["no threadpools found"]


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
    rows = []
    for d in dims:
        rng = np.random.default_rng(d)
        X = rng.standard_normal((n, d))
        Y = rng.standard_normal((n, d))
        gamma = 1.0 / d
        G = np.empty((n, n))
        gram_flops = 2.0 * n * n * d
        rbf_flops = gram_flops + TRANSFORM_FLOPS_PER_ENTRY * float(n) * n

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

        def numpy_naive():
            xn = np.einsum("ij,ij->i", X, X)
            yn = np.einsum("ij,ij->i", Y, Y)
            return np.exp(-gamma * (xn[:, None] + yn[None, :] - 2 * X @ Y.T))

        from sklearn.metrics.pairwise import rbf_kernel

        def sklearn_rbf():
            return rbf_kernel(X, Y, gamma=gamma)

        if check:
            ref = sklearn_rbf()
            ck_full()
            np.testing.assert_allclose(G, ref, rtol=1e-9, atol=1e-12)
            G[...] = 0.0
            ck_panels()
            np.testing.assert_allclose(G, ref, rtol=1e-9, atol=1e-12)
            del ref

        methods = [
            ("dgemm (roof)", dgemm),
            ("cakernels", ck_full),
            (f"cakernels panels({panel_rows})", ck_panels),
            ("numpy naive", numpy_naive),
            ("sklearn rbf_kernel", sklearn_rbf),
        ]
        best = best_times(methods, repeat)
        roof = gram_flops / best["dgemm (roof)"]
        for name, _ in methods:
            t = best[name]
            flops = gram_flops if name.startswith("dgemm") else rbf_flops
            rows.append((d, name, t, flops / t, (flops / t) / roof))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="n=2048, fewer repeats")
    ap.add_argument("--n", type=int, default=None, help="block size n (n x n); default 4096")
    ap.add_argument("--dims", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--repeat", type=int, default=None, help="timed runs per case (best kept)")
    ap.add_argument("--threads", type=int, default=0,
                    help="OpenMP threads for kernel_from_gram (0 = OpenMP default)")
    ap.add_argument("--panel-rows", type=int, default=512,
                    help="rows per panel of the panelled variant")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness check")
    args = ap.parse_args(argv)

    n = args.n or (2048 if args.quick else 4096)
    repeat = args.repeat or (3 if args.quick else 7)

    print(f"CPU        : {cpu_model()}")
    print(f"cores      : {physical_cores()} physical, {os.cpu_count()} logical")
    for line in blas_info():
        print(f"threadpool : {line}")
    print(f"numpy      : {np.__version__}")
    print(f"cakernels  : openmp={_native.openmp_enabled()} max_threads={_native.max_threads()}"
          f" n_threads={args.threads} simd={_native.simd_path()}")
    print(f"block      : {n} x {n}, gamma = 1/d, best of {repeat} interleaved rounds")
    print(f"load avg   : {' '.join(f'{x:.2f}' for x in os.getloadavg())} (before the run)")
    print(f"flops      : RBF rows 2*n*n*d + {TRANSFORM_FLOPS_PER_ENTRY}*n*n; dgemm 2*n*n*d")
    print()

    rows = run(n, args.dims, repeat, args.threads, args.panel_rows, not args.no_check)
    header = f"{'d':>5}  {'method':<26} {'time [ms]':>10} {'GFLOP/s':>9} {'vs dgemm':>9}"
    print(header)
    print("-" * len(header))
    last_d = None
    for d, name, t, rate, ratio in rows:
        if last_d is not None and d != last_d:
            print()
        last_d = d
        print(f"{d:>5}  {name:<26} {t * 1e3:>10.2f} {rate / 1e9:>9.2f} {ratio:>9.2f}")


if __name__ == "__main__":
    main()
