"""
The test harness's reaper: whatever a test run starts dies with the run,
however the run ends.  Two suites side by side (or a run killed by a
timeout) must not leave servers holding ports, stores and CPU behind.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

from harness import HERE, pid_alive, proc_stat, wait_until

# A test module for a run of its own: a server (its own session, workers
# that are not the run's children), a daemon (setsid and a double fork:
# nobody's child), a program that execs; it says who they are, then waits
# to be killed.
CHILD = textwrap.dedent('''\
    import os, subprocess, sys, time, unittest
    from harness import CorralTestCase, wait_until

    class Held(CorralTestCase):
        def test_held(self):
            c = self.start(workers=2)
            workers = wait_until(lambda: len(c.workers()) == 2 and
                                 c.workers(), 10)
            daemon = int(subprocess.check_output(
                ['setsid', 'sh', '-c', 'sleep 300 </dev/null >/dev/null '
                 '2>&1 & echo $!']))
            execd = subprocess.Popen(['sh', '-c', 'exec sleep 300'])
            with open(os.environ['REAP_PIDS'] + '.tmp', 'w') as f:
                f.write(' '.join(str(p) for p in
                                 [c.master_pid] + workers +
                                 [daemon, execd.pid]))
                f.write(' ' + c.tmp)
            os.rename(os.environ['REAP_PIDS'] + '.tmp',
                      os.environ['REAP_PIDS'])
            time.sleep(600)
    ''')


class ReaperTest(unittest.TestCase):

    def held_run(self, how):
        """Starts a run of CHILD, kills it with how(run), and returns the
        pids it had started and its server's folder."""
        d = tempfile.mkdtemp(prefix='corral-reap-')
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, 'test_reap_child.py'), 'w') as f:
            f.write(CHILD)
        pids = os.path.join(d, 'pids')
        env = dict(os.environ, REAP_PIDS=pids,
                   PYTHONPATH=d + os.pathsep + HERE)
        run = subprocess.Popen(
            [sys.executable, os.path.join(HERE, 'run'), '-q',
             'test_reap_child.py'], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True)
        self.addCleanup(run.stdout.close)
        self.addCleanup(lambda: run.poll() is None and run.kill())
        ok = wait_until(lambda: os.path.exists(pids) or
                        run.poll() is not None, 60)
        self.assertTrue(ok and os.path.exists(pids),
                        run.poll() is not None and run.stdout.read())
        with open(pids) as f:
            words = f.read().split()
        started = [int(w) for w in words[:-1]]
        self.assertEqual(len(started), 5, words)
        procs = {p: proc_stat(p)[2] for p in started if pid_alive(p)}
        self.assertEqual(sorted(procs), sorted(started), 'not all alive')
        how(run)
        run.wait(10)
        return procs, words[-1]

    def assertAllGone(self, procs, folder):
        def left():
            return [p for p, start in procs.items()
                    if pid_alive(p) and proc_stat(p)[2] == start]
        self.assertTrue(wait_until(lambda: not left(), 20),
                        'still running: %r' % left())
        # ... and the run's temporary folder went with them.
        self.assertTrue(wait_until(lambda: not os.path.exists(folder), 10),
                        folder)

    def test_killed_run_leaves_nothing(self):
        # SIGKILL: no atexit, no finally, no signal handler runs.
        procs, folder = self.held_run(lambda run: run.kill())
        self.assertAllGone(procs, folder)

    def test_run_group_killed_leaves_nothing(self):
        # A signal to the run's whole process group (a timeout, ^C) does
        # not reach the servers' sessions, nor the watcher's.  SIGKILL,
        # not SIGINT: a run started in the background inherits SIGINT
        # ignored and would not end.
        procs, folder = self.held_run(
            lambda run: os.killpg(run.pid, signal.SIGKILL))
        self.assertAllGone(procs, folder)


if __name__ == '__main__':
    unittest.main()
