"""
Real memcached servers for the tests (Debian's memcached), and a small
client over raw sockets: the tests compare corral's listener with
memcached itself byte for byte, and use memcached nodes as a cluster.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import unittest

from harness import IO_TIMEOUT, ServerError, free_port, need_tool


def debian_module(name, package):
    """A Python module of a Debian package, also for a python3 outside
    Debian's (whose path lacks dist-packages); SkipTest when missing."""
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError:
        sys.path.append('/usr/lib/python3/dist-packages')
        try:
            return importlib.import_module(name)
        except ImportError:
            raise unittest.SkipTest('%s is not installed' % package)


def pymemcache():
    """Debian's python3-pymemcache."""
    return debian_module('pymemcache.client.base', 'python3-pymemcache')


def pylibmc():
    """Debian's python3-pylibmc: libmemcached itself, for its ketama."""
    return debian_module('pylibmc', 'python3-pylibmc')


class Node:
    """One memcached on a free port of 127.0.0.1, never UDP."""

    def __init__(self, max_item='1m'):
        self.bin = need_tool('memcached')
        self.port = free_port()
        self.max_item = max_item
        self.proc = None

    def start(self):
        args = [self.bin, '-l', '127.0.0.1', '-p', str(self.port), '-U', '0',
                '-m', '64', '-I', self.max_item, '-t', '1']
        if os.geteuid() == 0:
            args += ['-u', 'nobody']
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise ServerError('memcached exited at start-up')
            try:
                socket.create_connection(('127.0.0.1', self.port),
                                         timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise ServerError('memcached did not listen')
                time.sleep(0.01)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    @property
    def address(self):
        return '127.0.0.1:%d' % self.port


def exchange(port, data, until=None, timeout=1.0, host='127.0.0.1'):
    """
    Sends data on a new connection and reads what comes back: until the
    reply ends with until (bytes), or the peer closes ("<EOF>" is added),
    or (without until) nothing more comes for timeout seconds once the
    reply has begun.  Waiting for the first byte, or for until, lasts up
    to IO_TIMEOUT: a busy machine can be slower than timeout to answer.
    """
    if isinstance(port, str):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(port)
    else:
        s = socket.create_connection((host, port), timeout=IO_TIMEOUT)
    s.sendall(data)
    out = b''
    deadline = time.monotonic() + IO_TIMEOUT
    try:
        while time.monotonic() < deadline:
            if until is not None and out.endswith(until):
                break
            left = deadline - time.monotonic()
            s.settimeout(max(0.01, left if until is not None or not out
                             else min(timeout, left)))
            d = s.recv(65536)
            if not d:
                out += b'<EOF>'
                break
            out += d
    except socket.timeout:
        pass
    finally:
        s.close()
    return out


class CountingProxy:
    """
    A TCP relay in front of a memcached node that records the get
    commands its clients send (each a list of keys), so a test can count
    round trips: "get k1 k2" is one, two "get k" are two.
    """

    def __init__(self, node):
        import threading
        self.node = node
        self.gets = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    @property
    def address(self):
        return '127.0.0.1:%d' % self.port

    def _accept(self):
        import threading
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            s = socket.create_connection(('127.0.0.1', self.node.port))
            pumps = [threading.Thread(target=self._pump,
                                      args=(c, s, self._watcher()),
                                      daemon=True),
                     threading.Thread(target=self._pump, args=(s, c),
                                      daemon=True)]
            with self.lock:
                self.conns += [c, s]
                self.threads += pumps
            for t in pumps:
                t.start()

    def _watcher(self):
        """Notes the get lines of one client's bytes, as they come."""
        st = {'buf': b'', 'skip': 0}

        def note(d):
            st['buf'] += d
            while True:
                if st['skip']:		# a set's data block
                    n = min(st['skip'], len(st['buf']))
                    st['buf'] = st['buf'][n:]
                    st['skip'] -= n
                    if st['skip']:
                        return
                if b'\r\n' not in st['buf']:
                    return
                cmd, st['buf'] = st['buf'].split(b'\r\n', 1)
                if cmd.startswith(b'get '):
                    with self.lock:
                        self.gets.append(cmd.split()[1:])
                elif cmd.startswith(b'set '):
                    st['skip'] = int(cmd.split()[4]) + 2
        return note

    def _pump(self, src, dst, note=None):
        while True:
            try:
                d = src.recv(65536)
            except OSError:
                d = b''
            if not d:
                # Not close(): the other pump may be in dst.recv(), and
                # stop() closes once the threads have ended.
                try:
                    dst.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if note is not None:
                note(d)
            try:
                dst.sendall(d)
            except OSError:
                return

    def taken(self):
        """The get commands seen since the last call."""
        with self.lock:
            out, self.gets = self.gets, []
        return out

    def stop(self):
        # The threads end before any descriptor is closed: one left in
        # accept() or recv() on a closed socket can take a later socket
        # that gets the same number (see test_cache_rfc's raw_origin).
        # shutdown() wakes them; once the accepting thread has ended, no
        # connection comes.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.threads[0].join(10)
        with self.lock:
            conns, pumps = list(self.conns), self.threads[1:]
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in pumps:
            t.join(10)
        for s in [self.sock] + conns:
            s.close()
