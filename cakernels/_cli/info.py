"""``cakernels info``."""

import os

# --------------------------------------------------------------------------- info


def _cmd_info(args):
    from .._info import build_info
    from ..datasets import ENV_VAR, get_data_home

    info = build_info()
    rows = [
        ("cakernels", info["cakernels"]),
        ("python", info["python"]),
        ("platform", info["platform"]),
        ("numpy", info["numpy"]),
        ("scipy", info["scipy"]),
        ("scikit-learn", info["scikit-learn"]),
        ("OpenMP", f"yes, {info['omp_max_threads']} threads" if info["openmp"]
         else "no (native module built without OpenMP)"),
        ("CPU cores", str(info["cpu_count"])),
        ("native module", info["native_module"]),
    ]
    blas = info["blas"] or ["none found by threadpoolctl"]
    rows += [("BLAS" if i == 0 else "", b) for i, b in enumerate(blas)]
    mpi = info["mpi4py"]
    rows.append(("MPI", f"mpi4py {mpi} importable" if mpi else
                 "not available (mpi4py not importable; pip install cakernels[mpi])"))
    for mod, extra in (("pooch", "datasets"), ("tqdm", "progress")):
        try:
            from importlib.metadata import version

            rows.append((mod, version(mod)))
        except Exception:
            rows.append((mod, f"not installed (pip install cakernels[{extra}])"))
    home = get_data_home()
    source = f"from {ENV_VAR}" if os.environ.get(ENV_VAR) else f"default; set {ENV_VAR} to change"
    exists = "exists" if home.is_dir() else "does not exist"
    rows.append(("data home", f"{home} ({source}; {exists})"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0
