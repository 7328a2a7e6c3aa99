"""
Hostile peers: slowloris, slow bodies, clients that never read, request
floods, descriptor exhaustion, a worker killed under load and a file that
shrinks while it is sent.  In each, a normal client must be answered
quickly while the attack runs, and the server must be healthy afterwards.
"""

import os
import re
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import threading
import time

from harness import (Conn, CorralTestCase, ServerError, build_request,
                     held_sockets, parse_responses, pid_alive, proc_stat,
                     read_text, wait_for, wait_until)

QUICK = 1.0		# a normal request must be answered within this
CLK_TCK = os.sysconf('SC_CLK_TCK')


def setUpModule():
    # Thousands of connections need thousands of descriptors, on both ends.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def fd_budget():
    """Descriptors this process can still spend on connections."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft - len(os.listdir('/proc/self/fd')) - 64


# ---------------------------------------------------------------- /proc

# What a process holds is learnt from its descriptors, never from
# /proc/net/tcp: a read of that table can miss entries while other sockets
# come and go (it is read in pieces), and it is slow on a busy machine.

def connections(pid):
    """
    The sockets a worker holds that its master does not: its client and
    upstream connections (the listening sockets are the master's too).
    Files are not counted: the file cache keeps their descriptors.
    """
    st = proc_stat(pid)
    if st is None:
        return []
    return sorted(held_sockets(pid) - held_sockets(st[1]))


def holds(pid, inode):
    """True while the process holds the socket."""
    return inode in held_sockets(pid)


def rss_kb(pid):
    with open('/proc/%d/status' % pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    raise ServerError('no VmRSS for %d' % pid)


def cpu_seconds(pid):
    """User plus system CPU time of a process."""
    with open('/proc/%d/stat' % pid) as f:
        rest = f.read().rsplit(')', 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def recv_queue(port, peer_port):
    """Bytes waiting unread on the server's socket port <- peer_port."""
    local = '0100007F:%04X' % port
    remote = '0100007F:%04X' % peer_port
    with open('/proc/net/tcp') as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == local and fields[2] == remote:
                return int(fields[4].split(':')[1], 16)
    return None


# ---------------------------------------------------------------- clients

def open_conns(port, n, first=b''):
    """n connections, each having sent first; non-blocking sockets."""
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection(('127.0.0.1', port), timeout=5)
            if first:
                s.sendall(first)
            s.setblocking(False)
            socks.append(s)
    except BaseException:
        close_all(socks)
        raise
    return socks


def close_all(socks):
    for s in socks:
        s.close()


def drain(s):
    """Reads what is there; True when the peer has closed."""
    while True:
        try:
            data = s.recv(65536)
        except BlockingIOError:
            return False
        except ConnectionResetError:
            return True
        if not data:
            return True


def wait_closed(socks, timeout, tick=None, every=0.3, since=None):
    """
    Waits until the server closes each socket; returns {sock: seconds
    from `since` (default: now) to its close}.  tick(open_socks) runs
    every `every` seconds.
    """
    t0 = time.monotonic()
    base = t0 if since is None else since
    closed = {}
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    next_tick = t0
    try:
        while len(closed) < len(socks):
            now = time.monotonic()
            if now - t0 > timeout:
                break
            if tick and now >= next_tick:
                tick([s for s in socks if s not in closed])
                next_tick += every
            wait = max(0.0, min(next_tick if tick else t0 + timeout,
                                t0 + timeout) - time.monotonic())
            for key, _ in sel.select(wait):
                s = key.fileobj
                if drain(s):
                    closed[s] = time.monotonic() - base
                    sel.unregister(s)
    finally:
        sel.close()
    return closed


class HostileTestCase(CorralTestCase):

    def quick_get(self, c, path='/index.html', body=b'ok\n'):
        """A normal client: one GET answered within QUICK seconds."""
        t0 = time.monotonic()
        try:
            with Conn(c.port, timeout=QUICK) as conn:
                conn.send(build_request(path, headers=['Connection: close']))
                resp = conn.read_response()
        except (ServerError, OSError) as e:
            self.fail('normal client not served within %.1f s (%s)\n%s' %
                      (QUICK, e, c.diagnostics()))
        elapsed = time.monotonic() - t0
        self.assertBody(resp, body)
        self.assertLess(elapsed, QUICK)
        return elapsed

    def assertAccessLog(self, c, allowed):
        """Stops c; each access log line names one of the allowed requests
        (what one client sent must never show up in another's line)."""
        c.stop()
        reqs = re.findall(r'^\S+ - - \[[^]]+\] "((?:[^"\\]|\\.)*)" ',
                          read_text(c.access_log), re.M)
        self.assertTrue(reqs, 'empty access log')
        for r in reqs:
            self.assertIn(r, allowed)

    def worker(self, c):
        return c.wait_workers(1)[0]

    def settle(self, pid, timeout):
        """Waits until the worker holds no connection at all."""
        got = wait_until(lambda: not connections(pid), timeout)
        self.assertTrue(got, 'worker still holds %d connections' %
                        len(connections(pid)))

    def count_log(self, c, pattern, n, mark, timeout=3):
        rx = re.compile(pattern, re.M)
        got = wait_for(lambda: len(rx.findall(c.log_since(mark))),
                       lambda k: k >= n, timeout)
        self.assertIsNotNone(got, '%d of %d log lines matching %r' %
                             (len(rx.findall(c.log_since(mark))), n,
                              pattern))


# ---------------------------------------------------------------- slow peers

class SlowPeerTest(HostileTestCase):

    def test_slowloris_closed_at_header_deadline(self):
        c = self.start(header_timeout='2s', lingering_timeout='1s')
        c.write('index.html', b'ok\n')
        n = min(200, fd_budget() // 2)
        mark = c.log_mark()
        # Every connection is accepted after t_open, so none may close
        # before t_open + header_timeout; opening 200 takes a while on a
        # loaded machine, so the upper bound counts from the last one.
        t_open = time.monotonic()
        socks = open_conns(c.port, n, b'GET /index.html HTTP/1.1\r\n'
                                      b'Host: localhost\r\nX-Slow: ')
        opening = time.monotonic() - t_open
        try:
            def tick(live):
                for s in live:
                    try:
                        s.send(b'a')
                    except OSError:
                        pass
                self.quick_get(c)
            # A deadline reset by each byte would keep them all open.
            closed = wait_closed(socks, 4.5, tick, since=t_open)
        finally:
            close_all(socks)
        self.assertEqual(len(closed), n, '%d of %d slowloris connections '
                         'still open after 4.5 s' % (n - len(closed), n))
        self.assertGreater(min(closed.values()), 1.95,
                           'closed before header_timeout')
        self.assertLess(max(closed.values()) - opening, 3.2,
                        'closed long after header_timeout')
        self.count_log(c, r'timed out sending a request header', n, mark)
        self.quick_get(c)
        self.assertAccessLog(c, ('', 'GET /index.html HTTP/1.1'))

    def test_slowhttptest_keeps_service_available(self):
        tool = shutil.which('slowhttptest')
        if not tool:
            self.skipTest('slowhttptest is not installed')
        c = self.start(header_timeout='2s', lingering_timeout='1s')
        c.write('index.html', b'ok\n')
        p = subprocess.Popen([tool, '-c', '200', '-H', '-i', '1', '-r',
                              '100', '-l', '5', '-u', c.url('/')],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
        out = []
        reader = threading.Thread(target=lambda: out.append(p.stdout.read()))
        reader.start()
        try:
            probes = 0
            while p.poll() is None and probes < 40:
                self.quick_get(c)
                probes += 1
                time.sleep(0.2)
            p.wait(15)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            reader.join(5)
        text = re.sub(rb'\x1b\[[0-9;]*[A-Za-z]', b'', b''.join(out))
        self.assertIn(b'service available:', text)
        self.assertNotRegex(text, rb'service available:\s*NO')
        self.assertGreater(probes, 10)
        self.quick_get(c)

    def test_slow_request_body_closed_at_body_deadline(self):
        # body_min_rate: the 1,000 bytes sent at once earn 10 ms only, so
        # the trickle is cut about body_timeout after the body began.
        c = self.start(body_timeout='1s', body_min_rate='100k',
                       lingering_timeout='1s')
        c.write('index.html', b'ok\n')
        mark = c.log_mark()
        # The server's timer starts after t_open: the lower bound counts
        # from there, the upper one from when the body began.
        t_open = time.monotonic()
        s = socket.create_connection(('127.0.0.1', c.port), timeout=5)
        try:
            s.sendall(build_request('/index.html', 'POST', headers=[
                'Content-Length: 500000']) + b'x' * 1000)
            opening = time.monotonic() - t_open
            s.setblocking(False)

            def tick(live):
                for x in live:
                    try:
                        x.send(b'x')
                    except OSError:
                        pass
                self.quick_get(c)
            closed = wait_closed([s], 4.0, tick, since=t_open)
        finally:
            s.close()
        self.assertTrue(closed, 'a body trickling in keeps the connection '
                        'open past body_timeout')
        self.assertLess(closed[s] - opening, 2.0)
        self.assertGreater(closed[s], 0.95)
        c.wait_log(r'timed out sending a request body', mark=mark)
        self.quick_get(c)
        self.assertAccessLog(c, ('', 'GET /index.html HTTP/1.1',
                                 'POST /index.html HTTP/1.1'))

    def slow_reader(self, sendfile):
        c = self.start(send_timeout='1s', sendfile=sendfile)
        c.write('index.html', b'ok\n')
        c.write('big.bin', os.urandom(10 << 20))
        pid = self.worker(c)
        self.quick_get(c)
        rss = rss_kb(pid)
        mark = c.log_mark()
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(5)
        s.connect(('127.0.0.1', c.port))
        try:
            # The server's send_timeout runs from its last write, which
            # comes after the request: time from before it, so a slow
            # recv() or a busy machine cannot shorten it.  Our connection
            # is the socket the worker gains, read from its descriptors
            # (a read of /proc/net/tcp can miss entries); by the time we
            # look, the worker may have closed it already.
            before = held_sockets(pid)
            t0 = time.monotonic()
            s.sendall(build_request('/big.bin'))
            self.assertTrue(s.recv(100).startswith(b'HTTP/1.1 200 '))
            mine = held_sockets(pid) - before
            self.assertLessEqual(len(mine), 1, 'the worker holds %r, had %r'
                                 % (mine, before))
            ino = mine.pop() if mine else None
            # Never read again: the server must give up on us.
            while ino is not None and holds(pid, ino) and \
                    time.monotonic() - t0 < 10:
                self.quick_get(c)
                self.assertLess(rss_kb(pid), rss + 20 * 1024,
                                'worker memory grows with a slow reader')
                time.sleep(0.1)
            elapsed = time.monotonic() - t0
            self.assertFalse(holds(pid, ino), 'the server still '
                             'holds the connection of a reader stalled '
                             'for 10 s')
        finally:
            s.close()
        # send_timeout is 1 s; the bound leaves a loaded machine room.
        self.assertGreater(elapsed, 0.6, 'closed before send_timeout')
        self.assertLess(elapsed, 6)
        c.wait_log(r'timed out reading the response', mark=mark)
        self.assertTrue(pid_alive(pid))
        self.quick_get(c)

    def test_slow_reader_sendfile(self):
        self.slow_reader(True)

    def test_slow_reader_read_write(self):
        self.slow_reader(False)


# ---------------------------------------------------------------- floods

class FloodTest(HostileTestCase):

    N = 10000

    def flood(self, c):
        """Connects with a tiny window and sends N requests in one write."""
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(('127.0.0.1', c.port))
        s.setblocking(False)
        data = build_request('/page.html') * self.N
        sent = 0
        t0 = time.monotonic()
        # What the server does not take stays in our send buffer: stop when
        # the write makes no progress.
        while sent < len(data) and time.monotonic() - t0 < 2:
            try:
                sent += s.send(data[sent:])
            except BlockingIOError:
                if not wait_until(lambda: _writable(s), 0.3):
                    break
        return s, sent, len(data)

    def test_pipelined_flood_never_read(self):
        c = self.start(send_timeout='30s')
        c.write('index.html', b'ok\n')
        c.write('page.html', b'p' * 4096)
        pid = self.worker(c)
        self.quick_get(c)
        rss = rss_kb(pid)
        s, sent, total = self.flood(c)
        try:
            port = s.getsockname()[1]
            # The server stops reading: bytes stay queued on its socket,
            # and stay there while others are served.
            q = wait_for(lambda: recv_queue(c.port, port),
                         lambda v: v is not None and v > 0, 3)
            self.assertTrue(q, 'the server reads everything a client that '
                            'never reads sends (%d of %d bytes sent)' %
                            (sent, total))
            for _ in range(5):
                self.quick_get(c)
            self.assertGreater(recv_queue(c.port, port), 0)
            self.assertLess(rss_kb(pid), rss + 20 * 1024,
                            'worker memory grows with a request flood')
        finally:
            s.close()
        self.settle(pid, 3)
        self.quick_get(c)
        self.assertTrue(pid_alive(pid))

    def test_pipelined_flood_read_late_gets_every_answer(self):
        c = self.start(keepalive_requests=0)	# no limit
        c.write('index.html', b'ok\n')
        c.write('page.html', b'p' * 4096)
        with c.connect() as conn:	# one answer's size, to know the end
            conn.send(build_request('/page.html'))
            one = conn.read_response()
        size = len(one.head) + 4 + len(one.body)
        s, sent, total = self.flood(c)
        try:
            self.quick_get(c)
            # Now read, sending the rest as the server takes it.
            s.setblocking(True)
            s.settimeout(10)
            rest = (build_request('/page.html') * self.N)[sent:]
            sender = threading.Thread(target=s.sendall, args=(rest,))
            sender.start()
            got = bytearray()
            while len(got) < self.N * size:
                d = s.recv(1 << 20)
                if not d:
                    break
                got += d
            sender.join(10)
        finally:
            s.close()
        rs = parse_responses(bytes(got))
        self.assertEqual(len(rs), self.N)
        self.assertTrue(all(r.status == 200 and r.body == one.body
                            for r in rs))


def _writable(s):
    sel = selectors.DefaultSelector()
    try:
        sel.register(s, selectors.EVENT_WRITE)
        return bool(sel.select(0))
    finally:
        sel.close()


# ---------------------------------------------------------------- descriptors

class DescriptorTest(HostileTestCase):

    def test_thousands_of_idle_connections_are_reaped(self):
        n = min(3000, fd_budget() // 2)
        if n < 500:
            self.skipTest('only %d descriptors to spare' % n)
        c = self.start(header_timeout='2s', keepalive_timeout='2s',
                       lingering_timeout='1s', worker_connections=n + 100)
        c.write('index.html', b'ok\n')
        pid = self.worker(c)
        self.quick_get(c)
        half = n // 2
        # Half are kept alive after one answer, half never finish a header.
        alive = open_conns(c.port, half, build_request('/index.html'))
        for s in alive:
            s.setblocking(True)
            s.settimeout(5)
            self.assertIn(b'200 OK', s.recv(4096))
            s.setblocking(False)
        partial = open_conns(c.port, n - half, b'GET /index.html HTTP/1.1\r\n')
        socks = alive + partial
        try:
            self.quick_get(c)
            closed = wait_closed(socks, 5.0, lambda live: self.quick_get(c),
                                 every=0.5)
        finally:
            close_all(socks)
        self.assertEqual(len(closed), n, '%d of %d idle connections still '
                         'open after 5 s' % (n - len(closed), n))
        self.settle(pid, 3)
        self.quick_get(c)

    def test_out_of_descriptors_accept_backs_off(self):
        c = self.start(worker_rlimit_nofile=256, worker_connections=1024,
                       header_timeout='10s', keepalive_timeout='10s')
        c.write('index.html', b'ok\n')
        pid = self.worker(c)
        self.quick_get(c)
        mark = c.log_mark()
        # A byte each, so TCP_DEFER_ACCEPT hands them over at once.
        socks = open_conns(c.port, 400, b'G')
        try:
            c.wait_log(r'\[warn\].*accept.*(Too many open files|EMFILE)',
                       mark=mark)
            t0, cpu0 = time.monotonic(), cpu_seconds(pid)
            time.sleep(2)	# measuring: the worker must stay idle
            used = cpu_seconds(pid) - cpu0
            wall = time.monotonic() - t0
            self.assertLess(used, 0.5, 'worker spun %.2f s of CPU in %.1f s '
                            'without descriptors' % (used, wall))
            self.assertTrue(pid_alive(pid))
        finally:
            close_all(socks)
        # Served again once the descriptors are back.
        t0 = time.monotonic()
        resp = wait_until(lambda: self._try_get(c), 5, 0.05)
        self.assertTrue(resp, 'not served again after the flood closed\n' +
                        c.diagnostics())
        self.assertLess(time.monotonic() - t0, 2.0)
        self.quick_get(c)
        self.assertTrue(pid_alive(pid))

    def _try_get(self, c):
        try:
            with Conn(c.port, timeout=QUICK) as conn:
                conn.send(build_request('/index.html',
                                        headers=['Connection: close']))
                r = conn.read_response()
                return r if r.status == 200 else None
        except (ServerError, OSError):
            return None


# ---------------------------------------------------------------- crashes

class CrashTest(HostileTestCase):

    def test_worker_killed_under_load(self):
        # test_processes covers respawn; this adds the load around it.
        c = self.start(workers=2)
        c.expect_worker_death = True
        c.write('index.html', b'ok\n')
        kids = c.wait_workers(2)
        stop = threading.Event()
        results = []	# (start time, ok)

        def load():
            while not stop.is_set():
                t = time.monotonic()
                try:
                    with Conn(c.port, timeout=2) as conn:
                        conn.send(build_request('/index.html'))
                        ok = conn.read_response().status == 200
                except (ServerError, OSError):
                    ok = False
                results.append((t, ok))
        threads = [threading.Thread(target=load) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            wait_until(lambda: len(results) > 100, 5)
            killed = time.monotonic()
            os.kill(kids[0], signal.SIGKILL)
            c.wait_workers(2, exclude=[kids[0]])
            respawned = time.monotonic()
            wait_until(lambda: len([r for r in results if r[0] > respawned])
                       > 100, 5)
        finally:
            stop.set()
            for t in threads:
                t.join(5)
        after = [ok for t, ok in results if t > killed + 0.1]
        self.assertGreater(len([t for t, _ in results if t > respawned]),
                           100)
        self.assertTrue(all(after), '%d requests after the kill failed' %
                        after.count(False))
        # Only requests in flight on the victim may be lost.
        lost = [t for t, ok in results if not ok]
        self.assertLessEqual(len(lost), len(threads))
        self.assertTrue(pid_alive(kids[1]), 'the other worker died too')
        c.wait_workers(2, exclude=[kids[0]])
        self.quick_get(c)


# ---------------------------------------------------------------- faults

class FaultTest(HostileTestCase):

    def test_file_truncated_while_sent(self):
        c = self.start(sendfile=True)
        c.write('index.html', b'ok\n')
        size = 50 << 20
        path = c.write('big.bin', b'')
        with open(path, 'wb') as f:
            f.truncate(size)	# sparse: quick to make
        pid = self.worker(c)
        mark = c.log_mark()
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.settimeout(5)
        s.connect(('127.0.0.1', c.port))
        got = bytearray()
        try:
            s.sendall(build_request('/big.bin'))
            while len(got) < 65536:
                d = s.recv(16384)
                self.assertTrue(d, 'closed before 64 KiB')
                got += d
            os.truncate(path, 1 << 20)
            while True:
                try:
                    d = s.recv(1 << 20)
                except ConnectionResetError:
                    break
                except socket.timeout:
                    self.fail('the server neither sent the body nor '
                              'aborted it (%d bytes so far)' % len(got))
                if not d:
                    break
                got += d
        finally:
            s.close()
        head, _, body = bytes(got).partition(b'\r\n\r\n')
        self.assertIn(b'Content-Length: %d' % size, head)
        self.assertLess(len(body), size, 'a full body from a 1 MiB file')
        c.wait_log(r'file shrank while sending', mark=mark)
        self.assertTrue(pid_alive(pid))
        self.assertEqual(self.worker(c), pid)
        self.quick_get(c)
