"""The one registry of the command line's methods.

Every method the command line knows -- the partitioned estimators, the exact
DKRR, the scikit-learn baselines and the oracle bounds -- is one
:class:`Method` here: its name, what it is called in tables, its task and
kind, the estimator it builds and the command-line options it takes. The
lists the commands use (methods per task, defaults, oracle rows) are derived
from this table. Standard library only: the parser is built before NumPy loads.
"""

import importlib
from dataclasses import dataclass

_COMMON = ("kernel", "backend", "n_jobs", "random_state", "verbose")
SVM_OPTIONS = ("C", "gamma", "tol", "n_partitions") + _COMMON
KRR_OPTIONS = ("sigma", "lam", "n_partitions", "halo") + _COMMON
#: the single-level partitioned SVMs also take a halo and soft routing (the
#: multi-level ones do not)
HALO_SVM_OPTIONS = SVM_OPTIONS + ("halo", "routing", "n_voters")


@dataclass(frozen=True)
class Method:
    """A method of the command line.

    ``kind`` is ``'partitioned'`` (this package's partitioned estimators),
    ``'exact'`` (DKRR), ``'baseline'`` (scikit-learn's SVC / KernelRidge) or
    ``'oracle'`` (an evaluation bound of the model ``bounds``). ``bench=False``
    keeps a method out of ``bench``'s default list (the multi-level SVMs and
    Dis-SMO: they take long on the default dataset; ``--methods`` runs them).
    """

    name: str
    display: str
    task: str
    kind: str
    estimator: str = None
    options: tuple = ()
    bounds: str = None
    bench: bool = True  # among the methods ``bench`` runs by default

    def estimator_class(self):
        module, _, cls = self.estimator.partition(":")
        return getattr(importlib.import_module(module), cls)

    @property
    def partitioned(self):
        return self.kind == "partitioned"


REGISTRY = {m.name: m for m in (
    Method("casvc", "CASVC", "classification", "partitioned", "cakernels.svm:CASVC",
           HALO_SVM_OPTIONS),
    Method("fcfssvc", "FCFSSVC", "classification", "partitioned", "cakernels.svm:FCFSSVC",
           HALO_SVM_OPTIONS),
    Method("bkmsvc", "BKMSVC", "classification", "partitioned", "cakernels.svm:BKMSVC",
           HALO_SVM_OPTIONS),
    Method("cpsvc", "CPSVC", "classification", "partitioned", "cakernels.svm:CPSVC",
           HALO_SVM_OPTIONS),
    Method("cascadesvc", "CascadeSVC", "classification", "partitioned",
           "cakernels.svm:CascadeSVC", SVM_OPTIONS + ("n_passes",), bench=False),
    Method("dcsvc", "DCSVC", "classification", "partitioned", "cakernels.svm:DCSVC",
           SVM_OPTIONS + ("predict_layer",), bench=False),
    Method("dcfiltersvc", "DCFilterSVC", "classification", "partitioned",
           "cakernels.svm:DCFilterSVC", SVM_OPTIONS, bench=False),
    Method("dissmosvc", "DisSMOSVC", "classification", "exact", "cakernels.svm:DisSMOSVC",
           ("C", "gamma", "tol", "kernel", "working_set", "backend", "n_jobs", "verbose"),
           bench=False),
    Method("svc", "SVC", "classification", "baseline", "sklearn.svm:SVC",
           ("C", "gamma", "tol", "kernel")),
    Method("dckrr", "DCKRR", "regression", "partitioned", "cakernels.kernel_ridge:DCKRR",
           KRR_OPTIONS),
    Method("kkrr", "KKRR", "regression", "partitioned", "cakernels.kernel_ridge:KKRR",
           KRR_OPTIONS),
    Method("kkrr2", "KKRR2", "regression", "partitioned", "cakernels.kernel_ridge:KKRR2",
           KRR_OPTIONS),
    Method("bkrr", "BKRR", "regression", "partitioned", "cakernels.kernel_ridge:BKRR",
           KRR_OPTIONS),
    Method("bkrr2", "BKRR2", "regression", "partitioned", "cakernels.kernel_ridge:BKRR2",
           KRR_OPTIONS),
    Method("dkrr", "DKRR", "regression", "exact", "cakernels.kernel_ridge:DKRR",
           ("sigma", "lam", "kernel", "backend", "n_jobs", "verbose")),
    Method("krr", "KernelRidge", "regression", "baseline", "sklearn.kernel_ridge:KernelRidge",
           ("sigma", "lam", "kernel")),
    Method("bkrr3", "BKRR3", "regression", "oracle", bounds="bkrr2"),
    Method("kkrr3", "KKRR3", "regression", "oracle", bounds="kkrr2"),
)}


def names(task=None, kinds=("partitioned", "exact", "baseline")):
    """Method names of ``task`` (any when None) and ``kinds``, in registry order."""
    return tuple(m.name for m in REGISTRY.values()
                 if (task is None or m.task == task) and m.kind in kinds)


SVM_METHODS = names("classification", ("partitioned",))
KRR_METHODS = names("regression", ("partitioned",))
METHODS = names()
CLASSIFICATION_METHODS = names("classification")
REGRESSION_METHODS = names("regression")
ORACLE_METHODS = {m.name: m.bounds for m in REGISTRY.values() if m.kind == "oracle"}
BASELINE = {"classification": "svc", "regression": "krr"}
#: the method ``fit`` trains when neither --method nor its options choose one
DEFAULT_METHOD = {"classification": "casvc", "regression": "bkrr2"}
#: the methods ``bench`` runs when --methods is not given
BENCH_DEFAULTS = {"classification": tuple(m for m in SVM_METHODS if REGISTRY[m].bench)
                  + ("svc",),
                  "regression": KRR_METHODS + ("bkrr3", "kkrr3", "krr")}
DISPLAY = {m.name: m.display for m in REGISTRY.values()}
