"""Suite store: corral's shared-memory store on its own.

- bench/store_bench: get (hit) and set of a 4000 B value from 1 and 2
  processes, next to memcached get over loopback with the same value, in
  the same run.  The table is operations per second, not CPU per request.
- bench/store_fill: how much of 64 MiB the store holds when it first
  evicts, next to a fresh memcached -m 64 given the same values (sizes
  log-uniform from 100 B to 512 KiB), and how many of the values a random
  read finds after 128 MiB of them were written (issue 13).
"""

import os
import resource
import signal
import subprocess
import time

import procstat
from common import BenchError, cpu_set, first_line, pinned, say
from load import Case
from report import BUSY_NOTE, fmt_times
from servers import Server, ServerFailed

NAME = "store"

# Tools this suite wants beyond the harness's, and the Debian package of
# each: bench/run --install brings them.
TOOLS = {"memcached": "memcached"}

# Operations per process in each store row, per second of --duration
# (store_bench does a tenth of them against memcached).
OPS_PER_SECOND = 200000
SMOKE_OPS = 2000

# (store_bench's name, operation, processes), in the order of the table.
ROWS = (
    ("store_get_1proc", "store get (hit)", 1),
    ("store_get_2proc", "store get (hit)", 2),
    ("store_set_1proc", "store set", 1),
    ("store_set_2proc", "store set", 2),
    ("memcached_get_1proc", "memcached get (loopback)", 1),
    ("memcached_get_2proc", "memcached get (loopback)", 2),
)

# What every row is divided by: memcached get with as many processes.
BASE = {1: "memcached_get_1proc", 2: "memcached_get_2proc"}

MEMCACHED_CPUS = "0"


class OpsResult:
    """One row of the store table: ops/s, or None when it did not run."""

    def __init__(self, key, op, procs, cpus, ops_per_sec=None, note=""):
        self.key = key
        self.server = key               # what Case.get() looks up
        self.op = op
        self.procs = procs
        self.cpus = cpus                # where it ran, for the reader
        self.ops_per_sec = ops_per_sec
        self.ratio = None               # ops/s over memcached get's
        self.note = note

    @property
    def is_store(self):
        return self.key.startswith("store_")


class Memcached(Server):
    """memcached on a free loopback port, no config file, pinned to CPU 0
    (with the harness's stop(): SIGTERM, then SIGKILL to its session)."""

    name = "memcached"

    def version(self):
        return first_line([self.path, "-V"]) or "memcached"

    def start(self, suite, cpus):
        """Starts it on cpus; ServerFailed if it does not listen."""
        self.prepare(suite)
        cmd = [self.path, "-l", "127.0.0.1", "-p", str(self.port),
               "-U", "0", "-t", "1", "-m", "64"]
        if os.geteuid() == 0:
            cmd += ["-u", "root"]       # or it refuses to run as root
        self.launch(cmd, cpus)


def _plan():
    """{processes: CPU list} for store_bench, and memcached's CPUs.

    One process runs on CPU 1, next to memcached on CPU 0; two run on
    CPUs 1-2 when there are 3, else on 0-1, sharing CPU 0 with memcached
    (which idles during the store rows).  One CPU: no pinning.
    """
    ncpu = os.cpu_count() or 1
    if ncpu < 2:
        return {1: None, 2: None}, None
    return {1: "1", 2: "1-2" if ncpu >= 3 else "0-1"}, MEMCACHED_CPUS


def _store_bench(ctx):
    """Path of store_bench, built like corral; None (with a note) when a
    smoke run finds none beside corral's binary."""
    if ctx.build is not None:
        return ctx.build("bench/store_bench")
    path = os.path.join(os.path.dirname(ctx.corral_bin), "bench",
                        "store_bench")
    if os.access(path, os.X_OK):
        return path
    ctx.note("%s: no %s (--smoke does not build it; 'make "
             "bench/store_bench' in corral's build dir does), skipped"
             % (NAME, path))
    return None


def _store_fill(ctx):
    """Path of store_fill, beside store_bench; None if there is none."""
    if ctx.build is not None:
        return ctx.build("bench/store_fill")
    path = os.path.join(os.path.dirname(ctx.corral_bin), "bench",
                        "store_fill")
    return path if os.access(path, os.X_OK) else None


class FillResult:
    """One row of the fill table: corral's store or memcached."""

    def __init__(self, server, values):
        self.server = server
        self.fill = values.get(server + "_fill")
        self.self = values.get(server + "_self")
        self.values = values.get(server + "_values")
        self.hits = values.get(server + "_hits")
        self.byte_hits = values.get(server + "_byte_hits")
        self.note = ""


def _fill(ctx):
    """The fill case, against a memcached of its own (a fresh one: the
    ops rows leave theirs with pages given to one size)."""
    path = _store_fill(ctx)
    if path is None:
        ctx.note("%s: no store_fill beside corral's binary, the fill case "
                 "is skipped" % NAME)
        return None
    mc = None
    if "memcached" in ctx.tools:
        mc = Memcached(ctx, ctx.tools["memcached"])
        try:
            mc.start(NAME + "-fill", MEMCACHED_CPUS)
            ctx.running.append(mc)
        except ServerFailed as e:
            ctx.note("%s: memcached did not start, the fill case has no "
                     "memcached row: %s" % (NAME, e))
            mc = None
    try:
        proc = subprocess.run([path, str(mc.port if mc else 0)],
                              capture_output=True, text=True, timeout=600)
    finally:
        if mc is not None and mc.proc is not None:
            mc.stop()
            ctx.running.remove(mc)
    values = {}
    for line in proc.stdout.splitlines():
        name, _, v = line.partition(" ")
        try:
            values[name] = float(v)
        except ValueError:
            pass
    rows = [FillResult("corral", values)]
    if mc is not None:
        rows.append(FillResult("memcached", values))
    if proc.returncode or rows[0].fill is None:
        ctx.failures.append("%s fill: store_fill exited with %d: %s" % (
            NAME, proc.returncode, proc.stderr.strip()[-300:]))
    for r in rows:
        if r.fill is None:
            r.note = (proc.stderr.strip().splitlines() or
                      ["no result"])[-1].strip("# ")
    case = Case(NAME, "fill", "64 MiB of values sized 100 B to 512 KiB "
                "(log-uniform): held at the first eviction, and found by "
                "a random read after 128 MiB were written",
                "bench/store_fill; corral's store made as the master makes "
                "it (16 stripes, max_object 1m); %s" % (
                    "%s -m 64 -t 1, fresh" % mc.version() if mc else
                    "no memcached"))
    case.kind = "fill"
    case.table = fill_table
    case.results = rows
    for r in rows:
        say("  %-10s held at the first eviction %s, hits after a random "
            "read %s (bytes %s)" % (r.server, _pct(r.fill), _pct(r.hits),
                                    _pct(r.byte_hits)))
    return case


def _pct(v):
    return "-" if v is None else "%.1f%%" % (100 * v)


def fill_table(case):
    """The fill case's table: one row for each store."""
    lines = [
        "| store | held at the first eviction | (its own count) | values "
        "by then | found by a random read | (bytes) | notes |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for r in case.results:
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            r.server, _pct(r.fill), _pct(r.self),
            "-" if r.values is None else "%d" % r.values, _pct(r.hits),
            _pct(r.byte_hits), r.note))
    return "\n".join(lines)


def _children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _run_pass(ctx, path, cpus, mc, ops):
    """store_bench once, pinned to cpus: ({name: ops/s}, its stderr, the
    share of those CPUs that other processes took meanwhile)."""
    cmd = pinned(cpus, [path, str(mc.port if mc else 0), str(ops)])
    cset = cpu_set(cpus)
    mc_inside = mc is not None and (cpus is None or
                                    cpu_set(MEMCACHED_CPUS) <= cset)
    mc0 = procstat.cpu_ticks(mc.pid) if mc_inside else 0
    busy0, own0, t0 = procstat.busy_ticks(cset), _children_cpu(), \
        time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            errors="replace", start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60 + 60 * ctx.duration)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += "\n# store_bench: killed after %d s" % (60 + 60 *
                                                       ctx.duration)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    wall = time.monotonic() - t0
    busy = (procstat.busy_ticks(cset) - busy0) / procstat.CLK_TCK
    mine = _children_cpu() - own0
    if mc_inside:
        mine += (procstat.cpu_ticks(mc.pid) - mc0) / procstat.CLK_TCK
    ncpu = len(cset) if cset else (os.cpu_count() or 1)
    other = max(0.0, (busy - mine) / (wall * ncpu)) if wall else 0.0
    rates = {}
    for line in out.splitlines():
        name, _, rate = line.partition(" ")
        try:
            rates[name] = float(rate)
        except ValueError:
            pass
    if proc.returncode:
        err += "\n# store_bench exited with %d" % proc.returncode
    return rates, err, other


def _where(key, cpus, mc_cpus):
    if key.startswith("store_"):
        return cpus or "any"
    return "%s + memcached on %s" % (cpus or "any", mc_cpus or "any")


def _measure(ctx, path, mc, ops):
    """Every row of ROWS: one store_bench run per CPU list of the plan
    (its rows for other process counts are dropped)."""
    plan, mc_cpus = _plan()
    passes = []
    for procs in sorted(plan):
        if plan[procs] not in passes:
            passes.append(plan[procs])
    rows = {}
    for cpus in passes:
        rates, err, other = _run_pass(ctx, path, cpus, mc, ops)
        busy = "others took %.0f%% of CPU %s" % (100 * other, cpus or
                                                 "any")
        for key, op, procs in ROWS:
            if plan[procs] != cpus:
                continue
            r = OpsResult(key, op, procs, _where(key, cpus, mc_cpus),
                          rates.get(key))
            if r.ops_per_sec is None:
                r.note = "skipped: no memcached" if mc is None and \
                    not r.is_store else _why(err, key)
            elif other >= BUSY_NOTE:
                r.note = busy
            rows[key] = r
    return [rows[key] for key, _, _ in ROWS]


def _why(err, key):
    """What store_bench said on stderr about a row that has no number:
    its own line, else what is not about another row."""
    lines = [ln.strip("# ").strip() for ln in err.splitlines()
             if ln.strip()]
    mine = [ln for ln in lines if ln.startswith(key)]
    if not key.startswith("store_"):
        mine += [ln for ln in lines if ln.startswith("memcached:")]
    rest = [ln for ln in lines if not ln.endswith(" failed") and
            not ln.startswith("memcached:")]
    return "; ".join(mine or rest) or "no result"


def _ratios(results):
    by_key = {r.key: r for r in results}
    for r in results:
        base = by_key.get(BASE[r.procs])
        if r.ops_per_sec and base and base.ops_per_sec:
            r.ratio = r.ops_per_sec / base.ops_per_sec


def _fmt(v):
    return "-" if v is None else "{:,.0f}".format(v)


def run(ctx):
    _, mc_cpus = _plan()
    ops = SMOKE_OPS if ctx.smoke else OPS_PER_SECOND * ctx.duration
    try:
        path = _store_bench(ctx)
    except BenchError as e:
        ctx.failures.append("%s: %s" % (NAME, e))
        ctx.note("%s: %s" % (NAME, str(e).splitlines()[0]))
        return []
    if path is None:
        return []
    mc = None
    if "memcached" in ctx.tools:
        mc = Memcached(ctx, ctx.tools["memcached"])
    else:
        ctx.note("%s: memcached not found, its rows are skipped%s" % (
            NAME, "" if ctx.install else
            " (bench/run --install brings it)"))
    try:
        if mc is not None:
            try:
                mc.start(NAME, mc_cpus)
                ctx.running.append(mc)
            except ServerFailed as e:
                ctx.note("%s: memcached did not start, its rows are "
                         "skipped: %s" % (NAME, e))
                mc = None
        load = "bench/store_bench, %s operations per process in each " \
            "store row, %s" % (_fmt(ops), "a tenth of that against %s "
                               "(-t 1, on CPU %s)" % (mc.version(),
                                                     mc_cpus or "any")
                               if mc else "no memcached")
        results = _measure(ctx, path, mc, ops)
    finally:
        if mc is not None and mc.proc is not None:
            mc.stop()
            ctx.running.remove(mc)
    _ratios(results)
    case = Case(NAME, "ops", "4000 B values, operations per second", load)
    case.kind = "ops"
    case.results = results
    fill = _fill(ctx)
    for r in results:
        say("  %-24s %d proc  CPU %-20s %11s ops/s %7s%s" % (
            r.op, r.procs, r.cpus, _fmt(r.ops_per_sec), fmt_times(r.ratio),
            "  (%s)" % r.note if r.note else ""))
        if not r.is_store:
            continue
        if r.ops_per_sec:
            ctx.passed += 1
        else:
            ctx.failures.append("%s %s, %d process(es): %s" % (
                NAME, r.op, r.procs, r.note))
    return [case] + ([fill] if fill is not None else [])
