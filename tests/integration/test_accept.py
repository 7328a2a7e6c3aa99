"""
Accepting: with reuseport (the default) every worker slot has its own
SO_REUSEPORT listening socket on each address, held by the master, and the
kernel spreads new connections over them.  A burst of 1,000 connections is
shared evenly by 2 workers; a worker that is frozen, killed and respawned,
and reloads, lose no connection; a reload that changes the worker count
adds or closes slot sockets; another process's SO_REUSEPORT socket on our
port is refused rather than joined; corral -t and start refuse more
sockets than the descriptor limit allows.
"""
import json
import os
import resource
import selectors
import signal
import socket
import ssl
import subprocess
import threading
import time

import tls_pki
from harness import (BIN, Conn, CorralTestCase, Raw, TLSConn, build_request,
                     free_port, held_sockets, proc_children, proc_comm,
                     proc_stat, quote, start_dying, wait_for,
                     wait_until)

BURST = 1000
# Each connection goes to one of the two workers' sockets by a hash of its
# addresses: the busiest worker's count is binomial(1000, 1/2) at best.
# More than 577 (500 + 77, a max/min of 1.364) has a probability of
# 9.1e-7: a false failure is below one in a million.  (The bench's target,
# 1.30 or 565, is missed by chance once in about 23,000 bursts.)
MAX_SHARE = 577
BODY = b'b' * 100
IO_TIMEOUT = 20.0


def state(pid):
    """The state letter of /proc/PID/stat ('' when gone)."""
    st = proc_stat(pid)
    return st[0] if st else ''


def listen_inodes(port):
    """
    The inodes of the listening TCP sockets on port, IPv4 and IPv6 (state
    0A), one each however many processes hold it.  The table is read in
    pieces and can miss an entry while other sockets come and go: callers
    poll until it says what they expect.
    """
    out = set()
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    f_ = line.split()
                    if (int(f_[1].rsplit(':', 1)[1], 16) == port and
                            f_[3] == '0A'):
                        out.add(f_[9])
        except OSError:
            pass
    return out


def listeners(port):
    return len(listen_inodes(port))


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (n if hard == resource.RLIM_INFINITY
                            else min(n, hard), hard))


def burst(port, n, path='/b.txt'):
    """
    Starts n connects at once, sends a keep-alive GET on each as soon as it
    is connected and reads its answer; returns the sockets, still open,
    once every answer is whole.
    """
    raise_nofile(n + 256)
    req = build_request(path)
    sel = selectors.DefaultSelector()
    socks, got = [], {}
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            socks.append(s)
            s.connect_ex(('127.0.0.1', port))
            got[s] = None
            sel.register(s, selectors.EVENT_WRITE)
        deadline = time.monotonic() + IO_TIMEOUT
        left = n
        while left:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise AssertionError('%d of %d connections unanswered '
                                     'after %ds' % (left, n, IO_TIMEOUT))
            for key, ev in sel.select(wait):
                s = key.fileobj
                if got[s] is None:
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise AssertionError('connect: %s' %
                                             os.strerror(err))
                    s.sendall(req)
                    got[s] = b''
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                d = s.recv(65536)
                if not d:
                    raise AssertionError('closed after %r' % got[s])
                got[s] += d
                if got[s].endswith(BODY) and b'\r\n\r\n' in got[s]:
                    if not got[s].startswith(b'HTTP/1.1 200 '):
                        raise AssertionError(got[s][:200])
                    sel.unregister(s)
                    left -= 1
        return socks
    except BaseException:
        for s in socks:
            s.close()
        raise
    finally:
        sel.close()


class Hammer:
    """
    Threads that each connect, send one GET with "Connection: close" and
    read the answer to its end, over and over.  Every attempt is kept as
    (start, end, error or None), times from time.monotonic().
    """

    def __init__(self, port, threads=8):
        self.port = port
        self.req = build_request('/b.txt', headers=[('Connection',
                                                     'close')])
        self.done = []
        self.lock = threading.Lock()
        self.stopping = False
        self.threads = [threading.Thread(target=self.loop, args=(i,),
                                         daemon=True)
                        for i in range(threads)]

    def one(self):
        with Conn(self.port, IO_TIMEOUT) as k:
            k.send(self.req)
            data = k.read_until_close()
        if not data.startswith(b'HTTP/1.1 200 ') or not data.endswith(BODY):
            return 'answer %r' % data[:120]
        return None

    def loop(self, i):
        while not self.stopping:
            start = time.monotonic()
            try:
                err = self.one()
            except (OSError, AssertionError) as e:
                err = repr(e)
            with self.lock:
                self.done.append((start, time.monotonic(), err))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stopping = True
        for t in self.threads:
            t.join(IO_TIMEOUT + 5)

    def done_since(self, t):
        with self.lock:
            return sum(1 for s, _, err in self.done if s > t and not err)


class Probes:
    """
    n connections opened at once, each with a GET and "Connection: close"
    sent; poll() reads what has come and counts the whole answers.
    """

    def __init__(self, port, n):
        self.req = build_request('/b.txt', headers=[('Connection',
                                                     'close')])
        self.socks = []
        self.got = {}
        self.ended = set()
        for _ in range(n):
            s = socket.create_connection(('127.0.0.1', port), timeout=5)
            s.sendall(self.req)
            s.setblocking(False)
            self.socks.append(s)
            self.got[s] = b''

    def poll(self):
        for s in self.socks:
            if s in self.ended:
                continue
            try:
                d = s.recv(65536)
            except BlockingIOError:
                continue
            except OSError as e:
                self.got[s] += ('<%r>' % e).encode()
                d = b''
            if d:
                self.got[s] += d
            else:
                self.ended.add(s)
        return len(self.ended)

    def answers(self):
        return [self.got[s] for s in self.socks]

    def close(self):
        for s in self.socks:
            s.close()


class AcceptTest(CorralTestCase):

    def serve(self, workers=2, start=True, **kw):
        kw.setdefault('worker_connections', 4096)
        kw.setdefault('worker_rlimit_nofile', 8192)
        kw.setdefault('keepalive_requests', 0)
        c = self.make(workers=workers, **kw)
        c.stats_path = os.path.join(c.tmp, 'corral.stats')
        c.directives['stats_file'] = Raw(quote(c.stats_path))
        def rewrite():
            with open(c.conf_path, 'w') as f:
                f.write(c.config_text())
        c.rewrite = rewrite
        c.rewrite()
        c.write('b.txt', BODY)
        if start:
            c.start()
            c.wait_workers(workers)
        return c

    def counters(self, c):
        """{worker pid: connections accepted}, and connections open."""
        out = subprocess.run([BIN, '-s', '-j', '-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        doc = json.loads(out.stdout)
        return ({w['pid']: w['accepted'] for w in doc['worker_slots']},
                doc['connections']['active'])

    def generation_up(self, c, gen, n):
        def ready():
            mine = [k for k in proc_children(c.master_pid)
                    if proc_comm(k).startswith('corral g%d ' % gen)]
            return mine if len(mine) == n else None
        kids = wait_until(ready, 10)
        self.assertTrue(kids, 'generation %d did not start\n%s' %
                        (gen, c.diagnostics()))
        return kids

    def test_burst_is_shared_evenly(self):
        c = self.serve()
        workers = c.wait_workers(2)
        self.own_sockets(c, 1)
        # The harness's probe was accepted by one of them, and closed.
        before, _ = wait_for(lambda: self.counters(c),
                             lambda d: sum(d[0].values()) >= 1 and
                             d[1] == 0, 5)
        held = {w: len(held_sockets(w)) for w in workers}
        socks = burst(c.port, BURST)
        try:
            by_fd = {w: len(held_sockets(w)) - held[w] for w in workers}
            after = self.counters(c)[0]
        finally:
            for s in socks:
                s.close()
        by_counter = {w: after[w] - before.get(w, 0) for w in workers}
        self.assertEqual(by_counter, by_fd)
        self.assertEqual(sum(by_fd.values()), BURST, by_fd)
        self.assertLessEqual(max(by_fd.values()), MAX_SHARE, by_fd)

    def kill_one(self, c, h, reuseport):
        """
        Freezes a worker; opens 24 connections, each with its request,
        which queue on the frozen worker's socket or are served by the
        other one; kills it, and checks that its successor answers what
        had queued.  Returns (signalled, frozen), the moments around the
        freeze.
        """
        victim = c.workers()[0]
        signalled = time.monotonic()
        os.kill(victim, signal.SIGSTOP)
        self.assertTrue(wait_until(lambda: state(victim) == 'T', 5))
        frozen = time.monotonic()
        p = Probes(c.port, 24)
        self.addCleanup(p.close)
        if reuseport:
            # The live worker answers its share; the frozen one's share,
            # by the hash all 24 but with a chance of 2**-24, waits.
            self.assertTrue(wait_until(lambda: p.poll() >= 1, 10))
            self.assertLess(p.poll(), 24, 'nothing queued on the frozen '
                            'worker\'s socket')
        else:
            # The other worker takes them all.
            self.assertTrue(wait_until(lambda: p.poll() == 24, 10),
                            p.answers())
        os.kill(victim, signal.SIGKILL)
        c.wait_workers(2, exclude=[victim])
        self.assertTrue(wait_until(lambda: p.poll() == 24, 10), p.answers())
        for a in p.answers():
            self.assertTrue(a.startswith(b'HTTP/1.1 200 ') and
                            a.endswith(BODY), a)
        return signalled, frozen

    def check_respawn_and_reload(self, reuseport):
        c = self.serve(reuseport=reuseport)
        c.expect_worker_death = True
        windows = []
        gen = 1
        with Hammer(c.port) as h:
            self.assertTrue(wait_until(lambda: h.done_since(0) >= 50, 10))
            for _ in range(3):
                windows.append(self.kill_one(c, h, reuseport))
            for _ in range(3):
                mark = h.done_since(0)
                os.kill(c.master_pid, signal.SIGHUP)
                gen += 1
                self.generation_up(c, gen, 2)
                self.assertTrue(wait_until(
                    lambda: h.done_since(0) >= mark + 50, 10))
            # A reload to more workers adds their slots' sockets.
            c.directives['workers'] = 3
            c.rewrite()
            os.kill(c.master_pid, signal.SIGHUP)
            gen += 1
            self.generation_up(c, gen, 3)
            mark = h.done_since(0)
            self.assertTrue(wait_until(
                lambda: h.done_since(0) >= mark + 50, 10))
        c.wait_workers(3)
        self.own_sockets(c, 1, shared=not reuseport)
        self.assertTrue(wait_until(lambda: listeners(c.port) ==
                                   (3 if reuseport else 1), 5))

        bad = []
        for start, end, err in h.done:
            if err is None:
                continue
            # Only what the frozen worker had accepted may fail.
            if any(start < frozen and end >= signalled
                   for signalled, frozen in windows):
                continue
            bad.append((start, end, err))
        self.assertEqual(bad, [], 'failed requests (windows %r)' % windows)
        self.assertGreaterEqual(h.done_since(0), 250)

    def test_respawn_and_reload_lose_nothing(self):
        self.check_respawn_and_reload(True)

    def test_respawn_and_reload_lose_nothing_shared_socket(self):
        self.check_respawn_and_reload(False)

    def test_a_worker_that_keeps_dying_strands_no_new_connection(self):
        # Slot 0's worker dies each time it starts; its socket stays with
        # the master, so the connections the kernel hashed to it would
        # wait for a worker that never comes.  New ones go to slot 1.
        c = self.serve(start=False)
        start_dying(c, 3, slot=0)
        self.assertTrue(c.wait_log(r'\[crit\].*worker 0 keeps dying',
                                   timeout=10), c.log())
        self.assertTrue(c.wait_log(r'\[warn\].*worker 0 is down: new '
                                   r'connections go to the other workers',
                                   timeout=5), c.log())
        p = Probes(c.port, 24)
        self.addCleanup(p.close)
        self.assertTrue(wait_until(lambda: p.poll() == 24, IO_TIMEOUT),
                        '%d of 24 answered' % p.poll())
        for a in p.answers():
            self.assertTrue(a.startswith(b'HTTP/1.1 200 ') and
                            a.endswith(BODY), a)
        self.assertNotRegex(c.log(), r'worker 1 is down')

    def test_reload_changes_the_slot_sockets(self):
        c = self.serve()
        try:
            with open('/proc/sys/net/ipv4/tcp_migrate_req') as f:
                migrate = f.read().strip() == '1'
        except OSError:		# before Linux 5.14
            migrate = False
        said = (r'\[notice\].*workers 1 to 3 close; connections queued on '
                r'them move to the others' if migrate else
                r'\[warn\].*workers 1 to 3 close; connections queued on '
                r'them are reset \(the sysctl net.ipv4.tcp_migrate_req = 1')
        for gen, n in ((2, 4), (3, 1), (4, 2)):
            c.directives['workers'] = n
            c.rewrite()
            mark = c.log_mark()
            os.kill(c.master_pid, signal.SIGHUP)
            self.generation_up(c, gen, n)
            if n == 1:
                self.assertTrue(c.wait_log(said, mark=mark),
                                c.log_since(mark))
            else:
                self.assertNotIn('close; connections queued',
                                 c.log_since(mark))
            c.wait_workers(n)
            # The old workers close their copies when told to stop.
            self.assertTrue(wait_until(lambda: listeners(c.port) == n, 10),
                            '%d listening sockets for %d workers' %
                            (listeners(c.port), n))
            for _ in range(4):
                self.assertEqual(c.get('/b.txt').body, BODY)
        self.own_sockets(c, 1)

    def own_sockets(self, c, per_worker, shared=False):
        """
        Waits until the master holds the listening sockets, per_worker for
        each worker, and each worker holds per_worker of them, its own
        (all of them when shared); a worker closes the others' right
        after it starts.  Returns the master's.
        """
        def state():
            listening = held_sockets(c.master_pid)
            workers = c.workers()
            if len(listening) != per_worker * (1 if shared else
                                               len(workers)):
                return None, ('master', listening)
            seen = set()
            for w in workers:
                mine = held_sockets(w) & listening
                if len(mine) != per_worker or (mine & seen and not shared):
                    return None, (w, mine, seen)
                seen |= mine
            return listening, None

        got = wait_until(lambda: state()[0], 10)
        self.assertTrue(got, state()[1])
        return got

    def test_reload_keeps_the_running_reuseport(self):
        c = self.serve()
        c.directives['reuseport'] = False
        c.rewrite()
        mark = c.log_mark()
        os.kill(c.master_pid, signal.SIGHUP)
        self.generation_up(c, 2, 2)
        self.assertTrue(c.wait_log(r'\[warn\].*reuseport changed; the '
                                   r'running sockets keep reuseport = on',
                                   mark=mark), c.log_since(mark))
        c.wait_workers(2)
        self.own_sockets(c, 1)
        self.assertEqual(c.get('/b.txt').body, BODY)

    def test_a_foreign_reuseport_socket_is_not_joined(self):
        c = self.serve(start=False)
        other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.addCleanup(other.close)
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(('127.0.0.1', c.port))
        other.listen(8)
        p = subprocess.run([BIN, '-f', '-c', c.conf_path],
                           capture_output=True, text=True, timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertRegex(c.log() + p.stderr,
                         r'bind 127\.0\.0\.1:%d: Address already in use' %
                         c.port)
        self.assertEqual(listen_inodes(c.port), held_sockets(os.getpid()) &
                         listen_inodes(c.port))

    def test_descriptor_limit(self):
        port2 = free_port()
        c = self.serve(start=False, workers=600,
                       listen=['127.0.0.1:%d' % 0, '127.0.0.1:%d' % port2])
        c.directives['listen'][0] = '127.0.0.1:%d' % c.port
        c.rewrite()
        line = [i + 1 for i, s in enumerate(c.config_text().splitlines())
                if s.startswith('listen =')][0]

        def low():
            resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        want = (r'%s:%d: reuseport: 600 workers on 2 listen addresses need '
                r'1200 sockets, and the descriptor limit is 1024: raise it '
                r'\(ulimit -n\) or set reuseport = off' % (c.conf_path,
                                                           line))
        t = subprocess.run([BIN, '-t', '-c', c.conf_path], preexec_fn=low,
                           capture_output=True, text=True, timeout=30)
        self.assertNotEqual(t.returncode, 0)
        self.assertRegex(t.stderr, want)
        p = subprocess.run([BIN, '-f', '-c', c.conf_path], preexec_fn=low,
                           capture_output=True, text=True, timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertRegex(p.stderr + c.log(), want)
        c.directives['reuseport'] = False
        c.rewrite()
        t = subprocess.run([BIN, '-t', '-c', c.conf_path], preexec_fn=low,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(t.returncode, 0, t.stderr)

    def test_ipv6_and_tls_listens_get_a_socket_per_worker(self):
        try:
            with socket.socket(socket.AF_INET6) as s:
                s.bind(('::1', 0))
        except OSError:
            self.skipTest('no IPv6 loopback here')
        pki = tls_pki.shared()
        crt, key = pki.leaf('localhost')
        v6, tport = free_port(), free_port()
        c = self.serve(start=False, listen=[
            '127.0.0.1:%d' % 0, '[::1]:%d' % v6, '127.0.0.1:%d tls' % tport],
            server={'tls_certificate': crt, 'tls_certificate_key': key})
        c.directives['listen'][0] = '127.0.0.1:%d' % c.port
        c.rewrite()
        c.start()
        c.wait_workers(2)
        listening = self.own_sockets(c, 3)
        for port in (c.port, v6, tport):
            self.assertTrue(wait_until(lambda: listen_inodes(port) <=
                                       listening and listeners(port) == 2,
                                       5), port)
        with Conn(v6, host='::1') as k:
            k.send(build_request('/b.txt', headers=[('Connection',
                                                     'close')]))
            data = k.read_until_close()
        self.assertTrue(data.startswith(b'HTTP/1.1 200 '), data)
        self.assertTrue(data.endswith(BODY))
        ctx = ssl.create_default_context(cafile=pki.ca)
        for _ in range(4):
            with TLSConn(tport, ctx) as t:
                t.send(build_request('/b.txt'))
                self.assertEqual(t.read_response().body, BODY)
