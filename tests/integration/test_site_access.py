"""
Access control: allow/deny by address (IPv4 and IPv6 clients) and HTTP
Basic authentication against a file made by htpasswd, on the real server.
"""

import base64
import os
import signal
import socket
import subprocess
import unittest

from harness import (CorralTestCase, build_request, need_tool, parse_response,
                     quote, wait_for, wait_until, IO_TIMEOUT)


def loc(title, *lines):
    return '  location %s {\n%s\n  }\n' % (
        quote(title), '\n'.join('    ' + l for l in lines))


def get_from(addr, port, path, family=socket.AF_INET, headers=()):
    """One GET from a chosen source address; returns the response."""
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(IO_TIMEOUT)
    try:
        s.bind((addr, 0))
        dst = '127.0.0.1' if family == socket.AF_INET else '::1'
        s.connect((dst, port))
        s.sendall(build_request(path, headers=headers))
        buf = bytearray()
        while True:
            r = parse_response(buf, 'GET', False)
            if r:
                return r[0]
            chunk = s.recv(65536)
            if not chunk:
                return parse_response(buf, 'GET', True)[0]
            buf += chunk
    finally:
        s.close()


def have_ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(('::1', 0))
        s.close()
        return True
    except OSError:
        return False


class AllowDenyTest(CorralTestCase):

    def test_ipv4_first_match_wins(self):
        c = self.make(server={'_raw': loc(
            '/admin/', 'allow = {"127.0.0.1", "10.0.0.0/8"}',
            'deny = {"all"}') + loc(
            '/public/', 'deny = {"127.0.0.2"}')})
        c.write('/admin/x', 'admin')
        c.write('/public/x', 'public')
        c.start()
        self.assertBody(get_from('127.0.0.1', c.port, '/admin/x'), b'admin')
        r = get_from('127.0.0.2', c.port, '/admin/x')
        self.assertEqual(r.status, 403)
        self.assertNotIn(b'admin', r.body)
        self.assertBody(get_from('127.0.0.1', c.port, '/public/x'),
                        b'public')
        self.assertEqual(get_from('127.0.0.2', c.port, '/public/x').status,
                         403)
        c.wait_log(r'client 127\.0\.0\.2: access forbidden by rule')

    @unittest.skipUnless(have_ipv6_loopback(), 'no IPv6 loopback')
    def test_ipv6_clients(self):
        port = None
        c = self.make(server={'_raw': loc(
            '/v6/', 'allow = {"::1/128"}', 'deny = {"all"}') + loc(
            '/no6/', 'deny = {"::/0"}')})
        c.directives['listen'] = ['127.0.0.1:%d' % c.port,
                                  '[::1]:%d' % c.port]
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.write('/v6/x', 'six')
        c.write('/no6/x', 'four only')
        c.start()
        port = c.port

        def up6():
            try:
                socket.create_connection(('::1', port), timeout=1).close()
                return True
            except OSError:
                return False
        # start() waits for the IPv4 address only.
        self.assertTrue(wait_until(up6, 5), 'no listener on [::1]:%d\n%s'
                        % (port, c.diagnostics()))
        self.assertBody(get_from('::1', port, '/v6/x', socket.AF_INET6),
                        b'six')
        self.assertEqual(get_from('127.0.0.1', port, '/v6/x').status, 403)
        self.assertEqual(get_from('::1', port, '/no6/x',
                                  socket.AF_INET6).status, 403)
        self.assertBody(get_from('127.0.0.1', port, '/no6/x'), b'four only')

    def test_bad_rules_are_config_errors(self):
        for rule, why in [('allow = {"10.0.0.1/8"}', 'host bits'),
                          ('deny = {"300.1.1.1"}', 'invalid deny'),
                          ('allow = {"::1/129"}', 'invalid allow')]:
            c = self.make(server={'_raw': '  ' + rule + '\n'})
            out = c.check_config()
            self.assertEqual(out.returncode, 1, rule)
            self.assertIn('corral.conf:', out.stderr)
            self.assertIn(why.split()[0], out.stderr)


class AuthBasicTest(CorralTestCase):

    def setUp(self):
        self.htpasswd = need_tool('htpasswd')

    def make_users(self, c, *users, flag='-B'):
        path = os.path.join(c.tmp, 'htpasswd')
        for i, (u, p) in enumerate(users):
            args = [self.htpasswd, '-b', flag] + (['-c'] if i == 0 else [])
            subprocess.run(args + [path, u, p], check=True,
                           capture_output=True)
        return path

    def auth(self, user, password):
        tok = base64.b64encode(('%s:%s' % (user, password)).encode())
        return ['Authorization: Basic ' + tok.decode()]

    def site(self, path):
        c = self.make(server={'_raw': loc(
            '/admin/', 'auth_basic = "Admin area"',
            'auth_basic_user_file = %s' % quote(path))})
        c.write('/admin/x', 'secret page')
        c.write('/open', 'open')
        return c

    def test_right_wrong_and_missing_password(self):
        c = self.make()
        path = self.make_users(c, ('alice', 's3cret'), ('bob', 'hunter2'))
        c = self.site(path)
        c.start()
        r = c.get('/admin/x')
        self.assertEqual(r.status, 401)
        self.assertEqual(r.header('WWW-Authenticate'),
                         'Basic realm="Admin area", charset="UTF-8"')
        self.assertNotIn(b'secret page', r.body)
        r = c.get('/admin/x', headers=self.auth('alice', 'wrong'))
        self.assertEqual(r.status, 401)
        r = c.get('/admin/x', headers=self.auth('mallory', 's3cret'))
        self.assertEqual(r.status, 401)
        self.assertBody(c.get('/admin/x', headers=self.auth('alice',
                                                            's3cret')),
                        b'secret page')
        # Twice, so the remembered verification is used too.
        self.assertBody(c.get('/admin/x', headers=self.auth('bob',
                                                            'hunter2')),
                        b'secret page')
        self.assertBody(c.get('/admin/x', headers=self.auth('bob',
                                                            'hunter2')),
                        b'secret page')
        self.assertBody(c.get('/open'), b'open')
        for bad in ['Basic !!!', 'Bearer abc', 'Basic ' +
                    base64.b64encode(b'nocolon').decode()]:
            r = c.get('/admin/x', headers=['Authorization: ' + bad])
            self.assertEqual(r.status, 401, bad)
        c.wait_log(r'user "alice": password mismatch')

    def test_sha512_crypt_accepted(self):
        c = self.make()
        path = os.path.join(c.tmp, 'htpasswd')
        h = subprocess.run(['python3', '-c', 'import crypt;print(crypt.crypt('
                            '"pw", crypt.mksalt(crypt.METHOD_SHA512)))'],
                           capture_output=True, text=True)
        if h.returncode != 0:
            self.skipTest('no crypt module to make a $6$ hash')
        with open(path, 'w') as f:
            f.write('# users\n\ncarol:%s\n' % h.stdout.strip())
        c = self.site(path)
        c.start()
        self.assertBody(c.get('/admin/x', headers=self.auth('carol', 'pw')),
                        b'secret page')

    def test_weak_hashes_refused_at_check(self):
        for flag, why in [('-m', 'MD5'), ('-d', 'plain crypt'),
                          ('-s', 'SHA-1'), ('-p', 'clear text')]:
            c = self.make()
            path = self.make_users(c, ('alice', 'pw'), flag=flag)
            c = self.site(path)
            out = c.check_config()
            self.assertEqual(out.returncode, 1, flag)
            self.assertIn('htpasswd:1: the password of "alice"', out.stderr)
            self.assertIn(why, out.stderr)
            self.assertIn('htpasswd -B', out.stderr)

    def test_unreadable_file_is_an_error_with_line(self):
        c = self.make()
        c = self.site(os.path.join(c.tmp, 'missing'))
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r'corral\.conf:\d+: auth_basic_user_file'
                         r' ".*missing": No such file')

    def test_file_reread_on_reload(self):
        c = self.make()
        path = self.make_users(c, ('alice', 'one'))
        c = self.site(path)
        c.start()
        self.assertEqual(c.get('/admin/x', headers=self.auth('alice',
                                                             'one')).status,
                         200)
        subprocess.run([self.htpasswd, '-b', '-B', path, 'alice', 'two'],
                       check=True, capture_output=True)
        old = c.wait_workers(1)
        os.kill(c.master_pid, signal.SIGHUP)
        # Once the old generation is gone, only the new file counts.
        c.wait_workers(1, exclude=old)
        self.assertEqual(c.get('/admin/x', headers=self.auth(
            'alice', 'two')).status, 200)
        self.assertEqual(c.get('/admin/x', headers=self.auth(
            'alice', 'one')).status, 401)


if __name__ == '__main__':
    unittest.main()
