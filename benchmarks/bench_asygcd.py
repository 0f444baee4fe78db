"""Asy-GCD against PSCD, LIBSVM and scikit-learn-intelex (Figures 4.1 and 4.3 of the reference).

One binary kernel SVM per dataset, all solvers side by side in one process:

* ijcnn1 (49,990 train / 91,701 test, 22 dense features; C=32, gamma=2 as in
  Table 4.1) and a9a (32,561 / 16,281, 123 sparse features, given to the
  native solver as CSR; C=1, gamma=0.05), tol=1e-3 everywhere;
* ``AsyGCDSVC`` (the dual *without* bias of chapter 4) with 1 and 2 threads,
  PSCD (``selection='random'``) with 2 threads, and ``fit_intercept=True``
  (LIBLINEAR's regularised bias, kernel + 1) with 2 threads;
* ``sklearn.svm.SVC`` (LIBSVM, single-threaded by design) and
  ``sklearnex.svm.SVC`` (oneDAL, every core) when installed;
* every solver gets the same kernel cache budget (``--cache``, MB).

Progress curves: every solver is run again with a growing iteration limit
(``max_iter``; geometric steps) and the whole fit is timed, so a point of a
curve is what a user gets by stopping there. Test accuracy is measured at
every point, the dual objective for the Asy-GCD runs.  The optimum f* of a
dual is the lowest objective seen in any run of it.

Printed, with PASS/MISS for the goals of the native-solver issue:

* Asy-GCD on 2 threads against 1 thread, time to converge (the defaults on
  both, shrinking included; and against the faster of the two 1-thread
  settings, with and without shrinking) -- goal >= 1.8x;
* Asy-GCD against PSCD (2 threads): time to a dual objective within 1e-3
  relative of f* (Figure 4.3) -- goal >= 2x;
* time to reach the reference's final test accuracy minus 0.1 points, for
  SVC, sklearnex SVC and Asy-GCD on 2 threads (goal: Asy-GCD first);
* peak memory of an Asy-GCD fit (a fresh process, ``--mem-cache`` MB of
  cache) against the data, the cache budget and O(n) vectors.

Figure 4.1 (objective gap and test accuracy against time, 1 and 2 threads,
PSCD and the references) is saved as ``benchmarks/asygcd_<dataset>.png`` (or in
``--png-dir``); a ``--quick`` run saves ``benchmarks/results/asygcd_<dataset>_quick.png``
(git-ignored) unless ``--png-dir`` is given. Without matplotlib the tables are
printed and the figure is skipped with a message.

    python benchmarks/bench_asygcd.py [--quick] [--datasets ijcnn1 a9a] [--out FILE]

Full run: about 15 minutes on 2 cores (13 in the run of 2026-11-26; 33 before
Asy-GCD's shrinking).
"""

import argparse
import contextlib
import json
import re
import subprocess
import sys
import time
import warnings

import _common as common  # noqa: I001  (puts the checkout on sys.path)

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.svm import SVC

from cakernels import AsyGCDSVC
from cakernels._solvers import asygcd as asygcd_mod
from cakernels.datasets import load_dataset

PARAMS = {"ijcnn1": dict(C=32.0, gamma=2.0), "a9a": dict(C=1.0, gamma=0.05)}
TOL = 1e-3
#: alternating rounds of the converged fits of 1 and 2 threads (their medians are compared)
ROUNDS = 3


def load(name, home, quick):
    kw = dict(data_home=home, return_X_y=True, download_if_missing=False)
    sub = dict(n_samples=8000, random_state=0) if quick else {}
    X, y = load_dataset(name, **sub, **kw)
    Xt, yt = load_dataset(name, subset="test", **(dict(n_samples=8000, random_state=0)
                                                   if quick else {}), **kw)
    if name == "ijcnn1":  # dense, 22 features
        X = X.toarray() if sp.issparse(X) else np.asarray(X)
        Xt = Xt.toarray() if sp.issparse(Xt) else np.asarray(Xt)
    else:  # keep CSR: the native solver's sparse path (int32 indices for LIBSVM)
        X, Xt = common.libsvm_csr(sp.csr_matrix(X)), common.libsvm_csr(sp.csr_matrix(Xt))
    return X, np.where(y > 0, 1, -1), Xt, np.where(yt > 0, 1, -1)


@contextlib.contextmanager
def team_spy(teams):
    """Adds to the set ``teams`` the thread team of every Asy-GCD / PSCD solve in the
    block (the result's ``n_threads``: the size rule ``asygcd_mod.team_size`` runs
    problems under 2 x ``MIN_ROWS_PER_THREAD`` rows on one thread)."""
    real = asygcd_mod.asygcd_fit

    def spy(*args, **kwargs):
        res = real(*args, **kwargs)
        teams.add(int(res["n_threads"]))
        return res

    asygcd_mod.asygcd_fit = spy
    try:
        yield teams
    finally:
        asygcd_mod.asygcd_fit = real


def ran_label(label, teams):
    """``label`` with its "2 threads" / "2 thr" replaced by the threads that ran, as
    bench_feature_major.py does ("1 thread (2 asked)"); unchanged when 2 ran or no
    team is known (the references)."""
    if not teams or teams == {2}:
        return label
    ran = "/".join(map(str, sorted(teams)))
    return re.sub(r"\b2 (threads|thr)\b",
                  lambda m: f"{ran} {'thread' if ran == '1' and m[1] == 'threads' else m[1]}"
                            " (2 asked)", label)


def run_point(make, X, y, Xt, yt, max_iter):
    """Fit with an iteration limit; (seconds, test accuracy, objective or None, iters,
    the Asy-GCD teams that ran)."""
    est = make(max_iter)
    with warnings.catch_warnings(), team_spy(set()) as teams:
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, t = common.timed(est.fit, X, y)
    acc = float(np.mean(est.predict(Xt) == yt))
    obj = None
    if isinstance(est, AsyGCDSVC):
        obj = float(np.sum(est.objective_))
    iters = int(np.sum(getattr(est, "n_iter_", -1)))
    return dict(t=t, acc=acc, obj=obj, iters=iters, teams=teams)


def teams_of(pts):
    """The teams that ran over the points of a curve (or one run)."""
    return set().union(*(p["teams"] for p in pts))


def curve(make, X, y, Xt, yt, first, stop_when=None, grow=1.6, max_points=14):
    """Points at max_iter = first, first*grow, ... until convergence."""
    pts, it = [], first
    while True:
        p = run_point(make, X, y, Xt, yt, int(it))
        pts.append(p)
        done = p["iters"] < int(it)  # converged before the limit
        print(f"      max_iter={int(it):>9,}: {p['t']:7.2f} s  acc {100 * p['acc']:.2f}%"
              + (f"  obj {p['obj']:.6f}" if p["obj"] is not None else "")
              + ("  (converged)" if done else ""), flush=True)
        if done or len(pts) >= max_points or (stop_when is not None and stop_when(p)):
            break
        it *= grow
    return pts


def converged_run(make, X, y, Xt, yt):
    p = run_point(make, X, y, Xt, yt, -1)
    print(f"      converged: {p['t']:7.2f} s  acc {100 * p['acc']:.2f}%  iters {p['iters']:,}"
          + (f"  obj {p['obj']:.6f}" if p["obj"] is not None else ""), flush=True)
    return p


def first_time(pts, ok):
    for p in pts:
        if ok(p):
            return p["t"]
    return np.inf


MEMORY_CHILD = r"""
import json, os, resource, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(sys.argv[1], "benchmarks"))
from _common import data_nbytes, proc_status_bytes as status
from cakernels.datasets import load_dataset
import scipy.sparse as sp
from cakernels import AsyGCDSVC
from cakernels._solvers import asygcd as agcd
name, home, cache, quick = sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5] == "1"
sub = dict(n_samples=8000, random_state=0) if quick else {}
X, y = load_dataset(name, data_home=home, return_X_y=True, download_if_missing=False, **sub)
X = (X.toarray() if sp.issparse(X) else np.asarray(X)) if name == "ijcnn1" else sp.csr_matrix(X)
nbytes = data_nbytes(X)
C, gamma = float(sys.argv[6]), float(sys.argv[7])
# warm-up on 300 samples: one-time runtime set-up (OpenMP and BLAS thread
# buffers, lazy imports) is not the fit's memory
AsyGCDSVC(C=C, gamma=gamma, n_threads=2, random_state=0).fit(X[:300], y[:300])
before = status("VmRSS:")
teams, real = set(), agcd.asygcd_fit
def spy(*a, **k):  # the team that ran (the size rule runs small problems on one thread)
    res = real(*a, **k)
    teams.add(int(res["n_threads"]))
    return res
agcd.asygcd_fit = spy
AsyGCDSVC(C=C, gamma=gamma, n_threads=2, cache_size=cache, random_state=0).fit(X, y)
print(json.dumps(dict(before=before, after=status("VmHWM:"), data=nbytes, n=X.shape[0],
                      teams=sorted(teams))))
"""


def peak_memory(name, home, cache, quick, C, gamma):
    out = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(common.REPO_ROOT), name,
                          home, str(cache), "1" if quick else "0", str(C), str(gamma)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def plot(name, series, f_star, path, say=print):
    plt = common.pyplot(say)
    if plt is None:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for label, pts in series.items():
        t = [p["t"] for p in pts]
        if pts[0]["obj"] is not None and "intercept" not in label:  # K + 1: another f*
            gap = [max((p["obj"] - f_star) / abs(f_star), 1e-9) for p in pts]
            ax1.loglog(t, gap, "o-", label=label, ms=3)
        ax2.semilogx(t, [100 * p["acc"] for p in pts], "o-", label=label, ms=3)
    ax1.axhline(1e-3, color="grey", lw=0.8, ls="--")
    ax1.set(xlabel="time (s)", ylabel="(f - f*) / |f*|", title=f"{name}: dual objective")
    ax2.set(xlabel="time (s)", ylabel="test accuracy (%)", title=f"{name}: test accuracy")
    accs = [100 * p["acc"] for pts in series.values() for p in pts]
    ax2.set_ylim(max(min(accs), max(accs) - 4), max(accs) + 0.3)
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    for ax in (ax1, ax2):  # plain seconds on the log time axis
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return common.save_figure(fig, path, say, label="figure")


def main(argv=None):
    ap = common.add_common_args(argparse.ArgumentParser(description=__doc__.split("\n\n")[0]))
    ap.add_argument("--datasets", nargs="+", default=["ijcnn1", "a9a"], choices=sorted(PARAMS))
    ap.add_argument("--cache", type=float, default=2000.0, help="kernel cache of every solver, MB")
    ap.add_argument("--mem-cache", type=float, default=100.0,
                    help="cache budget (MB) of the peak-memory run (default 100)")
    ap.add_argument("--memory-only", action="store_true",
                    help="only the peak-memory check (a fit per dataset, ~1 min)")
    ap.add_argument("--png-dir", default=None,
                    help="where the figures go (default: benchmarks/; with --quick "
                         "benchmarks/results/, as asygcd_<dataset>_quick.png, git-ignored)")
    args = ap.parse_args(argv)
    common.plot_check(not args.memory_only)
    home = common.data_home(args.data_home)
    try:
        from sklearnex.svm import SVC as XSVC
    except ImportError:
        XSVC = None

    rep = common.Report()
    rep.line("## Asy-GCD: threads, PSCD and the LIBSVM / oneDAL references\n")
    rep.machine([f"params     : {PARAMS}, tol={TOL}, cache {args.cache:g} MB for every solver",
                 f"sklearnex  : {'installed' if XSVC else 'not installed'}"])
    goals, summary, one_ran = [], [], []
    for name in args.datasets:
        X, y, Xt, yt = load(name, home, args.quick)
        P = PARAMS[name]
        n = X.shape[0]
        rep.line(f"\n#### {name}: train {X.shape}, test {Xt.shape}"
                 f"{' (CSR)' if sp.issparse(X) else ''}{' QUICK subset' if args.quick else ''}")

        if args.memory_only:
            memory_table(rep, goals, name, home, args, P)
            continue

        def agcd(threads, **kw):
            return lambda it: AsyGCDSVC(**P, tol=TOL, cache_size=args.cache, n_threads=threads,
                                        max_iter=it, random_state=0, **kw)

        runs = {}
        # ---- time to converge: 1 vs 2 threads (same settings, and defaults). One untimed
        # fit first: the first full-size fit of a process is slower (page faults of its
        # first large allocations), and it was the 1-thread side's, timed first. Then
        # ROUNDS rounds alternate the settings (a run-to-run spread of 10-20% here), and
        # each setting's median run is kept
        print(f"\n[{name}] converged fits (one untimed warm-up fit, then {ROUNDS} "
              "alternating rounds)", flush=True)
        converged_run(agcd(1), X, y, Xt, yt)
        settings = [("Asy-GCD 1 thread", agcd(1)), ("Asy-GCD 2 threads", agcd(2)),
                    ("Asy-GCD 1 thread, shrinking=False", agcd(1, shrinking=False))]
        rounds = {label: [] for label, _ in settings}
        for r in range(ROUNDS):
            for label, make in (settings if r % 2 == 0 else settings[::-1]):
                print(f"   {label} (round {r + 1})", flush=True)
                rounds[label].append(converged_run(make, X, y, Xt, yt))
        for label, done in rounds.items():
            done = sorted(done, key=lambda p: p["t"])
            runs[label] = dict(done[len(done) // 2], spread=(done[0]["t"], done[-1]["t"]),
                               teams=set().union(*(p["teams"] for p in done)))
        print("   Asy-GCD 2 threads, fit_intercept", flush=True)
        runs["Asy-GCD 2 threads, fit_intercept"] = converged_run(agcd(2, fit_intercept=True),
                                                                X, y, Xt, yt)

        # ---- progress curves
        first = max(1000, n // 10)
        series = {}
        print(f"\n[{name}] progress curves", flush=True)
        for label, make in [("Asy-GCD 1 thread", agcd(1)),
                            ("Asy-GCD 2 threads", agcd(2))]:
            print(f"   {label}", flush=True)
            series[label] = curve(make, X, y, Xt, yt, first)
        f_star = min([p["obj"] for pts in series.values() for p in pts]
                     + [r["obj"] for k, r in runs.items() if "intercept" not in k])
        near = lambda p: p["obj"] is not None and (p["obj"] - f_star) / abs(f_star) <= 1e-3  # noqa: E731
        print("   PSCD 2 threads", flush=True)
        cap = 10 * runs["Asy-GCD 2 threads"]["t"]  # PSCD may crawl: bound it
        series["PSCD 2 threads"] = curve(agcd(2, selection="random"), X, y, Xt, yt, first,
                                         stop_when=lambda p: near(p) or p["t"] > cap,
                                         max_points=18)
        print("   Asy-GCD 2 threads, fit_intercept", flush=True)
        series["Asy-GCD 2 thr, intercept"] = curve(agcd(2, fit_intercept=True), X, y, Xt, yt,
                                                   first)
        refs = {}
        svc_make = lambda it: SVC(**P, tol=TOL, cache_size=args.cache, max_iter=it)  # noqa: E731
        print("   sklearn SVC", flush=True)
        refs["sklearn SVC (1 core)"] = svc_make
        if XSVC is not None:
            refs["sklearnex SVC (all cores)"] = (
                lambda it: XSVC(**P, tol=TOL, cache_size=args.cache, max_iter=it))
        ref_final = {}
        for label, make in refs.items():
            print(f"   {label}", flush=True)
            fin = converged_run(make, X, y, Xt, yt)
            ref_final[label] = fin
            series[label] = curve(make, X, y, Xt, yt, max(200, fin["iters"] // 20))

        # ---- tables
        rows = []
        for label, r in runs.items():
            t = (f"{r['t']:.2f} ({r['spread'][0]:.2f}-{r['spread'][1]:.2f})" if "spread" in r
                 else f"{r['t']:.2f}")
            rows.append([ran_label(label, r["teams"]), t, f"{r['iters']:,}",
                         f"{100 * r['acc']:.2f}%",
                         "-" if r["obj"] is None else f"{r['obj']:.4f}"])
        for label, r in ref_final.items():
            rows.append([label, f"{r['t']:.2f}", f"{r['iters']:,}", f"{100 * r['acc']:.2f}%",
                         "(with bias)"])
        rep.table(f"{name}: fits to tol={TOL}", ["solver", "fit s", "iterations / updates",
                                                  "test acc", "dual objective"], rows,
                  note=f"Medians of {ROUNDS} alternating runs (range) after one warm-up fit "
                       "where a range is given; single fits otherwise. "
                       "Asy-GCD iterations are coordinate updates (all threads); SVC's are "
                       "SMO steps. fit_intercept solves K + 1 (another objective). Threads: "
                       "those that ran (Asy-GCD's size rule, cakernels._solvers.asygcd."
                       "team_size, runs problems under "
                       f"{2 * asygcd_mod.MIN_ROWS_PER_THREAD:,} rows on one; the count asked "
                       "is then given too).")
        t2 = runs["Asy-GCD 2 threads"]["t"]
        s_same = runs["Asy-GCD 1 thread"]["t"] / t2
        s_best = min(runs["Asy-GCD 1 thread"]["t"],
                     runs["Asy-GCD 1 thread, shrinking=False"]["t"]) / t2
        # the 2-thread fits' teams: one thread when the size rule collapsed them
        two_ran = 2 in runs["Asy-GCD 2 threads"]["teams"]
        if not two_ran:
            one_ran.append(name)

        def thread_goal(ok):
            return common.pass_miss(ok) if two_ran else "n/a (one thread ran)"

        goals.append([f"{name}: 2 vs 1 thread (defaults; medians of {ROUNDS} alternating runs)",
                      ">= 1.8x", f"{s_same:.2f}x", thread_goal(s_same >= 1.8)])
        goals.append([f"{name}: 2 threads vs the faster 1-thread setting (shrinking or not)",
                      ">= 1.8x", f"{s_best:.2f}x", thread_goal(s_best >= 1.8)])
        t_g = first_time(series["Asy-GCD 2 threads"], near)
        t_p = first_time(series["PSCD 2 threads"], near)
        last = series["PSCD 2 threads"][-1]["t"]
        goals.append([ran_label(f"{name}: PSCD / Asy-GCD time to 1e-3 rel. objective (2 thr)",
                                teams_of(series["PSCD 2 threads"])
                                | teams_of(series["Asy-GCD 2 threads"])), ">= 2x",
                      f"{t_p / t_g:.2f}x ({t_p:.1f} s / {t_g:.1f} s)" if np.isfinite(t_p)
                      else f"PSCD not there within {last:.0f} s",
                      # Asy-GCD must get there; PSCD not getting there passes only
                      # when its curve ran at least twice Asy-GCD's time
                      common.pass_miss(bool(np.isfinite(t_g)) and (
                          t_p >= 2 * t_g if np.isfinite(t_p) else last >= 2 * t_g))])
        trows = []
        for label, fin in ref_final.items():
            target = fin["acc"] - 0.001
            hit = lambda p: p["acc"] >= target - 1e-12  # noqa: E731
            t_ref = first_time(series[label], hit)
            for ours in ("Asy-GCD 2 threads", "Asy-GCD 2 thr, intercept"):
                t_ours = first_time(series[ours], hit)
                trows.append([label, f"{100 * target:.2f}%", f"{t_ref:.2f}",
                              ran_label(ours, teams_of(series[ours])),
                              f"{t_ours:.2f}" if np.isfinite(t_ours) else "never",
                              f"{t_ref / t_ours:.2f}x" if np.isfinite(t_ours) else "-"])
                if ours.endswith("intercept"):
                    goals.append([ran_label(f"{name}: Asy-GCD 2 thr (intercept) vs {label}, "
                                            f"time to {100 * target:.2f}%",
                                            teams_of(series[ours])), "faster",
                                  f"{t_ours:.2f} s vs {t_ref:.2f} s",
                                  common.pass_miss(t_ours < t_ref)])
        rep.table(f"{name}: time to reach the reference's accuracy - 0.1 pt",
                  ["reference", "target", "ref s", "ours", "ours s", "ref / ours"], trows,
                  note="Times of the first curve point at or above the target (every point is "
                       "a complete fit with an iteration limit).")
        memory_table(rep, goals, name, home, args, P)
        png = f"asygcd_{name}.png"
        plot(name, {ran_label(k, teams_of(v)): v for k, v in series.items()}, f_star,
             common.plot_path(
                 args.png_dir and f"{args.png_dir}/{png}", png, args.quick), rep.line)
        summary.append((name, series))
    rep.table("goals of the native-solver issue (informational)",
              ["goal", "target", "measured", "status"], goals)
    if args.quick:
        rep.line("\nQUICK run: 8,000-row subsets"
                 + (f" (one thread ran where two were asked: {', '.join(one_ran)})"
                    if one_ran else "") + "; goals refer to the full data.")
    rep.line(f"\nload average at end: {common.load_avg()}")
    rep.write(args.out)


def memory_table(rep, goals, name, home, args, P):
    """Peak memory of an Asy-GCD fit in a fresh process: a table and a goal row."""
    mem = peak_memory(name, home, args.mem_cache, args.quick, P["C"], P["gamma"])
    grow = mem["after"] - mem["before"]
    allowed = 2 * mem["data"] + args.mem_cache * 2**20 + 2 * 24 * 8 * mem["n"]
    title = ran_label(f"{name}: peak memory of an Asy-GCD fit (2 threads, fresh process)",
                      set(mem.get("teams", [])))
    rep.table(title,
              ["data MB", "cache budget MB", "O(n) allowance MB", "peak RSS growth MB",
               "limit MB"],
              [[f"{mem['data'] / 2**20:.1f}", f"{args.mem_cache:g}",
                f"{2 * 24 * 8 * mem['n'] / 2**20:.1f}", f"{grow / 2**20:.1f}",
                f"{allowed / 2**20:.1f}"]],
              note="Limit: the data twice (the caller's and one converted copy: float64, "
                   "int64 CSR indices), the cache budget, and 24 float64 vectors of n per "
                   "thread (alpha, gradient, bounds, index maps, the K-means blocks). Peak "
                   "from VmHWM, after a warm-up fit on 300 samples (runtime set-up).")
    goals.append([f"{name}: peak memory within data + cache + O(n)",
                  f"<= {allowed / 2**20:.0f} MB", f"{grow / 2**20:.1f} MB",
                  common.pass_miss(grow <= allowed)])




if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
