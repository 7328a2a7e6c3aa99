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
from mcnode import Node, pylibmc


class Cluster(CorralTestCase):

    def nodes(self, n=3):
        out = []
        for _ in range(n):
            node = Node().start()
            self.addCleanup(node.stop)
            out.append(node)
        return out

    def corral(self, nodes, loc=None, upstream=None):
        l = {'memcached': quote('mc')}
        l.update(loc or {})
        up = {'servers': '{%s}' % ', '.join(quote(n.address)
                                            for n in nodes),
              'protocol': 'memcached', 'max_fails': 1,
              'fail_timeout': '30s', 'connect_timeout': '1s',
              'read_timeout': '2s'}
        up.update(upstream or {})
        return self.start(server={'location "/pages/"': l},
                          **{'upstream "mc"': up})

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
