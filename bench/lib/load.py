"""Load generators (wrk, ab) and one measured run against one server."""

import os
import re
import select
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
                 connections=100, env=None, threads=None):
        super().__init__(label, env)
        self.script = script
        self.headers = headers
        self.connections = connections
        self.threads = threads          # default: one per load CPU

    def command(self, ctx, url):
        threads = self.threads or cpu_count_of(ctx.load_cpus)
        cmd = [ctx.tools["wrk"], "-t", str(threads),
               "-c", str(self.connections), "-d", "%ds" % ctx.duration,
               "--timeout", "5s", "-s", os.path.join(WRK_DIR, self.script)]
        for h in self.headers:
            cmd += ["-H", h]
        return cmd + [url]

    def parse(self, out):
        m = re.search(r"^BENCH (.*)$", out, re.M)
        if not m:
            return 0, 0.0, 0, None, None, "no result from %s" % self.tool
        v = {k: float(x) for k, x in
             (kv.split("=") for kv in m.group(1).split())}
        errors = sum(int(v[k]) for k in
                     ("connect", "read", "write", "status", "timeout"))
        return (int(v["requests"]), v["duration_us"] / 1e6, errors,
                v["p50_us"], v["p99_us"], "")


class Ab(Load):
    """ab (HTTP/1.0), with -k for keep-alive, over 100 connections."""

    tool = "ab"

    def __init__(self, label, keepalive=True, connections=100, headers=()):
        super().__init__(label)
        self.keepalive = keepalive
        self.connections = connections
        self.headers = headers

    def command(self, ctx, url):
        # -t implies -n 50000; a later -n raises that cap, and ab keeps a
        # record per request, so the cap follows the duration.
        cap = max(50000, 100000 * ctx.duration)
        cmd = [ctx.tools["ab"], "-q", "-r", "-s", "5",
               "-c", str(self.connections), "-t", str(ctx.duration),
               "-n", str(cap)]
        if self.keepalive:
            cmd.append("-k")
        for h in self.headers:
            cmd += ["-H", h]
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


class CpuWindow:
    """The server's CPU time, and what others took of its CPUs, between
    start() and stop()."""

    def __init__(self, ctx, server):
        self.server = server
        self.cpus = cpu_set(ctx.server_cpus)

    def start(self):
        self.busy0 = procstat.busy_ticks(self.cpus)
        self.t0 = time.monotonic()
        self.before = procstat.cpu_ticks(self.server.pid)

    def stop(self):
        """(server's ticks, the share of its CPUs others took)."""
        after = procstat.cpu_ticks(self.server.pid)
        wall = time.monotonic() - self.t0
        # What else ran on the server's CPUs meanwhile: it skews req/s and
        # latency, and CPU per request a little (caches, switches).
        other = procstat.busy_ticks(self.cpus) - self.busy0 - \
            (after - self.before)
        other_cpu = max(0.0, other / procstat.CLK_TCK / wall) if wall \
            else 0.0
        return max(0, after - self.before), other_cpu


def _result(server, load, output, code, ticks, other_cpu):
    requests, seconds, errors, p50, p99, note = load.parse(output)
    if code and not note:
        note = "%s ended with %s" % (load.tool, code)
    if server.proc.poll() is not None:
        note = (note + "; " if note else "") + \
            "server exited %d" % server.proc.returncode
        errors = max(errors, 1)
    return Result(server.name, requests, seconds, errors, p50, p99,
                  ticks, note, other_cpu)


def measure(ctx, server, load, path):
    """Runs load against server; CPU is read around the run."""
    if isinstance(load, Conns):
        return load.measure(ctx, server, path)
    url = "http://127.0.0.1:%d%s" % (server.port, path)
    cmd = pinned(ctx.load_cpus, load.command(ctx, url))
    env = dict(os.environ)
    env.update(load.env)
    window = CpuWindow(ctx, server)
    window.start()
    try:
        out = subprocess.run(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             errors="replace", env=env,
                             timeout=ctx.duration + 60)
        output, code = out.stdout, out.returncode
    except subprocess.TimeoutExpired:
        output, code = "", "timeout"
    return _result(server, load, output, code, *window.stop())


class Conns(Wrk):
    """bench/conns run: N keep-alive connections opened before the
    measured part, then one request in flight on each.  Only the requests
    after all are open count, and only the CPU time spent meanwhile."""

    tool = "conns"

    def __init__(self, label, connections):
        super().__init__(label, connections=connections)

    def measure(self, ctx, server, path):
        cmd = pinned(ctx.load_cpus, [
            ctx.tools["conns"], "run", "-c", str(self.connections),
            "-d", str(ctx.duration), str(server.port), path])
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, errors="replace")
        try:
            ready = read_until(p, "READY", 120)
            if "READY" not in ready:
                p.kill()
                out = ready + p.communicate()[0]
                return _result(server, self, out, p.poll() or "no READY",
                               0, 0.0)
            window = CpuWindow(ctx, server)
            window.start()
            try:
                out = p.communicate("go\n", timeout=ctx.duration + 60)[0]
            except subprocess.TimeoutExpired:
                p.kill()
                out = p.communicate()[0]
            return _result(server, self, out, p.returncode, *window.stop())
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


def end_client(proc):
    """Closes the stdin of a bench/conns that holds its connections until
    then, and waits for it to close them and exit."""
    proc.stdin.close()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def read_until(proc, word, timeout):
    """What proc printed up to and with the first line that starts with
    word, or all it printed before it ended or timeout passed.  Reads the
    pipe's descriptor itself, so nothing is left in a buffer that select
    cannot see."""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    data = b""
    while time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], deadline - time.monotonic())
        if not r:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
        lines = data.decode(errors="replace").splitlines(True)
        if any(l.startswith(word) and l.endswith("\n") for l in lines):
            break
    return data.decode(errors="replace")


class Case:
    """One row group of the results: a suite's case and each server's run."""

    def __init__(self, suite, key, title, load=""):
        self.suite = suite
        self.key = key
        self.title = title
        self.load = load                # how it was loaded, for the reader
        self.caveat = ""                # what the targets table must add
        self.results = []

    def get(self, server):
        for r in self.results:
            if r.server == server:
                return r
        return None
