"""Slow clients: header and body deadlines."""

import socket
import time

from harness import CorralTestCase, build_request, parse_responses


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
