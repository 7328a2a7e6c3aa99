"""Range requests (RFC 9110 section 14)."""

import os
import time

from harness import CorralTestCase, build_request, http_date, parse_byteranges

DATA = bytes(range(48, 123)) * 3	# 225 printable bytes
SIZE = len(DATA)


class RangeTest(CorralTestCase):

    def setUp(self):
        self.c = self.start()
        self.c.write('data.txt', DATA)

    def range(self, spec, path='/data.txt', extra=(), method='GET'):
        return self.c.get(path, method=method,
                          headers=['Range: ' + spec] + list(extra))

    def assertPartial(self, r, first, last, data=DATA):
        self.assertEqual(r.status, 206, r)
        self.assertEqual(r.header('Content-Range'),
                         'bytes %d-%d/%d' % (first, last, len(data)))
        self.assertBody(r, data[first:last + 1], 206)

    def assertWhole(self, r, data=DATA):
        self.assertBody(r, data, 200)
        self.assertNotIn('Content-Range', r.headers)

    def test_first_bytes(self):
        r = self.range('bytes=0-9')
        self.assertPartial(r, 0, 9)
        self.assertEqual(r.header('Content-Type'),
                         'text/plain; charset=utf-8')
        self.assertIn('ETag', r.headers)
        self.assertIn('Last-Modified', r.headers)

    def test_middle_and_single_byte(self):
        self.assertPartial(self.range('bytes=100-149'), 100, 149)
        self.assertPartial(self.range('bytes=7-7'), 7, 7)
        self.assertPartial(self.range('bytes=%d-%d' % (SIZE - 1, SIZE - 1)),
                           SIZE - 1, SIZE - 1)

    def test_suffix(self):
        self.assertPartial(self.range('bytes=-5'), SIZE - 5, SIZE - 1)

    def test_suffix_longer_than_file(self):
        self.assertPartial(self.range('bytes=-100000'), 0, SIZE - 1)

    def test_open_ended(self):
        self.assertPartial(self.range('bytes=5-'), 5, SIZE - 1)

    def test_last_clipped_to_size(self):
        self.assertPartial(self.range('bytes=200-999999'), 200, SIZE - 1)

    def test_head_range(self):
        r = self.range('bytes=0-9', method='HEAD')
        self.assertEqual(r.status, 206)
        self.assertEqual(r.header('Content-Length'), '10')
        self.assertEqual(r.header('Content-Range'), 'bytes 0-9/%d' % SIZE)

    def test_multiple_ranges(self):
        r = self.range('bytes=0-1,5-6')
        self.assertEqual(r.status, 206, r)
        self.assertNotIn('Content-Range', r.headers)
        self.assertEqual(r.header('Content-Length'), str(len(r.body)))
        parts = parse_byteranges(r)
        self.assertEqual(len(parts), 2)
        for (h, body), (a, b) in zip(parts, [(0, 1), (5, 6)]):
            self.assertEqual(h.get('Content-Type'),
                             'text/plain; charset=utf-8')
            self.assertEqual(h.get('Content-Range'),
                             'bytes %d-%d/%d' % (a, b, SIZE))
            self.assertEqual(body, DATA[a:b + 1])

    def test_multiple_ranges_with_suffix_and_open(self):
        r = self.range('bytes=10-19, 100-, -3')
        # 100- and -3 overlap: whole body.
        self.assertWhole(r)
        r = self.range('bytes=10-19,-3')
        parts = parse_byteranges(r)
        self.assertEqual([p[1] for p in parts], [DATA[10:20], DATA[-3:]])
        self.assertEqual([p[0].get('Content-Range') for p in parts],
                         ['bytes 10-19/%d' % SIZE,
                          'bytes %d-%d/%d' % (SIZE - 3, SIZE - 1, SIZE)])

    def test_multipart_then_next_request(self):
        """The multipart Content-Length must be exact for keep-alive."""
        with self.c.connect() as conn:
            conn.send(build_request('/data.txt',
                                    headers=['Range: bytes=0-1,5-6,9-20']) +
                      build_request('/data.txt'))
            r = conn.read_response()
            self.assertEqual(len(parse_byteranges(r)), 3)
            self.assertWhole(conn.read_response())

    def test_unsatisfiable(self):
        for spec in ('bytes=999999-', 'bytes=%d-' % SIZE,
                     'bytes=%d-%d' % (SIZE, SIZE + 10)):
            with self.subTest(spec=spec):
                r = self.range(spec)
                self.assertEqual(r.status, 416, r)
                self.assertEqual(r.header('Content-Range'),
                                 'bytes */%d' % SIZE)
                self.assertEqual(r.header('Content-Length'),
                                 str(len(r.body)))

    def test_unsatisfiable_keeps_connection(self):
        with self.c.connect() as conn:
            conn.send(build_request('/data.txt',
                                    headers=['Range: bytes=999999-']) +
                      build_request('/data.txt'))
            self.assertEqual(conn.read_response().status, 416)
            self.assertWhole(conn.read_response())

    def test_empty_file_unsatisfiable(self):
        self.c.write('empty.txt', b'')
        r = self.range('bytes=0-0', path='/empty.txt')
        self.assertEqual(r.status, 416, r)
        self.assertEqual(r.header('Content-Range'), 'bytes */0')

    def test_overlapping_ranges_whole(self):
        self.assertWhole(self.range('bytes=0-5,3-8'))
        self.assertWhole(self.range('bytes=0-5,5-8'))

    def test_too_many_ranges_whole(self):
        spec = 'bytes=' + ','.join('%d-%d' % (i * 10, i * 10 + 1)
                                   for i in range(17))
        self.assertWhole(self.range(spec))
        spec = 'bytes=' + ','.join('%d-%d' % (i * 10, i * 10 + 1)
                                   for i in range(16))
        self.assertEqual(len(parse_byteranges(self.range(spec))), 16)

    def test_invalid_range_ignored(self):
        for spec in ('bytes=abc', 'items=0-1', 'bytes=5-2', 'bytes=',
                     'bytes=--1', 'bytes 0-1'):
            with self.subTest(spec=spec):
                self.assertWhole(self.range(spec))

    def test_if_range_etag(self):
        etag = self.c.get('/data.txt').header('ETag')
        self.assertPartial(self.range('bytes=0-9', extra=['If-Range: ' +
                                                          etag]), 0, 9)
        self.assertWhole(self.range('bytes=0-9',
                                    extra=['If-Range: "old-etag"']))
        self.assertWhole(self.range('bytes=0-9',
                                    extra=['If-Range: W/' + etag]))

    def test_if_range_date(self):
        t = int(time.time()) - 3600
        self.c.write('old.txt', DATA, mtime=t)
        self.assertPartial(self.range('bytes=0-9', path='/old.txt',
                                      extra=['If-Range: ' + http_date(t)]),
                           0, 9)
        self.assertWhole(self.range('bytes=0-9', path='/old.txt',
                                    extra=['If-Range: ' +
                                           http_date(t - 60)]))

    def test_range_ignored_for_error(self):
        r = self.range('bytes=0-1', path='/missing')
        self.assertEqual(r.status, 404)


class LargeRangeTest(CorralTestCase):

    def check(self, sendfile):
        c = self.start(sendfile=sendfile)
        data = os.urandom(3 * 1024 * 1024)
        c.write('big.bin', data)
        with c.connect(timeout=20) as conn:
            conn.send(build_request('/big.bin', headers=[
                'Range: bytes=1000000-1999999']) +
                build_request('/big.bin', headers=['Range: bytes=-70000']) +
                build_request('/big.bin', headers=[
                    'Range: bytes=0-99,2000000-2100000']))
            r = conn.read_response()
            self.assertEqual(r.header('Content-Range'),
                             'bytes 1000000-1999999/%d' % len(data))
            self.assertBody(r, data[1000000:2000000], 206)
            r = conn.read_response()
            self.assertBody(r, data[-70000:], 206)
            parts = parse_byteranges(conn.read_response())
            self.assertEqual([p[1] for p in parts],
                             [data[:100], data[2000000:2100001]])

    def test_range_sendfile(self):
        self.check(True)

    def test_range_no_sendfile(self):
        self.check(False)

    def test_max_ranges_setting(self):
        c = self.start(max_ranges=2)
        c.write('data.txt', DATA)
        r = c.get('/data.txt', headers=['Range: bytes=0-1,4-5'])
        self.assertEqual(r.status, 206)
        r = c.get('/data.txt', headers=['Range: bytes=0-1,4-5,8-9'])
        self.assertBody(r, DATA, 200)
