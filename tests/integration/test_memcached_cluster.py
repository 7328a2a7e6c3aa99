"""
A cluster of real memcached nodes behind corral: location memcached =
NAME serves the value of the request's URI as nginx's memcached_pass
does, on the node libmemcached's ketama picks (checked with libmemcached
itself through pylibmc, and with memccat on each node), a dead node's keys
moving on the ring as a libmemcached client moves them.
"""

import re
import subprocess

from harness import Conn, CorralTestCase, build_request, need_tool, quote
from mcnode import Node, exchange, pylibmc


def node_stat(node, name):
    """One of a memcached node's own stats."""
    out = exchange(node.port, b'stats\r\n', until=b'END\r\n').decode()
    return int(re.search(r'STAT %s (\d+)' % name, out).group(1))


class Cluster(CorralTestCase):

    def nodes(self, n=3):
        out = []
        for _ in range(n):
            node = Node().start()
            self.addCleanup(node.stop)
            out.append(node)
        return out

    def corral(self, nodes, loc=None, upstream=None, others=None, **kw):
        l = {'memcached': quote('mc')}
        l.update(loc or {})
        up = {'servers': '{%s}' % ', '.join(quote(n.address)
                                            for n in nodes),
              'protocol': 'memcached', 'max_fails': 1,
              'fail_timeout': '30s', 'connect_timeout': '1s',
              'read_timeout': '2s'}
        up.update(upstream or {})
        server = {'location "/pages/"': l}
        server.update(others or {})
        kw['upstream "mc"'] = up
        return self.start(server=server, **kw)

    def libmemcached(self, nodes, **behaviors):
        m = pylibmc()
        b = {'ketama_weighted': True}
        b.update(behaviors)
        c = m.Client([n.address for n in nodes], behaviors=b)
        return c

    def get(self, c, path, headers=()):
        with Conn(c.port) as conn:
            conn.send(build_request(path, headers=headers))
            return conn.read_response()

    def holder(self, nodes, key):
        """Which node has key, asked with memccat on each one alone."""
        tool = need_tool('memccat')
        found = []
        for i, n in enumerate(nodes):
            out = subprocess.run([tool, '--servers=' + n.address, key],
                                 capture_output=True, timeout=10)
            if out.returncode == 0 and out.stdout:
                found.append(i)
        return found

    def test_pages_come_from_the_node_libmemcached_chose(self):
        nodes = self.nodes()
        c = self.corral(nodes)
        mc = self.libmemcached(nodes)
        keys = ['/pages/%d.html' % i for i in range(30)]
        for k in keys:
            mc.set(k, ('<p>%s</p>' % k).encode())
        spread = {}
        for k in keys:
            where = self.holder(nodes, k)
            self.assertEqual(len(where), 1, k)
            spread[where[0]] = spread.get(where[0], 0) + 1
            r = self.get(c, k)
            self.assertBody(r, ('<p>%s</p>' % k).encode())
            self.assertEqual(r.header('Content-Type'),
                             'text/html; charset=utf-8')
        self.assertEqual(len(spread), 3, 'all three nodes hold keys')
        r = self.get(c, '/pages/none.html')
        self.assertEqual(r.status, 404)

    def test_a_miss_goes_to_error_page(self):
        # nginx's memcached_pass: the node's END is a 404 that error_page
        # sends to the application ("404 = @app": the app's status and
        # body); the node's connection is kept all along.
        node = self.nodes(1)[0]
        o = self.origin()
        o.script('/pages/new', body=b'made by the app')
        o.script('/pages/gone', status=410, body=b'app: gone')
        c = self.corral([node], loc={'default_type':
                                     'text/html; charset=utf-8',
                                     'error_page': ['404 = @app']},
                        upstream={'keepalive': 4},
                        others={'location "@app"': {'proxy': quote('app')}},
                        workers=1, _raw='upstream "app" {\n  servers = '
                        '{"%s"}\n}\n' % o.addr)
        mc = self.libmemcached([node])
        mc.set('/pages/hello', b'<p>from memcached</p>')
        r = self.get(c, '/pages/hello')
        self.assertBody(r, b'<p>from memcached</p>')
        self.assertEqual(r.header('Content-Type'), 'text/html; charset=utf-8')
        conns = node_stat(node, 'total_connections')
        for i in range(3):
            self.assertBody(self.get(c, '/pages/new'), b'made by the app')
        self.assertEqual(o.count('/pages/new'), 3)
        self.assertBody(self.get(c, '/pages/gone'), b'app: gone', status=410)
        with Conn(c.port) as conn:
            conn.send(build_request('/pages/new', method='HEAD'))
            r = conn.read_response(method='HEAD')
        self.assertEqual(r.status, 200)
        self.assertEqual(o.count('/pages/new'), 4)
        # One more: the stats question's own.
        self.assertEqual(node_stat(node, 'total_connections'), conns + 1)
        mc.set('/pages/new', b'written by the app')
        self.assertBody(self.get(c, '/pages/new'), b'written by the app')
        self.assertEqual(o.count('/pages/new'), 4)
        # Without error_page, a miss is corral's own 404 page.
        c2 = self.corral([node])
        r = self.get(c2, '/pages/none')
        self.assertEqual(r.status, 404)
        self.assertIn(b'404', r.body)

    def test_a_miss_of_a_caching_location_is_not_stored(self):
        # With cache = on the miss still goes to error_page, each time
        # (nothing is stored for it), and the value the app writes later
        # is cached.
        node = self.nodes(1)[0]
        o = self.origin()
        o.script('/pages/new', body=b'made by the app')
        c = self.corral([node], loc={'cache': True, 'cache_ttl': 60,
                                     'error_page': ['404 = @app']},
                        others={'location "@app"': {'proxy': quote('app')}},
                        workers=1, cache={'size': '32m'},
                        _raw='upstream "app" {\n  servers = {"%s"}\n}\n' %
                        o.addr)
        for i in range(3):
            self.assertBody(self.get(c, '/pages/new'), b'made by the app')
        self.assertEqual(o.count('/pages/new'), 3)
        self.libmemcached([node]).set('/pages/new', b'written')
        r = self.get(c, '/pages/new')
        self.assertBody(r, b'written')
        self.assertEqual(r.header('X-Cache'), 'MISS')
        node.stop()
        r = self.get(c, '/pages/new')
        self.assertBody(r, b'written')
        self.assertEqual(r.header('X-Cache'), 'HIT')
        self.assertEqual(o.count('/pages/new'), 3)

    def test_key_from_variables(self):
        nodes = self.nodes()
        c = self.corral(nodes, loc={'memcached_key':
                                    quote('$host:$uri$is_args$args')})
        mc = self.libmemcached(nodes)
        keys = ['localhost:/pages/%d?x=1' % i for i in range(10)]
        for k in keys:
            mc.set(k, k.encode())
        for i, k in enumerate(keys):
            self.assertBody(self.get(c, '/pages/%d?x=1' % i), k.encode())
        self.assertEqual(self.get(c, '/pages/0').status, 404)

    def test_gzip_flag_and_head(self):
        nodes = self.nodes(1)
        c = self.corral(nodes, loc={'memcached_gzip_flag': 2})
        mc = self.libmemcached(nodes)
        import gzip
        body = gzip.compress(b'hello ' * 100)
        mc.set('/pages/z.txt', body)
        self.assertEqual(subprocess.run(
            [need_tool('memccat'), '--servers=' + nodes[0].address,
             '/pages/z.txt'], capture_output=True).stdout, body + b'\n')
        # pylibmc stores bytes with flags 0: set flags 2 by hand.
        from mcnode import exchange
        self.assertEqual(exchange(nodes[0].port, b'set /pages/z.txt 2 0 %d'
                                  b'\r\n' % len(body) + body + b'\r\n'),
                         b'STORED\r\n')
        r = self.get(c, '/pages/z.txt')
        self.assertBody(r, body)
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        self.assertTrue(r.header('Content-Type').startswith('text/plain'))
        with Conn(c.port) as conn:
            conn.send(build_request('/pages/z.txt', method='HEAD'))
            r = conn.read_response(method='HEAD')
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header('Content-Length'), str(len(body)))
        self.assertEqual(r.body, b'')

    def test_a_dead_node_s_keys_move_as_libmemcached_moves_them(self):
        nodes = self.nodes()
        c = self.corral(nodes)
        mc = self.libmemcached(nodes)
        keys = ['/pages/k%d' % i for i in range(30)]
        for k in keys:
            mc.set(k, b'v1 ' + k.encode())
        victim = self.holder(nodes, keys[0])[0]
        moved = [k for k in keys if self.holder(nodes, k) == [victim]]
        nodes[victim].stop()
        # The first request to the dead node marks it down and goes on to
        # the key's next node, where libmemcached, ejecting it, puts the
        # key: a miss there (404, for error_page), not an error.
        self.assertEqual(self.get(c, moved[0]).status, 404)
        dead = re.escape(nodes[victim].address)
        self.assertRegex(c.log(), r'upstream %s: connect: Connection '
                         r'refused, client [^;]*; the key goes to '
                         r'127\.0\.0\.1:\d+' % dead)
        alive = [n for i, n in enumerate(nodes) if i != victim]
        ejected = self.libmemcached(alive)
        for k in moved:
            ejected.set(k, b'v2 ' + k.encode())
        for k in keys:
            want = (b'v2 ' if k in moved else b'v1 ') + k.encode()
            self.assertBody(self.get(c, k), want)

    def test_all_nodes_down_is_an_error_page_not_a_hang(self):
        nodes = self.nodes(2)
        c = self.corral(nodes)
        for n in nodes:
            n.stop()
        for _ in range(3):
            self.assertEqual(self.get(c, '/pages/x').status, 502)
