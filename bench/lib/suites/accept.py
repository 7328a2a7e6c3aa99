"""Suite accept: how two workers share a burst of new connections.
bench/conns starts 1,000 connects at once, each sends its GET as soon as
it is connected (or 100 ms later: a client that connects before it
sends, as browsers that preconnect do), and times each from connect() to
the last byte of its response, less those 100 ms.  With all of them open and answered, the
harness counts the sockets each worker holds (from /proc/PID/fd, less
what it held before), which is how many it accepted.

Targets (corral): the busiest worker holds at most 1.3 times the
connections of the least busy, and no connection waits 1 s or more (a
dropped SYN, or TCP_DEFER_ACCEPT holding back a connection that sent
nothing yet, costs a second or more).  corral and nginx, 2 workers each
whatever --workers says, on every CPU (no pinning: each worker should
have a CPU, as in production); bench/conns shares them.
"""

import http.client
import os
import subprocess
import time

import procstat
from common import say
from load import Case, end_client, read_until
from report import fmt_lat
from servers import bench_tool, start_all, stop_all

NAME = "accept"

WORKERS = 2
BURST = 1000
SMOKE_BURST = 200
RUNS = 3
SMOKE_RUNS = 1
# (row label, ms between a connection's connect and its request)
VARIANTS = (("at once", 0), ("100 ms late", 100))
SLOW_US = 1000000
SHARED_ROW = "corral (reuseport off)"
FILE = "100b.bin"


class AcceptResult:
    """One server and variant: the worst of its runs in each column."""

    def __init__(self, server, variant):
        self.server = server
        self.variant = variant
        self.runs = 0
        self.splits = []                # accepted per worker, per run
        self.answered = 0
        self.p50_us = self.p99_us = self.max_us = self.wait_max_us = None
        self.slow = 0
        self.errors = 0
        self.note = ""
        self.other_cpu = 0.0

    @property
    def ratio(self):
        """The worst run's busiest worker over its least busy."""
        worst = None
        for split in self.splits:
            if len(split) < 2:
                continue
            r = max(split) / min(split) if min(split) else float("inf")
            worst = r if worst is None else max(worst, r)
        return worst

    def add(self, split, stats):
        self.runs += 1
        self.splits.append(split)
        self.answered += stats.get("answered", 0)
        self.errors += stats.get("errors", 0)
        self.slow += stats.get("slow", 0)
        for attr, key in (("p50_us", "p50_us"), ("p99_us", "p99_us"),
                          ("max_us", "max_us"),
                          ("wait_max_us", "wait_max_us")):
            v = stats.get(key)
            if v is not None:
                old = getattr(self, attr)
                setattr(self, attr, v if old is None else max(old, v))

    def add_note(self, msg):
        self.note = (self.note + "; " if self.note else "") + msg


def fmt_ratio(v):
    if v is None:
        return "-"
    return "all on one" if v == float("inf") else "%.2f" % v


def _table(case):
    lines = [
        "| server | requests sent | accepted per worker (each run) | "
        "max/min | p50 | p99 | max | most from request to response | "
        "1 s or more | errors | notes |",
        "|---|---|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in case.results:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | "
                     "%s |" % (
                         r.server, r.variant, ", ".join(
                             " / ".join(str(n) for n in s)
                             for s in r.splits) or "-",
                         fmt_ratio(r.ratio), fmt_lat(r.p50_us),
                         fmt_lat(r.p99_us), fmt_lat(r.max_us),
                         fmt_lat(r.wait_max_us), r.slow, r.errors, r.note))
    return "\n".join(lines)


def _parse(out):
    """The numbers of bench/conns's BURST line, or {}."""
    for line in out.splitlines():
        if line.startswith("BURST "):
            return {k: int(v) for k, v in
                    (kv.split("=") for kv in line.split()[1:])}
    return {}


def _settle(workers, base, timeout=10.0):
    """Waits until the workers hold no more sockets than base (the last
    run's connections are closed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(procstat.sockets(w) <= base.get(w, 0) for w in workers):
            return
        time.sleep(0.05)


def _burst(ctx, srv, n, late_ms, r):
    """One burst: adds the split and the times to r."""
    workers = procstat.children(srv.pid)
    if len(workers) != WORKERS:
        r.add_note("%d workers, not %d" % (len(workers), WORKERS))
    base = {w: procstat.sockets(w) for w in workers}
    cmd = [ctx.tools["conns"], "burst", "-c", str(n), str(srv.port),
           "/" + FILE]
    if late_ms:
        cmd[2:2] = ["-l", str(late_ms)]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    try:
        out = read_until(p, "READY", 120)
        stats = _parse(out)
        if not stats:
            r.errors += n
            r.add_note("bench/conns: " + (out.strip()[-160:] or
                                          "no answer"))
            return
        split = [procstat.sockets(w) - base[w] for w in workers]
        if sum(split) != stats["answered"]:
            r.add_note("the workers hold %d connections, %d were "
                       "answered" % (sum(split), stats["answered"]))
        r.add(split, stats)
    finally:
        end_client(p)
        _settle(workers, base)


def _docroot(ctx):
    root = os.path.join(ctx.workdir, NAME, "htdocs")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, FILE), "wb") as f:
        f.write(b"x" * 100)
    return root


def _check(srv):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    try:
        conn.request("GET", "/" + FILE)
        resp = conn.getresponse()
        if resp.status != 200 or resp.read() != b"x" * 100:
            return "GET /%s: status %d" % (FILE, resp.status)
    except (OSError, http.client.HTTPException) as e:
        return "GET /%s: %s" % (FILE, e)
    finally:
        conn.close()
    return None


def run(ctx):
    tool = bench_tool(ctx, NAME, "conns", "the suite is")
    if tool is None:
        return []
    ctx.tools["conns"] = tool
    n = SMOKE_BURST if ctx.smoke else BURST
    runs = SMOKE_RUNS if ctx.smoke else RUNS
    servers = list(ctx.servers)
    if not ctx.smoke and servers and servers[0].name == "corral":
        servers.insert(1, servers[0].variant(SHARED_ROW, "corralshared"))
    servers = start_all(ctx, NAME, {"ROOT": _docroot(ctx),
                                    "WORKERS": WORKERS}, servers, pin=False)
    case = Case(NAME, "burst", "%s new connections at once, %d workers" % (
        "{:,}".format(n), WORKERS),
        "bench/conns burst: %s connects started at once, each GET sent "
        "when connected (or 100 ms later), timed from connect() to the "
        "last byte (less the 100 ms); %d runs, the worst of them in each column; servers "
        "and bench/conns on every CPU" % ("{:,}".format(n), runs))
    case.kind = "accept"
    case.table = _table
    try:
        for srv in servers:
            why = _check(srv)
            if why:
                ctx.fail_server(NAME, srv, "does not serve the file: " +
                                why)
                continue
            for label, late in VARIANTS:
                r = AcceptResult(srv.name, label)
                for _ in range(runs):
                    _burst(ctx, srv, n, late, r)
                case.results.append(r)
                say("  %-9s %-12s split %s  max/min %s  max %s  1 s or "
                    "more: %d  errors %d%s" % (
                        r.server, label, ", ".join(
                            "/".join(str(x) for x in s) for s in r.splits),
                        fmt_ratio(r.ratio), fmt_lat(r.max_us), r.slow,
                        r.errors, "  (%s)" % r.note if r.note else ""))
                if srv.name != "corral":
                    continue
                if r.errors or not r.splits:
                    ctx.failures.append("%s %s: corral: %s" % (
                        NAME, label, r.note or "%d errors" % r.errors))
                else:
                    ctx.passed += 1
        return [case]
    finally:
        stop_all(ctx, servers)
