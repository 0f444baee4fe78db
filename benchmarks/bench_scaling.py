"""Weak and strong scaling of CA-SVM, BKRR2 and DKRR: measured at 1 and 2 ranks,
modelled to P = 1,024 from measured parts under an alpha-beta network model.

This machine has 2 cores, so scaling is *measured* at 1 and 2 ranks (one core
each, ``-bind-to core``; 4 ranks share the cores and are shown for the message
counts only) and *modelled* beyond, as the reference's Tables 2.15-2.18 and 3.3
measure it on up to 1,536 processors. The model is built from measured parts:

* **network**: latency ``alpha`` and inverse bandwidth ``1/beta`` from an MPI
  ping-pong between two ranks of this machine (shared memory: optimistic for a
  cluster), and a second, pessimistic scenario of an Ethernet-class network
  (``alpha`` = 50 us, ``beta`` = 1 GB/s, an assumption stated as such);
* **computation**: the time of one partition's local solve as a function of its
  size ``m``, measured on one core (LIBSVM on ijcnn1 rows for CA-SVM; the
  kernel matrix and Cholesky solve on cadata-like rows for BKRR2) and fitted by a
  power law; DKRR's rate is MKL ScaLAPACK's measured on one rank;
* **communication**: the collectives each method makes (operation, calls and
  bytes per rank, by phase) as the package's counters report them at 1, 2 and 4
  ranks (``fit_stats_['comm']``), written as formulas in P and checked against
  those counts; each collective costs what a standard algorithm needs
  (ring allgather ``(P-1)(alpha + s/beta)``, allreduce ``2 log2(P) alpha + 2 s/beta``,
  all-to-all ``(P-1) alpha + bytes/beta``...). DKRR's ScaLAPACK Cholesky moves
  about ``n^2 log2(P) / sqrt(P)`` words per process in ``(n / nb) log2(P)``
  messages per process (the standard 2-D block-cyclic cost).

Weak scaling keeps the rows per rank fixed (CA-SVM: 3,125 ijcnn1-like rows per
partition, one partition per rank; BKRR2 and DKRR: 2,000 cadata-like rows per
rank, as the reference's 8,000 samples on 4 nodes); efficiency is T(1) / T(P).
Strong scaling fixes the data (ijcnn1: 50,000; cadata: 16,000).

    python benchmarks/bench_scaling.py [--quick] [--out FILE] [--plot FILE]
"""

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

HERE = Path(__file__).resolve()
MPIEXEC = Path(sys.executable).with_name("mpiexec")
SVM = {"C": 32.0, "gamma": 2.0}
KRR = {"sigma": 0.5, "lam": 1e-6}
M_SVM, M_KRR = 3125, 2000          # rows per rank in weak scaling
D_SVM, D_KRR = 22, 8               # features (ijcnn1, cadata)
MODEL_P = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
PESSIMISTIC = {"alpha": 50e-6, "beta": 1e9}


# ===================================================================== workers (mpiexec)
def worker_pingpong(args):
    import time

    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    sizes = [8, 1024, 65536, 1 << 20, 8 << 20]
    out = []
    for s in sizes:
        buf = np.zeros(s // 8)
        reps = 2000 if s <= 65536 else 50
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            if rank == 0:
                comm.Send(buf, 1)
                comm.Recv(buf, 1)
            else:
                comm.Recv(buf, 0)
                comm.Send(buf, 0)
        dt = (time.perf_counter() - t0) / reps / 2  # one way
        out.append((s, dt))
    if rank == 0:
        print(json.dumps(out), flush=True)


def _shards(name, n_per_rank, rank, size):
    import numpy as np

    from cakernels.datasets import load_dataset

    if name == "ijcnn1":
        X, y = load_dataset("ijcnn1", subset="train", data_home=_DATA, return_X_y=True)
    else:
        X, y = load_dataset("cadata", data_home=_DATA, return_X_y=True)
        X = (X - X.mean(0)) / X.std(0)
        y = (y - y.mean()) / y.std()
    n = n_per_rank * size
    idx = np.random.RandomState(0).choice(len(X), n, replace=len(X) < n)
    lo, hi = rank * n_per_rank, (rank + 1) * n_per_rank
    return X[idx[lo:hi]], y[idx[lo:hi]]


_DATA = None


def worker_weak(args):
    """One weak-scaling run: a fit per method, every rank with its fixed rows."""
    import time

    from mpi4py import MPI

    from cakernels import BKRR2, CASVC, DKRR
    from cakernels.backends import MPIBackend

    global _DATA
    _DATA = args.data_home
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    m_svm = M_SVM // (4 if args.quick else 1)
    m_krr = M_KRR // (4 if args.quick else 1)
    out = {}
    runs = [("CASVC", "ijcnn1", m_svm,
             lambda: CASVC(size, backend=MPIBackend(sharded=True), random_state=0, **SVM)),
            ("BKRR2", "cadata", m_krr,
             lambda: BKRR2(size, backend=MPIBackend(sharded=True), random_state=0, **KRR)),
            ("DKRR", "cadata", m_krr,
             lambda: DKRR(KRR["sigma"], KRR["lam"], backend=MPIBackend(sharded=True)))]
    for name, data, m, make in runs:
        X, y = _shards(data, m, rank, size)
        best = None
        for _ in range(args.repeats):
            est = make()
            comm.Barrier()
            t0 = time.perf_counter()
            est.fit(X, y)
            comm.Barrier()
            t = time.perf_counter() - t0
            best = t if best is None else min(best, t)
        c = est.fit_stats_["comm"]
        per_rank = {}
        for r in c["ranks"]:
            for op, v in r["by_op"].items():
                cur = per_rank.setdefault(op, {"bytes": 0, "calls": 0})
                cur["bytes"] = max(cur["bytes"], v["bytes"])
                cur["calls"] = max(cur["calls"], v["calls"])
        phases = {k: est.fit_stats_.get(k) for k in ("partition_seconds",
                                                     "redistribution_seconds",
                                                     "solve_wall_seconds", "gather_seconds",
                                                     "factor_seconds", "kernel_seconds")}
        out[name] = {"fit": best, "m": m, "by_op": per_rank, "phases": phases,
                     "bytes": c["total"]["bytes"], "messages": c["total"]["messages"]}
    if rank == 0:
        print(json.dumps(out), flush=True)


# ===================================================================== one-core measurements
def solve_times(args):
    """Local solve time of one partition of m rows, on one core."""
    import time

    import numpy as np
    from threadpoolctl import threadpool_limits

    from cakernels import BKRR2, CASVC
    from cakernels.datasets import load_dataset

    Xi, yi = load_dataset("ijcnn1", subset="train", data_home=args.data_home, return_X_y=True)
    Xc, yc = load_dataset("cadata", data_home=args.data_home, return_X_y=True)
    Xc = (Xc - Xc.mean(0)) / Xc.std(0)
    yc = (yc - yc.mean()) / yc.std()
    rng = np.random.RandomState(1)
    sizes = [500, 1000, 2000, 4000] if args.quick else [1000, 2000, 3125, 4000, 6250, 12500]
    out = {"svm": [], "krr": []}
    with threadpool_limits(1):
        for m in sizes:
            for key, X, y, make in (("svm", Xi, yi, lambda: CASVC(1, **SVM)),
                                    ("krr", Xc, yc, lambda: BKRR2(1, **KRR))):
                if key == "krr" and m > 8000:
                    continue
                idx = rng.choice(len(X), m, replace=False)
                best = math.inf
                for _ in range(2):
                    t0 = time.perf_counter()
                    make().fit(X[idx], y[idx])
                    best = min(best, time.perf_counter() - t0)
                out[key].append((m, best))
    return out


def power_law(points):
    """``(c, e)`` of ``t = c m^e``, least squares in log-log."""
    import numpy as np

    m = np.log([p[0] for p in points])
    t = np.log([p[1] for p in points])
    e, logc = np.polyfit(m, t, 1)
    return float(np.exp(logc)), float(e)


# ===================================================================== the model
def _log2(P):
    return math.log2(P) if P > 1 else 0.0


def collective_time(op, calls, nbytes, P, alpha, beta):
    """Seconds of ``calls`` calls of ``op`` where a rank contributes ``nbytes`` in all."""
    if P == 1 or calls == 0:
        return 0.0
    s = nbytes / calls  # per call
    if op in ("Allgatherv", "allgather"):
        one = (P - 1) * (alpha + s / beta)  # ring: every rank receives P-1 chunks
    elif op in ("Allreduce", "allreduce"):
        one = 2 * _log2(P) * alpha + 2 * s / beta
    elif op in ("Bcast", "bcast", "metadata"):
        one = _log2(P) * (alpha + s / beta)
    elif op in ("Scatterv", "Gatherv", "Alltoallv"):
        one = (P - 1) * alpha + s / beta
    else:  # Send
        one = alpha + s / beta
    return calls * one


def comm_formulas(name, P, m, d):
    """Collectives per rank of one fit at P ranks: ``{op: (calls, bytes)}``.

    Derived from the algorithms (setup checks, partitioning, redistribution,
    model gather) and checked against the counters at P = 2 and 4.
    """
    if P == 1:
        return {}
    small = {"allgather": (14, 14 * 300), "metadata": (6, 6 * 100)}  # setup and reports
    if name == "CASVC":
        sv = 0.25 * m  # support vectors of a partition (measured fraction, ijcnn1)
        model = sv * (8 * d + 8) + 2000
        return {**small,
                "Allreduce": (2, 8 * (P * d + P) + 8),       # means; non-zero count
                "Allgatherv": (2, 8 * m + model)}            # labels; local models
    if name == "BKRR2":
        iters, events = 12, P + 1
        model = m * (8 * d + 16) + 2000                      # rows, alpha, norms
        return {**small,
                "Allreduce": (iters + 4 + 2 * events,
                              iters * 8 * (P * d + P) + 2 * events * 8 * P + 8 * (P * d + P)),
                "Allgatherv": (2 + events, 8 * m + model + events * 8 * P + 50 * P * 8 * d),
                "Alltoallv": (5, (1 - 1 / P) * m * (8 * d + 32)),  # rows to their owners
                "Bcast": (1, 8 * P * d)}
    raise ValueError(name)


def model_time(name, P, m_per_rank, d, solve, net, rates=None):
    """Modelled fit seconds of one method at P ranks (rows per rank ``m_per_rank``)."""
    alpha, beta = net["alpha"], net["beta"]
    if name == "DKRR":
        n = m_per_rank * P
        F = rates["dkrr_flops"]            # flops per second per rank (measured)
        Tk = rates["kernel_rate"] * n * n / P  # kernel entries per rank
        compute = n ** 3 / (3 * P * F) + Tk
        if P == 1:
            return compute
        nb = 128
        words = n * n * _log2(P) / math.sqrt(P)
        msgs = (n / nb) * _log2(P) * 3
        gather = collective_time("Allgatherv", 1, 8 * m_per_rank * (d + 1), P, alpha, beta)
        return compute + msgs * alpha + 8 * words / beta + gather
    c, e = solve
    compute = c * m_per_rank ** e
    comm = sum(collective_time(op, calls, b, P, alpha, beta)
               for op, (calls, b) in comm_formulas(name, P, m_per_rank, d).items())
    return compute + comm


# ===================================================================== driver
def _run(argv, timeout=7200):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(common.REPO_ROOT)] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    out = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env,
                         timeout=timeout, start_new_session=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, argv))} failed:\n{out.stderr[-3000:]}")
    return json.loads([line for line in out.stdout.splitlines() if line.startswith("{")
                       or line.startswith("[")][-1])


def main():
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    ap.add_argument("--worker", choices=("pingpong", "weak"), help=argparse.SUPPRESS)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--plot", default=str(HERE.with_name("scaling_model.png")),
                    help="PNG of the modelled curves (default benchmarks/scaling_model.png)")
    args = ap.parse_args()
    args.data_home = common.data_home(args.data_home)
    if args.worker == "pingpong":
        return worker_pingpong(args)
    if args.worker == "weak":
        return worker_weak(args)

    report = common.Report()
    report.line("# Weak and strong scaling, measured and modelled (bench_scaling.py)\n")
    report.machine([f"mpiexec    : {MPIEXEC} (-bind-to core)"])
    mpi = [MPIEXEC, "-n"]
    tail = ["-bind-to", "core", sys.executable, "-m", "mpi4py", HERE, "--data-home",
            args.data_home, "--repeats", args.repeats] + (["--quick"] if args.quick else [])

    # ---- network
    pp = _run(mpi + [2] + tail + ["--worker", "pingpong"])
    import numpy as np

    sizes = np.array([p[0] for p in pp], float)
    times = np.array([p[1] for p in pp], float)
    inv_beta, alpha = np.polyfit(sizes, times, 1)
    alpha = max(alpha, times[0])
    measured_net = {"alpha": float(alpha), "beta": float(1 / inv_beta)}
    report.table("Network (MPI ping-pong between two ranks of this machine)",
                 ["message bytes", "one-way seconds"],
                 [[f"{int(s):,}", f"{t:.2e}"] for s, t in pp],
                 note=f"fit: alpha = {measured_net['alpha'] * 1e6:.2f} us, beta = "
                      f"{measured_net['beta'] / 1e9:.2f} GB/s (shared memory). Pessimistic "
                      f"scenario (an assumption, Ethernet-class): alpha = "
                      f"{PESSIMISTIC['alpha'] * 1e6:.0f} us, beta = "
                      f"{PESSIMISTIC['beta'] / 1e9:.0f} GB/s.")

    # ---- one-core local solves
    st = solve_times(args)
    svm_law, krr_law = power_law(st["svm"]), power_law(st["krr"])
    report.table("Local solve time of one partition (one core)",
                 ["rows m", "CA-SVM partition s (LIBSVM)", "BKRR2 partition s (Cholesky)"],
                 [[f"{m:,}", f"{t:.3f}", next((f"{u:.3f}" for mm, u in st["krr"] if mm == m),
                                               "")] for m, t in st["svm"]],
                 note=f"power laws: SVM t = {svm_law[0]:.2e} m^{svm_law[1]:.2f}, KRR t = "
                      f"{krr_law[0]:.2e} m^{krr_law[1]:.2f}")

    # ---- measured weak scaling
    measured = {P: _run(mpi + [P] + tail + ["--worker", "weak"]) for P in (1, 2, 4)}
    m_svm = measured[1]["CASVC"]["m"]
    m_krr = measured[1]["BKRR2"]["m"]
    dk = measured[1]["DKRR"]
    n1 = dk["m"]
    t_factor = dk["phases"]["factor_seconds"] or dk["fit"]
    t_kernel = dk["phases"]["kernel_seconds"] or 0.0
    rates = {"dkrr_flops": n1 ** 3 / 3 / max(t_factor, 1e-9),
             "kernel_rate": max(t_kernel, 1e-9) / (n1 * n1)}
    solves = {"CASVC": svm_law, "BKRR2": krr_law}
    dims = {"CASVC": D_SVM, "BKRR2": D_KRR, "DKRR": D_KRR}
    ms = {"CASVC": m_svm, "BKRR2": m_krr, "DKRR": m_krr}
    rows = []
    for P in (1, 2, 4):
        for name in ("CASVC", "BKRR2", "DKRR"):
            r = measured[P][name]
            model = model_time(name, P, ms[name], dims[name], solves.get(name),
                               measured_net, rates)
            formula = comm_formulas(name, P, ms[name], dims[name]) if name != "DKRR" else {}
            fb = sum(b for _, b in formula.values())
            rb = sum(v["bytes"] for v in r["by_op"].values())
            rows.append([P, name, f"{r['fit']:.3f}", f"{model:.3f}",
                         f"{rb / 1024:.1f}", f"{fb / 1024:.1f}" if name != "DKRR" else "-",
                         "yes" if P <= 2 else "no (4 ranks share 2 cores)"])
    report.table("Weak scaling, measured against the model (per-rank rows fixed)",
                 ["P", "method", "measured fit s", "model s", "KiB sent (max rank)",
                  "KiB in the formula", "one core per rank"], rows,
                 note="'KiB sent' is what the package's counters report for the busiest "
                      "rank (DKRR: the data distribution only; ScaLAPACK's own messages are "
                      "modelled, not counted).")

    # ---- modelled curves
    curves = {}
    for net_name, net in (("measured network", measured_net),
                          ("pessimistic network", PESSIMISTIC)):
        for name in ("CASVC", "BKRR2", "DKRR"):
            t1 = model_time(name, 1, ms[name], dims[name], solves.get(name), net, rates)
            curves[(net_name, name, "weak")] = [
                t1 / model_time(name, P, ms[name], dims[name], solves.get(name), net, rates)
                for P in MODEL_P]
        n_strong = {"CASVC": 49990, "BKRR2": 16000, "DKRR": 16000}
        for name in ("CASVC", "BKRR2", "DKRR"):
            curves[(net_name, name, "strong")] = [
                model_time(name, P, n_strong[name] / P, dims[name], solves.get(name), net,
                           rates) for P in MODEL_P]
    rows = []
    for net_name in ("measured network", "pessimistic network"):
        for name in ("CASVC", "BKRR2", "DKRR"):
            eff = curves[(net_name, name, "weak")]
            rows.append([net_name, name] + [f"{100 * e:.1f}%" if e >= 0.001 else f"{100 * e:.2g}%"
                                            for e in eff])
    report.table("Modelled weak-scaling efficiency T(1)/T(P)",
                 ["network", "method"] + [f"P={P}" for P in MODEL_P], rows)
    rows = []
    for net_name in ("measured network",):
        for name in ("CASVC", "BKRR2", "DKRR"):
            rows.append([name] + [f"{t:.3g}" for t in curves[(net_name, name, "strong")]])
    report.table("Modelled strong scaling: fit seconds (ijcnn1 50,000 rows; cadata 16,000)",
                 ["method"] + [f"P={P}" for P in MODEL_P], rows)
    p64 = MODEL_P.index(64)
    goals = [[f"{name} weak-scaling efficiency at P=64 >= 92% ({net_name})",
              f"{100 * curves[(net_name, name, 'weak')][p64]:.1f}%",
              common.pass_miss(curves[(net_name, name, "weak")][p64] >= 0.92)]
             for net_name in ("measured network", "pessimistic network")
             for name in ("CASVC", "BKRR2")]
    goals.append(["DKRR collapses (weak efficiency at P=64 below 5%)",
                  f"{100 * curves[('measured network', 'DKRR', 'weak')][p64]:.2g}%",
                  common.pass_miss(curves[("measured network", "DKRR", "weak")][p64] < 0.05)])
    report.table("Goals", ["goal", "model", "status"], goals)
    _plot(curves, args.plot, measured, ms, report)
    report.write(args.out)


def _plot(curves, path, measured, ms, report):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        report.line("(matplotlib missing: no plot)")
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = {"CASVC": "tab:blue", "BKRR2": "tab:green", "DKRR": "tab:red"}
    for name in ("CASVC", "BKRR2", "DKRR"):
        for net_name, style in (("measured network", "-"), ("pessimistic network", "--")):
            axes[0].plot(MODEL_P, curves[(net_name, name, "weak")], style, color=colors[name],
                         label=f"{name}, {net_name}" if style == "-" else None)
        t1 = measured[1][name]["fit"]
        axes[0].plot([1, 2], [1.0, t1 / measured[2][name]["fit"]], "o", color=colors[name])
        axes[1].plot(MODEL_P, curves[("measured network", name, "strong")], "-",
                     color=colors[name], label=name)
    axes[0].set_xscale("log", base=2)
    axes[0].set_yscale("log")
    axes[0].set_ylim(1e-4, 1.5)
    axes[0].axhline(0.92, color="gray", lw=0.8)
    axes[0].set_xlabel("ranks P")
    axes[0].set_ylabel("weak-scaling efficiency T(1)/T(P)")
    axes[0].set_title("Weak scaling (dots: measured; dashed: pessimistic network)")
    axes[0].legend(fontsize=7)
    axes[1].set_xscale("log", base=2)
    axes[1].set_yscale("log")
    axes[1].set_xlabel("ranks P")
    axes[1].set_ylabel("fit seconds (model)")
    axes[1].set_title("Strong scaling (model)")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    report.line(f"\nplot: {path}")


if __name__ == "__main__":
    main()
