"""How much memory this node has available, for refusing work that would not fit.

Used by DKRR (its block of the kernel matrix per rank), the partitioners (their
dense centres) and ``cakernels fit --method krr`` (scikit-learn's KernelRidge): each
refuses a problem beyond :data:`MEMORY_FRACTION` of :func:`available_bytes` with a
message, before anything is allocated, instead of being killed by the system.
Tests replace :func:`available_bytes` on this module.
"""

#: fraction of the available memory that a planned allocation may use
MEMORY_FRACTION = 0.8


def available_bytes():
    """Memory available on this node (``MemAvailable``), or None when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def shortfall(need):
    """The bytes available when ``need`` bytes exceed :data:`MEMORY_FRACTION` of
    them, else None (also when the memory is unknown)."""
    avail = available_bytes()
    return avail if avail is not None and need > MEMORY_FRACTION * avail else None


def fmt_bytes(n):
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
