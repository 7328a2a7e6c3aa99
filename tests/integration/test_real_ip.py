"""
Clients behind trusted proxies (real_ip_from, as nginx's realip module):
the address a trusted proxy names in X-Forwarded-For (or X-Real-IP) is
the client's for the access log and the upstream, X-Forwarded-For goes
on as that proxy's list with the proxy appended, and X-Forwarded-Proto
is kept from it.  From anyone else both are replaced.  The clients here
connect from 127.0.0.1.
"""
import re
import socket
import struct

from harness import (Conn, build_request, free_port, quote, read_text,
                     wait_until)
from test_proxy import ProxyTestCase


class RealIpTest(ProxyTestCase):

    def start_real_ip(self, o, trusted, **kw):
        kw.setdefault('real_ip_from', trusted)
        return self.start_proxy([o.addr], **kw)

    def upstream_fields(self, c, o, headers, conn=None):
        """(X-Forwarded-For, X-Forwarded-Proto) the origin got."""
        req = build_request('/api/echo', headers=headers)
        if conn is not None:
            conn.send(req)
            r = conn.read_response()
        else:
            r = c.request(req)
        self.assertEqual(r.status, 200, r)
        _, h = self.received(o, '/api/echo')
        return h.get('x-forwarded-for'), h.get('x-forwarded-proto')

    def logged_clients(self, c, n):
        """The client field of the access log's last n lines."""
        lines = []

        def have():
            lines[:] = read_text(c.access_log).splitlines()
            return len(lines) >= n
        self.assertTrue(wait_until(have, 5), 'no access log lines')
        return [l.split(' ', 1)[0] for l in lines[-n:]]

    def test_trusted_proxy_names_the_client(self):
        o = self.origin()
        c = self.start_real_ip(o, ['127.0.0.1'])
        xff, proto = self.upstream_fields(c, o, [
            'X-Forwarded-For: 192.0.2.7', 'X-Forwarded-Proto: https'])
        self.assertEqual(xff, '192.0.2.7, 127.0.0.1')
        self.assertEqual(proto, 'https')
        self.assertEqual(self.logged_clients(c, 1), ['192.0.2.7'])

    def test_untrusted_peer_is_the_client(self):
        o = self.origin()
        c = self.start_real_ip(o, ['10.0.0.0/8', '::1'])
        xff, proto = self.upstream_fields(c, o, [
            'X-Forwarded-For: 192.0.2.7', 'X-Forwarded-Proto: https'])
        self.assertEqual(xff, '127.0.0.1')
        self.assertEqual(proto, 'http')
        self.assertEqual(self.logged_clients(c, 1), ['127.0.0.1'])

    def test_recursive_walks_past_trusted_proxies(self):
        o = self.origin()
        hdr = ['X-Forwarded-For: 203.0.113.5, 10.1.2.3']
        c = self.start_real_ip(o, ['127.0.0.0/8', '10.0.0.0/8'],
                               real_ip_recursive=True)
        xff, _ = self.upstream_fields(c, o, hdr)
        self.assertEqual(xff, '203.0.113.5, 10.1.2.3, 127.0.0.1')
        self.assertEqual(self.logged_clients(c, 1), ['203.0.113.5'])
        c.stop()
        c = self.start_real_ip(o, ['127.0.0.0/8', '10.0.0.0/8'])
        self.upstream_fields(c, o, hdr)
        self.assertEqual(self.logged_clients(c, 1), ['10.1.2.3'])

    def test_many_forwarded_lines_do_not_hide_the_proxys_own(self):
        # A proxy such as HAProxy (option forwardfor) adds a line of its
        # own after the client's: the client's lines, however many, must
        # not push it out of sight.  Here the client claims to be local,
        # which would open the loopback-only status page to it.
        o = self.origin()
        c = self.start_real_ip(o, ['127.0.0.1'], server={
            'location "/status"': {'status': True}})
        for n in (1, 8, 20):
            with self.subTest(lines=n):
                r = c.request(build_request('/status?json', headers=[
                    'X-Forwarded-For: 127.0.0.1'] * n +
                    ['X-Forwarded-For: 192.0.2.7']))
                self.assertEqual(r.status, 403, r)
                self.assertEqual(self.logged_clients(c, 1), ['192.0.2.7'])
        # The proxy's own request still sees the page.
        self.assertEqual(c.get('/status?json').status, 200)

    def test_x_real_ip(self):
        o = self.origin()
        c = self.start_real_ip(o, ['127.0.0.1'],
                               real_ip_header='X-Real-IP')
        self.upstream_fields(c, o, ['X-Real-IP: 2001:db8::9',
                                    'X-Forwarded-For: 192.0.2.1'])
        self.assertEqual(self.logged_clients(c, 1), ['2001:db8::9'])

    def test_each_request_of_a_connection_starts_anew(self):
        o = self.origin()
        c = self.start_real_ip(o, ['127.0.0.1'])
        with Conn(c.port) as conn:
            self.upstream_fields(c, o, ['X-Forwarded-For: 192.0.2.7'],
                                 conn)
            xff, _ = self.upstream_fields(c, o, [], conn)
            self.upstream_fields(c, o, ['X-Forwarded-For: not-an-ip'],
                                 conn)
        self.assertEqual(xff, '127.0.0.1')
        self.assertEqual(self.logged_clients(c, 3),
                         ['192.0.2.7', '127.0.0.1', '127.0.0.1'])

    def test_bad_real_ip_from_names_its_line(self):
        o = self.origin()
        for bad in ('10.0.0.0/33', 'example.com', '::1/129', '10.0.0.0/x',
                    '10.0.0.0/'):
            c = self.make(real_ip_from=[bad])
            p = c.check_config()
            self.assertNotEqual(p.returncode, 0, bad)
            self.assertRegex(p.stderr, r'corral\.conf:\d+: real_ip_from "%s"'
                             % re.escape(bad))


class ProxyProtocolTest(ProxyTestCase):
    """listen "ADDRESS proxy_protocol": each connection starts with a
    PROXY protocol header (v1 or v2) naming the client, as behind HAProxy
    or a cloud load balancer with nginx's "listen ... proxy_protocol"."""

    def start_pp(self, o, **kw):
        c = self.make(**kw)
        c.pp_port = free_port()
        c.directives['listen'].append('127.0.0.1:%d proxy_protocol' %
                                      c.pp_port)
        text = c.config_text()
        at = text.index('server {\n') + len('server {\n')
        text = (text[:at] + '  location "/api/" {\n    proxy = "app"\n'
                '  }\n' + text[at:])
        text += 'upstream "app" {\n  servers = {%s}\n}\n' % quote(o.addr)
        with open(c.conf_path, 'w') as f:
            f.write(text)
        c.start()
        return c

    def xff(self, c, o, first):
        """X-Forwarded-For the origin got for a request after first."""
        with Conn(c.pp_port) as conn:
            conn.send(first + build_request('/api/echo'))
            r = conn.read_response()
        self.assertEqual(r.status, 200, r)
        _, h = self.received(o, '/api/echo')
        return h.get('x-forwarded-for')

    def test_v1_and_v2_name_the_client(self):
        o = self.origin()
        c = self.start_pp(o)
        self.assertEqual(self.xff(c, o, b'PROXY TCP4 203.0.113.7 '
                                  b'127.0.0.1 56324 80\r\n'), '203.0.113.7')
        v2 = (b'\r\n\r\n\x00\r\nQUIT\n' + bytes([0x21, 0x21]) +
              struct.pack('>H', 36) + socket.inet_pton(
                  socket.AF_INET6, '2001:db8::5') + socket.inet_pton(
                  socket.AF_INET6, '::1') + struct.pack('>HH', 4444, 80))
        self.assertEqual(self.xff(c, o, v2), '2001:db8::5')
        # The header alone, its request in a later write: still read.
        with Conn(c.pp_port) as conn:
            conn.send(b'PROXY TCP4 198.51.100.2 127.0.0.1 1 80\r')
            conn.send(b'\n' + build_request('/api/echo'))
            self.assertEqual(conn.read_response().status, 200)
        _, h = self.received(o, '/api/echo')
        self.assertEqual(h.get('x-forwarded-for'), '198.51.100.2')
        self.assertEqual(self.logged_clients(c, 3),
                         ['203.0.113.7', '2001:db8::5', '198.51.100.2'])
        # The plain address is untouched.
        r = c.get('/api/echo')
        self.assertEqual(r.status, 200)
        _, h = self.received(o, '/api/echo')
        self.assertEqual(h.get('x-forwarded-for'), '127.0.0.1')

    def test_missing_or_bad_header_closes(self):
        o = self.origin()
        c = self.start_pp(o)
        for first in (b'', b'PROXY TCP4 300.0.0.1 127.0.0.1 1 80\r\n',
                      b'PROXY BOGUS\r\n'):
            with self.subTest(first=first):
                mark = c.log_mark()
                with Conn(c.pp_port) as conn:
                    conn.send(first + build_request('/api/echo'))
                    self.assertEqual(conn.read_until_close(), b'')
                c.wait_log(r'\[info\].*bad PROXY protocol header',
                           mark=mark)
        self.assertEqual(o.count('/api/echo'), 0)

    logged_clients = RealIpTest.logged_clients
