"""The shared partitioning layer.

Five partitioners, each a small estimator in the style of
:class:`sklearn.cluster.KMeans`: ``fit(X)`` sets ``labels_`` (the partition
of every sample), ``centers_`` (one row per partition) and ``sizes_``;
``assign(X)`` routes new samples to their nearest centre.

============================  ================================  =================
partitioner                   reference                         balanced
============================  ================================  =================
:class:`RandomPartitioner`    CA-SVM (Alg. 5), DC-KRR (Alg. 8)  yes
:class:`KMeansPartitioner`    CP-SVM, DC-SVM, KKRR              no
:class:`KBalancePartitioner`  Algorithm 9 (BKRR)                yes
:class:`FCFSPartitioner`      Algorithm 3 (FCFS-SVM)            yes
:class:`BKMPartitioner`       Algorithm 4 (BKM-SVM)             yes
============================  ================================  =================

Balanced partitioners give every partition exactly ``floor(m/P)`` or
``ceil(m/P)`` samples (``m mod P`` of them get the ceiling, first come first
served). The capacity-limited greedy assignment of Algorithms 3, 4 and 9 is
computed exactly, but not one sample at a time: an event simulation assigns
every sample to its nearest open centre until the next centre fills, closes
that centre and re-routes only the samples that had chosen it. That costs
O(m P) work per closed centre, vectorised, instead of a Python loop over
samples (or the O(m) scan per move that Algorithm 4's pseudo-code suggests).

Storage format
--------------
The same data give the same partition whether it is stored dense or as CSR
(with 32- or 64-bit indices, as :func:`sklearn.datasets.load_svmlight_file`
returns), bit for bit, as long as its dense copy fits
:data:`DENSE_BUDGET_BYTES`. The partitioners then compute on one canonical
storage chosen from the data's values, never from how they are stored
(:func:`partition_storage`): C-contiguous float64 when at least
:data:`SPARSE_DENSITY` of the values are non-zero (CSR input is densified for
the fit, a transient copy, and ``assign`` densifies CSR rows one block at a
time), else CSR with 32-bit indices, sorted and without explicit zeros (dense
input is converted, which on such sparse data costs a fraction of its dense
size; on very sparse, wide data dense K-means was 75-230x slower than the CSR
one, see benchmarks/README.md). Above the budget CSR input stays CSR and dense
input stays dense (a CSR copy of large dense data would cost more memory
than it saves): K-means and the distances then round differently for the two
formats, so the partitions, and the models built on them, can differ.
K-means takes CSR with 32-bit indices only; 64-bit indices are narrowed on a
copy of the index arrays when the matrix allows it.

Precision
---------
Distances to the centres are computed as ``||x||^2 + ||c||^2 - 2 x.c`` (one
matrix product, as :func:`sklearn.metrics.pairwise.euclidean_distances`),
which loses the digits that a large common offset takes: with features far
from the origin compared with their spread (an offset 10^8 times the clusters'
spread), nearby centres can tie or swap in the assignment and in routing.
Centre or standardise such features first (``StandardScaler`` in a pipeline,
as for the kernels themselves).
"""

from ._greedy import _Capacity, balanced_sizes, greedy_capacity_assign  # noqa: F401
from ._partitioners import (  # noqa: F401
    PARTITIONERS,
    BKMPartitioner,
    FCFSPartitioner,
    KBalancePartitioner,
    KMeansPartitioner,
    RandomPartitioner,
    _BasePartitioner,
    make_partitioner,
)
from ._storage import (  # noqa: F401
    ASSIGN_BLOCK_ROWS,
    DENSE_BUDGET_BYTES,
    SPARSE_DENSITY,
    _int32_indices,
    dense_partitioning,
    nearest_center,
    partition_means,
    partition_storage,
    squared_distances,
    to_partition_storage,
)

__all__ = [
    "DENSE_BUDGET_BYTES",
    "SPARSE_DENSITY",
    "dense_partitioning",
    "partition_storage",
    "RandomPartitioner",
    "KMeansPartitioner",
    "KBalancePartitioner",
    "FCFSPartitioner",
    "BKMPartitioner",
    "make_partitioner",
    "PARTITIONERS",
]

# public objects report this package as their module (as NumPy's set_module
# does), so that pickles and reprs do not depend on the private file layout
for _name in ["RandomPartitioner", "KMeansPartitioner", "KBalancePartitioner", "FCFSPartitioner", "BKMPartitioner", "make_partitioner"]:
    globals()[_name].__module__ = __name__
del _name
