"""Results: the markdown tables, the gnuplot picture, the README targets."""

import os
import re
import statistics
import subprocess

INF = float("inf")


def _cpu(case, name):
    r = case.get(name)
    return r.cpu_us if r is not None and r.cpu_us else None


def _floor_note(case):
    floor, base = _cpu(case, "floor"), _cpu(case, "nginx")
    return " (floor %.2f×)" % (floor / base) if floor and base else ""


class Target:
    """A goal for corral in one case: check(case) gives (now, met), met
    None when it cannot be judged."""

    def __init__(self, suite, key, what, goal, check):
        self.suite = suite
        self.key = key
        self.what = what
        self.goal = goal
        self.check = check


def vs(suite, key, what, name, most, label=None):
    """corral's CPU per request at most `most` times that of row name."""
    def check(case):
        mine, theirs = _cpu(case, "corral"), _cpu(case, name)
        if mine is None or theirs is None:
            return "no ratio (corral or %s missing)" % name, None
        v = mine / theirs
        return "%.2f×" % v + (_floor_note(case) if name == "nginx"
                              else "") + (" (%s)" % case.caveat
                                          if case.caveat else ""), v <= most
    return Target(suite, key, what, "≤ %.2f× %s" % (most, label or name),
                  check)


def vs_best(suite, key, what, most):
    """corral's CPU per request at most `most` times the best peer's."""
    def check(case):
        mine = _cpu(case, "corral")
        peers = [(r.cpu_us, r.server) for r in case.results
                 if r.server != "floor" and not r.server.startswith("corral")
                 and r.cpu_us]
        if mine is None or not peers:
            return "no ratio (corral or the peers missing)", None
        best, name = min(peers)
        v = mine / best
        return "%.2f× (%s)" % (v, name), v <= most
    return Target(suite, key, what, "≤ %.2f× the best peer" % most, check)


def _stampede(case):
    r = case.get("corral")
    if r is None or r.p99_us is None:
        return "no result from corral", None
    floor = case.get("origin alone")
    if floor is not None and floor.p99_us is not None and not floor.errors:
        floor_us, what = floor.p99_us, "origin alone"
    else:
        floor_us, what = case.delay_ms * 1e3, "origin delay"
    return "%d origin hit%s, p99 %s (%s %s)" % (
        r.origin_hits, "" if r.origin_hits == 1 else "s",
        fmt_lat(r.p99_us), what, fmt_lat(floor_us)), r.met(floor_us)


def _store_fill(case):
    c, m = case.get("corral"), case.get("memcached")
    if c is None or c.fill is None:
        return "no result from corral", None
    if m is None or m.fill is None:
        return "%.1f%% (no memcached)" % (100 * c.fill), None
    return "%.1f%% vs %.1f%%" % (100 * c.fill, 100 * m.fill), \
        c.fill >= m.fill


def _mc_writes(case):
    c, m = case.get("corral"), case.get("memcached")
    cv = getattr(c, "per_cpu", None) if c else None
    mv = getattr(m, "per_cpu", None) if m else None
    if not cv or not mv:
        return "no ratio (corral or memcached missing)", None
    return "%.2f×" % (cv / mv), cv / mv >= 0.8


def _conns_growth(case):
    r = case.get("corral")
    if r is None or r.growth is None:
        return "no result from corral", None
    lo, hi = min(case.levels), max(case.levels)
    floor = case.get("floor")
    return "%.2f× (%s µs at %s, %s µs at %s%s)" % (
        r.growth, fmt_cpu(r.cpu_at(lo)), "{:,}".format(lo),
        fmt_cpu(r.cpu_at(hi)), "{:,}".format(hi),
        "; floor %.2f×" % floor.growth if floor and floor.growth else ""), \
        r.growth <= 1.2


def _conns_memory(case):
    r, base = case.get("corral"), case.get("nginx")
    if r is None or r.bytes_per_idle is None:
        return "no result from corral", None
    now = "{:,.0f} B".format(r.bytes_per_idle)
    if base is None or base.bytes_per_idle is None:
        return now + " (no nginx)", None
    return now + ", nginx {:,.0f} B".format(base.bytes_per_idle), \
        r.bytes_per_idle <= base.bytes_per_idle


def _corral_rows(case):
    return [r for r in case.results if r.server == "corral"]


def _accept_balance(case):
    rows = [r for r in _corral_rows(case) if r.ratio is not None]
    if not rows:
        return "no result from corral", None
    worst = max(r.ratio for r in rows)
    return ("all on one worker" if worst == INF else "%.2f" % worst), \
        worst <= 1.3


def _accept_delay(case):
    rows = _corral_rows(case)
    if not rows or all(r.max_us is None for r in rows):
        return "no result from corral", None
    slow = sum(r.slow for r in rows)
    errors = sum(r.errors for r in rows)
    worst = max(r.max_us for r in rows if r.max_us is not None)
    return "%d of them, the slowest %s%s" % (
        slow, fmt_lat(worst), ", %d errors" % errors if errors else ""), \
        slow == 0 and errors == 0


def half_spread(values):
    """Half of max - min, relative to the median."""
    med = statistics.median(values)
    return (max(values) - min(values)) / 2 / med if med else 0.0


def paired_ratios(case):
    """CPU per request of case.pair[0] over case.pair[1], run by run (the
    two runs of a round, one after the other), where both served."""
    a, b = case.pair
    return [x.cpu_us / y.cpu_us for x, y in zip(case.runs[a], case.runs[b])
            if x.cpu_us and y.cpu_us]


def within_noise(case):
    """The median of the paired ratios, met when its distance from 1 is
    at most the noise: the larger relative half-spread of the two rows'
    runs (suite counters)."""
    ratios = paired_ratios(case)
    cpu = [[r.cpu_us for r in case.runs[n] if r.cpu_us] for n in case.pair]
    if not ratios or not all(cpu):
        return "no ratio (a build served nothing)", None
    ratio = statistics.median(ratios)
    noise = max(half_spread(v) for v in cpu)
    text = "%.3f× (noise ±%.1f%%, %d rounds)" % (ratio, 100 * noise,
                                                 len(ratios))
    if getattr(case, "same_binary", False):
        return text + ", one binary (smoke)", None
    if len(ratios) < 3:
        return text + ", too few rounds to judge", None
    return text, abs(ratio - 1) <= noise


def _instructions(case):
    """Suite counters: instructions per request on/off, for the record
    (deterministic, so any difference shows; the goal is the CPU time's)."""
    on, off = case.ir.get("corral, counters on", {}), \
        case.ir.get("corral, counters off", {})
    cells = ["%.3f× (%s)" % (on[k] / off[k], k) for k in case.keys
             if on.get(k) and off.get(k)]
    return ", ".join(cells) or "no result", None


# Every goal, in the order of the tables.  Ratios are of CPU time per
# request in the same run.
TARGETS = (
    vs("static", "100b-ka", "static 100 B keep-alive, CPU/request",
       "nginx", 0.6),
    vs("static", "100b-pipe16", "static 100 B, 16-deep pipelining, "
       "CPU/request", "nginx", 0.15),
    vs("static", "100b-pipe16", "static 100 B, 16-deep pipelining, "
       "CPU/request vs the floor", "floor", 1.25, "the floor"),
    vs("static", "52k-ka", "static 52 KB keep-alive, CPU/request",
       "nginx", 1.0),
    vs_best("static", "52k-ka", "static 52 KB keep-alive, CPU/request vs "
            "the best peer", 1.0),
    vs("static", "1m-ka", "static 1 MB keep-alive, CPU/request", "nginx",
       1.0),
    vs("static", "100b-ab-k", "seed: 100 B, ab -k (HTTP/1.0 keep-alive), "
       "CPU/request", "nginx", 1.0),
    vs("static", "null-t2c100", "seed: null.html, wrk -t2 -c100, "
       "CPU/request", "nginx", 1.0),
    vs("static", "null-c500", "seed: null.html, 500 connections, "
       "CPU/request", "nginx", 1.0),
    vs("static", "page600-ab-c10", "seed: 0.6 KB page, ab -c 10, "
       "CPU/request", "nginx", 1.0),
    vs("static", "page600-ab-c40", "seed: 0.6 KB page, ab -c 40, "
       "CPU/request", "nginx", 1.0),
    vs("static", "page600-ab-c70", "seed: 0.6 KB page, ab -c 70, "
       "CPU/request", "nginx", 1.0),
    vs("gzip", "page52k-gzip", "seed: 52 KB page gzipped, ab -k, "
       "CPU/request", "nginx + proxy_cache", 1.0,
       "nginx's fix (proxy_cache)"),
    vs("proxy", "hit-4000b", "proxy cache hit 4000 B, CPU/request",
       "nginx", 0.35),
    vs("proxy", "pass-4000b", "proxy uncached 4000 B, CPU/request",
       "nginx", 0.8),
    vs("proxy", "pass-4000b", "proxy uncached 4000 B, CPU/request vs the "
       "proxy floor", "floor", 1.15, "the floor"),
    Target("stampede", "cold", "stampede: 1 origin hit, p99 within the origin "
           "alone's + 10 ms", "see left", _stampede),
    vs("fastcgi", "php-uncached", "FastCGI PHP page through php-fpm, "
       "CPU/request", "nginx", 0.7),
    vs("fastcgi", "php-uncached", "FastCGI PHP page through php-fpm, "
       "CPU/request vs the FastCGI floor", "floor", 1.15, "the floor"),
    vs("fastcgi", "php-cached", "FastCGI PHP page from the cache, "
       "CPU/request", "nginx", 0.5),
    vs("tls", "hs-full-ec", "TLS full handshake, ECDSA P-256, CPU",
       "nginx", 1.0),
    vs("tls", "hs-full-rsa", "TLS full handshake, RSA 2048, CPU", "nginx",
       1.0),
    vs("tls", "hs-ticket-13", "TLS 1.3 resumed by ticket, CPU", "nginx",
       1.0),
    vs("tls", "hs-ticket-12", "TLS 1.2 resumed by ticket, CPU", "nginx",
       1.0),
    vs("tls", "hs-sessid-12", "TLS 1.2 resumed by session ID, CPU",
       "nginx", 1.0),
    vs("tls", "req-100b-ktls", "TLS 100 B keep-alive, kTLS on, "
       "CPU/request", "nginx", 0.7),
    vs("tls", "req-100b", "TLS 100 B keep-alive, kTLS off, CPU/request",
       "nginx", 0.7),
    Target("store", "fill", "store: share of 64 MiB held at the first "
           "eviction", "≥ memcached -m 64's", _store_fill),
    Target("conns", "levels", "10,000 connections: CPU/request vs at 100",
           "≤ 1.20×", _conns_growth),
    Target("conns", "levels", "memory per idle connection",
           "≤ nginx's", _conns_memory),
    Target("accept", "burst", "accept: busiest over least busy worker, "
           "1,000 new connections", "≤ 1.30", _accept_balance),
    Target("accept", "burst", "accept: connections waiting 1 s or more",
           "none", _accept_delay),
    Target("memcached", "writes", "memcached listener writes, sets per "
           "CPU second", "≥ 0.80× memcached's", _mc_writes),
    vs("memcached", "random-read", "memcached pages over HTTP, "
       "CPU/request", "nginx", 0.3, "nginx + memcached"),
    Target("counters", "static-100b", "counters cost: static 100 B "
           "keep-alive, CPU/request on/off", "on/off ratio within noise",
           within_noise),
    Target("counters", "hit-4000b", "counters cost: proxy cache hit "
           "4000 B, CPU/request on/off", "on/off ratio within noise",
           within_noise),
    Target("counters", "callgrind", "counters cost: instructions/request "
           "on/off (callgrind)", "for the record", _instructions),
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


# The table of each kind of case; the default is case_table, and a case
# may bring its own (case.table).
TABLES = {"ops": ops_table, "stampede": stampede_table}


def table_of(case):
    return getattr(case, "table", None) or \
        TABLES.get(getattr(case, "kind", ""), case_table)


def targets(cases):
    """(what, goal, now, verdict) for each target."""
    by_key = {(c.suite, c.key): c for c in cases}
    rows = []
    for t in TARGETS:
        case = by_key.get((t.suite, t.key))
        if case is None:
            rows.append((t.what, t.goal, "not measured (suite %s)" %
                         t.suite, ""))
            continue
        now, met = t.check(case)
        rows.append((t.what, t.goal, now, "" if met is None else
                     "met" if met else "not met"))
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
    if any(c.suite == "tls" and c.get("floor") for c in cases):
        out.append("- Suite tls: its floor is bench/tls_floor, corral's "
                   "response for every request with one SSL_read and one "
                   "SSL_write (read/write with kernel TLS), and bare "
                   "handshakes resumed from OpenSSL's own session cache "
                   "and tickets.")
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
        table = table_of(case)
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
    cases = [c for c in cases if c.results and table_of(c) is case_table]
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
    wanted = {t.what for t in TARGETS if t.suite not in ran}
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
    others = sorted({t.suite for t in TARGETS if t.what in kept and
                     "not measured" not in kept[t.what]})
    since = "; %s from an earlier run" % ", ".join(others) if others else ""
    block = "%s\n%s\n\n(from bench/run on %s%s)\n" % (
        README_BEGIN, targets_table(cases, kept), ctx.date, since)
    with open(path, "w") as f:
        f.write(text[:i] + block + text[j:])
