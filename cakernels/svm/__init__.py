"""Partitioned kernel SVM classifiers (chapter 2 of the reference).

One engine (:class:`PartitionedSVC`) and thin named front doors that differ
only in how the training set is split:

=================  ==========================  =================================
estimator          partitioner                 reference
=================  ==========================  =================================
:class:`CASVC`     random, balanced            CA-SVM, Algorithm 5
:class:`FCFSSVC`   first come first served     FCFS-SVM, Algorithm 3
:class:`BKMSVC`    balanced K-means            BKM-SVM, Algorithm 4
:class:`CPSVC`     K-means (unbalanced)        CP-SVM
=================  ==========================  =================================

Every partition trains its own SVM (one-vs-one inside the partition for
multiclass problems); a test sample is classified by the model of the
partition whose centre is nearest (Algorithm 5, prediction).
"""

from ._asygcd import AsyGCDSVC
from ._dissmo import DisSMOSVC
from ._multilevel import DCSVC, CascadeSVC, DCFilterSVC
from ._partitioned import BKMSVC, CASVC, CPSVC, FCFSSVC, SOLVERS, PartitionedSVC

__all__ = ["PartitionedSVC", "CASVC", "FCFSSVC", "BKMSVC", "CPSVC", "AsyGCDSVC", "CascadeSVC",
           "DCSVC", "DCFilterSVC", "DisSMOSVC", "SOLVERS"]

# public objects report this package as their module (as NumPy's set_module
# does), so that pickles and reprs do not depend on the private file layout
for _name in ["PartitionedSVC", "CASVC", "FCFSSVC", "BKMSVC", "CPSVC", "AsyGCDSVC", "CascadeSVC",
              "DCSVC", "DCFilterSVC", "DisSMOSVC"]:
    globals()[_name].__module__ = __name__
del _name
