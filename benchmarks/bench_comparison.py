"""The thesis' chapter-2 comparison: eight distributed SVMs side by side.

Four parts (``--parts``, default all):

``tables``  Tables 2.9-2.14: Dis-SMO, Cascade, DC-SVM, DC-Filter, CP-SVM, BKM-SVM,
            FCFS-SVM and CA-SVM (P = 8, native SMO local solver, ``backend='serial'``,
            one core) and scikit-learn's ``SVC`` as the reference row, on ijcnn1
            (full, C=32, gamma=2 as Table 2.12), a9a (sparse CSR, C=1, gamma=0.05; the
            thesis' adult is the same data, Table 2.9) and usps (10 classes, C=10,
            gamma=0.0066, the SVC's choice on validation data in bench_svm_family.py;
            the thesis' usps of Table 2.13 is a 266,079-sample binary version). Accuracy,
            iterations (the critical path: Dis-SMO and SVC all theirs; a single-level
            method its slowest partition; a multi-level method the sum over layers of
            the slowest node, as Table 2.5 counts), init (partitioning) and training
            seconds, support vectors, and the thesis' row.
``profile`` Table 2.5: Cascade's per-node profile on 48,000 ijcnn1 samples, 8 nodes,
            and the weighted average number of busy nodes (equation 2.13). A layer's
            time is its slowest node's (what it takes with a core per node).
``comm``    Tables 2.6-2.7 and Figure 2.7: every method under ``mpiexec -n 8`` (root
            mode, ranks oversubscribed on this machine: only the counters matter) on an
            ijcnn1 subset; bytes, messages and bytes per message from the package's
            counters, next to the thesis' formulas evaluated at the run's m, n, s, P, k
            and I (in the thesis' 4-byte words); a plot of bytes and messages per phase
            (``--plot``, default ``benchmarks/comparison_comm.png``; a ``--quick`` run's
            goes to ``benchmarks/results/comparison_comm_quick.png``, git-ignored;
            skipped with a message when matplotlib is not installed).
``goals``   DCSVC vs SVC on ijcnn1 (from ``tables``), Dis-SMO 1 -> 2 ranks and CA-SVM vs
            Dis-SMO at the same rank count (``mpiexec -n 1`` and ``-n 2``, ijcnn1
            subset, one core per rank).

Usage::

    python benchmarks/bench_comparison.py                     # everything, ~25 min
    python benchmarks/bench_comparison.py --parts comm goals  # the MPI parts, ~5 min
    python benchmarks/bench_comparison.py --quick             # subsets, ~2 min
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

HERE = Path(__file__).resolve()
METHODS = ["SVC", "Dis-SMO", "Cascade", "DC-SVM", "DC-Filter", "CP-SVM", "BKM-SVM",
           "FCFS-SVM", "CA-SVM"]
MPI_METHODS = METHODS[1:]
P = 8

# the thesis' rows: (accuracy %, iterations, time s, init s, training s)
THESIS = {
    "ijcnn1": ("Table 2.12 (ijcnn, Hopper)", {
        "Dis-SMO": (98.7, 30297, 23.8, 0.008, 23.8), "Cascade": (95.5, 37789, 13.5, 0.007, 13.5),
        "DC-SVM": (98.3, 31238, 59.8, 0.04, 59.7), "DC-Filter": (95.8, 17339, 8.4, 0.04, 8.3),
        "CP-SVM": (98.7, 7915, 6.5, 0.04, 6.4), "BKM-SVM": (98.3, 5004, 3.0, 0.08, 2.87),
        "FCFS-SVM": (98.5, 7450, 3.6, 0.005, 3.55), "CA-SVM": (98.0, 6110, 3.4, 3e-4, 3.4)}),
    "a9a": ("Table 2.9 (adult, Hopper)", {
        "Dis-SMO": (84.3, 8054, 5.64, 0.006, 5.64), "Cascade": (83.6, 1323, 1.05, 0.007, 1.04),
        "DC-SVM": (83.7, 8699, 17.1, 0.042, 17.1), "DC-Filter": (84.4, 3317, 2.23, 0.042, 2.18),
        "CP-SVM": (83.0, 2497, 1.66, 0.041, 1.59), "BKM-SVM": (83.3, 1482, 1.61, 0.057, 1.54),
        "FCFS-SVM": (83.6, 1621, 1.21, 0.005, 1.19), "CA-SVM": (83.1, 1160, 0.96, 4e-4, 0.95)}),
    "usps": ("Table 2.13 (usps 266k binary, Edison)", {
        "Dis-SMO": (99.2, 47214, 65.9, 2e-4, 65.9), "Cascade": (98.7, 132503, 969, 0.008, 969),
        "DC-SVM": (98.7, 83023, 1889, 1.5, 1887), "DC-Filter": (99.6, 67880, 242, 1.5, 240),
        "CP-SVM": (98.9, 7247, 35.7, 1.5, 33.9), "BKM-SVM": (98.9, 6122, 30.4, 2.02, 28.4),
        "FCFS-SVM": (99.0, 6513, 30.1, 0.04, 29.7), "CA-SVM": (98.9, 6435, 24.5, 0.0018, 24.5)}),
}
DATA = {  # registry name, C, gamma, sparse
    "ijcnn1": ("ijcnn1", 32.0, 2.0, False),
    "a9a": ("a9a", 1.0, 0.05, True),
    "usps": ("usps", 10.0, 0.006601, False),
}
# Table 2.6 (volumes in 4-byte words; m samples, n features per sample, s support
# vectors, P nodes, k K-means loops, I Dis-SMO iterations)
FORMULAS = {
    "Dis-SMO": ("26IP + 2Pm + 4mn", lambda m, n, s, P, k, I: 26 * I * P + 2 * P * m + 4 * m * n),
    "Cascade": ("3mn + 3m + 3sn", lambda m, n, s, P, k, I: 3 * m * n + 3 * m + 3 * s * n),
    "DC-SVM": ("9mn + 12m + 2kPn", lambda m, n, s, P, k, I: 9 * m * n + 12 * m + 2 * k * P * n),
    "DC-Filter": ("6mn + 7m + 3sn + 2kPn",
                  lambda m, n, s, P, k, I: 6 * m * n + 7 * m + 3 * s * n + 2 * k * P * n),
    "CP-SVM": ("6mn + 7m + 2kPn", lambda m, n, s, P, k, I: 6 * m * n + 7 * m + 2 * k * P * n),
    "CA-SVM": ("0", lambda m, n, s, P, k, I: 0),
}
#: Table 2.7: volume, messages and volume per message as the thesis prints them
#: (its volumes are rounded to MB: dividing them does not give its last column)
THESIS_COMM = {"Dis-SMO": (34e6, 335186, 101), "Cascade": (8e6, 56, 150200),
               "DC-SVM": (29e6, 80, 360734), "DC-Filter": (18e6, 80, 220449),
               "CP-SVM": (17e6, 24, 709644), "CA-SVM": (0, 0, None)}


def make(method, C, gamma, backend="serial", seed=0, n_partitions=P):
    from sklearn.svm import SVC

    from cakernels import (BKMSVC, CASVC, CPSVC, DCSVC, FCFSSVC, CascadeSVC, DCFilterSVC,
                           DisSMOSVC)

    kw = dict(C=C, gamma=gamma)
    if method == "SVC":
        return SVC(**kw)
    if method == "Dis-SMO":
        return DisSMOSVC(backend=backend, **kw)
    cls = {"Cascade": CascadeSVC, "DC-SVM": DCSVC, "DC-Filter": DCFilterSVC, "CP-SVM": CPSVC,
           "BKM-SVM": BKMSVC, "FCFS-SVM": FCFSSVC, "CA-SVM": CASVC}[method]
    extra = {} if method in ("Cascade", "DC-SVM", "DC-Filter") else {"solver": "smo"}
    return cls(n_partitions, backend=backend, random_state=seed, **kw, **extra)


def critical_iterations(method, est):
    """Iterations on the critical path (how the thesis' tables count them)."""
    import numpy as np

    if method == "SVC":
        return int(np.sum(est.n_iter_))
    if method == "Dis-SMO":
        return int(np.sum(est.n_iter_))
    stats = est.fit_stats_
    if "layers" in stats:
        return int(sum(max((p["n_iter"] for p in ls["node_profile"]), default=0)
                       for ls in stats["layers"]))
    return int(np.max(est.n_iter_))


def n_support(est):
    from sklearn.svm import SVC

    return int(est.support_.size) if isinstance(est, SVC) else int(est.n_support_total_)


def load(name, home, quick, n_train=None):
    import numpy as np
    import scipy.sparse as sp

    from cakernels.datasets import load_dataset

    reg, C, gamma, sparse = DATA[name]
    kw = dict(data_home=home, return_X_y=True, download_if_missing=False)
    X, y = load_dataset(reg, **kw)
    Xt, yt = load_dataset(reg, subset="test", **kw)
    n = 3000 if quick else n_train
    if n is not None and n < X.shape[0]:
        i = np.sort(np.random.RandomState(0).permutation(X.shape[0])[:n])
        X, y = X[i], y[i]
    if quick:
        j = np.sort(np.random.RandomState(0).permutation(Xt.shape[0])[:2000])
        Xt, yt = Xt[j], yt[j]
    if sparse:
        X, Xt = common.libsvm_csr(sp.csr_matrix(X)), common.libsvm_csr(sp.csr_matrix(Xt))
    else:
        X = X.toarray() if sp.issparse(X) else np.asarray(X)
        Xt = Xt.toarray() if sp.issparse(Xt) else np.asarray(Xt)
    return X, y, Xt, yt, C, gamma


# ------------------------------------------------------------------ tables (Tables 2.9-2.14)
def part_tables(args, report, results):
    import numpy as np
    from threadpoolctl import threadpool_limits

    for name in args.datasets:
        X, y, Xt, yt, C, gamma = load(name, args.data_home, args.quick)
        title, thesis = THESIS[name]
        report.line(f"\n{name}: train {X.shape}, test {Xt.shape}, "
                    f"{'CSR' if hasattr(X, 'indptr') else 'dense'}, "
                    f"{len(np.unique(y))} classes, C={C:g}, gamma={gamma:g}, P={P}")
        rows, res = [], {}
        with threadpool_limits(1):
            for m in METHODS:
                est = make(m, C, gamma)
                load1 = common.load1()
                t0 = time.perf_counter()
                est.fit(X, y)
                fit = time.perf_counter() - t0
                acc = float(np.mean(est.predict(Xt) == yt))
                init = 0.0 if m in ("SVC", "Dis-SMO") else float(
                    est.fit_stats_["partition_seconds"])
                it = critical_iterations(m, est)
                res[m] = dict(acc=acc, fit=fit, init=init, iters=it, sv=n_support(est),
                              load=load1)
                if m == "Cascade" and hasattr(est, "fit_stats_"):
                    res[m]["busy"] = est.fit_stats_["busy_nodes"]
                report.line(f"  {m}: acc {acc:.4f}, fit {fit:.2f} s (init {init:.3f}), "
                            f"{it} iterations, {res[m]['sv']} SVs, load {load1}")
                t = thesis.get(m)
                rows.append([m, f"{100 * acc:.2f}%", f"{it:,}",
                             f"{fit:.2f}s ({init:.3f}, {fit - init:.2f})", f"{res[m]['sv']:,}",
                             f"{fit / res['SVC']['fit']:.2f}" if m != "SVC" else "1.00",
                             f"{res['Dis-SMO']['fit'] / fit:.1f}x" if "Dis-SMO" in res else "-",
                             "-" if t is None else f"{t[0]}%",
                             "-" if t is None else f"{t[1]:,}",
                             "-" if t is None else f"{t[2]}s ({t[3]}, {t[4]})",
                             "-" if t is None or m == "Dis-SMO" else
                             f"{thesis['Dis-SMO'][2] / t[2]:.1f}x",
                             f"{load1:.2f}"])
        results[name] = res
        report.table(f"{name}: the eight methods and SVC (P = {P}, one core) next to "
                     f"{title}",
                     ["method", "accuracy", "iterations", "time (init, training)", "SVs",
                      "fit / SVC fit", "speed-up vs Dis-SMO", "thesis accuracy",
                      "thesis iterations", "thesis time (init, training)",
                      "thesis speed-up vs Dis-SMO", "load"], rows)


# ------------------------------------------------------------------ profile (Table 2.5)
def part_profile(args, report, results):
    from threadpoolctl import threadpool_limits

    from cakernels import CascadeSVC

    X, y, _, _, C, gamma = load("ijcnn1", args.data_home, args.quick,
                                n_train=None if args.quick else 48000)
    with threadpool_limits(1):
        est = CascadeSVC(P, C=C, gamma=gamma, random_state=0).fit(X, y)
    rows = []
    for ls in est.fit_stats_["layers"]:
        for p in ls["node_profile"]:
            rows.append([ls["layer"], p["node"] + 1, f"{p['samples']:,}", f"{p['seconds']:.2f}",
                         f"{p['n_iter']:,}", f"{p['support_vectors']:,}"])
        rows.append([f"layer {ls['layer']}", "max / sum", f"{ls['samples_in']:,}",
                     f"{ls['critical_seconds']:.2f}",
                     f"{max(p['n_iter'] for p in ls['node_profile']):,}",
                     f"{ls['support_vectors']:,}"])
    busy = est.fit_stats_["busy_nodes"]
    total = sum(ls["critical_seconds"] for ls in est.fit_stats_["layers"])
    top = est.fit_stats_["layers"][0]["critical_seconds"]
    bottom = est.fit_stats_["layers"][-1]["critical_seconds"]
    results["profile"] = dict(busy=busy, top_share=top / total, bottom_share=bottom / total)
    report.table(f"Cascade profile (Table 2.5): ijcnn1, {X.shape[0]:,} samples, {P} nodes, "
                 "one core per node", ["layer", "node", "samples", "seconds", "iterations",
                                       "SVs out"], rows,
                 note=(f"Weighted average number of busy nodes (equation 2.13): {busy:.2f} of "
                       f"{P} (thesis: 3.3). Top layer {100 * top / total:.0f}% of the time "
                       f"(thesis 27%), bottom layer {100 * bottom / total:.0f}% (thesis 48%)."))


# ------------------------------------------------------------------ MPI workers
def worker(args):
    """Under mpiexec: fit the methods in root mode; rank 0 prints one JSON line."""
    import numpy as np
    from mpi4py import MPI
    from threadpoolctl import threadpool_limits

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    X, y, Xt, yt, C, gamma = load("ijcnn1", args.data_home, args.quick,
                                  n_train=args.n_train)
    out = {"ranks": size, "m": int(X.shape[0]), "n": int(X.shape[1]), "methods": {}}
    for m in args.methods:
        best = None
        for _ in range(args.repeats):
            P_m = size if args.partitions_per_rank else P
            if args.sharded:
                from cakernels.backends import MPIBackend

                est = make(m, C, gamma, backend=MPIBackend(sharded=True), n_partitions=P_m)
                lo, hi = rank * X.shape[0] // size, (rank + 1) * X.shape[0] // size
                Xf, yf = X[lo:hi], y[lo:hi]
            else:
                est = make(m, C, gamma, backend="mpi", n_partitions=P_m)
                Xf, yf = (X, y) if rank == 0 else (None, None)
            comm.Barrier()
            t0 = time.perf_counter()
            with threadpool_limits(1):
                est.fit(Xf, yf)
            comm.Barrier()
            t = time.perf_counter() - t0
            best = t if best is None else min(best, t)
        stats = est.fit_stats_
        rec = {"fit": best, "bytes": stats["comm_bytes"], "messages": stats["comm_messages"],
               "by_phase": {p: [v["bytes"], v["messages"]]
                            for p, v in stats["comm"]["total"]["by_phase"].items()},
               "acc": float(np.mean(est.predict(Xt) == yt)), "sv": n_support(est),
               "iters": critical_iterations(m, est)}
        part = getattr(est, "partitioner_", None)
        rec["kmeans_loops"] = int(getattr(part, "n_iter_", 0) or 0)
        out["methods"][m] = rec
    if rank == 0:
        print(json.dumps(out), flush=True)


def run_mpi(n, args, methods, n_train, partitions_per_rank=False, bind=True, sharded=False):
    argv = [str(common.MPIEXEC), "-n", str(n)] + (["-bind-to", "core"] if bind else []) + [
        sys.executable, "-m", "mpi4py", str(HERE), "--worker", "--data-home", args.data_home,
        "--repeats", str(args.repeats), "--n-train", str(n_train), "--methods", *methods]
    if partitions_per_rank:
        argv.append("--partitions-per-rank")
    if sharded:
        argv.append("--sharded")
    if args.quick:
        argv.append("--quick")
    return common.run_json(argv, timeout=7200)


# ------------------------------------------------------------------ comm (Tables 2.6-2.7)
def part_comm(args, report, results):
    n_train = args.comm_samples
    got = run_mpi(8, args, MPI_METHODS, n_train, bind=False)
    sharded = run_mpi(8, args, ["Dis-SMO", "Cascade", "CA-SVM"], n_train, bind=False,
                      sharded=True)
    for meth, rec in sharded["methods"].items():
        got["methods"][f"{meth} (sharded)"] = rec
    m, n = got["m"], got["n"]
    rows, plot = [], {}
    for meth in got["methods"]:
        r = got["methods"][meth]
        base = meth.split(" (")[0]
        plot[meth] = r["by_phase"]
        f = FORMULAS.get(base)
        k = r["kmeans_loops"]
        pred = None if f is None else 4 * f[1](m, n, r["sv"], 8, k, r["iters"])
        ratio = "-" if not pred else f"{r['bytes'] / pred:.2f}"
        tb, tm, tbm = THESIS_COMM.get(base, (None, None, None))
        train = r["by_phase"].get("training", [0, 0])
        rows.append([meth, f"{r['bytes'] / 1e6:.2f}MB", f"{r['messages']:,}",
                     f"{train[0] / 1e6:.2f}MB / {train[1]:,}",
                     f"{r['bytes'] / max(r['messages'], 1):,.0f}B" if r["messages"] else "N/A",
                     "-" if f is None else f[0], "-" if pred is None else f"{pred / 1e6:.2f}MB",
                     ratio, "-" if tb is None else f"{tb / 1e6:.0f}MB",
                     "-" if tm is None else f"{tm:,}",
                     "-" if not tbm else f"{tbm:,}B"])
    results["comm"] = got
    report.table(f"Communication (Tables 2.6-2.7): ijcnn1 subset, m = {m:,}, n = {n}, "
                 "8 ranks, package counters (root mode: rank 0 holds the data and "
                 "scatters it; sharded: every rank reads its own rows)",
                 ["method", "volume", "messages", "training phase: volume / messages",
                  "volume / message", "thesis formula",
                  "formula at this run (4-byte words)", "measured / formula", "thesis volume",
                  "thesis messages", "thesis volume / message"], rows,
                 note="s = the run's support vectors, k = its K-means loops, I = its Dis-SMO "
                      "iterations, P = 8. Our messages carry float64 values and int64 "
                      "indices (8 bytes), the thesis' 4-byte CSR words.")
    if not args.no_plot:
        _plot_comm(plot, args.plot, report)


def _plot_comm(by_method, path, report):
    plt = common.pyplot(report.line)
    if plt is None:
        return
    import numpy as np

    phases = sorted({p for v in by_method.values() for p in v})
    names = list(by_method)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for ax, idx, label in ((axes[0], 0, "bytes"), (axes[1], 1, "messages")):
        bottom = np.zeros(len(names))
        for ph in phases:
            vals = np.array([by_method[nm].get(ph, [0, 0])[idx] for nm in names], float)
            ax.bar(names, vals, bottom=bottom, label=ph)
            bottom += vals
        ax.set_yscale("symlog")
        ax.set_ylabel(label)
        ax.tick_params(axis="x", rotation=30)
    axes[0].legend(fontsize=8)
    fig.suptitle("Communication by phase, 8 ranks, ijcnn1 subset (Figure 2.7)")
    fig.tight_layout()
    common.save_figure(fig, path, report.line)


# ------------------------------------------------------------------ goals
def part_goals(args, report, results):
    rows = []
    ij = results.get("ijcnn1")
    if ij is not None:
        svc, dc = ij["SVC"], ij["DC-SVM"]
        ok = dc["acc"] >= svc["acc"] - 0.001 and dc["fit"] < svc["fit"]
        rows.append(["DCSVC reaches SVC's accuracy (within 0.1 pt) in less fit time "
                     "(ijcnn1, 1 core)", f"{100 * dc['acc']:.2f}% vs {100 * svc['acc']:.2f}%, "
                     f"{dc['fit']:.3f} s vs {svc['fit']:.3f} s", common.pass_miss(ok)])
        for meth, thesis_acc in (("Dis-SMO", 98.7), ("Cascade", 95.5), ("DC-SVM", 98.3),
                                 ("DC-Filter", 95.8)):
            # at the thesis' precision (one decimal)
            acc = 100 * ij[meth]["acc"]
            rows.append([f"{meth} accuracy >= thesis Table 2.12 ({thesis_acc}%, one decimal)",
                         f"{acc:.3f}%", common.pass_miss(round(acc, 1) >= thesis_acc)])
    one = run_mpi(1, args, ["Dis-SMO", "CA-SVM"], args.goal_samples, partitions_per_rank=True)
    two = run_mpi(2, args, ["Dis-SMO", "CA-SVM"], args.goal_samples, partitions_per_rank=True)
    one8 = run_mpi(1, args, ["CA-SVM"], args.goal_samples)
    two8 = run_mpi(2, args, ["CA-SVM"], args.goal_samples)
    d1, d2 = one["methods"]["Dis-SMO"]["fit"], two["methods"]["Dis-SMO"]["fit"]
    rows.append([f"Dis-SMO 2 ranks >= 1.6x faster than 1 rank (ijcnn1 {one['m']:,}, one core "
                 "per rank)", f"{d1:.2f} s -> {d2:.2f} s: {d1 / d2:.2f}x",
                 common.pass_miss(d1 / d2 >= 1.6)])
    for ranks, got, got8 in ((1, one, one8), (2, two, two8)):
        dis = got["methods"]["Dis-SMO"]["fit"]
        ca, ca8 = got["methods"]["CA-SVM"]["fit"], got8["methods"]["CA-SVM"]["fit"]
        rows.append([f"CA-SVM >= 5x faster than Dis-SMO at {ranks} rank(s)",
                     f"P = ranks: {dis / ca:.1f}x ({ca:.2f} s, acc "
                     f"{100 * got['methods']['CA-SVM']['acc']:.2f}%); P = 8: {dis / ca8:.1f}x "
                     f"({ca8:.2f} s, acc {100 * got8['methods']['CA-SVM']['acc']:.2f}%); "
                     f"Dis-SMO {dis:.2f} s, acc {100 * got['methods']['Dis-SMO']['acc']:.2f}%",
                     common.pass_miss(dis / ca >= 5 and dis / ca8 >= 5)])
    results["goals"] = dict(one=one, two=two, one8=one8, two8=two8)
    report.table("Goals", ["goal", "measured", "status"], rows)
    if args.quick:
        report.line(f"\nQUICK run: {args.goal_samples:,}-sample subsets; goals refer to the "
                    "full data.")


def main():
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    ap.add_argument("--parts", nargs="+", default=["tables", "profile", "comm", "goals"],
                    choices=["tables", "profile", "comm", "goals"])
    ap.add_argument("--datasets", nargs="+", default=list(DATA), choices=list(DATA))
    ap.add_argument("--comm-samples", type=int, default=6000,
                    help="ijcnn1 samples of the 8-rank communication run")
    ap.add_argument("--goal-samples", type=int, default=49990,
                    help="ijcnn1 samples of the 1- and 2-rank Dis-SMO runs")
    ap.add_argument("--repeats", type=common.positive_int, default=1, help="fits per MPI configuration (best)")
    ap.add_argument("--plot", default=None,
                    help="PNG of the comm part (default benchmarks/comparison_comm.png; with "
                         "--quick benchmarks/results/comparison_comm_quick.png, git-ignored)")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--json", default=None, help="write every measurement as JSON")
    # worker options
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--methods", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--n-train", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--partitions-per-rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sharded", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.data_home = common.data_home(args.data_home)
    if args.worker:
        return worker(args)
    if args.quick:
        args.comm_samples, args.goal_samples = 3000, 3000
    args.plot = common.plot_path(args.plot, "comparison_comm.png", args.quick)
    common.plot_check("comm" in args.parts and not args.no_plot)
    report = common.Report()
    report.line("# The chapter-2 comparison (bench_comparison.py)\n")
    report.machine([f"mpiexec    : {common.MPIEXEC}"])
    results = {}
    t0 = time.perf_counter()
    for part in ("tables", "profile", "comm", "goals"):
        if part in args.parts:
            {"tables": part_tables, "profile": part_profile, "comm": part_comm,
             "goals": part_goals}[part](args, report, results)
    report.line(f"\ntotal {time.perf_counter() - t0:.0f} s")
    report.write(args.out)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
