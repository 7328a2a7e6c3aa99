"""Suite fastcgi: a small PHP page through php-fpm, behind corral and
behind nginx (fastcgi_pass, fastcgi_keep_conn on, an upstream keepalive),
both talking to the same php-fpm pool over its unix socket.  Then the
same page kept by each server's cache (nginx fastcgi_cache).

The web server runs alone on the server's CPU; php-fpm and wrk share the
load CPUs.  CPU per request is the web server's own; php-fpm's CPU per
request is measured around the same run and shown in the notes.

php-fpm serves one FastCGI connection per child for as long as the web
server keeps it open, so a connection it has not accepted waits until a
child is free.  Each server keeps as many idle connections as wrk has
connections, and they stay open after its run (corral's while the floor
and nginx run, nginx's while corral runs the cached case): the pool has
twice that many children, so the server being measured always finds
free ones.
"""

import glob
import http.client
import os

import procstat
from load import Case, Wrk, measure
from servers import (PhpFpm, ServerFailed, start_all, start_fcgi_relay,
                     stop_all)

NAME = "fastcgi"

# Tools this suite wants beyond the harness's, and their Debian packages.
TOOLS = {"php-fpm8.2": "php-fpm"}

CONNECTIONS = 32
# The idle connections the server measured before keeps, and the running
# one's.
CHILDREN = 2 * CONNECTIONS
POOL = {
    "pm": "static",
    "pm.max_children": str(CHILDREN),
    "pm.status_path": "/fpm-status",
    "php_admin_flag[expose_php]": "off",
    "php_admin_flag[log_errors]": "on",
}

# The page: a small list.  /cached/ says it may be kept ten minutes and
# counts its runs, one byte each, in the file "runs" beside it.
PAGE = r'''<?php
%s
header('Content-Type: text/html; charset=utf-8');
echo "<!doctype html>\n<title>corral bench</title>\n<ul>\n";
for ($i = 0; $i < 20; $i++)
    echo "<li>item $i</li>\n";
echo "</ul>\n";
'''
CACHED = ("header('Cache-Control: public, max-age=600');\n"
          "file_put_contents(__DIR__ . '/runs', 'x', FILE_APPEND | LOCK_EX);")
BODY = ("<!doctype html>\n<title>corral bench</title>\n<ul>\n" +
        "".join("<li>item %d</li>\n" % i for i in range(20)) +
        "</ul>\n").encode()

# (key, title, path)
CASES = (
    ("php-uncached", "PHP page through php-fpm", "/pass/page.php"),
    ("php-cached", "PHP page from the cache", "/cached/page.php"),
)


def _fpm_binary(ctx):
    if "php-fpm8.2" in ctx.tools:
        return ctx.tools["php-fpm8.2"]
    found = sorted(glob.glob("/usr/sbin/php-fpm[0-9]*"))
    return found[-1] if found else None


def _docroot(ctx):
    root = os.path.join(ctx.workdir, NAME, "htdocs")
    for sub, extra in (("pass", ""), ("cached", CACHED)):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
        with open(os.path.join(root, sub, "page.php"), "w") as f:
            f.write(PAGE % extra)
    runs = os.path.join(root, "cached", "runs")
    open(runs, "w").close()
    os.chmod(runs, 0o666)               # php-fpm's pool may be nobody
    return root


def _runs(root):
    """How many times the cached page ran in php-fpm."""
    return os.path.getsize(os.path.join(root, "cached", "runs"))


def _get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp, resp.read()
    finally:
        conn.close()


def _check(srv, key, path, root):
    """The page twice with the right bytes; in the cached case the second
    answer must be a hit that did not run the page.  Warms the cache and
    the connections to php-fpm."""
    try:
        for _ in range(2):
            runs = _runs(root)
            status, resp, got = _get(srv.port, path)
            if status != 200 or got != BODY:
                return "GET %s: status %d, %d of %d bytes%s" % (
                    path, status, len(got), len(BODY),
                    "" if got == BODY[:len(got)] else " (wrong bytes)")
        if key == "php-cached":
            hit = (resp.getheader("X-Cache") or "").upper() == "HIT"
            if not hit or _runs(root) != runs:
                return "GET %s twice: the second was %s" % (
                    path, "a hit" if hit else "not a hit") + \
                    ("" if _runs(root) == runs else " and ran the page")
    except (OSError, http.client.HTTPException, ValueError) as e:
        return "GET %s: %s" % (path, e)
    return None


def run(ctx):
    if "wrk" not in ctx.tools:
        ctx.note("%s: wrk not found, skipped" % NAME)
        return []
    binary = _fpm_binary(ctx)
    if binary is None:
        ctx.note("%s: php-fpm not found, skipped%s" % (
            NAME, "" if ctx.install else " (bench/run --install brings "
            "it)"))
        return []
    root = _docroot(ctx)
    fpm = PhpFpm(ctx, binary)
    try:
        fpm.start(NAME, POOL)
    except ServerFailed as e:
        ctx.note("%s: %s" % (NAME, e))
        return []
    ctx.running.append(fpm)
    running = start_all(ctx, NAME, {"FPM_SOCKET": fpm.socket, "ROOT": root,
                                    "KEEPALIVE": CONNECTIONS})
    out = []
    floors = []
    try:
        for key, title, path in CASES:
            case = Case(NAME, key, title, "wrk, %d connections; php-fpm "
                        "(%d children) and wrk on CPU %s, the web server "
                        "alone on CPU %s" % (
                            CONNECTIONS, CHILDREN, ctx.load_cpus or "any",
                            ctx.server_cpus or "any"))
            for srv in running:
                why = _check(srv, key, path, root)
                if why:
                    ctx.fail_server(NAME, srv, "%s: %s" % (title, why))
                    continue
                before = procstat.cpu_ticks(fpm.pid)
                runs = _runs(root)
                r = measure(ctx, srv, Wrk("wrk", connections=CONNECTIONS),
                            path)
                fpm_ticks = procstat.cpu_ticks(fpm.pid) - before
                ran = _runs(root) - runs
                notes = [r.note] if r.note else []
                if r.requests:
                    notes.append("php-fpm %.1f µs/req" % (
                        procstat.ticks_to_us(fpm_ticks) / r.requests))
                if key == "php-cached" and ran:
                    notes.append("the page ran %d times" % ran)
                r.note = "; ".join(notes)
                case.results.append(r)
                ctx.progress(case, r)
                if srv.name != "corral":
                    continue
                if r.failed or (key == "php-cached" and ran):
                    ctx.failures.append("%s %s: corral: %s" % (
                        NAME, title, r.note or "%d errors, %d requests" % (
                            r.errors, r.requests)))
                else:
                    ctx.passed += 1
                    if key == "php-uncached":
                        floors += _floor(ctx, case, fpm, root, key, path)
            out.append(case)
        return out
    finally:
        stop_all(ctx, running + floors + [fpm])


def _floor(ctx, case, fpm, root, key, path):
    """The floor's row for the uncached page: bench/fcgi_relay, which
    sends one FastCGI request built at start on a kept php-fpm
    connection and writes the answer back, nothing else."""
    if ctx.smoke:
        return []
    relay = start_fcgi_relay(ctx, NAME, fpm.socket, root, path,
                             CONNECTIONS)
    if relay is None:
        return []
    why = _check(relay, key, path, root)
    if why:
        ctx.note("%s: floor: %s" % (NAME, why))
        stop_all(ctx, [relay])
        return []
    before = procstat.cpu_ticks(fpm.pid)
    r = measure(ctx, relay, Wrk("wrk", connections=CONNECTIONS), path)
    fpm_ticks = procstat.cpu_ticks(fpm.pid) - before
    if r.requests:
        r.note = "; ".join(([r.note] if r.note else []) + [
            "php-fpm %.1f µs/req" % (procstat.ticks_to_us(fpm_ticks) /
                                     r.requests)])
    case.results.append(r)
    ctx.progress(case, r)
    # Its connections hold php-fpm children (one each while kept): let
    # them go before the next server's run.
    stop_all(ctx, [relay])
    return []
