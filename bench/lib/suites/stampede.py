"""Suite stampede: 100 clients ask at the same moment for one cold URL
whose origin takes 1 s to answer.  A proxy with a working lock sends one
request to the origin and answers all 100 as soon as it is back; the
target is 1 origin hit and p99 within 10 ms of the origin alone's p99
(the clients straight to the origin: its 1 s plus what the clients and the
origin themselves take, which no proxy can remove).

corral (cache_lock on), nginx with proxy_cache_lock off and on, and
Varnish (its waiting list) each take the run 3 times on fresh URLs; the
table has the worst of the 3 in each column.  No CPU time here.
"""

import json
import math
import os
import subprocess
import sys

from common import BENCH_DIR, pinned, say
from load import Case
from report import fmt_lat
from servers import (ServerFailed, add_varnish, start_all, start_origin,
                     stop_all)
from suites.proxy import docroot

NAME = "stampede"

TOOLS = {"varnishd": "varnish"}

CLIENTS = 100
DELAY_MS = 1000
SIZE = 4000
RUNS = 3
SMOKE_RUNS = 1

# (row name, server, location) in the order of the table.  The last row
# sends the clients to the origin itself: the floor under the others.
ROWS = (
    ("corral", "corral", "/lock/"),
    ("nginx, lock off", "nginx", "/lockoff/"),
    ("nginx, lock on", "nginx", "/lockon/"),
    ("varnish", "varnish", "/"),
    ("origin alone", "origin", "/"),
)


class StampedeResult:
    """One row: the worst of the runs in each column."""

    def __init__(self, server):
        self.server = server
        self.runs = 0
        self.origin_hits = None
        self.p50_us = None
        self.p99_us = None
        self.max_us = None
        self.errors = 0
        self.note = ""
        self.other_cpu = 0.0

    def add(self, hits, latencies, errors):
        self.runs += 1
        self.errors += len(errors)
        if errors:
            first = sorted(set(errors))
            self.note = "; ".join(first[:3])
        self.origin_hits = max(hits, self.origin_hits or 0)
        if not latencies:
            return
        lat = sorted(latencies)
        for attr, v in (("p50_us", _pct(lat, 50)), ("p99_us", _pct(lat, 99)),
                        ("max_us", lat[-1])):
            old = getattr(self, attr)
            setattr(self, attr, v if old is None else max(old, v))

    def met(self, floor_us):
        """floor_us: the origin alone's p99 (the origin's delay when that
        row is missing)."""
        return self.origin_hits == 1 and not self.errors and \
            self.p99_us is not None and self.p99_us <= floor_us + 10e3


def _pct(sorted_values, p):
    """The nearest-rank percentile."""
    i = max(0, math.ceil(p / 100 * len(sorted_values)) - 1)
    return sorted_values[i]


def _stampede(ctx, srv, origin, path):
    """One run: (origin hits for path, latencies, errors)."""
    before = origin.hits(path)         # every proxy passes the path as is
    cmd = pinned(ctx.load_cpus, [
        sys.executable, os.path.join(BENCH_DIR, "lib", "stampede_client.py"),
        str(srv.port), path, str(CLIENTS), str(SIZE)])
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return 0, [], ["the clients did not finish in 60 s"]
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0, [], ["clients: " + (p.stdout.strip()[-200:] or
                                      "no output")]
    hits = origin.settle(path) - before
    return hits, out["latencies_us"], out["errors"]


def run(ctx):
    add_varnish(ctx, NAME)
    try:
        origin = start_origin(ctx, NAME)
    except ServerFailed as e:
        ctx.failures.append("%s: %s" % (NAME, e))
        return []
    running = start_all(ctx, NAME, {"ORIGIN_PORT": origin.port,
                                    "ROOT": docroot(ctx, NAME)})
    runs = SMOKE_RUNS if ctx.smoke else RUNS
    case = Case(NAME, "cold", "%d clients at once on a cold URL, origin "
                "delay %d ms" % (CLIENTS, DELAY_MS),
                "bench/lib/stampede_client.py: %d connections opened "
                "first, then one GET written on each in one go, each timed "
                "to its last byte; %s; clients and origin on CPU %s, the "
                "proxy on CPU %s" % (
                    CLIENTS, "%d runs on fresh URLs, the worst of them in "
                    "each column" % runs if runs > 1 else "one run",
                    ctx.load_cpus or "any", ctx.server_cpus or "any"))
    case.kind = "stampede"
    case.delay_ms = DELAY_MS
    try:
        by_name = {s.name: s for s in running + [origin]}
        for row, name, loc in ROWS:
            srv = by_name.get(name)
            if srv is None:
                continue
            r = StampedeResult(row)
            for i in range(runs):
                path = "%sdelay/%d/%d/%s-%d" % (loc, DELAY_MS, SIZE,
                                                row.replace(", ", "-")
                                                .replace(" ", "-"), i)
                r.add(*_stampede(ctx, srv, origin, path))
            if srv.proc.poll() is not None:
                r.errors = max(r.errors, 1)
                r.note = "server exited %d" % srv.proc.returncode
            case.results.append(r)
            say("  %-16s origin hits %3s  p50 %9s  p99 %9s  max %9s  "
                "errors %d%s" % (r.server, r.origin_hits, fmt_lat(r.p50_us),
                                 fmt_lat(r.p99_us), fmt_lat(r.max_us),
                                 r.errors, "  (%s)" % r.note if r.note
                                 else ""))
            if name != "corral":
                continue
            if r.errors or not r.p99_us:
                ctx.failures.append("%s: corral: %s" % (
                    NAME, r.note or "no response"))
            else:
                ctx.passed += 1
        return [case]
    finally:
        stop_all(ctx, running + [origin])
