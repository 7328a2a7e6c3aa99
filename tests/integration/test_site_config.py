"""
The site configuration as a file: listen per server and default_server,
include() of conf.d/*.conf, the built-in MIME table, and the mistakes
corral -t reports with their file and line (a reload with one keeps the
old config).
"""

import os
import signal
import socket
import textwrap
import unittest

from harness import (CorralTestCase, Conn, build_request, free_port,
                     parse_response, quote, wait_until, IO_TIMEOUT)


def get(port, path='/', host='localhost', addr='127.0.0.1'):
    with Conn(port, host=addr) as c:
        c.send(build_request(path, host=host))
        return c.read_response()


class ListenTest(CorralTestCase):

    def test_two_sites_on_two_ports_one_loopback_only(self):
        p2 = free_port()
        c = self.make(vhosts=[{'names': ['public.example'], 'root': 'pub',
                               '_raw': '  listen = {"*:%d"}\n' % p2}])
        # The first server keeps the global listen: 127.0.0.1 only.
        c.write('/who', 'internal')
        c.write('/who', 'public', root=c.docroot('pub'))
        c.start()
        wait_until(lambda: self._up(p2), 5)
        self.assertEqual(get(c.port, '/who').body, b'internal')
        self.assertEqual(get(p2, '/who').body, b'public')
        # A name is matched among the servers of that address only.
        self.assertEqual(get(c.port, '/who', host='public.example').body,
                         b'internal')
        self.assertEqual(get(p2, '/who', host='localhost').body, b'public')
        self.assertEqual(get(p2, '/who', addr='127.0.0.2').body, b'public')
        with self.assertRaises(OSError):
            socket.create_connection(('127.0.0.2', c.port), timeout=2)

    def _up(self, port):
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            return True
        except OSError:
            return False

    def test_default_server_per_address(self):
        c = self.make(vhosts=[{'names': ['b.example'], 'root': 'b',
                               '_raw': '  listen = {"127.0.0.1:%d '
                               'default_server"}\n' % 0}])
        c.servers[1]['_raw'] = ('  listen = {"127.0.0.1:%d default_server"}'
                                '\n' % c.port)
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.write('/who', 'a')
        c.write('/who', 'b', root=c.docroot('b'))
        c.start()
        self.assertEqual(get(c.port, '/who', host='unknown.example').body,
                         b'b')
        self.assertEqual(get(c.port, '/who', host='localhost').body, b'a')

    def test_listen_mistakes(self):
        p = free_port()
        cases = [
            ('  listen = {"*:%d"}\n' % p, '  listen = {"127.0.0.1:%d"}\n' % p,
             'cannot both be bound'),
            ('  listen = {"127.0.0.1:%d default_server"}\n' % p,
             '  listen = {"127.0.0.1:%d default_server"}\n' % p,
             'two servers are its default_server'),
            ('  listen = {"[::1]:%d"}\n' % p, '  listen = {"[::]:%d"}\n' % p,
             'cannot both be bound'),
            ('  listen = {"[::1]:%d default_server"}\n' % p,
             '  listen = {"[::1]:%d default_server"}\n' % p,
             'two servers are its default_server'),
        ]
        for a, b, why in cases:
            c = self.make(server={'_raw': a},
                          vhosts=[{'names': ['x.example'], 'root': 'x',
                                   '_raw': b}])
            out = c.check_config()
            self.assertEqual(out.returncode, 1, why)
            self.assertIn(why, out.stderr)
        # Apart: another address, port or family on the same port.
        for a, b in (('127.0.0.1:%d' % p, '127.0.0.2:%d' % p),
                     ('127.0.0.1:%d' % p, '*:%d' % free_port()),
                     ('[::1]:%d' % p, '127.0.0.1:%d' % p)):
            c = self.make(server={'_raw': '  listen = {"%s"}\n' % a},
                          vhosts=[{'names': ['x.example'], 'root': 'x',
                                   '_raw': '  listen = {"%s"}\n' % b}])
            out = c.check_config()
            self.assertEqual(out.returncode, 0, (a, b, out.stderr))


class IncludeTest(CorralTestCase):

    def test_include_of_two_files_sorted(self):
        c = self.make(_raw='include("conf.d/*.conf")\n')
        os.makedirs(os.path.join(c.tmp, 'conf.d'))
        p2 = free_port()
        with open(os.path.join(c.tmp, 'conf.d', '20-b.conf'), 'w') as f:
            f.write('# site b\nserver {\n  names = {"b.example"}\n'
                    '  root = "b"\n  return = "200 site b"\n}\n')
        with open(os.path.join(c.tmp, 'conf.d', '10-a.conf'), 'w') as f:
            f.write('server {\n  names = {"a.example"}\n  root = "a"\n'
                    '  listen = {"127.0.0.1:%d"}\n'
                    '  return = "200 site a"\n}\n' % p2)
        c.docroot('a')
        c.docroot('b')
        c.start()
        self.assertEqual(get(c.port, host='b.example').body, b'site b')
        self.assertEqual(get(p2, host='anything').body, b'site a')

    def test_errors_name_the_included_file_and_line(self):
        c = self.make(_raw='include("sites/*.conf")\n')
        os.makedirs(os.path.join(c.tmp, 'sites'))
        bad = os.path.join(c.tmp, 'sites', 'x.conf')
        with open(bad, 'w') as f:
            f.write('# one\n# two\nserver {\n  root = "."\n'
                    '  location "~ (" { }\n}\n')
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r'sites/x\.conf:5: location "~ \(": '
                         r'bad regular expression "\(" at offset 1')
        # The main file's lines after the include are still right.
        c2 = self.make(_raw='include("sites/*.conf")\nworkers = zero\n')
        os.makedirs(os.path.join(c2.tmp, 'sites'))
        with open(os.path.join(c2.tmp, 'sites', 'a.conf'), 'w') as f:
            f.write('# a\n# b\n# c\n')
        out = c2.check_config()
        self.assertEqual(out.returncode, 1)
        with open(c2.conf_path) as f:
            line = f.read().splitlines().index('workers = zero') + 1
        self.assertIn('corral.conf:%d: invalid number' % line, out.stderr)

    def test_start_checks_name_the_file_and_line_after_an_include(self):
        # The checks made when files are opened (pid_file's folder) name
        # the line of the file it was written in, not of the joined text.
        c = self.make(_raw='include("sites/*.conf")\n'
                      'pid_file = "/nonexistent/corral.pid"\n')
        os.makedirs(os.path.join(c.tmp, 'sites'))
        with open(os.path.join(c.tmp, 'sites', 'a.conf'), 'w') as f:
            f.write('# a\n# b\n# c\n')
        with open(c.conf_path) as f:
            line = f.read().splitlines().index(
                'pid_file = "/nonexistent/corral.pid"') + 1
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertIn('corral.conf:%d: pid_file' % line, out.stderr)
        c2 = self.make(_raw='include("sites/*.conf")\n')
        os.makedirs(os.path.join(c2.tmp, 'sites'))
        with open(os.path.join(c2.tmp, 'sites', 'a.conf'), 'w') as f:
            f.write('# a\n\npid_file = "/nonexistent/corral.pid"\n')
        out = c2.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r'sites/a\.conf:3: pid_file')

    def test_glob_matching_nothing_warns_missing_file_fails(self):
        c = self.make(_raw='include("none.d/*.conf")\n')
        out = c.check_config()
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn('matches no file', out.stderr)
        c = self.make(_raw='include("missing.conf")\n')
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertIn('missing.conf": No such file', out.stderr)

    def test_include_loop(self):
        c = self.make(_raw='include("self.conf")\n')
        with open(os.path.join(c.tmp, 'self.conf'), 'w') as f:
            f.write('include("self.conf")\n')
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertIn('nested more than', out.stderr)


class CheckTest(CorralTestCase):
    """What -t reports, with the file and line."""

    def check(self, raw, want, top=''):
        c = self.make(server={'_raw': raw}, _raw=top)
        out = c.check_config()
        self.assertEqual(out.returncode, 1, raw)
        with open(c.conf_path) as f:
            lines = f.read().splitlines()
        self.assertRegex(out.stderr, r'corral\.conf:\d+: ')
        self.assertIn(want, out.stderr)
        return out.stderr

    def test_mistakes(self):
        self.check('  location "~ a(b" { }\n',
                   'bad regular expression "a(b" at offset 3')
        self.check('  return = "301 https://$hots$uri"\n',
                   'unknown variable "$hots", at offset 8')
        self.check('  rewrite = {"^/(a) /$2 last"}\n', '"$2" at offset 1')
        self.check('  location "/s/" { alias = "/nonexistent/dir/" }\n',
                   'alias "/nonexistent/dir/": No such file')
        self.check('  limit_req = "nozone"\n',
                   'no limit_zone is named "nozone"')
        self.check('  try_files = {"$uri"}\n', 'try_files needs')
        self.check('  error_page = {"404"}\n', 'invalid error_page')
        self.check('  add_header = {"Bad Name: x"}\n', 'invalid add_header')
        self.check('  expires = "soon"\n', 'invalid expires')
        self.check('  location "static" { }\n', "must start with '/'")
        self.check('', 'limit_zone "z" ending here has no rate',
                   top='limit_zone "z" {\n  key = "$remote_addr"\n}\n')

    def test_reload_with_a_mistake_keeps_the_old_config(self):
        c = self.start(server={'_raw': '  return = "200 old"\n'})
        self.assertEqual(c.get().body, b'old')
        with open(c.conf_path) as f:
            text = f.read()
        with open(c.conf_path, 'w') as f:
            f.write(text.replace('"200 old"', '"200 $nope"'))
        os.kill(c.master_pid, signal.SIGHUP)
        c.wait_log(r'unknown variable "\$nope"')
        self.assertEqual(c.get().body, b'old')


class MimeTest(CorralTestCase):

    def test_no_mime_types_uses_the_built_in_table(self):
        c = self.make(mime_types=None)
        for name in ['a.css', 'a.html', 'a.js', 'a.png', 'a.svg', 'a.json',
                     'a.woff2', 'a.unknownext']:
            c.write('/' + name, 'x')
        c.start()
        want = {'a.css': 'text/css', 'a.html': 'text/html',
                'a.png': 'image/png', 'a.svg': 'image/svg+xml',
                'a.woff2': 'font/woff2',
                'a.unknownext': 'application/octet-stream'}
        for name, t in want.items():
            got = c.get('/' + name).header('Content-Type')
            self.assertEqual(got.split(';')[0], t, name)
        self.assertIn('javascript', c.get('/a.js').header('Content-Type'))


if __name__ == '__main__':
    unittest.main()
