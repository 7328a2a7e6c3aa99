"""
Wakeups keyed by object (issue 13): when a fill lands, only the requests
waiting for that key look the store up again; the requests waiting for
another key of the same lock stripe, in the same worker, stay asleep.
The store counts each look that finds a fill under way (lease_waits), so
a wakeup of the wrong waiters shows in that count.
"""
import os
import socket
import threading

from harness import build_request, parse_response, wait_until
from test_proxy_cache import ProxyCacheCase


class KeyedWakeupTest(ProxyCacheCase):

    def start_one_stripe(self, o):
        """One worker, and a store of one stripe: both keys share every
        lock, so only the key tells their waiters apart."""
        c = self.make(workers=1)
        c.directives['cache'] = {'path': os.path.join(c.tmp, 'cache.store'),
                                 'stripes': 1}
        text = c.config_text()
        at = text.index('server {\n') + len('server {\n')
        text = (text[:at] + '  location "/api/" {\n    proxy = "app"\n'
                '    cache = on\n    cache_ttl = 60\n  }\n' + text[at:] +
                'upstream "app" {\n  servers = {"%s"}\n}\n' % o.addr)
        with open(c.conf_path, 'w') as f:
            f.write(text)
        c.start()
        return c

    def clients(self, c, path, n, out):
        """n clients that ask for path at once; out gets their replies."""
        def one():
            s = socket.create_connection(('127.0.0.1', c.port), timeout=20)
            s.sendall(build_request(path))
            buf, r = b'', None
            while r is None:
                data = s.recv(65536)
                if not data:
                    break
                buf += data
                r = parse_response(buf)
            s.close()
            out.append(r and r[0])
        threads = [threading.Thread(target=one) for _ in range(n)]
        for t in threads:
            t.start()
        return threads

    def test_a_fill_wakes_only_its_waiters(self):
        o = self.origin()
        o.script('/api/slow', body=b'slow\n', delay=4.0)
        o.script('/api/quick', body=b'quick\n', delay=1.0)
        c = self.start_one_stripe(o)
        # A worker answers only once the store is made.
        self.assertEqual(c.get('/none').status, 404)
        waits0 = self.stats(c)['lease_waits']
        slow, quick = [], []
        ts = self.clients(c, '/api/slow', 5, slow)
        self.assertTrue(wait_until(lambda: o.count('/api/slow') == 1, 5))
        ts += self.clients(c, '/api/quick', 5, quick)
        # Everyone is in: one filler and four waiters for each key.
        self.assertTrue(wait_until(
            lambda: self.stats(c)['lease_waits'] - waits0 >= 8, 5),
            self.stats(c))
        self.assertTrue(wait_until(lambda: len(quick) == 5, 10))
        # The quick key's fill woke its four waiters, who found it; the
        # slow key's waiters never looked again.
        st = self.stats(c)
        self.assertEqual(st['lease_waits'] - waits0, 8, st)
        self.assertEqual(len(slow), 0, 'a slow client was answered early')
        for t in ts:
            t.join(20)
        for r in slow:
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, b'slow\n')
        for r in quick:
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.body, b'quick\n')
        self.assertEqual(o.count('/api/slow'), 1)
        self.assertEqual(o.count('/api/quick'), 1)
        self.assertEqual(self.stats(c)['lease_waits'] - waits0, 8)
