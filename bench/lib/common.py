"""Small helpers shared by bench/run and its suites: output, tools, ports."""

import os
import resource
import shutil
import socket
import subprocess
import time

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC_DIR = os.path.dirname(BENCH_DIR)

# Where a tool lives when PATH lacks the sbin folders (non-root users).
EXTRA_PATH = ("/usr/local/sbin", "/usr/sbin", "/sbin")

# The Debian package that brings each tool, for --install.
PACKAGES = {
    "wrk": "wrk",
    "ab": "apache2-utils",
    "nginx": "nginx-light",
    "lighttpd": "lighttpd",
    "h2o": "h2o",
    "apache": "apache2",
    "gnuplot": "gnuplot-nox",
}


class BenchError(Exception):
    """A failure that stops the whole run with a message."""


def say(msg=""):
    print(msg, flush=True)


def which(name):
    found = shutil.which(name)
    if found:
        return found
    for d in EXTRA_PATH:
        path = os.path.join(d, name)
        if os.access(path, os.X_OK):
            return path
    return None


def install(tools):
    """Installs the packages of the missing tools with apt-get."""
    pkgs = sorted({PACKAGES[t] for t in tools if t in PACKAGES})
    if not pkgs:
        return
    apt = ["apt-get", "install", "-y", "--no-install-recommends"] + pkgs
    if os.geteuid() != 0:
        if not which("sudo"):
            say("install: not root and no sudo; skipping " +
                " ".join(pkgs))
            return
        apt = ["sudo", "-n"] + apt
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    say("install: " + " ".join(pkgs))
    if subprocess.run(apt, env=env, stdout=subprocess.DEVNULL).returncode:
        # The package lists may be stale or absent: refresh once.
        update = apt[:apt.index("install")] + ["update", "-qq"]
        subprocess.run(update, env=env)
        if subprocess.run(apt, env=env).returncode:
            say("install: apt-get failed for " + " ".join(pkgs))


def free_port():
    """A loopback port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=10.0):
    """True once something accepts on port; False if proc died first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def first_line(cmd):
    """First non-empty line a command prints (stdout or stderr), or ''."""
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT, timeout=10,
                     text=True, errors="replace").stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    for line in out.splitlines():
        if line.strip():
            return line.strip()
    return ""


def render(template, values):
    """Fills @KEY@ placeholders; a placeholder left unfilled is a bug."""
    with open(template) as f:
        text = f.read()
    for key, val in values.items():
        text = text.replace("@" + key + "@", str(val))
    if "@" in text:
        for line in text.splitlines():
            stripped = line.split("#", 1)[0]
            if stripped.count("@") >= 2:
                raise BenchError("%s: unfilled placeholder in: %s"
                         % (template, line.strip()))
    return text


def cpu_lists(workers):
    """CPUs for the server and for the load generator, as taskset lists.

    The server gets CPU 0 (more CPUs if it has more workers and the
    machine has them to spare); the load generator gets the next ones.
    Returns (None, None) on a single-CPU machine: no pinning.
    """
    ncpu = os.cpu_count() or 1
    if ncpu < 2:
        return None, None
    nserver = max(1, min(workers, ncpu - 1))
    server = "0" if nserver == 1 else "0-%d" % (nserver - 1)
    nload = max(1, min(ncpu - nserver, nserver))
    load = str(nserver) if nload == 1 else \
        "%d-%d" % (nserver, nserver + nload - 1)
    return server, load


def cpu_set(cpulist):
    """The CPU numbers of a taskset list that cpu_lists made; None: all."""
    if cpulist is None:
        return None
    lo, _, hi = cpulist.partition("-")
    return set(range(int(lo), int(hi or lo) + 1))


def cpu_count_of(cpulist):
    return len(cpu_set(cpulist)) if cpulist else 1


def pinned(cpulist, cmd):
    return (["taskset", "-c", cpulist] + cmd) if cpulist else cmd


def nofile():
    """The descriptor limit servers and clients may have: the hard one."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 65536 if hard == resource.RLIM_INFINITY else hard


def raise_nofile():
    """Raises this process's descriptor limit (and so its children's) to
    the hard limit: 10,000 connections need as many descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = nofile()
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
