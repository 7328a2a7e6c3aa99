"""Suite tls: corral against nginx (ssl_session_cache shared:SSL:10m) with
the same certificate, ECDSA P-256 and RSA 2048: CPU per full handshake,
per resumed handshake (session ID, ticket), and CPU per request for 100 B
and 1 MB over kept-alive TLS connections, with kernel TLS on and off.

Handshakes come from `openssl s_time` (-new, -reuse), which prints one
character per connection, 'r' when it resumed; requests from h2load --h1.

The floor rows are bench/tls_floor with the same certificate, kernel TLS
and tickets: corral's 100 B response for every request (one SSL_read and
one SSL_write each), handshakes with OpenSSL's own session cache and
ticket keys.  The 1 MB cases have none (corral sends those with sendfile,
which the floor does not).
"""

import errno
import os
import random
import re
import socket
import subprocess
import time

import procstat
from common import pinned, say
from load import Case, Result
from servers import start_all, start_tls_floor, stop_all

NAME = "tls"

# Tools beyond the harness's, with their Debian packages.
TOOLS = {"openssl": "openssl", "h2load": "nghttp2-client"}

FILES = (("100 B", "100b.bin", 100), ("1 MB", "1m.bin", 1 << 20))
CONNECTIONS = 10        # h2load connections, all kept alive

# (key, title, cert kind, server variant, client)
#   variant: tickets on/off, ktls on/off
#   client:  ("s_time", args) or ("h2load", path)
CASES = (
    ("hs-full-ec", "full handshake, ECDSA P-256", "ec", ("on", "on"),
     ("s_time", ["-new"])),
    ("hs-full-rsa", "full handshake, RSA 2048", "rsa", ("on", "on"),
     ("s_time", ["-new"])),
    ("hs-ticket-13", "resumed, TLS 1.3 ticket", "ec", ("on", "on"),
     ("s_time", ["-reuse", "-tls1_3"])),
    ("hs-ticket-12", "resumed, TLS 1.2 ticket", "ec", ("on", "on"),
     ("s_time", ["-reuse", "-tls1_2"])),
    ("hs-sessid-12", "resumed, TLS 1.2 session ID", "ec", ("off", "on"),
     ("s_time", ["-reuse", "-tls1_2"])),
    ("req-100b-ktls", "100 B keep-alive, kTLS on", "ec", ("on", "on"),
     ("h2load", "/100b.bin")),
    ("req-1m-ktls", "1 MB keep-alive, kTLS on", "ec", ("on", "on"),
     ("h2load", "/1m.bin")),
    ("req-100b", "100 B keep-alive, kTLS off", "ec", ("on", "off"),
     ("h2load", "/100b.bin")),
    ("req-1m", "1 MB keep-alive, kTLS off", "ec", ("on", "off"),
     ("h2load", "/1m.bin")),
)

SMOKE = ("hs-full-ec", "hs-ticket-13", "hs-sessid-12", "req-100b")

# Cases without a floor row.
NO_FLOOR = ("req-1m-ktls", "req-1m")


def _pki(ctx):
    """A self-signed certificate of each kind: {kind: (cert, key)}."""
    d = os.path.join(ctx.workdir, NAME, "pki")
    os.makedirs(d, exist_ok=True)
    out = {}
    for kind, alg in (("ec", ["-newkey", "ec", "-pkeyopt",
                              "ec_paramgen_curve:P-256"]),
                      ("rsa", ["-newkey", "rsa:2048"])):
        crt, key = os.path.join(d, kind + ".crt"), os.path.join(d, kind +
                                                                ".key")
        subprocess.run([ctx.tools["openssl"], "req", "-x509", "-nodes",
                        "-days", "2", "-subj", "/CN=localhost", "-keyout",
                        key, "-out", crt] + alg, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.chmod(key, 0o644)    # nginx workers read it as another user
        out[kind] = (crt, key)
    return out


def _docroot(ctx):
    root = os.path.join(ctx.workdir, NAME, "htdocs")
    os.makedirs(root, exist_ok=True)
    for _, name, size in FILES:
        with open(os.path.join(root, name), "wb") as f:
            f.write(random.Random(size).randbytes(size))
    return root


def _s_time(ctx, port, args):
    # -www: each connection fetches a file, so TLS 1.3 tickets (sent
    # after the handshake) reach the client as they would a browser.
    return [ctx.tools["openssl"], "s_time", "-connect",
            "127.0.0.1:%d" % port, "-time", str(ctx.duration), "-www",
            "/100b.bin"] + args


def _parse_s_time(out):
    """(handshakes, seconds, errors, resumed share, note); s_time prints
    one character per connection, 'r' for a resumed one."""
    m = re.findall(r"(\d+) connections in (\d+) real seconds", out)
    if not m:
        return 0, 0.0, 1, None, "no s_time summary"
    marks = [line for line in out.splitlines()
             if line and set(line) <= set("r*")]
    line = marks[-1] if marks else ""
    share = line.count("r") / len(line) if line else None
    return int(m[-1][0]), float(m[-1][1]), 0, share, ""


def _h2load(ctx, port, path):
    return [ctx.tools["h2load"], "--h1", "-c", str(CONNECTIONS), "-t", "1",
            "-D", str(ctx.duration), "https://127.0.0.1:%d%s" % (port, path)]


def _parse_h2load(out):
    m = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) "
                  r"succeeded, (\d+) failed, (\d+) errored", out)
    t = re.search(r"finished in ([\d.]+)(m?s)", out)
    if not m or not t:
        return 0, 0.0, 1, None, "no h2load summary"
    secs = float(t.group(1)) / (1000 if t.group(2) == "ms" else 1)
    return int(m.group(2)), secs, int(m.group(3)) + int(m.group(4)), \
        None, ""


def _measure(ctx, srv, client):
    kind, arg = client
    if kind == "s_time":
        cmd, parse = _s_time(ctx, srv.port, arg), _parse_s_time
    else:
        cmd, parse = _h2load(ctx, srv.port, arg), _parse_h2load
    before = procstat.cpu_ticks(srv.pid)
    t0 = time.monotonic()
    try:
        out = subprocess.run(pinned(ctx.load_cpus, cmd),
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             errors="replace", timeout=ctx.duration + 60)
        output = out.stdout
    except subprocess.TimeoutExpired:
        output = ""
    after = procstat.cpu_ticks(srv.pid)
    n, secs, errors, share, note = parse(output)
    if share is not None:
        note = "%.1f%% resumed" % (100 * share)
        if "-reuse" in arg and share < 0.99:
            errors = max(errors, 1)
            note += " (under 99%)"
    return Result(srv.name, n, secs or time.monotonic() - t0, errors,
                  note=note, cpu_ticks=max(0, after - before))


def kernel_tls():
    """None when this kernel can take TLS keys (the tls ULP attaches to a
    connected TCP socket), else why not.  Without it every server's "kTLS
    on" case runs in user space exactly like its "off" case."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    c = socket.create_connection(ls.getsockname())
    try:
        c.setsockopt(socket.IPPROTO_TCP, 31, b"tls")     # TCP_ULP
        return None
    except OSError as e:
        return "TCP_ULP tls: %s" % (errno.errorcode.get(e.errno, e.errno))
    finally:
        c.close()
        ls.close()


def run(ctx):
    missing = [t for t in TOOLS if t not in ctx.tools]
    if missing:
        ctx.note("%s: %s not found, the suite is skipped" %
                 (NAME, ", ".join(missing)))
        return []
    cases = [c for c in CASES if not ctx.smoke or c[0] in SMOKE]
    why = kernel_tls()
    if why:
        ctx.note("%s: this kernel has no kernel TLS (%s): the kTLS on cases "
                 "ran in user space for every server, as the off ones did"
                 % (NAME, why))
    pki, root = _pki(ctx), _docroot(ctx)
    out = []
    # Cases that share a certificate and variant share a server start.
    for group in sorted({(c[2], c[3]) for c in cases}):
        kind, (tickets, ktls) = group
        extra = {"ROOT": root, "CERT": pki[kind][0], "KEY": pki[kind][1],
                 "TICKETS": tickets, "KTLS": ktls,
                 "KTLS_LINE": "ssl_conf_command Options KTLS;"
                 if ktls == "on" else ""}
        servers = start_all(ctx, NAME, extra)
        floor = _floor(ctx, servers, pki[kind], tickets, ktls)
        try:
            for key, title, k, v, client in cases:
                if (k, v) != group:
                    continue
                case = Case(NAME, key, title, client[0])
                if why and ktls == "on" and key.startswith("req-"):
                    case.caveat = "no kernel TLS here: ran in user space"
                    case.title += " (%s)" % case.caveat
                order = list(servers)
                if floor and key not in NO_FLOOR:
                    order.insert(1, floor)      # right after corral
                for srv in order:
                    r = _measure(ctx, srv, client)
                    case.results.append(r)
                    ctx.progress(case, r)
                    if srv.name == "corral":
                        if r.failed:
                            ctx.failures.append("%s %s: corral: %s" % (
                                NAME, title, r.note or "%d errors" %
                                r.errors))
                        else:
                            ctx.passed += 1
                out.append(case)
        finally:
            stop_all(ctx, servers + ([floor] if floor else []))
    if not out:
        say("%s: nothing to run" % NAME)
    return out


def _floor(ctx, servers, pki, tickets, ktls):
    """The floor for a group of cases: bench/tls_floor with corral's 100 B
    response, the group's certificate, tickets and kernel TLS."""
    corral = [s for s in servers if s.name == "corral"]
    if ctx.smoke or not corral:
        return None
    return start_tls_floor(ctx, NAME, corral[0], "/100b.bin", pki[0],
                           pki[1], ktls == "on", tickets == "on")
