"""
The reverse proxy as clients and origins see it: locations, header
rewriting both ways, request bodies, keep-alive to the upstream, body
framings relayed to HTTP/1.1 and 1.0 clients, errors (502, 504, aborted
bodies), pipelining, retries, weights and peers marked down.  The origin
is a real HTTP/1.1 server (origin.py) on a free loopback port.
"""
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time

from harness import (CorralTestCase, build_request, free_port, parse_response,
                     parse_responses, quote, read_after_refused, read_text,
                     strace_lines, strace_wrapper, wait_until)
from origin import body


class ProxyTestCase(CorralTestCase):

    def start_proxy(self, servers, locations=None, upstream=None, **kw):
        """
        A server with upstream "app" of servers; locations maps prefixes
        to an upstream name or None (files).  upstream= adds directives.
        """
        c = self.make(**kw)
        locations = locations or {'/api/': 'app'}
        text = c.config_text()
        locs = ''
        for prefix, up in locations.items():
            locs += '  location %s {\n' % quote(prefix)
            if up:
                locs += '    proxy = %s\n' % quote(up)
            locs += '  }\n'
        at = text.index('server {\n') + len('server {\n')
        text = text[:at] + locs + text[at:]
        text += 'upstream "app" {\n  servers = {%s}\n' % ', '.join(
            quote(s) for s in servers)
        for k, v in (upstream or {}).items():
            text += '  %s = %s\n' % (k, v)
        text += '}\n'
        with open(c.conf_path, 'w') as f:
            f.write(text)
        c.start()
        return c

    def received(self, o, path):
        r = o.last(path)
        self.assertIsNotNone(r, 'the origin saw no request for %s' % path)
        return r, {k.lower(): v for k, v in r['headers']}


class ProxyBasicsTest(ProxyTestCase):

    def test_get_and_head(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        r = c.get('/api/size/3000')
        self.assertBody(r, body(3000))
        self.assertEqual(r.header('X-Origin'), 'origin')
        self.assertEqual(r.header('Server'), 'corral/0.1.0')
        self.assertEqual(r.headers.count('Date'), 1)
        self.assertEqual(o.count('/api/size/3000'), 1)
        r = c.get('/api/size/3000', method='HEAD')
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header('Content-Length'), '3000')
        self.assertEqual(r.body, b'')
        self.assertEqual(o.last()['method'], 'HEAD')
        self.assertBody(c.get('/api/size/0'), b'')
        r = c.get('/api/status/404')
        self.assertEqual(r.status, 404)
        self.assertEqual(r.body, b'status 404\n')
        self.assertNoLogErrors(c)

    def test_status_line_keeps_the_origins_reason(self):
        o = self.origin()
        o.script('/api/teapot', status=418, body=b'short and stout\n')
        o.script('/api/long', status=299, body=b'x',
                 reason='R' * 2000)
        c = self.start_proxy([o.addr])
        for path, status, reason in (('/api/status/200', 200, 'X'),
                                     ('/api/teapot', 418, 'X'),
                                     ('/api/long', 299, 'R' * 2000)):
            r = c.get(path)
            self.assertEqual((r.status, r.reason), (status, reason), path)
        self.assertEqual(r.body, b'x')

    def test_longest_prefix_and_files_outside(self):
        o = self.origin()
        c = self.start_proxy([o.addr], {'/api/': 'app',
                                        '/api/files/': None,
                                        '/api/files/deep/': 'app'})
        c.write('index.html', b'home\n')
        c.write('api/files/f.txt', b'from disk\n')
        self.assertBody(c.get('/'), b'home\n')
        self.assertBody(c.get('/api/files/f.txt'), b'from disk\n')
        self.assertBody(c.get('/api/files/deep/x'), b'ok /api/files/deep/x\n')
        self.assertBody(c.get('/api/other'), b'ok /api/other\n')
        # Matched on the normalised path, forwarded as received.
        self.assertBody(c.get('/api/./files/../z%41?q=1'),
                        b'ok /api/./files/../z%41\n')
        self.assertEqual(o.last()['target'], '/api/./files/../z%41?q=1')
        self.assertEqual(o.count('/api/files/f.txt'), 0)
        self.assertEqual(o.count('/'), 0)

    def test_headers_rewritten_both_ways(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        r = c.get('/api/echo', host='example.test:8080', headers=[
            ('Connection', 'X-Secret, keep-alive'),
            ('X-Secret', 'hop'),
            ('Keep-Alive', 'timeout=9'),
            ('TE', 'trailers'),
            ('Proxy-Connection', 'keep-alive'),
            ('X-Forwarded-For', '6.6.6.6'),
            ('X-Forwarded-Proto', 'https'),
            ('X-Forwarded-Host', 'evil.test'),
            ('X-Kept', 'yes')])
        self.assertEqual(r.status, 200)
        _, h = self.received(o, '/api/echo')
        for gone in ('connection', 'x-secret', 'keep-alive', 'te',
                     'proxy-connection'):
            self.assertNotIn(gone, h)
        self.assertEqual(h['host'], 'example.test:8080')
        self.assertEqual(h['x-forwarded-for'], '127.0.0.1')
        self.assertEqual(h['x-forwarded-proto'], 'http')
        self.assertEqual(h['x-forwarded-host'], 'example.test:8080')
        self.assertEqual(h['x-kept'], 'yes')
        names = [k.lower() for k, _ in o.last()['headers']]
        self.assertEqual(names.count('x-forwarded-for'), 1)
        # The origin's Keep-Alive does not reach the client.
        r = c.get('/api/plain')
        self.assertEqual(r.status, 200)
        self.assertNotIn('Keep-Alive', r.headers)
        self.assertNotIn('Connection', r.headers)
        self.assertEqual(r.header('X-Origin'), 'origin')

    def test_absolute_form_sends_origin_form(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        r = c.get('http://localhost/api/echo?a=b')
        self.assertEqual(r.status, 200)
        self.assertEqual(o.last()['target'], '/api/echo?a=b')


class ProxyBodyTest(ProxyTestCase):

    def test_content_length_body(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        for n in (5, 1000000):
            data = os.urandom(n)
            r = c.get('/api/echo', method='POST', body=data,
                      headers=[('Content-Length', str(n))])
            self.assertEqual(r.status, 200)
            req, h = self.received(o, '/api/echo')
            self.assertEqual(h['content-length'], str(n))
            self.assertEqual(req['body'], data)

    def test_chunked_body(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        data = os.urandom(1000000)
        wire = bytearray()
        for i in range(0, len(data), 65536):
            piece = data[i:i + 65536]
            wire += b'%x\r\n' % len(piece) + piece + b'\r\n'
        wire += b'0\r\n\r\n'
        r = c.get('/api/echo', method='POST', body=bytes(wire),
                  headers=[('Transfer-Encoding', 'chunked')])
        self.assertEqual(r.status, 200)
        req, h = self.received(o, '/api/echo')
        self.assertEqual(h['transfer-encoding'], 'chunked')
        self.assertNotIn('content-length', h)
        self.assertEqual(req['body'], data)

    def test_body_over_limit_is_413_and_not_forwarded(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        r = c.get('/api/echo', method='POST', body=b'',
                  headers=[('Content-Length', str(2 * 1024 * 1024))])
        self.assertEqual(r.status, 413)
        self.assertEqual(o.count('/api/echo'), 0)

    def test_slow_body_streams_before_it_ends(self):
        """The origin sees the first bytes before the client sent all."""
        o = self.origin()
        c = self.start_proxy([o.addr])
        with c.connect() as conn:
            conn.send(build_request('/api/echo', method='PUT', headers=[
                ('Content-Length', '200000')]) + b'a' * 100000)
            # Not answered yet: the origin waits for the rest...
            self.assertTrue(wait_until(lambda: o.connections > 0, 5))
            time.sleep(0.2)
            self.assertEqual(o.count('/api/echo'), 0)
            conn.send(b'b' * 100000)
            r = conn.read_response()
            self.assertEqual(r.status, 200)
        self.assertEqual(o.last('/api/echo')['body'],
                         b'a' * 100000 + b'b' * 100000)


class ProxyKeepaliveTest(ProxyTestCase):

    def test_connections_are_reused(self):
        o = self.origin()
        c = self.start_proxy([o.addr], workers=2,
                             upstream={'keepalive': 4})
        c.wait_workers(2)
        for i in range(1000):
            with c.connect() as conn:
                conn.send(build_request('/api/k%d' % (i % 10)))
                self.assertEqual(conn.read_response().status, 200)
        self.assertEqual(sum(o.count('/api/k%d' % i) for i in range(10)),
                         1000)
        self.assertLessEqual(o.connections, 2 * 4)

    def test_origin_restarted_while_pooled(self):
        o = self.origin()
        port = o.port
        c = self.start_proxy([o.addr])
        with c.connect() as conn:
            for _ in range(3):
                conn.send(build_request('/api/a'))
                self.assertEqual(conn.read_response().status, 200)
            o.stop()
            o2 = self.origin(port, name='second')
            conn.send(build_request('/api/a'))
            r = conn.read_response()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.header('X-Origin'), 'second')
        self.assertNoLogErrors(c)

    def test_idempotent_request_retried_when_reused_connection_dies(self):
        # The pooled connection passes the MSG_PEEK check, then the origin
        # closes it under the request without answering: a GET goes again
        # on a fresh connection, and the client never knows.
        o = self.origin()
        c = self.start_proxy([o.addr], upstream={'keepalive': 4})
        self.assertEqual(c.get('/api/size/10').status, 200)
        self.assertEqual(o.connections, 1)
        r = c.get('/api/drop-reused')
        self.assertBody(r, b'fresh\n')
        self.assertEqual(o.dropped, 1)
        self.assertEqual(o.connections, 2)
        self.assertEqual(o.count('/api/drop-reused'), 2)

    def test_post_not_retried_when_reused_connection_dies(self):
        # A POST may have had its effect: it is not sent twice.
        o = self.origin()
        c = self.start_proxy([o.addr], upstream={'keepalive': 4})
        self.assertEqual(c.get('/api/size/10').status, 200)
        with c.connect() as conn:
            conn.send(build_request('/api/drop-reused', method='POST',
                                    headers=[('Content-Length', '2')]) +
                      b'hi')
            self.assertEqual(conn.read_response().status, 502)
        self.assertEqual(o.dropped, 1)
        self.assertEqual(o.count('/api/drop-reused'), 1)

    def test_pooled_request_goes_out_at_once(self):
        # A GET on a pooled connection is written to the origin at once:
        # no epoll_ctl() on that connection while it is taken from the
        # pool and given back, and no MSG_PEEK (the pool watches its idle
        # connections, and a GET may be retried).
        wrapper, trace = strace_wrapper(
            self, ('connect', 'epoll_ctl', 'sendto', 'sendmsg', 'recvfrom'))
        o = self.origin()
        c = self.start_proxy([o.addr], workers=1, upstream={'keepalive': 4},
                             wrapper=wrapper)
        c.wait_workers(1)
        with c.connect(timeout=15) as conn:
            for i in range(4):
                conn.send(build_request('/api/size/%d' % (100 + i)))
                self.assertBody(conn.read_response(), body(100 + i))
        c.stop()
        self.assertEqual(o.connections, 1)
        calls = self.upstream_calls(trace, o.port)
        sends = [k for k in calls if k.startswith('sendto(')]
        self.assertEqual(len(sends), 4, '\n'.join(calls))
        # From the first answer (on the new connection) to the last one.
        reads = [i for i, k in enumerate(calls) if k.startswith('recvfrom(')
                 and 'MSG_PEEK' not in k]
        pooled = calls[reads[0] + 1:reads[-1]]
        self.assertEqual([k for k in pooled if k.startswith('epoll_ctl(')],
                         [], '\n'.join(calls))
        self.assertEqual([k for k in calls if 'MSG_PEEK' in k], [],
                         '\n'.join(calls))

    def upstream_calls(self, trace, port):
        """The traced calls on the worker's connection to port, in order
        (epoll_ctl() by the fd it changes)."""
        calls = []
        who = None
        for pid, call in strace_lines(trace):
            m = re.match(r'^(\w+)\((.*)$', call)
            if not m:
                continue
            name, args = m.groups()
            if who is None:
                c = re.match(r'^(\d+),.*htons\(%d\)' % port, args)
                if name == 'connect' and c:
                    who = (pid, c.group(1))
                continue
            fds = args.split(', ')
            fd = fds[2] if name == 'epoll_ctl' and len(fds) > 2 \
                else fds[0]
            if pid == who[0] and fd == who[1]:
                calls.append('%s(%s' % (name, args[:100]))
        self.assertIsNotNone(who, 'no connect to port %d traced' % port)
        return calls

    def test_connection_close_from_origin_not_reused(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        self.assertBody(c.get('/api/conn-close/10'), body(10))
        self.assertBody(c.get('/api/conn-close/10'), body(10))
        self.assertEqual(o.connections, 2)
        self.assertNoLogErrors(c)


class ProxySmugglingTest(ProxyTestCase):
    """Header smuggling through the proxy (issue 14)."""

    def test_underscore_names_dropped_by_default(self):
        # A CGI-style origin maps '_' to '-': these would pass for a second
        # Transfer-Encoding and a forged X-Forwarded-For (nginx's
        # underscores_in_headers off drops them the same way).
        o = self.origin()
        c = self.start_proxy([o.addr])
        with c.connect() as conn:
            conn.send(build_request('/api/echo', method='POST', headers=[
                ('Content-Length', '5'),
                ('Transfer_Encoding', 'chunked'),
                ('X_Forwarded_For', '6.6.6.6'),
                ('X_Custom', 'u'),
                ('X-Custom', 'd')]) + b'hello')
            r = conn.read_response()
            self.assertEqual(r.status, 200)
            # The connection goes on: nothing was smuggled behind.
            conn.send(build_request('/api/after'))
            self.assertBody(conn.read_response(), b'ok /api/after\n')
        req, h = self.received(o, '/api/echo')
        self.assertEqual(req['body'], b'hello')
        names = [k for k, _ in req['headers']]
        for gone in ('Transfer_Encoding', 'X_Forwarded_For', 'X_Custom'):
            self.assertNotIn(gone, names)
        self.assertEqual(h['x-forwarded-for'], '127.0.0.1')
        self.assertEqual(h['x-custom'], 'd')
        self.assertNotIn('transfer-encoding', h)
        self.assertEqual(h['content-length'], '5')
        c.wait_log(r'\[info\].*header "Transfer_Encoding" not passed on')

    def test_underscores_in_headers_on_passes_them(self):
        o = self.origin()
        c = self.start_proxy([o.addr],
                             server={'underscores_in_headers': True})
        r = c.get('/api/echo', headers=[('X_Custom', 'u'),
                                        ('X_Forwarded_For', '6.6.6.6')])
        self.assertEqual(r.status, 200)
        req, h = self.received(o, '/api/echo')
        self.assertIn(('X_Custom', 'u'), req['headers'])
        self.assertIn(('X_Forwarded_For', '6.6.6.6'), req['headers'])
        # corral's own X-Forwarded-For is still the only one with a '-'.
        self.assertEqual(h['x-forwarded-for'], '127.0.0.1')

    def test_connection_may_not_name_host_or_framing(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        cases = [
            ('GET', [('Connection', 'Host')], b''),
            ('GET', [('Connection', 'close, HOST')], b''),
            ('POST', [('Connection', 'Content-Length'),
                      ('Content-Length', '5')], b'hello'),
            ('POST', [('Connection', 'keep-alive, transfer-encoding'),
                      ('Transfer-Encoding', 'chunked')],
             b'5\r\nhello\r\n0\r\n\r\n'),
        ]
        for method, hdrs, data in cases:
            with self.subTest(hdrs=hdrs), c.connect() as conn:
                conn.send(build_request('/api/echo', method=method,
                                        headers=hdrs) + data)
                r = conn.read_response()
                self.assertEqual(r.status, 400, r)
                self.assertEqual(r.header('Connection'), 'close')
                self.assertTrue(conn.closed_within(5))
        self.assertEqual(o.count('/api/echo'), 0)
        c.wait_log(r'\[info\].*Connection names "transfer-encoding"')
        # Any other option is removed, and the request goes.
        r = c.get('/api/echo', headers=[('Connection', 'X-Opt'),
                                        ('X-Opt', '1'), ('X-Kept', '2')])
        self.assertEqual(r.status, 200)
        _, h = self.received(o, '/api/echo')
        self.assertNotIn('x-opt', h)
        self.assertEqual(h['x-kept'], '2')
        self.assertEqual(h['host'], 'localhost')


class ProxyUnixSocketTest(ProxyTestCase):
    """Upstreams on unix sockets ("unix:/path"), as php-fpm listens."""

    def unix_origin(self, name='origin'):
        d = tempfile.mkdtemp(prefix='corral-sock-')
        os.chmod(d, 0o755)
        self.addCleanup(shutil.rmtree, d, True)
        path = os.path.join(d, 'app.sock')
        return self.origin(unix=path, name=name), path

    def test_requests_bodies_and_reuse_over_a_unix_socket(self):
        o, path = self.unix_origin()
        c = self.start_proxy([o.addr], upstream={'keepalive': 4})
        with c.connect() as conn:
            for i in range(20):
                conn.send(build_request('/api/size/%d' % (1000 * i)))
                self.assertBody(conn.read_response(), body(1000 * i))
            data = os.urandom(300000)
            conn.send(build_request('/api/echo', method='POST', headers=[
                ('Content-Length', str(len(data)))]) + data)
            r = conn.read_response()
            self.assertEqual(r.status, 200)
        self.assertEqual(o.last('/api/echo')['body'], data)
        # One connection carried them all.
        self.assertEqual(o.connections, 1)
        _, h = self.received(o, '/api/echo')
        self.assertEqual(h['host'], 'localhost')
        self.assertEqual(h['x-forwarded-for'], '127.0.0.1')
        self.assertNoLogErrors(c)

    def test_http10_without_host_names_localhost(self):
        # "unix:/path" is no Host value: the origin gets localhost.
        o, _ = self.unix_origin()
        c = self.start_proxy([o.addr])
        with c.connect() as conn:
            conn.send(b'GET /api/echo HTTP/1.0\r\n\r\n')
            r = parse_response(conn.read_until_close())[0]
        self.assertEqual(r.status, 200)
        _, h = self.received(o, '/api/echo')
        self.assertEqual(h['host'], 'localhost')

    def test_missing_socket_is_502_and_peer_weights_mix(self):
        o, path = self.unix_origin(name='unix')
        t = self.origin(name='tcp')
        c = self.start_proxy(
            [o.addr + ' weight=2', t.addr],
            upstream={'keepalive': 0, 'max_fails': 0,
                      'next_upstream': 'off'})
        names = [c.get('/api/name').body for _ in range(6)]
        self.assertEqual(names.count(b'unix'), 4, names)
        self.assertEqual(names.count(b'tcp'), 2, names)
        o.stop()                        # the socket file goes too
        statuses = [c.get('/api/name').status for _ in range(3)]
        self.assertEqual(sorted(statuses), [200, 502, 502], statuses)
        wait_until(lambda: 'connect: No such file or directory' in
                   read_text(c.error_log), 5)
        self.assertIn('upstream unix:%s' % path, read_text(c.error_log))


class ProxyFramingTest(ProxyTestCase):

    def raw(self, c, path, version='HTTP/1.1'):
        with c.connect() as conn:
            conn.send(build_request(path, version=version,
                                    headers=[('Connection', 'close')]))
            return conn.read_until_close()

    def test_chunked_relayed_as_is_to_11(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        data = self.raw(c, '/api/chunked/2500')
        head, _, wire = data.partition(b'\r\n\r\n')
        self.assertIn(b'\r\nTransfer-Encoding: chunked', head)
        self.assertNotIn(b'Content-Length', head)
        want = b''
        b = body(2500)
        for i in range(0, 2500, 1000):
            want += b'%x\r\n' % len(b[i:i + 1000]) + b[i:i + 1000] + b'\r\n'
        self.assertEqual(wire, want + b'0\r\n\r\n')
        # On a kept-alive connection the next response follows.
        with c.connect() as conn:
            conn.send(build_request('/api/chunked/100000') +
                      build_request('/api/x'))
            r = conn.read_response()
            self.assertEqual(r.body, body(100000))
            self.assertEqual(conn.read_response().body, b'ok /api/x\n')

    def test_large_body_through_a_slow_reader(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        n = 8000000
        s = socket.create_connection(('127.0.0.1', c.port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        # The second asks to close, so the end of the stream ends the
        # reading: parsing 16 MB again at each read took this client 20 s
        # of CPU, over its deadline on a loaded machine.
        s.sendall(build_request('/api/size/%d' % n) +
                  build_request('/api/chunked/%d' % n,
                                headers=[('Connection', 'close')]))
        buf = bytearray()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            d = s.recv(65536)
            if not d:
                break
            buf += d
        s.close()
        got = parse_responses(bytes(buf))
        self.assertEqual(len(got), 2)
        for r in got:
            self.assertEqual(r.status, 200)
            self.assertTrue(r.body == body(n), 'body differs')

    def test_pipelined_answers_to_a_client_that_reads_late(self):
        # A body leaves from the upstream's read buffer, and only what the
        # client's socket does not take is copied.  This client reads
        # nothing until corral's sends are refused (the first answer is
        # larger than both sockets can hold), then gets every byte of
        # each answer, in order: a length, the origin's chunks, a HEAD, a
        # small one, and one that ends at close (which ends the stream).
        wrapper, trace = strace_wrapper(self, ('accept', 'accept4',
                                               'sendto', 'sendmsg'))
        o = self.origin()
        c = self.start_proxy([o.addr], workers=1, wrapper=wrapper,
                             upstream={'keepalive': 4})
        c.wait_workers(1)
        asked = [('GET', '/api/size/6000001', 6000001),
                 ('GET', '/api/chunked/300007', 300007),
                 ('HEAD', '/api/size/5000', 0),
                 ('GET', '/api/size/4000', 4000),
                 ('GET', '/api/size/70001', 70001),
                 ('GET', '/api/close/200003', 200003)]
        data = read_after_refused(self, c.port, trace, b''.join(
            build_request(p, method=m) for m, p, _ in asked))
        got = parse_responses(data, [m for m, _, _ in asked])
        self.assertEqual([r.status for r in got], [200] * len(asked))
        for (m, p, n), r in zip(asked, got):
            self.assertTrue(r.body == body(n), '%s %s: body differs' % (m, p))
        self.assertEqual(got[1].tokens('Transfer-Encoding'), {'chunked'})

    def test_chunked_decoded_for_10(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        data = self.raw(c, '/api/chunked/250000', 'HTTP/1.0')
        head, _, b = data.partition(b'\r\n\r\n')
        self.assertNotIn(b'Transfer-Encoding', head)
        self.assertNotIn(b'Content-Length', head)
        self.assertIn(b'Connection: close', head)
        self.assertEqual(b, body(250000))

    def test_until_close_body(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        for version in ('HTTP/1.1', 'HTTP/1.0'):
            with c.connect() as conn:
                conn.send(build_request('/api/close/300000', version=version))
                data = conn.read_until_close()
            head, _, b = data.partition(b'\r\n\r\n')
            self.assertIn(b'Connection: close', head)
            self.assertNotIn(b'Content-Length', head)
            self.assertEqual(b, body(300000))

    def test_204_and_304_without_body(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        with c.connect() as conn:
            conn.send(build_request('/api/status/204') +
                      build_request('/api/status/304') +
                      build_request('/api/x'))
            self.assertEqual(conn.read_response().status, 204)
            self.assertEqual(conn.read_response().status, 304)
            self.assertEqual(conn.read_response().body, b'ok /api/x\n')

    def test_pipelined_proxied_and_static_in_order(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        c.write('a.txt', b'static a\n')
        reqs = [('/a.txt', b'static a\n'),
                ('/api/delay/200', b'late\n'),
                ('/a.txt', b'static a\n'),
                ('/api/chunked/50000', body(50000)),
                ('/api/size/70000', body(70000)),
                ('/a.txt', b'static a\n')]
        with c.connect() as conn:
            conn.send(b''.join(build_request(p) for p, _ in reqs))
            for path, want in reqs:
                r = conn.read_response()
                self.assertEqual(r.status, 200, path)
                self.assertEqual(r.body, want, path)


class ProxyErrorTest(ProxyTestCase):

    def test_connect_refused_is_502(self):
        c = self.start_proxy(['127.0.0.1:%d' % free_port()])
        r = c.get('/api/x')
        self.assertEqual(r.status, 502)
        c.wait_log(r'\[error\].*upstream 127\.0\.0\.1:\d+: connect: '
                   r'Connection refused')

    def test_read_timeout_is_504(self):
        o = self.origin()
        c = self.start_proxy([o.addr], upstream={'read_timeout': '1s'})
        # The origin answers long after the 1 s timeout, so that a loaded
        # machine's delays cannot pass for waiting on it.
        t = time.monotonic()
        r = c.request(build_request('/api/delay/12000'), timeout=20)
        took = time.monotonic() - t
        self.assertEqual(r.status, 504)
        self.assertGreaterEqual(took, 0.9)
        self.assertLess(took, 8)
        c.wait_log(r'\[error\].*upstream .*: read timed out')

    def test_read_timeout_runs_between_two_reads(self):
        # A body that trickles, a byte every 0.5 s, takes longer than the
        # 3 s read timeout in all, but no gap comes near it: each read
        # starts the timeout again (nginx's proxy_read_timeout).
        ls = socket.socket()
        ls.bind(('127.0.0.1', 0))
        ls.listen(1)
        self.addCleanup(ls.close)
        payload = b'trickled'

        def serve():
            conn, _ = ls.accept()
            with conn:
                got = b''
                while b'\r\n\r\n' not in got:
                    more = conn.recv(4096)
                    if not more:
                        return
                    got += more
                conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\n'
                             b'\r\n' % len(payload))
                for i in range(len(payload)):
                    time.sleep(0.5)
                    conn.sendall(payload[i:i + 1])

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        c = self.start_proxy(['127.0.0.1:%d' % ls.getsockname()[1]],
                             upstream={'read_timeout': '3s'})
        start = time.monotonic()
        r = c.request(build_request('/api/slow'), timeout=30)
        took = time.monotonic() - start
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, payload)
        self.assertGreater(took, 3.5, 'the body came faster than the '
                           'timeout: nothing was shown')
        t.join(10)

    def test_cl_and_te_is_502_and_not_reused(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        self.assertEqual(c.get('/api/x').status, 200)
        self.assertEqual(o.connections, 1)
        r = c.get('/api/bad/cl-te')
        self.assertEqual(r.status, 502)
        self.assertEqual(o.connections, 1)	# it went on the pooled one
        self.assertEqual(c.get('/api/x').status, 200)
        self.assertEqual(o.connections, 2)
        c.wait_log(r'\[error\].*invalid response header')

    def test_bad_header_byte_is_502(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        self.assertEqual(c.get('/api/bad/header').status, 502)

    def test_truncated_body_aborts_client(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        with c.connect() as conn:
            conn.send(build_request('/api/bad/truncated'))
            data = conn.read_until_close()
        head, _, b = data.partition(b'\r\n\r\n')
        self.assertIn(b' 200 ', head.split(b'\r\n')[0])
        self.assertIn(b'Content-Length: 1000', head)
        self.assertEqual(b, b'x' * 10)
        c.wait_log(r'\[error\].*connection closed after 10 body bytes')

    def test_client_gone_while_waiting(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        with c.connect() as conn:
            conn.send(build_request('/api/delay/300'))
            self.assertTrue(wait_until(lambda: o.count('/api/delay/300'),
                                       5))
        # The upstream connection was closed, not pooled mid-response.
        self.assertEqual(c.get('/api/x').status, 200)
        self.assertEqual(o.connections, 2)

    def test_graceful_stop_finishes_proxied_request(self):
        o = self.origin()
        c = self.start_proxy([o.addr])
        with c.connect() as conn:
            conn.send(build_request('/api/delay/500'))
            self.assertTrue(wait_until(lambda: o.count('/api/delay/500'),
                                       5))
            os.kill(c.master_pid, signal.SIGQUIT)
            r = conn.read_response()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.body, b'late\n')
        c.expect_exit = True
        c.proc.wait(10)
        self.assertEqual(c.proc.returncode, 0)


class ProxyBalanceTest(ProxyTestCase):

    def test_weights(self):
        a = self.origin(name='a')
        b = self.origin(name='b')
        c = self.start_proxy([a.addr, b.addr + ' weight=3'])
        with c.connect() as conn:
            for _ in range(400):
                conn.send(build_request('/api/w'))
                self.assertEqual(conn.read_response().status, 200)
        self.assertLessEqual(abs(a.count('/api/w') - 100), 15)
        self.assertLessEqual(abs(b.count('/api/w') - 300), 45)

    def test_peer_marked_down_is_skipped(self):
        a = self.origin(name='a')
        dead = '127.0.0.1:%d' % free_port()
        c = self.start_proxy([a.addr, dead],
                             upstream={'max_fails': 2,
                                       'fail_timeout': '60s',
                                       'next_upstream': 'off'})
        statuses = []
        for _ in range(12):
            statuses.append(c.get('/api/d').status)
        self.assertEqual(statuses.count(502), 2, statuses)
        self.assertEqual(statuses[-8:], [200] * 8)
        self.assertEqual(a.count('/api/d'), 10)
        c.wait_log(r'\[error\].*server 127\.0\.0\.1:\d+ marked down')


class ProxyConfigTest(ProxyTestCase):

    def check(self, text):
        c = self.make()
        path = os.path.join(c.tmp, 'bad.conf')
        base = c.config_text()
        with open(path, 'w') as f:
            f.write(base + text)
        out = c.check_config(path)
        return out.returncode, out.stderr + out.stdout, base.count('\n')

    def test_errors_name_the_line(self):
        cases = [
            ('server {\n root = "/"\n names = {"x"}\n'
             ' location "/a/" {\n proxy = "nope"\n }\n}\n', 5,
             'proxy "nope": no upstream has that name'),
            ('upstream "u" {\n servers = {"127.0.0.1:1 weight=101"}\n}\n',
             2, 'weight=N, N from 1 to 100'),
            ('upstream "u" {\n servers = {"local_host!:80"}\n}\n', 2,
             'not an IP address or a host name'),
            ('upstream "u" {\n servers = {"127.0.0.1:1"}\n}\n'
             'upstream "u" {\n servers = {"127.0.0.1:2"}\n}\n', 4,
             'duplicate'),
            ('server {\n root = "/"\n names = {"x"}\n'
             ' location "api" {\n }\n}\n', 5, "must start with '/'"),
        ]
        for text, line, msg in cases:
            with self.subTest(msg=msg):
                rc, out, base = self.check(text)
                self.assertNotEqual(rc, 0, out)
                self.assertIn('bad.conf:%d:' % (base + line), out)
                self.assertIn(msg, out)

    def test_upstream_defined_after_use(self):
        rc, out, _ = self.check(
            'server {\n root = "/"\n names = {"x"}\n'
            ' location "/a/" {\n proxy = "later"\n }\n}\n'
            'upstream "later" {\n servers = {"127.0.0.1:1", '
            '"[::1]:2 weight=100"}\n keepalive = 0\n}\n')
        self.assertEqual(rc, 0, out)
