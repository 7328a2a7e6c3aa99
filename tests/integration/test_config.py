"""Command line and configuration checking."""

import os
import re
import socket
import subprocess

from harness import (BIN, MIME_TYPES, SRCDIR, VERSION, CorralTestCase,
                     read_text, wait_until)


class ConfigTest(CorralTestCase):

    def write_conf(self, c, text):
        with open(c.conf_path, 'w') as f:
            f.write(text)
        return c.conf_path

    def body(self, c):
        """The harness config without its first two lines."""
        return c.config_text().split('\n', 2)[2]

    def assertConfigError(self, p, path, line=None):
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        first = p.stderr.splitlines()[0] if p.stderr else ''
        if line is None:
            self.assertRegex(first, r'^corral: %s(:\d+)?: \S' %
                             re.escape(path))
        else:
            self.assertRegex(first, r'^corral: %s:%d: \S' %
                             (re.escape(path), line))

    def test_version(self):
        p = subprocess.run([BIN, '-V'], capture_output=True, text=True,
                           timeout=10)
        self.assertEqual(p.returncode, 0)
        self.assertIn(VERSION, p.stdout + p.stderr)

    def test_check_good_config(self):
        c = self.make()
        p = c.check_config()
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_check_does_not_start(self):
        c = self.make()
        self.assertEqual(c.check_config().returncode, 0)
        with self.assertRaises(OSError):
            socket.create_connection(('127.0.0.1', c.port), timeout=2)

    def test_unknown_directive_line_3(self):
        c = self.make()
        path = self.write_conf(c, 'workers = 1\nlog_level = "info"\n'
                               'no_such_directive = 5\n' + self.body(c))
        self.assertConfigError(c.check_config(), path, 3)

    def test_bad_values(self):
        c = self.make()
        cases = ['workers = abc',
                 'workers = 0',
                 'max_body_size = 10q',
                 'max_request_line = k',
                 'keepalive_timeout = 5x',
                 'header_timeout = -1s',
                 'log_level = "loud"',
                 'server_tokens = maybe',
                 'listen = {"127.0.0.1:99999"}',
                 'listen = {"not an address"}']
        for bad in cases:
            with self.subTest(bad=bad):
                path = self.write_conf(c, 'workers = 1\n' + bad + '\n' +
                                       self.body(c))
                self.assertConfigError(c.check_config(), path, 2)

    def test_syntax_error(self):
        c = self.make()
        path = self.write_conf(c, 'workers = 1\n\nserver {\n  root = \n')
        self.assertConfigError(c.check_config(), path)

    def test_missing_root(self):
        c = self.make(server={'root': None})
        self.assertNotIn('root', c.config_text())
        self.assertConfigError(c.check_config(), c.conf_path)

    def test_no_server_block(self):
        c = self.make()
        text = c.config_text()
        path = self.write_conf(c, text[:text.index('server {')])
        self.assertConfigError(c.check_config(), path)

    def test_missing_file(self):
        c = self.make()
        path = os.path.join(c.tmp, 'nope.conf')
        p = c.check_config(path)
        self.assertEqual(p.returncode, 1)
        self.assertTrue(p.stderr.startswith('corral: '), p.stderr)
        self.assertIn('nope.conf', p.stderr)

    def test_units(self):
        c = self.make(max_body_size='2g', max_header_size='64k',
                      keepalive_timeout='1500ms', header_timeout='2m',
                      body_timeout='1h', send_timeout='1d',
                      lingering_timeout='30', file_cache_valid='500ms')
        p = c.check_config()
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_shipped_config(self):
        conf = os.path.join(SRCDIR, 'etc', 'corral.conf')
        self.assertTrue(os.path.exists(conf), conf)
        p = subprocess.run([BIN, '-t', '-c', conf], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_start_with_bad_config(self):
        c = self.make()
        path = self.write_conf(c, 'workers = 1\nlog_level = "info"\n'
                               'no_such_directive = 5\n' + self.body(c))
        p = subprocess.run([BIN, '-f', '-c', path], capture_output=True,
                           text=True, timeout=30)
        self.assertConfigError(p, path, 3)
        with self.assertRaises(OSError):
            socket.create_connection(('127.0.0.1', c.port), timeout=2)

    def test_listen_port_in_use(self):
        busy = socket.socket()
        busy.bind(('127.0.0.1', 0))
        busy.listen(1)
        self.addCleanup(busy.close)
        c = self.make(listen=['127.0.0.1:%d' % busy.getsockname()[1]])
        p = subprocess.run([BIN, '-f', '-c', c.conf_path],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 1)
        said = p.stderr + read_text(c.error_log)
        self.assertRegex(said, r'(?i)address already in use|bind')

    def test_relative_paths(self):
        c = self.make(error_log='logs/error.log', log_level='debug',
                      mime_types=None,
                      server={'root': 'site', 'access_log': 'logs/access.log'})
        os.mkdir(os.path.join(c.tmp, 'logs'))
        c.write('index.html', b'relative\n', root=c.docroot('site'))
        c.directives['mime_types'] = 'mime.types'
        with open(MIME_TYPES, 'rb') as src, \
                open(os.path.join(c.tmp, 'mime.types'), 'wb') as dst:
            dst.write(src.read())
        self.write_conf(c, c.config_text())
        c.error_log = os.path.join(c.tmp, 'logs', 'error.log')
        c.cwd = '/'
        c.start()
        r = c.get('/index.html')
        self.assertBody(r, b'relative\n')
        self.assertEqual(r.header('Content-Type'), 'text/html; charset=utf-8')
        self.assertTrue(wait_until(lambda: 'accept' in c.log(), 5))
        c.stop()
        self.assertIn('/index.html',
                      read_text(os.path.join(c.tmp, 'logs', 'access.log')))

    def test_log_level_error_hides_info(self):
        c = self.start(log_level='error')
        c.write('index.html', b'x')
        with c.connect() as conn:
            conn.send(b'GET / HTTP/1.1\r\n\r\n')	# no Host: 400
            self.assertEqual(conn.read_response().status, 400)
        self.assertEqual(c.get('/index.html').status, 200)
        c.stop()
        self.assertNotRegex(c.log(), r'\[(info|debug|notice)\]')

    def test_bad_mime_types_file(self):
        c = self.make(mime_types='/nonexistent/mime.types')
        p = c.check_config()
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn('mime.types', p.stderr)
