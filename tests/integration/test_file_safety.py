"""
Files the master opens as root (error_log, access_log, cache.path, the pid
file): a symlink or hard link planted by another user in a folder that
user can write must never make root append to, truncate or chown another
file (nginx CVE-2016-1247).  Each case plants the link as another user,
checks that corral -t and start both refuse with the file, line and
reason, and that the target is untouched.
"""

import os
import pwd
import re
import signal
import stat
import subprocess

from harness import BIN, CorralTestCase, Raw, build_request, wait_until

NOBODY = pwd.getpwnam('nobody')		# the workers' user
DAEMON = pwd.getpwnam('daemon')		# some other user
PRECIOUS = b'root:secret:precious\n'


def line_of(text, key):
    """The line number of the first "key = ..." of a config text."""
    for i, line in enumerate(text.splitlines(), 1):
        if re.match(r'\s*%s\s*=' % re.escape(key), line):
            return i
    raise AssertionError('no %s in the config' % key)


class FileSafetyTest(CorralTestCase):

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest('the attacks need root to plant other users\' '
                          'files')

    # -- helpers

    def victim(self, c):
        """A root file the attacker wants root to overwrite or give away."""
        path = os.path.join(c.tmp, 'victim')
        with open(path, 'wb') as f:
            f.write(PRECIOUS)
        os.chmod(path, 0o600)
        return path

    def assertUntouched(self, path):
        st = os.lstat(path)
        with open(path, 'rb') as f:
            self.assertEqual(f.read(), PRECIOUS, 'the victim was written')
        self.assertEqual((st.st_uid, st.st_gid), (0, 0),
                         'the victim was given away')
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)

    def folder(self, c, name, owner=NOBODY, mode=0o755):
        """A folder owned by owner (the workers' user by default)."""
        path = os.path.join(c.tmp, name)
        os.mkdir(path)
        os.chown(path, owner.pw_uid, owner.pw_gid)
        os.chmod(path, mode)
        return path

    def plant_symlink(self, target, link, owner=NOBODY):
        os.symlink(target, link)
        os.lchown(link, owner.pw_uid, owner.pw_gid)

    def write(self, c):
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())

    def assertRefused(self, c, key, why):
        """corral -t and start both fail with FILE:LINE: key PATH: why."""
        line = line_of(c.config_text(), key)
        rx = r'%s:%d: .*%s.*%s' % (re.escape(c.conf_path), line,
                                   re.escape(key), why)
        t = c.check_config()
        self.assertEqual(t.returncode, 1, 'corral -t accepted it: ' +
                         t.stdout + t.stderr)
        self.assertRegex(t.stderr, r'^corral: ' + rx)
        p = subprocess.Popen([BIN, '-f', '-c', c.conf_path],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            self.fail('corral started with %s' % key)
        self.assertEqual(p.returncode, 1, err)
        self.assertRegex(err, rx)

    # -- symlinks

    def test_error_log_symlink(self):
        c = self.make()
        victim = self.victim(c)
        logs = self.folder(c, 'logs')
        self.plant_symlink(victim, os.path.join(logs, 'error.log'))
        c.directives['error_log'] = os.path.join(logs, 'error.log')
        self.write(c)
        self.assertRefused(c, 'error_log', 'symbolic link')
        self.assertUntouched(victim)

    def test_access_log_symlink(self):
        c = self.make()
        victim = self.victim(c)
        logs = self.folder(c, 'logs')
        self.plant_symlink(victim, os.path.join(logs, 'access.log'))
        c.servers[0]['access_log'] = os.path.join(logs, 'access.log')
        self.write(c)
        self.assertRefused(c, 'access_log', 'symbolic link')
        self.assertUntouched(victim)

    def test_access_log_symlink_in_sticky_tmp(self):
        c = self.make()
        victim = self.victim(c)
        tmp = self.folder(c, 'tmp', owner=pwd.getpwuid(0), mode=0o1777)
        self.plant_symlink(victim, os.path.join(tmp, 'access.log'),
                           owner=DAEMON)
        c.servers[0]['access_log'] = os.path.join(tmp, 'access.log')
        self.write(c)
        self.assertRefused(c, 'access_log', 'symbolic link')
        self.assertUntouched(victim)

    def test_cache_path_symlink(self):
        c = self.make()
        victim = self.victim(c)
        shared = self.folder(c, 'cache')
        self.plant_symlink(victim, os.path.join(shared, 'store'))
        c.directives['cache'] = {'path': os.path.join(shared, 'store'),
                                 'size': Raw('4m'), 'stripes': 4,
                                 'max_object': Raw('64k')}
        self.write(c)
        self.assertRefused(c, 'path', 'symbolic link')
        self.assertUntouched(victim)

    def test_symlink_made_by_root_in_root_folder_is_followed(self):
        # The admin's own links (say to /dev/stdout) keep working.
        c = self.make()
        real = os.path.join(c.tmp, 'real-access.log')
        link = os.path.join(c.tmp, 'access-link.log')
        os.symlink(real, link)
        c.servers[0]['access_log'] = link
        self.write(c)
        self.assertEqual(c.check_config().returncode, 0)
        c.start()
        c.write('index.html', b'x')
        self.assertEqual(c.get('/index.html').status, 200)
        self.assertTrue(wait_until(
            lambda: os.path.exists(real) and
            b'/index.html' in open(real, 'rb').read(), 5))
        self.assertEqual(os.stat(real).st_uid, NOBODY.pw_uid)

    # -- hard links, owners, folders

    def test_access_log_hard_link(self):
        c = self.make()
        logs = self.folder(c, 'logs')
        victim = os.path.join(logs, 'victim')	# same file system
        with open(victim, 'wb') as f:
            f.write(PRECIOUS)
        os.chmod(victim, 0o600)
        os.link(victim, os.path.join(logs, 'access.log'))
        c.servers[0]['access_log'] = os.path.join(logs, 'access.log')
        self.write(c)
        self.assertRefused(c, 'access_log', 'hard links')
        self.assertUntouched(victim)

    def test_log_owned_by_another_user(self):
        c = self.make()
        logs = self.folder(c, 'logs', owner=pwd.getpwuid(0), mode=0o1777)
        path = os.path.join(logs, 'error.log')
        with open(path, 'wb') as f:
            f.write(PRECIOUS)
        os.chown(path, DAEMON.pw_uid, DAEMON.pw_gid)
        c.directives['error_log'] = path
        self.write(c)
        self.assertRefused(c, 'error_log', 'owned by daemon')
        self.assertEqual(os.stat(path).st_uid, DAEMON.pw_uid)

    def test_world_writable_folder_without_sticky_bit(self):
        c = self.make()
        logs = self.folder(c, 'logs', owner=pwd.getpwuid(0), mode=0o777)
        c.directives['error_log'] = os.path.join(logs, 'error.log')
        self.write(c)
        self.assertRefused(c, 'error_log', 'no sticky bit')
        self.assertFalse(os.path.exists(os.path.join(logs, 'error.log')))

    def test_pid_file_folder_writable_by_workers(self):
        c = self.make()
        run = self.folder(c, 'run')
        c.directives['pid_file'] = os.path.join(run, 'corral.pid')
        self.write(c)
        self.assertRefused(c, 'pid_file', 'can be written by users other')

    def test_sticky_folder_logs_and_pid_work(self):
        # /tmp-like: new files are ours, and no one can replace them.
        c = self.make()
        tmp = self.folder(c, 'tmp', owner=pwd.getpwuid(0), mode=0o1777)
        c.directives['error_log'] = os.path.join(tmp, 'error.log')
        c.directives['pid_file'] = os.path.join(tmp, 'corral.pid')
        c.servers[0]['access_log'] = os.path.join(tmp, 'access.log')
        c.error_log = os.path.join(tmp, 'error.log')
        self.write(c)
        self.assertEqual(c.check_config().returncode, 0)
        c.start()
        pid = os.path.join(tmp, 'corral.pid')
        self.assertTrue(wait_until(lambda: os.path.exists(pid), 5))
        with open(pid) as f:
            self.assertEqual(int(f.read()), c.master_pid)
        self.assertEqual(os.stat(pid).st_uid, 0)
        # No temporary name is left behind (stats_file follows pid_file).
        self.assertEqual(sorted(os.listdir(tmp)),
                         ['access.log', 'corral.pid', 'corral.stats',
                          'error.log'])
        self.assertEqual(os.stat(os.path.join(tmp, 'access.log')).st_uid,
                         NOBODY.pw_uid)

    # -- log rotation: the link is planted while corral runs

    def test_reopen_after_planted_symlink(self):
        c = self.make()
        victim = self.victim(c)
        logs = self.folder(c, 'logs')
        access = os.path.join(logs, 'access.log')
        error = os.path.join(logs, 'error.log')
        c.servers[0]['access_log'] = access
        c.directives['error_log'] = error
        c.error_log = error
        self.write(c)
        c.start()
        c.write('index.html', b'x')
        self.assertEqual(c.get('/index.html').status, 200)
        # The workers' user (a worker taken over, say) swaps the logs for
        # links, then the logs are rotated.
        for path in (access, error):
            os.rename(path, path + '.1')
            self.plant_symlink(victim, path)
        os.kill(c.master_pid, signal.SIGUSR1)
        self.assertTrue(wait_until(
            lambda: 'symbolic link' in open(error + '.1').read(), 5),
            open(error + '.1').read())
        self.assertEqual(c.get('/index.html').status, 200)
        self.assertUntouched(victim)
