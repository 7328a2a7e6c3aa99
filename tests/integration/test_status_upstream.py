"""
What the status views and the access log say about the reverse proxy
and its cache: requests, failures, state and timings per upstream peer,
responses by X-Cache, stampede waits, the $upstream_* log variables, and
corral -P (corralctl purge) dropping a URL without purge_allow.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading

import tls_pki
from harness import (BIN, CorralTestCase, Raw, build_request, free_port,
                     quote, read_text,
                     wait_until)


class ShutsReading:
    """
    A server on a unix socket that shuts the reading side of each
    connection it takes, so that the peer's next send fails with EPIPE,
    and then reads and drops what came before, which wakes a sender that
    waits for room.  It never closes a connection before stop(): the
    sender sees no end and no reset, only its send failing.
    """

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.held = []
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        os.chmod(path, 0o777)
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.held.append(s)
            try:
                s.shutdown(socket.SHUT_RD)
                while s.recv(65536):
                    pass
            except OSError:
                pass

    def stop(self):
        # shutdown() wakes the thread before any descriptor is closed.
        with self.lock:
            socks = [self.sock] + self.held
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(10)
        for s in socks:
            s.close()


class UpstreamStatus(CorralTestCase):

    def start_proxy(self, peers, cache=False, workers=2, loc=None,
                    upstream=None, tls_first=False, **kw):
        if tls_first:
            crt, key = tls_pki.shared().leaf('localhost')
            kw['server'] = dict(kw.get('server', {}), tls_certificate=crt,
                                tls_certificate_key=key)
        c = self.make(workers=workers, **kw)
        if tls_first:
            c.directives['listen'].insert(0, '127.0.0.1:%d tls' %
                                          free_port())
        c.stats_path = os.path.join(c.tmp, 'corral.stats')
        c.directives['stats_file'] = Raw(quote(c.stats_path))
        text = c.config_text()
        d = {'proxy': quote('app')}
        if cache:
            d.update({'cache': 'on', 'cache_ttl': '60'})
        d.update(loc or {})
        block = '  location "/api/" {\n' + ''.join(
            '    %s = %s\n' % kv for kv in d.items()) + '  }\n' + \
            '  location "/status" {\n    status = on\n  }\n' + \
            '  access_log_format = "up"\n'
        at = text.index('server {\n') + len('server {\n')
        text = text[:at] + block + text[at:]
        text += 'upstream "app" {\n  servers = {%s}\n' % \
            ', '.join(quote(p) for p in peers)
        for k, v in (upstream or {}).items():
            text += '  %s = %s\n' % (k, v)
        text += '}\n'
        text += ('log_format up {\n  format = "$request_uri $status '
                 '$upstream_addr $upstream_status $upstream_connect_time '
                 '$upstream_response_time $upstream_cache_status"\n}\n'
                 'log_flush = 0\n')
        with open(c.conf_path, 'w') as f:
            f.write(text)
        c.start()
        return c

    def doc(self, c):
        out = subprocess.run([BIN, '-s', '-j', '-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def log_lines(self, c, n):
        got = wait_until(lambda: (lambda t: t if t.count('\n') >= n
                                  else None)(read_text(c.access_log)), 5)
        self.assertIsNotNone(got, read_text(c.access_log))
        return [l.split(' ') for l in got.splitlines()]

    def test_peer_failures_and_state(self):
        o = self.origin()
        o.script('/api/x', body=b'x' * 10)
        dead = '127.0.0.1:1'	# nothing listens: connect refused
        c = self.start_proxy([o.addr, dead], workers=1,
                             upstream={'max_fails': 1,
                                       'fail_timeout': Raw('1h')})
        # The one request sent to the dead peer goes on to the live one
        # (next_upstream); after it the peer is down and left out.
        got = sorted(c.get('/api/x').status for _ in range(6))
        self.assertEqual(got, [200] * 6)
        self.assertEqual(o.count('/api/x'), 6)
        doc = self.doc(c)
        self.assertEqual(doc['responses']['5xx'], 0)
        peers = {p['peer']: p for p in doc['upstreams']}
        self.assertEqual(set(peers), {o.addr, dead})
        live, gone = peers[o.addr], peers[dead]
        self.assertEqual((live['upstream'], gone['upstream']),
                         ('app', 'app'))
        self.assertEqual((live['failures'], live['state']), (0, 'up'))
        # Marked down by its first failure, then left alone for an hour.
        self.assertEqual((gone['failures'], gone['state'],
                          gone['down_workers']), (1, 'down', 1))
        text = c.get('/status?prometheus').body.decode()
        self.assertIn('corral_upstream_peer_up{upstream="app",peer="%s"} 0'
                      % dead, text)
        self.assertIn('corral_upstream_failures_total{upstream="app",'
                      'peer="%s"} 1' % dead, text)

    def test_send_failure_counts_against_the_peer(self):
        # A request that cannot be sent on a fresh connection is the
        # peer's failure, as a refused connect or a reset read is.  Its
        # head is larger than the socket takes at once, so corral is
        # still sending when the peer has shut its reading side.
        d = tempfile.mkdtemp(prefix='corral-sock-')
        os.chmod(d, 0o755)
        self.addCleanup(shutil.rmtree, d, True)
        peer = ShutsReading(os.path.join(d, 'app.sock'))
        self.addCleanup(peer.stop)
        name = 'unix:' + peer.path
        c = self.start_proxy([name], workers=1,
                             max_header_size=Raw('1m'),
                             upstream={'max_fails': 1, 'keepalive': 0,
                                       'next_upstream': 'off',
                                       'fail_timeout': Raw('1h')})
        pad = [('X-Pad-%d' % i, 'x' * 50000) for i in range(16)]
        with c.connect() as conn:
            conn.send(build_request('/api/x', headers=pad))
            self.assertEqual(conn.read_response().status, 502)
        self.assertIn('upstream %s: send: Broken pipe' % name,
                      read_text(c.error_log))
        (gone,) = self.doc(c)['upstreams']
        self.assertEqual((gone['peer'], gone['failures'], gone['state']),
                         (name, 1, 'down'))

    def test_peer_requests_and_timings(self):
        o = self.origin()
        o.script('/api/x', body=b'x' * 10, delay=0.05)
        c = self.start_proxy([o.addr], upstream={'keepalive': 4})
        for _ in range(10):
            self.assertEqual(c.get('/api/x').status, 200)
        doc = self.doc(c)
        (live,) = doc['upstreams']
        self.assertEqual((live['upstream'], live['peer']), ('app', o.addr))
        self.assertEqual((live['requests'], live['failures'],
                          live['state']), (10, 0, 'up'))
        rt, ct = live['response_time'], live['connect_time']
        self.assertEqual(rt['count'], 10)
        # Each answer took the origin's 50 ms at least.
        self.assertGreaterEqual(rt['sum_ms'], 500)
        self.assertEqual(sum(rt['counts'][:2]), 0)	# none under 5 ms
        # Connections are kept alive: a connect for some requests only.
        self.assertGreaterEqual(ct['count'], 1)
        self.assertLessEqual(ct['count'], 10)
        lines = self.log_lines(c, 10)
        for uri, status, addr, ustatus, uct, urt, cs in lines:
            self.assertEqual((uri, status, addr, ustatus, cs),
                             ('/api/x', '200', o.addr, '200', '-'))
            # 50 ms, give or take the clock's resolution.
            self.assertGreaterEqual(float(urt), 0.04)
            self.assertRegex(uct, r'^(-|\d+\.\d{3})$')
        self.assertIn('-', [l[4] for l in lines])	# a pooled one
        text = c.get('/status?prometheus').body.decode()
        self.assertIn('corral_upstream_requests_total{upstream="app",'
                      'peer="%s"} 10' % o.addr, text)
        self.assertIn('corral_upstream_response_duration_seconds_count{'
                      'upstream="app",peer="%s"} 10' % o.addr, text)

    def test_cache_states_and_stampede_waits(self):
        o = self.origin()
        o.script('/api/c', body=b'cached\n', delay=0.5,
                 headers=[('Cache-Control', 'max-age=60')])
        c = self.start_proxy([o.addr], cache=True)
        out = []

        def client():
            out.append(c.get('/api/c').header('X-Cache'))
        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        self.assertEqual(sorted(out), ['HIT'] * 5 + ['MISS'])
        for _ in range(4):
            self.assertEqual(c.get('/api/c').header('X-Cache'), 'HIT')
        self.assertEqual(o.count('/api/c'), 1)
        cache = self.doc(c)['cache']
        self.assertEqual((cache['hit'], cache['miss'], cache['expired'],
                          cache['stale'], cache['updating'],
                          cache['bypass']), (9, 1, 0, 0, 0, 0))
        # Five requests waited for the one fill, each for most of the
        # origin's half second.
        self.assertGreaterEqual(cache['stampede_waits'], 5)
        self.assertGreater(cache['stampede_wait_us'], 5 * 200000)
        lines = self.log_lines(c, 10)
        self.assertEqual(sorted(l[6] for l in lines),
                         ['HIT'] * 9 + ['MISS'])

    def test_corral_purge(self):
        o = self.origin()
        o.script('/api/p', body=b'purge me\n',
                 headers=[('Cache-Control', 'max-age=60')])
        c = self.start_proxy([o.addr], cache=True)
        self.assertEqual(c.get('/api/p').header('X-Cache'), 'MISS')
        self.assertEqual(c.get('/api/p').header('X-Cache'), 'HIT')
        # No purge_allow: PURGE from a client is refused ...
        self.assertEqual(c.get('/api/p', method='PURGE').status, 403)
        # ... while corral -P, which can read the stats file, may.
        out = subprocess.run([BIN, '-P', 'http://localhost/api/p', '-c',
                              c.conf_path], capture_output=True, text=True,
                             timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, 'purged localhost/api/p\n')
        self.assertEqual(c.get('/api/p').header('X-Cache'), 'MISS')
        self.assertEqual(o.count('/api/p'), 2)
        out = subprocess.run([BIN, '-P', '/api/nothing', '-c',
                              c.conf_path], capture_output=True, text=True,
                             timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, 'not in the cache: localhost'
                         '/api/nothing\n')
        # A wrong token is only a PURGE without purge_allow.
        r = c.get('/api/p', method='PURGE',
                  headers=[('X-Corral-Purge', '0' * 32)])
        self.assertEqual(r.status, 403)
        ctl = os.environ.get('CORRALCTL')
        if ctl and os.access(ctl, os.X_OK):
            out = subprocess.run([ctl, '-c', c.conf_path, 'purge',
                                  '/api/p'], capture_output=True,
                                 text=True, timeout=10)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout, 'purged localhost/api/p\n')

    def test_corral_purge_by_prefix(self):
        o = self.origin()
        cc = ('Cache-Control', 'max-age=60')
        o.script('/api/a/1', body=b'a1\n', headers=[cc])
        o.script('/api/a/2', body=b'a2\n', headers=[cc, ('Vary', 'Accept')])
        o.script('/api/a/3', body=b'a3\n', headers=[cc])
        o.script('/api/ab', body=b'ab\n', headers=[cc])
        o.script('/api/b/1', body=b'b1\n', headers=[cc])
        c = self.start_proxy([o.addr], cache=True, workers=2,
                             loc={'purge_allow': '{"127.0.0.1"}'})
        urls = [('localhost', '/api/a/1'), ('localhost', '/api/a/2'),
                ('localhost', '/api/a/3?x=1'), ('localhost', '/api/ab'),
                ('localhost', '/api/b/1'), ('other.test', '/api/a/1')]

        def xcache(host, path):
            r = c.get(path, host=host, headers=[('Accept', 'text/plain')])
            self.assertEqual(r.status, 200, (host, path))
            return r.header('X-Cache')
        for host, path in urls:
            self.assertEqual(xcache(host, path), 'MISS', (host, path))
            self.assertEqual(xcache(host, path), 'HIT', (host, path))
        # Everything of localhost under /api/a/, with the variant and the
        # query; not /api/ab, not /api/b/, not another host's /api/a/.
        out = subprocess.run([BIN, '-P', '/api/a/*', '-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout,
                         r'^purged localhost/api/a/\* \(\d+ objects\)\n$')
        self.assertGreaterEqual(int(out.stdout.split('(')[1].split()[0]), 3)
        for host, path in urls:
            gone = host == 'localhost' and path.startswith('/api/a/')
            self.assertEqual(xcache(host, path), 'MISS' if gone else 'HIT',
                             (host, path))
        self.assertEqual(o.count('/api/a/2'), 2)
        self.assertEqual(o.count('/api/b/1'), 1)
        # Nothing left under the prefix: said so, and nothing else moves.
        out = subprocess.run([BIN, '-P', 'http://localhost/api/zz*', '-c',
                              c.conf_path], capture_output=True, text=True,
                             timeout=10)
        self.assertEqual((out.returncode, out.stdout),
                         (0, 'not in the cache: localhost/api/zz*\n'),
                         out.stderr)
        # A client of purge_allow purges by prefix with a PURGE of its own.
        r = c.get('/api/*', method='PURGE', host='other.test')
        self.assertEqual((r.status, r.body), (200, b'purged 1\n'))
        self.assertEqual(xcache('other.test', '/api/a/1'), 'MISS')
        self.assertEqual(xcache('localhost', '/api/b/1'), 'HIT')
        r = c.get('/api/*', method='PURGE')
        self.assertEqual(r.status, 200)
        self.assertEqual(xcache('localhost', '/api/b/1'), 'MISS')
        ctl = os.environ.get('CORRALCTL')
        if ctl and os.access(ctl, os.X_OK):
            out = subprocess.run([ctl, '-c', c.conf_path, 'purge',
                                  '/api/*'], capture_output=True,
                                 text=True, timeout=10)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertRegex(out.stdout, r'^purged localhost/api/\* ')

    def test_corral_purge_when_the_first_listen_is_tls(self):
        # corral -P speaks plain HTTP: it must not pick a TLS address.
        o = self.origin()
        o.script('/api/p', body=b'purge me\n',
                 headers=[('Cache-Control', 'max-age=60')])
        c = self.start_proxy([o.addr], cache=True, tls_first=True)
        self.assertEqual(c.get('/api/p').header('X-Cache'), 'MISS')
        self.assertEqual(c.get('/api/p').header('X-Cache'), 'HIT')
        out = subprocess.run([BIN, '-P', '/api/p', '-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual((out.returncode, out.stdout),
                         (0, 'purged localhost/api/p\n'), out.stderr)
        self.assertEqual(c.get('/api/p').header('X-Cache'), 'MISS')
