"""Local solvers: one binary SVM or one kernel ridge problem on one worker.

* :mod:`.smo` -- the native SMO (LIBSVM's algorithm: dual with bias, kernel
  cache, shrinking, warm start);
* :mod:`.asygcd` -- the native OpenMP Asy-GCD/PSCD solver (dual without bias);
* :mod:`.native_svc` -- a kernel SVM model (one-vs-one / one-vs-rest) trained
  by those solvers;
* :mod:`.krr` -- kernel ridge regression by in-place Cholesky;
* :mod:`.cholesky` -- that Cholesky: tiles on the package's threads, the same
  bits for any thread count;
* :mod:`.scalapack` -- ScaLAPACK's distributed Cholesky (DKRR);
* :mod:`.local` -- the interface the engine and the multi-level methods use.
"""
