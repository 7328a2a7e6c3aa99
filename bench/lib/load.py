"""Load generators (wrk, ab) and one measured run against one server."""

import os
import re
import subprocess
import time

import procstat
from common import BENCH_DIR, cpu_count_of, cpu_set, pinned

WRK_DIR = os.path.join(BENCH_DIR, "wrk")


class Result:
    """One server under one load; rps and cpu_us are per request served."""

    def __init__(self, server, requests=0, seconds=0.0, errors=0,
                 p50_us=None, p99_us=None, cpu_ticks=0, note="",
                 other_cpu=0.0):
        self.server = server
        self.requests = requests
        self.seconds = seconds
        self.errors = errors
        self.p50_us = p50_us
        self.p99_us = p99_us
        self.cpu_ticks = cpu_ticks
        self.note = note
        self.other_cpu = other_cpu      # CPU others took on the server's

    @property
    def rps(self):
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_us(self):
        if not self.requests:
            return None
        return procstat.ticks_to_us(self.cpu_ticks) / self.requests

    @property
    def failed(self):
        return self.requests == 0 or self.errors > 0


class Load:
    """What a case sends: a tool and its options, minus the URL."""

    tool = ""

    def __init__(self, label, env=None):
        self.label = label
        self.env = env or {}             # extra environment for the tool

    def command(self, ctx, url):
        raise NotImplementedError

    def parse(self, out):
        """(requests, seconds, errors, p50_us, p99_us, note) from output."""
        raise NotImplementedError


class Wrk(Load):
    """wrk over 100 keep-alive connections; optional Lua script, headers."""

    tool = "wrk"

    def __init__(self, label, script="report.lua", headers=(),
                 connections=100, env=None):
        super().__init__(label, env)
        self.script = script
        self.headers = headers
        self.connections = connections

    def command(self, ctx, url):
        threads = cpu_count_of(ctx.load_cpus)
        cmd = [ctx.tools["wrk"], "-t", str(threads),
               "-c", str(self.connections), "-d", "%ds" % ctx.duration,
               "--timeout", "5s", "-s", os.path.join(WRK_DIR, self.script)]
        for h in self.headers:
            cmd += ["-H", h]
        return cmd + [url]

    def parse(self, out):
        m = re.search(r"^BENCH (.*)$", out, re.M)
        if not m:
            return 0, 0.0, 0, None, None, "no result from wrk"
        v = {k: float(x) for k, x in
             (kv.split("=") for kv in m.group(1).split())}
        errors = sum(int(v[k]) for k in
                     ("connect", "read", "write", "status", "timeout"))
        return (int(v["requests"]), v["duration_us"] / 1e6, errors,
                v["p50_us"], v["p99_us"], "")


class Ab(Load):
    """ab (HTTP/1.0), with -k for keep-alive, over 100 connections."""

    tool = "ab"

    def __init__(self, label, keepalive=True, connections=100):
        super().__init__(label)
        self.keepalive = keepalive
        self.connections = connections

    def command(self, ctx, url):
        # -t implies -n 50000; a later -n raises that cap, and ab keeps a
        # record per request, so the cap follows the duration.
        cap = max(50000, 100000 * ctx.duration)
        cmd = [ctx.tools["ab"], "-q", "-r", "-s", "5",
               "-c", str(self.connections), "-t", str(ctx.duration),
               "-n", str(cap)]
        if self.keepalive:
            cmd.append("-k")
        return cmd + [url]

    def parse(self, out):
        def num(label):
            m = re.search(r"^%s:\s+([\d.]+)" % re.escape(label), out, re.M)
            return float(m.group(1)) if m else 0.0

        def pct(p):
            m = re.search(r"^\s*%d%%\s+(\d+)" % p, out, re.M)
            return float(m.group(1)) * 1000 if m else None

        done = int(num("Complete requests"))
        errors = int(num("Failed requests") + num("Non-2xx responses") +
                     num("Write errors"))
        note = ""
        if self.keepalive and done:
            kept = int(num("Keep-Alive requests"))
            if kept < done:
                note = "%d of %d requests kept alive" % (kept, done)
        if not done and "apr_" in out:
            note = out.strip().splitlines()[-1][:120]
        return (done, num("Time taken for tests"), errors,
                pct(50), pct(99), note)


def measure(ctx, server, load, path):
    """Runs load against server; CPU is read around the run."""
    url = "http://127.0.0.1:%d%s" % (server.port, path)
    cmd = pinned(ctx.load_cpus, load.command(ctx, url))
    env = dict(os.environ)
    env.update(load.env)
    cpus = cpu_set(ctx.server_cpus)
    busy0 = procstat.busy_ticks(cpus)
    t0 = time.monotonic()
    before = procstat.cpu_ticks(server.pid)
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             errors="replace", env=env,
                             timeout=ctx.duration + 60)
        output, code = out.stdout, out.returncode
    except subprocess.TimeoutExpired:
        output, code = "", "timeout"
    after = procstat.cpu_ticks(server.pid)
    wall = time.monotonic() - t0
    # What else ran on the server's CPUs meanwhile: it skews req/s and
    # latency, and CPU per request a little (caches, switches).
    other = procstat.busy_ticks(cpus) - busy0 - (after - before)
    other_cpu = max(0.0, other / procstat.CLK_TCK / wall) if wall else 0.0
    requests, seconds, errors, p50, p99, note = load.parse(output)
    if code and not note:
        note = "%s ended with %s" % (load.tool, code)
    if server.proc.poll() is not None:
        note = (note + "; " if note else "") + \
            "server exited %d" % server.proc.returncode
        errors = max(errors, 1)
    return Result(server.name, requests, seconds, errors, p50, p99,
                  max(0, after - before), note, other_cpu)


class Case:
    """One row group of the results: a suite's case and each server's run."""

    def __init__(self, suite, key, title, load=""):
        self.suite = suite
        self.key = key
        self.title = title
        self.load = load                # how it was loaded, for the reader
        self.results = []

    def get(self, server):
        for r in self.results:
            if r.server == server:
                return r
        return None
