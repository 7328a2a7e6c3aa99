"""Suite proxy: corral as a reverse proxy in front of bench/lib/origin.py.
A 4000 B page served from the cache (the headline), next to nginx's
proxy_cache and Varnish; then the same page proxied without a cache,
with idle connections to the origin kept, next to nginx.

The origin and the load generator share the load CPUs; only the proxy's
own CPU time counts.
"""

import http.client
import os

from load import Case, Wrk, measure
from origin import body
from servers import (ServerFailed, add_varnish, start_all, start_floor,
                     start_origin, start_relay, stop_all)

NAME = "proxy"

# Tools this suite wants beyond the harness's, and their Debian packages.
TOOLS = {"varnishd": "varnish"}

SIZE = 4000
KEEPALIVE = 128         # idle connections to the origin each proxy keeps

# (key, title, path, the servers that take it)
CASES = (
    ("hit-4000b", "4000 B cache hit", "/cached/size/%d" % SIZE,
     ("corral", "nginx", "varnish")),
    ("pass-4000b", "4000 B uncached", "/pass/size/%d" % SIZE,
     ("corral", "nginx")),
)


def _get(port, path):
    """(status, headers, body) of one GET over a new connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)     # Host: 127.0.0.1:port, as wrk's
        resp = conn.getresponse()
        return resp.status, resp, resp.read()
    finally:
        conn.close()


def _is_hit(srv, resp):
    """Whether a response says it came from the proxy's cache."""
    if srv.name == "varnish":
        return len((resp.getheader("X-Varnish") or "").split()) == 2
    return (resp.getheader("X-Cache") or "").upper() == "HIT"


def _check(srv, origin, key, path):
    """The page twice: the right bytes each time, and for the cached case
    a hit the second time that the origin did not see.  It warms the
    cache.  Returns what is wrong, or None."""
    want = body(SIZE)
    try:
        before = origin.settle()
        for _ in range(2):
            status, resp, got = _get(srv.port, path)
            if status != 200 or got != want:
                return "GET %s: status %d, %d of %d bytes%s" % (
                    path, status, len(got), len(want),
                    "" if got == want[:len(got)] else " (wrong bytes)")
        seen = origin.hits() - before
        if key.startswith("hit") and (seen != 1 or not _is_hit(srv, resp)):
            return "GET %s twice: the origin saw %d requests, the second " \
                "was %s" % (path, seen, "a hit" if _is_hit(srv, resp)
                            else "not a hit")
        if key.startswith("pass") and seen < 2:
            return "GET %s twice: the origin saw %d requests" % (path,
                                                                   seen)
    except (OSError, http.client.HTTPException, ValueError) as e:
        return "GET %s: %s" % (path, e)
    return None


def docroot(ctx, suite):
    """An empty folder: corral and nginx want a root."""
    root = os.path.join(ctx.workdir, suite, "htdocs")
    os.makedirs(root, exist_ok=True)
    return root


def run(ctx):
    if "wrk" not in ctx.tools:
        ctx.note("%s: wrk not found, skipped" % NAME)
        return []
    add_varnish(ctx, NAME)
    try:
        origin = start_origin(ctx, NAME)
    except ServerFailed as e:
        ctx.failures.append("%s: %s" % (NAME, e))
        return []
    running = start_all(ctx, NAME, {"ORIGIN_PORT": origin.port,
                                    "ROOT": docroot(ctx, NAME)})
    out = []
    try:
        for key, title, path, names in CASES:
            case = Case(NAME, key, title, "wrk, 100 connections%s; "
                        "origin and wrk on CPU %s, the proxy alone on CPU "
                        "%s" % ("" if key.startswith("hit") else
                                ", every request to the origin over up to "
                                "%d kept-alive connections" % KEEPALIVE,
                                ctx.load_cpus or "any",
                                ctx.server_cpus or "any"))
            for srv in [s for s in running if s.name in names]:
                why = _check(srv, origin, key, path)
                if why:
                    ctx.fail_server(NAME, srv, "%s: %s" % (title, why))
                    continue
                before = origin.settle()
                r = measure(ctx, srv, Wrk("wrk"), path)
                seen = origin.settle() - before
                if key.startswith("hit") and seen:
                    r.note = (r.note + "; " if r.note else "") + \
                        "the origin saw %d requests" % seen
                case.results.append(r)
                ctx.progress(case, r)
                if srv.name != "corral":
                    continue
                if r.failed or (key.startswith("hit") and seen):
                    ctx.failures.append("%s %s: corral: %s" % (
                        NAME, title, r.note or "%d errors, %d requests" % (
                            r.errors, r.requests)))
                else:
                    ctx.passed += 1
                    if key.startswith("hit"):
                        running += _floor(ctx, case, srv, path)
                    else:
                        running += _relay(ctx, case, origin, key, path)
            out.append(case)
        return out
    finally:
        stop_all(ctx, running + [origin])


def _floor(ctx, case, corral, path):
    """The floor's row for a cache hit: corral's hit replayed."""
    if ctx.smoke:
        return []
    floor = start_floor(ctx, NAME, corral, [path])
    if floor is None:
        return []
    r = measure(ctx, floor, Wrk("wrk"), path)
    case.results.append(r)
    ctx.progress(case, r)
    return [floor]


def _relay(ctx, case, origin, key, path):
    """The floor's row for uncached proxying: bench/relay, which only
    moves the bytes between the client and kept-alive origin
    connections."""
    if ctx.smoke:
        return []
    relay = start_relay(ctx, NAME, origin.port, KEEPALIVE)
    if relay is None:
        return []
    why = _check(relay, origin, key, path)
    if why:
        ctx.note("%s: floor: %s" % (NAME, why))
        return [relay]
    r = measure(ctx, relay, Wrk("wrk"), path)
    case.results.append(r)
    ctx.progress(case, r)
    return [relay]
