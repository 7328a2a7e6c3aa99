"""
Site configuration as an nginx administrator writes it: locations (exact,
prefix, regex, precedence), return and rewrite, try_files, alias,
error_page, add_header, expires, charset, dotfiles.  Real server, raw
sockets and curl.
"""

import os
import subprocess
import unittest

from harness import CorralTestCase, Corral, Conn, free_port, quote


def loc(title, *lines):
    """A location block as config text."""
    return '  location %s {\n%s\n  }\n' % (
        quote(title), '\n'.join('    ' + l for l in lines))


class LocationTest(CorralTestCase):

    def site(self, locations, server_extra='', **kw):
        c = self.make(server={'_raw': server_extra + ''.join(locations)},
                      **kw)
        return c

    def test_precedence_exact_prefix_stop_regex(self):
        c = self.site([
            loc('= /', 'return = "200 exact"'),
            loc('/', 'return = "200 prefix"'),
            loc('/images/', 'return = "200 images"'),
            loc('^~ /static/', 'return = "200 static-stop"'),
            loc('~* \\.(gif|jpg)$', 'return = "200 regex $1"'),
            loc('~ ^/images/x', 'return = "200 second-regex"'),
        ])
        c.start()
        cases = [('/', 'exact'), ('/index.html', 'prefix'),
                 ('/images/a.png', 'images'),
                 # A regex beats the longest prefix ...
                 ('/images/a.JPG', 'regex JPG'),
                 ('/images/x.gif', 'regex gif'),  # the first regex wins
                 # ... but not a "^~" prefix.
                 ('/static/a.jpg', 'static-stop'),
                 ('/docs/a.gif', 'regex gif')]
        for path, body in cases:
            r = c.get(path)
            self.assertEqual((r.status, r.body), (200, body.encode()), path)
            self.assertEqual(r.header('Content-Type'), 'text/plain')

    def test_return_redirects_with_variables(self):
        c = self.site([
            loc('= /old', 'return = "301 https://$host$request_uri"'),
            loc('/gone/', 'return = "410"'),
            loc('/go', 'return = "https://example.com$uri"'),
        ])
        c.start()
        r = c.get('/old?x=1&y=2', host='www.example.org')
        self.assertEqual(r.status, 301)
        self.assertEqual(r.header('Location'),
                         'https://www.example.org/old?x=1&y=2')
        r = c.get('/gone/a')
        self.assertEqual(r.status, 410)
        r = c.get('/go/%7Ea')
        self.assertEqual((r.status, r.header('Location')),
                         (302, 'https://example.com/go/~a'))

    def test_arg_and_cookie_variables(self):
        c = self.site([
            loc('= /pick', 'return = "302 /p?l=$arg_lang&t=$cookie_theme'
                '&n=$arg_none$cookie_none"'),
        ])
        c.start()
        r = c.get('/pick?page=2&LANG=fr&x', headers=[
            'Cookie: a=1; theme=dark;lang=xx'])
        self.assertEqual((r.status, r.header('Location')),
                         (302, '/p?l=fr&t=dark&n='))
        # Nothing from a value can break the Location line.
        r = c.get('/pick?lang=%0D%0AX-Evil:1', headers=[
            'Cookie: theme=a b'])
        self.assertEqual(r.status, 302)
        self.assertIsNone(r.header('X-Evil'))
        self.assertNotIn(' ', r.header('Location'))
        r = c.get('/pick')
        self.assertEqual(r.header('Location'), '/p?l=&t=&n=')

    def test_redirect_from_an_old_host(self):
        c = self.make(vhosts=[{'names': ['old.example'], 'root': 'old',
                               '_raw': '  return = "301 http://new.example'
                               '$request_uri"\n'}])
        c.write('/a.txt', 'new site')
        c.start()
        r = c.get('/a.txt?q=1', host='old.example')
        self.assertEqual((r.status, r.header('Location')),
                         (301, 'http://new.example/a.txt?q=1'))
        self.assertBody(c.get('/a.txt'), b'new site')

    def test_no_cr_or_lf_from_the_request_reaches_location(self):
        c = self.site([
            loc('/r/', 'return = "302 http://x.example$uri"'),
            loc('~ ^/w/(.*)$', 'rewrite = {"^/w/(.*)$ http://y.example/$1?'
                '$http_x_evil redirect"}'),
        ])
        c.start()
        # Encoded CR LF in the path is refused before any handler.
        r = c.get('/r/a%0d%0aSet-Cookie:%20x=1')
        self.assertEqual(r.status, 400)
        r = c.get('/w/a%20b', headers=['X-Evil: a b\tc'])
        self.assertEqual(r.status, 302)
        loc_ = r.header('Location')
        self.assertEqual(loc_, 'http://y.example/a%20b?a%20b%09c')
        self.assertNotIn('Set-Cookie', r.headers)

    def test_rewrite_with_captures(self):
        c = self.site([
            loc('/files/', 'root = %s' % quote('FILES')),
            loc('/u/', 'rewrite = {"^/u/(\\\\w+)/(.+)$ /files/$1-$2 last"}'),
            loc('/p/', 'rewrite = {"^/p/(.*)$ /new/$1 permanent"}'),
            loc('/q/', 'rewrite = {"^/q/(.*)$ /files/$1?from=q last"}'),
        ])
        files = c.docroot('files-root')
        with open(c.conf_path) as f:
            text = f.read().replace('FILES', files)
        with open(c.conf_path, 'w') as f:
            f.write(text)
        c.write('/files/bob-notes.txt', 'bob notes', root=files)
        c.start()
        self.assertBody(c.get('/u/bob/notes.txt'), b'bob notes')
        r = c.get('/p/a/b?z=1')
        self.assertEqual((r.status, r.header('Location')),
                         (301, '/new/a/b?z=1'))
        self.assertBody(c.get('/q/bob-notes.txt?k=v'), b'bob notes')

    def test_rewrite_loop_is_a_500(self):
        c = self.site([loc('/a/', 'rewrite = {"^/a/(.*)$ /a/$1 last"}')])
        c.start()
        self.assertEqual(c.get('/a/x').status, 500)
        c.wait_log(r'more than 10 internal redirects')

    def test_try_files_falls_back_to_index(self):
        c = self.site([loc('/app/', 'try_files = {"$uri", "$uri/", '
                           '"/app/index.html"}'),
                       loc('/strict/', 'try_files = {"$uri", "=404"}')])
        c.write('/app/index.html', 'spa shell')
        c.write('/app/main.js', 'js!')
        c.write('/app/sub/index.html', 'sub index')
        c.write('/strict/here.txt', 'here')
        c.start()
        self.assertBody(c.get('/app/main.js'), b'js!')
        self.assertBody(c.get('/app/some/route'), b'spa shell')
        self.assertBody(c.get('/app/sub/'), b'sub index')
        self.assertBody(c.get('/strict/here.txt'), b'here')
        self.assertEqual(c.get('/strict/none').status, 404)

    def test_alias_and_traversal(self):
        c = self.make()
        assets = c.docroot('assets')
        c.write('/logo.txt', 'logo', root=assets)
        c.write('/secret.txt', 'secret', root=c.tmp)
        c.directives['_raw'] = ''
        c.servers[0]['_raw'] = loc('/static/', 'alias = %s' %
                                   quote(assets + '/'))
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        self.assertBody(c.get('/static/logo.txt'), b'logo')
        for path in ['/static/../secret.txt', '/static/../../etc/passwd',
                     '/static/%2e%2e/secret.txt', '/static/%2E%2E%2Fsecret'
                     '.txt', '/static/..%2fsecret.txt',
                     '/static/%252e%252e/secret.txt',
                     '/static/.%2e/.%2e/etc/passwd']:
            r = c.get(path)
            self.assertIn(r.status, (400, 404), path)
            self.assertNotIn(b'secret', r.body, path)
            self.assertNotIn(b'root:', r.body, path)
        # A symlink out of the alias target is refused too.
        os.symlink(os.path.join(c.tmp, 'secret.txt'),
                   os.path.join(assets, 'link.txt'))
        r = c.get('/static/link.txt')
        self.assertIn(r.status, (403, 404))

    def test_regex_alias_with_captures_stays_inside(self):
        c = self.make()
        img = c.docroot('img')
        c.write('/a/b.png', 'png-bytes', root=img)
        c.write('/secret.txt', 'secret', root=c.tmp)
        c.servers[0]['_raw'] = loc('~ ^/pics/(.*)$', 'alias = %s' %
                                   quote(img + '/$1'))
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        self.assertBody(c.get('/pics/a/b.png'), b'png-bytes')
        for path in ['/pics/../secret.txt', '/pics/%2e%2e/secret.txt']:
            r = c.get(path)
            self.assertNotEqual(r.status, 200, path)
            self.assertNotIn(b'secret', r.body)

    def test_error_page_for_a_static_miss(self):
        c = self.site([], server_extra='  error_page = {"404 /404.html", '
                      '"500 502 503 504 /50x.html"}\n')
        c.write('/404.html', '<h1>custom 404</h1>')
        c.start()
        r = c.get('/missing')
        self.assertBody(r, b'<h1>custom 404</h1>', status=404)
        self.assertEqual(r.header('Content-Type'),
                         'text/html; charset=utf-8')
        r = c.get('/missing', method='HEAD')
        self.assertEqual((r.status, r.body), (404, b''))
        # Keep-alive holds after it.
        with c.connect() as conn:
            for _ in range(2):
                conn.send(b'GET /missing HTTP/1.1\r\nHost: x\r\n\r\n')
                self.assertEqual(conn.read_response().status, 404)

    def test_error_page_for_a_dead_upstream(self):
        dead = free_port()
        c = self.make(_raw='upstream "app" {\n  servers = {"127.0.0.1:%d"}'
                      '\n  connect_timeout = 1s\n}\n' % dead,
                      server={'_raw': '  error_page = {"502 504 /50x.html"}\n'
                              + loc('/api/', 'proxy = "app"')})
        c.write('/50x.html', 'we will be back')
        c.start()
        r = c.get('/api/x')
        self.assertBody(r, b'we will be back', status=502)

    def test_named_locations(self):
        # nginx's "@name" locations: the fallback of try_files (a front
        # controller, POST body kept) and of error_page ("= @app": the
        # status the app answers), never reachable by a URI.
        o = self.origin()
        o.script('/blog/post', body=b'app page')
        o.script('/files/gone', status=410, body=b'app says gone')
        o.script('/@app', body=b'must not be reached')
        c = self.make(_raw='upstream "app" {\n  servers = {"%s"}\n}\n' %
                      o.addr, server={'_raw': loc(
                          '/blog/', 'try_files = {"$uri", "@app"}')
                          + loc('/files/', 'error_page = {"404 = @app"}')
                          + loc('/old/', 'error_page = {"404 @static"}')
                          + loc('@app', 'proxy = "app"')
                          + loc('@static', 'root = "fallback"')})
        c.write('/blog/real.html', 'a real file')
        c.write('/files/here.txt', 'here')
        os.makedirs(os.path.join(c.tmp, 'fallback', 'old'))
        with open(os.path.join(c.tmp, 'fallback', 'old', 'x.html'),
                  'w') as f:
            f.write('from the fallback folder')
        c.start()
        self.assertBody(c.get('/blog/real.html'), b'a real file')
        self.assertBody(c.get('/blog/post'), b'app page')
        r = c.get('/blog/post', method='POST', body=b'a=1',
                  headers=['Content-Length: 3'])
        self.assertBody(r, b'app page')
        self.assertEqual(o.count('/blog/post'), 2)
        self.assertEqual((o.last('/blog/post')['method'],
                          o.last('/blog/post')['body']), ('POST', b'a=1'))
        self.assertBody(c.get('/files/here.txt'), b'here')
        # The app's own status and body go out ("= @app").
        self.assertBody(c.get('/files/gone'), b'app says gone', status=410)
        self.assertEqual(o.count('/files/gone'), 1)
        # A named location of files serves the request's URI from its
        # folder, with the original status.
        self.assertBody(c.get('/old/x.html'), b'from the fallback folder',
                        status=404)
        self.assertEqual(c.get('/old/none.html').status, 404)
        # No URI reaches a named location.
        self.assertEqual(c.get('/@app').status, 404)
        self.assertEqual(o.count('/@app'), 0)

    def test_default_type_per_location(self):
        # nginx's default_type in a server and a location: files the MIME
        # table does not know get the type of the location that serves
        # them, even the same file through two locations.
        c = self.site([loc('/docs/', 'default_type = "text/plain; '
                           'charset=utf-8"'),
                       loc('/other/', 'try_files = {"/docs/README", "=404"}'),
                       loc('/md/', 'default_type = "text/markdown"',
                           'charset = "utf-8"')],
                      'default_type = "application/x-site"\n')
        c.write('/docs/README', 'read me')
        c.write('/docs/page.html', '<p>')
        c.write('/md/NOTES', '# notes')
        c.write('/top', 'top')
        c.start()
        for path, ctype in (
                ('/docs/README', 'text/plain; charset=utf-8'),
                ('/other/x', 'application/x-site'),
                ('/docs/README', 'text/plain; charset=utf-8'),
                ('/docs/page.html', 'text/html; charset=utf-8'),
                ('/md/NOTES', 'text/markdown'),
                ('/top', 'application/x-site')):
            r = c.get(path)
            self.assertEqual(r.status, 200, path)
            self.assertEqual(r.header('Content-Type'), ctype, path)
        self.assertBody(c.get('/other/x'), b'read me')
        c2 = self.site([loc('/', 'default_type = "text/"')])
        out = c2.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r'corral\.conf:\d+: default_type')

    def test_named_location_mistakes(self):
        for server, why in (
                (loc('/a/', 'try_files = {"$uri", "@nope"}'),
                 'try_files: no location is named "@nope"'),
                (loc('/a/', 'error_page = {"404 = @nope"}'),
                 'error_page: no location is named "@nope"'),
                (loc('/a/', 'error_page = {"404 = /x.html"}'),
                 'invalid error_page'),
                (loc('@', 'root = "."'), "must start with '/'")):
            c = self.make(server={'_raw': server})
            out = c.check_config()
            self.assertEqual(out.returncode, 1, server)
            self.assertIn(why, out.stderr)
            self.assertRegex(out.stderr, r'corral\.conf:\d+: ')

    def test_add_header_and_always(self):
        c = self.site([loc('/img/', 'add_header = {"Cache-Control: public",'
                           ' "X-Img: 1 always"}')],
                      server_extra='  add_header = {"X-Frame-Options: DENY",'
                      ' "X-Robots-Tag: none always"}\n')
        c.write('/a.txt', 'a')
        c.write('/img/a.png', 'png')
        c.start()
        r = c.get('/a.txt')
        self.assertEqual(r.header('X-Frame-Options'), 'DENY')
        self.assertEqual(r.header('X-Robots-Tag'), 'none')
        r = c.get('/nope')
        self.assertEqual(r.status, 404)
        self.assertNotIn('X-Frame-Options', r.headers)
        self.assertEqual(r.header('X-Robots-Tag'), 'none')
        # A location's list replaces the server's.
        r = c.get('/img/a.png')
        self.assertEqual(r.header('Cache-Control'), 'public')
        self.assertNotIn('X-Frame-Options', r.headers)
        r = c.get('/img/none.png')
        self.assertEqual((r.status, r.header('X-Img')), (404, '1'))
        self.assertNotIn('Cache-Control', r.headers)

    def test_proxied_answers_get_add_header_and_access_rules(self):
        o = self.origin()
        c = self.make(_raw='upstream "app" {\n  servers = {"%s"}\n}\n' %
                      o.addr, server={'_raw': loc(
                          '/api/', 'proxy = "app"',
                          'add_header = {"X-Site: yes", "X-All: 1 always"}')
                          + loc('/api/private/', 'proxy = "app"',
                                'deny = {"all"}')})
        c.start()
        r = c.get('/api/size/10')
        self.assertEqual((r.status, r.header('X-Site'), r.header('X-All')),
                         (200, 'yes', '1'))
        r = c.get('/api/status/404')
        self.assertEqual((r.status, r.header('X-Site'), r.header('X-All')),
                         (404, None, '1'))
        self.assertEqual(c.get('/api/private/x').status, 403)
        self.assertEqual(o.count('/api/private/x'), 0)

    def test_expires_and_charset(self):
        c = self.site([loc('~* \\.(png|css)$', 'expires = 30d'),
                       loc('/gbk/', 'charset = gbk')])
        c.write('/a.png', 'png')
        c.write('/gbk/a.html', 'html')
        c.write('/gbk/a.png', 'png')
        c.start()
        r = c.get('/a.png')
        self.assertEqual(r.header('Cache-Control'), 'max-age=2592000')
        self.assertIsNotNone(r.header('Expires'))
        r2 = c.get('/a.png', headers=['If-None-Match: ' + r.header('ETag')])
        self.assertEqual(r2.status, 304)
        self.assertEqual(r2.header('Cache-Control'), 'max-age=2592000')
        r = c.get('/gbk/a.html')
        self.assertEqual(r.header('Content-Type'), 'text/html; charset=gbk')
        self.assertEqual(c.get('/gbk/a.png').header('Content-Type'),
                         'image/png')

    def test_dotfiles_denied_but_well_known_served(self):
        c = self.site([loc('/open/', 'dotfiles = on')])
        c.write('/.git/config', '[core]')
        c.write('/.env', 'SECRET=1')
        c.write('/a/.htpasswd', 'x')
        c.write('/.well-known/x', 'acme')
        c.write('/open/.hidden', 'shown')
        c.start()
        for path in ['/.git/config', '/.env', '/a/.htpasswd', '/.git/']:
            r = c.get(path)
            self.assertEqual(r.status, 403, path)
            self.assertNotIn(b'SECRET', r.body)
        self.assertBody(c.get('/.well-known/x'), b'acme')
        self.assertBody(c.get('/open/.hidden'), b'shown')

    def test_server_tokens_on_error_pages(self):
        c = self.start(server_tokens=True)
        r = c.get('/none')
        self.assertIn(b'corral/', r.body)
        self.assertTrue(r.header('Server').startswith('corral/'))
        d = self.start(server_tokens=False)
        r = d.get('/none')
        self.assertNotIn(b'corral/', r.body)
        self.assertIn(b'<center>corral</center>', r.body)

    def test_regex_location_cannot_reach_outside_root(self):
        c = self.site([loc('~ \\.txt$', 'root = %s' % quote('ROOT'))])
        inner = c.docroot('inner')
        with open(c.conf_path) as f:
            text = f.read().replace('ROOT', inner)
        with open(c.conf_path, 'w') as f:
            f.write(text)
        c.write('/ok.txt', 'inner', root=inner)
        c.write('/outside.txt', 'outside', root=c.tmp)
        c.start()
        self.assertBody(c.get('/ok.txt'), b'inner')
        for path in ['/../outside.txt', '/%2e%2e/outside.txt',
                     '/x/..%2f..%2foutside.txt']:
            r = c.get(path)
            self.assertNotEqual(r.status, 200, path)


if __name__ == '__main__':
    unittest.main()
