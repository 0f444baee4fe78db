"""How much memory this node has available, for refusing work that would not fit.

Used by DKRR (its block of the kernel matrix per rank), the KRR fits and searches
(their partitions' matrices), the partitioners (their dense centres and distances)
and the command line (``--method krr``'s kernel, ``--standardize``'s scaler): each
refuses a problem beyond :data:`MEMORY_FRACTION` of :func:`available_bytes` (the
node's, shared by its processes) or of :func:`process_room` (this process's address
space) with a message, before anything is allocated, instead of being killed by the
system. Tests replace :func:`available_bytes` on this module.
"""

#: fraction of the available memory that a planned allocation may use
MEMORY_FRACTION = 0.8


def available_bytes():
    """Memory available on this node to this process and the others of its node
    (``MemAvailable`` of ``/proc/meminfo``, or less within its cgroup's memory
    limit: a container or a batch job's limit kills at the limit, not at the node's
    memory), or None when unknown."""
    room = [r for r in (_meminfo_available(), _cgroup_room()) if r is not None]
    return min(room) if room else None


def process_room():
    """The bytes of address space this process may still map under its
    ``RLIMIT_AS`` (``ulimit -v``: a limit of each process, not of the node), or
    None without that limit."""
    return _address_space_room()


def _meminfo_available(path="/proc/meminfo"):
    try:
        with open(path, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


#: a cgroup memory limit at or above this is no limit (cgroup v1 reports ~2^63)
_NO_LIMIT = 2**60


def _read_int(path):
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read().strip()
    except (OSError, ValueError):  # (ValueError: not ASCII)
        return None
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value < _NO_LIMIT else None


def _cgroup_room(proc="/proc/self/cgroup", root="/sys/fs/cgroup"):
    """The bytes left under this process's cgroup memory limits (the tightest of
    its cgroup and their parents; v2, or v1's memory controller), or None without
    a limit."""
    import os

    try:
        with open(proc, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    found = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # v2: the unified hierarchy
            base, limit, usage, cache = root, "memory.max", "memory.current", "inactive_file"
            if not os.path.exists(os.path.join(root, "cgroup.controllers")):
                base = os.path.join(root, "unified")
        elif "memory" in controllers.split(","):
            base, limit, usage, cache = (os.path.join(root, "memory"), "memory.limit_in_bytes",
                                         "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        path = path.strip("/")
        while True:
            folder = os.path.join(base, path) if path else base
            cap, used = _read_int(os.path.join(folder, limit)), _read_int(
                os.path.join(folder, usage))
            if cap is not None and used is not None:
                # the usage counts the page cache, which the kernel reclaims before it
                # kills: the inactive file pages are room (the kubelet's "working set")
                free = _stat(os.path.join(folder, "memory.stat"), cache) or 0
                found.append(max(0, cap - max(0, used - free)))
            if not path:
                break
            path = os.path.dirname(path)
    return min(found) if found else None


def _stat(path, key):
    """One counter of a cgroup's ``memory.stat``, or None."""
    try:
        with open(path, encoding="ascii") as fh:
            for line in fh:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return None


def _address_space_room(status="/proc/self/status"):
    """The bytes of address space left under ``RLIMIT_AS`` (``ulimit -v``), or None
    without that limit."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, AttributeError, OSError, ValueError):  # (no RLIMIT_AS: not Linux)
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    try:
        with open(status, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return max(0, soft - int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return None


def shortfall(need):
    """The bytes available when ``need`` bytes (of this process) exceed
    :data:`MEMORY_FRACTION` of them, else None (also when the memory is unknown): the
    node's memory (:func:`available_bytes`) and this process's address space
    (:func:`process_room`), the smaller."""
    avail = limit_bytes()
    return avail if avail is not None and need > MEMORY_FRACTION * avail else None


def limit_bytes():
    """The smaller of :func:`available_bytes` and :func:`process_room` (None when
    neither is known): what one process may still allocate."""
    room = [r for r in (available_bytes(), process_room()) if r is not None]
    return min(room) if room else None


def fmt_bytes(n):
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
