"""
A memcached cluster as the cache's second level (cache { l2 = "mc" }):
two corral instances with stores of their own and three real memcached
nodes, one origin.  A page fetched through one is a hit through the other
with one origin request in total; a PURGE deletes it in the cluster too;
a node killed under load fails no request; a cluster entirely down means
origin answers, not errors.
"""

import os
import subprocess
import threading

from harness import (Conn, CorralTestCase, Raw, build_request, need_tool,
                     quote, wait_until)
from mcnode import CountingProxy, Node, exchange
from origin import Origin


def node_stat(node, name):
    """One of a memcached node's own stats."""
    out = exchange(node.port, b'stats\r\n', until=b'END\r\n')
    for line in out.split(b'\r\n'):
        if line.startswith(b'STAT %s ' % name.encode()):
            return int(line.split()[2])
    raise AssertionError('no stat %s' % name)


def items(nodes):
    """How many items the cluster holds now, from each node's stats."""
    total = 0
    for n in nodes:
        if n.proc is None or n.proc.poll() is not None:
            continue
        out = exchange(n.port, b'stats\r\n', until=b'END\r\n')
        for line in out.split(b'\r\n'):
            if line.startswith(b'STAT curr_items '):
                total += int(line.split()[2])
    return total


class SecondLevel(CorralTestCase):

    def setUp(self):
        self.origin = Origin().start()
        self.addCleanup(self.origin.stop)
        self.nodes = []
        for _ in range(3):
            n = Node().start()
            self.addCleanup(n.stop)
            self.nodes.append(n)

    def corral(self, workers=1, nodes=None):
        up = {'servers': '{%s}' % ', '.join(quote(n.address)
                                            for n in nodes or self.nodes),
              'protocol': 'memcached', 'max_fails': 1,
              'fail_timeout': '30s', 'connect_timeout': '200ms'}
        app = {'servers': '{%s}' % quote(self.origin.addr)}
        loc = {'proxy': quote('app'), 'cache': True, 'cache_ttl': 60,
               'purge_allow': Raw('{"127.0.0.1"}')}
        return self.start(workers=workers,
                          cache={'size': Raw('32m'), 'l2': quote('mc'),
                                 'l2_timeout': Raw('200ms')},
                          server={'location "/"': loc},
                          **{'upstream "mc"': up, 'upstream "app"': app})

    def get(self, c, path, method='GET', headers=()):
        with Conn(c.port) as conn:
            conn.send(build_request(path, method=method, headers=headers))
            return conn.read_response(method=method)

    def test_one_machine_s_fill_is_the_other_s_hit(self):
        a, b = self.corral(), self.corral()
        r = self.get(a, '/page/1')
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header('X-Cache'), 'MISS')
        wait_until(lambda: items(self.nodes) >= 1, 5)
        r = self.get(b, '/page/1')
        self.assertBody(r, b'ok /page/1\n')
        self.assertEqual(r.header('X-Cache'), 'HIT')
        self.assertEqual(self.origin.count('/page/1'), 1)
        # B keeps it locally now: the cluster going away changes nothing.
        for n in self.nodes:
            n.stop()
        self.assertEqual(self.get(b, '/page/1').header('X-Cache'), 'HIT')
        self.assertEqual(self.origin.count('/page/1'), 1)

    def test_variants_come_from_the_cluster_too(self):
        # The Vary spec and each variant are items of their own: B asks
        # for the URL's, finds the spec, then asks for its variant.
        def answer(method, h):
            lang = h.get('accept-language', 'none')
            return 200, [('Vary', 'Accept-Language'),
                         ('Cache-Control', 'max-age=60')], \
                ('page in %s\n' % lang).encode()
        self.origin.script('/v', fn=answer)
        a, b = self.corral(), self.corral()
        fr, de = [('Accept-Language', 'fr')], [('Accept-Language', 'de')]
        r = self.get(a, '/v', headers=fr)
        self.assertBody(r, b'page in fr\n')
        self.assertEqual(r.header('X-Cache'), 'MISS')
        wait_until(lambda: items(self.nodes) >= 2, 5)
        r = self.get(b, '/v', headers=fr)
        self.assertBody(r, b'page in fr\n')
        self.assertEqual(r.header('X-Cache'), 'HIT')
        self.assertEqual(self.origin.count('/v'), 1)
        # Another variant is not in the cluster: the origin, once, then
        # the first machine has it from the cluster.
        r = self.get(b, '/v', headers=de)
        self.assertBody(r, b'page in de\n')
        self.assertEqual(self.origin.count('/v'), 2)
        wait_until(lambda: items(self.nodes) >= 3, 5)
        r = self.get(a, '/v', headers=de)
        self.assertBody(r, b'page in de\n')
        self.assertEqual(r.header('X-Cache'), 'HIT')
        self.assertEqual(self.origin.count('/v'), 2)

    def test_a_variant_and_its_url_in_one_round_trip(self):
        # One node behind a relay that counts get commands.  B learns the
        # Vary list from /v1 (the URL's get, then its variant's); then
        # /v2, whose names are the same, is one "get URL VARIANT".
        made = []

        def answer(method, h):
            made.append(1)		# each answer is told apart
            lang = h.get('accept-language', 'none')
            return 200, [('Vary', 'Accept-Language'),
                         ('Cache-Control', 'max-age=60')], \
                ('page in %s, %d\n' % (lang, len(made))).encode()
        self.origin.script('/v1', fn=answer)
        self.origin.script('/v2', fn=answer)
        relay = CountingProxy(self.nodes[0])
        self.addCleanup(relay.stop)
        a, b = self.corral(nodes=[relay]), self.corral(nodes=[relay])
        fr = [('Accept-Language', 'fr')]
        one = self.get(a, '/v1', headers=fr).body
        two = self.get(a, '/v2', headers=fr).body
        wait_until(lambda: items(self.nodes[:1]) >= 4, 5)
        relay.taken()
        r = self.get(b, '/v1', headers=fr)
        self.assertBody(r, one)
        self.assertEqual(r.header('X-Cache'), 'HIT')
        self.assertEqual(len(relay.taken()), 2)	# B knew no Vary list
        hits = node_stat(self.nodes[0], 'get_hits')
        r = self.get(b, '/v2', headers=fr)
        self.assertBody(r, two)
        self.assertEqual(r.header('X-Cache'), 'HIT')
        gets = relay.taken()
        self.assertEqual(len(gets), 1, gets)	# one round trip
        self.assertEqual(len(gets[0]), 2, gets)	# the URL, the variant
        self.assertEqual(node_stat(self.nodes[0], 'get_hits'), hits + 2)
        self.assertEqual(self.origin.count('/v1') +
                         self.origin.count('/v2'), 2)
        # A variant of a purged spec is never taken for the new spec's.
        self.assertEqual(self.get(a, '/v1', method='PURGE').status, 200)
        wait_until(lambda: items(self.nodes[:1]) == 3, 5)  # the spec went
        de = [('Accept-Language', 'de')]
        self.assertBody(self.get(a, '/v1', headers=de), b'page in de, 3\n')
        # The new spec and its de variant; the old fr variant stays.
        wait_until(lambda: items(self.nodes[:1]) == 5, 5)
        c = self.corral(nodes=[relay])
        self.get(c, '/v2', headers=fr)		# c learns the Vary list
        r = self.get(c, '/v1', headers=fr)
        self.assertBody(r, b'page in fr, 4\n')
        self.assertEqual(r.header('X-Cache'), 'MISS')

    def test_purge_deletes_in_the_cluster(self):
        a, b = self.corral(), self.corral()
        self.assertEqual(self.get(a, '/page/p').status, 200)
        wait_until(lambda: items(self.nodes) >= 1, 5)
        self.assertEqual(self.get(a, '/page/p', method='PURGE').status, 200)
        wait_until(lambda: items(self.nodes) == 0, 5)
        r = self.get(b, '/page/p')
        self.assertEqual(r.header('X-Cache'), 'MISS')
        self.assertEqual(self.origin.count('/page/p'), 2)

    def test_cluster_down_means_the_origin(self):
        a = self.corral()
        for n in self.nodes:
            n.stop()
        for i in range(6):
            r = self.get(a, '/down/%d' % i)
            self.assertBody(r, b'ok /down/%d\n' % i)
        self.assertEqual(sum(self.origin.count('/down/%d' % i)
                             for i in range(6)), 6)

    def test_a_node_killed_under_load_fails_no_request(self):
        wrk = need_tool('wrk')
        a = self.corral(workers=2)
        script = os.path.join(a.tmp, 'paths.lua')
        with open(script, 'w') as f:
            f.write('local i = 0\n'
                    'request = function()\n'
                    '  i = i + 1\n'
                    '  return wrk.format("GET", "/load/" .. (i % 500))\n'
                    'end\n'
                    'done = function(s, l, r)\n'
                    '  io.write(string.format("RESULT %d %d %d %d %d %d\\n",'
                    ' s.requests, s.errors.connect, s.errors.read,'
                    ' s.errors.write, s.errors.status, s.errors.timeout))\n'
                    'end\n')
        out = {}

        def load():
            out['p'] = subprocess.run(
                [wrk, '-t', '1', '-c', '8', '-d', '3s', '-s', script,
                 'http://127.0.0.1:%d/' % a.port], capture_output=True,
                text=True, timeout=60)
        t = threading.Thread(target=load)
        t.start()
        wait_until(lambda: self.origin.count('/load/1') +
                   self.origin.count('/load/2') > 0, 5)
        self.nodes[1].stop()
        t.join()
        line = [l for l in out['p'].stdout.splitlines()
                if l.startswith('RESULT ')]
        self.assertEqual(len(line), 1, out['p'].stdout)
        requests, *errors = (int(x) for x in line[0].split()[1:])
        self.assertGreater(requests, 100)
        self.assertEqual(errors, [0, 0, 0, 0, 0], out['p'].stdout)
