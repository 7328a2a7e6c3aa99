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


if __name__ == '__main__':
    unittest.main()
