"""
Malformed, ambiguous and hostile requests.  Each one must get its status
with Connection: close, the server must close after it and answer nothing
pipelined behind it, log it at info (never error or crit), and keep serving
new connections.
"""

import os
import re
import socket
import struct

from harness import CorralTestCase, build_request, parse_responses

INDEX = b'<html>index</html>\n'
GOOD = build_request('/index.html')
H = b'Host: localhost\r\n'


def req(line, *fields, body=b''):
    """A request from a request line and raw field lines (bytes)."""
    return line + b'\r\n' + b''.join(f + b'\r\n' for f in fields) + \
        b'\r\n' + body


def get(*fields, body=b''):
    return req(b'GET /index.html HTTP/1.1', b'Host: localhost', *fields,
               body=body)


# name: (request bytes, expected status or statuses)
CASES = {
    # Line endings and field syntax.
    'bare_lf': (b'GET /index.html HTTP/1.1\nHost: localhost\n\n', 400),
    'bare_lf_in_fields': (b'GET /index.html HTTP/1.1\r\nHost: localhost\n'
                          b'X-A: b\r\n\r\n', 400),
    'bare_cr': (b'GET /index.html HTTP/1.1\r\nHost: localhost\rX-A: b'
                b'\r\n\r\n', 400),
    'bare_cr_in_request_line': (b'GET /index.html\rHTTP/1.1\r\n' + H +
                                b'\r\n', 400),
    'obs_fold': (get(b'X-A: a', b' b'), 400),
    'obs_fold_tab': (get(b'X-A: a', b'\tb'), 400),
    'whitespace_before_first_field': (
        req(b'GET /index.html HTTP/1.1', b' X-A: b', b'Host: localhost'),
        400),
    'space_before_colon': (get(b'X-A : b'), 400),
    'space_before_colon_host': (
        req(b'GET /index.html HTTP/1.1', b'Host : localhost'), 400),
    'space_in_field_name': (get(b'X A: b'), 400),
    'empty_field_name': (get(b': b'), 400),
    'field_without_colon': (get(b'X-A b'), 400),
    'control_byte_in_value': (get(b'X-A: a\x01b'), 400),
    'del_in_value': (get(b'X-A: a\x7fb'), 400),
    'nul_in_value': (get(b'X-A: a\x00b'), 400),
    'nul_in_field_name': (get(b'X-\x00A: b'), 400),

    # Request line.
    'nul_in_target': (req(b'GET /ind\x00ex.html HTTP/1.1', H[:-2]), 400),
    'control_in_target': (req(b'GET /index\x01.html HTTP/1.1', H[:-2]), 400),
    'space_in_target': (req(b'GET /index .html HTTP/1.1', H[:-2]), 400),
    'double_space': (req(b'GET  /index.html HTTP/1.1', H[:-2]), 400),
    'trailing_space': (req(b'GET /index.html HTTP/1.1 ', H[:-2]), 400),
    'tab_separator': (req(b'GET\t/index.html HTTP/1.1', H[:-2]), 400),
    'bad_method_char': (req(b'GE(T /index.html HTTP/1.1', H[:-2]), 400),
    'relative_target': (req(b'GET index.html HTTP/1.1', H[:-2]), 400),
    'fragment': (req(b'GET /index.html#top HTTP/1.1', H[:-2]), 400),
    'http2_version': (req(b'GET /index.html HTTP/2.0', H[:-2]), 505),
    'http_version_suffix': (req(b'GET /index.html HTTP/1.1x', H[:-2]), 400),
    'http_version_short': (req(b'GET /index.html HTTP/1', H[:-2]), 400),
    'http_version_lowercase': (req(b'GET /index.html http/1.1', H[:-2]),
                               400),
    'missing_version': (b'GET /index.html\r\n\r\n', 400),
    'request_line_too_long': (
        req(b'GET /' + b'a' * 9000 + b' HTTP/1.1', H[:-2]), 414),

    # Host.
    'missing_host': (req(b'GET /index.html HTTP/1.1', b'X-A: b'), 400),
    'two_hosts': (get(b'Host: localhost'), 400),
    'two_different_hosts': (get(b'Host: other.test'), 400),
    'bad_host_slash': (req(b'GET /index.html HTTP/1.1', b'Host: bad/host'),
                       400),
    'bad_host_space': (req(b'GET /index.html HTTP/1.1', b'Host: a b'), 400),

    # Message framing.
    'cl_and_te': (get(b'Content-Length: 5', b'Transfer-Encoding: chunked',
                      body=b'0\r\n\r\n'), 400),
    'two_content_lengths': (get(b'Content-Length: 5', b'Content-Length: 6',
                                body=b'hello!'), 400),
    'content_length_list': (get(b'Content-Length: 5, 6', body=b'hello!'),
                            400),
    'content_length_negative': (get(b'Content-Length: -1'), 400),
    'content_length_plus': (get(b'Content-Length: +5', body=b'hello'), 400),
    'content_length_hex': (get(b'Content-Length: 0x10'), 400),
    'content_length_overflow': (
        get(b'Content-Length: 99999999999999999999999'), 400),
    'content_length_empty': (get(b'Content-Length: '), 400),
    'content_length_inner_space': (get(b'Content-Length: 1 0'), 400),
    'te_gzip': (get(b'Transfer-Encoding: gzip'), 501),
    'te_chunked_not_last': (get(b'Transfer-Encoding: chunked, gzip',
                                body=b'0\r\n\r\n'), (400, 501)),
    'bad_chunk_size': (get(b'Transfer-Encoding: chunked',
                           body=b'zz\r\nhello\r\n0\r\n\r\n'), 400),
    'chunk_size_overflow': (get(b'Transfer-Encoding: chunked',
                                body=b'fffffffffffffffffffff\r\nx\r\n'
                                b'0\r\n\r\n'), 400),
    'chunk_without_crlf': (get(b'Transfer-Encoding: chunked',
                               body=b'5\r\nhelloXX0\r\n\r\n'), 400),
    'http10_transfer_encoding': (
        req(b'GET /index.html HTTP/1.0', b'Transfer-Encoding: chunked',
            body=b'0\r\n\r\n'), 400),

    # Size limits.
    'header_block_too_large': (
        get(*[b'X-Pad-%d: %s' % (i, b'v' * 1000) for i in range(40)]), 431),
    'one_huge_field': (get(b'X-Big: ' + b'v' * 40000), 431),
    'too_many_fields': (get(*[b'X-N%d: v' % i for i in range(150)]), 431),

    # Paths that try to leave the root or smuggle bytes.
    'dotdot': (req(b'GET /../etc/passwd HTTP/1.1', H[:-2]), 400),
    'dotdot_deep': (req(b'GET /a/../../etc/passwd HTTP/1.1', H[:-2]), 400),
    'encoded_dotdot': (req(b'GET /%2e%2e/ HTTP/1.1', H[:-2]), 400),
    'encoded_dotdot_upper': (req(b'GET /%2E%2E/etc/passwd HTTP/1.1',
                                 H[:-2]), 400),
    'encoded_slash_dotdot': (req(b'GET /..%2f..%2fetc/passwd HTTP/1.1',
                                 H[:-2]), 400),
    'all_encoded': (req(b'GET /%2e%2e%2f%2e%2e%2fetc%2fpasswd HTTP/1.1',
                        H[:-2]), 400),
    'encoded_nul': (req(b'GET /index.html%00 HTTP/1.1', H[:-2]), 400),
    'encoded_nul_ext': (req(b'GET /index.html%00.txt HTTP/1.1', H[:-2]),
                        400),
    'overlong_utf8_dots': (req(b'GET /%c0%ae%c0%ae/ HTTP/1.1', H[:-2]),
                           400),
    'overlong_utf8_slash': (req(b'GET /..%c0%af..%c0%afetc/passwd HTTP/1.1',
                                H[:-2]), 400),
    'invalid_utf8': (req(b'GET /%ff%fe.html HTTP/1.1', H[:-2]), 400),
    'bad_escape': (req(b'GET /%zz.html HTTP/1.1', H[:-2]), 400),
    'truncated_escape': (req(b'GET /index.html%4 HTTP/1.1', H[:-2]), 400),
    'encoded_control': (req(b'GET /index%0a.html HTTP/1.1', H[:-2]), 400),
}


class BadInputTest(CorralTestCase):

    def check(self, raw, status):
        c = self.start()
        c.write('index.html', INDEX)
        self.assertBody(c.get('/index.html'), INDEX)	# worker is up
        mark = c.log_mark()
        with c.connect() as conn:
            try:
                conn.send(raw + GOOD)
            except (BrokenPipeError, ConnectionResetError):
                pass	# it may answer and close before reading it all
            data = conn.read_until_close()
        rs = parse_responses(data)
        statuses = status if isinstance(status, tuple) else (status,)
        self.assertEqual(len(rs), 1,
                         'want one response and a close, got %r' % rs)
        r = rs[0]
        self.assertIn(r.status, statuses, r)
        self.assertIn('close', r.tokens('Connection'), r)
        self.assertEqual(r.header('Content-Length'), str(len(r.body)), r)
        self.assertNotIn(b'root:', r.body)
        self.assertNotEqual(r.body, INDEX)
        c.wait_log(r'^\S+ \S+ \[info\] \d+ worker \d+: ', mark=mark)
        self.assertBody(c.get('/index.html'), INDEX)
        self.assertNoLogErrors(c)

    def test_info_line_is_from_the_bad_request(self):
        """A good request logs nothing at info; a bad one logs one line."""
        c = self.start()
        c.write('index.html', INDEX)
        c.wait_workers(1)
        self.assertBody(c.get('/index.html'), INDEX)	# worker is up
        mark = c.log_mark()
        with c.connect() as conn:
            conn.send(build_request('/index.html',
                                    headers=['Connection: close']))
            self.assertBody(conn.read_response(), INDEX)
            self.assertClosesAfter(conn)
        with c.connect() as conn:
            conn.send(b'GET /index.html HTTP/1.1\r\n\r\n')
            self.assertEqual(conn.read_response().status, 400)
            self.assertClosesAfter(conn)
        c.wait_log(r'\[info\] \d+ worker \d+: ', mark=mark)
        self.assertBody(c.get('/index.html'), INDEX)
        info = re.findall(r'^.*\[info\] \d+ worker \d+: .*$',
                          c.log_since(mark), re.M)
        self.assertEqual(len(info), 1, info)


def _make(raw, status):
    return lambda self: self.check(raw, status)


for _name, (_raw, _status) in CASES.items():
    setattr(BadInputTest, 'test_' + _name, _make(_raw, _status))


class DocrootEscapeTest(CorralTestCase):

    def test_symlink_to_file_outside_root(self):
        target = '/etc/hostname' if os.path.exists('/etc/hostname') \
            else '/etc/passwd'
        with open(target, 'rb') as f:
            secret = f.read()
        c = self.start()
        os.symlink(target, os.path.join(c.htdocs, 'escape.txt'))
        r = c.get('/escape.txt')
        self.assertIn(r.status, (403, 404), r)
        if secret:
            self.assertNotIn(secret, r.body)

    def test_symlinked_dir_outside_root(self):
        c = self.start()
        outside = c.docroot('outside')
        with open(os.path.join(outside, 'secret.txt'), 'wb') as f:
            f.write(b'top secret\n')
        os.symlink(outside, os.path.join(c.htdocs, 'linkdir'))
        r = c.get('/linkdir/secret.txt')
        self.assertIn(r.status, (403, 404), r)
        self.assertNotIn(b'top secret', r.body)

    def test_no_file_outside_root_by_any_path(self):
        c = self.start()
        c.write('index.html', INDEX)
        with open(os.path.join(c.tmp, 'outside.txt'), 'wb') as f:
            f.write(b'outside the root\n')
        for path in ('/../outside.txt', '/%2e%2e/outside.txt',
                     '/x/../../outside.txt', '/.%2e/outside.txt',
                     '/%2e./outside.txt'):
            with self.subTest(path=path):
                conn = c.connect()
                try:
                    conn.send(build_request(path))
                    r = conn.read_response()
                finally:
                    conn.close()
                self.assertEqual(r.status, 400, r)
                self.assertNotIn(b'outside the root', r.body)


class WorkerSurvivesTest(CorralTestCase):

    def test_abrupt_disconnects(self):
        c = self.start()
        c.write('index.html', INDEX)
        big = os.urandom(2 << 20)
        c.write('big.bin', big)
        partial = [b'GET /index.html HTTP/1.1\r\nHost: loc',
                   build_request('/big.bin'),
                   get(b'Content-Length: 100', body=b'abc')]
        for data in partial:
            s = socket.create_connection(('127.0.0.1', c.port), timeout=5)
            s.sendall(data)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         struct.pack('ii', 1, 0))
            s.close()	# RST
        self.assertBody(c.get('/index.html'), INDEX)
        self.assertBody(c.get('/big.bin'), big)
        self.assertNoLogErrors(c)

    def test_binary_garbage(self):
        c = self.start()
        c.write('index.html', INDEX)
        garbage = bytes(range(256)) * 4 + b'\r\n\r\n'
        with c.connect() as conn:
            conn.send(garbage)
            rs = parse_responses(conn.read_until_close())
        self.assertEqual(len(rs), 1, rs)
        self.assertEqual(rs[0].status, 400)
        self.assertBody(c.get('/index.html'), INDEX)
        self.assertNoLogErrors(c)
