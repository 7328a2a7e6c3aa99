"""corralctl: starting, stopping and signalling corral as an admin would."""

import os
import re
import shlex
import signal
import socket
import stat
import subprocess

from harness import (BIN, Corral, CorralTestCase, Raw, build_request,
                     proc_children, proc_comm, proc_stat, read_text,
                     refused, same_process, wait_until)

CTL = os.path.abspath(os.environ.get(
    'CORRALCTL', os.path.join(os.path.dirname(BIN), 'corralctl')))
CTL_TIMEOUT = 60	# seconds for one corralctl run, a safety net only

HELP_SECTIONS = ('NAME', 'SYNOPSIS', 'COMMANDS', 'OPTIONS', 'EXIT STATUS',
                 'FILES', 'ENVIRONMENT')
RUNNING_RE = (r'^corral is running \(pid (\d+)\), (\d+) workers?, '
              r'generation (\d+)$')


def read_pid(path):
    """The pid in a pid file, or None when there is none."""
    text = read_text(path).strip()
    return int(text) if text.isdigit() else None


# Stands in for corral: answers -q and -t with the real one, and runs
# START instead of starting the server.
FAKE = """#!/bin/sh
case " $* " in
*" -q "*|*" -t "*) exec %(bin)s "$@" ;;
esac
%(start)s
"""

# Starts the real corral once the test writes to the FIFO; GATE holds the
# pid of the shell that waits for it.
GATED = """sh -c 'echo $$ > "$0"; read x < "$1"; shift; exec "$@"' \\
    %(gate)s %(fifo)s %(bin)s "$@" < /dev/null > /dev/null 2>&1 &
exit 0"""


def open_writer(fifo):
    """A write end of fifo once something reads it, else None."""
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None


def masters_of(conf):
    """Pids of live corral processes whose command line names conf."""
    out = []
    for d in os.listdir('/proc'):
        if not d.isdigit() or proc_comm(int(d)) != 'corral':
            continue
        try:
            with open('/proc/%s/cmdline' % d, 'rb') as f:
                cmd = f.read()
        except OSError:
            continue
        st = proc_stat(int(d))
        if conf.encode() in cmd and st and st[0] not in 'ZX':
            out.append(int(d))
    return out


class CorralctlTest(CorralTestCase):

    def setUp(self):
        if not os.access(CTL, os.X_OK):
            self.skipTest('no corralctl at %s (set CORRALCTL)' % CTL)
        if not os.access(BIN, os.X_OK):
            self.skipTest('no server binary at %s' % BIN)

    # -- helpers

    def server(self, **kw):
        """A config with a pid file, served by corralctl; never started."""
        kw.setdefault('workers', 2)
        c = Corral(**kw)
        self.addCleanup(c.remove)
        c.pid_file = os.path.join(c.tmp, 'corral.pid')
        c.directives['pid_file'] = c.pid_file
        self.save(c)
        c.write('index.html', b'served by corral\n')
        c.procs = {}		# pid: start time of everything seen running
        self.addCleanup(self.kill_leftovers, c)
        return c

    def save(self, c, text=None):
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text() if text is None else text)

    def ctl(self, c, *args, env=None):
        """Runs corralctl on c's config; returns the CompletedProcess."""
        e = dict(os.environ, CORRAL=BIN)
        e.update(env or {})
        p = subprocess.run([CTL, '-c', c.conf_path] + list(args),
                           capture_output=True, text=True, cwd=c.tmp,
                           env=e, timeout=CTL_TIMEOUT)
        self.remember(c)
        return p

    def remember(self, c):
        """Notes the master and workers now running, for the cleanup."""
        pid = read_pid(c.pid_file)
        if pid is None or proc_comm(pid) != 'corral':	# never kill a stranger
            return
        for p in [pid] + proc_children(pid):
            st = proc_stat(p)
            if st and st[0] not in 'ZX':
                c.procs.setdefault(p, st[2])

    def kill_leftovers(self, c):
        """Stops c however the test ended; kills what survives."""
        for pid in masters_of(c.conf_path):	# also those never seen
            st = proc_stat(pid)
            if st:
                c.procs.setdefault(pid, st[2])
        if any(same_process(p, t) for p, t in c.procs.items()):
            self.ctl(c, 'stop')
        left = [p for p, t in c.procs.items() if same_process(p, t)]
        for p in left:
            os.kill(p, signal.SIGKILL)
        if left:
            self.fail('corralctl stop left %r running' % left)

    def start(self, c):
        """corralctl start, which must succeed; returns the master pid."""
        p = self.ctl(c, 'start')
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr +
                         c.diagnostics())
        pid = read_pid(c.pid_file)
        self.assertIsNotNone(pid, 'no pid in %s' % c.pid_file)
        self.assertEqual(p.stdout, 'corral started (pid %d)\n' % pid)
        return pid

    def wait_named_workers(self, pid, n, gen):
        """Waits until pid has n workers named "corral gGEN wN"."""
        rx = re.compile(r'^corral g%d w\d+$' % gen)

        def named():
            kids = [k for k in proc_children(pid) if rx.match(proc_comm(k) or '')]
            return kids if len(kids) == n else None
        kids = wait_until(named, 10)
        self.assertTrue(kids, 'no %d workers of generation %d under %d: %r'
                        % (n, gen, pid, [proc_comm(k) for k in
                                         proc_children(pid)]))
        return kids

    def assertServes(self, c):
        self.assertBody(c.get('/index.html'), b'served by corral\n')

    def assertGone(self, c, procs):
        """The master and workers in procs are gone, and so is the port."""
        left = [p for p, t in procs.items() if same_process(p, t)]
        self.assertEqual(left, [], 'still running after corralctl returned')
        self.assertFalse(os.path.exists(c.pid_file), 'pid file left behind')
        self.assertTrue(refused(c.port), 'port %d still open' % c.port)

    def start_download(self, c, size=8 << 20):
        """A GET of a big file that stalls: we read only its first bytes."""
        data = os.urandom(size)
        c.write('big.bin', data)
        s = socket.socket()
        self.addCleanup(s.close)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        s.settimeout(10)
        s.connect(('127.0.0.1', c.port))
        s.sendall(build_request('/big.bin'))
        got = s.recv(16384)
        self.assertTrue(got.startswith(b'HTTP/1.1 200 '), got[:100])
        return s, data, got

    def family(self, pid):
        return {p: proc_stat(p)[2] for p in [pid] + proc_children(pid)
                if proc_stat(p)}

    # -- configtest

    def test_configtest_good(self):
        c = self.server()
        p = self.ctl(c, 'configtest')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('test is successful', p.stdout)

    def test_configtest_bad(self):
        c = self.server()
        self.save(c, 'workers = 1\nworkers = none\n' +
                  c.config_text().split('\n', 1)[1])
        p = self.ctl(c, 'configtest')
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertRegex(p.stderr, r'(?m)^corral: %s:2: \S' %
                         re.escape(c.conf_path))

    # -- start

    def test_start_serves(self):
        c = self.server()
        pid = self.start(c)
        # Ready when corralctl returns: no waiting here.
        self.assertServes(c)
        self.assertEqual(proc_comm(pid), 'corral')
        self.assertNotIn(pid, [os.getpid()] + proc_children(os.getpid()),
                         'corral did not detach')

    def fake_corral(self, c, start):
        """Writes a stand-in corral (see FAKE); returns its path."""
        path = os.path.join(c.tmp, 'fake-corral')
        with open(path, 'w') as f:
            f.write(FAKE % {'bin': shlex.quote(BIN), 'start': start})
        os.chmod(path, stat.S_IRWXU)
        return path

    def test_start_waits_until_serving(self):
        c = self.server()
        gate = os.path.join(c.tmp, 'gate.pid')
        fifo = os.path.join(c.tmp, 'gate.fifo')
        os.mkfifo(fifo)
        fake = self.fake_corral(c, GATED % {
            'gate': shlex.quote(gate), 'fifo': shlex.quote(fifo),
            'bin': shlex.quote(BIN)})

        def open_gate():
            pid = read_pid(gate)
            if pid is not None and proc_comm(pid) == 'sh':
                os.kill(pid, signal.SIGKILL)
        self.addCleanup(open_gate)
        ctl = subprocess.Popen([CTL, '-c', c.conf_path, 'start'],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, CORRAL=fake))
        self.addCleanup(lambda: ctl.poll() is None and ctl.kill())
        self.assertTrue(wait_until(lambda: read_pid(gate), 10),
                        'the stand-in corral did not run')
        self.assertIsNone(ctl.poll(), 'corralctl returned before corral '
                          'started')
        fd = wait_until(lambda: open_writer(fifo), 10)
        self.assertTrue(fd, 'the stand-in corral does not read %s' % fifo)
        os.close(fd)
        out, err = ctl.communicate(timeout=CTL_TIMEOUT)
        self.remember(c)
        self.assertEqual(ctl.returncode, 0, err)
        pid = read_pid(c.pid_file)
        self.assertEqual(out, 'corral started (pid %d)\n' % pid)
        self.assertServes(c)

    def test_start_timeout_shows_the_log(self):
        c = self.server()
        line = '2001/01/01 00:00:00 [crit] 1 master: the disk is on fire'
        fake = self.fake_corral(c, 'echo %s >> %s' % (
            shlex.quote(line), shlex.quote(c.error_log)))
        p = self.ctl(c, 'start', env={'CORRAL': fake,
                                      'CORRALCTL_TIMEOUT': '1'})
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn('corralctl: no live corral in %s after 1 s\n'
                      % c.pid_file, p.stderr)
        self.assertIn(line + '\n', p.stderr)

    def test_start_twice(self):
        c = self.server()
        pid = self.start(c)
        p = self.ctl(c, 'start')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, 'corral is already running (pid %d)\n'
                         % pid)
        self.assertEqual(read_pid(c.pid_file), pid)
        self.assertServes(c)

    def test_start_port_taken(self):
        c = self.server()
        s = socket.socket()
        self.addCleanup(s.close)
        s.bind(('127.0.0.1', c.port))
        s.listen()
        p = self.ctl(c, 'start')
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn('Address already in use', p.stderr)
        self.assertRegex(p.stderr, r'(?m)^corralctl: \S')
        self.assertFalse(os.path.exists(c.pid_file))

    def test_start_stale_pid_file(self):
        c = self.server()
        with open(c.pid_file, 'w') as f:
            f.write('%d\n' % os.getpid())	# alive, but not corral
        p = self.ctl(c, 'start')
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        pid = read_pid(c.pid_file)
        self.assertNotEqual(pid, os.getpid())
        self.assertEqual(p.stdout, 'removing stale pid file %s\n'
                         'corral started (pid %d)\n' % (c.pid_file, pid))
        self.assertServes(c)

    def test_start_needs_pid_file(self):
        c = self.server()
        c.directives['pid_file'] = 'off'
        self.save(c)
        p = self.ctl(c, 'start')
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertIn('pid_file', p.stderr)
        self.assertTrue(refused(c.port), 'started without a pid file')
        p = self.ctl(c, 'status')
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)

    # -- status

    def test_status_running(self):
        c = self.server(workers=2)
        pid = self.start(c)
        self.wait_named_workers(pid, 2, 1)
        p = self.ctl(c, 'status')
        self.assertEqual(p.returncode, 0, p.stderr)
        first, _, summary = p.stdout.partition('\n')
        self.assertEqual(first, 'corral is running (pid %d), 2 workers, '
                         'generation 1' % pid)
        # Then the counters' summary, from the stats file.
        self.assertRegex(summary, r'\ncorral/\S+ +master %d ' % pid)
        self.assertRegex(summary, r'\nrequests +\d+ total')

    def test_status_not_running(self):
        c = self.server()
        p = self.ctl(c, 'status')
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertEqual(p.stdout, 'corral is not running\n')

    def test_status_stale_pid_file(self):
        c = self.server()
        dead = subprocess.Popen(['true'])
        dead.wait()
        for pid in (dead.pid, os.getpid()):	# gone; alive but not corral
            with self.subTest(pid=pid):
                with open(c.pid_file, 'w') as f:
                    f.write('%d\n' % pid)
                p = self.ctl(c, 'status')
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertEqual(p.stdout, 'corral is not running (stale '
                                 'pid file %s)\n' % c.pid_file)

    # -- stop

    def test_stop(self):
        c = self.server(workers=2)
        pid = self.start(c)
        self.wait_named_workers(pid, 2, 1)
        procs = self.family(pid)
        self.assertEqual(len(procs), 3)
        p = self.ctl(c, 'stop')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, 'corral stopped\n')
        self.assertGone(c, procs)
        self.assertRegex(c.log(), r'(?m)\] %d master: signal %d: stopping$'
                         % (pid, signal.SIGTERM))

        p = self.ctl(c, 'status')
        self.assertEqual((p.returncode, p.stdout),
                         (3, 'corral is not running\n'))
        p = self.ctl(c, 'stop')
        self.assertEqual((p.returncode, p.stdout),
                         (0, 'corral is not running\n'))

    def test_graceful_stop(self):
        c = self.server(workers=2)
        pid = self.start(c)
        self.wait_named_workers(pid, 2, 1)
        procs = self.family(pid)
        p = self.ctl(c, 'graceful-stop')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, 'corral stopped\n')
        self.assertGone(c, procs)
        self.assertRegex(c.log(), r'(?m)\] %d master: signal %d: stopping '
                         r'gracefully$' % (pid, signal.SIGQUIT))

    def test_graceful_stop_waits_for_a_download(self):
        c = self.server(workers=1)
        pid = self.start(c)
        procs = self.family(pid)
        s, data, got = self.start_download(c)
        mark = c.log_mark()
        ctl = subprocess.Popen([CTL, '-c', c.conf_path, 'graceful-stop'],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=dict(os.environ, CORRAL=BIN))
        self.addCleanup(lambda: ctl.poll() is None and ctl.kill())
        c.wait_log(r'graceful', mark=mark)
        # The download is stalled, so the worker, and corral, still run.
        self.assertIsNone(ctl.poll(), 'corralctl returned while corral '
                          'was still serving')
        while True:
            d = s.recv(1 << 20)
            if not d:
                break
            got += d
        self.assertEqual(got.partition(b'\r\n\r\n')[2], data)
        out, err = ctl.communicate(timeout=CTL_TIMEOUT)
        self.assertEqual((ctl.returncode, out), (0, 'corral stopped\n'), err)
        self.assertGone(c, procs)

    def test_restart(self):
        c = self.server()
        old = self.start(c)
        procs = self.family(old)
        p = self.ctl(c, 'restart')
        self.assertEqual(p.returncode, 0, p.stderr)
        new = read_pid(c.pid_file)
        self.assertIsNotNone(new)
        self.assertNotEqual(new, old)
        self.assertEqual(p.stdout, 'corral stopped\ncorral started '
                         '(pid %d)\n' % new)
        self.assertFalse([q for q, t in procs.items()
                          if same_process(q, t)], 'old processes remain')
        self.assertServes(c)

    def check_restart_refused(self, c, text, why):
        pid = self.start(c)
        start = proc_stat(pid)[2]
        self.save(c, text)
        p = self.ctl(c, 'restart')
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertRegex(p.stderr, r'(?m)^corral: %s:\d+: .*%s' %
                         (re.escape(c.conf_path), why))
        self.assertIn('not restarted', p.stderr)
        self.assertNotIn('stopped', p.stdout)
        self.assertTrue(same_process(pid, start), 'corral was stopped')
        self.assertEqual(read_pid(c.pid_file), pid)
        self.assertServes(c)
        self.save(c)	# so that the cleanup can stop it

    def test_restart_bad_syntax_keeps_serving(self):
        c = self.server()
        self.check_restart_refused(
            c, c.config_text().replace('workers = 2\n', 'workers = two\n'),
            'workers')

    def test_restart_unknown_user_keeps_serving(self):
        # Good syntax that start would refuse: -t refuses it too.
        c = self.server()
        self.check_restart_refused(
            c, c.config_text().replace('workers = 2\n', 'workers = 2\n'
                                       'user = "no-such-user-here"\n'),
            'user "no-such-user-here" does not exist')

    def test_restart_bad_store_layout_keeps_serving(self):
        # The case: a cache section the store refuses at start
        # stopped the running server, then failed to start the new one.
        c = self.server()
        c.directives['cache'] = {'size': Raw('1m'), 'stripes': 4096,
                                 'max_object': Raw('1m')}
        bad = c.config_text()
        del c.directives['cache']
        self.check_restart_refused(c, bad, r'cache: size 1m is too small')

    # -- reload and reopen

    def test_reload_of_cache_section_says_restart(self):
        c = self.server(workers=1)
        c.directives['cache'] = {'size': Raw('4m'), 'stripes': 4,
                                 'max_object': Raw('64k')}
        self.save(c)
        pid = self.start(c)
        self.wait_named_workers(pid, 1, 1)
        c.directives['cache']['size'] = Raw('8m')
        self.save(c)
        p = self.ctl(c, 'reload')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, 'reloading corral (pid %d)\n' % pid)
        self.assertRegex(p.stderr, r'^corralctl: the cache section changed;'
                         r' .*corralctl restart')
        self.assertRegex(c.log(), r'\[warn\] \d+ master: .*the cache '
                         r'section changed')
        self.wait_named_workers(pid, 1, 2)
        self.assertServes(c)
        # A reload that leaves the cache alone says nothing of it.
        c.directives['workers'] = 2
        self.save(c)
        p = self.ctl(c, 'reload')
        self.assertEqual((p.returncode, p.stderr), (0, ''))

    def test_reload_that_fails_in_the_master_is_reported(self):
        # -t cannot know that another program holds a port: the master
        # finds out, keeps the old config, and corralctl says so.
        c = self.server(workers=1)
        pid = self.start(c)
        self.wait_named_workers(pid, 1, 1)
        busy = socket.socket()
        self.addCleanup(busy.close)
        busy.bind(('127.0.0.1', 0))
        busy.listen(1)
        c.directives['listen'] = c.directives['listen'] + [
            '127.0.0.1:%d' % busy.getsockname()[1]]
        self.save(c)
        p = self.ctl(c, 'reload')
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn('Address already in use', p.stderr)
        self.assertIn('the reload failed', p.stderr)
        self.assertServes(c)
        self.assertEqual(self.ctl(c, 'status').returncode, 0)

    def test_reload(self):
        c = self.server(workers=2)
        pid = self.start(c)
        self.wait_named_workers(pid, 2, 1)
        c.directives['workers'] = 1
        self.save(c)
        p = self.ctl(c, 'reload')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.wait_named_workers(pid, 1, 2)
        self.assertServes(c)
        st = wait_until(lambda: re.match(RUNNING_RE,
                                         self.ctl(c, 'status').stdout,
                                         re.M), 10)
        self.assertTrue(st)
        self.assertEqual(st.groups(), (str(pid), '1', '2'))

    def test_status_counts_the_newest_generation(self):
        c = self.server(workers=1)
        pid = self.start(c)
        busy = self.wait_named_workers(pid, 1, 1)[0]
        busy_start = proc_stat(busy)[2]
        self.start_download(c)
        c.directives['workers'] = 3
        self.save(c)
        self.assertEqual(self.ctl(c, 'reload').returncode, 0)
        self.wait_named_workers(pid, 3, 2)
        # The old worker, busy with the download, retires meanwhile.
        p = self.ctl(c, 'status')
        self.assertTrue(same_process(busy, busy_start),
                        'the old worker left during the test')
        self.assertEqual(proc_comm(busy), 'corral g1 w0')
        self.assertEqual((p.returncode, p.stdout.split('\n')[0]),
                         (0, 'corral is running (pid %d), 3 workers, '
                          'generation 2' % pid))

    def test_graceful_bad_config_not_signalled(self):
        for cmd in ('reload', 'graceful'):
            with self.subTest(cmd=cmd):
                self.check_bad_reload(cmd)

    def check_bad_reload(self, cmd):
        c = self.server(workers=2)
        pid = self.start(c)
        start = proc_stat(pid)[2]
        good = c.config_text()
        mark = c.log_mark()
        self.save(c, good.replace('workers = 2\n',
                                  'workers = 2\nno_such_thing = 1\n'))
        p = self.ctl(c, cmd)
        self.assertEqual(p.returncode, 1, p.stdout)
        self.assertRegex(p.stderr, r'(?m)^corral: %s:\d+: \S' %
                         re.escape(c.conf_path))
        self.assertIn('not reloaded', p.stderr)
        self.assertEqual(read_pid(c.pid_file), pid)
        self.assertTrue(same_process(pid, start))
        self.assertServes(c)
        # USR1 is taken after any pending HUP: once the logs are reopened,
        # a reload would have been logged.
        self.save(c, good)
        self.assertEqual(self.ctl(c, 'reopen').returncode, 0)
        c.wait_log(r'logs reopened', mark=mark)
        self.assertNotRegex(c.log_since(mark), r'signal %d|reload' %
                            signal.SIGHUP)
        self.assertEqual(self.ctl(c, 'stop').returncode, 0)

    def test_reopen(self):
        c = self.server()
        pid = self.start(c)
        os.rename(c.error_log, c.error_log + '.1')
        p = self.ctl(c, 'reopen')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(wait_until(lambda: 'logs reopened' in c.log(), 10),
                        'no "logs reopened" in a new %s' % c.error_log)
        self.assertIn('] %d master: ' % pid, c.log())
        self.assertNotIn('logs reopened', read_text(c.error_log + '.1'))

    def test_signals_when_not_running(self):
        c = self.server()
        for cmd in ('reload', 'graceful', 'reopen'):
            with self.subTest(cmd=cmd):
                p = self.ctl(c, cmd)
                self.assertEqual(p.returncode, 7, p.stdout)
                self.assertIn('not running', p.stderr)

    # -- command line

    def test_bad_command(self):
        c = self.server()
        for args in (['frobnicate'], [], ['start', 'stop'], ['-x', 'start']):
            with self.subTest(args=args):
                p = self.ctl(c, *args)
                self.assertEqual(p.returncode, 2, p.stdout)
                self.assertRegex(p.stderr, r'(?m)^usage: corralctl ')
                self.assertEqual(p.stdout, '')
        self.assertTrue(refused(c.port))

    def test_bad_timeout(self):
        c = self.server()
        p = self.ctl(c, 'start', env={'CORRALCTL_TIMEOUT': '5s'})
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn('CORRALCTL_TIMEOUT', p.stderr)
        self.assertTrue(refused(c.port))

    def test_help(self):
        for opt in ('-h', '--help'):
            with self.subTest(opt=opt):
                p = subprocess.run([CTL, opt], capture_output=True,
                                   text=True, timeout=CTL_TIMEOUT)
                self.assertEqual(p.returncode, 0, p.stderr)
                for sec in HELP_SECTIONS:
                    self.assertRegex(p.stdout, r'(?m)^%s$' % sec)
                for cmd in ('start', 'stop', 'graceful-stop', 'restart',
                            'graceful', 'reload', 'reopen', 'configtest',
                            'status'):
                    self.assertRegex(p.stdout, r'(?m)^ +%s ' % cmd)

    def test_finds_corral_next_to_itself(self):
        c = self.server()
        bindir = c.docroot('bin')
        ctl = os.path.join(bindir, 'corralctl')
        with open(CTL, 'rb') as src, open(ctl, 'wb') as dst:
            dst.write(src.read())
        fake = os.path.join(bindir, 'corral')
        with open(fake, 'w') as f:
            f.write('#!/bin/sh\necho "fake corral $*"\n')
        for path in (ctl, fake):
            os.chmod(path, stat.S_IRWXU)
        env = dict(os.environ)
        env.pop('CORRAL', None)
        p = subprocess.run([ctl, '-c', c.conf_path, 'configtest'],
                           capture_output=True, text=True, env=env,
                           timeout=CTL_TIMEOUT)
        self.assertEqual((p.returncode, p.stdout),
                         (0, 'fake corral -t -c %s\n' % c.conf_path))
        env['CORRAL'] = BIN
        p = subprocess.run([ctl, '-c', c.conf_path, 'configtest'],
                           capture_output=True, text=True, env=env,
                           timeout=CTL_TIMEOUT)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('test is successful', p.stdout)
