"""Static files: GET and HEAD, types, validators, directories, errors."""

import os
import subprocess
import time

from harness import (CorralTestCase, IMF_RE, VERSION, build_request,
                     http_date, need_tool, parse_http_date, wait_for)

INDEX = b'<!doctype html>\n<title>corral</title>\n<p>hello from corral\n'


class StaticFileTest(CorralTestCase):

    def test_get_html_headers(self):
        c = self.start()
        path = c.write('page.html', INDEX)
        mtime = int(os.stat(path).st_mtime)
        before = time.time()
        r = c.get('/page.html')
        self.assertBody(r, INDEX)
        self.assertEqual(r.version, 'HTTP/1.1')
        self.assertEqual(r.reason, 'OK')
        self.assertEqual(r.header('Content-Type'), 'text/html; charset=utf-8')
        self.assertEqual(r.header('Last-Modified'), http_date(mtime))
        etag = r.header('ETag')
        self.assertRegex(etag, r'^"[\x21\x23-\x7e\x80-\xff]+"$',
                         'ETag must be quoted and strong')
        self.assertEqual(r.header('Accept-Ranges'), 'bytes')
        self.assertEqual(r.header('Server'), VERSION)
        date = r.header('Date')
        self.assertRegex(date, IMF_RE)
        self.assertLessEqual(abs(parse_http_date(date) - before), 5)
        for name in ('Content-Length', 'Content-Type', 'ETag', 'Date',
                     'Server', 'Last-Modified'):
            self.assertEqual(r.headers.count(name), 1, name)

    def test_etag_stable_and_changes_with_file(self):
        c = self.start()
        c.write('a.txt', 'one\n', mtime=1000000000)
        e1 = c.get('/a.txt').header('ETag')
        self.assertEqual(c.get('/a.txt').header('ETag'), e1)
        c.write('a.txt', 'other\n', mtime=1000000500)
        # The open-file cache may serve the old file for file_cache_valid.
        r = wait_for(lambda: c.get('/a.txt'), lambda r: r.body == b'other\n',
                     5, 0.05)
        self.assertTrue(r, 'changed file never served')
        self.assertBody(r, b'other\n')
        self.assertEqual(r.header('Last-Modified'), http_date(1000000500))
        self.assertNotEqual(r.header('ETag'), e1)

    def test_deleted_file_becomes_404(self):
        c = self.start()
        path = c.write('gone.txt', b'here\n')
        self.assertBody(c.get('/gone.txt'), b'here\n')
        os.unlink(path)
        # The open-file cache may serve it for file_cache_valid (1 s).
        r = wait_for(lambda: c.get('/gone.txt'), lambda r: r.status == 404,
                     5, 0.05)
        self.assertTrue(r, 'deleted file still served after 5 s')

    def test_unused_file_closed_after_file_cache_inactive(self):
        def holders(path):
            out = []
            for pid in c.workers():
                try:
                    fds = os.listdir('/proc/%d/fd' % pid)
                except OSError:	# exited since it was listed
                    continue
                for fd in fds:
                    try:
                        link = os.readlink('/proc/%d/fd/%s' % (pid, fd))
                    except OSError:
                        continue
                    if link.startswith(path):
                        out.append(link)
            return out

        # Over cache.file_max, so the worker keeps the file open to
        # sendfile from it.
        c = self.start(workers=1, file_cache_inactive='1s',
                       file_cache_valid='1d')
        path = c.write('big.bin', b'b' * (2 * 1024 * 1024))
        self.assertEqual(len(c.get('/big.bin').body), 2 * 1024 * 1024)
        self.assertEqual(holders(path), [path])
        os.unlink(path)
        self.assertEqual(holders(path), [path + ' (deleted)'])
        self.assertEqual(wait_for(lambda: holders(path), lambda h: h == [],
                                  5, 0.1), [],
                         'deleted file still held after 5 s')
        self.assertEqual(c.get('/big.bin').status, 404)

    def test_content_types(self):
        c = self.start()
        cases = [('style.css', 'text/css; charset=utf-8'),
                 ('image.png', 'image/png'),
                 ('notes.txt', 'text/plain; charset=utf-8'),
                 ('data.json', 'application/json; charset=utf-8'),
                 ('UPPER.PNG', 'image/png'),
                 ('blob.zzunknown', 'application/octet-stream'),
                 ('noextension', 'application/octet-stream')]
        for name, ctype in cases:
            c.write(name, b'x' * 10)
        for name, ctype in cases:
            with self.subTest(name=name):
                r = c.get('/' + name)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.header('Content-Type'), ctype)

    def test_default_type_setting(self):
        c = self.start(default_type='text/x-corral-test')
        c.write('blob.zzunknown', b'abc')
        self.assertEqual(c.get('/blob.zzunknown').header('Content-Type'),
                         'text/x-corral-test')

    def test_head_same_headers_no_body(self):
        c = self.start()
        c.write('page.html', INDEX)
        with c.connect() as conn:
            conn.send(build_request('/page.html', 'HEAD') +
                      build_request('/page.html'))
            head = conn.read_response('HEAD')
            get = conn.read_response('GET')
            self.assertEqual(conn.buf, b'', 'HEAD response carried a body')
        self.assertEqual(head.status, 200)
        self.assertEqual(head.body, b'')
        self.assertBody(get, INDEX)
        def fields(r):
            return sorted((k.lower(), v) for k, v in r.headers.items
                          if k.lower() != 'date')
        self.assertEqual(fields(head), fields(get))

    def test_empty_file(self):
        c = self.start()
        c.write('empty.txt', b'')
        r = c.get('/empty.txt')
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header('Content-Length'), '0')
        self.assertEqual(r.body, b'')

    def test_large_file_sendfile(self):
        self._large(True)

    def test_large_file_no_sendfile(self):
        self._large(False)

    def _large(self, sendfile):
        c = self.start(sendfile=sendfile)
        data = os.urandom(3 * 1024 * 1024 + 17)
        c.write('big.bin', data)
        mid = os.urandom(100 * 1024)	# above file_cache_max_size
        c.write('mid.bin', mid)
        self.assertBody(c.get('/big.bin'), data)
        self.assertBody(c.get('/mid.bin'), mid)
        r = c.get('/big.bin', method='HEAD')
        self.assertEqual(r.header('Content-Length'), str(len(data)))
        # Twice on one connection: the second must not see stale bytes.
        with c.connect(timeout=20) as conn:
            conn.send(build_request('/big.bin') + build_request('/mid.bin'))
            self.assertBody(conn.read_response(), data)
            self.assertBody(conn.read_response(), mid)

    def test_server_tokens_off(self):
        c = self.start(server_tokens=False)
        c.write('index.html', INDEX)
        self.assertEqual(c.get('/').header('Server'), 'corral')
        self.assertEqual(c.get('/missing').header('Server'), 'corral')

    def test_query_string_ignored(self):
        c = self.start()
        c.write('page.html', INDEX)
        self.assertBody(c.get('/page.html?x=1&y=%20'), INDEX)

    def test_percent_encoded_path(self):
        c = self.start()
        c.write('hello world.txt', b'spaced\n')
        self.assertBody(c.get('/hello%20world.txt'), b'spaced\n')
        self.assertBody(c.get('/hello%20world%2Etxt'), b'spaced\n')

    def test_dot_segments_inside_root(self):
        c = self.start()
        c.write('page.html', INDEX)
        c.mkdir('sub')
        self.assertBody(c.get('/sub/../page.html'), INDEX)
        self.assertBody(c.get('/./sub/./../page.html'), INDEX)
        self.assertBody(c.get('//page.html'), INDEX)


class DirectoryTest(CorralTestCase):

    def test_redirect_adds_slash(self):
        c = self.start()
        c.write('dir/index.html', INDEX)
        r = c.get('/dir')
        self.assertEqual(r.status, 301, r)
        self.assertEqual(r.header('Location'), '/dir/')
        self.assertEqual(len(r.body), int(r.header('Content-Length')))

    def test_redirect_keeps_query(self):
        c = self.start()
        c.write('dir/index.html', INDEX)
        r = c.get('/dir?a=1&b=2')
        self.assertEqual(r.status, 301, r)
        self.assertEqual(r.header('Location'), '/dir/?a=1&b=2')

    def test_index_file(self):
        c = self.start()
        c.write('index.html', INDEX)
        c.write('dir/index.html', b'sub index\n')
        r = c.get('/')
        self.assertBody(r, INDEX)
        self.assertEqual(r.header('Content-Type'), 'text/html; charset=utf-8')
        self.assertBody(c.get('/dir/'), b'sub index\n')

    def test_index_list_order(self):
        c = self.start(server={'index': ['index.html', 'index.txt']})
        c.write('a/index.txt', b'second\n')
        c.write('b/index.txt', b'second\n')
        c.write('b/index.html', b'first\n')
        self.assertBody(c.get('/a/'), b'second\n')
        self.assertBody(c.get('/b/'), b'first\n')

    def test_directory_without_index_403(self):
        c = self.start()
        c.mkdir('empty')
        r = c.get('/empty/')
        self.assertEqual(r.status, 403, r)
        self.assertErrorPage(r)

    def test_missing_404(self):
        c = self.start()
        for path in ('/nothing-here', '/no/such/dir/', '/nothing.html'):
            with self.subTest(path=path):
                r = c.get(path)
                self.assertEqual(r.status, 404, r)
                self.assertErrorPage(r)
        r = c.get('/nothing-here', method='HEAD')
        self.assertEqual(r.status, 404)

    def test_file_with_slash_is_404(self):
        c = self.start()
        c.write('page.html', INDEX)
        r = c.get('/page.html/')
        self.assertIn(r.status, (404, 403), r)
        self.assertNotEqual(r.body, INDEX)

    def test_unreadable_file_403(self):
        # Mode 000 denies the workers, who run as "nobody" when the test
        # runs as root, and as the file's owner otherwise.
        c = self.start()
        p = c.write('secret.txt', b'secret\n')
        os.chmod(p, 0)
        r = c.get('/secret.txt')
        self.assertEqual(r.status, 403, r)
        self.assertErrorPage(r)

    def test_error_keeps_connection(self):
        c = self.start()
        c.write('page.html', INDEX)
        with c.connect() as conn:
            conn.send(build_request('/missing') + build_request('/page.html'))
            self.assertEqual(conn.read_response().status, 404)
            self.assertBody(conn.read_response(), INDEX)

    def assertErrorPage(self, r):
        self.assertTrue(r.header('Content-Type', '').startswith('text/html'),
                        r)
        self.assertEqual(r.header('Content-Length'), str(len(r.body)))
        self.assertIn(b'<html', r.body.lower())
        self.assertLess(len(r.body), 2048)


class VirtualHostTest(CorralTestCase):

    def vhosts(self):
        c = self.start(vhosts=[
            {'names': ['other.test', 'alias.test'], 'root': 'other',
             'index': ['index.html'], 'access_log': 'off'},
            {'names': ['*.wild.test'], 'root': 'wild',
             'index': ['index.html'], 'access_log': 'off'}])
        c.write('index.html', b'default\n')
        c.write('index.html', b'other\n', root=c.docroot('other'))
        c.write('index.html', b'wild\n', root=c.docroot('wild'))
        return c

    def test_host_selects_server(self):
        c = self.vhosts()
        self.assertBody(c.get('/', host='localhost'), b'default\n')
        self.assertBody(c.get('/', host='other.test'), b'other\n')
        self.assertBody(c.get('/', host='alias.test'), b'other\n')

    def test_host_case_and_port(self):
        c = self.vhosts()
        self.assertBody(c.get('/', host='OTHER.Test'), b'other\n')
        self.assertBody(c.get('/', host='other.test:8080'), b'other\n')
        self.assertBody(c.get('/', host='LocalHost:%d' % c.port),
                        b'default\n')

    def test_host_in_absolute_dns_form(self):
        # "other.test." is the same name as "other.test" (nginx strips the
        # dot too); a name with an empty label is no name: 400.
        c = self.vhosts()
        self.assertBody(c.get('/', host='other.test.'), b'other\n')
        self.assertBody(c.get('/', host='Other.Test.:8080'), b'other\n')
        self.assertBody(c.get('/', host='a.wild.test.'), b'wild\n')
        with c.connect() as conn:
            conn.send(b'GET http://alias.test./ HTTP/1.1\r\n'
                      b'Host: localhost\r\n\r\n')
            self.assertBody(conn.read_response(), b'other\n')
        for bad in ('other..test', '.other.test', '.', 'other.test..'):
            self.assertEqual(c.get('/', host=bad).status, 400, bad)

    def test_unknown_host_uses_first(self):
        c = self.vhosts()
        self.assertBody(c.get('/', host='unknown.test'), b'default\n')
        self.assertBody(c.get('/', host='127.0.0.1:%d' % c.port),
                        b'default\n')

    def test_http10_without_host_uses_first(self):
        c = self.vhosts()
        with c.connect() as conn:
            conn.send(b'GET / HTTP/1.0\r\n\r\n')
            self.assertBody(conn.read_response(), b'default\n')

    def test_wildcard_name(self):
        c = self.vhosts()
        self.assertBody(c.get('/', host='a.wild.test'), b'wild\n')
        self.assertBody(c.get('/', host='x.y.wild.test'), b'wild\n')

    def test_pipelined_hosts_on_one_connection(self):
        # The worker keeps the server of the last Host it saw: each
        # request of one connection still gets its own Host's server.
        c = self.vhosts()
        long_host = 'a' * 70 + '.wild.test'
        order = [('localhost', b'default\n'), ('other.test', b'other\n'),
                 ('other.test', b'other\n'), ('a.wild.test', b'wild\n'),
                 ('localhost', b'default\n'), (long_host, b'wild\n'),
                 (long_host, b'wild\n'), ('alias.test', b'other\n'),
                 ('unknown.test', b'default\n'), ('other.test', b'other\n')]
        with c.connect() as conn:
            conn.send(b''.join(build_request('/', host=h) for h, _ in order)
                      + b'GET http://a.wild.test/ HTTP/1.1\r\n'
                      b'Host: other.test\r\n\r\n'
                      + build_request('/', host='other.test'))
            for h, body in order:
                self.assertBody(conn.read_response(), body)
            self.assertBody(conn.read_response(), b'wild\n')
            self.assertBody(conn.read_response(), b'other\n')

    def test_absolute_form_target(self):
        c = self.vhosts()
        r = c.request(b'GET http://other.test/ HTTP/1.1\r\n'
                      b'Host: localhost\r\n\r\n')
        self.assertBody(r, b'other\n')
        r = c.request(b'GET http://localhost:%d/index.html HTTP/1.1\r\n'
                      b'Host: other.test\r\n\r\n' % c.port)
        self.assertBody(r, b'default\n')

    def test_access_logs_per_server(self):
        c = self.start(vhosts=[{'names': ['other.test'], 'root': 'other',
                                'access_log': os.path.join('other.log')}])
        c.write('only-default.html', b'd\n')
        c.write('only-other.html', b'o\n', root=c.docroot('other'))
        self.assertEqual(c.get('/only-default.html').status, 200)
        self.assertEqual(c.get('/only-other.html', host='other.test').status,
                         200)
        c.stop()
        with open(c.access_log) as f:
            main = f.read()
        with open(os.path.join(c.tmp, 'other.log')) as f:
            other = f.read()
        self.assertIn('/only-default.html', main)
        self.assertNotIn('/only-other.html', main)
        self.assertIn('/only-other.html', other)
        self.assertNotIn('/only-default.html', other)


class MethodTest(CorralTestCase):

    ALLOW = 'GET, HEAD, OPTIONS'

    def test_options(self):
        c = self.start()
        for target in ('/', '*'):
            with self.subTest(target=target):
                r = c.get(target, method='OPTIONS')
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.header('Allow'), self.ALLOW)
                self.assertEqual(r.header('Content-Length', '0'),
                                 str(len(r.body)))

    def test_not_allowed_405(self):
        c = self.start()
        c.write('index.html', INDEX)
        for m in ('POST', 'PUT', 'DELETE', 'PATCH', 'TRACE'):
            with self.subTest(method=m):
                r = c.get('/', method=m, headers=[('Content-Length', '0')])
                self.assertEqual(r.status, 405, r)
                self.assertEqual(r.header('Allow'), self.ALLOW)
                self.assertEqual(r.header('Content-Length'),
                                 str(len(r.body)))

    def test_unknown_method_501(self):
        c = self.start()
        c.write('index.html', INDEX)
        for m in ('FOO', 'get', 'BREW'):
            with self.subTest(method=m):
                r = c.get('/', method=m)
                self.assertEqual(r.status, 501, r)


class CurlTest(CorralTestCase):

    def test_curl_sees_index(self):
        curl = need_tool('curl')
        c = self.start()
        c.write('index.html', INDEX)
        p = subprocess.run([curl, '-sS', '-D', '-', c.url('/')],
                           capture_output=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)
        head, _, body = p.stdout.partition(b'\r\n\r\n')
        lines = head.decode('latin-1').split('\r\n')
        self.assertEqual(lines[0], 'HTTP/1.1 200 OK')
        fields = {}
        for l in lines[1:]:
            k, _, v = l.partition(':')
            fields[k.lower()] = v.strip()
        self.assertEqual(fields.get('content-type'),
                         'text/html; charset=utf-8')
        self.assertEqual(fields.get('content-length'), str(len(INDEX)))
        self.assertEqual(fields.get('server'), VERSION)
        self.assertEqual(body, INDEX)

    def test_curl_range_and_404(self):
        curl = need_tool('curl')
        c = self.start()
        c.write('digits.txt', b'0123456789abcdef')
        p = subprocess.run([curl, '-sS', '-r', '2-5', c.url('/digits.txt')],
                           capture_output=True, timeout=20)
        self.assertEqual(p.stdout, b'2345')
        p = subprocess.run([curl, '-sS', '-o', '/dev/null', '-w',
                            '%{http_code}', c.url('/missing')],
                           capture_output=True, timeout=20)
        self.assertEqual(p.stdout, b'404')
