"""Slow clients: header and body deadlines."""

import json
import socket
import time

from harness import CorralTestCase, build_request, parse_responses
from test_proxy import ProxyTestCase


class TimeoutTest(CorralTestCase):

    def trickle(self, conn, step=0.3, limit=5.0):
        """
        Sends one byte every step seconds until the server closes; returns
        (seconds from now to the close, bytes the server sent).
        """
        t0 = time.monotonic()
        got = bytearray()
        while time.monotonic() - t0 < limit:
            try:
                conn.sock.sendall(b'a')
            except (BrokenPipeError, ConnectionResetError):
                break
            conn.sock.settimeout(step)
            try:
                chunk = conn.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
        return time.monotonic() - t0, bytes(got)

    def assertTimedOut(self, data):
        if data:
            rs = parse_responses(data)
            self.assertEqual(len(rs), 1, rs)
            self.assertEqual(rs[0].status, 408, rs[0])

    def test_header_deadline_not_reset_per_byte(self):
        c = self.start(header_timeout='1s')
        c.write('index.html', b'x')
        mark = c.log_mark()
        with c.connect() as conn:
            t0 = time.monotonic()
            conn.send(b'GET /index.html HTTP/1.1\r\nHost: localhost\r\n'
                      b'X-Slow: ')
            # Reset per byte, the deadline would keep it open for as
            # long as the trickle lasts (10 s): 5 s tells the two apart
            # on a loaded machine.
            _, data = self.trickle(conn, limit=10.0)
            elapsed = time.monotonic() - t0
        self.assertLess(elapsed, 5, 'still open %.1f s after the first '
                        'byte: the deadline is reset per byte' % elapsed)
        self.assertGreater(elapsed, 0.6, 'closed before header_timeout')
        self.assertTimedOut(data)
        self.assertEqual(c.get('/index.html').status, 200)
        self.assertNotIn('[error]', c.log_since(mark))

    def test_partial_request_line_times_out(self):
        c = self.start(header_timeout='1s')
        with c.connect() as conn:
            t0 = time.monotonic()
            conn.send(b'GET /index.ht')
            data = conn.read_until_close(timeout=3.0)
            elapsed = time.monotonic() - t0
        self.assertGreater(elapsed, 0.6)
        self.assertTimedOut(data)

    def test_connected_but_silent(self):
        c = self.start(header_timeout='1s', keepalive_timeout='1s')
        with c.connect() as conn:
            data = conn.read_until_close(timeout=3.0)
        self.assertTimedOut(data)

    def test_body_deadline(self):
        c = self.start(body_timeout='1s')
        c.write('index.html', b'x')
        with c.connect() as conn:
            conn.send(build_request('/index.html', 'POST', headers=[
                'Content-Length: 100']) + b'0123456789')
            data = conn.read_until_close(timeout=4.0)
        # The 405 may come before the body is read; what matters is that
        # the server stops waiting for the missing 90 bytes.
        for r in parse_responses(data):
            self.assertIn(r.status, (405, 408), r)


class BodyRateTest(ProxyTestCase):
    """body_timeout runs from the body's last bytes (nginx's
    client_body_timeout); body_min_rate still ends a body that trickles
    (Apache's mod_reqtimeout MinRate).  Bodies go through the proxy to
    origin.py's /api/echo, which answers once it has the whole body."""

    def upload(self, c, size, piece, every, limit):
        """POSTs size bytes, piece bytes every `every` seconds, until done
        or closed; returns (seconds from the first body byte to the end,
        what the server sent, the body)."""
        body = bytes(range(256)) * (size // 256 + 1)
        body = body[:size]
        s = socket.create_connection(('127.0.0.1', c.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(build_request('/api/echo', 'POST', headers=[
            'Content-Length: %d' % size, 'Connection: close']))
        t0 = time.monotonic()
        sent = 0
        try:
            while sent < size and time.monotonic() - t0 < limit:
                s.sendall(body[sent:sent + piece])
                sent += piece
                s.settimeout(every)
                try:
                    if not s.recv(65536, socket.MSG_PEEK):
                        break		# closed
                except socket.timeout:
                    pass
        except (BrokenPipeError, ConnectionResetError):
            pass
        s.settimeout(10)
        got = bytearray()
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += d
        except (ConnectionResetError, socket.timeout):
            pass
        return time.monotonic() - t0, bytes(got), body

    def test_steady_upload_outlives_body_timeout(self):
        # 8 KB at 2 KB/s takes 4 s, twice body_timeout: a deadline from
        # the body's start would cut it.  Gaps of 0.25 s sit far below
        # the 2 s allowed between pieces.
        o = self.origin()
        c = self.start_proxy([o.addr], body_timeout='2s',
                             body_min_rate='1k')
        took, got, body = self.upload(c, 8000, 500, 0.25, 20)
        self.assertGreater(took, 3.0)
        rs = parse_responses(got)
        self.assertEqual([r.status for r in rs], [200], got[:300])
        self.assertEqual(json.loads(rs[0].body)['body'].encode('latin-1'),
                         body)

    def test_trickle_is_cut_at_the_minimum_rate(self):
        # 1,000 bytes, then a byte every 0.2 s: each piece is in time for
        # body_timeout, but at 1k/s the body has earned 2 s + 1,000/1,024
        # s (about 3 s) in all.  Cut by 7 s (a trickle held open would
        # last the whole 15 s), not before 2.5 s.
        o = self.origin()
        c = self.start_proxy([o.addr], body_timeout='2s',
                             body_min_rate='1k')
        mark = c.log_mark()
        s = socket.create_connection(('127.0.0.1', c.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(build_request('/api/echo', 'POST', headers=[
            'Content-Length: 100000']) + b'x' * 1000)
        t0 = time.monotonic()
        closed = None
        while time.monotonic() - t0 < 15:
            try:
                s.sendall(b'x')
                s.settimeout(0.2)
                if not s.recv(65536):
                    closed = time.monotonic() - t0
                    break
            except socket.timeout:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = time.monotonic() - t0
                break
        self.assertIsNotNone(closed, 'a trickling body kept its '
                             'connection for 15 s')
        self.assertLess(closed, 7.0)
        self.assertGreater(closed, 2.5)
        c.wait_log(r'timed out sending a request body', mark=mark)
