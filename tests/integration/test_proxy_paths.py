"""
The path a proxied request takes upstream: proxy_path replaces the
location's prefix, as nginx's "proxy_pass http://backend/;" does, with
the query kept and what follows the prefix passed as the client wrote
it (or escaped again when the client escaped the prefix itself).
"""
from harness import build_request, quote
from test_proxy import ProxyTestCase


class ProxyPathTest(ProxyTestCase):

    def start_paths(self, o, locations):
        """locations: {prefix: proxy_path or None}."""
        c = self.make()
        text = c.config_text()
        locs = ''
        for prefix, path in locations.items():
            locs += '  location %s {\n    proxy = "app"\n' % quote(prefix)
            if path is not None:
                locs += '    proxy_path = %s\n' % quote(path)
            locs += '  }\n'
        at = text.index('server {\n') + len('server {\n')
        text = text[:at] + locs + text[at:]
        text += 'upstream "app" {\n  servers = {%s}\n}\n' % quote(o.addr)
        with open(c.conf_path, 'w') as f:
            f.write(text)
        c.start()
        return c

    def target(self, c, o, path):
        n = len(o.requests)
        r = c.get(path)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(len(o.requests), n + 1)
        return o.requests[-1]['target']

    def test_prefix_stripped_and_replaced(self):
        o = self.origin()
        c = self.start_paths(o, {'/app/': '/', '/v1/': '/api/v2/',
                                 '/keep/': None})
        self.assertEqual(self.target(c, o, '/app/echo'), '/echo')
        self.assertEqual(self.target(c, o, '/app/echo?x=1&y=%20'),
                         '/echo?x=1&y=%20')
        self.assertEqual(self.target(c, o, '/app/'), '/')
        self.assertEqual(self.target(c, o, '/v1/echo/a%2Fb'),
                         '/api/v2/echo/a%2Fb')
        self.assertEqual(self.target(c, o, '/keep/echo'), '/keep/echo')

    def test_escaped_prefix_is_escaped_again(self):
        o = self.origin()
        c = self.start_paths(o, {'/app/': '/base/'})
        # "%61pp" is "app": the location matches the decoded path.
        self.assertEqual(self.target(c, o, '/%61pp/echo%20me'),
                         '/base/echo%20me')

    def test_config_errors(self):
        c = self.make()
        text = c.config_text().replace('server {\n', 'server {\n'
                                       '  location "/x/" {\n'
                                       '    proxy_path = "/"\n  }\n', 1)
        path = c.conf_path
        with open(path, 'w') as f:
            f.write(text)
        p = c.check_config()
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('proxy_path needs proxy in its location', p.stderr)
        text = c.config_text().replace('server {\n', 'server {\n'
                                       '  location "/x/" {\n'
                                       '    proxy = "app"\n'
                                       '    proxy_path = "no-slash"\n'
                                       '  }\n', 1) + \
            'upstream "app" {\n  servers = {"127.0.0.1:9"}\n}\n'
        with open(path, 'w') as f:
            f.write(text)
        p = c.check_config()
        self.assertNotEqual(p.returncode, 0)
        self.assertRegex(p.stderr, r'corral\.conf:\d+: proxy_path '
                         r'"no-slash": expected a path')


class ProxySetHeaderTest(ProxyTestCase):
    """proxy_set_header (set; an empty value removes) and
    proxy_append_header, with variables, as nginx's proxy_set_header."""

    def start_rules(self, o, rules, location='/app/'):
        c = self.make()
        text = c.config_text()
        locs = '  location %s {\n    proxy = "app"\n' % quote(location)
        for name, values in rules.items():
            locs += '    %s = {%s}\n' % (
                name, ', '.join(quote(v) for v in values))
        locs += '  }\n'
        at = text.index('server {\n') + len('server {\n')
        text = text[:at] + locs + text[at:]
        text += 'upstream "app" {\n  servers = {%s}\n}\n' % quote(o.addr)
        with open(c.conf_path, 'w') as f:
            f.write(text)
        c.start()
        return c

    def test_set_append_remove_with_variables(self):
        o = self.origin()
        c = self.start_rules(o, {
            'proxy_set_header': [
                'Host backend.internal',
                'X-Real-IP $remote_addr',
                'X-Forwarded-For $remote_addr',
                'X-Original-URI $request_uri',
                'X-Scheme $scheme',
                'X-Host $host',
                'Accept-Encoding',
                'X-Empty $http_x_none'],
            'proxy_append_header': ['X-Tag a-$uri', 'X-Tag b']})
        with c.connect() as conn:
            local = conn.sock.getsockname()
            conn.send(build_request('/app/echo?q=1', host='site.test',
                                    headers=[
                'Accept-Encoding: gzip', 'X-Forwarded-For: 6.6.6.6',
                'X-Tag: client', 'X-Empty: from-client']))
            r = conn.read_response()
        self.assertEqual(r.status, 200, r)
        req, h = self.received(o, '/app/echo')
        names = [k.lower() for k, _ in req['headers']]
        self.assertEqual(h['host'], 'backend.internal')
        self.assertEqual(names.count('host'), 1, req['headers'])
        self.assertEqual(h['x-real-ip'], local[0])
        self.assertEqual(h['x-forwarded-for'], '127.0.0.1')
        self.assertEqual(names.count('x-forwarded-for'), 1)
        self.assertEqual(h['x-original-uri'], '/app/echo?q=1')
        self.assertEqual(h['x-scheme'], 'http')
        self.assertEqual(h['x-host'], 'site.test')
        self.assertNotIn('accept-encoding', names)
        self.assertNotIn('x-empty', names)
        # Appended: the client's line stays, the location's follow.
        self.assertEqual([v for k, v in req['headers']
                          if k.lower() == 'x-tag'],
                         ['client', 'a-/app/echo', 'b'])
        # Corral's own X-Forwarded-Proto is still there.
        self.assertEqual(h['x-forwarded-proto'], 'http')

    def test_config_errors(self):
        for rule, what in (
                ('"Content-Length 5"', 'corral sets Content-Length itself'),
                ('"Host"', 'a request needs a Host'),
                ('"X-A $nope"', 'unknown variable'),
                ('"Bad:Name x"', 'expected "Name value"')):
            with self.subTest(rule=rule):
                c = self.make()
                text = c.config_text().replace(
                    'server {\n', 'server {\n  location "/a/" {\n'
                    '    proxy = "app"\n    proxy_set_header = {%s}\n'
                    '  }\n' % rule, 1)
                text += 'upstream "app" {\n  servers = {"127.0.0.1:9"}\n}\n'
                with open(c.conf_path, 'w') as f:
                    f.write(text)
                t = c.check_config()
                self.assertNotEqual(t.returncode, 0)
                self.assertIn(what, t.stderr)
                self.assertIn('corral.conf:', t.stderr)
