"""
Harness for corral's integration tests: starts the real server on a free
port with a generated config, talks to it over raw sockets and parses what
comes back byte for byte.

Environment:
  CORRAL_BIN     the server binary (default ./corral)
  CORRAL_SRCDIR  the source tree, for etc/mime.types (default: ../.. from
                 this file)
  CORRAL_KEEP    when set, temp dirs are kept for inspection
"""

import email.utils
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from origin import Origin

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.abspath(os.environ.get('CORRAL_BIN', './corral'))
# make check-valgrind: run every server under memcheck (it follows fork).
VALGRIND = os.environ.get('CORRAL_VALGRIND', '').split()
SRCDIR = os.path.abspath(os.environ.get('CORRAL_SRCDIR',
                                        os.path.join(HERE, '..', '..')))
MIME_TYPES = os.path.join(SRCDIR, 'etc', 'mime.types')
VERSION = 'corral/0.1.0'

START_TIMEOUT = 10.0	# until the port accepts
STOP_TIMEOUT = 10.0	# after SIGTERM, before SIGKILL
IO_TIMEOUT = 5.0	# any one exchange on a socket

IMF_RE = re.compile(r'^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d '
                    r'(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) '
                    r'\d{4} \d\d:\d\d:\d\d GMT$')
TOKEN_RE = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


class Raw(str):
    """A config value written as is, never quoted."""


class ServerError(AssertionError):
    """The server died, would not start, or misbehaved on the wire."""


# ---------------------------------------------------------------- utilities

# Ports for servers come from below the kernel's ephemeral range (where no
# client socket of any test takes them between our check and the server's
# bind), and each is reserved across every test process on the machine by
# an flock held until this process exits, so suites run side by side never
# hand out the same port.
PORT_LO, PORT_HI = 12000, 32000
PORT_LOCKS = os.path.join(tempfile.gettempdir(), 'corral-test-ports')
_held_ports = {}


def free_port():
    """A TCP port on 127.0.0.1 that nothing uses and no other test holds."""
    import fcntl
    import random
    os.makedirs(PORT_LOCKS, mode=0o1777, exist_ok=True)
    rng = random.SystemRandom()
    for _ in range(1000):
        port = rng.randrange(PORT_LO, PORT_HI)
        if port in _held_ports:
            continue
        fd = os.open(os.path.join(PORT_LOCKS, str(port)),
                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(('127.0.0.1', port))
        except OSError:
            os.close(fd)
            continue
        finally:
            s.close()
        _held_ports[port] = fd
        return port
    raise ServerError('no free port in %d..%d' % (PORT_LO, PORT_HI))


def http_date(ts):
    """IMF-fixdate of a Unix time."""
    return email.utils.formatdate(ts, usegmt=True)


def parse_http_date(s):
    """Seconds since the epoch of an IMF-fixdate, or None."""
    if s is None or not IMF_RE.match(s):
        return None
    return email.utils.parsedate_to_datetime(s).timestamp()


def read_text(path):
    try:
        with open(path, 'rb') as f:
            return f.read().decode('utf-8', 'replace')
    except FileNotFoundError:
        return ''


def proc_children(pid):
    """Pids of the children of pid (empty when pid is gone)."""
    path = '/proc/%d/task/%d/children' % (pid, pid)
    try:
        with open(path) as f:
            return [int(x) for x in f.read().split()]
    except FileNotFoundError:
        pass
    except OSError:
        return []
    if not os.path.exists('/proc/%d' % pid):
        return []
    kids = []
    for d in os.listdir('/proc'):
        if d.isdigit():
            st = proc_stat(int(d))
            if st and st[1] == pid:
                kids.append(int(d))
    return sorted(kids)


def proc_stat(pid):
    """(state, ppid, starttime) of a live process, or None."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            data = f.read()
    except OSError:
        return None
    rest = data[data.rindex(')') + 2:].split()
    return rest[0], int(rest[1]), int(rest[19])


def pid_alive(pid):
    st = proc_stat(pid)
    return st is not None and st[0] not in ('Z', 'X')


def proc_comm(pid):
    """The process name ("corral g1 w0"), or '' when the process is gone."""
    try:
        with open('/proc/%d/comm' % pid) as f:
            return f.read().rstrip('\n')
    except OSError:
        return ''


def held_sockets(pid):
    """Inodes of the sockets a process holds (none when it is gone)."""
    out = set()
    try:
        fds = os.listdir('/proc/%d/fd' % pid)
    except OSError:
        return out
    for fd in fds:
        try:
            link = os.readlink('/proc/%d/fd/%s' % (pid, fd))
        except OSError:
            continue
        if link.startswith('socket:['):
            out.add(link[8:-1])
    return out


# ----------------------------------------------------------------- reaper

# What a test run starts must die with it, however it ends (exit, an
# exception, SIGKILL), and whatever the processes did to get away: a new
# session, a daemon's double fork, an exec.  Two marks survive all that:
# a variable in the environment, with a name of its own per run (a run
# that a test starts carries its parent's too), and, for programs that
# write their title over their environment as corral does, an open file
# or working directory under the run's own temporary folder, where every
# mkdtemp of the run goes.
REAP_PREFIX = 'CORRAL_TEST_RUN_'
_reaper_fd = None	# the pipe's end whose closing starts the reaper


def run_procs(marker, root):
    """Pids of the processes with marker (bytes) in their environment, or
    their working directory or an open file under root."""
    out = []
    under = root.rstrip('/') + '/'
    for d in os.listdir('/proc'):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        base = '/proc/%s/' % d
        try:
            with open(base + 'environ', 'rb') as f:
                if marker in f.read().split(b'\0'):
                    out.append(int(d))
                    continue
            links = [base + 'cwd'] + [base + 'fd/' + fd for fd in
                                      os.listdir(base + 'fd')]
        except OSError:
            continue
        for link in links:
            try:
                target = os.readlink(link)
            except OSError:
                continue
            if target.startswith(under):
                out.append(int(d))
                break
    return out


def _reap(marker, root):
    # A master may fork a worker while we kill: look again until none.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = [p for p in run_procs(marker, root) if pid_alive(p)]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)
    if not os.environ.get('CORRAL_KEEP'):
        shutil.rmtree(root, ignore_errors=True)


def start_reaper():
    """
    Makes every process this run starts die with it (see above).  A
    watcher in a session of its own (a signal to the run's process group
    does not reach it) waits for the end of a pipe that only this process
    holds, then kills every process that bears one of the run's marks.
    """
    global _reaper_fd
    name = '%s%d_%s' % (REAP_PREFIX, os.getpid(), os.urandom(4).hex())
    marker = (name + '=1').encode()
    root = tempfile.mkdtemp(prefix='corral-run-')
    os.chmod(root, 0o755)	# workers of another user go through it
    r, w = os.pipe()		# neither end is inherited across exec
    if os.fork() == 0:
        try:
            os.close(w)
            os.setsid()
            for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM,
                        signal.SIGPIPE):
                signal.signal(sig, signal.SIG_IGN)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):	# holds no pipe of make's or a test's
                os.dup2(null, fd)
            while True:
                try:
                    if not os.read(r, 1):
                        break
                except InterruptedError:
                    continue
            _reap(marker, root)
        finally:
            os._exit(0)
    os.close(r)
    os.environ[name] = '1'
    tempfile.tempdir = root
    _reaper_fd = w


def refused(port):
    """True when nothing accepts connections on 127.0.0.1:port."""
    try:
        socket.create_connection(('127.0.0.1', port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def wait_until(pred, timeout, interval=0.01):
    """Polls pred until it returns something true; returns that or None."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            return None
        time.sleep(interval)


def wait_for(fn, ok, timeout, interval=0.01):
    """Polls fn() until ok(value); returns that value or None."""
    def probe():
        v = fn()
        return (v,) if ok(v) else None
    got = wait_until(probe, timeout, interval)
    return got[0] if got else None


def same_process(pid, start):
    """True while pid is alive and is the process that had start time."""
    st = proc_stat(pid)
    return bool(st) and st[0] not in 'ZX' and st[2] == start


def build_request(path='/', method='GET', host='localhost', headers=(),
                  version='HTTP/1.1', body=b''):
    """One request as bytes; host=None leaves Host out."""
    lines = ['%s %s %s' % (method, path, version)]
    if host is not None:
        lines.append('Host: ' + host)
    for h in headers:
        lines.append(h if isinstance(h, str) else '%s: %s' % h)
    return ('\r\n'.join(lines) + '\r\n\r\n').encode('latin-1') + body


# ---------------------------------------------------------------- responses

class Headers:
    """A multi-dict of header fields; names compare case-insensitively."""

    def __init__(self, items):
        self.items = items	# [(name, value)] as received

    def get_all(self, name):
        n = name.lower()
        return [v for k, v in self.items if k.lower() == n]

    def get(self, name, default=None):
        vals = self.get_all(name)
        return vals[0] if vals else default

    def count(self, name):
        return len(self.get_all(name))

    def __contains__(self, name):
        return bool(self.get_all(name))

    def names(self):
        return [k.lower() for k, _ in self.items]

    def __repr__(self):
        return repr(self.items)


class Response:
    def __init__(self, version, status, reason, headers, body, head):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body
        self.head = head	# the raw status line and header block

    def header(self, name, default=None):
        return self.headers.get(name, default)

    def tokens(self, name):
        """Lower-cased comma-separated tokens of all fields with name."""
        out = set()
        for v in self.headers.get_all(name):
            out.update(t.strip().lower() for t in v.split(',') if t.strip())
        return out

    def __repr__(self):
        body = self.body if len(self.body) <= 80 else \
            self.body[:80] + b'...(%d bytes)' % len(self.body)
        return '<Response %d %r %r body=%r>' % (self.status, self.reason,
                                                self.headers, body)


def _decode_chunked(buf, pos):
    """(body, end) of a chunked body starting at pos, or None if partial."""
    body = bytearray()
    while True:
        eol = buf.find(b'\r\n', pos)
        if eol < 0:
            return None
        size = int(bytes(buf[pos:eol]).split(b';')[0].strip(), 16)
        pos = eol + 2
        if size == 0:
            while True:	# trailers up to an empty line
                eol = buf.find(b'\r\n', pos)
                if eol < 0:
                    return None
                line = buf[pos:eol]
                pos = eol + 2
                if not line:
                    return bytes(body), pos
        if len(buf) < pos + size + 2:
            return None
        body += buf[pos:pos + size]
        if buf[pos + size:pos + size + 2] != b'\r\n':
            raise ServerError('bad chunk framing in response')
        pos += size + 2


def parse_response(buf, method='GET', eof=False):
    """
    Parses one response at the start of buf.  Returns (Response, consumed),
    or None when more bytes are needed.  A response without a length is
    complete only at eof.  Malformed responses raise ServerError.
    """
    end = buf.find(b'\r\n\r\n')
    if end < 0:
        if eof and buf:
            raise ServerError('truncated response head: %r' % bytes(buf[:300]))
        return None
    head = bytes(buf[:end])
    if b'\n' in head.replace(b'\r\n', b'') or \
            b'\r' in head.replace(b'\r\n', b''):
        raise ServerError('bare CR or LF in response head: %r' % head)
    lines = head.split(b'\r\n')
    m = re.match(rb'^HTTP/(\d)\.(\d) (\d{3}) ([^\r\n]*)$', lines[0])
    if not m:
        raise ServerError('bad status line: %r' % lines[0])
    version = 'HTTP/%s.%s' % (m.group(1).decode(), m.group(2).decode())
    status = int(m.group(3))
    items = []
    for line in lines[1:]:
        name, sep, value = line.partition(b':')
        if not sep or not TOKEN_RE.match(name):
            raise ServerError('bad response header line: %r' % line)
        items.append((name.decode('latin-1'),
                      value.strip(b' \t').decode('latin-1')))
    headers = Headers(items)
    start = end + 4
    te = headers.get('Transfer-Encoding')
    cls = headers.get_all('Content-Length')
    if len(set(cls)) > 1:
        raise ServerError('several Content-Length values: %r' % cls)
    if method == 'HEAD' or status < 200 or status in (204, 304):
        body, stop = b'', start
    elif te is not None:
        if te.lower() != 'chunked':
            raise ServerError('unexpected Transfer-Encoding %r' % te)
        r = _decode_chunked(buf, start)
        if r is None:
            return None
        body, stop = r
    elif cls:
        if not cls[0].isdigit():
            raise ServerError('bad Content-Length %r' % cls[0])
        n = int(cls[0])
        if len(buf) < start + n:
            if eof:
                raise ServerError('connection closed after %d of %d body '
                                  'bytes' % (len(buf) - start, n))
            return None
        body, stop = bytes(buf[start:start + n]), start + n
    else:
        if not eof:
            return None
        body, stop = bytes(buf[start:]), len(buf)
    return Response(version, status, m.group(4).decode('latin-1'), headers,
                    body, head), stop


def parse_responses(data, methods=None):
    """All responses in a complete byte stream (the peer closed after it)."""
    out = []
    buf = bytearray(data)
    i = 0
    while buf:
        method = methods[i] if methods and i < len(methods) else 'GET'
        r = parse_response(buf, method, eof=True)
        if r is None:
            break
        resp, n = r
        out.append(resp)
        del buf[:n]
        if resp.status >= 200:
            i += 1
    return out


def parse_byteranges(resp):
    """[(headers, data)] of a multipart/byteranges response."""
    ctype = resp.header('Content-Type', '')
    m = re.match(r'^multipart/byteranges;\s*boundary=("?)([^";]+)\1\s*$',
                 ctype)
    if not m:
        raise ServerError('not multipart/byteranges: %r' % ctype)
    delim = b'--' + m.group(2).encode('latin-1')
    body = b'\r\n' + resp.body	# so the first delimiter has its CRLF
    pieces = body.split(b'\r\n' + delim)
    if len(pieces) < 3:
        raise ServerError('no parts in multipart body: %r' % resp.body[:300])
    if not pieces[-1].startswith(b'--'):
        raise ServerError('multipart body has no close delimiter')
    parts = []
    for p in pieces[1:-1]:
        eol = p.find(b'\r\n')
        hend = p.find(b'\r\n\r\n', eol)
        if eol < 0 or hend < 0:
            raise ServerError('bad multipart part: %r' % p[:200])
        if hend == eol:
            items = []
        else:
            items = []
            for line in p[eol + 2:hend].split(b'\r\n'):
                name, _, value = line.partition(b':')
                items.append((name.decode(), value.strip().decode()))
        parts.append((Headers(items), p[hend + 4:]))
    return parts


# ---------------------------------------------------------------- sockets

class Conn:
    """A client connection with a receive buffer; every read is bounded."""

    def __init__(self, port, timeout=IO_TIMEOUT, host='127.0.0.1'):
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = bytearray()
        self.eof = False
        self.reset = False

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self, deadline, what):
        """Reads once; False at end of stream."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise ServerError('timed out waiting for %s; have %r' %
                              (what, bytes(self.buf[:300])))
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(262144)
        except socket.timeout:
            raise ServerError('timed out waiting for %s; have %r' %
                              (what, bytes(self.buf[:300]))) from None
        except ConnectionResetError:
            self.reset = True
            chunk = b''
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def read_response(self, method='GET', timeout=None):
        """Reads exactly one response (1xx interim ones count)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            r = parse_response(self.buf, method, self.eof)
            if r:
                resp, n = r
                del self.buf[:n]
                return resp
            if self.eof:
                raise ServerError('connection closed before a full response;'
                                  ' have %r' % bytes(self.buf[:300]))
            self._fill(deadline, 'a response')

    def read_responses(self, methods, timeout=None):
        return [self.read_response(m, timeout) for m in methods]

    def read_until_close(self, timeout=None):
        """Everything up to the end of stream; fails on timeout."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while not self.eof:
            self._fill(deadline, 'the server to close')
        data = bytes(self.buf)
        self.buf.clear()
        return data

    def closed_within(self, timeout):
        """
        True when the server ends the stream within timeout with nothing
        more sent, False when it is still open; extra bytes fail.
        """
        try:
            data = self.read_until_close(timeout)
        except ServerError:
            return False
        if data:
            raise ServerError('unexpected bytes before close: %r' % data[:300])
        return True

    def is_open(self):
        """True when the server has not closed (checked without waiting)."""
        if self.eof:
            return False
        self.sock.settimeout(0)
        try:
            chunk = self.sock.recv(65536)
        except (BlockingIOError, socket.timeout):
            return True
        except ConnectionResetError:
            self.eof = self.reset = True
            return False
        finally:
            self.sock.settimeout(self.timeout)
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True


# ---------------------------------------------------------------- server

class Corral:
    """
    One server instance in its own temp dir.  Keyword arguments override
    top-level directives (None drops one); server= overrides the default
    server block; vhosts= adds more blocks (dicts with names, root, index,
    access_log; a relative root is made under the temp dir).  A '_raw'
    key, at the top or in a server, is config text written as it is
    (locations, sections).
    """

    STRING_KEYS = {'error_log', 'log_level', 'pid_file', 'mime_types',
                   'default_type', 'user', 'group', 'root', 'access_log',
                   'path', 'tls_certificate', 'tls_certificate_key',
                   'ciphers', 'ciphersuites'}

    def __init__(self, server=None, vhosts=(), wrapper=None, **directives):
        self.tmp = tempfile.mkdtemp(prefix='corral-it-')
        # Started as root, workers run as "nobody": let them in.
        os.chmod(self.tmp, 0o755)
        self.htdocs = os.path.join(self.tmp, 'htdocs')
        os.mkdir(self.htdocs)
        self.error_log = os.path.join(self.tmp, 'error.log')
        self.access_log = os.path.join(self.tmp, 'access.log')
        self.conf_path = os.path.join(self.tmp, 'corral.conf')
        self.stderr_path = os.path.join(self.tmp, 'stderr.log')
        self.port = free_port()
        self.wrapper = list(wrapper or [])
        self.cwd = self.tmp
        self.proc = None
        self.expect_worker_death = False
        self.expect_exit = False
        self.returncode = None
        self.leftover = []	# workers alive after the master exited
        self.seen = {}		# worker pid: start time

        self.directives = dict([
            ('workers', 1),
            ('worker_connections', 1024),
            ('error_log', self.error_log),
            ('log_level', 'info'),
            ('pid_file', 'off'),
            ('listen', ['127.0.0.1:%d' % self.port]),
            ('mime_types', MIME_TYPES),
            ('default_type', 'application/octet-stream'),
            ('max_request_line', Raw('8k')),
            ('max_header_size', Raw('32k')),
            ('max_headers', 100),
            ('max_body_size', Raw('1m')),
            ('keepalive_requests', 1000),
            ('keepalive_timeout', Raw('75s')),
            ('header_timeout', Raw('30s')),
            ('body_timeout', Raw('60s')),
            ('send_timeout', Raw('60s')),
            ('lingering_timeout', Raw('5s')),
            ('server_tokens', True),
            ('sendfile', True),
            ('max_ranges', 16),
            ('file_cache_entries', 1024),
            ('file_cache_valid', Raw('1s')),
            ('file_cache_max_size', Raw('64k')),
        ])
        self.directives.update(directives)
        main = {'names': ['localhost'], 'root': self.htdocs,
                'index': ['index.html'], 'access_log': self.access_log}
        main.update(server or {})
        self.servers = [main]
        for v in vhosts:
            v = dict(v)
            if 'root' in v and not os.path.isabs(v['root']):
                v['root'] = self.docroot(v['root'])
            self.servers.append(v)
        with open(self.conf_path, 'w') as f:
            f.write(self.config_text())

    # -- config

    @classmethod
    def value(cls, key, v):
        if v is True:
            return 'on'
        if v is False:
            return 'off'
        if isinstance(v, int):
            return str(v)
        if isinstance(v, (list, tuple)):
            return '{' + ', '.join(quote(x) for x in v) + '}'
        if isinstance(v, Raw) or key not in cls.STRING_KEYS:
            return str(v)
        return quote(v)

    def config_text(self):
        out = []
        for k, v in self.directives.items():
            if k == '_raw':
                out.append(v)
            elif isinstance(v, dict):	# a section, e.g. cache { ... }
                out.append('%s {' % k)
                out.extend('  %s = %s' % (sk, self.value(sk, sv))
                           for sk, sv in v.items() if sv is not None)
                out.append('}')
            elif v is not None:
                out.append('%s = %s' % (k, self.value(k, v)))
        for s in self.servers:
            out.append('server {')
            for k, v in s.items():
                if k == '_raw':
                    out.append(v)
                elif isinstance(v, dict):	# 'location "/x"': {...}
                    out.append('  %s {' % k)
                    out.extend('    %s = %s' % (sk, self.value(sk, sv))
                               for sk, sv in v.items() if sv is not None)
                    out.append('  }')
                elif v is not None:
                    out.append('  %s = %s' % (k, self.value(k, v)))
            out.append('}')
        return '\n'.join(out) + '\n'

    # -- files

    def docroot(self, name):
        """A folder under the temp dir (made if missing)."""
        path = os.path.join(self.tmp, name)
        os.makedirs(path, exist_ok=True)
        return path

    def write(self, rel, data, root=None, mtime=None):
        """Writes a file under the docroot (or root); returns its path."""
        path = os.path.join(root or self.htdocs, rel.lstrip('/'))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(data, str):
            data = data.encode()
        with open(path, 'wb') as f:
            f.write(data)
        if mtime is not None:
            os.utime(path, (mtime, mtime))
        return path

    def mkdir(self, rel, root=None):
        path = os.path.join(root or self.htdocs, rel.lstrip('/'))
        os.makedirs(path, exist_ok=True)
        return path

    # -- process

    def start(self):
        if not os.access(BIN, os.X_OK):
            raise unittest.SkipTest('no server binary at %s' % BIN)
        self.stderr_f = open(self.stderr_path, 'wb')
        env = dict(os.environ)
        if self.wrapper:
            # LeakSanitizer cannot run under ptrace (strace).
            env['ASAN_OPTIONS'] = (env.get('ASAN_OPTIONS', '') +
                                   ':detect_leaks=0').lstrip(':')
        self.proc = subprocess.Popen(
            VALGRIND + self.wrapper + [BIN, '-f', '-c', self.conf_path],
            stdin=subprocess.DEVNULL, stdout=self.stderr_f,
            stderr=self.stderr_f, cwd=self.cwd, start_new_session=True,
            env=env)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                self.returncode = self.proc.returncode
                msg = 'server exited with %d at start-up\n%s' % (
                    self.proc.returncode, self.diagnostics())
                if self.check_config().returncode == 0:
                    msg = ('corral -t accepted a config that does not start'
                           ' (they must agree)\n' + msg)
                raise ServerError(msg)
            try:
                socket.create_connection(('127.0.0.1', self.port),
                                         timeout=1).close()
                break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop(check=False)
                raise ServerError('server did not listen within %ds\n%s' %
                                  (START_TIMEOUT, self.diagnostics()))
            time.sleep(0.01)
        # Every config the suite starts must pass corral -t as well.
        t = self.check_config()
        if t.returncode != 0:
            self.stop(check=False)
            raise ServerError('corral -t refuses a config that starts (they '
                              'must agree):\n%s' % t.stderr)
        return self

    @property
    def master_pid(self):
        if not self.wrapper:
            return self.proc.pid
        kids = wait_until(lambda: proc_children(self.proc.pid), START_TIMEOUT)
        if not kids:
            raise ServerError('no master under %s' % self.wrapper[0])
        return kids[0]

    def workers(self):
        kids = proc_children(self.master_pid)
        for pid in kids:	# remembered so that stop() can reap strays
            st = proc_stat(pid)
            if st:
                self.seen.setdefault(pid, st[2])
        return kids

    def wait_workers(self, n, timeout=START_TIMEOUT, exclude=()):
        """Waits until the master has n children not in exclude."""
        def ready():
            kids = self.workers()
            if len(kids) == n and not set(kids) & set(exclude):
                return kids
            return None
        kids = wait_until(ready, timeout)
        if not kids:
            raise ServerError('expected %d workers, have %r\n%s' %
                              (n, self.workers(), self.diagnostics()))
        return kids

    def check_config(self, path=None):
        """Runs corral -t; returns the CompletedProcess (text output)."""
        return subprocess.run([BIN, '-t', '-c', path or self.conf_path],
                              capture_output=True, text=True, timeout=30,
                              cwd=self.cwd)

    def stop(self, check=True):
        """SIGTERM, wait, SIGKILL if it hangs; then checks for crashes."""
        if self.proc is None or self.returncode is not None:
            self._cleanup()
            return
        died = self.proc.poll() is not None
        master = self.proc.pid if died else self.master_pid
        if not died:
            self.workers()
            try:
                os.kill(master, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            for pid in (master, self.proc.pid):
                if pid_alive(pid):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait()
            if check:
                self._fail('server ignored SIGTERM for %ds' % STOP_TIMEOUT)
        self.returncode = self.proc.returncode

        def strays():
            return [pid for pid, start in self.seen.items()
                    if same_process(pid, start)]
        wait_until(lambda: not strays(), 2)
        for pid in strays():
            self.leftover.append(pid)
            os.kill(pid, signal.SIGKILL)
        self._cleanup()
        if check and died and not self.expect_exit:
            self._fail('server died during the test (status %d)' %
                       self.returncode)
        if check and self.leftover:
            self._fail('workers %r outlived the master' % self.leftover)
        if check:
            self.check_sanity()

    def _fail(self, msg):
        raise ServerError('%s\n%s' % (msg, self.diagnostics()))

    def _cleanup(self):
        if getattr(self, 'stderr_f', None):
            self.stderr_f.close()
            self.stderr_f = None

    def check_sanity(self):
        """Fails on sanitizer reports or workers that died unexpectedly."""
        err = read_text(self.stderr_path)
        for bad in ('AddressSanitizer', 'LeakSanitizer', 'runtime error:'):
            if bad in err:
                self._fail('sanitizer report on stderr')
        if 'VALGRIND-ERROR-BEGIN' in err:
            self._fail('valgrind report on stderr')
        if not self.expect_worker_death:
            if re.search(r'\[(error|crit|alert)\].*'
                         r'(killed by signal|exited with code)', self.log()):
                self._fail('a worker died unexpectedly')

    def remove(self):
        if not os.environ.get('CORRAL_KEEP'):
            subprocess.run(['chmod', '-R', 'u+rwX', self.tmp],
                           stderr=subprocess.DEVNULL)
            shutil.rmtree(self.tmp, ignore_errors=True)

    def diagnostics(self):
        return ('--- stderr ---\n%s\n--- error log (tail) ---\n%s' %
                (read_text(self.stderr_path)[-3000:], self.log()[-3000:]))

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        try:
            self.stop(check=exc[0] is None)
        finally:
            self.remove()

    # -- logs

    def log(self):
        return read_text(self.error_log)

    def log_mark(self):
        try:
            return os.path.getsize(self.error_log)
        except FileNotFoundError:
            return 0

    def log_since(self, mark):
        return self.log().encode()[mark:].decode('utf-8', 'replace')

    def wait_log(self, pattern, timeout=IO_TIMEOUT, mark=0):
        """The first match of pattern in the log after mark, polled."""
        rx = re.compile(pattern, re.M)
        m = wait_until(lambda: rx.search(self.log_since(mark)), timeout)
        if not m:
            raise ServerError('no log line matching %r\n%s' %
                              (pattern, self.diagnostics()))
        return m

    # -- client helpers

    def connect(self, timeout=IO_TIMEOUT):
        return Conn(self.port, timeout)

    def request(self, data, methods=('GET',), timeout=IO_TIMEOUT):
        """Sends raw bytes on a new connection and reads the responses."""
        with self.connect(timeout) as c:
            c.send(data)
            out = c.read_responses(methods)
        return out[0] if len(out) == 1 else out

    def get(self, path='/', method='GET', host='localhost', headers=(),
            version='HTTP/1.1', body=b''):
        """One request on a new connection; returns the response."""
        data = build_request(path, method, host, headers, version, body)
        return self.request(data, (method,))

    def url(self, path='/'):
        return 'http://127.0.0.1:%d%s' % (self.port, path)


class TLSConn(Conn):
    """A client connection over TLS (Python's ssl), read like Conn."""

    def __init__(self, port, ctx, name='localhost', timeout=IO_TIMEOUT):
        self.timeout = timeout
        raw = socket.create_connection(('127.0.0.1', port), timeout=timeout)
        self.sock = ctx.wrap_socket(raw, server_hostname=name)
        self.buf = bytearray()
        self.eof = False
        self.reset = False


def quote(s):
    return '"' + str(s).replace('\\', '\\\\').replace('"', '\\"') + '"'


class CorralTestCase(unittest.TestCase):
    """Base class: start() runs a server that is stopped after the test."""

    maxDiff = 2000

    def start(self, **kw):
        c = Corral(**kw)
        self.addCleanup(c.remove)
        try:
            c.start()
        except BaseException:
            c.stop(check=False)
            raise
        self.addCleanup(c.stop)
        return c

    def make(self, **kw):
        """A configured server that is not started yet."""
        c = Corral(**kw)
        self.addCleanup(c.remove)
        self.addCleanup(lambda: c.proc and c.stop())
        return c

    def origin(self, port=0, **kw):
        """An origin server (origin.py's Origin(port, **kw)), running,
        stopped after the test."""
        o = Origin(port, **kw).start()
        self.addCleanup(o.stop)
        return o

    def stats(self, c):
        """The shared store's counters of server c (corral -s)."""
        out = subprocess.run([BIN, '-s', '-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        return {k: int(v) for k, v in
                (line.split() for line in out.stdout.splitlines())}

    def assertBody(self, resp, data, status=200):
        self.assertEqual(resp.status, status, resp)
        self.assertEqual(resp.header('Content-Length'), str(len(data)), resp)
        if resp.body != data:
            self.fail('body differs: got %d bytes, want %d; first diff at %d'
                      % (len(resp.body), len(data),
                         next((i for i, (a, b) in
                               enumerate(zip(resp.body, data)) if a != b),
                              min(len(resp.body), len(data)))))

    def assertClosesAfter(self, conn, timeout=IO_TIMEOUT):
        self.assertTrue(conn.closed_within(timeout),
                        'server kept the connection open')

    def assertNoLogErrors(self, c):
        bad = [l for l in c.log().splitlines()
               if '[error]' in l or '[crit]' in l or '[alert]' in l]
        self.assertEqual(bad, [], 'error-level lines in the log')


def need_tool(name):
    path = shutil.which(name)
    if not path:
        raise unittest.SkipTest('%s is not installed' % name)
    return path


def start_dying(c, code, slot=None):
    """Starts c with each worker (only slot's, given one) exiting with
    code as it starts, through a preloaded shim: corral has no test hook
    of its own (tests/fault/workerexit.c).  Skips without the shim."""
    shim = os.environ.get('CORRAL_WORKEREXIT') or os.path.join(
        os.path.dirname(BIN), 'tests', 'fault', 'workerexit.so')
    if not os.path.exists(shim):
        raise unittest.SkipTest('workerexit.so is not built')
    env = {'LD_PRELOAD': shim, 'CORRAL_WORKEREXIT_CODE': str(code),
           # An ASan build wants its runtime first; the shim only
           # wraps one libevent call, so the order does not matter.
           'ASAN_OPTIONS': (os.environ.get('ASAN_OPTIONS', '') +
                            ':verify_asan_link_order=0').lstrip(':')}
    if slot is not None:
        env['CORRAL_WORKEREXIT_SLOT'] = str(slot)
    start_with_env(c, env)
    c.expect_worker_death = True


def start_with_env(c, env):
    """Starts c with these variables added to its environment (a shim to
    preload and its settings)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        c.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def strace_wrapper(test, calls):
    """A wrapper= for start() that traces the given system calls of the
    server and its children into a file, and that file's path; skips the
    test where strace is missing or cannot trace."""
    strace = need_tool('strace')
    if subprocess.run([strace, '-o', '/dev/null', 'true'],
                      capture_output=True).returncode != 0:
        raise unittest.SkipTest('strace cannot trace here')
    tmp = tempfile.mkdtemp(prefix='corral-strace-')
    test.addCleanup(shutil.rmtree, tmp, True)
    trace = os.path.join(tmp, 'strace.txt')
    return ([strace, '-f', '-qq', '-o', trace, '-e',
             'trace=' + ','.join(calls)], trace)


def strace_lines(trace):
    """The calls in a trace of strace_wrapper()'s as (pid, call text),
    a call that another process interrupted joined again."""
    pending = {}
    lines = []
    with open(trace) as f:
        for raw in f:
            m = re.match(r'^(\d+)\s+(.*)$', raw.rstrip('\n'))
            if not m:
                continue
            pid, rest = m.groups()
            if rest.endswith('<unfinished ...>'):
                pending[pid] = rest[:-len('<unfinished ...>')]
                continue
            r = re.match(r'^<\.\.\. \w+ resumed>\s?(.*)$', rest)
            if r:
                rest = pending.pop(pid, '') + r.group(1)
            lines.append((pid, rest))
    return lines


def strace_client_calls(test, trace, port, names):
    """The calls named in names that the process which accepted the
    connection from port made on it, in order."""
    who = None
    out = []
    for pid, call in strace_lines(trace):
        if who is None:
            if re.match(r'^accept4?\(.*htons\(%d\).*\)\s+=\s+\d+' % port,
                        call):
                who = (pid, call.rsplit('=', 1)[1].strip())
            continue
        m = re.match(r'^(\w+)\((\d+),', call)
        if pid == who[0] and m and m.group(1) in names and \
                m.group(2) == who[1]:
            out.append(call)
    test.assertIsNotNone(who, 'no accept for port %d in the trace' % port)
    return out


def read_after_refused(test, port, trace, data, timeout=60):
    """
    Sends data on a new connection to port with a small receive buffer,
    reads nothing until the server's send on it is refused (EAGAIN in
    trace, a strace_wrapper() of accept, accept4, sendto and sendmsg),
    then reads to the end of the stream; returns the bytes read.
    """
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    s.settimeout(timeout)
    s.connect(('127.0.0.1', port))
    mine = s.getsockname()[1]
    s.sendall(data)

    def refused():
        try:
            calls = strace_client_calls(test, trace, mine,
                                        ('sendto', 'sendmsg'))
        except AssertionError:
            return False	# its accept is not in the trace yet
        return any('EAGAIN' in k for k in calls)
    test.assertTrue(wait_until(refused, timeout),
                    'the server never found the client\'s socket full')
    buf = bytearray()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = s.recv(65536)
        if not d:
            break
        buf += d
    s.close()
    return bytes(buf)
