"""CPU time of a server: its master and every worker, from /proc."""

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid):
    """The fields of /proc/PID/stat after the command name, or None.

    Field n of proc(5) is at index n - 3 here: ppid is 4, utime 14,
    stime 15, cutime 16, cstime 17.
    """
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rindex(")") + 2:].split()


def _children():
    """Map of ppid -> list of pids, for every process."""
    kids = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = _stat(int(name))
        if st is not None:
            kids.setdefault(int(st[1]), []).append(int(name))
    return kids


def tree(root):
    """The pids of root and all its descendants."""
    kids = _children()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(kids.get(pid, ()))
    return pids


def cpu_ticks(root):
    """utime + stime of root and its live descendants, in clock ticks.

    The root's cutime + cstime is added too, so that a worker which
    exits (and is reaped) between two readings still counts.
    """
    total = 0
    for pid in tree(root):
        st = _stat(pid)
        if st is None:
            continue
        total += int(st[11]) + int(st[12])
        if pid == root:
            total += int(st[13]) + int(st[14])
    return total


def ticks_to_us(ticks):
    return ticks * 1e6 / CLK_TCK


def busy_ticks(cpus=None):
    """user + nice + system time of the given CPUs (a set of numbers; all
    when None), from /proc/stat.

    irq and softirq are left out, as they are out of the processes'
    own utime and stime too when the kernel accounts them apart.
    """
    total = 0
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            fields = line.split()
            name = fields[0][3:]
            if (cpus is None and name == "") or \
                    (cpus is not None and name and int(name) in cpus):
                total += int(fields[1]) + int(fields[2]) + int(fields[3])
    return total


def rss_kb(root):
    """Resident memory of root and its descendants, in KiB (VmRSS of
    each: pages shared between them count once per process)."""
    total = 0
    for pid in tree(root):
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total


def children(root):
    """The pids of root's direct children (a server's workers)."""
    return sorted(_children().get(root, ()))


def sockets(pid):
    """How many sockets the process has open."""
    n = 0
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return 0
    for fd in fds:
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith(
                    "socket:"):
                n += 1
        except OSError:
            pass
    return n
