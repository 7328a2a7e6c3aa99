"""Suite memcached: the seed's SuperCache workload, scaled to this machine.

1. Writes: KEYS values of 4000 B (the pages /articles/pageN.html) written
   through corral's memcached listener, and the same writes into a local
   memcached, by one pipelined client (64 sets in flight).  The row is
   operations per second of wall time and per second of the server's CPU
   (corral's workers; memcached's threads).
2. Reads: wrk GETs random pages of those (siege -i -f urls.txt in the
   seed): corral serving its own store (memcached_key) against nginx
   memcached_pass to that memcached (kept-alive connections), the seed's
   config.  CPU per request is of every server process: corral's; nginx's
   and memcached's together.

Targets (issue 19): reads at most 0.3x the CPU of nginx + memcached per
request; listener writes at least 0.8x memcached's per CPU second.
"""

import os
import socket
import time

import procstat
from common import first_line, free_port
from load import Case, Result, Wrk, measure
from servers import Server, ServerFailed, start_all, stop_all

NAME = "memcached"

TOOLS = {"memcached": "memcached"}

KEYS = 200000
SMOKE_KEYS = 2000
VALUE = 4000
BATCH = 64


class Memcached(Server):
    """The seed's memcached, on the servers' CPUs."""

    name = "memcached"
    program = "memcached"

    def version(self):
        return first_line([self.path, "-V"])

    def start(self, suite, megabytes):
        self.prepare(suite)
        argv = [self.path, "-l", "127.0.0.1", "-p", str(self.port), "-U",
                "0", "-m", str(megabytes), "-t", str(self.ctx.workers),
                "-c", "4096"]
        if os.geteuid() == 0:
            argv += ["-u", "nobody"]
        self.launch(argv, self.ctx.server_cpus, "memcached ")


def page(i):
    head = b"<!doctype html><title>page %d</title>" % i
    return head + b"x" * (VALUE - len(head))


def write_all(port, keys):
    """Sets every page, BATCH requests in flight; the count stored."""
    s = socket.create_connection(("127.0.0.1", port))
    stored = 0
    try:
        for start in range(0, keys, BATCH):
            end = min(keys, start + BATCH)
            out = b"".join(b"set /articles/page%d.html 0 0 %d\r\n%s\r\n" %
                           (i, VALUE, page(i)) for i in range(start, end))
            s.sendall(out)
            want = (end - start) * len(b"STORED\r\n")
            got = b""
            while len(got) < want:
                d = s.recv(65536)
                if not d:
                    raise OSError("connection closed")
                got += d
            stored += got.count(b"STORED\r\n")
    finally:
        s.close()
    return stored


def measure_writes(ctx, label, pid, port, keys):
    before = procstat.cpu_ticks(pid)
    t0 = time.monotonic()
    note = ""
    try:
        stored = write_all(port, keys)
    except OSError as e:
        stored, note = 0, str(e)
    wall = time.monotonic() - t0
    ticks = procstat.cpu_ticks(pid) - before
    cpu_s = procstat.ticks_to_us(ticks) / 1e6
    if stored != keys and not note:
        note = "%d of %d stored" % (stored, keys)
    r = Result(label, stored, wall, 0 if stored == keys else 1, None, None,
               ticks, note)
    r.note = "%s%.0f sets/s, %.0f sets per CPU second" % (
        (note + "; ") if note else "", stored / wall if wall else 0,
        stored / cpu_s if cpu_s else 0)
    r.per_cpu = stored / cpu_s if cpu_s else None
    return r


def check(port):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/articles/page1.html")
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200 or body != page(1):
            return "GET /articles/page1.html: %d, %d bytes" % (
                resp.status, len(body))
    except OSError as e:
        return str(e)
    finally:
        conn.close()
    return None


def run(ctx):
    if "wrk" not in ctx.tools or "memcached" not in ctx.tools:
        ctx.note("%s: wrk or memcached not found, skipped" % NAME)
        return []
    keys = SMOKE_KEYS if ctx.smoke else KEYS
    # memcached keeps a 4000 B value in a 4544 B chunk: room for all.
    mb = max(64, keys * (VALUE * 3 // 2) // (1 << 20) + 64)
    mc = Memcached(ctx, ctx.tools["memcached"])
    try:
        mc.start(NAME, mb)
    except ServerFailed as e:
        ctx.note("%s: %s" % (NAME, e))
        return []
    ctx.running.append(mc)
    mc_port = free_port()
    running = start_all(ctx, NAME, {"MC_PORT": mc_port,
                                    "NGINX_MC_PORT": mc.port,
                                    "STORE_SIZE": "%dm" % (mb + 64)})
    env = {"BENCH_KEYS": str(keys)}
    writes = Case(NAME, "writes", "memcached writes of %d x %d B" % (
        keys, VALUE), "one client, %d sets in flight" % BATCH)
    reads = Case(NAME, "random-read", "random pages over HTTP (%d keys)" %
                 keys, "wrk, random keys; nginx's CPU includes memcached's")
    try:
        r = measure_writes(ctx, "memcached", mc.pid, mc.port, keys)
        writes.results.append(r)
        ctx.progress(writes, r)
        base = r.per_cpu
        for srv in running:
            if srv.name != "corral":
                continue
            r = measure_writes(ctx, "corral", srv.pid, mc_port, keys)
            if base and r.per_cpu:
                r.note += "; %.2fx memcached's per CPU" % (r.per_cpu / base)
            writes.results.append(r)
            ctx.progress(writes, r)
            if r.failed:
                ctx.failures.append("%s writes: corral: %s" % (NAME, r.note))
        for srv in running:
            why = check(srv.port)
            if why:
                ctx.fail_server(NAME, srv, why)
                continue
            before = procstat.cpu_ticks(mc.pid)
            r = measure(ctx, srv, Wrk("wrk", script="random_keys.lua",
                                      env=env), "/")
            if srv.name != "corral":
                extra = procstat.cpu_ticks(mc.pid) - before
                r.cpu_ticks += extra
                r.note = (r.note + "; " if r.note else "") + \
                    "memcached %.1f µs/req" % (
                        procstat.ticks_to_us(extra) / max(1, r.requests))
            reads.results.append(r)
            ctx.progress(reads, r)
            if srv.name == "corral":
                if r.failed:
                    ctx.failures.append("%s reads: corral: %s" % (
                        NAME, r.note or "%d errors" % r.errors))
                else:
                    ctx.passed += 1
        return [writes, reads]
    finally:
        stop_all(ctx, running + [mc])
