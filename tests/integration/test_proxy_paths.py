"""
The path a proxied request takes upstream: proxy_path replaces the
location's prefix, as nginx's "proxy_pass http://backend/;" does, with
the query kept and what follows the prefix passed as the client wrote
it (or escaped again when the client escaped the prefix itself).
"""
from harness import quote
from origin import Origin
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
