"""Persistent connections, pipelining and request bodies."""

import os
import re
import socket
import subprocess
import time

from harness import CorralTestCase, build_request, need_tool, parse_responses


def files(c, n, size=None):
    """Writes n distinct files f0..f(n-1); returns [(path, data)]."""
    out = []
    for i in range(n):
        data = (('file %d\n' % i).encode() * (i + 1) if size is None
                else os.urandom(size))
        c.write('f%d.txt' % i, data)
        out.append(('/f%d.txt' % i, data))
    return out


class KeepAliveTest(CorralTestCase):

    def test_http11_persists(self):
        c = self.start()
        fs = files(c, 5)
        with c.connect() as conn:
            for path, data in fs * 2:
                conn.send(build_request(path))
                r = conn.read_response()
                self.assertBody(r, data)
                self.assertNotIn('close', r.tokens('Connection'))
            self.assertTrue(conn.is_open())

    def test_connection_close(self):
        c = self.start()
        fs = files(c, 1)
        with c.connect() as conn:
            conn.send(build_request(fs[0][0], headers=['Connection: close']))
            r = conn.read_response()
            self.assertBody(r, fs[0][1])
            self.assertIn('close', r.tokens('Connection'))
            self.assertClosesAfter(conn)

    def test_connection_close_token_list(self):
        c = self.start()
        fs = files(c, 1)
        with c.connect() as conn:
            conn.send(build_request(fs[0][0],
                                    headers=['Connection: foo, Close']))
            r = conn.read_response()
            self.assertIn('close', r.tokens('Connection'))
            self.assertClosesAfter(conn)

    def test_http10_closes_by_default(self):
        c = self.start()
        fs = files(c, 1)
        with c.connect() as conn:
            conn.send(build_request(fs[0][0], version='HTTP/1.0'))
            r = conn.read_response()
            self.assertBody(r, fs[0][1])
            self.assertNotIn('keep-alive', r.tokens('Connection'))
            self.assertClosesAfter(conn)

    def test_http10_keepalive(self):
        c = self.start()
        fs = files(c, 3)
        with c.connect() as conn:
            for path, data in fs:
                conn.send(build_request(path, version='HTTP/1.0',
                                        headers=['Connection: keep-alive']))
                r = conn.read_response()
                self.assertBody(r, data)
                self.assertIn('keep-alive', r.tokens('Connection'))
            self.assertTrue(conn.is_open())
            conn.send(build_request(fs[0][0], version='HTTP/1.0'))
            self.assertBody(conn.read_response(), fs[0][1])
            self.assertClosesAfter(conn)

    def test_keepalive_requests_limit(self):
        c = self.start(keepalive_requests=3)
        fs = files(c, 3)
        with c.connect() as conn:
            for i, (path, data) in enumerate(fs):
                conn.send(build_request(path))
                r = conn.read_response()
                self.assertBody(r, data)
                if i < 2:
                    self.assertNotIn('close', r.tokens('Connection'))
                else:
                    self.assertIn('close', r.tokens('Connection'))
            self.assertClosesAfter(conn)

    def test_keepalive_requests_limit_pipelined(self):
        c = self.start(keepalive_requests=3)
        fs = files(c, 5)
        with c.connect() as conn:
            conn.send(b''.join(build_request(p) for p, _ in fs))
            data = conn.read_until_close()
        rs = parse_responses(data)
        self.assertEqual(len(rs), 3, rs)
        for r, (_, body) in zip(rs, fs):
            self.assertBody(r, body)
        self.assertIn('close', rs[2].tokens('Connection'))

    def test_idle_keepalive_timeout(self):
        c = self.start(keepalive_timeout='1s')
        fs = files(c, 1)
        with c.connect() as conn:
            conn.send(build_request(fs[0][0]))
            self.assertBody(conn.read_response(), fs[0][1])
            t0 = time.monotonic()
            self.assertTrue(conn.closed_within(3.0),
                            'idle connection still open after 3 s')
            elapsed = time.monotonic() - t0
        self.assertGreater(elapsed, 0.5, 'closed long before the timeout')

    def test_keepalive_timeout_counts_from_the_last_response(self):
        # Each response starts the idle time again (nginx does the same):
        # three requests 1.2 s apart outlive a 2 s keepalive_timeout.
        c = self.start(keepalive_timeout='2s')
        fs = files(c, 1)
        with c.connect() as conn:
            for i in range(3):
                conn.send(build_request(fs[0][0]))
                self.assertBody(conn.read_response(), fs[0][1])
                self.assertFalse(conn.closed_within(1.2),
                                 'closed 1.2 s after response %d' % i)
            t0 = time.monotonic()
            self.assertTrue(conn.closed_within(3.0),
                            'idle connection still open after 4.2 s')
            self.assertGreater(time.monotonic() - t0, 0.3,
                               'closed long before the timeout')

    def test_request_in_single_bytes(self):
        c = self.start()
        fs = files(c, 1)
        with c.connect() as conn:
            for b in build_request(fs[0][0], headers=['X-Pad: abc']):
                conn.send(bytes([b]))
            self.assertBody(conn.read_response(), fs[0][1])


class PipelineTest(CorralTestCase):

    def test_sixteen_pipelined(self):
        c = self.start()
        fs = files(c, 16)
        with c.connect() as conn:
            conn.send(b''.join(build_request(p) for p, _ in fs))
            for path, data in fs:
                self.assertBody(conn.read_response(), data)
            self.assertEqual(conn.buf, b'')
            self.assertTrue(conn.is_open())

    def test_pipelined_with_head(self):
        c = self.start()
        fs = files(c, 6)
        methods = ['GET', 'HEAD', 'GET', 'HEAD', 'HEAD', 'GET']
        with c.connect() as conn:
            conn.send(b''.join(build_request(p, m)
                               for (p, _), m in zip(fs, methods)))
            for (path, data), m in zip(fs, methods):
                r = conn.read_response(m)
                self.assertEqual(r.status, 200)
                self.assertEqual(r.header('Content-Length'), str(len(data)))
                self.assertEqual(r.body, data if m == 'GET' else b'')
            # A HEAD that leaked a body would show up here.
            conn.send(build_request(fs[0][0]))
            self.assertBody(conn.read_response(), fs[0][1])

    def test_pipelined_mixed_sizes(self):
        c = self.start()
        small = files(c, 4)
        big = os.urandom(700 * 1024)
        c.write('big.bin', big)
        order = [small[0], ('/big.bin', big), small[1], ('/big.bin', big),
                 small[2], small[3]]
        with c.connect(timeout=20) as conn:
            conn.send(b''.join(build_request(p) for p, _ in order))
            for path, data in order:
                self.assertBody(conn.read_response(), data)

    def test_pipelined_errors_and_files(self):
        c = self.start()
        fs = files(c, 2)
        with c.connect() as conn:
            conn.send(build_request(fs[0][0]) +
                      build_request('/missing') +
                      build_request('/', 'OPTIONS') +
                      build_request(fs[1][0]))
            self.assertBody(conn.read_response(), fs[0][1])
            self.assertEqual(conn.read_response().status, 404)
            self.assertEqual(conn.read_response().status, 200)
            self.assertBody(conn.read_response(), fs[1][1])

    def test_many_pipelined_in_pieces(self):
        c = self.start()
        fs = files(c, 8)
        stream = b''.join(build_request(p) for p, _ in fs * 8)
        with c.connect(timeout=10) as conn:
            for i in range(0, len(stream), 37):	# splits mid-request
                conn.send(stream[i:i + 37])
            for path, data in fs * 8:
                self.assertBody(conn.read_response(), data)


class ConcurrencyTest(CorralTestCase):

    def test_many_open_connections(self):
        c = self.start(workers=2)
        fs = files(c, 4)
        conns = []
        try:
            for _ in range(300):
                conns.append(c.connect(timeout=15))
            for i, conn in enumerate(conns):
                conn.send(build_request(fs[i % 4][0]))
            for i, conn in enumerate(conns):
                self.assertBody(conn.read_response(), fs[i % 4][1])
            for i, conn in enumerate(conns):	# and again, kept alive
                conn.send(build_request(fs[(i + 1) % 4][0]))
            for i, conn in enumerate(conns):
                self.assertBody(conn.read_response(), fs[(i + 1) % 4][1])
        finally:
            for conn in conns:
                conn.close()

    def test_slow_reader_does_not_block_others(self):
        c = self.start(workers=1)
        big = os.urandom(8 << 20)
        c.write('big.bin', big)
        c.write('small.txt', b'small\n')
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.settimeout(5)
        slow.connect(('127.0.0.1', c.port))
        try:
            slow.sendall(build_request('/big.bin'))
            slow.recv(1000)	# the response has started; now stall
            for _ in range(5):
                self.assertBody(c.get('/small.txt'), b'small\n')
        finally:
            slow.close()
        self.assertBody(c.get('/small.txt'), b'small\n')
        self.assertNoLogErrors(c)


class RequestBodyTest(CorralTestCase):

    def test_get_with_body_then_next(self):
        c = self.start()
        fs = files(c, 2)
        with c.connect() as conn:
            conn.send(build_request(fs[0][0], headers=['Content-Length: 11'],
                                    body=b'hello world') +
                      build_request(fs[1][0]))
            self.assertBody(conn.read_response(), fs[0][1])
            self.assertBody(conn.read_response(), fs[1][1])

    def test_post_then_get(self):
        c = self.start()
        fs = files(c, 1)
        with c.connect() as conn:
            conn.send(build_request('/', 'POST',
                                    headers=['Content-Length: 5'],
                                    body=b'a=b&c') +
                      build_request(fs[0][0]))
            r = conn.read_response()
            self.assertEqual(r.status, 405, r)
            self.assertBody(conn.read_response(), fs[0][1])

    def test_post_large_body_then_get(self):
        c = self.start()
        fs = files(c, 1)
        body = os.urandom(600 * 1024)
        with c.connect(timeout=15) as conn:
            conn.send(build_request('/', 'POST', headers=[
                'Content-Length: %d' % len(body)]) + body +
                build_request(fs[0][0]))
            self.assertEqual(conn.read_response().status, 405)
            self.assertBody(conn.read_response(), fs[0][1])

    def test_chunked_body_then_get(self):
        c = self.start()
        fs = files(c, 2)
        chunked = b'5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n'
        with_trailer = b'3\r\nabc\r\n0\r\nX-Trailer: yes\r\n\r\n'
        with c.connect() as conn:
            conn.send(build_request('/', 'POST',
                                    headers=['Transfer-Encoding: chunked'],
                                    body=chunked) +
                      build_request(fs[0][0],
                                    headers=['Transfer-Encoding: chunked'],
                                    body=with_trailer) +
                      build_request(fs[1][0]))
            self.assertEqual(conn.read_response().status, 405)
            self.assertBody(conn.read_response(), fs[0][1])
            self.assertBody(conn.read_response(), fs[1][1])

    def test_expect_100_continue(self):
        c = self.start()
        fs = files(c, 1)
        with c.connect() as conn:
            conn.send(build_request(fs[0][0], headers=[
                'Content-Length: 5', 'Expect: 100-continue']))
            interim = conn.read_response()
            self.assertEqual(interim.status, 100, interim)
            self.assertEqual(interim.version, 'HTTP/1.1')
            self.assertEqual(interim.head, b'HTTP/1.1 100 Continue')
            conn.send(b'hello')
            self.assertBody(conn.read_response(), fs[0][1])
            conn.send(build_request(fs[0][0]))
            self.assertBody(conn.read_response(), fs[0][1])

    def test_expect_other_417(self):
        c = self.start()
        files(c, 1)
        r = c.get('/f0.txt', headers=['Expect: something-else',
                                      'Content-Length: 0'])
        self.assertEqual(r.status, 417, r)

    def test_body_too_large_413(self):
        c = self.start(max_body_size='1k')
        files(c, 1)
        with c.connect() as conn:
            conn.send(build_request('/f0.txt', 'POST',
                                    headers=['Content-Length: 2048']))
            r = conn.read_response()
            self.assertEqual(r.status, 413, r)

    def test_default_body_limit_1m(self):
        c = self.start()
        files(c, 1)
        r = c.get('/f0.txt', headers=['Content-Length: %d' % (2 << 20)])
        self.assertEqual(r.status, 413, r)

    def test_chunked_body_too_large_413(self):
        c = self.start(max_body_size='1k')
        files(c, 1)
        chunk = b'400\r\n' + b'x' * 1024 + b'\r\n'
        with c.connect() as conn:
            conn.send(build_request('/f0.txt',
                                    headers=['Transfer-Encoding: chunked']) +
                      chunk * 2 + b'0\r\n\r\n')
            r = conn.read_response()
            self.assertEqual(r.status, 413, r)


class ApacheBenchTest(CorralTestCase):

    def ab(self, *args):
        ab = need_tool('ab')
        p = subprocess.run([ab] + list(args), capture_output=True,
                           timeout=60, text=True)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout

    def field(self, out, name):
        m = re.search(r'^%s:\s+(\d+)' % re.escape(name), out, re.M)
        self.assertTrue(m, '%r not in ab output:\n%s' % (name, out))
        return int(m.group(1))

    def test_ab_keepalive(self):
        c = self.start(workers=2)
        c.write('page.html', os.urandom(10000))
        out = self.ab('-k', '-n', '500', '-c', '10', c.url('/page.html'))
        self.assertEqual(self.field(out, 'Complete requests'), 500, out)
        self.assertEqual(self.field(out, 'Failed requests'), 0, out)
        self.assertEqual(self.field(out, 'Keep-Alive requests'), 500, out)
        self.assertNotIn('Non-2xx', out)
        self.assertEqual(self.field(out, 'Document Length'), 10000, out)

    def test_ab_no_keepalive(self):
        c = self.start(workers=2)
        c.write('page.html', b'x' * 100)
        out = self.ab('-n', '300', '-c', '4', c.url('/page.html'))
        self.assertEqual(self.field(out, 'Complete requests'), 300, out)
        self.assertEqual(self.field(out, 'Failed requests'), 0, out)
        self.assertNotIn('Non-2xx', out)
