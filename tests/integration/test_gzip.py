"""
gzip for static files, as clients see it: compressed once into the shared
store for all workers, chosen by Accept-Encoding, with its own validator,
Vary on every answer that could have been the other one, and plain bytes
for ranges, small files, other types and files that do not shrink.
"""
import gzip
import os
import re
import subprocess
import threading

from harness import BIN, CorralTestCase, Raw, wait_until

PAGE = b''.join(b'<p>line %d of a page that compresses well</p>\n' % i
                for i in range(400))
GZ = [('Accept-Encoding', 'gzip, deflate, br')]


class GzipTest(CorralTestCase):

    def start_gzip(self, workers=1, **kw):
        c = self.make(workers=workers, gzip=True, **kw)
        c.directives['cache'] = {'path': os.path.join(c.tmp, 'cache.store')}
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        return c

    def assertGzipped(self, r, data):
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.header('Content-Encoding'), 'gzip', r)
        self.assertEqual(r.header('Vary'), 'Accept-Encoding', r)
        self.assertEqual(int(r.header('Content-Length')), len(r.body))
        self.assertLess(len(r.body), len(data))
        self.assertEqual(gzip.decompress(r.body), data)

    def assertPlain(self, r, data, vary=True):
        self.assertBody(r, data)
        self.assertIsNone(r.header('Content-Encoding'), r)
        self.assertEqual(r.header('Vary'),
                         'Accept-Encoding' if vary else None, r)

    def test_compressed_for_clients_that_accept_it(self):
        c = self.start_gzip()
        c.write('page.html', PAGE)
        r = c.get('/page.html', headers=GZ)
        self.assertGzipped(r, PAGE)
        self.assertEqual(r.header('Content-Type'), 'text/html; charset=utf-8')
        gz_etag = r.header('ETag')
        self.assertTrue(gz_etag.endswith('-gz"'), gz_etag)
        for ae in (None, 'identity', 'gzip;q=0', 'deflate, br',
                   '*;q=0.5, gzip;q=0'):
            r = c.get('/page.html',
                      headers=[('Accept-Encoding', ae)] if ae else [])
            self.assertPlain(r, PAGE)
            self.assertNotEqual(r.header('ETag'), gz_etag, ae)
        for ae in ('x-gzip', 'GZIP;q=0.5', '*'):
            self.assertGzipped(
                c.get('/page.html', headers=[('Accept-Encoding', ae)]), PAGE)
        # HEAD states the compressed length and sends nothing.
        r = c.get('/page.html', method='HEAD', headers=GZ)
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        self.assertEqual(r.body, b'')
        self.assertEqual(r.header('Content-Length'),
                         str(len(c.get('/page.html', headers=GZ).body)))

    def test_validators_of_each_representation(self):
        c = self.start_gzip()
        c.write('page.html', PAGE)
        plain_etag = c.get('/page.html').header('ETag')
        gz_etag = c.get('/page.html', headers=GZ).header('ETag')
        r = c.get('/page.html', headers=GZ + [('If-None-Match', gz_etag)])
        self.assertEqual((r.status, r.body), (304, b''))
        self.assertEqual(r.header('ETag'), gz_etag)
        self.assertEqual(r.header('Vary'), 'Accept-Encoding')
        # A 304 does not relabel the copy the client holds.
        self.assertIsNone(r.header('Content-Encoding'))
        self.assertIsNone(r.header('Content-Type'))
        # The plain copy's tag does not match the compressed one.
        self.assertGzipped(c.get('/page.html', headers=GZ + [
            ('If-None-Match', plain_etag)]), PAGE)
        r = c.get('/page.html', headers=[('If-None-Match', plain_etag)])
        self.assertEqual(r.status, 304)
        self.assertEqual(c.get('/page.html', headers=GZ + [
            ('If-Match', '"nope"')]).status, 412)

    def test_plain_when_gzip_does_not_apply(self):
        c = self.start_gzip(gzip_min_length=Raw('1k'))
        c.write('small.html', b'<p>tiny</p>' * 50)            # 550 B
        c.write('photo.png', b'\x89PNG' + b'\0' * 5000)       # not listed
        noise = os.urandom(8000)
        c.write('noise.txt', noise)                           # no gain
        c.write('page.html', PAGE)
        self.assertPlain(c.get('/small.html', headers=GZ),
                         b'<p>tiny</p>' * 50, vary=False)
        self.assertPlain(c.get('/photo.png', headers=GZ),
                         b'\x89PNG' + b'\0' * 5000, vary=False)
        for _ in range(2):      # stored as "never", then looked up
            self.assertPlain(c.get('/noise.txt', headers=GZ), noise)
        # Ranges address the file's own bytes.
        r = c.get('/page.html', headers=GZ + [('Range', 'bytes=0-9')])
        self.assertEqual(r.status, 206)
        self.assertEqual(r.body, PAGE[:10])
        self.assertIsNone(r.header('Content-Encoding'))

    def test_gzip_off_by_default(self):
        c = self.start()
        c.write('page.html', PAGE)
        self.assertPlain(c.get('/page.html', headers=GZ), PAGE, vary=False)

    def test_compressed_once_for_all_workers(self):
        c = self.start_gzip(workers=2, log_level='debug')
        c.write('page.html', PAGE)
        served_by = set()
        out = []

        def get():
            out.append(c.get('/page.html', headers=GZ))
        for _ in range(10):
            ths = [threading.Thread(target=get) for _ in range(8)]
            for th in ths:
                th.start()
            for th in ths:
                th.join(10)
            served_by.update(re.findall(r'\] \d+ worker (\d+): accept',
                                        c.log()))
            if served_by == {'0', '1'}:
                break
        self.assertEqual(served_by, {'0', '1'}, 'one worker served all')
        # A request that finds another worker compressing gets the plain
        # bytes meanwhile; every answer is right either way.
        for r in out:
            if r.header('Content-Encoding') == 'gzip':
                self.assertGzipped(r, PAGE)
            else:
                self.assertPlain(r, PAGE)
        self.assertGzipped(c.get('/page.html', headers=GZ), PAGE)
        st = self.stats(c)
        # One compression, under the store's lease, whatever the workers;
        # the store holds the file and its gzip.
        self.assertEqual(st['lease_grants'], 1, st)
        self.assertEqual(st['items'], 2, st)

    def test_changed_file_compressed_again(self):
        c = self.start_gzip(file_cache_valid=Raw('0'))
        c.write('page.html', PAGE, mtime=1000000000)
        self.assertGzipped(c.get('/page.html', headers=GZ), PAGE)
        other = PAGE.replace(b'line', b'LINE')
        c.write('page.html', other, mtime=1000000100)
        r = wait_until(lambda: (lambda r: r if r.header('Content-Encoding')
                                and gzip.decompress(r.body) == other
                                else None)(c.get('/page.html', headers=GZ)),
                       5)
        self.assertTrue(r, 'the old compressed copy is still served')

    def test_config_errors_name_the_line(self):
        c = self.make()
        for bad in ('gzip_comp_level = 10', 'gzip_types = {"html"}',
                    'gzip_min_length = -1'):
            text = c.config_text() + bad + '\n'
            with open(c.conf_path, 'w') as f:
                f.write(text)
            out = subprocess.run([BIN, '-t', '-c', c.conf_path],
                                 capture_output=True, text=True, timeout=10)
            self.assertNotEqual(out.returncode, 0, bad)
            line = text.count('\n')
            self.assertIn('%s:%d' % (c.conf_path, line), out.stderr, bad)
