"""
corral -t and start agree: configs generated from a grid of good and bad
choices (users, log files and their folders, pid file folders, listen
addresses, the cache file, MIME types) either pass -t and start, or fail
both with the same "FILE:LINE: why".  (The harness checks the same for
every config the rest of the suite starts.)

CORRAL_PARITY_SEED reruns one sequence; CORRAL_PARITY_N sets how many.
"""

import os
import pwd
import random
import re
import signal
import socket
import subprocess
import time

from harness import (BIN, Corral, CorralTestCase, Raw, free_port, quote,
                     wait_until)

NOBODY = pwd.getpwnam('nobody')


def listening(port):
    try:
        socket.create_connection(('127.0.0.1', port), timeout=1).close()
        return True
    except OSError:
        return False


class Grid:
    """Builds one config's files and directives from random choices."""

    def __init__(self, c, rng):
        self.c = c
        self.rng = rng
        self.n = 0

    def folder(self, kind):
        """A folder of kind: private (root's), workers' (nobody's),
        world (0777, not sticky), sticky (1777) or missing."""
        self.n += 1
        path = os.path.join(self.c.tmp, '%s%d' % (kind, self.n))
        if kind == 'missing':
            return path
        os.mkdir(path)
        if kind == 'workers' and os.geteuid() == 0:
            os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
        os.chmod(path, {'private': 0o755, 'workers': 0o755,
                        'world': 0o777, 'sticky': 0o1777}[kind])
        return path

    def file(self, name, how):
        """A path for a file, planted as how says."""
        kind, _, plant = how.partition('+')
        path = os.path.join(self.folder(kind), name)
        if plant == 'symlink':
            os.symlink(os.path.join(self.c.tmp, 'victim'), path)
            if os.geteuid() == 0:
                os.lchown(path, NOBODY.pw_uid, NOBODY.pw_gid)
        elif plant == 'hardlink':
            os.link(os.path.join(self.c.tmp, 'victim'), path)
        return path

    def choose(self):
        rng, d = self.rng, {}
        with open(os.path.join(self.c.tmp, 'victim'), 'w') as f:
            f.write('precious\n')
        good = ['private', 'sticky', 'workers', 'stderr']
        bad = ['missing', 'world', 'workers+symlink', 'workers+hardlink',
               'private+symlink']
        pick = rng.choice(good) if rng.random() < 0.8 else rng.choice(bad)
        if pick != 'stderr':
            d['error_log'] = self.file('error.log', pick)
        else:
            d['error_log'] = 'stderr'
        pick = rng.choice(['off', 'private', 'sticky']) \
            if rng.random() < 0.85 else \
            rng.choice(['workers', 'missing', 'world'])
        d['pid_file'] = 'off' if pick == 'off' else \
            self.file('corral.pid', pick)
        d['user'] = rng.choice([None, None, 'nobody', 'daemon',
                                'nobody', 'no-such-user'])
        if d['user'] is not None:
            d['group'] = rng.choice([None, None, None, 'nogroup',
                                     'nogroup', 'no-such-group'])
        d['listen'] = ['127.0.0.1:%d' % self.c.port]
        if rng.random() < 0.1:
            d['listen'].append('10.255.255.1:%d' % self.c.port)
        pick = rng.choice(['private', 'off', 'workers']) \
            if rng.random() < 0.85 else \
            rng.choice(['workers+symlink', 'missing'])
        self.access = 'off' if pick == 'off' else \
            self.file('access.log', pick)
        pick = rng.choice(['none', 'private']) if rng.random() < 0.85 \
            else rng.choice(['workers+symlink', 'missing'])
        if pick != 'none':
            d['cache'] = {'path': self.file('store', pick),
                          'size': Raw('4m'), 'stripes': 4,
                          'max_object': Raw('64k')}
        if rng.random() < 0.1:
            d['mime_types'] = os.path.join(self.c.tmp, 'no-such.types')
        return d


class ParityTest(CorralTestCase):

    def one(self, seed):
        rng = random.Random(seed)
        c = Corral()
        self.addCleanup(c.remove)
        grid = Grid(c, rng)
        d = grid.choose()
        c.directives.update(d)
        c.servers[0]['access_log'] = grid.access
        c.error_log = d['error_log']
        text = c.config_text()
        with open(c.conf_path, 'w') as f:
            f.write(text)

        t = c.check_config()
        p = subprocess.Popen([BIN, '-f', '-c', c.conf_path],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             cwd=c.tmp, start_new_session=True)
        up = wait_until(lambda: p.poll() is not None or
                        listening(c.port), 10)
        started = up and p.poll() is None
        if started:
            os.killpg(p.pid, signal.SIGTERM)
        try:
            _, err = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate()
        what = 'seed %d:\n%s\n-t: %s\nstart: %s' % (seed, text, t.stderr,
                                                     err[-2000:])
        if t.returncode == 0:
            self.assertTrue(started, '-t accepted, start refused; ' + what)
        else:
            self.assertFalse(started, '-t refused, start worked; ' + what)
            said = [l for l in t.stderr.splitlines()
                    if not l.startswith('corral: warning: ')]
            m = re.match(r'^corral: (%s(:\d+)?: .*)$' %
                         re.escape(c.conf_path), said[0] if said else '')
            self.assertTrue(m, 'no FILE:LINE in -t: ' + what)
            self.assertIn(m.group(1), err, 'start said something else; ' +
                          what)
        with open(os.path.join(c.tmp, 'victim')) as f:
            self.assertEqual(f.read(), 'precious\n', what)
        return started

    def test_generated_configs_agree(self):
        seed0 = int(os.environ.get('CORRAL_PARITY_SEED',
                                   random.SystemRandom().randrange(1 << 30)))
        n = int(os.environ.get('CORRAL_PARITY_N', '40'))
        starts = 0
        for i in range(n):
            with self.subTest(seed=seed0 + i):
                starts += bool(self.one(seed0 + i))
        print('\nparity: %d configs from seed %d, %d started, %d refused'
              % (n, seed0, starts, n - starts))
