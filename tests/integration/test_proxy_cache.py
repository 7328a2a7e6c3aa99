"""
The proxy cache as clients and origins see it: responses kept in the
shared store and served by either worker, the stampede lock (one fetch
for many clients, across workers, answered the moment the fill lands),
expiry, revalidation, stale copies on upstream errors, what is never
stored, Vary variants, PURGE, invalidation by unsafe methods,
hit-for-pass, X-Cache and Age.  The origin is origin.py on a free port.
"""
import gzip
import os
import signal
import socket
import subprocess
import threading
import time

from harness import (BIN, CorralTestCase, build_request, parse_response,
                     parse_responses, quote, read_after_refused, read_text,
                     strace_wrapper, wait_for, wait_until)
from origin import body


def seconds_pass(n, since):
    """Waits until the wall clock's second is n past since's (expiry)."""
    end = int(since) + n
    while int(time.time()) < end:
        time.sleep(end - time.time() + 0.01)


class ProxyCacheCase(CorralTestCase):

    def start_cache(self, o, loc=None, workers=2, upstream=None, extra='',
                    top='', **kw):
        """
        A server whose location /api/ proxies to o with the cache on;
        extra: more lines for the server block, top: for the top level.
        """
        c = self.make(workers=workers, **kw)
        c.directives['cache'] = {'path': os.path.join(c.tmp, 'cache.store')}
        text = c.config_text()
        d = {'proxy': quote('app'), 'cache': 'on', 'cache_ttl': '60'}
        d.update(loc or {})
        block = '  location "/api/" {\n' + ''.join(
            '    %s = %s\n' % kv for kv in d.items()) + '  }\n' + extra
        at = text.index('server {\n') + len('server {\n')
        text = text[:at] + block + text[at:]
        text += 'upstream "app" {\n  servers = {%s}\n' % quote(o.addr)
        for k, v in (upstream or {}).items():
            text += '  %s = %s\n' % (k, v)
        text += '}\n' + top
        with open(c.conf_path, 'w') as f:
            f.write(text)
        c.start()
        return c

    def fetch(self, c, path, method='GET', headers=()):
        return c.get(path, method=method, headers=headers)

    def assertCache(self, r, xc, body=None, status=200):
        self.assertEqual(r.status, status, r)
        self.assertEqual(r.header('X-Cache'), xc, r)
        if body is not None:
            self.assertEqual(r.body, body)


class CacheBasicsTest(ProxyCacheCase):

    def test_miss_then_hits_in_both_workers_with_growing_age(self):
        o = self.origin()
        o.script('/api/a', body=b'alpha\n',
                 headers=[('Content-Type', 'text/plain'), ('ETag', '"a1"')])
        c = self.start_cache(o)
        self.assertCache(self.fetch(c, '/api/a'), 'MISS', b'alpha\n')
        t0 = time.time()
        for _ in range(20):
            r = self.fetch(c, '/api/a')
            self.assertCache(r, 'HIT', b'alpha\n')
            self.assertEqual(r.header('Content-Type'), 'text/plain')
            self.assertEqual(r.header('ETag'), '"a1"')
            self.assertEqual(r.headers.count('Date'), 1)
            self.assertEqual(r.headers.count('Server'), 1)
        self.assertEqual(o.count('/api/a'), 1)
        age0 = int(r.header('Age'))
        seconds_pass(2, t0)
        self.assertGreaterEqual(int(self.fetch(c, '/api/a').header('Age')),
                                age0 + 1)
        r = self.fetch(c, '/api/a', method='HEAD')
        self.assertCache(r, 'HIT', b'')
        self.assertEqual(r.header('Content-Length'), '6')
        st = self.stats(c)
        self.assertEqual(st['sets'], 1, st)
        self.assertGreaterEqual(st['hits'], 22, st)
        self.assertNoLogErrors(c)

    def test_key_is_the_request_forwarded(self):
        # The origin may answer two spellings of a path differently: each
        # is its own entry (issue 14), as nginx keys on what it sends.
        o = self.origin()
        o.script('/api/x%20y', body=b'same')
        c = self.start_cache(o)
        self.assertCache(self.fetch(c, '/api/x%20y?q=1'), 'MISS', b'same')
        self.assertCache(c.get('/api/x%20y?q=1', host='LOCALHOST'), 'HIT',
                         b'same')
        self.assertCache(self.fetch(c, '/api/./x%20y?q=1'), 'MISS')
        self.assertCache(self.fetch(c, '/api/./x%20y?q=1'), 'HIT')
        self.assertCache(c.get('/api/x%20y?q=1', host='localhost:80'),
                         'MISS', b'same')
        self.assertCache(self.fetch(c, '/api/x%20y?q=2'), 'MISS', b'same')

    def test_chunked_response_stored_decoded(self):
        o = self.origin()
        c = self.start_cache(o)
        r = self.fetch(c, '/api/chunked/5000')
        self.assertCache(r, 'MISS')
        want = r.body
        self.assertEqual(len(want), 5000)
        r = self.fetch(c, '/api/chunked/5000')
        self.assertCache(r, 'HIT', want)
        self.assertEqual(r.header('Content-Length'), '5000')
        self.assertIsNone(r.header('Transfer-Encoding'))
        r = c.get('/api/chunked/5000', version='HTTP/1.0')
        self.assertCache(r, 'HIT', want)
        self.assertEqual(o.count('/api/chunked/5000'), 1)

    def test_chunks_of_a_fill_to_a_client_that_reads_late(self):
        # A body the cache takes goes out in corral's chunks, each lent
        # from the upstream's read buffer with its framing and copied only
        # where the client's socket is full.  This client reads nothing
        # until corral's sends are refused, then gets each answer whole
        # and in order: one found too large on the way, one stored, and a
        # length.
        wrapper, trace = strace_wrapper(self, ('accept', 'accept4',
                                               'sendto', 'sendmsg'))
        o = self.origin()
        c = self.start_cache(o, workers=1, wrapper=wrapper)
        c.wait_workers(1)
        asked = [('/api/chunked/6000001', 6000001),
                 ('/api/chunked/300007', 300007),
                 ('/api/size/4000', 4000)]
        data = read_after_refused(self, c.port, trace, b''.join(
            build_request(p, headers=[('Connection', 'close')]
                          if p == asked[-1][0] else [])
            for p, _ in asked))
        got = parse_responses(data)
        self.assertEqual([r.status for r in got], [200] * len(asked))
        for (p, n), r in zip(asked, got):
            self.assertCache(r, 'MISS')
            self.assertTrue(r.body == body(n), '%s: body differs' % p)
        for r in got[:2]:
            self.assertEqual(r.tokens('Transfer-Encoding'), {'chunked'})
        self.assertCache(self.fetch(c, '/api/chunked/300007'), 'HIT',
                         body(300007))

    def test_too_large_streamed_not_stored(self):
        o = self.origin()
        c = self.start_cache(o)
        big = 2 * 1024 * 1024
        # Too large: streamed, and marked hit-for-pass.
        for xc in ('MISS', 'BYPASS'):
            r = self.fetch(c, '/api/size/%d' % big)
            self.assertCache(r, xc)
            self.assertEqual(len(r.body), big)
        self.assertEqual(o.count('/api/size/%d' % big), 2)
        self.assertGreaterEqual(self.stats(c)['too_large'], 1)
        # Without a length, found out while copying.
        for xc in ('MISS', 'BYPASS'):
            r = self.fetch(c, '/api/chunked/%d' % big)
            self.assertCache(r, xc)
            self.assertEqual(len(r.body), big)
        self.assertEqual(o.count('/api/chunked/%d' % big), 2)
        self.assertGreaterEqual(self.stats(c)['too_large'], 2)
        # The two pass marks; no response.
        self.assertEqual(self.stats(c)['sets'], 2)

    def test_too_large_does_not_queue_behind_the_lock(self):
        o = self.origin()
        big = 2 * 1024 * 1024
        o.script('/api/iso', body=b'i' * big, delay=3.0)
        c = self.start_cache(o)
        out = []

        def get():
            t = time.monotonic()
            # A waiter's answer takes two of the origin's delays.
            r = c.request(build_request('/api/iso'), timeout=30)
            out.append((r.status, len(r.body), time.monotonic() - t))
        ths = [threading.Thread(target=get) for _ in range(4)]
        for th in ths:
            th.start()
        for th in ths:
            th.join(40)
        # The filler lets its waiters go as soon as the header says the
        # body will not be stored: they reach the origin together, not
        # one after another (one fill after another would space them by
        # the origin's 3 s delay at least: 6 s for the last two).  Arrival
        # times, not the clients' durations, and a bound far from both,
        # so that a loaded machine cannot fail it.
        self.assertEqual([(st, n) for st, n, _ in out], [(200, big)] * 4)
        self.assertEqual(o.count('/api/iso'), 4)
        with o.lock:
            times = sorted(r['time'] for r in o.requests
                           if r['target'] == '/api/iso')
        self.assertLess(times[-1] - times[1], 3,
                        'waiters fetched one after another: %r' %
                        [round(t - times[0], 2) for t in times])

    def test_head_miss_fetches_get_and_fills(self):
        o = self.origin()
        o.script('/api/h', body=b'head-body\n',
                 headers=[('Content-Type', 'text/plain'), ('ETag', '"h1"')])
        c = self.start_cache(o)
        r = self.fetch(c, '/api/h', method='HEAD')
        self.assertCache(r, 'MISS', b'')
        self.assertEqual(r.header('Content-Length'), '10')
        self.assertEqual(r.header('ETag'), '"h1"')
        self.assertEqual(o.last('/api/h')['method'], 'GET')
        self.assertCache(self.fetch(c, '/api/h'), 'HIT', b'head-body\n')
        self.assertCache(self.fetch(c, '/api/h', method='HEAD'), 'HIT', b'')
        self.assertEqual(o.count('/api/h'), 1)
        # Not storable: the HEAD still gets its header; nothing is kept.
        o.script('/api/hc', body=b'cookie', headers=[('Set-Cookie', 'a=b')])
        r = self.fetch(c, '/api/hc', method='HEAD')
        self.assertEqual((r.status, r.body), (200, b''))
        self.assertEqual(r.header('Set-Cookie'), 'a=b')
        self.assertEqual(r.header('Content-Length'), '6')
        self.assertEqual(self.fetch(c, '/api/hc').body, b'cookie')
        self.assertEqual(o.count('/api/hc'), 2)
        # The upstream breaks off the body being stored: the HEAD was
        # answered whole, so its connection goes on; nothing is kept.
        with c.connect() as s:
            s.send(b'HEAD /api/bad/truncated HTTP/1.1\r\n'
                   b'Host: localhost\r\n\r\n')
            r = s.read_response('HEAD')
            self.assertCache(r, 'MISS', b'')
            self.assertEqual(r.header('Content-Length'), '1000')
            s.send(b'GET /api/h HTTP/1.1\r\nHost: localhost\r\n\r\n')
            self.assertCache(s.read_response(), 'HIT', b'head-body\n')
        c.wait_log(r'\[error\].*connection closed after 10 body bytes')
        # Over cache.max_object: header at once, body neither read whole
        # nor sent; the same keep-alive connection goes on.
        big = 2 * 1024 * 1024
        with c.connect() as s:
            for path in ('/api/size/%d' % big, '/api/chunked/%d' % big):
                s.send(('HEAD %s HTTP/1.1\r\nHost: localhost\r\n\r\n'
                        % path).encode())
                r = s.read_response('HEAD')
                self.assertCache(r, 'MISS', b'')
            s.send(b'GET /api/h HTTP/1.1\r\nHost: localhost\r\n\r\n')
            self.assertCache(s.read_response(), 'HIT', b'head-body\n')
        self.assertEqual(r.header('Transfer-Encoding'), 'chunked')
        st = self.stats(c)
        # /api/h, and the hit-for-pass marks of /api/hc and the big ones.
        self.assertEqual(st['sets'], 4, st)
        self.assertGreaterEqual(st['too_large'], 2, st)

    def test_cache_off_no_x_cache_no_store(self):
        o = self.origin()
        c = self.start_cache(o, {'cache': 'off'})
        r = self.fetch(c, '/api/b')
        self.assertEqual(r.status, 200)
        self.assertIsNone(r.header('X-Cache'))
        self.fetch(c, '/api/b')
        self.assertEqual(o.count('/api/b'), 2)

    def test_x_cache_off(self):
        o = self.origin()
        c = self.start_cache(o, {'x_cache': 'off'})
        self.fetch(c, '/api/b')
        r = self.fetch(c, '/api/b')
        self.assertIsNone(r.header('X-Cache'))
        self.assertIsNotNone(r.header('Age'))
        self.assertEqual(o.count('/api/b'), 1)


class CacheLockTest(ProxyCacheCase):

    def blast(self, c, path, n):
        """
        n clients send at once; returns [(seconds, response)], and leaves
        when each response was complete in self.finished.
        """
        socks = [socket.create_connection(('127.0.0.1', c.port), timeout=10)
                 for _ in range(n)]
        out = [None] * n
        self.finished = [None] * n
        go = threading.Barrier(n + 1)
        req = build_request(path)

        def client(i):
            s = socks[i]
            go.wait()
            t = time.monotonic()
            s.sendall(req)
            buf = b''
            r = None
            while r is None:
                data = s.recv(65536)
                if not data:
                    break
                buf += data
                r = parse_response(buf)
            self.finished[i] = time.monotonic()
            out[i] = (self.finished[i] - t, r and r[0])
            s.close()

        threads = [threading.Thread(target=client, args=(i,))
                   for i in range(n)]
        for t in threads:
            t.start()
        go.wait()
        for t in threads:
            t.join(20)
        return out

    def test_100_clients_one_fetch(self):
        o = self.origin()
        o.script('/api/cold', body=b'cold body\n', delay=1.0)
        # When corral ended each response, from its own clock.
        c = self.start_cache(o, server={'access_log_format': 'ends'},
                             top='log_format ends {\n  format = '
                             '"$msec $upstream_cache_status"\n}\n')
        out = self.blast(c, '/api/cold', 100)
        self.assertEqual(o.count('/api/cold'), 1)
        for t, r in out:
            self.assertIsNotNone(r)
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, b'cold body\n')
        xcs = sorted(r.header('X-Cache') for t, r in out)
        self.assertEqual(xcs.count('MISS'), 1, xcs)
        self.assertEqual(xcs.count('HIT'), 99, xcs)
        # Answered the moment the fill lands, with no polling interval
        # (nginx polls every 500 ms): the hundred answers end together.
        # Measured by the server (its log's $msec), from one another: a
        # hundred client threads of this process, on a loaded machine, can
        # take longer than that to be scheduled and read them.
        lines = wait_until(lambda: (lambda t: t if len(t) >= 100 else None)(
            read_text(c.access_log).splitlines()), 10)
        self.assertTrue(lines, read_text(c.access_log))
        ends = sorted(float(l.split()[0]) for l in lines)
        spread = ends[-1] - ends[0]
        self.assertLess(spread, 0.3, [round(t - ends[0], 3) for t in ends])
        st = self.stats(c)
        self.assertEqual(st['sets'], 1, st)

    def test_filler_fails_a_waiter_takes_over(self):
        o = self.origin()
        calls = []

        def answer(method, h):
            calls.append(1)
            if len(calls) == 1:
                time.sleep(0.5)
                return 500, [('Cache-Control', 'no-store')], b'boom'
            time.sleep(0.5)
            return 200, [], b'second'
        o.script('/api/flaky', fn=answer)
        c = self.start_cache(o, {'cache_pass_ttl': '0'})
        out = self.blast(c, '/api/flaky', 10)
        statuses = sorted(r.status for t, r in out)
        self.assertEqual(statuses.count(500), 1, statuses)
        self.assertEqual(statuses.count(200), 9, statuses)
        self.assertEqual(o.count('/api/flaky'), 2)
        for t, r in out:
            if r.status == 200:
                self.assertEqual(r.body, b'second')

    def test_lock_timeout_fetches_alone(self):
        o = self.origin()
        o.script('/api/slow', body=b'slow', delay=2.0)
        c = self.start_cache(o, {'cache_lock_timeout': '300ms'})
        out = self.blast(c, '/api/slow', 3)
        self.assertEqual(o.count('/api/slow'), 3)
        for t, r in out:
            self.assertEqual(r.body, b'slow')
        self.assertEqual(self.stats(c)['sets'], 1)
        self.assertCache(self.fetch(c, '/api/slow'), 'HIT', b'slow')

    def test_lock_off_every_miss_fetches(self):
        o = self.origin()
        o.script('/api/nolock', body=b'n', delay=0.5)
        c = self.start_cache(o, {'cache_lock': 'off'})
        out = self.blast(c, '/api/nolock', 4)
        self.assertEqual(o.count('/api/nolock'), 4)
        self.assertEqual(sorted(r.header('X-Cache') for t, r in out),
                         ['MISS'] * 4)
        self.assertCache(self.fetch(c, '/api/nolock'), 'HIT', b'n')

    def blocked(self, o, path, body):
        """Scripts path so that the first fetch lasts until released."""
        release = threading.Event()
        self.addCleanup(release.set)

        def answer(method, h):
            if o.count(path) == 1:
                release.wait(20)
            return 200, [], body
        o.script(path, fn=answer)
        return release

    def test_pipelined_behind_a_waiting_request(self):
        o = self.origin()
        release = self.blocked(o, '/api/w', b'waited')
        c = self.start_cache(o, workers=1)
        filler = c.connect()
        filler.send(build_request('/api/w'))
        wait_until(lambda: o.count('/api/w') == 1, 5)
        waits = self.stats(c)['lease_waits']
        w = c.connect()
        w.send(build_request('/api/w') + build_request('/api/size/10'))
        self.assertTrue(wait_until(
            lambda: self.stats(c)['lease_waits'] > waits, 5))
        self.assertEqual(o.count('/api/size/10'), 0)
        release.set()
        a, b = w.read_responses(['GET', 'GET'])
        self.assertCache(a, 'HIT', b'waited')
        self.assertCache(b, 'MISS', bytes(range(10)))
        self.assertCache(filler.read_response(), 'MISS', b'waited')
        self.assertEqual(o.count('/api/w'), 1)

    def test_graceful_stop_answers_waiters(self):
        o = self.origin()
        release = self.blocked(o, '/api/g', b'graceful')
        c = self.start_cache(o, workers=1)
        filler = c.connect()
        filler.send(build_request('/api/g'))
        wait_until(lambda: o.count('/api/g') == 1, 5)
        waits = self.stats(c)['lease_waits']
        w = c.connect()
        w.send(build_request('/api/g'))
        self.assertTrue(wait_until(
            lambda: self.stats(c)['lease_waits'] > waits, 5))
        os.kill(c.master_pid, signal.SIGQUIT)
        release.set()
        self.assertCache(filler.read_response(), 'MISS', b'graceful')
        self.assertCache(w.read_response(), 'HIT', b'graceful')
        c.expect_exit = True
        c.proc.wait(15)
        self.assertEqual(c.proc.returncode, 0)

    def test_lock_holder_killed(self):
        o = self.origin()
        release = threading.Event()
        self.addCleanup(release.set)

        def answer(method, h):
            if o.count('/api/k') == 1:
                release.wait(30)	# the first fetch never ends
            return 200, [], b'kept'
        o.script('/api/k', fn=answer)
        # The waiter must not give up by itself: only the holder's death
        # may end its wait.
        c = self.start_cache(o, loc={'cache_lock_timeout': '60s'})
        # The holder's lease lasts 10 s (the store's lease timeout), so
        # everything slow (finding a connection in each worker) happens
        # before the lease exists: from then on the test only waits for
        # events.  When the lease ran out first, the waiter took it over
        # and was never counted as a waiter (failed once at load > 10).
        # The first line of each request goes at once: without bytes the
        # connection would wait in TCP_DEFER_ACCEPT for a second or more.
        request = build_request('/api/k')
        line = request.index(b'\r\n') + 2
        conns = {}
        keep = []
        while len(conns) < 2:
            w = c.connect()
            w.send(request[:line])
            port = w.sock.getsockname()[1]
            # (Read until seen: a read of /proc/net/tcp can miss entries.)
            owner = wait_until(lambda: self.socket_owner(
                c, lambda l, r: l == c.port and r == port, must=False), 5)
            self.assertTrue(owner, 'no worker accepted the connection')
            if owner in conns:
                keep.append(w)
            else:
                conns[owner] = w
        (holder, first), (_, w) = conns.items()
        before = self.stats(c)
        first.send(request[line:])
        self.assertTrue(wait_until(lambda: o.count('/api/k') == 1, 10))
        w.send(request[line:])
        self.assertTrue(wait_for(
            lambda: self.stats(c)['lease_waits'], lambda n:
            n > before['lease_waits'], 10), self.stats(c))
        self.assertEqual(o.count('/api/k'), 1)
        c.expect_worker_death = True
        os.kill(holder, signal.SIGKILL)
        # The holder died before it could answer.
        self.assertEqual(first.read_until_close(), b'')
        r = w.read_response()
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b'kept')
        self.assertEqual(o.count('/api/k'), 2)
        # The death ended the lease, not its timeout.
        st = self.stats(c)
        self.assertEqual(st['lease_timeouts'], before['lease_timeouts'], st)
        for k in keep:
            k.close()
        w.close()
        first.close()

    def socket_owner(self, c, match, must=True):
        """The worker holding a TCP socket whose ports match(local, remote)."""
        inodes = set()
        for f in ('/proc/net/tcp', '/proc/net/tcp6'):
            with open(f) as fh:
                for line in fh.readlines()[1:]:
                    p = line.split()
                    local = int(p[1].split(':')[1], 16)
                    remote = int(p[2].split(':')[1], 16)
                    if match(local, remote) and p[9] != '0':
                        inodes.add(p[9])
        for pid in c.workers():
            try:
                fds = os.listdir('/proc/%d/fd' % pid)
            except OSError:
                continue
            for fd in fds:
                try:
                    link = os.readlink('/proc/%d/fd/%s' % (pid, fd))
                except OSError:
                    continue
                if link.startswith('socket:[') and link[8:-1] in inodes:
                    return pid
        if must:
            self.fail('no worker has that socket')
        return None


class CacheExpiryTest(ProxyCacheCase):

    def test_expired_refetched_once(self):
        o = self.origin()
        # Freshness counts whole seconds: max-age=1 could end between the
        # refill and the next request; 3 leaves them at least 2 s.
        o.script('/api/e', body=b'v', headers=[('Cache-Control',
                                                  'max-age=3')])
        c = self.start_cache(o)
        self.assertCache(self.fetch(c, '/api/e'), 'MISS')
        t = time.time()
        self.assertCache(self.fetch(c, '/api/e'), 'HIT')
        seconds_pass(4, t)
        self.assertCache(self.fetch(c, '/api/e'), 'EXPIRED', b'v')
        self.assertCache(self.fetch(c, '/api/e'), 'HIT')
        self.assertEqual(o.count('/api/e'), 2)

    def test_cache_ttl_applies_without_origin_freshness(self):
        o = self.origin()
        c = self.start_cache(o, {'cache_ttl': '1'})
        self.assertCache(self.fetch(c, '/api/t'), 'MISS')
        t = time.time()
        seconds_pass(2, t)
        self.assertCache(self.fetch(c, '/api/t'), 'EXPIRED')
        self.assertEqual(o.count('/api/t'), 2)

    def test_updating_serves_stale_during_refresh(self):
        o = self.origin()
        n = []
        release = threading.Event()
        self.addCleanup(release.set)

        def answer(method, h):
            n.append(1)
            if len(n) > 1:
                release.wait(10)	# the refresh lasts until we say
            return 200, [('Cache-Control', 'max-age=1')], b'v%d' % len(n)
        o.script('/api/u', fn=answer)
        c = self.start_cache(o, {'cache_stale': '{"updating"}'})
        self.assertCache(self.fetch(c, '/api/u'), 'MISS', b'v1')
        seconds_pass(2, time.time())
        refresh = []
        th = threading.Thread(target=lambda: refresh.append(
            self.fetch(c, '/api/u')))
        th.start()
        wait_until(lambda: o.count('/api/u') == 2, 5)
        for _ in range(5):
            self.assertCache(self.fetch(c, '/api/u'), 'UPDATING', b'v1')
        release.set()
        th.join(5)
        self.assertCache(refresh[0], 'EXPIRED', b'v2')
        self.assertCache(self.fetch(c, '/api/u'), 'HIT', b'v2')
        self.assertEqual(o.count('/api/u'), 2)

    def test_stale_on_500_and_on_origin_down(self):
        o = self.origin()
        state = {'status': 200}

        def answer(method, h):
            return state['status'], [('Cache-Control', 'max-age=1')], \
                b'good' if state['status'] == 200 else b'bad'
        o.script('/api/s', fn=answer)
        c = self.start_cache(o, {'cache_stale': '{"error", "http_500"}'},
                             upstream={'max_fails': 0})
        self.assertCache(self.fetch(c, '/api/s'), 'MISS', b'good')
        seconds_pass(2, time.time())
        state['status'] = 500
        self.assertCache(self.fetch(c, '/api/s'), 'STALE', b'good')
        self.assertCache(self.fetch(c, '/api/s'), 'STALE', b'good')
        self.assertEqual(o.count('/api/s'), 3)
        o.stop()
        self.assertCache(self.fetch(c, '/api/s'), 'STALE', b'good')
        # Nothing stale: the error goes out.
        self.assertEqual(self.fetch(c, '/api/other').status, 502)

    def test_grace_bounds_the_stale_copy(self):
        o = self.origin()
        o.script('/api/g', body=b'graced', headers=[
            ('Cache-Control', 'max-age=1')])
        c = self.start_cache(o, {'cache_stale': '{"error"}',
                                 'cache_grace': '2s'},
                             upstream={'max_fails': 0})
        t0 = time.time()
        self.assertCache(self.fetch(c, '/api/g'), 'MISS', b'graced')
        o.stop()
        seconds_pass(2, t0)     # stale, within the grace
        self.assertCache(self.fetch(c, '/api/g'), 'STALE', b'graced')
        seconds_pass(5, t0)     # past it: gone from the store
        self.assertEqual(self.fetch(c, '/api/g').status, 502)

    def test_500_without_stale_option_goes_out(self):
        o = self.origin()
        state = {'status': 200}
        o.script('/api/s', fn=lambda m, h: (
            state['status'], [('Cache-Control', 'max-age=1')], b'x'))
        c = self.start_cache(o)
        self.fetch(c, '/api/s')
        seconds_pass(2, time.time())
        state['status'] = 500
        r = self.fetch(c, '/api/s')
        self.assertEqual(r.status, 500)

    def test_revalidation_304_refreshes_without_body(self):
        o = self.origin()

        def answer(method, h):
            if h.get('if-none-match') == '"e1"':
                return 304, [('ETag', '"e1"'),
                             ('Cache-Control', 'max-age=1')], b''
            return 200, [('ETag', '"e1"'), ('Cache-Control', 'max-age=1')], \
                b'payload'
        o.script('/api/r', fn=answer)
        c = self.start_cache(o)
        self.assertCache(self.fetch(c, '/api/r'), 'MISS', b'payload')
        seconds_pass(2, time.time())
        r = self.fetch(c, '/api/r')
        self.assertCache(r, 'EXPIRED', b'payload')
        self.assertEqual(r.header('Age'), '0')
        self.assertCache(self.fetch(c, '/api/r'), 'HIT', b'payload')
        self.assertEqual(o.answered_with('/api/r', 200), 1)
        self.assertEqual(o.answered_with('/api/r', 304), 1)


class CacheRulesTest(ProxyCacheCase):

    def assertNotStored(self, o, c, path, headers=()):
        for _ in range(3):
            r = self.fetch(c, path, headers=headers)
            self.assertEqual(r.status, 200, r)
        self.assertEqual(o.count(path), 3)

    def test_never_stored(self):
        o = self.origin()
        o.script('/api/cookie', headers=[('Set-Cookie', 'a=b')], body=b'c')
        o.script('/api/private', headers=[('Cache-Control', 'private')])
        o.script('/api/nostore', headers=[('Cache-Control', 'no-store')])
        o.script('/api/star', headers=[('Vary', '*')])
        o.script('/api/auth', body=b'secret')
        c = self.start_cache(o, {'cache_pass_ttl': '0'})
        for p in ('/api/cookie', '/api/private', '/api/nostore',
                  '/api/star'):
            self.assertNotStored(o, c, p)
        self.assertNotStored(o, c, '/api/auth',
                             [('Authorization', 'Basic eDp5')])
        self.assertEqual(self.stats(c)['sets'], 0)

    def test_authorization_with_public_is_stored(self):
        o = self.origin()
        o.script('/api/pub', headers=[('Cache-Control', 'public')],
                 body=b'p')
        c = self.start_cache(o)
        self.fetch(c, '/api/pub', headers=[('Authorization', 'Basic eDp5')])
        self.assertCache(self.fetch(c, '/api/pub'), 'HIT', b'p')
        self.assertEqual(o.count('/api/pub'), 1)

    def test_status_rules(self):
        o = self.origin()
        o.script('/api/404', status=404, body=b'nf')
        o.script('/api/500', status=500, body=b'err')
        o.script('/api/503m', status=503, body=b'm',
                 headers=[('Cache-Control', 'max-age=60')])
        c = self.start_cache(o, {'cache_pass_ttl': '0'})
        for p in ('/api/404', '/api/500', '/api/503m'):
            self.fetch(c, p)
            self.fetch(c, p)
        self.assertEqual(o.count('/api/404'), 1)
        self.assertEqual(o.count('/api/500'), 2)
        self.assertEqual(o.count('/api/503m'), 1)

    def test_vary_accept_encoding_variants(self):
        o = self.origin()

        def answer(method, h):
            gz = 'gzip' in h.get('accept-encoding', '')
            return 200, [('Vary', 'Accept-Encoding')], \
                b'gzip-body' if gz else b'plain-body'
        o.script('/api/v', fn=answer)
        c = self.start_cache(o)
        gz = [('Accept-Encoding', 'gzip, deflate')]
        self.assertCache(self.fetch(c, '/api/v', headers=gz), 'MISS',
                         b'gzip-body')
        self.assertCache(self.fetch(c, '/api/v'), 'MISS', b'plain-body')
        self.assertCache(self.fetch(c, '/api/v', headers=gz), 'HIT',
                         b'gzip-body')
        # The same codings, however written: one variant.
        self.assertCache(self.fetch(c, '/api/v', headers=[
            ('Accept-Encoding', 'DEFLATE,gzip;q=0.8')]), 'HIT', b'gzip-body')
        self.assertCache(self.fetch(c, '/api/v', headers=[
            ('Accept-Encoding', 'gzip'), ('Accept-Encoding', 'deflate')]),
            'HIT', b'gzip-body')
        self.assertEqual(o.count('/api/v'), 2)
        # Other codings, or one refused, are asked of the origin: it may
        # choose another encoding for them.
        self.assertCache(self.fetch(c, '/api/v', headers=[
            ('Accept-Encoding', 'br, gzip')]), 'MISS', b'gzip-body')
        self.assertCache(self.fetch(c, '/api/v', headers=[
            ('Accept-Encoding', 'deflate, gzip;q=0')]), 'MISS')
        self.assertEqual(o.count('/api/v'), 4)

    def test_client_conditional_answered_304_from_cache(self):
        o = self.origin()
        o.script('/api/c', body=b'cond', headers=[
            ('ETag', '"c1"'), ('Last-Modified',
                               'Mon, 02 Nov 2026 10:00:00 GMT')])
        c = self.start_cache(o)
        self.fetch(c, '/api/c')
        r = self.fetch(c, '/api/c', headers=[('If-None-Match', '"c1"')])
        self.assertCache(r, 'HIT', b'', status=304)
        self.assertEqual(r.header('ETag'), '"c1"')
        r = self.fetch(c, '/api/c', headers=[
            ('If-Modified-Since', 'Mon, 02 Nov 2026 10:00:00 GMT')])
        self.assertEqual(r.status, 304)
        r = self.fetch(c, '/api/c', headers=[('If-None-Match', '"zz"')])
        self.assertCache(r, 'HIT', b'cond')
        # If-None-Match wins over If-Modified-Since, even when it is too
        # long for the cache to keep: then neither answers 304.
        many = ', '.join('"etag-%04d"' % i for i in range(150))
        r = self.fetch(c, '/api/c', headers=[
            ('If-None-Match', many),
            ('If-Modified-Since', 'Mon, 02 Nov 2026 10:00:00 GMT')])
        self.assertCache(r, 'HIT', b'cond')
        self.assertEqual(o.count('/api/c'), 1)
        self.assertNotIn('if-none-match',
                         [k.lower() for k, v in o.last()['headers']])

    def test_ranges_answered_from_cache(self):
        body = bytes(range(256)) * 16
        o = self.origin()
        o.script('/api/r', body=body, headers=[
            ('Content-Type', 'video/mp4'), ('ETag', '"r1"'),
            ('Last-Modified', 'Mon, 02 Nov 2026 10:00:00 GMT')])
        c = self.start_cache(o)
        # A miss answers whole, and the fill does not pass Range on.
        r = self.fetch(c, '/api/r', headers=[('Range', 'bytes=0-9')])
        self.assertCache(r, 'MISS', body)
        self.assertNotIn('range', [k.lower() for k, v in o.last()['headers']])
        r = self.fetch(c, '/api/r', headers=[('Range', 'bytes=100-199')])
        self.assertCache(r, 'HIT', body[100:200], status=206)
        self.assertEqual(r.header('Content-Range'), 'bytes 100-199/4096')
        self.assertEqual(r.header('Content-Type'), 'video/mp4')
        self.assertEqual(r.header('ETag'), '"r1"')
        self.assertIsNotNone(r.header('Age'))
        r = self.fetch(c, '/api/r', headers=[('Range', 'bytes=-5')])
        self.assertCache(r, 'HIT', body[-5:], status=206)
        self.assertEqual(r.header('Content-Range'), 'bytes 4091-4095/4096')
        # Two ranges: multipart/byteranges, each part typed and placed.
        r = self.fetch(c, '/api/r', headers=[('Range', 'bytes=0-2,10-12')])
        self.assertCache(r, 'HIT', status=206)
        ctype = r.header('Content-Type')
        self.assertTrue(ctype.startswith('multipart/byteranges; boundary='),
                        ctype)
        b = ctype.split('boundary=')[1].encode()
        want = b''.join(
            b'\r\n--' + b + b'\r\nContent-Type: video/mp4\r\n'
            b'Content-Range: bytes %d-%d/4096\r\n\r\n' % (f, l) +
            body[f:l + 1] for f, l in ((0, 2), (10, 12)))
        self.assertEqual(r.body, want + b'\r\n--' + b + b'--\r\n')
        self.assertEqual(int(r.header('Content-Length')), len(r.body))
        # Beyond the end: 416 with the size.
        r = self.fetch(c, '/api/r', headers=[('Range', 'bytes=5000-')])
        self.assertEqual(r.status, 416)
        self.assertEqual(r.header('Content-Range'), 'bytes */4096')
        # If-Range: the same entity gets the range, another the whole.
        r = self.fetch(c, '/api/r', headers=[('Range', 'bytes=1-2'),
                                             ('If-Range', '"r1"')])
        self.assertCache(r, 'HIT', body[1:3], status=206)
        r = self.fetch(c, '/api/r', headers=[('Range', 'bytes=1-2'),
                                             ('If-Range', '"old"')])
        self.assertCache(r, 'HIT', body)
        r = self.fetch(c, '/api/r', headers=[
            ('Range', 'bytes=1-2'),
            ('If-Range', 'Mon, 02 Nov 2026 10:00:00 GMT')])
        self.assertCache(r, 'HIT', body[1:3], status=206)
        # HEAD answers what GET would; an unknown unit is ignored.
        r = self.fetch(c, '/api/r', method='HEAD',
                       headers=[('Range', 'bytes=0-9')])
        self.assertCache(r, 'HIT', b'', status=206)
        self.assertEqual(r.header('Content-Length'), '10')
        r = self.fetch(c, '/api/r', headers=[('Range', 'lines=1-2')])
        self.assertCache(r, 'HIT', body)
        self.assertEqual(o.count('/api/r'), 1)

    def test_range_on_cached_404_is_ignored(self):
        o = self.origin()
        o.script('/api/gone', status=404, body=b'not here\n',
                 headers=[('Cache-Control', 'max-age=60')])
        c = self.start_cache(o)
        self.assertCache(self.fetch(c, '/api/gone'), 'MISS', b'not here\n',
                         status=404)
        r = self.fetch(c, '/api/gone', headers=[('Range', 'bytes=0-1')])
        self.assertCache(r, 'HIT', b'not here\n', status=404)

    def test_gzip_copy_made_once_at_the_fill(self):
        page = b''.join(b'<li>item %d</li>\n' % i for i in range(300))
        o = self.origin()
        html = [('Content-Type', 'text/html'), ('ETag', '"p1"'),
                ('Cache-Control', 'max-age=60')]
        o.script('/api/page', body=page, headers=html + [
            ('Content-MD5', 'c29tZSBkaWdlc3Q=')])
        o.script('/api/notag', body=page, headers=[
            ('Content-Type', 'text/html'), ('Cache-Control', 'max-age=60'),
            ('Last-Modified', 'Mon, 02 Nov 2026 10:00:00 GMT')])
        o.script('/api/img', body=b'\0' * 4000,
                 headers=[('Content-Type', 'image/png')])
        o.script('/api/br', body=b'already', headers=html + [
            ('Content-Encoding', 'br')])
        o.script('/api/own', body=page, headers=html + [
            ('Vary', 'Accept-Encoding')])
        o.script('/api/nt', body=page, headers=[
            ('Content-Type', 'text/html'),
            ('Cache-Control', 'max-age=60, no-transform')])
        c = self.start_cache(o, gzip=True)
        gz = [('Accept-Encoding', 'gzip')]
        r = self.fetch(c, '/api/page', headers=gz)
        self.assertCache(r, 'MISS', page)
        # The miss answers as the upstream did, but says hits will vary.
        self.assertEqual(r.header('Vary'), 'Accept-Encoding')
        for _ in range(3):
            r = self.fetch(c, '/api/page', headers=gz)
            self.assertCache(r, 'HIT')
            self.assertEqual(r.header('Content-Encoding'), 'gzip')
            self.assertEqual(r.header('Vary'), 'Accept-Encoding')
            self.assertEqual(r.header('ETag'), '"p1-gz"')
            # A digest of the plain bytes would be wrong here.
            self.assertIsNone(r.header('Content-MD5'))
            self.assertEqual(int(r.header('Content-Length')), len(r.body))
            self.assertEqual(gzip.decompress(r.body), page)
        r = self.fetch(c, '/api/page')
        self.assertCache(r, 'HIT', page)
        self.assertIsNone(r.header('Content-Encoding'))
        self.assertEqual(r.header('Vary'), 'Accept-Encoding')
        self.assertEqual(r.header('ETag'), '"p1"')
        # Each copy answers its own validator; a range is of the plain one.
        self.assertEqual(r.header('Content-MD5'), 'c29tZSBkaWdlc3Q=')
        r = self.fetch(c, '/api/page', headers=gz + [
            ('If-None-Match', '"p1-gz"')])
        self.assertCache(r, 'HIT', b'', status=304)
        self.assertEqual(r.header('ETag'), '"p1-gz"')
        self.assertIsNone(r.header('Content-Encoding'))
        self.assertIsNone(r.header('Content-Type'))
        # The client's no-transform keeps the plain copy.
        r = self.fetch(c, '/api/page', headers=gz + [
            ('Cache-Control', 'no-transform')])
        self.assertCache(r, 'HIT', page)
        # Without an ETag a date cannot tell the copies apart: no 304 for
        # the gzip copy on If-Modified-Since alone.
        self.fetch(c, '/api/notag')
        ims = [('If-Modified-Since', 'Mon, 02 Nov 2026 10:00:00 GMT')]
        self.assertCache(self.fetch(c, '/api/notag', headers=ims), 'HIT',
                         b'', status=304)
        r = self.fetch(c, '/api/notag', headers=gz + ims)
        self.assertCache(r, 'HIT')
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        self.assertEqual(gzip.decompress(r.body), page)
        r = self.fetch(c, '/api/page', headers=gz + [('Range', 'bytes=0-3')])
        self.assertCache(r, 'HIT', page[:4], status=206)
        self.assertIsNone(r.header('Content-Encoding'))
        self.assertEqual(o.count('/api/page'), 1)
        # Left as they are: other types, encoded or varying answers, and
        # no-transform.
        for path, body in (('/api/img', b'\0' * 4000),
                           ('/api/br', b'already'), ('/api/own', page),
                           ('/api/nt', page)):
            for xc in ('MISS', 'HIT'):
                r = self.fetch(c, path, headers=gz)
                self.assertCache(r, xc, body)
                self.assertNotEqual(r.header('Content-Encoding'), 'gzip',
                                    path)
        # A PURGE drops the gzip copy with the response.
        c2 = self.start_cache(o, {'purge_allow': '{"127.0.0.1"}'},
                              gzip=True)
        self.fetch(c2, '/api/page')
        self.assertEqual(self.fetch(c2, '/api/page', headers=gz)
                         .header('Content-Encoding'), 'gzip')
        self.assertEqual(self.fetch(c2, '/api/page', method='PURGE').status,
                         200)
        self.assertCache(self.fetch(c2, '/api/page', headers=gz), 'MISS',
                         page)

    def test_gzip_copy_renewed_by_revalidation(self):
        page = b'<p>%d</p>\n' * 1 % 0 * 400
        o = self.origin()

        def answer(method, h):
            if h.get('if-none-match') == '"r1"':
                return 304, [('ETag', '"r1"'),
                             ('Cache-Control', 'max-age=1')], b''
            return 200, [('Content-Type', 'text/html'), ('ETag', '"r1"'),
                         ('Cache-Control', 'max-age=1')], page
        o.script('/api/rv', fn=answer)
        c = self.start_cache(o, gzip=True)
        gz = [('Accept-Encoding', 'gzip')]
        t0 = time.time()
        self.assertCache(self.fetch(c, '/api/rv', headers=gz), 'MISS', page)
        seconds_pass(2, t0)
        r = self.fetch(c, '/api/rv', headers=gz)
        self.assertCache(r, 'EXPIRED')
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        self.assertEqual(gzip.decompress(r.body), page)
        r = self.fetch(c, '/api/rv', headers=gz)
        self.assertCache(r, 'HIT')
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        self.assertEqual(o.count('/api/rv'), 2)
        self.assertEqual(o.answered_with('/api/rv', 304), 1)

    def test_purge(self):
        o = self.origin()
        o.script('/api/p', body=b'purge me')
        c = self.start_cache(o, {'purge_allow': '{"127.0.0.1"}'})
        self.fetch(c, '/api/p')
        self.assertCache(self.fetch(c, '/api/p'), 'HIT')
        self.assertEqual(self.fetch(c, '/api/p', method='PURGE').status, 200)
        self.assertCache(self.fetch(c, '/api/p'), 'MISS')
        self.assertEqual(self.fetch(c, '/api/none',
                                    method='PURGE').status, 404)
        self.assertEqual(o.count('/api/p'), 2)

    def test_purge_refused(self):
        o = self.origin()
        c = self.start_cache(o, {'purge_allow': '{"10.1.2.3"}'})
        self.fetch(c, '/api/q')
        self.assertEqual(self.fetch(c, '/api/q', method='PURGE').status, 403)
        self.assertCache(self.fetch(c, '/api/q'), 'HIT')

    def test_purge_removes_every_variant(self):
        o = self.origin()
        o.script('/api/pv', headers=[('Vary', 'Accept-Encoding')],
                 fn=lambda m, h: (200, [('Vary', 'Accept-Encoding')],
                                  h.get('accept-encoding', 'none').encode()))
        c = self.start_cache(o, {'purge_allow': '{"127.0.0.1", "::1"}'})
        gz = [('Accept-Encoding', 'gzip')]
        self.fetch(c, '/api/pv', headers=gz)
        self.fetch(c, '/api/pv')
        self.assertEqual(self.fetch(c, '/api/pv', method='PURGE').status,
                         200)
        self.assertCache(self.fetch(c, '/api/pv', headers=gz), 'MISS')
        self.assertCache(self.fetch(c, '/api/pv'), 'MISS')

    def test_post_invalidates(self):
        o = self.origin()
        c = self.start_cache(o)
        self.fetch(c, '/api/echo')
        self.assertCache(self.fetch(c, '/api/echo'), 'HIT')
        r = c.get('/api/echo', method='POST', body=b'x',
                  headers=[('Content-Length', '1')])
        self.assertCache(r, 'BYPASS')
        self.assertCache(self.fetch(c, '/api/echo'), 'MISS')

    def test_hit_for_pass(self):
        o = self.origin()
        o.script('/api/hfp', headers=[('Set-Cookie', 's=1')], body=b'h',
                 delay=0.3)
        c = self.start_cache(o)
        self.assertCache(self.fetch(c, '/api/hfp'), 'MISS')
        # Marked pass: concurrent requests all go to the origin at once
        # instead of queueing behind the lock.
        waits = self.stats(c)['lease_waits']
        out = []
        ths = [threading.Thread(target=lambda: out.append(
            self.fetch(c, '/api/hfp'))) for _ in range(4)]
        for th in ths:
            th.start()
        for th in ths:
            th.join(10)
        self.assertEqual([r.header('X-Cache') for r in out], ['BYPASS'] * 4)
        self.assertEqual(o.count('/api/hfp'), 5)
        self.assertEqual(self.stats(c)['lease_waits'], waits)

    def test_purge_with_a_body_is_refused(self):
        # A PURGE is the cache's: with a body it is refused, never passed
        # on to the origin, and the entry stays.
        o = self.origin()
        o.script('/api/pb', body=b'kept')
        c = self.start_cache(o, {'purge_allow': '{"127.0.0.1"}'})
        self.fetch(c, '/api/pb')
        for hdrs, data in (([('Content-Length', '4')], b'body'),
                           ([('Transfer-Encoding', 'chunked')],
                            b'4\r\nbody\r\n0\r\n\r\n')):
            with self.subTest(hdrs=hdrs), c.connect() as conn:
                conn.send(build_request('/api/pb', method='PURGE',
                                        headers=hdrs) + data)
                r = conn.read_response()
                self.assertEqual(r.status, 400, r)
        self.assertEqual(o.count('/api/pb'), 1)
        self.assertCache(self.fetch(c, '/api/pb'), 'HIT', b'kept')
        self.assertEqual(self.fetch(c, '/api/pb', method='PURGE').status,
                         200)
        c.wait_log(r'\[info\].*PURGE with a body')

    def test_origin_x_cache_replaced_by_ours(self):
        o = self.origin()
        o.script('/api/xc', body=b'x', headers=[('X-Cache', 'HIT from evil'),
                                               ('Cache-Control', 'max-age=60')])
        o.script('/nc/xc', body=b'y', headers=[('X-Cache', 'HIT from app')])
        c = self.start_cache(
            o, extra='  location "/nc/" {\n    proxy = "app"\n  }\n')
        for want in ('MISS', 'HIT'):
            r = self.fetch(c, '/api/xc')
            self.assertEqual(r.headers.get_all('X-Cache'), [want], r)
        # Where corral states none, the origin's goes through.
        r = self.fetch(c, '/nc/xc')
        self.assertEqual(r.headers.get_all('X-Cache'), ['HIT from app'], r)

    def test_too_large_after_a_reload_reserves_nothing(self):
        # A reload that lowers max_object keeps the store, and its larger
        # limit, until a restart.  A response between the two limits is
        # counted too large and streamed; it used to be counted by
        # reserving room for it and dropping the handle, which leaked one
        # of the worker's store references per request until none was left
        # and the cache stopped answering.
        o = self.origin()
        o.script('/api/small', body=b'small')
        c = self.start_cache(o, {'cache_pass_ttl': '0'}, workers=1)
        with open(c.conf_path) as f:
            text = f.read()
        with open(c.conf_path, 'w') as f:
            f.write(text.replace('cache {\n', 'cache {\n  max_object = 16k\n'))
        os.kill(c.master_pid, signal.SIGHUP)
        c.wait_log(r'worker 0 of generation 1 \(pid \d+\) exited')
        before = self.stats(c)['too_large']
        n = 1100
        for _ in range(n // 100):
            with c.connect() as conn:
                for _ in range(100):
                    conn.send(build_request('/api/size/20000'))
                    r = conn.read_response()
                    self.assertEqual(r.status, 200)
                    self.assertEqual(len(r.body), 20000)
        self.assertEqual(r.header('X-Cache'), 'MISS')
        self.assertEqual(self.stats(c)['too_large'] - before, n)
        # The worker's store still answers.
        self.assertCache(self.fetch(c, '/api/small'), 'MISS', b'small')
        self.assertCache(self.fetch(c, '/api/small'), 'HIT', b'small')

    def test_config_errors(self):
        o = self.origin()
        c = self.make()
        for bad in ('cache_stale = {"sometimes"}',
                    'purge_allow = {"localhost"}',
                    'cache_ttl = -1', 'cache_grace = 8d'):
            text = c.config_text()
            at = text.index('server {\n') + len('server {\n')
            text = (text[:at] + '  location "/api/" {\n    proxy = "app"\n'
                    '    %s\n  }\n' % bad + text[at:] +
                    'upstream "app" {\n  servers = {%s}\n}\n' % quote(o.addr))
            with open(c.conf_path, 'w') as f:
                f.write(text)
            out = subprocess.run([BIN, '-t', '-c', c.conf_path],
                                 capture_output=True, text=True, timeout=10)
            self.assertNotEqual(out.returncode, 0, bad)
            # The line of the location's directive is named.
            line = text[:text.index(bad)].count('\n') + 1
            self.assertIn('%s:%d' % (c.conf_path, line), out.stderr, bad)
