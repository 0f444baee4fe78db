"""SPMD check of load_svmlight_shard: the shards, stacked in rank order, are the
whole file as load_svmlight reads it; a file it cannot read is the same error on
every rank (each rank's message is printed). ``spmd_shard.py FILE [FILE ...]``."""

import json
import sys

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI

from cakernels.datasets import load_svmlight, load_svmlight_shard

comm = MPI.COMM_WORLD
if sys.argv[1] == "--arguments":
    # arguments that differ between ranks (or are invalid on one): the same error on
    # every rank (each took other collective steps: a hang), and errors about the
    # whole file name no rank
    import os

    path, last = sys.argv[2], comm.rank == comm.size - 1
    cases = {"zero_based": {"zero_based": last}, "n_features": {"n_features": 100 + last},
             "invalid": {"n_features": -1 if last else 100},
             "whole-file": {"zero_based": False}, "other-size": {"zero_based": True},
             "own-file": {"zero_based": True}, "copies": {"zero_based": True}}
    # node-local copies at the same (relative) path, the last rank's missing its last
    # line (an old copy): each rank reads "data.svm" in a folder of its own
    folder = f"{path}.node{comm.rank}"
    os.makedirs(folder, exist_ok=True)
    with open(path) as src:
        lines = src.readlines()
    with open(os.path.join(folder, "data.svm"), "w") as dst:
        dst.writelines(lines[:-1] if last else lines)
    # a file of each rank's own rows, all of one size (rows 15 of 30 were read
    # silently on 2 ranks); and identical copies under other paths (fine)
    with open(f"{path}.own{comm.rank}", "w") as dst:
        dst.writelines(lines[comm.rank:] + lines[:comm.rank])
    with open(f"{path}.copy{comm.rank}", "w") as dst:
        dst.writelines(lines)
    comm.Barrier()
    for name, kw in cases.items():
        given = {"other-size": "data.svm", "own-file": f"{path}.own{comm.rank}",
                 "copies": f"{path}.copy{comm.rank}"}.get(name, path)
        here = os.getcwd()
        if name == "other-size":
            os.chdir(folder)
        try:
            load_svmlight_shard(given, **kw)
            got = None
        except ValueError as exc:
            got = f"{type(exc).__name__}: {exc}"
        finally:
            os.chdir(here)
        errors = comm.gather(got, root=0)
        if comm.rank == 0:
            print(json.dumps({"case": name, "errors": errors}), flush=True)
    sys.exit(0)
for path in sys.argv[1:]:
    try:
        X, y = load_svmlight_shard(path)
    except (ValueError, OSError) as exc:  # raised on every rank, or the others would wait
        errors = comm.gather(f"{type(exc).__name__}: {exc}", root=0)
        if comm.rank == 0:
            print(json.dumps({"path": path, "errors": errors}), flush=True)
        continue
    Xs, ys = comm.gather(X, root=0), comm.gather(y, root=0)
    if comm.rank == 0:
        Xa, ya = load_svmlight(path)
        Xg = sp.vstack(Xs).tocsr()
        print(json.dumps({"path": path, "equal": bool(Xg.shape == Xa.shape
                                                       and (Xg != Xa).nnz == 0
                                                       and np.array_equal(np.concatenate(ys), ya)),
                          "rows": [x.shape[0] for x in Xs]}), flush=True)
