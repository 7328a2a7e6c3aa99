"""
Upstreams over TLS: servers = {"https://..."} (or tls = on), the peer's
certificate verified by default (tls_trusted_certificate, or the
system's CAs; tls_verify = off), tls_name sent in SNI and checked, the
address checked when there is no name, kept-alive TLS connections
reused from the pool, sessions resumed on new connections, and what
corral -t says of a bad setup.  The origins are real TLS servers the
tests start: origin.py over Python's ssl (it records SNI, handshakes
and resumptions) and corral itself.
"""

import json
import os
import re
import ssl
import subprocess

import tls_pki
from harness import BIN, CorralTestCase, Raw, free_port, quote, wait_until
from origin import body


def server_ctx(crt, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(crt, key)
    return ctx


class UpstreamTLSTest(CorralTestCase):

    def tls_origin(self, name='backend.test', ips=()):
        crt, key = tls_pki.shared().leaf(name, ips=ips)
        o = self.origin(tls=server_ctx(crt, key))
        return o

    def front(self, servers, start=True, workers=1, **upstream):
        up = {'servers': servers, 'keepalive': 8}
        if 'ca' in upstream:
            ca = upstream.pop('ca')
            if ca is not None:
                up['tls_trusted_certificate'] = Raw(quote(ca))
        else:
            up['tls_trusted_certificate'] = Raw(quote(tls_pki.shared().ca))
        for k, v in upstream.items():
            up[k] = Raw(quote(v)) if k == 'tls_name' else v
        c = self.make(workers=workers, **{'upstream "app"': up})
        c.servers[0]['location "/api/"'] = {'proxy': Raw(quote('app'))}
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        if start:
            c.start()
        return c

    def test_https_peer_verified_with_sni(self):
        o = self.tls_origin()
        c = self.front(['https://%s' % o.addr], tls_name='backend.test')
        r = c.get('/api/echo', headers=[('X-Test', 'one')])
        self.assertEqual(r.status, 200, r)
        seen = json.loads(r.body)
        self.assertEqual(seen['target'], '/api/echo')
        self.assertIn(['X-Test', 'one'], seen['headers'])
        self.assertEqual(o.sni, ['backend.test'])
        # Bodies both ways, byte-exact through the sessions: a megabyte
        # comes in records, many of them decrypted past one read.
        self.assertBody(c.get('/api/size/1048576'), body(1048576))
        r = c.get('/api/chunked/300000')
        self.assertEqual((r.status, r.body), (200, body(300000)))
        data = bytes(range(256)) * 800
        r = c.get('/api/echo', method='POST', body=data,
                  headers=[('Content-Length', str(len(data)))])
        self.assertEqual(r.status, 200, r)
        self.assertEqual(json.loads(r.body)['body'].encode('latin-1'), data)
        self.assertNoLogErrors(c)

    def test_a_server_written_by_name(self):
        # "https://localhost:PORT": resolved at load (its IPv4 address
        # first), and the name is SNI and what the certificate must carry.
        o = self.tls_origin('localhost')
        c = self.front(['https://localhost:%d' % o.port])
        r = c.get('/api/name')
        self.assertEqual((r.status, r.body), (200, b'origin'))
        self.assertEqual(o.sni, ['localhost'])
        # tls_name still wins over the written name.
        c2 = self.front(['https://localhost:%d' % o.port],
                        tls_name='backend.test')
        self.assertEqual(c2.get('/api/name').status, 502)
        c2.wait_log(r'upstream localhost:%d: TLS handshake: certificate '
                    r'verify failed: hostname mismatch' % o.port)

    def test_tls_flag_on_the_group(self):
        o = self.tls_origin()
        c = self.front([o.addr], tls=True, tls_name='backend.test')
        r = c.get('/api/name')
        self.assertEqual((r.status, r.body), (200, b'origin'))
        self.assertEqual(o.handshakes, 1)

    def test_kept_alive_tls_connections_are_reused(self):
        o = self.tls_origin()
        c = self.front(['https://%s' % o.addr], tls_name='backend.test')
        for i in range(20):
            r = c.get('/api/size/%d' % (100 + i))
            self.assertBody(r, body(100 + i))
        # One connection, one handshake, for the twenty.
        self.assertEqual((o.connections, o.handshakes), (1, 1))

    def test_new_connections_resume_the_session(self):
        o = self.tls_origin()
        c = self.front(['https://%s' % o.addr], tls_name='backend.test',
                       keepalive=0)
        for i in range(5):
            self.assertEqual(c.get('/api/x').status, 200)
        # No pool: five connections, the first one in full, the others
        # resumed with what the origin gave.
        self.assertEqual((o.connections, o.handshakes, o.resumed),
                         (5, 5, 4))
        c2 = self.front(['https://%s' % o.addr], tls_name='backend.test',
                        keepalive=0, tls_session_reuse=False)
        for i in range(3):
            self.assertEqual(c2.get('/api/x').status, 200)
        self.assertEqual((o.handshakes, o.resumed), (8, 4))

    def test_verification_is_on_by_default(self):
        o = self.tls_origin()
        # The test CA is not one the system trusts.
        c = self.front(['https://%s' % o.addr], tls_name='backend.test',
                       ca=None)
        r = c.get('/api/x')
        self.assertEqual(r.status, 502)
        c.wait_log(r'\[error\].*upstream %s: TLS handshake: certificate '
                   r'verify failed: unable to get local issuer'
                   % re.escape(o.addr))
        self.assertEqual(o.count('/api/x'), 0)
        # tls_verify = off: whoever answers.
        c = self.front(['https://%s' % o.addr], tls_name='backend.test',
                       ca=None, tls_verify=False)
        self.assertEqual(c.get('/api/x').status, 200)
        self.assertEqual(o.count('/api/x'), 1)

    def test_a_certificate_for_another_name_is_refused(self):
        o = self.tls_origin('other.test')
        c = self.front(['https://%s' % o.addr], tls_name='backend.test')
        self.assertEqual(c.get('/api/x').status, 502)
        c.wait_log(r'\[error\].*TLS handshake: certificate verify failed: '
                   r'hostname mismatch')
        self.assertEqual(o.count('/api/x'), 0)

    def test_without_a_name_the_address_is_checked(self):
        # No tls_name: the certificate must carry the peer's address,
        # and no SNI goes out (it takes names only).
        o = self.tls_origin('backend.test', ips=('127.0.0.1',))
        c = self.front(['https://%s' % o.addr])
        self.assertEqual(c.get('/api/x').status, 200)
        self.assertEqual(o.sni, [None])
        o2 = self.tls_origin('backend.test')
        c2 = self.front(['https://%s' % o2.addr])
        self.assertEqual(c2.get('/api/x').status, 502)
        c2.wait_log(r'certificate verify failed: IP address mismatch')

    def test_corral_as_the_tls_origin(self):
        # corral itself: SNI picks the certificate of tls_name (the
        # default server's is for another name, which would not verify),
        # and Host, passed on as the client sent it, the server block.
        pki = tls_pki.shared()
        crt, key = pki.leaf('backend.test')
        dcrt, dkey = pki.leaf('default.test')
        tport = free_port()
        origin = self.make(
            listen=['127.0.0.1:%d' % free_port(), '127.0.0.1:%d tls' % tport],
            server={'names': ['default.test'], 'tls_certificate': dcrt,
                    'tls_certificate_key': dkey},
            vhosts=[{'names': ['backend.test'], 'root': 'backend',
                     'tls_certificate': crt, 'tls_certificate_key': key}])
        origin.directives['listen'][0] = '127.0.0.1:%d' % origin.port
        origin.directives['stats_file'] = Raw(quote(os.path.join(
            origin.tmp, 'corral.stats')))
        origin.write('api/who', 'default\n')
        origin.write('api/who', 'backend\n', root=origin.docroot('backend'))
        with open(origin.conf_path, 'w') as f:
            f.write(origin.config_text())
        origin.start()
        c = self.front(['https://127.0.0.1:%d' % tport],
                       tls_name='backend.test')
        for _ in range(3):
            r = c.get('/api/who', host='backend.test')
            self.assertEqual((r.status, r.body), (200, b'backend\n'))
        # Three requests on one kept-alive connection: one handshake.
        def tls_counts():
            out = subprocess.run([BIN, '-s', '-j', '-c', origin.conf_path],
                                 capture_output=True, text=True, timeout=10)
            return json.loads(out.stdout).get('tls') if \
                out.returncode == 0 else out.stderr
        want = {'handshakes_full': 1, 'handshakes_resumed': 0,
                'handshakes_failed': 0, 'idle_buffers_kept': 0}
        self.assertTrue(wait_until(lambda: tls_counts() == want, 5),
                        tls_counts())

    def test_check_reports_bad_tls_settings(self):
        o = self.tls_origin()
        missing = os.path.join('/nonexistent', 'ca.pem')
        c = self.front(['https://%s' % o.addr], start=False, ca=missing)
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        line = next(n for n, l in enumerate(open(c.conf_path), 1)
                    if 'tls_trusted_certificate' in l)
        self.assertIn('%s:%d: tls_trusted_certificate "%s": No such file'
                      % (c.conf_path, line, missing), out.stderr)
        garbage = os.path.join(c.tmp, 'garbage.pem')
        with open(garbage, 'w') as f:
            f.write('not a certificate\n')
        c = self.front(['https://%s' % o.addr], start=False, ca=garbage)
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertIn('tls_trusted_certificate: no PEM certificate in "%s"'
                      % garbage, out.stderr)
        c = self.front(['https://unix:%s' % os.path.join(c.tmp, 'a.sock')],
                       start=False)
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertIn('over TLS needs tls_name', out.stderr)
        c = self.front(['https://%s' % o.addr], start=False,
                       protocol='fastcgi')
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertIn('TLS (https://) is for protocol http only',
                      out.stderr)
