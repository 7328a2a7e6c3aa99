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
    or nothing more comes for timeout seconds.
    """
    if isinstance(port, str):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(port)
    else:
        s = socket.create_connection((host, port), timeout=IO_TIMEOUT)
    s.sendall(data)
    s.settimeout(timeout)
    out = b''
    deadline = time.monotonic() + IO_TIMEOUT
    try:
        while time.monotonic() < deadline:
            if until is not None and out.endswith(until):
                break
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
