"""Suite conns: 100, 1,000 and 10,000 concurrent keep-alive connections.
For corral, nginx and h2o: the CPU time per request at each level (it
should stay flat as connections grow), and the memory an idle keep-alive
connection costs (the resident memory of all the server's processes with
10,000 idle connections, minus with none, over 10,000).

The load is bench/conns: it opens every connection before the measured
part starts (so connection setup is not in the CPU figures), then keeps
one request in flight on each; wrk would time its connect storm too.
The server runs alone on the server's CPU, bench/conns on the load CPU.

A floor row (bench/floor replaying corral's answer, one recv and one
writev per request) shows what the kernel alone makes of the levels: its
growth from 100 to 10,000 is the least any server can have here.  Its
idle memory is not measured (it keeps an 8 KiB read buffer per
connection by design).
"""

import http.client
import os
import random
import subprocess

import procstat
from common import nofile, pinned, say
from load import Case, Conns, end_client, measure, read_until
from report import fmt_cpu, fmt_rps, notes_of
from servers import bench_tool, start_all, start_floor, stop_all

NAME = "conns"

LEVELS = (100, 1000, 10000)
IDLE = 10000
SMOKE_LEVELS = (100,)
SMOKE_IDLE = 500

FILE = "100b.bin"
SIZE = 100


class ConnsResult:
    """One server: a load.Result per level, and the idle memory."""

    def __init__(self, server):
        self.server = server
        self.levels = {}                # connections -> load.Result
        self.idle = 0                   # idle connections held
        self.rss_base_kb = None
        self.rss_idle_kb = None
        self.errors = 0
        self.note = ""
        self.other_cpu = 0.0

    def cpu_at(self, n):
        r = self.levels.get(n)
        return r.cpu_us if r is not None else None

    @property
    def growth(self):
        """CPU per request at the most connections over at the fewest."""
        lo, hi = self.cpu_at(min(LEVELS)), self.cpu_at(max(LEVELS))
        return hi / lo if lo and hi is not None else None

    @property
    def bytes_per_idle(self):
        if self.rss_idle_kb is None or self.rss_base_kb is None or \
                not self.idle:
            return None
        return (self.rss_idle_kb - self.rss_base_kb) * 1024 / self.idle

    def add_note(self, msg):
        self.note = (self.note + "; " if self.note else "") + msg


def _docroot(ctx):
    root = os.path.join(ctx.workdir, NAME, "htdocs")
    os.makedirs(root, exist_ok=True)
    data = random.Random(SIZE).randbytes(SIZE)
    with open(os.path.join(root, FILE), "wb") as f:
        f.write(data)
    return root, data


def _check(srv, data):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    try:
        for _ in range(3):
            conn.request("GET", "/" + FILE)
            resp = conn.getresponse()
            got = resp.read()
            if resp.status != 200 or got != data:
                return "GET /%s: status %d, %d of %d bytes" % (
                    FILE, resp.status, len(got), len(data))
    except (OSError, http.client.HTTPException) as e:
        return "GET /%s: %s" % (FILE, e)
    finally:
        conn.close()
    return None


def _idle_memory(ctx, srv, r, n):
    """Holds n idle keep-alive connections (each got one response) and
    reads the server's resident memory with them and without."""
    r.rss_base_kb = procstat.rss_kb(srv.pid)
    p = subprocess.Popen(pinned(ctx.load_cpus, [
        ctx.tools["conns"], "hold", "-c", str(n), str(srv.port),
        "/" + FILE]), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT)
    try:
        out = read_until(p, "READY", 120)
        if "READY" not in out:
            r.errors += 1
            r.add_note("holding %d connections: %s" % (
                n, out.strip()[-160:] or "no answer from bench/conns"))
            return
        r.rss_idle_kb = procstat.rss_kb(srv.pid)
        r.idle = n
    finally:
        end_client(p)


def _table(case):
    lines = [
        "| server | " + " | ".join(
            "CPU µs/req at %s" % "{:,}".format(n) for n in case.levels) +
        " | %s vs %s | req/s at %s | idle memory per connection | vs "
        "nginx | errors | notes |" % (
            "{:,}".format(max(case.levels)), "{:,}".format(min(case.levels)),
            "{:,}".format(max(case.levels))),
        "|---|" + "--:|" * (len(case.levels) + 5) + "---|",
    ]
    base = case.get("nginx")
    for r in case.results:
        mem = r.bytes_per_idle
        ratio = mem / base.bytes_per_idle if mem is not None and base and \
            base.bytes_per_idle else None
        top = r.levels.get(max(case.levels))
        lines.append("| %s | %s | %s | %s | %s | %s | %d | %s |" % (
            r.server, " | ".join(fmt_cpu(r.cpu_at(n)) for n in case.levels),
            "-" if r.growth is None else "%.2f×" % r.growth,
            fmt_rps(top.rps) if top else "-",
            "-" if mem is None else "{:,.0f} B".format(mem),
            "-" if ratio is None else "%.2f×" % ratio, r.errors,
            notes_of(r)))
    return "\n".join(lines)


def run(ctx):
    tool = bench_tool(ctx, NAME, "conns", "the suite is")
    if tool is None:
        return []
    ctx.tools["conns"] = tool
    levels = SMOKE_LEVELS if ctx.smoke else LEVELS
    idle = SMOKE_IDLE if ctx.smoke else IDLE
    root, data = _docroot(ctx)
    servers = start_all(ctx, NAME, {"ROOT": root, "NOFILE": nofile()})
    corral = [s for s in servers if s.name == "corral"]
    floor = None
    if corral and not _check(corral[0], data):
        floor = start_floor(ctx, NAME, corral[0], ["/" + FILE])
    if floor:
        servers.insert(servers.index(corral[0]) + 1, floor)
    case = Case(NAME, "levels", "%s keep-alive connections" % " / ".join(
        "{:,}".format(n) for n in levels),
        "bench/conns: the connections opened first, then one request in "
        "flight on each for %d s, GET /%s (%d B); idle memory with %s "
        "connections that each got one response; the server on CPU %s, "
        "bench/conns on CPU %s" % (ctx.duration, FILE, SIZE,
                                  "{:,}".format(idle),
                                  ctx.server_cpus or "any",
                                  ctx.load_cpus or "any"))
    case.kind = "conns"
    case.table = _table
    case.levels = levels
    try:
        for srv in servers:
            why = _check(srv, data)
            if why:
                ctx.fail_server(NAME, srv, "does not serve the file: " +
                                why)
                continue
            r = ConnsResult(srv.name)
            if srv is not floor:
                _idle_memory(ctx, srv, r, idle)
            for n in levels:
                res = measure(ctx, srv, Conns("bench/conns", n), "/" + FILE)
                r.levels[n] = res
                r.errors += res.errors
                if res.note:
                    r.add_note("%s: %s" % ("{:,}".format(n), res.note))
                r.other_cpu = max(r.other_cpu, res.other_cpu)
                ctx.progress(Case(NAME, "", "%s connections" % "{:,}"
                                  .format(n)), res)
            mem = r.bytes_per_idle
            if srv is not floor:
                say("  %-9s idle memory %s per connection" % (
                    srv.name,
                    "-" if mem is None else "{:,.0f} B".format(mem)))
            case.results.append(r)
            if srv.name != "corral":
                continue
            if r.errors or any(x.failed for x in r.levels.values()) or \
                    mem is None:
                ctx.failures.append("%s: corral: %s" % (
                    NAME, r.note or "%d errors" % r.errors))
            else:
                ctx.passed += 1
        return [case]
    finally:
        stop_all(ctx, servers)



