"""
php-fpm for corral's FastCGI tests: Debian's real php-fpm (package
php-fpm, installed by quickstart), started by a test in its own temp dir
with its own pool config, on a unix socket and on a TCP port, as an
unprivileged user, and stopped after it.  Also a small FastCGI client, so
a test can read php-fpm's status page (pm.status_path) and its ping page
without going through corral.

  fpm = PhpFpm(children=2)            # not started yet; settings= adds
  self.addCleanup(fpm.stop)           # pool directives
  fpm.start()
  fpm.unix_addr                        # "unix:/tmp/.../php.sock" for corral
  fpm.tcp_addr                         # "127.0.0.1:PORT"
  fpm.requests()                       # requests the unix pool answered

php-fpm counts requests, not connections: a kept-alive connection is
accepted once and then reads request after request.  Its status page's
"accepted conn" counts a request when a child starts reading one, which
on a kept connection is as soon as the previous one ends, so it runs one
ahead per idle kept connection: requests() counts the lines of the
pool's access log instead, written as each request ends.  A child serves
a kept connection until the web server closes it, so a test that keeps
connections needs a child more than it keeps, for the status requests.  CONN_PHP is a script
that prints the identity (socket inode) of the FastCGI connection it was
called on, so a test counts connections as php-fpm's child sees them.
"""

import glob
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import unittest

import harness

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0

# The pools' settings that a test may override with settings=.
POOL_DEFAULTS = {
    'pm': 'static',
    'pm.max_children': '2',
    'pm.status_path': '/fpm-status',
    'ping.path': '/fpm-ping',
    'catch_workers_output': 'yes',
    'decorate_workers_output': 'no',
    'clear_env': 'yes',
    'request_terminate_timeout': '60s',
    'php_admin_value[upload_max_filesize]': '16M',
    'php_admin_value[post_max_size]': '16M',
    'php_admin_value[memory_limit]': '128M',
    'php_admin_flag[log_errors]': 'on',
    'php_admin_flag[display_errors]': 'off',
    'php_admin_flag[expose_php]': 'on',
}

# Prints the socket inode of the FastCGI connection this request came on:
# the child's only socket that is not listening (/proc/net/unix and tcp
# say which are).
CONN_PHP = r'''<?php
header('Content-Type: text/plain');
$listening = [];
foreach (file('/proc/net/unix') as $i => $l) {
    $f = preg_split('/\s+/', trim($l));
    if ($i > 0 && (hexdec($f[3]) & 0x10000))
        $listening['socket:[' . $f[6] . ']'] = true;
}
foreach (['/proc/net/tcp', '/proc/net/tcp6'] as $t) {
    foreach (@file($t) ?: [] as $i => $l) {
        $f = preg_split('/\s+/', trim($l));
        if ($i > 0 && $f[3] === '0A')
            $listening['socket:[' . $f[9] . ']'] = true;
    }
}
$conn = [];
foreach (scandir('/proc/self/fd') as $fd) {
    if ($fd === '.' || $fd === '..')
        continue;
    $l = @readlink("/proc/self/fd/$fd");
    if ($l !== false && strncmp($l, 'socket:', 7) === 0 &&
        !isset($listening[$l]))
        $conn[] = $l;
}
echo getmypid(), ' ', implode(',', $conn), "\n";
'''


def find_binary():
    """Path of php-fpm (php-fpm8.2 on Debian 12), or None."""
    for name in ('php-fpm', 'php-fpm8.2'):
        path = shutil.which(name)
        if path:
            return path
    found = sorted(glob.glob('/usr/sbin/php-fpm[0-9]*'))
    return found[-1] if found else None


def need_php_fpm():
    path = find_binary()
    if not path:
        raise unittest.SkipTest('php-fpm is not installed (quickstart '
                                'installs Debian\'s php-fpm)')
    return path


# ---------------------------------------------------------------- FastCGI

FCGI_BEGIN, FCGI_END, FCGI_PARAMS, FCGI_STDIN, FCGI_STDOUT, FCGI_STDERR = \
    1, 3, 4, 5, 6, 7


def _record(rtype, content, rid=1):
    return struct.pack('>BBHHBB', 1, rtype, rid, len(content), 0, 0) + \
        content


def _pair(name, value):
    out = b''
    for n in (len(name), len(value)):
        out += bytes([n]) if n < 128 else struct.pack('>I', n | 0x80000000)
    return out + name + value


def _connect(addr, timeout):
    if addr.startswith('unix:'):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(addr[5:])
    else:
        host, port = addr.rsplit(':', 1)
        s = socket.create_connection((host, int(port)), timeout=timeout)
    return s


def fcgi_request(addr, params, stdin=b'', timeout=harness.IO_TIMEOUT):
    """
    One FastCGI request on a new connection to addr ("unix:PATH" or
    "HOST:PORT").  Returns (stdout, stderr, app_status).
    """
    data = _record(FCGI_BEGIN, struct.pack('>HB5x', 1, 0))
    pairs = b''.join(_pair(k.encode(), v.encode())
                     for k, v in params.items())
    data += _record(FCGI_PARAMS, pairs) + _record(FCGI_PARAMS, b'')
    for i in range(0, len(stdin), 65535):
        data += _record(FCGI_STDIN, stdin[i:i + 65535])
    data += _record(FCGI_STDIN, b'')
    out, err = bytearray(), bytearray()
    buf = bytearray()
    deadline = time.monotonic() + timeout
    with _connect(addr, timeout) as s:
        s.sendall(data)
        while True:
            while len(buf) >= 8:
                ver, rtype, _, clen, pad = struct.unpack('>BBHHB', buf[:7])
                if len(buf) < 8 + clen + pad:
                    break
                content = bytes(buf[8:8 + clen])
                del buf[:8 + clen + pad]
                if rtype == FCGI_STDOUT:
                    out += content
                elif rtype == FCGI_STDERR:
                    err += content
                elif rtype == FCGI_END:
                    return bytes(out), bytes(err), \
                        struct.unpack('>I', content[:4])[0]
            if time.monotonic() > deadline:
                raise harness.ServerError('php-fpm did not answer')
            chunk = s.recv(65536)
            if not chunk:
                raise harness.ServerError('php-fpm closed before '
                                          'END_REQUEST: %r' % bytes(out))
            buf += chunk


def cgi_split(stdout):
    """(headers dict with lower-case names, body) of a CGI response."""
    head, _, body = stdout.partition(b'\r\n\r\n')
    headers = {}
    for line in head.split(b'\r\n'):
        name, _, value = line.partition(b':')
        headers[name.decode().strip().lower()] = value.decode().strip()
    return headers, body


# ---------------------------------------------------------------- php-fpm

class PhpFpm:
    """php-fpm with two pools, 'unix' and 'tcp', of the same settings."""

    def __init__(self, children=2, settings=None):
        self.binary = need_php_fpm()
        self.tmp = tempfile.mkdtemp(prefix='corral-fpm-')
        os.chmod(self.tmp, 0o755)	# the pools' user reaches the socket
        self.sock = os.path.join(self.tmp, 'php.sock')
        self.port = harness.free_port()
        self.unix_addr = 'unix:' + self.sock
        self.tcp_addr = '127.0.0.1:%d' % self.port
        self.log_path = os.path.join(self.tmp, 'php-fpm.log')
        self.out_path = os.path.join(self.tmp, 'php-fpm.out')
        self.conf_path = os.path.join(self.tmp, 'php-fpm.conf')
        self.pool = dict(POOL_DEFAULTS)
        self.pool['pm.max_children'] = str(children)
        self.pool.update(settings or {})
        self.proc = None
        self.out_f = None
        self.own = {}		# requests of ours (ping, status) per pool

    def _own(self, addr):
        self.own[addr] = self.own.get(addr, 0) + 1

    def config_text(self):
        out = ['[global]',
               'pid = ' + os.path.join(self.tmp, 'php-fpm.pid'),
               'error_log = ' + self.log_path,
               'log_level = notice',
               'daemonize = no',
               'process_control_timeout = 5s']
        for name, listen in (('unix', self.sock),
                             ('tcp', self.tcp_addr)):
            out.append('[%s]' % name)
            out.append('listen = ' + listen)
            out.append('listen.mode = 0666')
            if os.geteuid() == 0:
                # php-fpm refuses to run a pool as root.
                out.append('user = nobody')
                out.append('group = nogroup')
            out.append('access.log = ' + self.access_path(name))
            out.append('access.format = "%{SCRIPT_NAME}e %m %s"')
            out.extend('%s = %s' % kv for kv in self.pool.items())
        return '\n'.join(out) + '\n'

    def start(self):
        with open(self.conf_path, 'w') as f:
            f.write(self.config_text())
        self.out_f = open(self.out_path, 'wb')
        # -n: no php.ini, so the system's settings do not leak in; PHP's
        # own defaults apply (cgi.fix_pathinfo=1, as on a stock install).
        self.proc = subprocess.Popen(
            [self.binary, '-F', '-n', '-y', self.conf_path],
            stdin=subprocess.DEVNULL, stdout=self.out_f,
            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        for addr in (self.unix_addr, self.tcp_addr):
            while True:
                if self.proc.poll() is not None:
                    raise harness.ServerError(
                        'php-fpm exited with %d\n%s' %
                        (self.proc.returncode, self.diagnostics()))
                try:
                    if self.ping(addr, timeout=1) == b'pong':
                        break
                except (OSError, harness.ServerError):
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise harness.ServerError('php-fpm did not answer on '
                                              '%s\n%s' % (addr,
                                                          self.diagnostics()))
                time.sleep(0.01)
        return self

    def ping(self, addr=None, timeout=harness.IO_TIMEOUT):
        addr = addr or self.unix_addr
        out, _, _ = fcgi_request(addr, {
            'SCRIPT_NAME': self.pool['ping.path'],
            'SCRIPT_FILENAME': self.pool['ping.path'],
            'REQUEST_METHOD': 'GET'}, timeout=timeout)
        self._own(addr)
        return cgi_split(out)[1].strip()

    def status(self, pool='unix'):
        """The pool's status page as a dict ("accepted conn", ...)."""
        addr = self.unix_addr if pool == 'unix' else self.tcp_addr
        out, _, _ = fcgi_request(addr, {
            'SCRIPT_NAME': self.pool['pm.status_path'],
            'SCRIPT_FILENAME': self.pool['pm.status_path'],
            'QUERY_STRING': 'json', 'REQUEST_METHOD': 'GET'})
        self._own(addr)
        return json.loads(cgi_split(out)[1])

    def access_path(self, pool):
        return os.path.join(self.tmp, 'access-%s.log' % pool)

    def requests(self, pool='unix', script=None):
        """
        Requests the pool has answered, from its access log (php-fpm
        writes a line as each request ends), without its own ping and
        status pages; only those for script when given.
        """
        own = (self.pool['ping.path'], self.pool['pm.status_path'])
        n = 0
        for line in harness.read_text(self.access_path(pool)).splitlines():
            name = line.split(' ', 1)[0]
            if name not in own and (script is None or name == script):
                n += 1
        return n

    def wait_requests(self, n, pool='unix', timeout=harness.IO_TIMEOUT):
        """
        requests() once it reaches n (php-fpm logs a request just after
        it has sent the response), or what it is at the deadline.
        """
        got = harness.wait_for(lambda: self.requests(pool),
                               lambda v: v >= n, timeout)
        return got if got is not None else self.requests(pool)

    def accepted(self, pool='unix'):
        """
        Requests the pool has taken from others than this helper (its
        pings and status requests, this one included: php-fpm counts a
        request as it starts reading it).
        """
        addr = self.unix_addr if pool == 'unix' else self.tcp_addr
        n = self.status(pool)['accepted conn']
        return n - self.own.get(addr, 0)

    def pids(self):
        """The pool processes (php-fpm's children)."""
        if self.proc is None:
            return []
        return harness.proc_children(self.proc.pid)

    def stop(self):
        """SIGQUIT (graceful), then SIGKILL to the group if it hangs."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGQUIT)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        if self.out_f:
            self.out_f.close()
            self.out_f = None

    def kill(self):
        """php-fpm gone at once, children too (a crash, not a stop)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def remove(self):
        if not os.environ.get('CORRAL_KEEP'):
            shutil.rmtree(self.tmp, ignore_errors=True)

    def log(self):
        return harness.read_text(self.log_path) + \
            harness.read_text(self.out_path)

    def diagnostics(self):
        return '--- php-fpm log ---\n%s' % self.log()[-3000:]


class FpmTestCase(harness.CorralTestCase):
    """A CorralTestCase that can start php-fpm too."""

    def start_fpm(self, **kw):
        fpm = PhpFpm(**kw)
        self.addCleanup(fpm.remove)
        self.addCleanup(fpm.stop)
        fpm.start()
        return fpm
