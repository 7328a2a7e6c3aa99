"""Conditional requests (RFC 9110 section 13)."""

import time

from harness import CorralTestCase, build_request, http_date

DATA = b'conditional body\n' * 10


class ConditionalTest(CorralTestCase):

    def setUp(self):
        self.c = self.start()
        self.mtime = int(time.time()) - 3600
        self.c.write('page.txt', DATA, mtime=self.mtime)
        r = self.c.get('/page.txt')
        self.assertBody(r, DATA)
        self.etag = r.header('ETag')
        self.lm = r.header('Last-Modified')
        self.assertEqual(self.lm, http_date(self.mtime))

    def cond(self, *fields, method='GET'):
        return self.c.get('/page.txt', method=method, headers=list(fields))

    def assertNotModified(self, r):
        self.assertEqual(r.status, 304, r)
        self.assertEqual(r.body, b'')
        self.assertEqual(r.header('ETag'), self.etag)
        self.assertIn('Date', r.headers)
        self.assertNotIn('Content-Range', r.headers)

    def test_if_none_match_etag(self):
        self.assertNotModified(self.cond('If-None-Match: ' + self.etag))

    def test_if_none_match_list_star_and_weak(self):
        self.assertNotModified(self.cond(
            'If-None-Match: "nope", %s, "other"' % self.etag))
        self.assertNotModified(self.cond('If-None-Match: *'))
        # If-None-Match uses the weak comparison.
        self.assertNotModified(self.cond('If-None-Match: W/' + self.etag))

    def test_if_none_match_mismatch(self):
        self.assertBody(self.cond('If-None-Match: "nope"'), DATA)

    def test_304_then_next_request(self):
        with self.c.connect() as conn:
            conn.send(build_request('/page.txt', headers=[
                'If-None-Match: ' + self.etag]) + build_request('/page.txt'))
            self.assertNotModified(conn.read_response())
            self.assertBody(conn.read_response(), DATA)

    def test_head_if_none_match(self):
        self.assertNotModified(self.cond('If-None-Match: ' + self.etag,
                                         method='HEAD'))

    def test_if_modified_since_equal(self):
        self.assertNotModified(self.cond('If-Modified-Since: ' + self.lm))

    def test_if_modified_since_later(self):
        self.assertNotModified(self.cond(
            'If-Modified-Since: ' + http_date(self.mtime + 60)))

    def test_if_modified_since_earlier(self):
        self.assertBody(self.cond(
            'If-Modified-Since: ' + http_date(self.mtime - 1)), DATA)

    def test_if_modified_since_other_formats(self):
        t = time.gmtime(self.mtime)
        rfc850 = time.strftime('%A, %d-%b-%y %H:%M:%S GMT', t)
        asctime = time.strftime('%a %b ', t) + '%2d' % t.tm_mday + \
            time.strftime(' %H:%M:%S %Y', t)
        self.assertNotModified(self.cond('If-Modified-Since: ' + rfc850))
        self.assertNotModified(self.cond('If-Modified-Since: ' + asctime))

    def test_if_modified_since_invalid_ignored(self):
        self.assertBody(self.cond('If-Modified-Since: yesterday'), DATA)

    def test_if_none_match_wins_over_if_modified_since(self):
        # A non-matching tag: IMS must be ignored although it would be 304.
        self.assertBody(self.cond('If-None-Match: "nope"',
                                  'If-Modified-Since: ' + self.lm), DATA)
        # A matching tag with an old IMS: still 304.
        self.assertNotModified(self.cond(
            'If-None-Match: ' + self.etag,
            'If-Modified-Since: ' + http_date(self.mtime - 86400)))

    def test_if_match(self):
        self.assertBody(self.cond('If-Match: ' + self.etag), DATA)
        self.assertBody(self.cond('If-Match: *'), DATA)
        r = self.cond('If-Match: "nope"')
        self.assertEqual(r.status, 412, r)
        self.assertEqual(r.header('Content-Length'), str(len(r.body)))
        # If-Match uses the strong comparison.
        self.assertEqual(self.cond('If-Match: W/' + self.etag).status, 412)

    def test_if_unmodified_since(self):
        r = self.cond('If-Unmodified-Since: ' + http_date(self.mtime - 60))
        self.assertEqual(r.status, 412, r)
        self.assertBody(self.cond('If-Unmodified-Since: ' + self.lm), DATA)
        self.assertBody(self.cond('If-Unmodified-Since: ' +
                                  http_date(time.time() + 3600)), DATA)

    def test_if_match_wins_over_if_unmodified_since(self):
        self.assertBody(self.cond('If-Match: ' + self.etag,
                                  'If-Unmodified-Since: ' +
                                  http_date(self.mtime - 60)), DATA)

    def test_412_before_304(self):
        r = self.cond('If-Match: "nope"', 'If-None-Match: ' + self.etag)
        self.assertEqual(r.status, 412, r)

    def test_conditional_with_range(self):
        r = self.cond('If-None-Match: ' + self.etag, 'Range: bytes=0-3')
        self.assertNotModified(r)
        r = self.cond('If-None-Match: "nope"', 'Range: bytes=0-3')
        self.assertBody(r, DATA[:4], 206)
