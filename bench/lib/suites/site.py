"""Suite site: what a site configuration costs per request, corral against
nginx on the same site: a regex location among prefix ones (with expires
and add_header), a try_files fallback, a return redirect, and a text page
sent compressed (corral's brotli copy made once; nginx gzips each
response, having no brotli of its own)."""

import http.client
import os

from common import say
from load import Case, Wrk, measure
from servers import start_all, stop_all

NAME = "site"

PAGE_BYTES = b"".join(
    b'<li class="item"><a href="/catalog/%d">Item %d</a> <span>%d in '
    b'stock</span></li>\n' % (i, i, i * 7 % 23) for i in range(110))

# (key, title, path, request headers, what the answer must be)
CASES = (
    ("regex", "regex location of 5 after 10 prefixes, expires, add_header",
     "/img/a/logo.png", (), (200, "Cache-Control", "max-age=2592000")),
    ("try-files", "try_files falling back to /app/index.html",
     "/app/some/route", (), (200, None, None)),
    ("return", "return 301 with $host$request_uri", "/old/page?x=1", (),
     (301, "Location", "https://localhost/old/page?x=1")),
    ("page-br", "%d B HTML, Accept-Encoding: br, gzip" % len(PAGE_BYTES),
     "/page.html", ("Accept-Encoding: br, gzip",), (200, None, None)),
)

SMOKE = ("regex",)


def _docroot(ctx):
    root = os.path.join(ctx.workdir, NAME, "htdocs")
    for d in ("img/a", "app", "p0", "old"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    files = {"img/a/logo.png": b"\x89PNG" + b"x" * 2000,
             "app/index.html": b"<!doctype html><title>app</title>\n",
             "index.html": b"<!doctype html><title>bench</title>\n",
             "page.html": PAGE_BYTES}
    for name, data in files.items():
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)
    return root


def _check(srv, path, headers, want):
    """One request: the status and header the case expects."""
    status, name, value = want
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    try:
        h = {"Host": "localhost"}
        for line in headers:
            k, v = line.split(": ", 1)
            h[k] = v
        conn.request("GET", path, headers=h)
        resp = conn.getresponse()
        resp.read()
        if resp.status != status:
            return "GET %s: status %d, want %d" % (path, resp.status, status)
        if name and resp.getheader(name) != value:
            return "GET %s: %s %r, want %r" % (path, name,
                                              resp.getheader(name), value)
    except (OSError, http.client.HTTPException) as e:
        return "GET %s: %s" % (path, e)
    finally:
        conn.close()
    return None


def run(ctx):
    if "wrk" not in ctx.tools:
        ctx.note("%s: wrk not found, skipped" % NAME)
        return []
    cases = [c for c in CASES if not ctx.smoke or c[0] in SMOKE]
    root = _docroot(ctx)
    servers = start_all(ctx, NAME, {"ROOT": root})
    try:
        out = []
        for key, title, path, headers, want in cases:
            load = Wrk("wrk, 100 connections" + "".join(
                ", " + h for h in headers), headers=headers)
            case = Case(NAME, key, title, load.label)
            for srv in servers:
                why = _check(srv, path, headers, want)
                if why:
                    ctx.fail_server(NAME, srv, why)
                    continue
                r = measure(ctx, srv, load, path)
                case.results.append(r)
                ctx.progress(case, r)
                if srv.name == "corral":
                    if r.failed:
                        ctx.failures.append("%s %s: corral: %s" % (
                            NAME, title, r.note or "%d errors" % r.errors))
                    else:
                        ctx.passed += 1
            out.append(case)
        if not cases:
            say("%s: nothing to run" % NAME)
        return out
    finally:
        stop_all(ctx, servers)
