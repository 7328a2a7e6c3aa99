"""
TLS as clients see it: curl over TLS 1.2 and 1.3, SNI and ALPN, session
resumption in any worker (session IDs, tickets, across a reload and a key
rotation), certificates checked by -t and renewed by a reload, plain HTTP
on a TLS port and TLS on a plain one, a stalled handshake, static files
and the proxy over TLS, and sslscan against the default settings.
"""
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

from harness import (BIN, IO_TIMEOUT, Conn, CorralTestCase, Raw, TLSConn,
                     build_request, free_port, need_tool, parse_byteranges,
                     quote, wait_for, wait_until)
from origin import body
from tls_pki import PKI

PKI_DIR = None
pki = None


def setUpModule():
    global PKI_DIR, pki
    if not shutil.which('openssl'):
        raise unittest.SkipTest('openssl is not installed')
    PKI_DIR = tempfile.mkdtemp(prefix='corral-pki-')
    os.chmod(PKI_DIR, 0o755)
    pki = PKI(PKI_DIR)


def tearDownModule():
    if PKI_DIR and not os.environ.get('CORRAL_KEEP'):
        shutil.rmtree(PKI_DIR, ignore_errors=True)


class TLSTestCase(CorralTestCase):

    def client_ctx(self, alpn=('http/1.1',)):
        ctx = ssl.create_default_context(cafile=pki.ca)
        if alpn:
            ctx.set_alpn_protocols(list(alpn))
        return ctx

    def start_tls(self, cert=None, vhosts=(), tls=None, start=True, **kw):
        """A server with a plain port (c.port) and a TLS one (c.tls_port)."""
        crt, key = cert or pki.leaf('localhost', ('a.test',))
        tport = free_port()
        kw.setdefault('listen', ['127.0.0.1:%d' % 0, '127.0.0.1:%d tls' %
                                 tport])
        server = dict(kw.pop('server', {}))
        server.update(tls_certificate=crt, tls_certificate_key=key)
        if tls is not None:
            kw['tls'] = tls
        c = self.make(server=server, vhosts=vhosts, **kw)
        c.tls_port = tport
        c.directives['listen'][0] = '127.0.0.1:%d' % c.port
        c.rewrite = lambda: open(c.conf_path, 'w').write(c.config_text())
        c.rewrite()
        if start:
            c.start()
            # The harness waited for the plain port only.
            def tls_up():
                try:
                    socket.create_connection(('127.0.0.1', tport),
                                             timeout=1).close()
                    return True
                except OSError:
                    return False
            if not wait_until(tls_up, 5):
                self.fail('TLS port %d does not accept\n%s' %
                          (tport, c.diagnostics()))
        return c

    def tls_get(self, c, path='/', name='localhost', ctx=None, **kw):
        with TLSConn(c.tls_port, ctx or self.client_ctx(), name) as t:
            t.send(build_request(path, host=name, **kw))
            return t.read_response(kw.get('method', 'GET'))

    def s_client(self, c, args=(), sess=None, name='localhost'):
        """One openssl s_client connection with a request; its output."""
        cmd = ['openssl', 's_client', '-connect',
               '127.0.0.1:%d' % c.tls_port, '-servername', name, '-CAfile',
               pki.ca, '-ign_eof'] + list(args)
        if sess is not None:
            if os.path.exists(sess):
                cmd += ['-sess_in', sess]
            cmd += ['-sess_out', sess]
        req = build_request('/', host=name, headers=['Connection: close'])
        out = subprocess.run(cmd, input=req, capture_output=True,
                             timeout=30)
        return out.stdout.decode('latin-1')


class TLSBasicsTest(TLSTestCase):

    def test_curl_tls12_and_tls13(self):
        curl = need_tool('curl')
        c = self.start_tls()
        data = os.urandom(300000)
        c.write('file.bin', data)
        for proto, args in (('TLSv1.3', ['--tlsv1.3']),
                            ('TLSv1.2', ['--tlsv1.2', '--tls-max', '1.2'])):
            out = subprocess.run(
                [curl, '-sS', '-v', '--cacert', pki.ca, '-o', '-'] + args +
                ['https://localhost:%d/file.bin' % c.tls_port],
                capture_output=True, timeout=30)
            err = out.stderr.decode('latin-1')
            self.assertEqual(out.returncode, 0, err)
            self.assertEqual(out.stdout, data)
            self.assertIn('SSL connection using %s' % proto, err)
            self.assertIn('ALPN: server accepted http/1.1', err)
        self.assertNoLogErrors(c)

    def test_sni_picks_the_certificate(self):
        a = pki.leaf('a.test', kind='ec')
        b = pki.leaf('b.test', kind='rsa')
        c = self.start_tls(cert=a, server={'names': ['a.test']}, vhosts=[{
            'names': ['b.test'], 'root': 'b', 'tls_certificate': b[0],
            'tls_certificate_key': b[1]}, {'names': ['c.test'],
                                           'root': 'c'}])
        c.write('who', 'b\n', root=c.docroot('b'))
        c.write('who', 'a\n')
        for name, want in (('a.test', 'a.test'), ('b.test', 'b.test'),
                           ('c.test', 'a.test'), ('unknown.test', 'a.test')):
            ctx = self.client_ctx()
            ctx.check_hostname = False
            with TLSConn(c.tls_port, ctx, name) as t:
                cert = t.sock.getpeercert()
                cn = dict(x[0] for x in cert['subject'])['commonName']
                self.assertEqual(cn, want, name)
                self.assertEqual(t.sock.selected_alpn_protocol(), 'http/1.1')
        self.assertEqual(self.tls_get(c, '/who', 'b.test').body, b'b\n')
        self.assertEqual(self.tls_get(c, '/who', 'a.test').body, b'a\n')
        # RSA and ECDSA both negotiate TLS 1.2 with forward secrecy.
        out = self.s_client(c, ['-tls1_2'], name='b.test')
        self.assertRegex(out, r'Cipher is ECDHE-RSA-')

    def test_static_files_over_tls(self):
        c = self.start_tls()
        big = os.urandom(1 << 20)
        c.write('big.bin', big)
        c.write('small.txt', b'0123456789' * 10)
        with TLSConn(c.tls_port, self.client_ctx()) as t:
            t.send(build_request('/big.bin'))
            self.assertBody(t.read_response(), big)
            t.send(build_request('/big.bin', headers=['Range: bytes=100-199,'
                                                      '-10']))
            r = t.read_response()
            self.assertEqual(r.status, 206)
            parts = parse_byteranges(r)
            self.assertEqual([p[1] for p in parts], [big[100:200], big[-10:]])
            t.send(build_request('/big.bin', method='HEAD'))
            r = t.read_response('HEAD')
            self.assertEqual(r.header('Content-Length'), str(len(big)))
            self.assertEqual(r.body, b'')
            # Pipelined: three requests in one write, answered in order.
            t.send(build_request('/small.txt') * 2 +
                   build_request('/big.bin', headers=['Range: bytes=5-9']))
            r1, r2, r3 = t.read_responses(['GET'] * 3)
            self.assertBody(r1, b'0123456789' * 10)
            self.assertBody(r2, b'0123456789' * 10)
            self.assertEqual((r3.status, r3.body), (206, big[5:10]))
        self.assertNoLogErrors(c)

    def test_ktls_on_and_off_send_the_same_bytes(self):
        data = os.urandom(3 * 1024 * 1024 + 17)
        for ktls in (True, False):
            c = self.start_tls(tls={'ktls': ktls})
            c.write('f.bin', data)
            self.assertBody(self.tls_get(c, '/f.bin'), data)
            # The start says which is in use.
            c.wait_log(r'\[notice\].*TLS: kernel TLS is (available|'
                       r'unavailable|off)')
            if not ktls:
                self.assertRegex(c.log(), r'kernel TLS is off')
            c.stop()

    def test_plain_http_to_the_tls_port(self):
        c = self.start_tls()
        with Conn(c.tls_port) as s:
            s.send(build_request('/'))
            r = s.read_response()
            self.assertEqual(r.status, 400)
            self.assertIn(b'400 Bad Request', r.body)
            self.assertTrue(s.closed_within(IO_TIMEOUT))
        c.wait_log(r'\[info\].*sent plain HTTP to a TLS port')
        self.assertEqual(self.tls_get(c, '/none').status, 404)

    def test_tls_to_the_plain_port(self):
        c = self.start_tls()
        # Left to header_timeout, the handshake would hang for 30 s.
        raw = socket.create_connection(('127.0.0.1', c.port), timeout=20)
        ctx = self.client_ctx()
        t0 = time.monotonic()
        with self.assertRaises((ssl.SSLError, OSError)):
            ctx.wrap_socket(raw, server_hostname='localhost')
        self.assertLess(time.monotonic() - t0, 10)
        raw.close()
        c.wait_log(r'\[info\].*sent a TLS handshake to a plain HTTP port')
        self.assertNotIn('[error]', c.log())

    def test_stalled_handshake_times_out_and_holds_nothing(self):
        curl = need_tool('curl')
        c = self.start_tls(workers=1, tls={'handshake_timeout': Raw('1s')})
        c.write('page', 'ok\n')
        stalled = socket.create_connection(('127.0.0.1', c.tls_port))
        stalled.sendall(b'\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03')
        # The one worker still serves others meanwhile.
        out = subprocess.run([curl, '-sS', '--cacert', pki.ca,
                              'https://localhost:%d/page' % c.tls_port],
                             capture_output=True, timeout=10)
        self.assertEqual(out.stdout, b'ok\n', out.stderr)
        # Without handshake_timeout (1 s), header_timeout (30 s) or never.
        stalled.settimeout(20)
        t0 = time.monotonic()
        self.assertEqual(stalled.recv(100), b'')
        self.assertLess(time.monotonic() - t0, 10)
        stalled.close()
        c.wait_log(r'\[info\].*timed out in the TLS handshake')
        self.assertNoLogErrors(c)

    def test_handshakes_are_counted_and_failures_are_info(self):
        c = self.start_tls(start=False,
                           server={'access_log_format': Raw('timed')})
        stats = os.path.join(c.tmp, 'corral.stats')
        c.directives['stats_file'] = Raw(quote(stats))
        c.rewrite()
        c.start()
        ctx = ssl.create_default_context()	# does not trust our CA
        with self.assertRaises(ssl.SSLError):
            TLSConn(c.tls_port, ctx).close()
        c.wait_log(r'\[info\].*TLS handshake failed')
        self.assertEqual(self.tls_get(c, '/none').status, 404)
        with Conn(c.tls_port) as s:		# plain HTTP: failed too
            s.send(build_request('/'))
            self.assertEqual(s.read_response().status, 400)

        def tls_counts():
            out = subprocess.run([BIN, '-s', '-j', '-c', c.conf_path],
                                 capture_output=True, text=True, timeout=10)
            return json.loads(out.stdout).get('tls') if \
                out.returncode == 0 else out.stderr
        want = {'handshakes_full': 1, 'handshakes_resumed': 0,
                'handshakes_failed': 2, 'idle_buffers_kept': 0}
        got = wait_for(tls_counts, lambda d: d == want, 5)
        self.assertEqual(got, want, tls_counts())
        # The access log says which TLS version the request came over.
        self.assertTrue(wait_until(lambda: re.search(
            r'"GET /none HTTP/1.1" 404 .* tls=TLSv1\.3',
            open(c.access_log).read() if os.path.exists(c.access_log)
            else ''), 5), open(c.access_log).read())
        self.assertNoLogErrors(c)

    def test_idle_connections_keep_their_buffers_briefly(self):
        # Between requests a kept-alive connection keeps OpenSSL's buffers
        # (no allocation per request), at most 32 connections per worker
        # and for a second or two; then they go back, and the connections
        # still work.
        c = self.start_tls(start=False, workers=1)
        c.directives['stats_file'] = Raw(quote(os.path.join(c.tmp,
                                                            'corral.stats')))
        c.rewrite()
        c.start()
        data = os.urandom(5000)
        c.write('f.bin', data)

        def kept():
            out = subprocess.run([BIN, '-s', '-j', '-c', c.conf_path],
                                 capture_output=True, text=True, timeout=10)
            self.assertEqual(out.returncode, 0, out.stderr)
            return json.loads(out.stdout)['tls']['idle_buffers_kept']

        def get(t):
            t.send(build_request('/f.bin'))
            r = t.read_response()
            self.assertEqual((r.status, r.body), (200, data))

        conns = []
        for _ in range(40):
            conns.append(TLSConn(c.tls_port, self.client_ctx()))
            self.addCleanup(conns[-1].close)
        for _ in range(3):
            for t in conns:
                get(t)
            self.assertLessEqual(kept(), 32)
            self.assertTrue(wait_until(lambda: kept() == 0, 10), kept())
        # The last one to go idle keeps them: seen unless reading the
        # counters took a second (then try again).
        seen = []
        for _ in range(3):
            get(conns[0])
            seen.append(kept())
            if seen[-1] == 1:
                break
        self.assertEqual(seen[-1], 1, seen)
        self.assertTrue(wait_until(lambda: kept() == 0, 10), kept())
        get(conns[0])
        self.assertNoLogErrors(c)

    def test_proxy_sees_https(self):
        o = self.origin()
        c = self.start_tls(start=False)
        text = c.config_text()
        at = text.index('server {\n') + len('server {\n')
        text = (text[:at] + '  location "/api/" {\n    proxy = "app"\n  }\n'
                + text[at:] + 'upstream "app" {\n  servers = {%s}\n}\n' %
                quote(o.addr))
        with open(c.conf_path, 'w') as f:
            f.write(text)
        c.start()
        r = self.tls_get(c, '/api/size/70000')
        self.assertBody(r, body(70000))
        hdrs = {k.lower(): v for k, v in o.last('/api/size/70000')['headers']}
        self.assertEqual(hdrs['x-forwarded-proto'], 'https')
        c.get('/api/size/10')
        hdrs = {k.lower(): v for k, v in o.last('/api/size/10')['headers']}
        self.assertEqual(hdrs['x-forwarded-proto'], 'http')


class TLSResumptionTest(TLSTestCase):
    """Resumption must work in any worker: the session is made, every
    worker is killed, and the new ones resume it 50 times."""

    def resume_50(self, args, **kw):
        c = self.start_tls(workers=2, **kw)
        c.write('index.html', 'ok\n')
        sess = os.path.join(c.tmp, 'session.pem')
        out = self.s_client(c, args, sess)
        self.assertRegex(out, r'(?m)^New, ', out)
        self.assertTrue(os.path.getsize(sess) > 0)
        c.expect_worker_death = True
        old = c.wait_workers(2)
        for pid in old:
            os.kill(pid, signal.SIGKILL)
        c.wait_workers(2, exclude=old)
        reused = 0
        for _ in range(50):
            out = self.s_client(c, args, sess)
            reused += bool(re.search(r'(?m)^Reused, ', out))
            self.assertIn('HTTP/1.1 200 OK', out)
        self.assertEqual(reused, 50, out)
        return c

    def test_tls12_session_ids(self):
        self.resume_50(['-tls1_2', '-no_ticket'])

    def test_tls12_session_ids_with_the_cache_off(self):
        # No store: sessions get a mapping of their own.
        self.resume_50(['-tls1_2', '-no_ticket'], cache={'size': 0})

    def test_tls12_tickets(self):
        self.resume_50(['-tls1_2'])

    def test_tls13_tickets(self):
        self.resume_50(['-tls1_3'])

    def test_tls13_stateful_when_tickets_are_off(self):
        self.resume_50(['-tls1_3'], tls={'session_tickets': False})

    def test_a_session_ended_by_a_fatal_alert_resumes_nowhere(self):
        # RFC 5246 7.2.2.  A worker keeps the sessions it decoded; the
        # store, from which the failing worker deletes it, still decides.
        c = self.start_tls(workers=2)
        c.write('index.html', 'ok\n')
        ctx = self.client_ctx()
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ctx.options |= ssl.OP_NO_TICKET

        def connect(sess=None):
            """A TLS 1.2 handshake over a plain socket: (socket, TLS)."""
            s = socket.create_connection(('127.0.0.1', c.tls_port),
                                         timeout=IO_TIMEOUT)
            self.addCleanup(s.close)
            inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
            t = ctx.wrap_bio(inc, out, server_hostname='localhost',
                             session=sess)
            while True:
                try:
                    t.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    s.sendall(out.read())
                    data = s.recv(65536)
                    self.assertTrue(data, 'closed in the handshake')
                    inc.write(data)
            s.sendall(out.read())
            return s, t, inc, out

        def get(sess=None):
            """GET / to the end; whether the session was resumed."""
            s, t, inc, out = connect(sess)
            t.write(build_request('/', headers=['Connection: close']))
            s.sendall(out.read())
            got = b''
            while True:
                data = s.recv(65536)
                if not data:
                    break
                inc.write(data)
                try:
                    got += t.read(65536)
                except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                    pass
            self.assertIn(b' 200 OK\r\n', got)
            self.assertTrue(got.endswith(b'\r\n\r\nok\n'), got)
            return t.session_reused, t.session

        reused, sess = get()
        self.assertFalse(reused)
        # Both workers most likely resume it, and keep it decoded.
        self.assertEqual([get(sess)[0] for _ in range(20)], [True] * 20)
        # A record that does not decrypt: bad_record_mac, a fatal alert.
        s, t, inc, out = connect(sess)
        self.assertTrue(t.session_reused)
        s.sendall(b'\x17\x03\x03\x00\x20' + b'\x00' * 32)
        while s.recv(65536):
            pass
        self.assertEqual([get(sess)[0] for _ in range(10)], [False] * 10)

    def test_tls13_tickets_put_nothing_in_the_store(self):
        # A TLS 1.3 session with tickets on travels in its ticket; OpenSSL
        # still hands each ticket it issues to the cache, which kept two
        # sessions a handshake that no one would ask for.
        d = tempfile.mkdtemp(prefix='corral-tls-')
        os.chmod(d, 0o755)
        self.addCleanup(shutil.rmtree, d, True)
        c = self.start_tls(cache={'size': Raw('8m'),
                                  'path': os.path.join(d, 'store')},
                           stats_file=Raw(quote(os.path.join(d, 'stats'))))
        c.write('index.html', 'ok\n')

        def sets():
            out = subprocess.run([BIN, '-s', '-j', '-c', c.conf_path],
                                 capture_output=True, text=True, timeout=10)
            self.assertEqual(out.returncode, 0, out.stderr)
            return json.loads(out.stdout)['cache']['store']['sets']

        c.get('/')             # the first request may set something
        before = sets()
        for _ in range(3):
            out = self.s_client(c, ['-tls1_3'])
            self.assertIn('HTTP/1.1 200 OK', out)
            self.assertIn('TLSv1.3', out)
        self.assertEqual(sets(), before)
        # A TLS 1.2 session that has an ID may come back by it: stored.
        self.assertIn('HTTP/1.1 200 OK',
                      self.s_client(c, ['-tls1_2', '-no_ticket']))
        self.assertEqual(sets(), before + 1)

    def test_no_resumption_when_both_are_off(self):
        c = self.start_tls(tls={'session_tickets': False,
                                'session_cache': False})
        sess = os.path.join(c.tmp, 'session.pem')
        self.s_client(c, ['-tls1_2'], sess)
        out = self.s_client(c, ['-tls1_2'], sess)
        self.assertRegex(out, r'(?m)^New, ')

    def test_tickets_survive_a_reload(self):
        c = self.start_tls(workers=2)
        sess = os.path.join(c.tmp, 'session.pem')
        self.s_client(c, ['-tls1_3'], sess)
        old = c.wait_workers(2)
        os.kill(c.master_pid, signal.SIGHUP)
        c.wait_log(r'\[notice\].*reloaded')
        wait_until(lambda: not set(c.workers()) & set(old), 10)
        out = self.s_client(c, ['-tls1_3'], sess)
        self.assertRegex(out, r'(?m)^Reused, ', out)

    def test_ticket_keys_rotate(self):
        c = self.start_tls(tls={'ticket_key_rotate': Raw('2s')})
        first = os.path.join(c.tmp, 'first.pem')
        self.s_client(c, ['-tls1_2'], first)
        keep = os.path.join(c.tmp, 'keep.pem')
        shutil.copy(first, keep)
        mark = c.log_mark()
        c.wait_log(r'ticket keys rotated', timeout=5, mark=mark)
        # Sealed with the previous key: still opens (and is renewed).
        out = self.s_client(c, ['-tls1_2'], first)
        self.assertRegex(out, r'(?m)^Reused, ', out)
        mark = c.log_mark()
        c.wait_log(r'ticket keys rotated', timeout=5, mark=mark)
        # Two rotations later the first key is gone: a full handshake.
        out = self.s_client(c, ['-tls1_2'], keep)
        self.assertRegex(out, r'(?m)^New, ', out)


class TLSCertificateTest(TLSTestCase):

    def check(self, c, crt, key):
        c.servers[0].update(tls_certificate=crt, tls_certificate_key=key)
        c.rewrite()
        return c.check_config()

    def line_of(self, c, directive):
        with open(c.conf_path) as f:
            for n, line in enumerate(f, 1):
                if line.strip().startswith(directive + ' '):
                    return n
        return 0

    def test_check_refuses_bad_certificates(self):
        c = self.start_tls(start=False)
        good_crt, good_key = pki.leaf('localhost')
        other_crt, other_key = pki.leaf('other.test')
        expired, exp_key = pki.leaf('old.test', start='200101000000Z',
                                    end='200201000000Z')
        garbage = os.path.join(c.tmp, 'garbage.key')
        with open(garbage, 'w') as f:
            f.write('-----BEGIN PRIVATE KEY-----\nnot a key\n'
                    '-----END PRIVATE KEY-----\n')
        missing = os.path.join(c.tmp, 'missing.crt')
        out = self.check(c, good_crt, good_key)
        self.assertEqual(out.returncode, 0, out.stderr)
        cases = [
            (good_crt, other_key, 'tls_certificate_key',
             'does not match'),
            (good_crt, garbage, 'tls_certificate_key', 'not a PEM private'),
            (expired, exp_key, 'tls_certificate', 'expired on'),
            (missing, good_key, 'tls_certificate', 'No such file'),
            (good_key, good_key, 'tls_certificate', 'not a PEM certificate'),
        ]
        for crt, key, directive, why in cases:
            out = self.check(c, crt, key)
            self.assertEqual(out.returncode, 1, (crt, key, out.stdout))
            where = '%s:%d: ' % (c.conf_path, self.line_of(c, directive))
            self.assertIn(where, out.stderr)
            self.assertIn(why, out.stderr)
            # What -t refuses, the start refuses the same way.
            p = subprocess.run([BIN, '-f', '-c', c.conf_path],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 1)
            self.assertIn(where, p.stderr)

    def test_check_warns_of_a_missing_chain(self):
        c = self.start_tls(start=False)
        inter = pki.intermediate('corral test intermediate')
        leaf, key = inter.leaf('localhost')
        full = os.path.join(c.tmp, 'fullchain.pem')
        with open(full, 'w') as f:
            for part in (leaf, inter.ca, pki.ca):
                f.write(open(part).read())
        selfsigned = os.path.join(c.tmp, 'self.crt')
        subprocess.run(['openssl', 'req', '-x509', '-new', '-key', key,
                        '-out', selfsigned, '-days', '5', '-subj',
                        '/CN=localhost'], check=True, capture_output=True)
        # The whole chain, or a self-signed certificate: nothing to say.
        for crt in (full, selfsigned):
            out = self.check(c, crt, key)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertNotIn('warning', out.stderr)
        # The leaf alone (cert.pem where fullchain.pem was meant): -t
        # accepts it, as nginx does, but says where and what is missing.
        out = self.check(c, leaf, key)
        self.assertEqual(out.returncode, 0, out.stderr)
        where = '%s:%d: ' % (c.conf_path, self.line_of(c, 'tls_certificate'))
        self.assertIn('corral: warning: ' + where + 'tls_certificate "%s": '
                      'the chain is incomplete' % leaf, out.stderr)
        self.assertIn('CN=corral test intermediate', out.stderr)
        # The start says the same in the error log, and serves.
        c.start()
        c.wait_log(r'\[warn\].*%s.*the chain is incomplete' %
                   re.escape(where))
        ctx = ssl.create_default_context(cafile=pki.ca)
        with self.assertRaises(ssl.SSLCertVerificationError):
            with TLSConn(c.tls_port, ctx, 'localhost'):
                pass

    def test_config_errors_in_the_tls_section(self):
        c = self.start_tls(start=False, tls={'protocols': ['TLSv1.1']})
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r'TLSv1\.1" is obsolete')
        c = self.start_tls(start=False, tls={'ciphers': 'NOPE-CIPHER'})
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r':\d+: tls ciphers "NOPE-CIPHER"')
        c = self.start_tls(start=False)
        del c.servers[0]['tls_certificate_key']
        c.rewrite()
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertIn('tls_certificate needs tls_certificate_key',
                      out.stderr)
        c = self.start_tls(start=False)
        del c.servers[0]['tls_certificate_key']
        del c.servers[0]['tls_certificate']
        c.rewrite()
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertIn('listen with "tls" needs a server with '
                      'tls_certificate', out.stderr)

    def test_reload_picks_up_a_renewed_certificate(self):
        crt, key = pki.leaf('localhost')
        live_crt = os.path.join(PKI_DIR, 'live-%d.crt' % os.getpid())
        shutil.copy(crt, live_crt)
        c = self.start_tls(cert=(live_crt, key), workers=2)
        c.write('page', 'ok\n')
        first = pki.serial(crt)
        t = TLSConn(c.tls_port, self.client_ctx())
        self.addCleanup(t.close)
        self.assertEqual(self.serial_of(t), first)
        t.send(build_request('/page'))
        self.assertEqual(t.read_response().body, b'ok\n')
        renewed, _ = pki.leaf('localhost', key=key)
        shutil.copy(renewed, live_crt)
        os.kill(c.master_pid, signal.SIGHUP)
        c.wait_log(r'\[notice\].*reloaded')
        # The connection made before the reload still gets its answer.
        t.send(build_request('/page'))
        self.assertEqual(t.read_response().body, b'ok\n')
        self.assertTrue(wait_until(lambda: self.new_serial(c) ==
                                   pki.serial(renewed), 10))

        # A bad certificate at the next reload: the renewed one stays.
        wrong, _ = pki.leaf('other.test')
        with open(live_crt, 'w') as f:
            f.write(open(wrong).read())
        mark = c.log_mark()
        os.kill(c.master_pid, signal.SIGHUP)
        c.wait_log(r'\[error\].*reload aborted', mark=mark)
        self.assertIn('does not match', c.log_since(mark))
        self.assertEqual(self.new_serial(c), pki.serial(renewed))

    def serial_of(self, t):
        der = t.sock.getpeercert(binary_form=True)
        out = subprocess.run(['openssl', 'x509', '-inform', 'DER', '-noout',
                              '-serial'], input=der, capture_output=True)
        return out.stdout.decode().strip().split('=')[1]

    def new_serial(self, c):
        with TLSConn(c.tls_port, self.client_ctx()) as t:
            return self.serial_of(t)


class TLSSiteTest(TLSTestCase):
    """TLS on a server's own listen (site configuration), with SNI."""

    def start_site(self, plain=None):
        crt, key = pki.leaf('localhost', ('b.test',))
        ccrt, ckey = pki.leaf('c.test')
        tport = free_port()
        tls_listen = ['127.0.0.1:%d tls' % tport]
        c = self.make(server=dict(plain or {}), vhosts=[
            {'names': ['localhost', 'b.test'], 'listen': tls_listen,
             'root': 'secure', 'tls_certificate': crt,
             'tls_certificate_key': key},
            {'names': ['c.test'], 'listen': tls_listen, 'root': 'c',
             'tls_certificate': ccrt, 'tls_certificate_key': ckey}])
        c.tls_port = tport
        c.write('page.txt', 'plain\n')
        c.write('page.txt', 'secure\n', root=c.docroot('secure'))
        c.write('page.txt', 'c\n', root=c.docroot('c'))
        out = c.check_config()
        self.assertEqual(out.returncode, 0, out.stderr)
        c.start()
        self.assertTrue(wait_until(lambda: self.accepts(tport), 5))
        return c

    def accepts(self, port):
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1).close()
            return True
        except OSError:
            return False

    def test_tls_on_a_servers_own_listen(self):
        c = self.start_site()
        self.assertEqual(c.get('/page.txt').body, b'plain\n')
        ctx = self.client_ctx()
        for name, want in (('localhost', b'secure\n'), ('b.test',
                           b'secure\n'), ('c.test', b'c\n')):
            # Verified for name: SNI picked that server's certificate.
            with TLSConn(c.tls_port, ctx, name) as t:
                t.send(build_request('/page.txt', host=name))
                r = t.read_response()
                self.assertEqual((r.status, r.body), (200, want), name)
        # Plain HTTP to that TLS address: a plain 400, as on a global one.
        with Conn(c.tls_port) as s:
            s.send(build_request('/page.txt'))
            self.assertEqual(s.read_response().status, 400)

    def test_one_line_redirect_to_https(self):
        curl = need_tool('curl')
        c = self.start_site(
            plain={'return': Raw(quote('301 https://$host$request_uri'))})
        cmd = [curl, '-sS', '--max-time', '20', '--cacert', pki.ca,
               '--connect-to', 'localhost:443:127.0.0.1:%d' % c.tls_port]
        url = 'http://localhost:%d/page.txt?x=1&y=2' % c.port
        out = subprocess.run(cmd + ['-D', '-', '-o', '/dev/null', url],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout, r'^HTTP/1\.1 301 ')
        self.assertIn('\nLocation: https://localhost/page.txt?x=1&y=2\n',
                      out.stdout)
        # Followed end to end: curl -L lands on the TLS server.
        out = subprocess.run(cmd + ['-L', '-w', '\n%{num_redirects} '
                                    '%{url_effective} %{scheme}', url],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout, 'secure\n\n1 https://localhost/'
                         'page.txt?x=1&y=2 HTTPS')


class TLSScanTest(TLSTestCase):

    def test_sslscan_finds_nothing_weak(self):
        sslscan = need_tool('sslscan')
        for kind in ('ec', 'rsa'):
            c = self.start_tls(cert=pki.leaf('localhost', kind=kind))
            out = subprocess.run([sslscan, '--no-colour',
                                  '127.0.0.1:%d' % c.tls_port],
                                 capture_output=True, text=True, timeout=120)
            text = out.stdout
            self.assertIn('TLSv1.3   enabled', text, text)
            self.assertIn('TLSv1.2   enabled', text, text)
            for old in ('SSLv2', 'SSLv3', 'TLSv1.0', 'TLSv1.1'):
                self.assertRegex(text, r'(?m)^%s\s+disabled' %
                                 re.escape(old))
            self.assertIn('Session renegotiation not supported', text)
            self.assertNotRegex(text, r'(?i)compression enabled')
            self.assertNotRegex(text, r'(?i)vulnerable to heartbleed'
                                r'(?<!not vulnerable to heartbleed)')
            ciphers = re.findall(r'(?m)^(?:Preferred|Accepted)\s+\S+\s+'
                                 r'(\d+) bits\s+(\S+)', text)
            self.assertTrue(ciphers, text)
            for bits, name in ciphers:
                self.assertGreaterEqual(int(bits), 128, name)
                self.assertNotRegex(name, r'RC4|DES|NULL|EXP|ADH|AECDH|MD5'
                                    r'|anon|CBC|SHA$', name)
            c.stop()


if __name__ == '__main__':
    unittest.main()
