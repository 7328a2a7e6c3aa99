"""Suite gzip: the seed's nginx + gzip workload.  A 52 KB HTML page asked
for with Accept-Encoding: gzip by ab -k (HTTP/1.0 keep-alive), as the
post did:

- nginx at gzip_comp_level 9, compressing every response (the post's
  config).  Over HTTP/1.0 nginx cannot keep a gzipped response's
  connection alive (it streams it without a length), so ab's notes say
  how many requests were kept alive.
- nginx's own fix from the post: a proxy_cache in front of that gzip
  server, with Accept-Encoding in the cache key, so each encoding is
  compressed once and then served from the cache (both servers in one
  nginx, so its CPU counts both).
- corral's copy compressed once into the shared store (gzip_comp_level
  9 as well, since it is paid once).

The target: corral at most the CPU per request of nginx's fix.
"""

import gzip
import http.client
import os
import random

from load import Ab, Case, measure
from common import free_port
from servers import start_all, stop_all

NAME = "gzip"

PAGE = "page52k.html"
CONNECTIONS = 100

WORDS = ("catalog", "item", "stock", "price", "delivery", "order",
         "review", "customer", "shipping", "garden", "kitchen", "office",
         "light", "table", "chair", "lamp", "blue", "green", "red", "small",
         "large", "new", "sale", "today", "free", "returns", "warranty")


def page_bytes(size=52 * 1024):
    """A page of HTML that compresses like real ones: markup repeated with
    varied text, about size bytes."""
    rnd = random.Random(52)
    out = [b"<!doctype html>\n<html><head><meta charset=utf-8><title>"
           b"Catalog</title>\n<link rel=stylesheet href=/s.css></head>\n"
           b"<body>\n<ul class=\"catalog\">\n"]
    n = 0
    while sum(map(len, out)) < size - 40:
        words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 9)))
        out.append(b'<li class="item" id="i%d"><a href="/catalog/%d">%s</a>'
                   b' <span class="price">%d.%02d</span> <em>%d in stock'
                   b'</em></li>\n' % (n, rnd.randint(1000, 99999),
                                      words.encode(), rnd.randint(1, 500),
                                      rnd.randint(0, 99), rnd.randint(0, 40)))
        n += 1
    out.append(b"</ul>\n</body></html>\n")
    return b"".join(out)


def _docroot(ctx, data):
    root = os.path.join(ctx.workdir, NAME, "htdocs")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, PAGE), "wb") as f:
        f.write(data)
    return root


def _check(srv, data):
    """The page twice, gzipped, with the right bytes (the second time from
    the caches that keep it)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        for _ in range(2):
            conn.request("GET", "/" + PAGE, headers={
                "Accept-Encoding": "gzip"})
            resp = conn.getresponse()
            got = resp.read()
            if resp.status != 200 or \
                    resp.getheader("Content-Encoding") != "gzip":
                return "GET /%s: status %d, Content-Encoding %s" % (
                    PAGE, resp.status, resp.getheader("Content-Encoding"))
            if gzip.decompress(got) != data:
                return "GET /%s: the page gunzipped is not the file" % PAGE
    except (OSError, http.client.HTTPException, ValueError) as e:
        return "GET /%s: %s" % (PAGE, e)
    finally:
        conn.close()
    return None


def run(ctx):
    if "ab" not in ctx.tools:
        ctx.note("%s: ab not found, skipped" % NAME)
        return []
    data = page_bytes()
    servers = []
    for srv in ctx.servers:
        if srv.name == "corral":
            servers.append(srv)
        elif srv.name == "nginx":
            servers += [srv, srv.variant("nginx + proxy_cache",
                                         "nginx-cache")]
    running = start_all(ctx, NAME, {"ROOT": _docroot(ctx, data),
                                    "BACK_PORT": free_port()},
                        servers=servers)
    case = Case(NAME, "page52k-gzip", "%d B HTML, gzip, ab -k" % len(data),
                "ab -k -H 'Accept-Encoding: gzip' (HTTP/1.0 keep-alive), "
                "%d connections; corral sends its copy compressed once "
                "(level 9), nginx compresses each response (level 9), "
                "nginx + proxy_cache keeps one compressed copy per "
                "Accept-Encoding" % CONNECTIONS)
    load = Ab("ab -k", connections=CONNECTIONS,
              headers=("Accept-Encoding: gzip",))
    try:
        for srv in running:
            why = _check(srv, data)
            if why:
                ctx.fail_server(NAME, srv, why)
                continue
            r = measure(ctx, srv, load, "/" + PAGE)
            case.results.append(r)
            ctx.progress(case, r)
            if srv.name == "corral":
                ctx.judge(NAME, case.title, r)
        return [case]
    finally:
        stop_all(ctx, running)
