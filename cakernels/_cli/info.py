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
        ("OpenMP", f"yes, {info['omp_max_threads']} thread"
                   f"{'' if info['omp_max_threads'] == 1 else 's'}" if info["openmp"]
         else "no (native module built without OpenMP)"),
        ("CPU cores", str(info["cpu_count"])),
        ("native module", info["native_module"]),
    ]
    blas = info["blas"] or ["none found by threadpoolctl"]
    rows += [("BLAS" if i == 0 else "", b) for i, b in enumerate(blas)]
    mpi = info["mpi4py"]
    if mpi:
        rows.append(("MPI", f"{info['mpi_library']}; mpi4py {mpi}"))
        rows.append(("mpiexec", info["mpiexec"] or "none next to this Python (use the one of "
                     "the MPI that mpi4py was built for)"))
    else:
        rows.append(("MPI", 'not available (mpi4py not importable; pip install "cakernels[mpi]")'))
    rows.append(("ScaLAPACK", info["scalapack"] or 'not found (DKRR under MPI needs it: pip '
                 'install "cakernels[scalapack]")'))
    # (skops: a dependency, the model files of fit/predict/evaluate)
    for mod, extra in (("skops", None), ("pooch", "datasets"), ("tqdm", "progress")):
        try:
            from importlib.metadata import version

            rows.append((mod, version(mod)))
        except Exception:
            rows.append((mod, "not installed (" + (f'pip install "cakernels[{extra}]")'
                                                   if extra else "pip install skops: fit, "
                                                   "predict and evaluate need it)")))
    home = get_data_home()
    source = f"from {ENV_VAR}" if os.environ.get(ENV_VAR) else f"default; set {ENV_VAR} to change"
    exists = ("exists" if home.is_dir() else "a file, not a folder" if home.exists()
              else "does not exist")
    rows.append(("data home", f"{home} ({source}; {exists})"))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    return 0
