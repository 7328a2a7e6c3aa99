"""
What make install puts in place works together: the installed config has
the pid file the systemd unit (PIDFile=) and the logrotate snippet use,
logs where logrotate looks, and it starts and stops with corralctl and
with the unit's own commands.  Installed with make install DESTDIR=, then
relocated into that folder (paths and the port only) to run.
"""

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import unittest

from harness import (BIN, CorralTestCase, build_request, free_port,
                     pid_alive, Conn, wait_until)

BUILDDIR = os.path.dirname(BIN)


def setting(text, key):
    """The value of a top-level "key = value" line of a config."""
    m = re.search(r'^%s\s*=\s*"?([^"\n]*)"?\s*$' % re.escape(key), text,
                  re.M)
    return m.group(1) if m else None


def find(root, tail):
    """The one file under root whose path ends with tail."""
    hits = []
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if p.endswith(tail):
                hits.append(p)
    if len(hits) != 1:
        raise AssertionError('%d files end with %s: %r' %
                             (len(hits), tail, hits))
    return hits[0]


class InstallTest(CorralTestCase):

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(os.path.join(BUILDDIR, 'Makefile')):
            raise unittest.SkipTest('no build tree at %s' % BUILDDIR)
        cls.dest = tempfile.mkdtemp(prefix='corral-install-')
        os.chmod(cls.dest, 0o755)	# the workers' user goes through it
        # A make of our own, not a job of the make check that runs us.
        env = {k: v for k, v in os.environ.items()
               if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL')}
        p = subprocess.run(['make', '-s', '-C', BUILDDIR, 'install',
                            'DESTDIR=' + cls.dest], env=env,
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            shutil.rmtree(cls.dest, ignore_errors=True)
            raise AssertionError('make install failed:\n' + p.stdout +
                                 p.stderr)
        cls.conf = find(cls.dest, '/corral.conf')
        cls.unit = find(cls.dest, '/corral.service')
        cls.logrotate = find(cls.dest, '/logrotate.d/corral')
        cls.corral = find(cls.dest, '/sbin/corral')
        cls.corralctl = find(cls.dest, '/sbin/corralctl')
        with open(cls.conf) as f:
            cls.text = f.read()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dest, ignore_errors=True)

    def unit_lines(self, key):
        with open(self.unit) as f:
            return [l.split('=', 1)[1].strip() for l in f
                    if l.startswith(key + '=')]

    # -- what the files say

    def test_one_pid_file_for_config_unit_and_logrotate(self):
        pid_file = setting(self.text, 'pid_file')
        self.assertTrue(pid_file and pid_file.startswith('/'),
                        'installed pid_file is %r' % pid_file)
        self.assertEqual(self.unit_lines('PIDFile'), [pid_file])
        with open(self.logrotate) as f:
            rot = f.read()
        self.assertIn('kill -USR1 "$(cat %s)"' % pid_file, rot)

    def test_logrotate_rotates_the_installed_logs(self):
        error_log = setting(self.text, 'error_log')
        self.assertTrue(error_log and error_log.startswith('/'),
                        'installed error_log is %r' % error_log)
        with open(self.logrotate) as f:
            glob = f.read().split('{', 1)[0].split('\n')[-1].strip()
        self.assertEqual(glob, os.path.dirname(error_log) + '/*.log')
        self.assertTrue(os.path.isdir(self.dest + os.path.dirname(error_log)),
                        'make install did not make the log folder')

    def test_unit_runs_the_installed_files(self):
        prog = self.corral[len(self.dest):]
        conf = self.conf[len(self.dest):]
        self.assertEqual(self.unit_lines('ExecStart'),
                         ['%s -c %s' % (prog, conf)])
        self.assertIn('%s -t -c %s' % (prog, conf),
                      self.unit_lines('ExecStartPre'))

    # -- running it, relocated into DESTDIR

    def relocated(self):
        """Rewrites the installed config to run inside DESTDIR; its port."""
        port = free_port()
        text = self.text
        for key in ('pid_file', 'error_log'):
            path = setting(text, key)
            os.makedirs(self.dest + os.path.dirname(path), exist_ok=True)
            text = text.replace('"%s"' % path, '"%s%s"' % (self.dest, path))
        root = re.search(r'^\s*root = "([^"]+)"', text, re.M).group(1)
        text = text.replace('"%s"' % root, '"%s%s"' % (self.dest, root))
        text = re.sub(r'^listen = .*$', 'listen = {"127.0.0.1:%d"}' % port,
                      text, flags=re.M)
        with open(self.conf, 'w') as f:
            f.write(text)
        self.addCleanup(self.restore)
        return port, self.dest + setting(self.text, 'pid_file')

    def restore(self):
        with open(self.conf, 'w') as f:
            f.write(self.text)

    def assertServes(self, port):
        with Conn(port) as c:
            c.send(build_request('/'))
            r = c.read_response()
        self.assertEqual(r.status, 200, r)
        self.assertIn(b'corral', r.body)

    def read_pid(self, path):
        try:
            with open(path) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    def test_corralctl_starts_and_stops_the_installed_config(self):
        port, pidfile = self.relocated()
        env = dict(os.environ, CORRAL=self.corral)

        def ctl(*args):
            return subprocess.run([self.corralctl, '-c', self.conf] +
                                  list(args), capture_output=True,
                                  text=True, env=env, timeout=60)
        p = ctl('start')
        self.addCleanup(lambda: ctl('stop'))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertServes(port)
        self.assertEqual(ctl('status').returncode, 0)
        self.assertEqual(ctl('reload').returncode, 0)
        self.assertServes(port)
        p = ctl('stop')
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertFalse(os.path.exists(pidfile))

    def test_the_units_commands_run_the_installed_config(self):
        # What systemd does with the unit (Type=forking): ExecStartPre,
        # ExecStart, which returns once corral detached, then PIDFile=;
        # ExecReload with $MAINPID; KillSignal= to stop.
        port, pidfile = self.relocated()

        def run(line, mainpid=None):
            argv = [a.replace('$MAINPID', str(mainpid))
                    for a in shlex.split(line)]
            if argv[0] == prog:
                argv[0] = self.corral
            argv = [self.conf if a == conf else a for a in argv]
            return subprocess.run(argv, capture_output=True, text=True,
                                  timeout=60)
        prog = self.corral[len(self.dest):]
        conf = self.conf[len(self.dest):]
        for line in self.unit_lines('ExecStartPre'):
            p = run(line)
            self.assertEqual(p.returncode, 0, p.stderr)
        for line in self.unit_lines('ExecStart'):
            p = run(line)
            self.assertEqual(p.returncode, 0, p.stderr)
        main = wait_until(lambda: self.read_pid(pidfile), 10)
        self.assertTrue(main, 'no pid in %s' % pidfile)
        self.addCleanup(lambda: pid_alive(main) and
                        os.kill(main, signal.SIGKILL))
        self.assertServes(port)
        for line in self.unit_lines('ExecReload'):
            p = run(line, main)
            self.assertEqual(p.returncode, 0, p.stderr)
        self.assertServes(port)
        sig = self.unit_lines('KillSignal')[0]
        os.kill(main, getattr(signal, sig))
        self.assertTrue(wait_until(lambda: not pid_alive(main), 20),
                        'the master did not stop on %s' % sig)
        self.assertFalse(os.path.exists(pidfile))
