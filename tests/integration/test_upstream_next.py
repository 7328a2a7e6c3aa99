"""
next_upstream: a request whose peer fails before answering goes to
another peer of the group, as nginx's proxy_next_upstream.  Peers are
real sockets: a live origin (origin.py), a closed port, a server that
hangs up on every request and one that never answers.
"""
import json
import os
import re
import socket
import threading

from harness import build_request, read_text, wait_until
from origin import body
from test_proxy import ProxyTestCase


class Rude:
    """
    A loopback server that reads each request head and then hangs up
    (silent=False) or keeps the connection without a word (silent=True).
    """

    def __init__(self, silent=False):
        self.silent = silent
        self.requests = 0
        self.lock = threading.Lock()
        self.held = []
        self.current = None
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(64)
        self.addr = '127.0.0.1:%d' % self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.current = s
            buf = b''
            try:
                while b'\r\n\r\n' not in buf:
                    data = s.recv(65536)
                    if not data:
                        break
                    buf += data
            except OSError:
                pass
            if b'\r\n\r\n' in buf:
                with self.lock:
                    self.requests += 1
            if self.silent:
                self.held.append(s)
            else:
                s.close()

    def stop(self):
        # The thread ends before any descriptor is closed: left in
        # accept() or recv() on a closed socket, it can take a later
        # test's socket that gets the same number (see test_cache_rfc's
        # raw_origin).  shutdown() wakes it.
        with self.lock:
            socks = [self.sock, self.current] + self.held
        for s in socks:
            try:
                if s is not None:
                    s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(10)
        for s in socks:
            if s is not None:
                s.close()


class NextUpstreamTest(ProxyTestCase):

    def rude(self, silent=False):
        r = Rude(silent)
        self.addCleanup(r.stop)
        return r

    def refusing(self, n):
        """
        n addresses that refuse connections: bound, never listening, so
        no other test's server can take their ports meanwhile (as it could
        a free_port()'s).
        """
        held = [socket.socket() for _ in range(n)]
        for s in held:
            self.addCleanup(s.close)
            s.bind(('127.0.0.1', 0))
        return ['127.0.0.1:%d' % s.getsockname()[1] for s in held]

    def post(self, c, data):
        with c.connect() as conn:
            conn.send(build_request('/api/echo', method='POST', headers=[
                ('Content-Length', str(len(data)))]) + data)
            return conn.read_response()

    def test_refused_peer_never_costs_a_request(self):
        a = self.origin(name='a')
        (dead,) = self.refusing(1)
        c = self.start_proxy([dead, a.addr],
                             upstream={'max_fails': 0, 'keepalive': 0})
        statuses = [c.get('/api/name').status for _ in range(10)]
        self.assertEqual(statuses, [200] * 10)
        self.assertEqual(a.count('/api/name'), 10)
        # Nothing reached the closed port, so a POST goes on too, whole.
        data = os.urandom(20000)
        r = self.post(c, data)
        self.assertEqual(r.status, 200)
        self.assertEqual(json.loads(r.body)['body'].encode('latin-1'), data)
        c.wait_log(r'\[warn\] .*upstream %s: connect: Connection refused, '
                   r'client 127\.0\.0\.1; trying %s' % (re.escape(dead),
                                                      re.escape(a.addr)))

    def test_hangup_before_the_head(self):
        a = self.origin(name='a')
        rude = self.rude()
        c = self.start_proxy([rude.addr, a.addr],
                             upstream={'max_fails': 0, 'keepalive': 0})
        self.assertEqual([c.get('/api/x').status for _ in range(6)],
                         [200] * 6)
        # Round-robin sent half of them to the rude peer first.
        self.assertEqual(rude.requests, 3)
        self.assertEqual(a.count('/api/x'), 6)
        # A POST the peer may have acted on is not sent twice.
        statuses = sorted(self.post(c, b'once').status for _ in range(4))
        self.assertEqual(statuses, [200, 200, 502, 502])
        self.assertEqual(a.count('/api/echo'), 2)

    def test_non_idempotent_goes_on_when_allowed(self):
        a = self.origin(name='a')
        rude = self.rude()
        c = self.start_proxy([rude.addr, a.addr], upstream={
            'max_fails': 0, 'keepalive': 0,
            'next_upstream': '{"error", "non_idempotent"}'})
        for _ in range(4):
            r = self.post(c, b'')
            self.assertEqual(r.status, 200)
            self.assertEqual(json.loads(r.body)['method'], 'POST')
        self.assertEqual(a.count('/api/echo'), 4)
        self.assertEqual(rude.requests, 2)
        # A body that streamed to the peer that hung up is gone: that
        # request is not replayed (nginx with proxy_request_buffering off).
        statuses = sorted(self.post(c, body(5000)).status for _ in range(2))
        self.assertEqual(statuses, [200, 502])

    def test_timeout_waiting_for_the_head(self):
        a = self.origin(name='a')
        silent = self.rude(silent=True)
        c = self.start_proxy([silent.addr, a.addr], upstream={
            'max_fails': 0, 'keepalive': 0, 'read_timeout': '300ms'})
        self.assertEqual([c.get('/api/x').status for _ in range(2)],
                         [200, 200])
        self.assertEqual(silent.requests, 1)
        c.wait_log(r'\[warn\] .*upstream %s: read timed out, client '
                   r'127\.0\.0\.1; trying %s' % (re.escape(silent.addr),
                                               re.escape(a.addr)))

    def test_timeout_is_its_own_word(self):
        a = self.origin(name='a')
        silent = self.rude(silent=True)
        c = self.start_proxy([silent.addr, a.addr], upstream={
            'max_fails': 0, 'keepalive': 0, 'read_timeout': '300ms',
            'next_upstream': '{"error"}'})
        self.assertEqual(sorted(c.get('/api/x').status for _ in range(2)),
                         [200, 504])

    def logged(self, c, n):
        """The $upstream_* fields of the first n lines of the access log
        (format timed): [(addrs, statuses, connect times, response
        times)], each a list split at ', '."""
        text = wait_until(lambda: (lambda t: t if t.count('\n') >= n
                                   else None)(read_text(c.access_log)), 10)
        self.assertIsNotNone(text, read_text(c.access_log))
        out = []
        for line in text.splitlines()[:n]:
            m = re.search(r' uct=(.*) urt=(.*) ua=(.*) us=(.*) cs=', line)
            self.assertTrue(m, line)
            uct, urt, ua, us = (g.split(', ') for g in m.groups())
            self.assertEqual(len({len(uct), len(urt), len(ua), len(us)}),
                             1, line)
            out.append((ua, us, uct, urt))
        return out

    def test_access_log_lists_every_server_tried(self):
        # As nginx: $upstream_addr, $upstream_status and the two times
        # list each server tried, in order, joined by ", ".
        a = self.origin(name='a')
        silent = self.rude(silent=True)
        dead = self.refusing(1)[0]
        c = self.start_proxy([dead, silent.addr, a.addr], upstream={
            'max_fails': 0, 'keepalive': 0, 'read_timeout': '300ms'},
            server={'access_log_format': 'timed'}, log_flush=0)
        self.assertEqual([c.get('/api/x').status for _ in range(3)],
                         [200] * 3)
        lines = self.logged(c, 3)
        tried = sorted(lines, key=lambda t: len(t[0]))
        # Round robin starts each request at the next server: one went
        # straight to a, one through the silent server, one through both.
        self.assertEqual([t[0] for t in tried], [
            [a.addr], [silent.addr, a.addr], [dead, silent.addr, a.addr]])
        self.assertEqual([t[1] for t in tried], [
            ['200'], ['504', '200'], ['502', '504', '200']])
        for ua, us, uct, urt in tried:
            for addr, t in zip(ua, uct):
                # Refused: no connect time; the others connected.
                if addr == dead:
                    self.assertEqual(t, '-')
                else:
                    self.assertRegex(t, r'^\d+\.\d{3}$')
            for addr, t in zip(ua, urt):
                self.assertRegex(t, r'^\d+\.\d{3}$')
                if addr == silent.addr:
                    self.assertGreaterEqual(float(t), 0.25)
        # Every server refusing: the 502's line names them all.
        c2 = self.start_proxy(self.refusing(2), upstream={'max_fails': 0},
                              server={'access_log_format': 'timed'},
                              log_flush=0)
        self.assertEqual(c2.get('/api/x').status, 502)
        (ua, us, uct, urt), = self.logged(c2, 1)
        self.assertEqual(len(set(ua)), 2, ua)
        self.assertEqual(us, ['502', '502'])
        self.assertEqual(uct, ['-', '-'])

    def test_off(self):
        a = self.origin(name='a')
        (dead,) = self.refusing(1)
        c = self.start_proxy([dead, a.addr], upstream={
            'max_fails': 0, 'next_upstream': 'off'})
        self.assertEqual(sorted(c.get('/api/x').status for _ in range(4)),
                         [200, 200, 502, 502])

    def test_every_peer_once_then_502(self):
        dead = self.refusing(3)
        c = self.start_proxy(dead, upstream={'max_fails': 0})
        self.assertEqual(c.get('/api/x').status, 502)
        c.wait_log(r'\[error\] .*upstream 127\.0\.0\.1:\d+: connect: '
                   r'Connection refused')
        log = read_text(c.error_log)
        # Two moves, then the last peer's refusal is the answer.
        self.assertEqual(log.count('; trying '), 2, log)
        self.assertEqual(len(re.findall(r'\[error\] .*upstream', log)), 1,
                         log)

    def test_a_group_past_64_servers_tries_each_once(self):
        # The tried set has a bit for each of the first 64 servers only:
        # with no next_upstream_tries and no max_fails, the servers past
        # it were picked again and again, the request never answered.
        # Bound, never listening: each refuses, and no other test's
        # server can take its port meanwhile (66 free_port()s could race).
        dead = self.refusing(66)
        c = self.start_proxy(dead, upstream={'max_fails': 0})
        self.assertEqual(c.get('/api/x').status, 502)
        log = read_text(c.error_log)
        # Every server of the group once: 65 moves, then the answer.
        self.assertEqual(log.count('; trying '), 65, log[-2000:])

    def test_tries_bound_the_moves(self):
        a = self.origin(name='a')
        dead = self.refusing(3)
        c = self.start_proxy(dead + [a.addr], upstream={
            'max_fails': 0, 'next_upstream_tries': 2})
        statuses = [c.get('/api/x').status for _ in range(8)]
        self.assertIn(502, statuses)
        log = read_text(c.error_log)
        # No request was tried more than twice: one move each at most.
        self.assertLessEqual(log.count('; trying '), 8, log)
        self.assertEqual(statuses.count(200), a.count('/api/x'))
        unbounded = self.start_proxy(dead + [a.addr],
                                     upstream={'max_fails': 0})
        self.assertEqual([unbounded.get('/api/x').status
                          for _ in range(8)], [200] * 8)

    def test_config_errors_name_the_line(self):
        c = self.make()
        base = c.config_text()
        for text, msg in [
                ('upstream "u" {\n servers = {"127.0.0.1:1"}\n'
                 ' next_upstream = {"http_500"}\n}\n',
                 'unknown next_upstream "http_500"'),
                ('upstream "u" {\n servers = {"127.0.0.1:1"}\n'
                 ' next_upstream = {"off", "error"}\n}\n',
                 'next_upstream "off" stands alone')]:
            with self.subTest(msg=msg):
                path = os.path.join(c.tmp, 'bad.conf')
                with open(path, 'w') as f:
                    f.write(base + text)
                out = c.check_config(path)
                self.assertNotEqual(out.returncode, 0)
                self.assertIn(msg, out.stderr + out.stdout)
                self.assertRegex(out.stderr + out.stdout, r'bad\.conf:\d+:')

