"""Suite static: files of 0 B to 1 MB from disk, over keep-alive,
pipelined, HTTP/1.0 keep-alive (ab -k) and one connection per request;
then the seeds' own workloads: an empty null.html with wrk -t2 -c100 and
with 500 connections (G-WAN vs nginx), and a 0.6 KB page with ab at
concurrency 10 to 70 (Apache 2.4's event MPM vs nginx)."""

import gzip
import http.client
import os
import random

from common import say
from load import Ab, Case, Wrk, measure
from servers import start_all, start_floor, stop_all

NAME = "static"

# (size label, file name, bytes)
FILES = (
    ("0 B", "0b.bin", 0),
    ("100 B", "100b.bin", 100),
    ("4 KB", "4k.bin", 4 * 1024),
    ("52 KB", "52k.bin", 52 * 1024),
    ("1 MB", "1m.bin", 1024 * 1024),
)

PIPELINE = 16

# A page of HTML that compresses like real ones, for the gzip case.
PAGE = "page.html"
PAGE_BYTES = b"".join(
    b'<li class="item"><a href="/catalog/%d">Item %d</a> <span>%d in '
    b'stock</span></li>\n' % (i, i, i * 7 % 23) for i in range(110))

# The large-file cases also run corral with cache.file_copy_max = 1m, which
# copies those files from the store instead of sending them with
# sendfile() from the file (the default): the two paths side by side.
COPY_ROW = "corral (store copy)"
SENDFILE_CASES = ("52k-ka", "1m-ka")

# Servers set up to gzip in bench/conf (the others are left out there).
GZIP_SERVERS = ("corral", "nginx")

# The seeds' files: G-WAN's empty page and a 0.6 KB page of HTML.
NULL = "null.html"
PAGE600 = "page600.html"
PAGE600_BYTES = (b"<!doctype html>\n<html><head><meta charset=utf-8>"
                 b"<title>corral</title></head>\n<body>\n<h1>It works"
                 b"</h1>\n<ul>\n" + b"".join(
                     b"<li><a href=\"/doc/%d\">Section %d</a></li>\n" % (
                         i, i) for i in range(12)) + b"</ul>\n</body>"
                 b"</html>\n")

# ab's concurrency levels for the 0.6 KB page (the seed went 10 to 70).
AB_LEVELS = (10, 40, 70)


def _cases():
    """(key, title, file, load), in the order they run."""
    out = []
    for label, name, size in FILES:
        tag = name.split(".")[0]
        out.append(("%s-ka" % tag, "%s, keep-alive" % label, name,
                    Wrk("wrk, 100 connections")))
        if size <= 100:
            out.append(("%s-pipe%d" % (tag, PIPELINE),
                        "%s, %d pipelined" % (label, PIPELINE), name,
                        Wrk("wrk, 100 connections, %d requests in "
                            "flight on each" % PIPELINE,
                            script="pipeline.lua",
                            env={"BENCH_PIPELINE": str(PIPELINE)})))
        if size == 100:
            out.append(("100b-ab-k", "100 B, ab -k (HTTP/1.0 keep-alive)",
                        name, Ab("ab -k, 100 connections")))
            out.append(("100b-close", "100 B, connection per request",
                        name, Wrk("wrk, 100 connections, Connection: "
                                  "close", headers=("Connection: close",))))
    out.append(("page-gzip", "%d B HTML, gzip" % len(PAGE_BYTES), PAGE,
                Wrk("wrk, 100 connections, Accept-Encoding: gzip; corral "
                    "compresses once (level 6), nginx each response "
                    "(level 1)", headers=("Accept-Encoding: gzip",))))
    out.append(("null-t2c100", "null.html (0 B), wrk -t2 -c100", NULL,
                Wrk("wrk -t2, 100 connections, as the G-WAN vs nginx post",
                    threads=2)))
    out.append(("null-c500", "null.html (0 B), 500 connections", NULL,
                Wrk("wrk, 500 keep-alive connections, as the post's "
                    "weighttp run", connections=500)))
    for n in AB_LEVELS:
        out.append(("page600-ab-c%d" % n, "%d B page, ab -c %d" % (
            len(PAGE600_BYTES), n), PAGE600,
            Ab("ab -c %d, a connection per request (HTTP/1.0), as the "
               "Apache 2.4 event MPM vs nginx post" % n, keepalive=False,
               connections=n)))
    return out


# The cases of --smoke: a second each, enough to see that nothing rotted.
SMOKE = ("100b-ka", "100b-pipe16")


def _docroot(ctx):
    root = os.path.join(ctx.workdir, NAME, "htdocs")
    os.makedirs(root, exist_ok=True)
    body = {}
    for _, name, size in FILES:
        data = random.Random(size).randbytes(size)
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)
        body[name] = data
    with open(os.path.join(root, "index.html"), "w") as f:
        f.write("<!doctype html><title>bench</title>\n")
    for name, data in ((PAGE, PAGE_BYTES), (NULL, b""),
                       (PAGE600, PAGE600_BYTES)):
        with open(os.path.join(root, name), "wb") as f:
            f.write(data)
        body[name] = data
    return root, body


def _gzips(srv):
    """Whether srv sends the page gzipped to a client that takes it."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    try:
        conn.request("GET", "/" + PAGE, headers={
            "Host": "localhost", "Accept-Encoding": "gzip"})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status == 200 and \
            resp.getheader("Content-Encoding") == "gzip" and \
            gzip.decompress(data) == PAGE_BYTES
    except (OSError, http.client.HTTPException, ValueError):
        return False
    finally:
        conn.close()


def _check(srv, body):
    """Each file once over one connection: the exact bytes, status 200.
    It also warms the servers' file caches."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    try:
        for name, data in body.items():
            conn.request("GET", "/" + name, headers={"Host": "localhost"})
            resp = conn.getresponse()
            got = resp.read()
            if resp.status != 200 or got != data:
                return "GET /%s: status %d, %d of %d bytes%s" % (
                    name, resp.status, len(got), len(data),
                    "" if got == data[:len(got)] else " (wrong bytes)")
    except (OSError, http.client.HTTPException) as e:
        return "GET: %s" % e
    finally:
        conn.close()
    return None


def run(ctx):
    cases = [c for c in _cases() if not ctx.smoke or c[0] in SMOKE]
    tools = {c[3].tool for c in cases}
    for tool in sorted(tools):
        if tool not in ctx.tools:
            ctx.note("%s: %s not found, its cases are skipped"
                     % (NAME, tool))
    cases = [c for c in cases if c[3].tool in ctx.tools]

    root, body = _docroot(ctx)
    servers = list(ctx.servers)
    if not ctx.smoke and servers and servers[0].name == "corral":
        servers.insert(1, servers[0].variant(COPY_ROW, "corralcopy"))
    servers = start_all(ctx, NAME, {"ROOT": root}, servers)
    floor = None
    try:
        for srv in list(servers):
            why = _check(srv, body)
            if why:
                ctx.fail_server(NAME, srv, "does not serve the files: " +
                                why)
                stop_all(ctx, [srv])
                servers.remove(srv)
            elif srv.name.startswith("corral"):
                ctx.passed += 1
        floor = _floor(ctx, servers, body)
        out = []
        for key, title, path, load in cases:
            case = Case(NAME, key, title, load.label)
            order = list(servers)
            if floor and isinstance(load, Wrk) and not load.headers:
                order.insert(1, floor)      # right after corral
            if key == "page-gzip":
                order = [s for s in order if s.name in GZIP_SERVERS]
            if key not in SENDFILE_CASES:
                order = [s for s in order if s.name != COPY_ROW]
            for srv in order:
                if key == "page-gzip" and not _gzips(srv):
                    ctx.fail_server(NAME, srv, "%s: the page did not come "
                                    "gzipped" % title)
                    continue
                r = measure(ctx, srv, load, "/" + path)
                case.results.append(r)
                ctx.progress(case, r)
                if srv.name == "corral":
                    ctx.judge(NAME, title, r)
            out.append(case)
        if not cases:
            say("%s: nothing to run" % NAME)
        return out
    finally:
        stop_all(ctx, servers + ([floor] if floor else []))


def _floor(ctx, servers, body):
    """The floor, replaying corral's answers for the files; it fits the
    keep-alive cases (it cannot close, nor speak HTTP/1.0 keep-alive).
    It sends 52 KB and 1 MB with sendfile, as nginx does."""
    corral = [s for s in servers if s.name == "corral"]
    if ctx.smoke or not corral:
        return None
    return start_floor(ctx, NAME, corral[0], ["/" + name for name in body])
