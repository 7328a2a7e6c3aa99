"""
Process lifecycle: reload (SIGHUP) without dropping a request, graceful stop
(SIGQUIT), log reopening (SIGUSR1), respawn back-off, privilege drop and
process titles.
"""
import os
import pwd
import re
import signal
import socket
import subprocess
import time
import unittest

from harness import (CorralTestCase, Raw, build_request, free_port,
                     held_sockets, need_tool, pid_alive, proc_children,
                     proc_comm, read_text, start_dying, wait_until)


# A process can exit between any two reads of its /proc entries: opening
# or reading them then fails with ENOENT or ESRCH (ProcessLookupError), so
# each helper catches OSError and answers as for a process that is gone.

def cmdline(pid):
    """The command line (titles included), or '' when the process is gone."""
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().rstrip(b'\0').decode()
    except OSError:
        return ''


def uids(pid):
    """Real, effective, saved and fs uid, or [] when the process is gone."""
    try:
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith('Uid:'):
                    return [int(x) for x in line.split()[1:]]
    except OSError:
        pass
    return []


class ReloadTest(CorralTestCase):

    def generation_up(self, c, gen, n):
        """Waits until n workers of generation gen serve."""
        def ready():
            kids = proc_children(c.master_pid)
            mine = [k for k in kids if proc_comm(k).startswith('corral g%d ' % gen)]
            return mine if len(mine) == n else None
        kids = wait_until(ready, 10)
        self.assertTrue(kids, 'generation %d did not start: %r\n%s' %
                        (gen, [proc_comm(k) for k in proc_children(c.master_pid)],
                         c.diagnostics()))
        return kids

    def test_reload_under_load_drops_nothing(self):
        ab = need_tool('ab')
        c = self.start(workers=2, keepalive_timeout=Raw('75s'))
        c.write('page.html', b'x' * 1000)
        c.write('other/page.html', b'y' * 1000)
        self.generation_up(c, 1, 2)
        load = subprocess.Popen(
            [ab, '-k', '-c', '20', '-t', '8', '-n', '10000000',
             c.url('/page.html')], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        try:
            for gen in range(2, 12):
                os.kill(c.master_pid, signal.SIGHUP)
                self.generation_up(c, gen, 2)
                time.sleep(0.2)	# let traffic flow on each generation
        finally:
            out, _ = load.communicate(timeout=60)
        self.assertIn('Complete requests:', out, out)
        done = int(re.search(r'Complete requests:\s+(\d+)', out).group(1))
        failed = int(re.search(r'Failed requests:\s+(\d+)', out).group(1))
        self.assertGreater(done, 1000, out)
        self.assertEqual(failed, 0, out)
        self.assertNotIn('Non-2xx responses', out, out)
        self.assertEqual(len(re.findall(r'\[notice\].*reloaded', c.log())),
                         10)

        # New settings take effect: another document root.
        c.servers[0]['root'] = os.path.join(c.htdocs, 'other')
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        os.kill(c.master_pid, signal.SIGHUP)
        self.generation_up(c, 12, 2)
        # An old worker may take one more connection before its SIGQUIT
        # lands; from then on only the new root is served.
        self.assertTrue(wait_until(
            lambda: c.get('/page.html').body == b'y' * 1000, 5))

    def test_bad_config_keeps_old_workers(self):
        c = self.start(workers=2)
        c.write('page.html', b'still here\n')
        before = sorted(c.wait_workers(2))
        with open(c.conf_path) as f:
            text = f.read()
        with open(c.conf_path, 'w') as f:
            f.write('workers = 2\nno_such_directive = 1\n' + text)
        mark = c.log_mark()
        os.kill(c.master_pid, signal.SIGHUP)
        line = c.wait_log(r'\[error\].*%s:2: .*reload aborted' %
                          re.escape(c.conf_path), mark=mark)
        self.assertTrue(line, c.log_since(mark))
        self.assertEqual(sorted(c.workers()), before)
        self.assertEqual(c.get('/page.html').body, b'still here\n')

    def test_reload_adds_and_removes_listeners(self):
        c = self.start()
        c.write('page.html', b'ok\n')
        first = held_sockets(c.master_pid)
        port2 = free_port()
        c.directives['listen'] = ['127.0.0.1:%d' % c.port,
                                  '127.0.0.1:%d' % port2]
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        os.kill(c.master_pid, signal.SIGHUP)
        self.assertTrue(c.wait_log(r'reloaded .*generation 2'), c.log())
        with socket.create_connection(('127.0.0.1', port2), timeout=5) as s:
            s.sendall(build_request('/page.html', headers=[
                ('Connection', 'close')]))
            data = b''
            while True:
                d = s.recv(4096)
                if not d:
                    break
                data += d
        self.assertTrue(data.startswith(b'HTTP/1.1 200'), data)
        # The socket that stayed is the same socket, never re-bound.
        self.assertTrue(first <= held_sockets(c.master_pid))

        c.directives['listen'] = ['127.0.0.1:%d' % c.port]
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        os.kill(c.master_pid, signal.SIGHUP)
        self.assertTrue(c.wait_log(r'reloaded .*generation 3'), c.log())
        gone = wait_until(lambda: self._refused(port2), 10)
        self.assertTrue(gone, 'the removed address still accepts')
        self.assertEqual(c.get('/page.html').status, 200)

    @staticmethod
    def _refused(port):
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            return False
        except ConnectionRefusedError:
            return True


class GracefulStopTest(CorralTestCase):

    def test_quit_lets_a_slow_download_finish(self):
        c = self.make(workers=1, pid_file=None,
                      worker_shutdown_timeout=Raw('30s'))
        c.directives['pid_file'] = os.path.join(c.tmp, 'corral.pid')
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        data = os.urandom(8 * 1024 * 1024)
        c.write('big.bin', data)
        c.start()
        pidfile = c.directives['pid_file']
        self.assertTrue(wait_until(lambda: os.path.exists(pidfile), 5))
        s = socket.create_connection(('127.0.0.1', c.port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.sendall(build_request('/big.bin'))
        got = s.recv(16384)
        os.kill(c.master_pid, signal.SIGQUIT)
        # The worker is still sending while we read slowly.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.002)
            d = s.recv(65536)
            if not d:
                break
            got += d
        s.close()
        head, _, body = got.partition(b'\r\n\r\n')
        self.assertIn(b'200 OK', head)
        self.assertEqual(len(body), len(data))
        self.assertEqual(body, data)
        c.expect_exit = True
        c.proc.wait(15)
        self.assertEqual(c.proc.returncode, 0)
        self.assertFalse(os.path.exists(pidfile), 'pid file left behind')

    def test_quit_closes_idle_keepalive_connections(self):
        c = self.start()
        c.write('page.html', b'ok\n')
        with c.connect() as conn:
            conn.send(build_request('/page.html'))
            self.assertEqual(conn.read_response().status, 200)
            time.sleep(1.2)	# idle past the grace for fresh connections
            os.kill(c.master_pid, signal.SIGQUIT)
            self.assertTrue(conn.closed_within(5))
        c.expect_exit = True
        c.proc.wait(10)
        self.assertEqual(c.proc.returncode, 0)

    def test_request_during_quit_gets_connection_close(self):
        c = self.start()
        c.write('page.html', b'ok\n')
        with c.connect() as conn:
            conn.send(build_request('/page.html'))
            self.assertEqual(conn.read_response().status, 200)
            mark = c.log_mark()
            os.kill(c.master_pid, signal.SIGQUIT)
            self.assertTrue(c.wait_log(r'worker 0: graceful stop',
                                       mark=mark))
            # Within the grace, the next request is still answered.
            conn.send(build_request('/page.html'))
            r = conn.read_response()
            self.assertEqual(r.status, 200)
            self.assertIn('close', r.tokens('Connection'))
            self.assertTrue(conn.closed_within(5))
        c.expect_exit = True
        c.proc.wait(10)


class RespawnTest(CorralTestCase):

    def test_crashing_worker_backs_off(self):
        c = self.make(workers=1)
        start_dying(c, 3)
        self.assertTrue(c.wait_log(r'\[crit\].*keeps dying', timeout=10),
                        c.log())
        t0 = time.monotonic()
        n0 = len(re.findall('started worker', c.log()))
        time.sleep(2)
        n1 = len(re.findall('started worker', c.log()))
        window = time.monotonic() - t0
        # Back-off has reached 800 ms or more: a start per 0.8 s of the
        # window (longer than 2 s on a loaded machine), not a storm.
        self.assertLessEqual(n1 - n0, 1 + int(window / 0.8), c.log())
        self.assertTrue(re.search(r'exited with code 3', c.log()))


class LogReopenTest(CorralTestCase):

    def test_usr1_after_rename_loses_nothing(self):
        c = self.start(workers=2)
        c.write('page.html', b'ok\n')
        for i in range(20):
            self.assertEqual(c.get('/page.html?before=%d' % i).status, 200)
        os.rename(c.access_log, c.access_log + '.1')
        os.rename(c.error_log, c.error_log + '.1')
        os.kill(c.master_pid, signal.SIGUSR1)
        self.assertTrue(wait_until(
            lambda: 'logs reopened' in read_text(c.error_log), 5))
        # Workers reopen on their own signal; give them a moment by asking
        # until a fresh request lands in the new file.
        for i in range(30):
            self.assertEqual(c.get('/page.html?after=%d' % i).status, 200)
        c.stop()
        old = read_text(c.access_log + '.1')
        new = read_text(c.access_log)
        self.assertEqual(old.count('before='), 20, old)
        self.assertEqual(new.count('before='), 0, new)
        self.assertEqual(old.count('after=') + new.count('after='), 30)
        self.assertGreater(new.count('after='), 0, new)
        self.assertIn('exiting', read_text(c.error_log))


@unittest.skipUnless(os.geteuid() == 0, 'needs root')
class PrivilegeTest(CorralTestCase):

    def test_workers_run_as_nobody_by_default(self):
        c = self.start(workers=2)
        nobody = pwd.getpwnam('nobody').pw_uid
        self.assertEqual(uids(c.master_pid)[0], 0)
        for w in c.wait_workers(2):
            # The switch happens a moment after fork.
            self.assertTrue(wait_until(lambda: uids(w) == [nobody] * 4, 5),
                            uids(w))
        c.write('page.html', b'ok\n')
        self.assertEqual(c.get('/page.html').status, 200)

    def test_named_user(self):
        try:
            daemon = pwd.getpwnam('daemon')
        except KeyError:
            self.skipTest('no user "daemon"')
        c = self.start(user='daemon')
        for w in c.wait_workers(1):
            self.assertTrue(wait_until(
                lambda: uids(w) == [daemon.pw_uid] * 4, 5), uids(w))

    def test_root_only_when_asked(self):
        c = self.start(user='root')
        c.write('page.html', b'ok\n')
        self.assertEqual(c.get('/page.html').status, 200)
        for w in c.wait_workers(1):
            self.assertEqual(uids(w)[0], 0)

    def test_unknown_user_is_a_startup_error(self):
        c = self.make(user='no-such-user-here')
        c.expect_exit = True
        with self.assertRaises(AssertionError):
            c.start()
        self.assertIn('no-such-user-here', read_text(c.stderr_path))


class TitleTest(CorralTestCase):

    def test_titles_and_generation(self):
        c = self.start(workers=2)
        self.assertEqual(cmdline(c.master_pid),
                         'corral: master process %s' % c.conf_path)
        kids = c.wait_workers(2)

        def comms(want):
            # A child is named a moment after fork.
            return wait_until(lambda: sorted(
                proc_comm(k) for k in proc_children(c.master_pid)) == want, 5)
        self.assertTrue(comms(['corral g1 w0', 'corral g1 w1']))
        for k in kids:
            self.assertEqual(cmdline(k), 'corral: worker process')
        os.kill(c.master_pid, signal.SIGHUP)
        self.assertTrue(comms(['corral g2 w0', 'corral g2 w1']),
                        [proc_comm(k) for k in proc_children(c.master_pid)])


if __name__ == '__main__':
    unittest.main()
