"""Results: the markdown tables, the gnuplot picture, the README targets."""

import os
import re
import subprocess

# (suite, case key, what, the most corral may spend, as a ratio to nginx)
TARGETS = (
    ("static", "100b-ka", "static 100 B keep-alive, CPU/request", 0.6),
    ("static", "100b-pipe16", "static 100 B, 16-deep pipelining, "
     "CPU/request", 0.15),
    ("proxy", "hit-4000b", "proxy cache hit 4000 B, CPU/request", 0.35),
    ("stampede", "cold", "stampede: 1 origin hit, p99 within origin "
     "delay + 10 ms", None),
    ("fastcgi", "php-uncached", "FastCGI PHP page through php-fpm, "
     "CPU/request", 0.7),
    ("fastcgi", "php-cached", "FastCGI PHP page from the cache, "
     "CPU/request", 0.5),
)

README_BEGIN = "<!-- targets:begin -->"
README_END = "<!-- targets:end -->"


def fmt_rps(v):
    return "{:,.0f}".format(v)


def fmt_cpu(v):
    if v is None:
        return "-"
    return "%.2f" % v if v < 10 else "%.1f" % v


def fmt_lat(us):
    if us is None:
        return "-"
    if us < 1000:
        return "%.0f µs" % us
    return "%.2f ms" % (us / 1000)


def ratio(case, server):
    """CPU per request of server over nginx's in the same case, or None."""
    r, base = case.get(server), case.get("nginx")
    if not r or not base or r.cpu_us is None or not base.cpu_us:
        return None
    return r.cpu_us / base.cpu_us


def fmt_ratio(v):
    return "-" if v is None else "%.2f×" % v


# Other processes taking this much of the server's CPUs in a run: a note.
BUSY_NOTE = 0.1


def notes_of(r):
    notes = [r.note] if r.note else []
    if r.other_cpu >= BUSY_NOTE:
        notes.append("others took %.0f%% of its CPU" % (100 * r.other_cpu))
    return "; ".join(notes)


def case_table(case):
    lines = [
        "| server | req/s | CPU µs/req | CPU vs nginx | p50 | p99 | errors "
        "| notes |",
        "|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in case.results:
        lines.append("| %s | %s | %s | %s | %s | %s | %d | %s |" % (
            r.server, fmt_rps(r.rps), fmt_cpu(r.cpu_us),
            fmt_ratio(ratio(case, r.server)), fmt_lat(r.p50_us),
            fmt_lat(r.p99_us), r.errors, notes_of(r)))
    return "\n".join(lines)


def is_ops(case):
    """A table of operations per second (suite store), not of servers."""
    return getattr(case, "kind", "") == "ops"


def fmt_times(v):
    if v is None:
        return "-"
    return "%.2f×" % v if v < 10 else "%.1f×" % v if v < 100 else \
        "{:,.0f}×".format(v)


def ops_table(case):
    lines = [
        "| operation | processes | CPUs | ops/s | vs memcached get | notes |",
        "|---|--:|---|--:|--:|---|",
    ]
    for r in case.results:
        lines.append("| %s | %d | %s | %s | %s | %s |" % (
            r.op, r.procs, r.cpus,
            "-" if r.ops_per_sec is None else fmt_rps(r.ops_per_sec),
            fmt_times(r.ratio), r.note))
    return "\n".join(lines)


def stampede_table(case):
    lines = [
        "| server | origin hits | p50 | p99 | max | errors | notes |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for r in case.results:
        lines.append("| %s | %s | %s | %s | %s | %d | %s |" % (
            r.server, "-" if r.origin_hits is None else r.origin_hits,
            fmt_lat(r.p50_us), fmt_lat(r.p99_us), fmt_lat(r.max_us),
            r.errors, r.note))
    return "\n".join(lines)


def _stampede_now(case):
    """(now, verdict) of the stampede target from corral's row."""
    r = case.get("corral")
    if r is None or r.p99_us is None:
        return "no result from corral", ""
    now = "%d origin hit%s, p99 %s" % (
        r.origin_hits, "" if r.origin_hits == 1 else "s", fmt_lat(r.p99_us))
    return now, "met" if r.met(case.delay_ms) else "not met"


# The table of each kind of case; the default is case_table.
TABLES = {"ops": ops_table, "stampede": stampede_table}


def targets(cases):
    """(what, goal, now, verdict) for each target of the README."""
    by_key = {(c.suite, c.key): c for c in cases}
    rows = []
    for suite, key, what, most in TARGETS:
        goal = "≤ %.2f× nginx" % most if most is not None else "see left"
        case = by_key.get((suite, key))
        now = ratio(case, "corral") if case else None
        if case is None:
            rows.append((what, goal, "not measured (suite %s)" % suite, ""))
        elif getattr(case, "kind", "") == "stampede":
            rows.append((what, goal) + _stampede_now(case))
        elif now is None:
            rows.append((what, goal, "no ratio (corral or nginx missing)",
                         ""))
        else:
            floor = ratio(case, "floor")
            rows.append((what, goal, "%.2f×" % now + (
                " (floor %.2f×)" % floor if floor is not None else ""),
                "met" if now <= most else "not met"))
    return rows


def targets_table(cases, kept=None):
    """The targets as markdown; kept maps a target's text to the line to
    keep instead (from an earlier run that had its suite)."""
    lines = ["| target | goal | now | |", "|---|---|--:|---|"]
    for row in targets(cases):
        lines.append((kept or {}).get(row[0]) or "| %s | %s | %s | %s |"
                     % row)
    return "\n".join(lines)


def markdown(ctx, cases):
    out = ["# corral benchmark results", ""]
    out.append("- Date: %s" % ctx.date)
    out.append("- Machine: %s" % ctx.machine)
    out.append("- Servers: " + ", ".join(
        s.version() or s.name for s in ctx.servers))
    out.append("- Load: " + (", ".join(
        "%s %s" % (k, v) for k, v in sorted(ctx.tool_versions.items()))
        or "none"))
    out.append("- Settings: %d worker(s) per server, server on CPU %s, "
               "load generator on CPU %s, %d s per run, access logs off, "
               "sendfile on, keep-alive on (see bench/conf/)." % (
                   ctx.workers, ctx.server_cpus or "any",
                   ctx.load_cpus or "any", ctx.duration))
    out.append("- CPU µs/req: the server's utime + stime (master and "
               "workers, from /proc) over the run, divided by the "
               "requests served. Lower is better; \"CPU vs nginx\" "
               "divides by nginx's in the same run.")
    if any(c.get("floor") for c in cases):
        out.append("- floor: bench/floor replaying corral's own response "
                   "bytes, captured before the run, with one recv and one "
                   "writev per batch of requests and nothing else: what "
                   "the kernel costs for the exchange, so the least any "
                   "server can spend here. \"(floor …)\" in the targets "
                   "is its ratio to nginx.")
    if any(is_ops(c) for c in cases):
        out.append("- ops/s (suite store): operations per second of "
                   "bench/store_bench, all its processes together. "
                   "Higher is better; \"vs memcached get\" divides by "
                   "memcached get from as many processes in the same "
                   "run.")
    if any(c.suite == "proxy" for c in cases):
        out.append("- Suite proxy: the origin is bench/lib/origin.py, "
                   "pinned to the load generator's CPU; only the proxy's "
                   "CPU time counts.")
    if any(getattr(c, "kind", "") == "stampede" for c in cases):
        out.append("- Suite stampede: origin hits are the requests the "
                   "origin got for the URL; p50, p99 and max are the "
                   "clients' times to the last byte of the response. "
                   "Fewer hits and lower times are better.")
    out.append("")
    out += ["## Targets", "", targets_table(cases), ""]
    suite = None
    for case in cases:
        if case.suite != suite:
            suite = case.suite
            out += ["## %s" % suite, ""]
        table = TABLES.get(getattr(case, "kind", ""), case_table)
        out += ["### %s" % case.title, "",
                "Load: %s." % case.load, "",
                table(case), ""]
    if ctx.notes:
        out += ["## Notes", ""]
        out += ["- %s" % n for n in ctx.notes]
        out.append("")
    return "\n".join(out)


def _terminal(gnuplot):
    out = subprocess.run([gnuplot, "-e", "set terminal"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True).stdout
    if re.search(r"^\s*pngcairo\b", out, re.M):
        return "pngcairo size 1200,640 noenhanced font 'sans,10'"
    return "png size 1200,640 noenhanced"


def plot(ctx, cases, png):
    """CPU µs per request, one group of bars per case, one bar per server.
    Returns an error string, or None."""
    cases = [c for c in cases if c.results and
             getattr(c, "kind", "") not in TABLES]
    if not cases:
        return "nothing to plot"
    names = [s.name for s in ctx.servers if any(c.get(s.name)
                                                for c in cases)]
    if any(c.get("floor") for c in cases):
        names.append("floor")
    data = os.path.join(ctx.workdir, "plot.dat")
    with open(data, "w") as f:
        f.write("case\t" + "\t".join(names) + "\n")
        for c in cases:
            row = []
            for n in names:
                r = c.get(n)
                row.append(fmt_cpu(r.cpu_us) if r and r.cpu_us else "?")
            label = c.title if c.suite == "static" else \
                "%s: %s" % (c.suite, c.title)
            f.write('"%s"\t%s\n' % (label, "\t".join(row)))
    script = os.path.join(ctx.workdir, "plot.gp")
    with open(script, "w") as f:
        f.write("""set terminal %s
set output '%s'
set title "CPU time per request (µs, log scale; lower is better) - %s"
set datafile missing '?'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set ylabel 'CPU µs per request'
set grid ytics
set key top left
set xtics rotate by -25 scale 0
set bmargin 8
plot for [i=2:%d] '%s' using i:xtic(1) title columnheader(i)
""" % (_terminal(ctx.tools["gnuplot"]), png, ctx.date, len(names) + 1,
           data))
    p = subprocess.run([ctx.tools["gnuplot"], script],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode:
        return "gnuplot failed: " + p.stdout.strip()[-200:]
    return None


def _kept_rows(block, ran):
    """The target lines of an old README block whose suite did not run."""
    wanted = {what for suite, _, what, _ in TARGETS if suite not in ran}
    kept = {}
    for line in block.splitlines():
        cells = line.strip().strip("|").split("|")
        if len(cells) == 4 and cells[0].strip() in wanted:
            kept[cells[0].strip()] = line.strip()
    return kept


def update_readme(path, ctx, cases, ran):
    """Rewrites the targets block of bench/README.md with this run; the
    rows of suites that were not in it (ran) stay as they were."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return
    i, j = text.find(README_BEGIN), text.find(README_END)
    if i < 0 or j < i:
        return
    kept = _kept_rows(text[i:j], ran)
    others = sorted({t[0] for t in TARGETS if t[2] in kept and
                     "not measured" not in kept[t[2]]})
    since = "; %s from an earlier run" % ", ".join(others) if others else ""
    block = "%s\n%s\n\n(from bench/run on %s%s)\n" % (
        README_BEGIN, targets_table(cases, kept), ctx.date, since)
    with open(path, "w") as f:
        f.write(text[:i] + block + text[j:])
