"""Suite counters: what the request counters cost (issue 18).  corral as
built, and a second corral built from the same tree with ./configure
--disable-counters, serve the static suite's 100 B file and the proxy
suite's 4000 B cache hit from the same configs (plus a stats_file, as a
default install has, through which each build is checked to count or
not).

Wall clock: ROUNDS rounds, each running both builds one after the other
on every case, in alternate order (on, off; then off, on), so that a
machine that gets busier or quieter weighs on both alike.  A case's
result is the median CPU per request of each build, the spread (min to
max) of its rounds, and the median of the per-round on/off ratios; the
target is met when that ratio is within the noise, the larger relative
half-spread of the two builds.

Deterministic: with valgrind installed (not in --smoke), each build runs
once more under callgrind, and its workers' instructions per request are
(Ir after N2 requests - Ir after N1) / (N2 - N1), from two runs that
differ only in the number of requests, so start and stop cancel out.
These numbers do not depend on how busy the machine is.
"""

import glob
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

from common import BenchError, free_port, pinned, say
from load import Case, Wrk, measure
from report import half_spread, paired_ratios, within_noise
from servers import (Corral, ServerFailed, start_all, start_origin,
                     stop_all)
from suites import proxy, static

NAME = "counters"

# Tools this suite wants beyond the harness's, and their Debian packages.
TOOLS = {"valgrind": "valgrind"}

ROUNDS = 5
ON = "corral, counters on"
OFF = "corral, counters off"

# (key, title, the suite whose corral config serves it, path)
CASES = (
    ("static-100b", "static 100 B keep-alive", "static", "/100b.bin"),
    ("hit-4000b", "proxy cache hit 4000 B", "proxy",
     "/cached/size/%d" % proxy.SIZE),
)

# Requests of the two callgrind runs of each build and case.
CALLGRIND_N = (2000, 10000)


class Build(Corral):
    """One of the two builds, started from another suite's corral config
    (in a folder of this suite's), with a stats_file added."""

    def __init__(self, ctx, path, name, tag):
        super().__init__(ctx, path)
        self.name = name
        self.tag = tag
        self.wrapper = []               # e.g. valgrind's command line
        self.started_in = None

    def prepare(self, suite):
        self.dir = os.path.join(self.ctx.workdir, NAME, "%s-%s" % (
            suite, self.tag))
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()

    def argv(self, conf):
        with open(conf, "a") as f:
            f.write('\nstats_file = "%s"\n' % self.stats_path())
        return self.wrapper + super().argv(conf)

    def stats_path(self):
        return os.path.join(self.dir, "corral.stats")

    def launch(self, argv, cpus, label="", timeout=10.0):
        # Under valgrind the start takes far longer than 10 s.
        super().launch(argv, cpus, label, 300.0 if self.wrapper else
                       timeout)

    def counting(self):
        """What corral -s -j says of the running server's counters."""
        conf = os.path.join(self.dir, self.conf + ".conf")
        out = subprocess.run([self.path, "-s", "-j", "-c", conf],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        m = re.search(r'"counters": (true|false)', out.stdout)
        if out.returncode or not m:
            raise ServerFailed("corral -s -j: %s" % out.stdout.strip()[-200:])
        return m.group(1) == "true"


def _builds(ctx):
    """The two binaries: (on, off, a note or '')."""
    on = ctx.corral_bin
    env = os.environ.get("CORRAL_BIN_NOCOUNTERS")
    if env:
        return on, os.path.abspath(env), ""
    if ctx.build_other is None:
        # --smoke never builds: both rows run one binary, which checks
        # the suite's machinery but measures nothing.
        return on, on, "smoke: no build without counters " \
            "($CORRAL_BIN_NOCOUNTERS), both rows are %s" % on
    off = ctx.build_other("nocounters", ("--disable-counters",))
    note = ""
    if on != os.path.join(ctx.build.args[0], "corral"):
        note = "counters on is %s (--corral), counters off was built " \
            "from the source tree: compare like with like" % on
    return on, off, note


def _table(case):
    lines = ["| build | rounds | CPU µs/req, median | min | max | "
             "spread | req/s, median | errors |",
             "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for name in (ON, OFF):
        runs = case.runs[name]
        cpu = [r.cpu_us for r in runs if r.cpu_us]
        if not cpu:
            lines.append("| %s | %d | - | - | - | - | - | %d |" % (
                name, len(runs), sum(r.errors for r in runs)))
            continue
        med = statistics.median(cpu)
        lines.append("| %s | %d | %.3f | %.3f | %.3f | ±%.1f%% | %s | %d |"
                     % (name, len(runs), med, min(cpu), max(cpu),
                        100 * half_spread(cpu), "{:,.0f}".format(
                            statistics.median(r.rps for r in runs)),
                        sum(r.errors for r in runs)))
    ratios = paired_ratios(case)
    if ratios:
        lines.append("| on/off, per round | %d | %.3f× | %.3f× | %.3f× "
                     "| | | |" % (len(ratios), statistics.median(ratios),
                                  min(ratios), max(ratios)))
    return "\n".join(lines)


def _callgrind_table(case):
    lines = ["| build | " + " | ".join(
        "%s, instructions/request" % t for _, t, _, _ in CASES) + " |",
             "|---|" + "--:|" * len(CASES)]
    for name in (ON, OFF):
        lines.append("| %s | %s |" % (name, " | ".join(
            "{:,.0f}".format(case.ir[name][k]) if case.ir[name].get(k)
            else "-" for k, _, _, _ in CASES)))
    cells = []
    for k, _, _, _ in CASES:
        a, b = case.ir[ON].get(k), case.ir[OFF].get(k)
        cells.append("{:.4f}× ({:+,.0f})".format(a / b, a - b) if a and b
                     else "-")
    lines.append("| on/off | %s |" % " | ".join(cells))
    return "\n".join(lines)


def _ir_total(path):
    """The Ir total of one callgrind output file."""
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise BenchError("callgrind: no total in %s" % path)


def _callgrind_run(ctx, build, suite, extra, check, path, n):
    """Instructions of corral's workers for n requests of path (plus the
    start, the check and the stop)."""
    # Workers started by root run as its "user" (nobody), and cannot
    # enter the work folder: their files go to a folder of their own.
    outdir = tempfile.mkdtemp(prefix="corral-callgrind-")
    os.chmod(outdir, 0o1777)
    try:
        return _callgrind_once(ctx, build, suite, extra, check, path, n,
                               outdir)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)


def _callgrind_once(ctx, build, suite, extra, check, path, n, outdir):
    build.wrapper = [ctx.tools["valgrind"], "--tool=callgrind",
                     "--callgrind-out-file=%s/callgrind.out.%%p" % outdir]
    master = None
    try:
        build.start(suite, extra)
        master = build.pid
        why = check(build)
        if why:
            raise ServerFailed(why)
        out = subprocess.run(pinned(ctx.load_cpus, [
            ctx.tools["ab"], "-q", "-k", "-c", "4", "-n", str(n),
            "http://127.0.0.1:%d%s" % (build.port, path)]),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            timeout=1800)
        done = re.search(r"^Complete requests:\s+(\d+)", out.stdout, re.M)
        failed = re.search(r"^Failed requests:\s+(\d+)", out.stdout, re.M)
        if not done or int(done.group(1)) != n or int(failed.group(1)):
            raise ServerFailed("ab under callgrind: %s" %
                               out.stdout.strip()[-120:])
        # The workers write their files as they exit: wait for the whole
        # session to be gone before stop() kills what is left of it.
        build.proc.terminate()
        build.proc.wait(600)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            try:
                os.killpg(master, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
    finally:
        stop_all(ctx, [build])
        build.wrapper = []
    files = [p for p in glob.glob(os.path.join(outdir, "callgrind.out.*"))
             if not p.endswith(".%d" % master)]
    if not files:
        raise ServerFailed("callgrind: no worker output in %s" % outdir)
    return sum(_ir_total(p) for p in files)


def _callgrind(ctx, builds, servers_for, out):
    """The deterministic case: instructions per request of each build."""
    if ctx.smoke:
        return
    if "valgrind" not in ctx.tools or "ab" not in ctx.tools:
        ctx.note("%s: valgrind or ab not found, no instruction counts "
                 "(bench/run --install brings them)" % NAME)
        return
    case = Case(NAME, "callgrind", "instructions per request (callgrind)",
                "ab -k -c 4, %d and then %d requests to a corral under "
                "valgrind --tool=callgrind; the workers' Ir difference "
                "over the %d requests between" % (
                    CALLGRIND_N[0], CALLGRIND_N[1],
                    CALLGRIND_N[1] - CALLGRIND_N[0]))
    case.table = _callgrind_table
    case.ir = {ON: {}, OFF: {}}
    case.keys = [k for k, _, _, _ in CASES]
    for key, title, suite, path in CASES:
        extra, check = servers_for[suite]
        for build in builds:
            ir = []
            for n in CALLGRIND_N:
                # A run that fails (ab's connection reset was seen once
                # on a loaded machine) is tried once more, and said.
                for attempt in (1, 2):
                    try:
                        ir.append(_callgrind_run(ctx, build, suite, extra,
                                                 check, path, n))
                        break
                    except (ServerFailed,
                            subprocess.TimeoutExpired) as e:
                        ctx.note("%s: callgrind, %s, %s, %d requests, "
                                 "try %d: %s" % (NAME, title, build.name,
                                                 n, attempt, e))
            if len(ir) != len(CALLGRIND_N):
                continue
            per = (ir[1] - ir[0]) / (CALLGRIND_N[1] - CALLGRIND_N[0])
            case.ir[build.name][key] = per
            say("  %-22s %-28s %12s instructions/request" % (
                build.name, title, "{:,.0f}".format(per)))
    out.append(case)


def run(ctx):
    if "wrk" not in ctx.tools:
        ctx.note("%s: wrk not found, skipped" % NAME)
        return []
    on_bin, off_bin, note = _builds(ctx)
    if note:
        ctx.note("%s: %s" % (NAME, note))
    builds = [Build(ctx, on_bin, ON, "on"), Build(ctx, off_bin, OFF, "off")]
    root, body = static._docroot(ctx)
    try:
        origin = start_origin(ctx, NAME)
    except ServerFailed as e:
        ctx.failures.append("%s: %s" % (NAME, e))
        return []

    def check_static(srv):
        return static._check(srv, {"100b.bin": body["100b.bin"]})

    def check_hit(srv):
        return proxy._check(srv, origin, "hit-4000b",
                            "/cached/size/%d" % proxy.SIZE)

    servers_for = {
        "static": ({"ROOT": root}, check_static),
        "proxy": ({"ORIGIN_PORT": origin.port,
                   "ROOT": proxy.docroot(ctx, NAME)}, check_hit),
    }
    rounds = 1 if ctx.smoke else ROUNDS
    out = []
    running = [origin]
    try:
        cases = []
        for key, title, suite, path in CASES:
            extra, check = servers_for[suite]
            up = []
            for build in builds:
                srv = Build(ctx, build.path, build.name, build.tag)
                up += start_all(ctx, suite, extra, [srv])
            running += up
            if len(up) != 2:
                continue
            wrong = []
            for srv, want in zip(up, (True, False)):
                why = check(srv)
                counting = srv.counting()
                if why:
                    wrong.append("%s: %s" % (srv.name, why))
                elif counting != want and off_bin != on_bin:
                    wrong.append("%s: corral -s says counters %s" % (
                        srv.name, "on" if counting else "off"))
            if wrong:
                for w in wrong:
                    ctx.failures.append("%s %s: %s" % (NAME, title, w))
                continue
            ctx.passed += 1
            case = Case(NAME, key, title + ", counters on vs off",
                        "wrk, 100 connections, %d s; %d rounds, the two "
                        "builds one after the other in each, in alternate "
                        "order" % (ctx.duration, rounds))
            case.table = _table
            case.runs = {ON: [], OFF: []}
            case.pair = (ON, OFF)
            case.same_binary = off_bin == on_bin
            cases.append((case, up, path))
        for i in range(rounds):
            for case, up, path in cases:
                for srv in (up if i % 2 == 0 else up[::-1]):
                    r = measure(ctx, srv, Wrk("wrk"), path)
                    r.server = "%s #%d" % (srv.name, i + 1)
                    case.runs[srv.name].append(r)
                    case.results.append(r)
                    ctx.progress(case, r)
                    ctx.judge(NAME, case.title, r)
        for case, up, _ in cases:
            say("  %s: on/off %s" % (case.title, within_noise(case)[0]))
            out.append(case)
        stop_all(ctx, running[1:])
        running = [origin]
        _callgrind(ctx, builds, servers_for, out)
        return out
    finally:
        stop_all(ctx, running)
