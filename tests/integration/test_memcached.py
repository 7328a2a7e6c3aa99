"""
The memcached listener on the shared store, against memcached itself:
memccapable's ASCII tests, the replies to bad input byte for byte, the
meta commands, pymemcache, memcached's TTL rules, two workers sharing the
items, the unix socket, flush_all, the counters, and -t on a bad section.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from harness import (BIN, Conn, CorralTestCase, Raw, ServerError,
                     build_request, free_port, need_tool, quote, wait_until)
from mcnode import Node, exchange, pymemcache


def norm(b):
    """Versions and cas values differ between servers; the rest may not."""
    b = re.sub(rb'VERSION [^\r]*', b'VERSION x', b)
    b = re.sub(rb'(VALUE \S+ \d+ \d+) \d+', rb'\1 CAS', b)
    return re.sub(rb' c\d+', b' cN', b)


def same_ttls(a, b):
    """
    a and b with each remaining TTL ("t99" flags) of b put into a where the
    two are a second apart: both servers count whole seconds from their own
    clock, so a case read across a second's tick says t99 where the other
    said t100.  Any other difference stays.
    """
    ta = re.findall(rb' t(-?\d+)', a)
    tb = re.findall(rb' t(-?\d+)', b)
    if len(ta) != len(tb) or any(abs(int(x) - int(y)) > 1
                                 for x, y in zip(ta, tb)):
        return a, b
    it = iter(tb)
    return re.sub(rb' t(-?\d+)', lambda m: b' t' + next(it), a), b


class Listener(CorralTestCase):

    def corral(self, workers=1, stats_file=None, **mc):
        self.mc_port = free_port()
        conf = {'listen': ['127.0.0.1:%d' % self.mc_port],
                'allow_flush': True}
        conf.update(mc)
        return self.start(workers=workers, memcached=conf,
                          cache={'size': Raw('64m')}, stats_file=stats_file,
                          body_timeout=Raw('1s'))

    def memcached(self, **kw):
        n = Node(**kw).start()
        self.addCleanup(n.stop)
        return n

    def ask(self, data, port=None, **kw):
        return exchange(port or self.mc_port, data, **kw)


class Conformance(Listener):

    def test_memccapable_passes_what_memcached_passes(self):
        tool = need_tool('memccapable')
        node = self.memcached()
        self.corral()

        def run(port):
            out = subprocess.run([tool, '-h', '127.0.0.1', '-p', str(port),
                                  '-a'], capture_output=True, text=True,
                                 timeout=60)
            return {m.group(1): m.group(2) for m in re.finditer(
                r'^(ascii [\w ]+?)\s+\[(\w+)\]', out.stdout, re.M)}
        theirs, ours = run(node.port), run(self.mc_port)
        passed = {t for t, r in theirs.items() if r == 'pass'}
        self.assertGreaterEqual(len(passed), 27, theirs)
        self.assertEqual({t: ours.get(t) for t in passed},
                         {t: 'pass' for t in passed})

    # Each line is answered as memcached 1.6 answers it.
    SAME = [
        b'set ' + b'k' * 251 + b' 0 0 1\r\na\r\n',
        b'set ' + b'k' * 250 + b' 0 0 1\r\na\r\nget ' + b'k' * 250 + b'\r\n',
        b'get ' + b'k' * 251 + b'\r\n',
        b'set a\x01b 0 0 1\r\nx\r\nget a\x01b\r\n',
        b'set k 0 0 -1\r\n', b'set k 0 0 abc\r\n',
        b'set k abc 0 1\r\nx\r\n', b'set k 0 abc 1\r\nx\r\n',
        b'set k 0 0 3\r\nabc\r\nversion\r\n',
        b'set k -1 0 1\r\nx\r\n', b'set k 0 0 1 noreply extra\r\nx\r\n',
        b'set k 0 0\r\n', b'set k 0 0 2147483647\r\n',
        b'set k 18446744073709551616 0 1\r\nx\r\n',
        b'set k 4294967296 0 1\r\nx\r\nget k\r\n',
        b'incr k\r\n', b'incr missing 1\r\n',
        b'set n 0 0 2\r\n10\r\nincr n -1\r\nincr n 18446744073709551616\r\n'
        b'incr n abc\r\nincr n 18446744073709551615\r\ndecr n 100\r\n',
        b'set s 0 0 2\r\nab\r\nincr s 1\r\n',
        b'set n 0 0 3\r\n100\r\ndecr n 1\r\nget n\r\nincr n 5\r\nget n\r\n',
        b'bogus\r\n', b'\r\n', b'get\r\n', b'STATS\r\n', b'get \x00\r\n',
        b'touch k\r\n', b'touch k abc\r\n',
        b'delete k 0\r\ndelete k 5\r\ndelete k noreply\r\n',
        b'verbosity\r\nverbosity 1\r\nverbosity abc\r\n',
        b'cas k 0 0 1\r\n', b'cas k 0 0 1 abc\r\nx\r\n',
        b'gat\r\ngat 10\r\ngat abc k\r\n',
        b'set k 0 0 1\r\nx\r\ngets k\r\ngat 100 k\r\ngats 100 k nokey\r\n'
        b'touch k 10\r\ntouch nokey 10\r\n',
        b'append nokey 0 0 1\r\nx\r\nprepend nokey 0 0 1\r\nx\r\n'
        b'cas nokey 0 0 1 5\r\nx\r\ndelete nokey\r\n',
        b'set k 0 0 1\r\nx\r\ncas k 0 0 1 1\r\ny\r\nadd k 0 0 1\r\nz\r\n'
        b'replace k 5 0 1\r\nr\r\nget k\r\n',
        b'flush_all abc\r\n', b'flush_all 1 2 3\r\n',
        b'set k 0 0 2000000\r\n' + b'x' * 2000000 + b'\r\nget big\r\n'
        b'version\r\n',
        b'set k 0 0 1\r\nx\r\nset k 0 0 1048577\r\n' + b'x' * 1048577 +
        b'\r\nget k\r\n',
        b'set k 0 0 2000000 noreply\r\n' + b'x' * 2000002 + b'version\r\n',
        b'quit\r\nversion\r\n',
        # meta
        b'set k 0 0 1\r\nx\r\nmg k v\r\nmg k s v f t c k O123 q\r\n'
        b'mg nokey v q\r\nmg nokey v\r\nmn\r\n',
        b'mg nokey2 v N30\r\nmg nokey2 v N30\r\nms nokey2 2 T60\r\nhi\r\n'
        b'mg nokey2 v c\r\n',
        b'ms mk 2\r\nhi\r\nmg mk v t\r\nms mk 2 T100 F5 c\r\nho\r\n'
        b'mg mk v f t\r\nms mk 2 C1\r\nzz\r\nms mk 2 MA\r\nzz\r\nmg mk v\r\n'
        b'ms mk2 2 ME\r\nab\r\nms mk2 2 ME\r\nab\r\n',
        b'ms mk 2\r\nhi\r\nmd mk I T30\r\nmg mk v c\r\nmg mk v c\r\n'
        b'mg mk v\r\nms mk 2\r\nnw\r\nmg mk v\r\n',
        b'ms mr 2 T10\r\nhi\r\nmg mr v R30 t\r\nmg mr v R30 t\r\n',
        b'ma cnt\r\nma cnt N0 J10 v\r\nma cnt v\r\nma cnt MD D3 v\r\n'
        b'ma cnt v t\r\n',
        b'mg ' + b'k' * 251 + b' v\r\nmg k zz\r\nmg k v v\r\nms k abc\r\n'
        b'ms k 2 MZ\r\nhi\r\n',
        b'mg a2V5 b v\r\nms a2V5 2 b\r\nhi\r\nmg key v\r\nmg a2V5 b k v\r\n',
        b'md nokey\r\nmd nokey q\r\nmn\r\nmd k q\r\nmn\r\n',
        b'ms k S2\r\nhi\r\n', b'ms k 2 T-1\r\nhi\r\nmg k v\r\n',
        b'mg k v T\r\n', b'mg k v O' + b'x' * 40 + b'\r\n',
        b'ms k 2 Mx\r\nhi\r\n', b'ms k 2 F-1\r\nhi\r\n', b'ma k MX\r\n',
        b'ma k Dabc\r\n', b'md k zz\r\n', b'ms k 2 3\r\nhi\r\n',
        b'mg k k v O1 O2\r\n', b'me\r\n', b'mn x\r\n', b'mg k v b\r\n',
    ]

    END = b'EN k__end__ O999\r\n'

    def test_replies_are_memcached_s(self):
        node = self.memcached()
        self.corral()
        for case in self.SAME:
            with self.subTest(case=case[:60]):
                self.ask(b'flush_all\r\n', node.port, until=b'OK\r\n')
                self.ask(b'flush_all\r\n', until=b'OK\r\n')
                # A miss of a key no case uses ends every reply.
                end = b'mg __end__ k O999\r\n'
                theirs = self.ask(case + end, node.port, until=self.END)
                ours = self.ask(case + end, until=self.END)
                self.assertEqual(*same_ttls(norm(ours), norm(theirs)))

    def test_a_longer_data_block_never_runs_as_a_command(self):
        # memcached would run "version" and "delete k" here; corral drops
        # everything after the announced length up to the newline.
        self.corral()
        self.assertEqual(self.ask(b'set k 0 0 3\r\nabcXYversion\r\n'),
                         b'CLIENT_ERROR bad data chunk\r\n')
        self.assertEqual(self.ask(b'set j 0 0 1\r\nx\r\n'), b'STORED\r\n')
        self.assertEqual(
            self.ask(b'set k 0 0 3\r\nabc delete j\r\nget j\r\n'),
            b'CLIENT_ERROR bad data chunk\r\nVALUE j 0 1\r\nx\r\nEND\r\n')
        self.assertEqual(self.ask(b'get k\r\n'), b'END\r\n',
                         'nothing stored from a bad chunk')

    def test_a_pipeline_longer_than_many_reads_is_answered_in_order(self):
        # 1.2 MB of commands at once: more than the listener reads before
        # it replies; every reply comes, once, in the order asked.
        self.corral()
        val = b'v' * 4000
        ask, want = b'', b''
        for i in range(300):
            ask += b'set p%d 0 0 4000\r\n%s\r\nadd p%d 0 0 1\r\nx\r\n' % (
                i, val, i)
            want += b'STORED\r\nNOT_STORED\r\n'
        ask += b'get p0 p299\r\n'
        want += (b'VALUE p0 0 4000\r\n%s\r\nVALUE p299 0 4000\r\n%s\r\n'
                 b'END\r\n' % (val, val))
        self.assertEqual(self.ask(ask, until=b'\r\nEND\r\n'), want)

    def test_replies_go_before_the_end_that_follows_a_full_read(self):
        # A client sends exactly one input buffer (64 KB) of commands and
        # half-closes.  The worker is stopped meanwhile, so the one read
        # that fills the buffer and the end of the stream are both there
        # when it looks: the replies to what the read brought must still
        # go before the connection closes.
        worker = self.corral().wait_workers(1)[0]
        ask = b'mn\r\n' * (65536 // 4)
        os.kill(worker, signal.SIGSTOP)
        try:
            s = socket.create_connection(('127.0.0.1', self.mc_port),
                                         timeout=5)
            s.sendall(ask)
            s.shutdown(socket.SHUT_WR)
        finally:
            os.kill(worker, signal.SIGCONT)
        out = b''
        with s:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                out += d
        self.assertEqual(out, b'MN\r\n' * (65536 // 4))

    def test_http_request_and_junk_close_the_connection(self):
        self.corral()
        self.assertEqual(self.ask(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n'),
                         b'<EOF>')
        self.assertEqual(self.ask(b'x' * 2100), b'<EOF>')
        self.assertEqual(self.ask(b'\x80\x01\x00\x00' + b'\x00' * 20),
                         b'<EOF>', 'the binary protocol is not served')
        # A get of many keys may be longer than 2 KB.
        keys = b' '.join(b'key%04d' % i for i in range(500))
        self.assertEqual(self.ask(b'get ' + keys + b'\r\n', until=b'END\r\n'),
                         b'END\r\n')

    def test_too_large_removes_the_old_value_and_swallows(self):
        self.corral(max_item=Raw('100k'))
        big = b'x' * (100 * 1024 + 1)
        out = self.ask(b'set k 0 0 1\r\nx\r\nset k 0 0 %d\r\n' % len(big) +
                       big + b'\r\nget k\r\nversion\r\n', until=b'\r\nV')
        out += self.ask(b'version\r\n')
        self.assertTrue(out.startswith(
            b'STORED\r\nSERVER_ERROR object too large for cache\r\n'
            b'END\r\nVERSION '), out[:200])
        self.assertEqual(self.ask(b'set k 0 0 %d\r\n' % (100 * 1024) +
                                  big[:-1] + b'\r\n'), b'STORED\r\n')

    def test_a_stalled_command_is_closed_and_idle_ones_kept(self):
        self.corral(idle_timeout=0)
        s = socket.create_connection(('127.0.0.1', self.mc_port))
        self.addCleanup(s.close)
        idle = socket.create_connection(('127.0.0.1', self.mc_port))
        self.addCleanup(idle.close)
        s.sendall(b'set k 0 0 100\r\n' + b'x' * 10)
        s.settimeout(10)
        t0 = time.monotonic()
        self.assertEqual(s.recv(100), b'', 'closed at body_timeout')
        self.assertGreater(time.monotonic() - t0, 0.5)
        idle.sendall(b'get k\r\n')
        idle.settimeout(5)
        self.assertEqual(idle.recv(100), b'END\r\n')

    def test_flush_all_refused_unless_allowed(self):
        self.corral(allow_flush=False)
        self.assertEqual(
            self.ask(b'set k 0 0 1\r\nx\r\nflush_all\r\nget k\r\n'),
            b'STORED\r\nCLIENT_ERROR flush_all not allowed\r\n'
            b'VALUE k 0 1\r\nx\r\nEND\r\n')

    def test_delayed_flush(self):
        self.corral()
        self.assertEqual(self.ask(b'set k 0 0 1\r\nx\r\nflush_all 2\r\n'
                                  b'get k\r\n'),
                         b'STORED\r\nOK\r\nVALUE k 0 1\r\nx\r\nEND\r\n')
        wait_until(lambda: self.ask(b'get k\r\n') == b'END\r\n', 5)


class Clients(Listener):

    def client(self, port=None):
        base = pymemcache()
        c = base.Client(('127.0.0.1', port or self.mc_port), timeout=5,
                        default_noreply=False,
                        connect_timeout=5)
        self.addCleanup(c.close)
        return c

    def test_pymemcache(self):
        self.corral()
        mc = self.client()
        self.assertTrue(mc.set('page', b'<h1>hi</h1>', expire=0))
        self.assertEqual(mc.get('page'), b'<h1>hi</h1>')
        value, cas = mc.gets('page')
        self.assertEqual(value, b'<h1>hi</h1>')
        self.assertTrue(mc.cas('page', b'new', cas))
        self.assertFalse(mc.cas('page', b'newer', cas))
        self.assertEqual(mc.get('page'), b'new')
        self.assertTrue(mc.append('page', b'!'))
        self.assertTrue(mc.prepend('page', b'>'))
        self.assertEqual(mc.get('page'), b'>new!')
        self.assertFalse(mc.add('page', b'x', noreply=False))
        self.assertTrue(mc.replace('page', b'r', noreply=False))
        self.assertTrue(mc.set('n', b'41'))
        self.assertEqual(mc.incr('n', 1), 42)
        self.assertEqual(mc.decr('n', 50), 0)
        self.assertTrue(mc.touch('n', 100, noreply=False))
        self.assertEqual(mc.get_many(['page', 'n', 'none']),
                         {'page': b'r', 'n': b'0 '})
        self.assertTrue(mc.delete('page', noreply=False))
        self.assertIsNone(mc.get('page'))
        self.assertTrue(mc.version().startswith(b'1.6'))

    def test_ttl_rules(self):
        self.corral()
        mc = self.client()
        now = int(time.time())
        mc.set('never', b'v', expire=0)
        mc.set('rel', b'v', expire=2)
        mc.set('abs', b'v', expire=now + 3)
        mc.set('past', b'v', expire=now - 10)
        mc.set('neg', b'v', expire=-1)
        # Over 30 days is an absolute time: 2592001 is in January 1970.
        mc.set('old', b'v', expire=2592001)
        mc.set('month', b'v', expire=2592000)
        got = mc.get_many(['never', 'rel', 'abs', 'past', 'neg', 'old',
                           'month'])
        self.assertEqual(sorted(got), ['abs', 'month', 'never', 'rel'])
        wait_until(lambda: mc.get('rel') is None, 5)
        wait_until(lambda: mc.get('abs') is None, 6)
        self.assertEqual(mc.get('never'), b'v')
        self.assertEqual(mc.get('month'), b'v')
        mc.touch('never', -1)
        self.assertIsNone(mc.get('never'))

    def test_workers_share_the_items(self):
        self.corral(workers=2)
        self.assertEqual(self.ask(b'set shared 7 0 3\r\nabc\r\n'),
                         b'STORED\r\n')
        for _ in range(8):
            self.assertEqual(self.ask(b'get shared\r\n'),
                             b'VALUE shared 7 3\r\nabc\r\nEND\r\n')

    def test_unix_socket(self):
        d = tempfile.mkdtemp(prefix='corral-mc-')
        self.addCleanup(shutil.rmtree, d, True)
        os.chmod(d, 0o755)
        path = os.path.join(d, 'mc.sock')
        self.corral(listen=['unix:' + path])
        wait_until(lambda: os.path.exists(path), 5)
        # Set up under a name of its own and renamed into place: once the
        # path is there it listens, and nothing else is left beside it.
        self.assertEqual(os.listdir(d), ['mc.sock'])
        self.assertEqual(oct(os.stat(path).st_mode & 0o777), '0o660')
        self.assertEqual(exchange(path, b'set u 0 0 1\r\nx\r\nget u\r\n'),
                         b'STORED\r\nVALUE u 0 1\r\nx\r\nEND\r\n')

    def test_counters(self):
        d = tempfile.mkdtemp(prefix='corral-mc-')
        self.addCleanup(shutil.rmtree, d, True)
        c = self.corral(stats_file=Raw(quote(os.path.join(d, 'stats'))))
        self.ask(b'set a 0 0 1\r\nx\r\nget a\r\nget b\r\nincr a 1\r\n')
        out = subprocess.run([BIN, '-s', '-j', '-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        doc = json.loads(out.stdout)
        group = doc['memcached'] if 'memcached' in doc else \
            doc['server']['memcached']
        self.assertEqual(group['cmd_set'], 1)
        self.assertEqual(group['get_hits'], 1)
        self.assertEqual(group['get_misses'], 1)
        self.assertEqual(group['client_errors'], 0)
        stats = self.ask(b'stats\r\n', until=b'END\r\n').decode()
        self.assertIn('STAT cmd_get 2\r\n', stats)
        self.assertIn('STAT incr_hits 0\r\n', stats)

    def test_worker_killed_in_a_value_wedges_nothing(self):
        c = self.corral()
        s = socket.create_connection(('127.0.0.1', self.mc_port))
        s.sendall(b'set k 0 0 100000\r\n' + b'x' * 5000)
        self.assertEqual(self.ask(b'version\r\n')[:8], b'VERSION ')
        worker, = c.workers()
        c.expect_worker_death = True
        os.kill(worker, signal.SIGKILL)
        s.close()
        wait_until(lambda: c.workers() and c.workers()[0] != worker, 10)
        wait_until(lambda: self.ask(b'set k 0 0 1\r\ny\r\n') ==
                   b'STORED\r\n', 10)
        self.assertEqual(self.ask(b'get k\r\n'),
                         b'VALUE k 0 1\r\ny\r\nEND\r\n')


class Config(CorralTestCase):

    def check(self, **kw):
        c = self.make(**kw)
        out = subprocess.run([BIN, '-t', '-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        return out.returncode, out.stderr.strip(), c.conf_path

    def test_needs_the_store(self):
        rc, err, path = self.check(memcached={'listen': ['127.0.0.1:1']},
                                   cache={'size': 0})
        self.assertEqual(rc, 1)
        self.assertRegex(err, re.escape(path) + r':\d+: memcached keeps '
                         r'its items in the cache')

    def test_max_item_fits_max_object(self):
        rc, err, path = self.check(
            memcached={'listen': ['127.0.0.1:1'], 'max_item': Raw('1m')},
            cache={'max_object': Raw('1m')})
        self.assertEqual(rc, 1)
        self.assertRegex(err, re.escape(path) + r':\d+: memcached max_item '
                         r'\(1m\) must be at most cache max_object')

    def test_bad_listen(self):
        rc, err, path = self.check(memcached={'listen': ['localhost']})
        self.assertEqual(rc, 1)
        self.assertIn('invalid memcached listen "localhost"', err)


class ListenChecked(CorralTestCase):
    """-t checks the listener's addresses as start binds them: both refuse
    the same ones with the same FILE:LINE, and a unix socket is made 0660
    for the workers' user, never through a link planted in its place."""

    def folder(self, c, name, mode):
        path = os.path.join(c.tmp, name)
        os.mkdir(path)
        os.chmod(path, mode)
        return path

    def refused_by_both(self, c, what):
        t = c.check_config()
        self.assertEqual(t.returncode, 1, t.stderr)
        m = re.search(re.escape(c.conf_path) + r':\d+: memcached listen .*',
                      t.stderr)
        self.assertTrue(m, t.stderr)
        self.assertIn(what, m.group(0))
        with self.assertRaises(ServerError) as e:
            c.start()
        self.assertIn(m.group(0), str(e.exception))

    def test_refused_addresses(self):
        c = self.make()
        cases = [
            ('10.255.255.1:11211', 'Cannot assign requested address'),
            ('unix:' + os.path.join(c.tmp, 'none', 'mc.sock'),
             'No such file or directory'),
            ('unix:' + os.path.join(self.folder(c, 'world', 0o777),
                                    'mc.sock'), 'no sticky bit'),
        ]
        plain = os.path.join(self.folder(c, 'plain', 0o755), 'mc.sock')
        with open(plain, 'w') as f:
            f.write('precious\n')
        cases.append(('unix:' + plain, 'a file that is not a socket'))
        for addr, what in cases:
            with self.subTest(addr=addr):
                c = self.make(memcached={'listen': [addr]},
                              cache={'size': Raw('8m')})
                self.refused_by_both(c, what)
        with open(plain) as f:
            self.assertEqual(f.read(), 'precious\n')

    def test_unix_socket_in_a_sticky_folder(self):
        c = self.make()
        path = os.path.join(self.folder(c, 'sticky', 0o1777), 'mc.sock')
        kw = {'user': 'nobody'} if os.geteuid() == 0 else {}
        c = self.start(memcached={'listen': ['unix:' + path]},
                       cache={'size': Raw('8m')}, **kw)
        st = os.lstat(path)
        self.assertEqual(oct(st.st_mode & 0o7777), '0o660')
        if kw:
            import pwd
            self.assertEqual(st.st_uid, pwd.getpwnam('nobody').pw_uid)
        self.assertEqual(exchange(path, b'version\r\n')[:8], b'VERSION ')


class Pages(Listener):
    """Pages written through the listener, served by a location."""

    def site(self, loc=None, others=None, cache=None, **kw):
        l = {'memcached_key': Raw('"$uri"')}
        l.update(loc or {})
        server = {'location "/articles/"': l}
        server.update(others or {})
        self.mc_port = free_port()
        return self.start(memcached={'listen': ['127.0.0.1:%d' %
                                                self.mc_port]},
                          cache=cache or {'size': Raw('64m')},
                          server=server, **kw)

    def app(self):
        o = self.origin()
        return o

    def test_the_issue_s_supercache_site(self):
        # The issue's example: a page by its key with the location's own
        # type; a miss goes to the application ("404 = @app"), whose
        # status and body go out.
        o = self.app()
        o.script('/articles/new', body=b'made by the app')
        o.script('/articles/gone', status=410, body=b'app: gone')
        c = self.site({'default_type': 'text/html; charset=utf-8',
                       'error_page': ['404 = @app']},
                      {'location "@app"': {'proxy': Raw('"app"')}},
                      _raw='upstream "app" {\n  servers = {"%s"}\n}\n' %
                      o.addr)
        self.assertEqual(c.check_config().returncode, 0)
        mc = pymemcache().Client(('127.0.0.1', self.mc_port),
                                 default_noreply=False)
        self.addCleanup(mc.close)
        mc.set('/articles/hello', b'<h1>from memcached</h1>')
        r = self.get(c, '/articles/hello')
        self.assertBody(r, b'<h1>from memcached</h1>')
        self.assertEqual(r.header('Content-Type'), 'text/html; charset=utf-8')
        # An extension the MIME table knows keeps its type.
        mc.set('/articles/s.css', b'p{}')
        self.assertEqual(self.get(c, '/articles/s.css').header(
            'Content-Type'), 'text/css; charset=utf-8')
        r = self.get(c, '/articles/new')
        self.assertBody(r, b'made by the app')
        self.assertEqual(o.count('/articles/new'), 1)
        self.assertBody(self.get(c, '/articles/gone'), b'app: gone',
                        status=410)
        r = self.get(c, '/articles/new', method='HEAD')
        self.assertEqual(r.status, 200)
        self.assertEqual(o.count('/articles/new'), 2)
        # Once the app wrote the page, the app is not asked.
        mc.set('/articles/new', b'written by the app')
        self.assertBody(self.get(c, '/articles/new'), b'written by the app')
        self.assertEqual(o.count('/articles/new'), 2)
        # Without them, a miss stays a 404 and the type is the global one.
        c2 = self.site()
        self.assertEqual(self.get(c2, '/articles/none').status, 404)
        self.ask(b'set /articles/x 0 0 1\r\nx\r\n')
        self.assertEqual(self.get(c2, '/articles/x').header('Content-Type'),
                         'application/octet-stream')

    def get(self, c, path, headers=(), method='GET'):
        with Conn(c.port) as conn:
            conn.send(build_request(path, method=method, headers=headers))
            return conn.read_response(method=method)

    def test_a_page_with_headers_conditionals_and_ranges(self):
        c = self.site()
        mc = pymemcache().Client(('127.0.0.1', self.mc_port),
                                 default_noreply=False)
        self.addCleanup(mc.close)
        page = b'<h1>Hello</h1>' + b'x' * 1000
        mc.set('/articles/hello.html', page, expire=0)
        r = self.get(c, '/articles/hello.html')
        self.assertBody(r, page)
        self.assertEqual(r.header('Content-Type'), 'text/html; charset=utf-8')
        etag, lm = r.header('ETag'), r.header('Last-Modified')
        self.assertRegex(etag, r'^"[0-9a-f]+"$')
        self.assertIsNotNone(lm)
        r = self.get(c, '/articles/hello.html',
                     headers=[('If-None-Match', etag)])
        self.assertEqual(r.status, 304)
        self.assertEqual(r.header('ETag'), etag)
        r = self.get(c, '/articles/hello.html',
                     headers=[('If-Modified-Since', lm)])
        self.assertEqual(r.status, 304)
        r = self.get(c, '/articles/hello.html',
                     headers=[('Range', 'bytes=4-8')])
        self.assertEqual(r.status, 206)
        self.assertEqual(r.body, page[4:9])
        self.assertEqual(r.header('Content-Range'),
                         'bytes 4-8/%d' % len(page))
        r = self.get(c, '/articles/hello.html', method='HEAD')
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header('Content-Length'), str(len(page)))
        # A new value is a new entity tag.
        mc.set('/articles/hello.html', b'v2')
        r = self.get(c, '/articles/hello.html',
                     headers=[('If-None-Match', etag)])
        self.assertBody(r, b'v2')
        self.assertNotEqual(r.header('ETag'), etag)
        self.assertEqual(self.get(c, '/articles/none.html').status, 404)
        self.assertEqual(self.get(c, '/articles/x', method='POST').status,
                         405)

    def test_escaped_keys_ttl_and_gzip_flag(self):
        import gzip
        c = self.site({'memcached_gzip_flag': 2})
        mc = pymemcache().Client(('127.0.0.1', self.mc_port),
                                 default_noreply=False)
        self.addCleanup(mc.close)
        # $uri is decoded; the key escapes spaces as nginx does.
        mc.set('/articles/a%20b', b'spaced')
        self.assertBody(self.get(c, '/articles/a%20b'), b'spaced')
        mc.set('/articles/short', b'brief', expire=2)
        self.assertBody(self.get(c, '/articles/short'), b'brief')
        wait_until(lambda: self.get(c, '/articles/short').status == 404, 5)
        z = gzip.compress(b'<p>compressed</p>')
        self.assertEqual(self.ask(b'set /articles/z.html 2 0 %d\r\n' %
                                  len(z) + z + b'\r\n'), b'STORED\r\n')
        r = self.get(c, '/articles/z.html')
        self.assertBody(r, z)
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        # Nothing written through the listener is a file or a response.
        c.write('/articles/file.html', 'on disk')
        self.assertEqual(self.get(c, '/articles/file.html').status, 404)

    def test_key_from_variables(self):
        # As nginx's set $memcached_key "$host:$uri$is_args$args".
        c = self.site({'memcached_key': Raw('"$host:$uri$is_args$args"')})
        mc = pymemcache().Client(('127.0.0.1', self.mc_port),
                                 default_noreply=False)
        self.addCleanup(mc.close)
        mc.set('a.test:/articles/p.html?v=2', b'second')
        mc.set('a.test:/articles/p.html', b'plain')
        mc.set('b.test:/articles/p.html', b'other site')

        def get(path, host):
            with Conn(c.port) as conn:
                conn.send(build_request(path, host=host))
                return conn.read_response()
        self.assertBody(get('/articles/p.html?v=2', 'a.test'), b'second')
        self.assertBody(get('/articles/p.html', 'a.test'), b'plain')
        self.assertBody(get('/articles/p.html', 'b.test'), b'other site')
        # $uri is the normalised path: the same key.
        self.assertBody(get('/articles/./x/../p.html', 'a.test'), b'plain')
        self.assertEqual(get('/articles/p.html?v=3', 'a.test').status, 404)

    def store_sets(self, c):
        """The store's sets now (a store file is read as it is)."""
        out = subprocess.run([BIN, '-s', '-j', '-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)['cache']['store']['sets']

    def test_brotli_copy_chosen_by_q_values_made_once(self):
        import gzip
        from test_site_encoding import unbrotli	# here: not its tests
        d = tempfile.mkdtemp(prefix='corral-mc-')
        os.chmod(d, 0o755)
        self.addCleanup(shutil.rmtree, d, True)
        c = self.site(gzip=True, brotli=True, workers=2,
                      cache={'size': Raw('64m'),
                             'path': os.path.join(d, 'store')},
                      stats_file=Raw(quote(os.path.join(d, 'stats'))))
        page = b'<p>' + b'all work and no play ' * 100 + b'</p>'
        self.assertEqual(self.ask(b'set /articles/b.html 0 0 %d\r\n' %
                                  len(page) + page + b'\r\n'), b'STORED\r\n')
        sets = self.store_sets(c)
        for i in range(6):	# new connections, to either worker
            r = self.get(c, '/articles/b.html',
                         headers=[('Accept-Encoding', 'gzip, br')])
            self.assertEqual(r.status, 200)
            self.assertEqual(r.header('Content-Encoding'), 'br')
            self.assertEqual(r.header('Vary'), 'Accept-Encoding')
            self.assertEqual(unbrotli(r.body), page)
            self.assertLess(len(r.body), len(page))
        etag = r.header('ETag')
        self.assertTrue(etag.endswith('-br"'), etag)
        # Made once, for every worker: one store set.
        self.assertEqual(self.store_sets(c), sets + 1)
        r = self.get(c, '/articles/b.html',
                     headers=[('Accept-Encoding', 'br'),
                              ('If-None-Match', etag)])
        self.assertEqual(r.status, 304)
        self.assertEqual(r.header('ETag'), etag)
        # The client's weights choose.
        r = self.get(c, '/articles/b.html',
                     headers=[('Accept-Encoding', 'gzip;q=1, br;q=0.5')])
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        self.assertEqual(gzip.decompress(r.body), page)
        self.assertTrue(r.header('ETag').endswith('-gz"'))
        r = self.get(c, '/articles/b.html',
                     headers=[('Accept-Encoding', 'br;q=0, gzip;q=0')])
        self.assertBody(r, page)
        self.assertIsNone(r.header('Content-Encoding'))
        r = self.get(c, '/articles/b.html',
                     headers=[('Accept-Encoding', 'br')])
        self.assertEqual(unbrotli(r.body), page)
        self.assertEqual(self.store_sets(c), sets + 2)
        # A new value gets new copies.
        page2 = page.replace(b'play', b'rest')
        self.ask(b'set /articles/b.html 0 0 %d\r\n' % len(page2) + page2 +
                 b'\r\n')
        r = self.get(c, '/articles/b.html',
                     headers=[('Accept-Encoding', 'br')])
        self.assertEqual(unbrotli(r.body), page2)

    def test_gzip_copy_made_once(self):
        import gzip
        self.mc_port = free_port()
        c = self.start(memcached={'listen': ['127.0.0.1:%d' % self.mc_port]},
                       cache={'size': Raw('64m')}, gzip=True,
                       server={'location "/articles/"':
                               {'memcached_key': Raw('"$uri"')}})
        page = b'<p>' + b'all work and no play ' * 100 + b'</p>'
        self.assertEqual(self.ask(b'set /articles/g.html 0 0 %d\r\n' %
                                  len(page) + page + b'\r\n'), b'STORED\r\n')
        ae = [('Accept-Encoding', 'gzip')]
        r = self.get(c, '/articles/g.html', headers=ae)
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        self.assertEqual(gzip.decompress(r.body), page)
        self.assertLess(len(r.body), len(page))
        etag = r.header('ETag')
        self.assertTrue(etag.endswith('-gz"'), etag)
        r2 = self.get(c, '/articles/g.html',
                      headers=ae + [('If-None-Match', etag)])
        self.assertEqual(r2.status, 304)
        r = self.get(c, '/articles/g.html')
        self.assertBody(r, page)
        self.assertIsNone(r.header('Content-Encoding'))
        self.assertEqual(r.header('Vary'), 'Accept-Encoding')
        # A new value gets a new copy.
        page2 = page.replace(b'play', b'rest')
        self.ask(b'set /articles/g.html 0 0 %d\r\n' % len(page2) + page2 +
                 b'\r\n')
        r = self.get(c, '/articles/g.html', headers=ae)
        self.assertEqual(gzip.decompress(r.body), page2)
