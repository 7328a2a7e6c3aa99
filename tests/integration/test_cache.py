"""
The shared-memory cache as users see it: static files served from one copy
for all workers, its counters read from outside (corral -s, corralctl
stats), warm restart, and a clear start-up error when the file cannot be
reserved.
"""
import json
import os
import re
import shutil
import subprocess
import unittest

from harness import BIN, CorralTestCase, Raw, read_text, wait_until

CORRALCTL = os.environ.get('CORRALCTL') or os.path.join(
    os.path.dirname(BIN), 'corralctl')


def cache_section(path, **extra):
    sec = {'path': path}
    sec.update({k: Raw(v) for k, v in extra.items()})
    return sec


class CacheTest(CorralTestCase):

    def start_cached(self, cache_extra=None, **kw):
        c = self.make(**kw)
        self.store = os.path.join(c.tmp, 'cache.store')
        c.directives['cache'] = cache_section(self.store,
                                              **(cache_extra or {}))
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        return c

    def test_one_fill_hits_from_both_workers(self):
        # file_cache_max_size 0: every request looks the file up in the
        # store (a smaller file's entry keeps its pin; see below).
        c = self.start_cached(workers=2, log_level='debug',
                              file_cache_max_size=0)
        data = os.urandom(20000)
        c.write('page.bin', data)
        served_by = set()
        for i in range(200):
            mark = c.log_mark()
            r = c.get('/page.bin')
            self.assertBody(r, data)
            m = wait_until(lambda: re.search(r'\] \d+ worker (\d+): accept',
                                             c.log_since(mark)), 5)
            served_by.add(m.group(1))
            if len(served_by) == 2 and i >= 20:
                break
        self.assertEqual(served_by, {'0', '1'}, 'one worker served all')
        st = self.stats(c)
        self.assertEqual(st['sets'], 1, st)
        self.assertEqual(st['items'], 1, st)
        # The first request missed, filled, then read the entry too.
        self.assertEqual(st['misses'], 1, st)
        self.assertEqual(st['hits'], i + 1, st)
        self.assertGreaterEqual(st['bytes_used'], len(data))

    def test_file_at_max_object_served_from_the_file(self):
        # A file kept in the store is an object: its bytes and a header.
        # One that leaves no room for the header is sent from the file
        # every time, not offered to the store each time in vain.
        # (file_copy_max: both are sent from the store, not by sendfile.)
        c = self.start_cached(cache_extra={'max_object': '64k',
                                           'file_copy_max': '64k'},
                              file_cache_max_size=0)
        big, small = os.urandom(64 << 10), os.urandom((64 << 10) - 100)
        c.write('big.bin', big)
        c.write('small.bin', small)
        for _ in range(5):
            self.assertBody(c.get('/big.bin'), big)
            self.assertBody(c.get('/small.bin'), small)
        st = self.stats(c)
        self.assertEqual(st['too_large'], 0, st)
        self.assertEqual(st['sets'], 1, st)
        self.assertEqual(st['hits'], 5, st)

    def test_changed_file_is_a_new_entry(self):
        c = self.start_cached(file_cache_valid=Raw('0s'))
        c.write('page.txt', b'version one\n')
        self.assertBody(c.get('/page.txt'), b'version one\n')
        c.write('page.txt', b'version two, longer\n')
        self.assertBody(c.get('/page.txt'), b'version two, longer\n')
        st = self.stats(c)
        self.assertEqual(st['sets'], 2, st)
        self.assertEqual(st['items'], 1, st)	# the old one was dropped

    def test_entry_keeps_the_pin_of_a_small_file(self):
        # Up to file_cache_max_size the worker's entry keeps its pin on
        # the store's copy: one lookup, then hits cost the store nothing.
        # A changed file lets it go, and the new version is stored.
        # (file_copy_max: big.bin below is sent from the store too.)
        c = self.start_cached(cache_extra={'file_copy_max': '1m'},
                              file_cache_valid=Raw('0s'))
        old, new = os.urandom(3000), os.urandom(3000)
        c.write('small.bin', old)
        for _ in range(5):
            self.assertBody(c.get('/small.bin'), old)
        st = self.stats(c)
        self.assertEqual((st['sets'], st['gets'], st['hits']), (1, 2, 1),
                         st)
        c.write('small.bin', new, mtime=os.stat(
            os.path.join(c.htdocs, 'small.bin')).st_mtime + 5)
        for _ in range(3):
            self.assertBody(c.get('/small.bin'), new)
        st = self.stats(c)
        self.assertEqual((st['sets'], st['items'], st['deletes']),
                         (2, 1, 1), st)
        # Over file_cache_max_size: a lookup per request.
        big = os.urandom(100 << 10)
        c.write('big.bin', big)
        for _ in range(3):
            self.assertBody(c.get('/big.bin'), big)
        st2 = self.stats(c)
        self.assertEqual(st2['hits'] - st['hits'], 3, st2)

    def test_stats_json_and_corralctl(self):
        c = self.start_cached(file_cache_max_size=0)
        c.write('a.txt', b'a' * 100)
        for _ in range(3):
            self.assertEqual(c.get('/a.txt').status, 200)
        out = subprocess.run([BIN, '-s', '-j', '-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        doc = json.loads(out.stdout)
        self.assertEqual(doc['sets'], 1)
        self.assertEqual(doc['hits'], 3)
        if os.access(CORRALCTL, os.X_OK):
            out = subprocess.run([CORRALCTL, '-c', c.conf_path, 'stats'],
                                 capture_output=True, text=True, timeout=10)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn('hits 3\n', out.stdout)
            out = subprocess.run([CORRALCTL, '-c', c.conf_path, 'stats',
                                  '--json'], capture_output=True, text=True,
                                 timeout=10)
            self.assertEqual(json.loads(out.stdout)['items'], 1)

    def test_stats_need_a_file(self):
        c = self.start()
        out = subprocess.run([BIN, '-s', '-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 1)
        self.assertIn('cache.path', out.stderr)

    def test_warm_restart_keeps_contents(self):
        c = self.start_cached(cache_extra={'persist': 'on'})
        c.write('keep.txt', b'kept across restarts\n')
        self.assertEqual(c.get('/keep.txt').status, 200)
        c.stop()
        c.proc = None
        c.returncode = None
        c.start()
        # The port is bound before the cache is opened: wait for the note.
        self.assertTrue(wait_until(
            lambda: 'kept 1 items' in read_text(c.error_log), 5),
            read_text(c.error_log))
        self.assertBody(c.get('/keep.txt'), b'kept across restarts\n')
        st = self.stats(c)
        self.assertEqual(st['sets'], 1, st)	# served from the old mapping
        self.assertGreaterEqual(st['hits'], 1, st)

    def test_size_change_starts_empty_and_says_why(self):
        c = self.start_cached(cache_extra={'persist': 'on'})
        c.write('x.txt', b'x\n')
        self.assertEqual(c.get('/x.txt').status, 200)
        c.stop()
        c.directives['cache'] = cache_section(self.store, persist='on',
                                              size='40m')
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.proc = None
        c.returncode = None
        c.start()
        self.assertTrue(wait_until(lambda: re.search(
            r'\[notice\].*cache .*started empty: .*(size|differ)',
            read_text(c.error_log)), 5), read_text(c.error_log))
        self.assertEqual(self.stats(c)['items'], 0)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which('unshare'),
                         'needs root and unshare to mount a small tmpfs')
    def test_full_filesystem_fails_at_start_and_in_t(self):
        # With persist the file gets a copy of the whole store at each
        # clean stop: there must be room for it.  corral -t says so too.
        c = self.make()
        small = os.path.join(c.tmp, 'small')
        os.mkdir(small)
        c.directives['cache'] = cache_section(
            os.path.join(small, 'cache.store'), size='64m', persist='on')
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        out = {}
        for mode in ('-t', '-f'):
            out[mode] = subprocess.run(
                ['unshare', '-m', 'sh', '-c',
                 'mount -t tmpfs -o size=1m tmpfs "$1" && '
                 'exec "$2" "$4" -c "$3"',
                 'sh', small, BIN, c.conf_path, mode],
                capture_output=True, text=True, timeout=30)
            if 'mount' in out[mode].stderr and out[mode].returncode != 1:
                self.skipTest('cannot mount here: ' + out[mode].stderr)
            self.assertEqual(out[mode].returncode, 1, out[mode].stderr)
            self.assertRegex(out[mode].stderr,
                             r'cache: .*cache.store: no room for the store '
                             r'file: it needs \d+[kmg]?, the filesystem '
                             r'has \d+[kmg]?\n')
        self.assertIn(out['-t'].stderr.strip().split('corral: ')[-1],
                      out['-f'].stderr)


if __name__ == '__main__':
    unittest.main()
