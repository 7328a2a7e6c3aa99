"""The master and its workers: spawning, load spreading, crashes, stop."""

import os
import re
import signal
import socket
import time

from harness import (CorralTestCase, build_request, pid_alive, proc_stat,
                     same_process, strace_client_calls, strace_wrapper,
                     wait_for, wait_until)

ACCEPT_RE = (r'^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[debug\] (\d+) worker (\d+): '
             r'accept 127\.0\.0\.1:(\d+) on 127\.0\.0\.1:%d$')


class WorkerTest(CorralTestCase):

    def test_two_workers(self):
        c = self.start(workers=2)
        c.write('index.html', b'two\n')
        kids = c.wait_workers(2)
        self.assertNotIn(c.master_pid, kids)
        for pid in kids:
            self.assertTrue(pid_alive(pid))
            self.assertEqual(proc_stat(pid)[1], c.master_pid)
        self.assertBody(c.get('/'), b'two\n')

    def test_auto_workers(self):
        c = self.start(workers='auto')
        c.wait_workers(os.cpu_count())

    def test_accept_spread(self):
        c = self.start(workers=2, log_level='debug',
                       server={'access_log': 'off'})
        kids = c.wait_workers(2)
        c.write('index.html', b'spread\n')
        mark = c.log_mark()
        for _ in range(100):
            with c.connect() as conn:
                conn.send(build_request('/index.html',
                                        headers=['Connection: close']))
                self.assertBody(conn.read_response(), b'spread\n')
        rx = re.compile(r'^\S+ \S+ \[debug\] (\d+) worker (\d+): accept ',
                        re.M)
        found = wait_for(lambda: rx.findall(c.log_since(mark)),
                         lambda l: len(l) >= 100, 5)
        self.assertTrue(found, 'fewer than 100 accept lines:\n' +
                        c.log_since(mark)[-2000:])
        by_worker = {}
        for pid, n in found:
            self.assertIn(int(pid), kids)
            by_worker.setdefault(n, set()).add(int(pid))
        self.assertEqual(sorted(by_worker), ['0', '1'],
                         'only some workers accepted')
        for pids in by_worker.values():
            self.assertEqual(len(pids), 1, 'one pid per worker number')

    def test_accept_log_line(self):
        c = self.start(log_level='debug')
        kid = c.wait_workers(1)[0]
        mark = c.log_mark()
        with c.connect() as conn:
            port = conn.sock.getsockname()[1]
            conn.send(build_request('/', 'OPTIONS'))
            conn.read_response()
        rx = ACCEPT_RE % c.port
        m = wait_until(lambda: [m for m in re.finditer(rx, c.log_since(mark),
                                                        re.M)
                                if m.group(3) == str(port)], 5)
        self.assertTrue(m, 'no line like "... [debug] %d worker 0: accept '
                        '127.0.0.1:%d on 127.0.0.1:%d" in:\n%s' %
                        (kid, port, c.port, c.log_since(mark)[-1500:]))
        self.assertEqual(m[0].group(1), str(kid))
        self.assertEqual(m[0].group(2), '0')

    def test_log_line_format(self):
        c = self.start(workers=2, log_level='debug')
        c.wait_workers(2)
        self.assertEqual(c.get('/missing').status, 404)
        self.assertEqual(c.request(b'GET / HTTP/1.1\r\n\r\n').status, 400)
        c.stop()
        lines = c.log().splitlines()
        self.assertTrue(lines)
        rx = re.compile(r'^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d '
                        r'\[(crit|error|warn|notice|info|debug)\] \d+ '
                        r'(master|worker [01]): \S.*$')
        for line in lines:
            self.assertRegex(line, rx)
        roles = {rx.match(l).group(2) for l in lines}
        self.assertEqual(roles, {'master', 'worker 0', 'worker 1'})

    def test_kill_worker_respawns(self):
        c = self.start(workers=2)
        c.expect_worker_death = True
        c.write('index.html', b'alive\n')
        kids = c.wait_workers(2)
        victim = kids[0]
        mark = c.log_mark()
        t0 = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        new = c.wait_workers(2, timeout=5, exclude=[victim])
        elapsed = time.monotonic() - t0
        self.assertLess(elapsed, 2.0, 'respawn took %.1f s' % elapsed)
        self.assertIn(kids[1], new)
        for _ in range(20):
            self.assertBody(c.get('/index.html'), b'alive\n')
        m = c.wait_log(r'^.* \[error\] (\d+) master: .*worker.*'
                       r'killed by signal 9.*$', mark=mark)
        self.assertEqual(int(m.group(1)), c.master_pid)

    def test_only_worker_killed_queued_client_served(self):
        c = self.start(workers=1)
        c.expect_worker_death = True
        c.write('index.html', b'alive\n')
        victim = c.wait_workers(1)[0]
        os.kill(victim, signal.SIGKILL)
        # Connections made while no worker runs wait in the backlog.
        self.assertBody(c.get('/index.html'), b'alive\n')
        c.wait_workers(1, exclude=[victim])

    def test_kill_worker_with_open_connection(self):
        c = self.start(workers=1)
        c.expect_worker_death = True
        c.write('index.html', b'alive\n')
        victim = c.wait_workers(1)[0]
        with c.connect() as conn:
            conn.send(build_request('/index.html'))
            self.assertBody(conn.read_response(), b'alive\n')
            os.kill(victim, signal.SIGKILL)
            self.assertEqual(conn.read_until_close(), b'')
        self.assertBody(c.get('/index.html'), b'alive\n')

    def test_repeated_worker_crashes(self):
        c = self.start(workers=2)
        c.expect_worker_death = True
        c.write('index.html', b'alive\n')
        for _ in range(5):
            kids = c.wait_workers(2)
            os.kill(kids[0], signal.SIGKILL)
            c.wait_workers(2, exclude=[kids[0]])
            self.assertBody(c.get('/index.html'), b'alive\n')
        self.assertTrue(pid_alive(c.master_pid))

    def test_sigterm_stops_everything(self):
        c = self.start(workers=2)
        c.expect_exit = True
        kids = c.wait_workers(2)
        stats = {p: proc_stat(p) for p in kids}
        os.kill(c.master_pid, signal.SIGTERM)
        self.assertEqual(c.proc.wait(10), 0)

        def alive():
            return [p for p in kids if same_process(p, stats[p][2])]
        if not wait_until(lambda: not alive(), 5):
            left = alive()
            for p in left:
                os.kill(p, signal.SIGKILL)
            self.fail('workers %r outlived the master' % left)
        with self.assertRaises(OSError):
            socket.create_connection(('127.0.0.1', c.port), timeout=2)

    def test_sigterm_with_open_connections(self):
        c = self.start(workers=2)
        c.expect_exit = True
        c.write('index.html', b'x')
        conns = [c.connect() for _ in range(5)]
        try:
            for conn in conns:
                conn.send(build_request('/index.html'))
                conn.read_response()
            os.kill(c.master_pid, signal.SIGTERM)
            self.assertEqual(c.proc.wait(10), 0)
        finally:
            for conn in conns:
                conn.close()

    def test_pid_file(self):
        c = self.make(workers=1)
        pidfile = os.path.join(c.tmp, 'corral.pid')
        c.directives['pid_file'] = pidfile
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        self.assertTrue(wait_until(lambda: os.path.exists(pidfile), 5))
        with open(pidfile) as f:
            self.assertEqual(int(f.read().strip()), c.master_pid)


class PipelinedWriteTest(CorralTestCase):

    CALLS = ('write', 'writev', 'sendto', 'sendmsg', 'sendfile')

    def test_pipelined_responses_in_one_write(self):
        wrapper, trace = strace_wrapper(
            self, ('accept', 'accept4') + self.CALLS)
        c = self.start(workers=1, server={'access_log': 'off'},
                       wrapper=wrapper)
        c.wait_workers(1)
        fs = []
        for i in range(16):
            data = ('small file %d\n' % i).encode() * (i + 1)
            c.write('s%d.txt' % i, data)
            fs.append(('/s%d.txt' % i, data))
        with c.connect(timeout=15) as conn:
            port = conn.sock.getsockname()[1]
            conn.send(b''.join(build_request(p) for p, _ in fs))
            for _, data in fs:
                self.assertBody(conn.read_response(), data)
        c.stop()
        calls = strace_client_calls(self, trace, port, self.CALLS)
        self.assertEqual(len(calls), 1,
                         '16 pipelined responses took %d write calls:\n%s'
                         % (len(calls), '\n'.join(c[:120] for c in calls)))
        # Small bodies go beside their header lines: a few iovecs for
        # the batch, not two per response.
        m = re.search(r'msg_iovlen=(\d+)', calls[0])
        self.assertIsNotNone(m, calls[0][:200])
        self.assertLessEqual(int(m.group(1)), 4, calls[0][:200])
