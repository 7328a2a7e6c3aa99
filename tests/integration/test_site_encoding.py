"""
Compressed static answers chosen by Accept-Encoding with q-values:
gzip_static's file.gz and file.br next to the file, and corral's own
brotli and gzip copies made once in the shared store.
"""

import gzip
import os
import time
import unittest

from harness import CorralTestCase, quote
from test_proxy_cache import ProxyCacheCase, seconds_pass

import subprocess


def unbrotli(data):
    """Decodes brotli with Debian's python3-brotli (quickstart installs
    it), from this Python or the system's."""
    try:
        import brotli
        return brotli.decompress(data)
    except ImportError:
        return subprocess.run(
            ['/usr/bin/python3', '-c', 'import sys, brotli; sys.stdout.'
             'buffer.write(brotli.decompress(sys.stdin.buffer.read()))'],
            input=data, capture_output=True, check=True).stdout

TEXT = ('corral serves this text file. ' * 400).encode()


def loc(title, *lines):
    return '  location %s {\n%s\n  }\n' % (
        quote(title), '\n'.join('    ' + l for l in lines))


class GzipStaticTest(CorralTestCase):

    def site(self):
        c = self.make(gzip=False, server={'_raw': loc('/pre/',
                                                      'gzip_static = on')})
        c.write('/pre/app.js', TEXT)
        c.write('/pre/app.js.gz', b'GZ-BYTES')
        c.write('/pre/app.js.br', b'BR-BYTES')
        c.write('/pre/only.css', TEXT)
        c.write('/pre/only.css.gz', b'ONLY-GZ')
        c.write('/pre/old.txt.gz', b'OLD-GZ', mtime=time.time() - 3600)
        c.write('/pre/old.txt', TEXT)
        return c

    def test_chosen_by_q_values(self):
        c = self.site()
        c.start()
        cases = [
            ('gzip, br', 'br', b'BR-BYTES'),
            ('gzip;q=1, br;q=0.5', 'gzip', b'GZ-BYTES'),
            ('br;q=0.2, gzip;q=0.3', 'gzip', b'GZ-BYTES'),
            ('br', 'br', b'BR-BYTES'),
            ('x-gzip', 'gzip', b'GZ-BYTES'),
            ('*', 'br', b'BR-BYTES'),
            ('br;q=0, *;q=0.5', 'gzip', b'GZ-BYTES'),
            ('gzip;q=0, br;q=0', None, TEXT),
            ('identity', None, TEXT),
            ('gzip;q=0.5, identity;q=1', None, TEXT),
            (None, None, TEXT),
        ]
        for ae, enc, body in cases:
            h = ['Accept-Encoding: ' + ae] if ae is not None else []
            r = c.get('/pre/app.js', headers=h)
            self.assertEqual(r.status, 200, ae)
            self.assertEqual(r.header('Content-Encoding'), enc, ae)
            self.assertEqual(r.body, body, ae)
            self.assertIn('javascript', r.header('Content-Type'))
            self.assertEqual(r.header('Vary'), 'Accept-Encoding', ae)

    def test_only_gz_and_not_older(self):
        c = self.site()
        c.start()
        r = c.get('/pre/only.css', headers=['Accept-Encoding: br, gzip'])
        self.assertEqual((r.header('Content-Encoding'), r.body),
                         ('gzip', b'ONLY-GZ'))
        self.assertEqual(r.header('Content-Type').split(';')[0], 'text/css')
        # A .gz older than its file is not used.
        r = c.get('/pre/old.txt', headers=['Accept-Encoding: gzip'])
        self.assertEqual(r.header('Content-Encoding'), None)
        self.assertEqual(r.body, TEXT)

    def test_conditional_on_the_compressed_file(self):
        c = self.site()
        c.start()
        r = c.get('/pre/app.js', headers=['Accept-Encoding: gzip'])
        etag = r.header('ETag')
        r2 = c.get('/pre/app.js', headers=['Accept-Encoding: gzip',
                                            'If-None-Match: ' + etag])
        self.assertEqual(r2.status, 304)
        self.assertNotIn('Content-Encoding', r2.headers)
        plain = c.get('/pre/app.js').header('ETag')
        self.assertNotEqual(plain, etag)


class BrotliCopyTest(CorralTestCase):

    def test_brotli_and_gzip_copies_by_q_values(self):
        c = self.make(gzip=True, brotli=True)
        c.write('/a.html', TEXT)
        c.start()
        r = c.get('/a.html', headers=['Accept-Encoding: gzip, br'])
        self.assertEqual(r.header('Content-Encoding'), 'br')
        self.assertLess(len(r.body), len(TEXT))
        self.assertEqual(unbrotli(r.body), TEXT)
        br_etag = r.header('ETag')
        r = c.get('/a.html', headers=['Accept-Encoding: br;q=0.5, gzip'])
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        self.assertEqual(gzip.decompress(r.body), TEXT)
        self.assertNotEqual(r.header('ETag'), br_etag)
        r = c.get('/a.html', headers=['Accept-Encoding: identity'])
        self.assertEqual((r.header('Content-Encoding'), r.body), (None, TEXT))
        r = c.get('/a.html', headers=['Accept-Encoding: br',
                                      'If-None-Match: ' + br_etag])
        self.assertEqual(r.status, 304)

    def test_brotli_off_keeps_gzip(self):
        c = self.make(gzip=True, brotli=False)
        c.write('/a.html', TEXT)
        c.start()
        r = c.get('/a.html', headers=['Accept-Encoding: br, gzip'])
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        self.assertEqual(gzip.decompress(r.body), TEXT)


class ProxiedCopiesTest(ProxyCacheCase):
    """One brotli and one gzip copy per cached response, made at the
    fill, chosen by the client's q-values."""

    PAGE = b''.join(b'<li>item %d</li>\n' % i for i in range(300))

    def page_origin(self):
        o = self.origin()
        o.script('/api/page', body=self.PAGE, headers=[
            ('Content-Type', 'text/html'), ('ETag', '"p1"'),
            ('Cache-Control', 'max-age=60')])
        return o

    def test_brotli_and_gzip_copies_by_q_values(self):
        o = self.page_origin()
        c = self.start_cache(o, {'purge_allow': '{"127.0.0.1"}'},
                             gzip=True, brotli=True)
        both = [('Accept-Encoding', 'gzip, br')]
        r = self.fetch(c, '/api/page', headers=both)
        self.assertCache(r, 'MISS', self.PAGE)
        self.assertEqual(r.header('Vary'), 'Accept-Encoding')
        for _ in range(2):
            r = self.fetch(c, '/api/page', headers=both)
            self.assertCache(r, 'HIT')
            self.assertEqual(r.header('Content-Encoding'), 'br')
            self.assertEqual(r.header('ETag'), '"p1-br"')
            self.assertEqual(r.header('Vary'), 'Accept-Encoding')
            self.assertEqual(int(r.header('Content-Length')), len(r.body))
            self.assertEqual(unbrotli(r.body), self.PAGE)
        r = self.fetch(c, '/api/page', headers=[
            ('Accept-Encoding', 'br;q=0.5, gzip')])
        self.assertCache(r, 'HIT')
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        self.assertEqual(r.header('ETag'), '"p1-gz"')
        self.assertEqual(gzip.decompress(r.body), self.PAGE)
        r = self.fetch(c, '/api/page', headers=[
            ('Accept-Encoding', 'gzip;q=0, br;q=0.1')])
        self.assertEqual(r.header('Content-Encoding'), 'br')
        r = self.fetch(c, '/api/page', headers=[
            ('Accept-Encoding', 'identity')])
        self.assertCache(r, 'HIT', self.PAGE)
        self.assertIsNone(r.header('Content-Encoding'))
        self.assertEqual(r.header('ETag'), '"p1"')
        r = self.fetch(c, '/api/page', headers=[
            ('Accept-Encoding', 'br'), ('If-None-Match', '"p1-br"')])
        self.assertCache(r, 'HIT', b'', status=304)
        self.assertEqual(r.header('ETag'), '"p1-br"')
        self.assertEqual(o.count('/api/page'), 1)
        # A PURGE drops every copy with the response.
        self.assertEqual(self.fetch(c, '/api/page', method='PURGE').status,
                         200)
        self.assertCache(self.fetch(c, '/api/page', headers=both), 'MISS',
                         self.PAGE)

    def test_copies_renewed_by_revalidation(self):
        o = self.origin()

        def answer(method, h):
            if h.get('if-none-match') == '"r1"':
                return 304, [('ETag', '"r1"'),
                             ('Cache-Control', 'max-age=1')], b''
            return 200, [('Content-Type', 'text/html'), ('ETag', '"r1"'),
                         ('Cache-Control', 'max-age=1')], self.PAGE
        o.script('/api/rv', fn=answer)
        c = self.start_cache(o, gzip=True, brotli=True)
        br, gz = [('Accept-Encoding', 'br')], [('Accept-Encoding', 'gzip')]
        t0 = time.time()
        self.assertCache(self.fetch(c, '/api/rv', headers=br), 'MISS',
                         self.PAGE)
        seconds_pass(2, t0)
        r = self.fetch(c, '/api/rv', headers=br)
        self.assertCache(r, 'EXPIRED')
        self.assertEqual(r.header('Content-Encoding'), 'br')
        self.assertEqual(unbrotli(r.body), self.PAGE)
        # Both copies were renewed with the response by the 304.
        for h, enc in ((br, 'br'), (gz, 'gzip')):
            r = self.fetch(c, '/api/rv', headers=h)
            self.assertCache(r, 'HIT')
            self.assertEqual(r.header('Content-Encoding'), enc)
        self.assertEqual(o.count('/api/rv'), 2)
        self.assertEqual(o.answered_with('/api/rv', 304), 1)

    def test_brotli_alone(self):
        o = self.page_origin()
        c = self.start_cache(o, gzip=False, brotli=True)
        self.fetch(c, '/api/page')
        r = self.fetch(c, '/api/page', headers=[
            ('Accept-Encoding', 'gzip, br')])
        self.assertCache(r, 'HIT')
        self.assertEqual(r.header('Content-Encoding'), 'br')
        self.assertEqual(unbrotli(r.body), self.PAGE)
        r = self.fetch(c, '/api/page', headers=[('Accept-Encoding', 'gzip')])
        self.assertCache(r, 'HIT', self.PAGE)
        self.assertIsNone(r.header('Content-Encoding'))


if __name__ == '__main__':
    unittest.main()
