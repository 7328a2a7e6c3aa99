"""
Idle keep-alive connections: what each one costs a worker in memory, and
what happens when they fill worker_connections (the oldest is closed to
make room, as nginx does, instead of new clients waiting for
keepalive_timeout).
"""

import time

from harness import (BIN, VALGRIND, CorralTestCase, Raw, ServerError,
                     build_request)


def sanitized():
    """True when the server is built with AddressSanitizer."""
    with open(BIN, 'rb') as f:
        return b'__asan_init' in f.read()

MAX_CONNS = 16		# the smallest worker_connections allowed


def rss_bytes(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024
    raise ServerError('no VmRSS for %d' % pid)


def idle_client(c, path='/small.txt'):
    """A connection that made one request and now idles, kept alive."""
    conn = c.connect()
    conn.send(build_request(path))
    r = conn.read_response()
    if r.status != 200:
        raise ServerError('%s: %r' % (path, r))
    return conn


class ReuseTest(CorralTestCase):

    def start_small(self):
        c = self.start(workers=1, worker_connections=MAX_CONNS,
                       keepalive_timeout=Raw('75s'))
        c.write('small.txt', b'small\n')
        return c

    def test_full_of_idle_connections_new_client_served(self):
        c = self.start_small()
        mark = c.log_mark()
        idle = []
        try:
            for _ in range(MAX_CONNS):
                idle.append(idle_client(c))
            t0 = time.monotonic()
            # Without room made, it would wait keepalive_timeout (75 s).
            with c.connect(timeout=40) as new:
                new.send(build_request('/small.txt'))
                self.assertBody(new.read_response(), b'small\n')
            self.assertLess(time.monotonic() - t0, 30,
                            'the new client waited for a free connection')
            # The oldest idle connection made room; the newest is kept.
            self.assertTrue(idle[0].closed_within(5),
                            'the oldest idle connection was not closed')
            self.assertTrue(idle[-1].is_open())
            idle[-1].send(build_request('/small.txt'))
            self.assertBody(idle[-1].read_response(), b'small\n')
        finally:
            for conn in idle:
                conn.close()
        c.wait_log(r'\[warn\] .*%d worker_connections are not enough; '
                   r'reusing idle keep-alive connections' % MAX_CONNS,
                   mark=mark)

    def test_busy_connections_are_not_closed(self):
        c = self.start_small()
        busy, idle = [], None
        try:
            # All but one are in the middle of a request header: busy.
            for _ in range(MAX_CONNS - 1):
                conn = c.connect(timeout=10)
                conn.send(b'GET /small.txt HTTP/1.1\r\nHost: x\r\n')
                busy.append(conn)
            idle = idle_client(c)
            with c.connect(timeout=10) as new:
                new.send(build_request('/small.txt'))
                self.assertBody(new.read_response(), b'small\n')
            self.assertTrue(idle.closed_within(5))
            # The busy ones were left alone and finish their requests.
            for conn in busy:
                self.assertTrue(conn.is_open())
                conn.send(b'\r\n')
                self.assertBody(conn.read_response(), b'small\n')
        finally:
            for conn in busy:
                conn.close()
            if idle:
                idle.close()


class IdleMemoryTest(CorralTestCase):
    """
    RSS of the worker per idle keep-alive connection.  Each connection made
    a request (so it had its buffers once) and idles; nginx holds about
    520 bytes for one (all its processes, bench/run conns).  Prints the measurement.
    """

    N = 2000
    LIMIT = 420	# bytes per idle connection (354 measured; 655 before the
			# deadline queues and the smaller struct conn)
    LIMIT_ASAN = 1024	# ASan's allocator adds redzones and shadow (565)

    def test_idle_connection_memory(self):
        if VALGRIND:
            self.skipTest('RSS means nothing under valgrind')
        limit = self.LIMIT_ASAN if sanitized() else self.LIMIT
        c = self.start(workers=1, worker_connections=self.N + 64,
                       keepalive_timeout=Raw('75s'),
                       server={'access_log': 'off'})
        c.write('small.txt', b'small\n')
        worker = c.wait_workers(1)[0]
        # Warm up the worker's allocator and its caches first.
        for _ in range(3):
            idle_client(c).close()
        before = rss_bytes(worker)
        conns = []
        try:
            for _ in range(self.N):
                conns.append(idle_client(c))
            after = rss_bytes(worker)
            self.assertTrue(all(conn.is_open() for conn in conns))
        finally:
            for conn in conns:
                conn.close()
        per = (after - before) / self.N
        print('\nidle keep-alive connections: %d, worker RSS %.1f -> '
              '%.1f MB, %.0f bytes each' %
              (self.N, before / 2**20, after / 2**20, per))
        self.assertLess(per, limit,
                        'each idle connection costs %.0f bytes' % per)
