"""
The shared store against faults from outside (issue 14) and its layout
as corral -t sees it:

- the store file truncated or removed while the server runs: nothing is
  harmed, the master says so in the log, corral -s works again;
- bytes of a persisted store flipped between runs: no worker dies at
  start, no damaged value is ever served, the damage is counted;
- corral -t and the start agree on every cache section, generated at
  random (issue 13: 64m with 64 stripes was refused at start only).
"""
import os
import random
import re
import socket
import subprocess

from harness import BIN, CorralTestCase, Raw, read_text, wait_until


def cache_section(path, **extra):
    sec = {'path': path} if path else {}
    sec.update({k: Raw(v) for k, v in extra.items()})
    return sec


class StoreFileTest(CorralTestCase):

    def start_cached(self, persist=True, **kw):
        c = self.make(**kw)
        self.store = os.path.join(c.tmp, 'cache.store')
        c.directives['cache'] = cache_section(
            self.store, size='16m', persist='on' if persist else 'off')
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        return c

    def files(self, c, n=40):
        """n static files, each served once (so stored) and returned."""
        rng = random.Random(7)
        out = {}
        for i in range(n):
            data = bytes(rng.getrandbits(8) for _ in range(
                200 + rng.randrange(30000)))
            c.write('f%d.bin' % i, data)
            out['/f%d.bin' % i] = data
        for path, data in out.items():
            self.assertBody(c.get(path), data)
        return out

    def restart(self, c):
        c.stop()
        c.proc = None
        c.returncode = None
        c.start()

    def test_truncated_while_running(self):
        c = self.start_cached(workers=2)
        files = self.files(c)
        sets = self.stats(c)['sets']
        mark = c.log_mark()
        with open(self.store, 'r+b') as f:
            f.truncate(0)
        # Nothing is served differently, nothing dies, nothing refills.
        for path, data in files.items():
            self.assertBody(c.get(path), data)
        self.assertTrue(c.wait_log(
            r'\[warn\].*cache: .*cache.store was cut to 0 bytes while '
            r'corral runs; the store is in memory and unharmed, and the '
            r'file was made whole again', mark=mark), c.log())
        st = self.stats(c)
        self.assertEqual(st['sets'], sets, st)
        self.assertGreaterEqual(st['hits'], len(files), st)
        # The stop writes the copy as usual: a restart keeps it.
        self.restart(c)
        self.assertTrue(wait_until(
            lambda: 'kept %d items' % len(files) in read_text(c.error_log),
            5), c.log())
        for path, data in files.items():
            self.assertBody(c.get(path), data)
        self.assertEqual(self.stats(c)['sets'], sets)

    def test_removed_while_running(self):
        c = self.start_cached()
        files = self.files(c, 5)
        mark = c.log_mark()
        os.unlink(self.store)
        for path, data in files.items():
            self.assertBody(c.get(path), data)
        self.assertTrue(c.wait_log(
            r'\[warn\].*cache\.store was removed while corral runs; the '
            r'store is in memory and unharmed', mark=mark), c.log())
        # Said once, not every second.
        self.assertEqual(len(re.findall('was removed', c.log())), 1)

    def test_flipped_bytes_between_runs(self):
        c = self.start_cached(workers=2)
        files = self.files(c, 60)
        # One value damaged for sure (a byte in the middle of f7's body),
        # then bytes anywhere.
        c.stop()
        c.proc = None
        c.returncode = None
        with open(self.store, 'r+b') as f:
            image = f.read()
            marker = files['/f7.bin'][:64]
            at = image.find(marker)
            self.assertGreater(at, 0)
            f.seek(at + 32)
            f.write(bytes([image[at + 32] ^ 0x40]))
            rng = random.Random(11)
            for _ in range(200):
                off = rng.randrange(len(image))
                f.seek(off)
                f.write(bytes([image[off] ^ (1 << rng.randrange(8))]))
        c.start()
        self.assertTrue(wait_until(
            lambda: re.search(r'cache .*: (kept \d+ items; \d+ damaged '
                              r'dropped|started empty)',
                              read_text(c.error_log)), 5), c.log())
        # Every body is the file's, byte for byte: a damaged copy is
        # never served, it is dropped and the file read again.
        for _ in range(2):
            for path, data in files.items():
                self.assertBody(c.get(path), data)
        m = re.search(r'kept (\d+) items; (\d+) damaged dropped', c.log())
        if m:
            self.assertGreaterEqual(int(m.group(2)), 1, c.log())
            self.assertGreaterEqual(self.stats(c)['corruptions'], 1)
        # No worker died at start (stop() checks the log too).
        self.assertNotRegex(c.log(), r'killed by signal|exited with code')


class TestAgreesWithStartTest(CorralTestCase):
    """Whatever corral -t accepts starts, whatever it refuses does not
    start, with the same words: a property test over cache sections."""

    SIZES = ['0', '64k', '1m', '2m', '3m', '4m', '8m', '16m', '64m', '100m',
             '1g', '2000g', '64g']
    STRIPES = ['1', '2', '3', '4', '16', '64', '256', '1024', '4096']
    MAX_OBJECTS = ['1', '1k', '100k', '512k', '1m', '2m', '16m', '1g']

    def one(self, rng, i):
        c = self.make(workers=rng.choice([1, 2, 4]))
        cache = {'size': Raw(rng.choice(self.SIZES)),
                 'stripes': Raw(rng.choice(self.STRIPES)),
                 'max_object': Raw(rng.choice(self.MAX_OBJECTS))}
        where = rng.choice(['none', 'file', 'file', 'missing', 'notdir'])
        if where == 'file':
            cache['path'] = os.path.join(c.tmp, 'store%d' % i)
            # A persisted store is written to disk whole at the stop.
            cache['persist'] = rng.choice([True, False]) and \
                cache['size'] in ('64k', '1m', '2m', '3m', '4m', '8m')
        elif where == 'missing':
            cache['path'] = os.path.join(c.tmp, 'no', 'such', 'dir', 'x')
        elif where == 'notdir':
            plain = os.path.join(c.tmp, 'plain')
            open(plain, 'w').close()
            cache['path'] = os.path.join(plain, 'x')
        c.directives['cache'] = cache
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        t = c.check_config()
        start = subprocess.Popen([BIN, '-f', '-c', c.conf_path],
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 start_new_session=True, cwd=c.tmp)
        def answers():
            # The sockets are bound before the store is made: only an
            # answer says the server runs.
            try:
                with socket.create_connection(('127.0.0.1', c.port),
                                              timeout=5) as sk:
                    sk.sendall(b'GET / HTTP/1.0\r\n\r\n')
                    return sk.recv(16).startswith(b'HTTP/1.1 ')
            except OSError:
                return False

        started = bool(wait_until(
            lambda: start.poll() is not None or answers(), 20)) and \
            start.poll() is None
        if start.poll() is None:
            os.killpg(start.pid, 15)
        try:
            out, err = start.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(start.pid, 9)
            out, err = start.communicate()
        what = '%s\n-t: %d %s\nstart: %s %s' % (
            c.config_text(), t.returncode, t.stderr.strip(), started,
            err.strip()[-600:])
        self.assertEqual(t.returncode == 0, started, what)
        if not started:
            # The start says what -t said.
            why = t.stderr.strip().split('corral: ', 1)[-1]
            self.assertIn(why, err, what)
        return started

    def test_t_and_start_agree(self):
        seed = int(os.environ.get('CORRAL_PROPERTY_SEED', '0')) or \
            random.randrange(1 << 30)
        rng = random.Random(seed)
        results = []
        for i in range(30):
            with self.subTest(seed=seed, case=i):
                results.append(self.one(rng, i))
        # Both outcomes were tried.
        self.assertIn(True, results, 'seed %d' % seed)
        self.assertIn(False, results, 'seed %d' % seed)

    def test_issue_13_case(self):
        # 64m with 64 stripes: -t said OK, the start refused.
        c = self.make()
        c.directives['cache'] = {'size': Raw('64m'), 'stripes': 64}
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        self.assertEqual(c.check_config().returncode, 0)
        c.write('index.html', b'up\n')
        c.start()
        self.assertBody(c.get('/'), b'up\n')
