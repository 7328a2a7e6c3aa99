"""The servers under test: corral and its peers, each started from its own
config in a temp folder, on a free loopback port, as the current user.

A suite starts them with start(suite, docroot) and stops them with stop().
The config comes from bench/conf/SUITE-NAME.conf.in; the values every
template may use are listed in Server.values().
"""

import http.client
import os
import pwd
import re
import resource
import signal
import socket
import ssl
import subprocess
import sys
import time

from common import (BENCH_DIR, BenchError, free_port, first_line, pinned,
                    render, wait_port, which)


class ServerFailed(BenchError):
    """The server did not start, or did not serve what it should."""


def _user():
    return pwd.getpwuid(os.geteuid()).pw_name


def _tail(path, n=5):
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in lines[-n:] if line.strip())


class Server:
    name = ""
    program = ""           # what which() looks for

    def __init__(self, ctx, path):
        self.ctx = ctx
        self.path = path
        self.proc = None
        self.port = None
        self.dir = None
        self._log = None
        self.conf = self.name   # the NAME of bench/conf/SUITE-NAME.conf.in

    def variant(self, name, conf):
        """A copy of this server under another row name, started from
        bench/conf/SUITE-CONF.conf.in (a second config of one program)."""
        other = type(self)(self.ctx, self.path)
        other.name = name
        other.conf = conf
        return other

    @classmethod
    def find(cls, ctx):
        path = which(cls.program)
        return cls(ctx, path) if path else None

    def version(self):
        return first_line([self.path, "-v"])

    def argv(self, conf):
        raise NotImplementedError

    def values(self):
        """Placeholders that the templates can use, beyond the suite's."""
        return {
            "DIR": self.dir,
            "PORT": self.port,
            "WORKERS": self.ctx.workers,
            "USER": _user(),
        }

    def start(self, suite, extra, pin=True):
        """Writes the config and starts the server (on the server's CPUs,
        or on any with pin=False); ServerFailed if not up."""
        self.prepare(suite)
        values = self.values()
        values.update(extra)
        template = os.path.join(BENCH_DIR, "conf",
                                "%s-%s.conf.in" % (suite, self.conf))
        conf = os.path.join(self.dir, self.conf + ".conf")
        with open(conf, "w") as f:
            f.write(render(template, values))
        self.launch(self.argv(conf), self.ctx.server_cpus if pin else None)

    def prepare(self, suite):
        """Its folder for suite, and a free port."""
        self.dir = os.path.join(self.ctx.workdir, suite, self.conf)
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()

    def launch(self, argv, cpus, label="", timeout=10.0):
        """Runs argv pinned to cpus in self.dir, its output in output.log;
        ServerFailed (label, why, the log's tail) if it does not listen on
        self.port within timeout seconds."""
        out = os.path.join(self.dir, "output.log")
        self._log = open(out, "w")
        self.proc = subprocess.Popen(pinned(cpus, argv),
                                     stdin=subprocess.DEVNULL,
                                     stdout=self._log,
                                     stderr=subprocess.STDOUT,
                                     cwd=self.dir, start_new_session=True)
        if not wait_port(self.port, self.proc, timeout):
            code = self.proc.poll()
            self.stop()
            why = "exited with %s" % code if code is not None \
                else "not listening after %g s" % timeout
            tail = _tail(out) or _tail(os.path.join(self.dir, "error.log"))
            raise ServerFailed(label + why + (": " + tail if tail else ""))

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        """SIGTERM, then SIGKILL to whatever is left of its session."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self._log.close()
        self.proc = None


class Corral(Server):
    name = "corral"

    @classmethod
    def find(cls, ctx):
        return cls(ctx, ctx.corral_bin) if ctx.corral_bin else None

    def version(self):
        return self.ctx.corral_version

    def argv(self, conf):
        return [self.path, "-f", "-c", conf]

    def values(self):
        v = super().values()
        v["MIME_TYPES"] = self.ctx.mime_types
        return v


class Nginx(Server):
    name = "nginx"
    program = "nginx"

    def version(self):
        return first_line([self.path, "-v"]).replace("nginx version: ", "")

    def argv(self, conf):
        return [self.path, "-p", self.dir + "/", "-c", conf,
                "-e", os.path.join(self.dir, "error.log")]

    def _temp_paths(self):
        """*_temp_path lines for the modules this nginx was built with,
        so that it never touches /var/lib/nginx."""
        out = subprocess.run([self.path, "-V"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True).stdout
        lines = []
        for mod in re.findall(r"--http-([a-z-]+)-temp-path", out):
            key = mod.replace("-", "_")
            lines.append("%s_temp_path %s;" % (
                key, os.path.join(self.dir, "tmp-" + key)))
        return "\n    ".join(lines)

    def values(self):
        v = super().values()
        root = os.geteuid() == 0
        v["USER_LINE"] = "user %s;" % _user() if root else ""
        v["TEMP_PATHS"] = self._temp_paths()
        return v


class Lighttpd(Server):
    name = "lighttpd"
    program = "lighttpd"

    def version(self):
        return first_line([self.path, "-v"]).split(" ")[0]

    def argv(self, conf):
        return [self.path, "-D", "-f", conf]

    def values(self):
        v = super().values()
        # 0 is one process without a watcher, like worker_processes 1.
        n = self.ctx.workers
        v["MAX_WORKER"] = 0 if n == 1 else n
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if hard == resource.RLIM_INFINITY:
            hard = 16384
        v["MAX_FDS"] = min(16384, hard)
        return v


class H2o(Server):
    name = "h2o"
    program = "h2o"

    def version(self):
        return first_line([self.path, "-v"]).replace(" version ", "/")

    def argv(self, conf):
        return [self.path, "-m", "worker", "-c", conf]

    def values(self):
        v = super().values()
        # As root, h2o would switch to nobody, who cannot read our files.
        root = os.geteuid() == 0
        v["USER_LINE"] = "user: %s" % _user() if root else ""
        return v


class Apache(Server):
    """Apache httpd 2.4 with the event MPM, from its own config (only the
    modules it needs, loaded from Debian's folder).  As root it serves as
    nobody, so the folders above the document root are opened to it."""

    name = "apache"
    program = "apache2"
    MODULES = "/usr/lib/apache2/modules"

    def version(self):
        m = re.search(r"Apache/(\S+)", first_line([self.path, "-v"]))
        return "apache/" + m.group(1) if m else "apache"

    def argv(self, conf):
        return [self.path, "-f", conf, "-D", "FOREGROUND"]

    def values(self):
        v = super().values()
        v["MODULES"] = self.MODULES
        v["MAX_REQUEST_WORKERS"] = 512 * self.ctx.workers
        v["USER_LINE"] = ""
        if os.geteuid() == 0:
            v["USER_LINE"] = "User nobody\nGroup nogroup"
            open_folders(self.ctx.workdir, self.dir)
        return v


def open_folders(top, below):
    """Lets another user (a server's workers as nobody) into the folders
    from top down to below."""
    path = os.path.abspath(below)
    top = os.path.abspath(top)
    while True:
        os.chmod(path, 0o755)
        if path == top or len(path) <= len(top):
            return
        path = os.path.dirname(path)


class Varnish(Server):
    """Varnish Cache, for the proxy and stampede suites only (it serves no
    files).  Its config is a VCL file; -j none keeps its child process
    as the current user, and -n its state in the temp folder."""

    name = "varnish"
    program = "varnishd"

    def version(self):
        m = re.search(r"varnish-([\d.]+)", first_line([self.path, "-V"]))
        return "varnish/" + m.group(1) if m else "varnish"

    def argv(self, conf):
        return [self.path, "-F", "-j", "none",
                "-a", "127.0.0.1:%d" % self.port, "-f", conf,
                "-n", os.path.join(self.dir, "state"), "-s", "malloc,64m"]


class Origin(Server):
    """bench/lib/origin.py on a free loopback port, pinned to the load
    generator's CPUs (its CPU time is never counted)."""

    name = "origin"

    def version(self):
        return "bench/lib/origin.py (python3 asyncio)"

    def start(self, suite, extra=None):
        self.prepare(suite)
        self.launch([sys.executable, os.path.join(BENCH_DIR, "lib",
                                                  "origin.py"),
                     str(self.port)], self.ctx.load_cpus, "origin: ")

    def hits(self, path=""):
        """Requests the origin got so far, for path or in all."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                          timeout=5)
        try:
            conn.request("GET", "/hits" + path)
            return int(conn.getresponse().read())
        except (OSError, http.client.HTTPException, ValueError) as e:
            raise ServerFailed("origin: /hits%s: %s" % (path, e))
        finally:
            conn.close()

    def settle(self, path=""):
        """The request count (for path) once it holds still for 0.1 s (a
        proxy may still be passing on requests of a load that just
        ended)."""
        n = self.hits(path)
        for _ in range(50):
            time.sleep(0.1)
            m = self.hits(path)
            if m == n:
                break
            n = m
        return n


class PhpFpm(Server):
    """php-fpm for the fastcgi suite: one pool on a unix socket in its
    folder, pinned to the load generator's CPUs (its CPU time is counted
    apart from the web server's).  Both web servers talk to the same
    php-fpm, so they get the same pool settings.  As root the pool runs
    as nobody (php-fpm refuses root); the folder is then opened to it."""

    name = "php-fpm"

    def version(self):
        return first_line([self.path, "-v"]).split(" (")[0]

    def start(self, suite, pool):
        """pool: {directive: value} of the [bench] pool."""
        self.prepare(suite)
        self.socket = os.path.join(self.dir, "php.sock")
        lines = ["[global]", "pid = %s/php-fpm.pid" % self.dir,
                 "error_log = %s/error.log" % self.dir, "daemonize = no",
                 "[bench]", "listen = " + self.socket,
                 "listen.mode = 0666"]
        if os.geteuid() == 0:
            lines += ["user = nobody", "group = nogroup"]
            open_folders(self.ctx.workdir, self.dir)
        lines += ["%s = %s" % kv for kv in pool.items()]
        conf = os.path.join(self.dir, "php-fpm.conf")
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        out = os.path.join(self.dir, "output.log")
        self._log = open(out, "w")
        # -n: no php.ini, PHP's defaults, the same for every run.
        self.proc = subprocess.Popen(
            pinned(self.ctx.load_cpus, [self.path, "-F", "-n", "-y", conf]),
            stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, cwd=self.dir, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(self.socket)
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise ServerFailed("php-fpm: did not start: " + (
            _tail(out) or _tail(os.path.join(self.dir, "error.log"))))


def capture(port, path, tls=False):
    """The exact bytes of one response to GET path, as wrk asks for it;
    over TLS (no certificate check) with tls."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        s = raw
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            s = ctx.wrap_socket(raw, server_hostname="localhost")
        s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n"
                   % (path, port)).encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                raise ServerFailed("GET %s: closed in the header" % path)
            data += chunk
        head = data[:data.index(b"\r\n\r\n") + 4]
        m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        if not m:
            raise ServerFailed("GET %s: no Content-Length" % path)
        want = len(head) + int(m.group(1))
        while len(data) < want:
            chunk = s.recv(65536)
            if not chunk:
                raise ServerFailed("GET %s: closed in the body" % path)
            data += chunk
        return data[:want]


class Floor(Server):
    """bench/floor: corral's own responses, captured before the run,
    replayed by a loop that does one recv and one writev per batch of
    requests (one sendfile for a response of 32 KiB or more).  Its CPU per
    request is what the kernel costs for the same exchange: the least any
    server on this machine can spend."""

    name = "floor"

    def version(self):
        return "bench/floor"

    def start(self, suite, responses):
        """responses: {path: bytes}."""
        self.prepare(suite)
        args = []
        for i, (path, data) in enumerate(sorted(responses.items())):
            f = os.path.join(self.dir, "%d.http" % i)
            with open(f, "wb") as out:
                out.write(data)
            args.append("%s=%s" % (path, f))
        self.launch([self.path, str(self.port)] + args,
                    self.ctx.server_cpus, "floor: ")


class TlsFloor(Server):
    """bench/tls_floor, the TLS floor: corral's own response, captured
    before the run, sent for every request with one SSL_write after one
    SSL_read (or write/read on kernel TLS), and bare handshakes that
    resume from OpenSSL's own session cache and tickets.  Its row is named
    floor, like the other floors."""

    name = "floor"

    def __init__(self, ctx, path):
        super().__init__(ctx, path)
        self.conf = "tls_floor"

    def version(self):
        return "bench/tls_floor"

    def start(self, suite, cert, key, response, ktls, tickets):
        self.prepare(suite)
        f = os.path.join(self.dir, "response.http")
        with open(f, "wb") as out:
            out.write(response)
        self.launch([self.path] + (["-k"] if ktls else []) +
                    ([] if tickets else ["-T"]) +
                    [str(self.port), cert, key, f],
                    self.ctx.server_cpus, "tls_floor: ")


class Relay(Server):
    """bench/relay, the proxy floor: each request written unchanged to a
    kept-alive connection to the origin, the answer written back, nothing
    else.  Its row is named floor, like the static floor's."""

    name = "floor"

    def __init__(self, ctx, path):
        super().__init__(ctx, path)
        self.conf = "relay"

    def version(self):
        return "bench/relay"

    def start(self, suite, origin_port, keepalive):
        self.prepare(suite)
        self.launch([self.path, "-k", str(keepalive), str(self.port),
                     str(origin_port)], self.ctx.server_cpus, "relay: ")


class FcgiRelay(Server):
    """bench/fcgi_relay, the FastCGI floor: for each request one FastCGI
    request built at start (corral's default parameters) sent on a
    kept-alive php-fpm connection, the STDOUT records read to
    END_REQUEST, the answer written back with one writev.  Its row is
    named floor, like the other floors."""

    name = "floor"

    def __init__(self, ctx, path):
        super().__init__(ctx, path)
        self.conf = "fcgi_relay"

    def version(self):
        return "bench/fcgi_relay"

    def start(self, suite, socket_path, root, uri, keepalive):
        self.prepare(suite)
        self.launch([self.path, "-k", str(keepalive), str(self.port),
                     socket_path, root, uri], self.ctx.server_cpus,
                    "fcgi_relay: ")


def bench_tool(ctx, suite, name, what):
    """The path of bench/NAME (built with corral, or beside the binary
    under test), or None with a note that what is left out."""
    if ctx.build is not None:
        path = ctx.build("bench/" + name)
    else:
        path = os.path.join(os.path.dirname(ctx.corral_bin), "bench", name)
    if not os.access(path, os.X_OK):
        ctx.note("%s: no %s ('make bench/%s' in corral's build dir makes "
                 "it), %s left out" % (suite, path, name, what))
        return None
    return path


def _start_tool(ctx, suite, cls, tool, what, start):
    """bench/TOOL run as a cls, started by start(server); None (with a
    note that what is left out) when it cannot run."""
    path = bench_tool(ctx, suite, tool, what)
    if path is None:
        return None
    server = cls(ctx, path)
    try:
        start(server)
    except (OSError, ServerFailed) as e:
        ctx.note("%s: floor: %s" % (suite, e))
        server.stop()
        return None
    ctx.running.append(server)
    return server


def start_relay(ctx, suite, origin_port, keepalive):
    """The proxy floor in front of the origin; None (with a note) when it
    cannot run."""
    return _start_tool(ctx, suite, Relay, "relay", "the floor row is",
                       lambda r: r.start(suite, origin_port, keepalive))


def start_fcgi_relay(ctx, suite, socket_path, root, uri, keepalive):
    """The FastCGI floor in front of php-fpm for uri; None (with a note)
    when it cannot run."""
    return _start_tool(ctx, suite, FcgiRelay, "fcgi_relay",
                       "the floor row is",
                       lambda r: r.start(suite, socket_path, root, uri,
                                         keepalive))


def start_tls_floor(ctx, suite, corral, path, cert, key, ktls, tickets):
    """The TLS floor answering what corral answers to path now, with the
    certificate, kernel TLS and tickets as given; None (with a note) when
    it cannot run."""
    return _start_tool(ctx, suite, TlsFloor, "tls_floor",
                       "the floor rows are",
                       lambda f: f.start(suite, cert, key,
                                         capture(corral.port, path,
                                                 tls=True),
                                         ktls, tickets))


def start_floor(ctx, suite, corral, paths):
    """The floor for paths, answering what corral answers now; None (with
    a note) when it cannot run."""
    return _start_tool(ctx, suite, Floor, "floor", "the floor row is",
                       lambda f: f.start(suite, {p: capture(corral.port, p)
                                                 for p in paths}))


# Every server the harness knows, the one under test first.
ALL = (Corral, Nginx, Lighttpd, H2o, Apache)
PEERS = ("nginx", "lighttpd", "h2o", "apache")


def has_config(suite, name):
    return os.path.exists(os.path.join(BENCH_DIR, "conf", "%s-%s.conf.in"
                                       % (suite, name)))


def start_all(ctx, suite, extra, servers=None, pin=True):
    """Starts every server found (or of servers) that has a config for
    the suite; the ones that fail are left out with a note (corral's
    failure is also recorded in ctx.failures)."""
    running = []
    for srv in ctx.servers if servers is None else servers:
        if not has_config(suite, srv.conf):
            continue
        try:
            srv.start(suite, extra, pin)
        except ServerFailed as e:
            ctx.fail_server(suite, srv, "did not start: %s" % e)
            continue
        ctx.running.append(srv)
        running.append(srv)
    return running


def add_varnish(ctx, suite):
    """Adds Varnish to the servers once, when it is installed, for the
    suites that have a config for it (not in --smoke)."""
    if ctx.smoke or getattr(ctx, "varnish_looked", False):
        return
    ctx.varnish_looked = True
    if "varnishd" in ctx.tools:
        ctx.servers.append(Varnish(ctx, ctx.tools["varnishd"]))
    else:
        ctx.note("%s: varnish not found, skipped%s" % (
            suite, "" if ctx.install else
            " (bench/run --install brings it)"))


def start_origin(ctx, suite):
    """bench/lib/origin.py for a suite; ServerFailed if it does not
    start."""
    origin = Origin(ctx, sys.executable)
    origin.start(suite)
    ctx.running.append(origin)
    return origin


def stop_all(ctx, servers):
    for srv in servers:
        srv.stop()
        if srv in ctx.running:
            ctx.running.remove(srv)
