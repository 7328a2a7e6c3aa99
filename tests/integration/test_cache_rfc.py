"""
The proxy cache by RFC 9111, and against cache poisoning (issue 14), as a
client and an origin see it: what is stored and for how long, Date and
Age on hits, a 304 that updates the stored header, the response's stale
windows, invalidation by any unsafe method, statuses outside the known
ones, Vary normalised by parsing, and responses one client provokes that
must never be served to the others.

Also what an operator configures: cache_valid and cache_ttl for
responses silent on freshness, cache_cdn_control (RFC 9213), and the
store's real max_object.
"""
import os
import signal
import socket
import subprocess
import threading
import time
import unittest

from harness import (BIN, CorralTestCase, Raw, http_date, parse_http_date,
                     quote, wait_until)

CC = 'Cache-Control'


class CacheRfcCase(CorralTestCase):

    def raw_origin(self, answer):
        """An origin on a plain socket: answer(sock, request bytes) writes
        the bytes of each exchange; each connection serves one request."""
        served = []
        current = []
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(('127.0.0.1', 0))
        srv.listen(8)

        def serve():
            while True:
                try:
                    s, _ = srv.accept()
                except OSError:
                    return
                current[:] = [s]
                with s:
                    req = s.recv(65536)
                    served.append(req)
                    answer(s, req)
        th = threading.Thread(target=serve, daemon=True)
        th.start()

        def stop():
            # The thread ends before the descriptor is closed.  Left in
            # accept() (or about to call it) once the socket was closed, it
            # took the connections of a later test's socket that got the
            # same descriptor number, or kept a closed one listening: a
            # later test's first answer was this origin's 103 Early Hints
            # (its client read a 103 with no body).  shutdown() wakes
            # accept() and recv().
            for sk in [srv] + current:
                try:
                    sk.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            th.join(10)
            srv.close()
            self.assertFalse(th.is_alive(), 'raw origin thread did not end')
        self.addCleanup(stop)

        class Raw:
            addr = '127.0.0.1:%d' % srv.getsockname()[1]
        Raw.served = served
        return Raw

    def start_cache(self, o, loc=None, workers=1, store=None, **kw):
        """location "/" proxies to o with the cache on, nothing else."""
        c = self.make(workers=workers, **kw)
        c.directives['cache'] = {'path': os.path.join(c.tmp, 'cache.store')}
        c.directives['cache'].update(store or {})
        text = c.config_text()
        d = {'proxy': quote('app'), 'cache': 'on'}
        d.update(loc or {})
        block = '  location "/" {\n' + ''.join(
            '    %s = %s\n' % kv for kv in d.items()) + '  }\n'
        at = text.index('server {\n') + len('server {\n')
        text = text[:at] + block + text[at:]
        text += 'upstream "app" {\n  servers = {%s}\n}\n' % quote(o.addr)
        with open(c.conf_path, 'w') as f:
            f.write(text)
        c.start()
        return c

    def counter(self, o, path, headers=(), status=200):
        """path answers "n" (its request count) with these headers."""
        def fn(method, h):
            return status, list(headers), b'%d' % o.count(path)
        o.script(path, fn=fn)


class FreshnessTest(CacheRfcCase):

    def test_silent_response_is_not_stored(self):
        o = self.origin()
        self.counter(o, '/silent')
        c = self.start_cache(o)
        self.assertEqual(c.get('/silent').body, b'1')
        r = c.get('/silent')
        self.assertEqual(r.body, b'2', 'served from cache: %r' % r)

    def test_max_age_is_stored(self):
        o = self.origin()
        self.counter(o, '/ma', [(CC, 'max-age=60')])
        c = self.start_cache(o)
        self.assertEqual(c.get('/ma').body, b'1')
        r = c.get('/ma')
        self.assertEqual(r.body, b'1')
        self.assertEqual(r.header('X-Cache'), 'HIT')

    def test_age_beyond_2_31_is_stale_not_fresh(self):
        o = self.origin()
        self.counter(o, '/old', [(CC, 'max-age=3600'),
                                 ('Age', '2147483649')])
        c = self.start_cache(o)
        self.assertEqual(c.get('/old').body, b'1')
        self.assertEqual(c.get('/old').body, b'2')

    def test_hit_keeps_the_origin_date_and_states_age(self):
        o = self.origin()
        date = time.time() - 5
        self.counter(o, '/date', [(CC, 'max-age=3600'),
                                  ('Date', http_date(date))])
        c = self.start_cache(o)
        c.get('/date')
        r = c.get('/date')
        self.assertEqual(r.header('X-Cache'), 'HIT')
        self.assertEqual(parse_http_date(r.header('Date')), int(date))
        self.assertGreaterEqual(int(r.header('Age')), 5)

    def test_stale_while_revalidate_from_the_response(self):
        o = self.origin()
        self.counter(o, '/swr', [(CC, 'max-age=1, stale-while-revalidate'
                                  '=60'), ('ETag', '"a"')])
        c = self.start_cache(o)
        t0 = time.time()
        self.assertEqual(c.get('/swr').body, b'1')
        wait_until(lambda: time.time() >= t0 + 2.1, 5)
        r = c.get('/swr')
        self.assertEqual(r.body, b'1', 'served stale while revalidating')
        self.assertTrue(wait_until(lambda: o.count('/swr') == 2, 5))


class UpdateTest(CacheRfcCase):

    def test_304_updates_the_stored_header(self):
        o = self.origin()

        def fn(method, h):
            if o.count('/u') == 1:
                return 200, [(CC, 'max-age=1'), ('ETag', '"e"'),
                             ('Test-Header', 'old')], b'body'
            return 304, [(CC, 'max-age=3600'), ('ETag', '"e"'),
                         ('Test-Header', 'new')], b''
        o.script('/u', fn=fn)
        c = self.start_cache(o)
        t0 = time.time()
        self.assertEqual(c.get('/u').header('Test-Header'), 'old')
        wait_until(lambda: time.time() >= t0 + 2.1, 5)
        r = c.get('/u')
        self.assertEqual((r.status, r.body), (200, b'body'))
        self.assertEqual(r.header('Test-Header'), 'new')
        self.assertEqual(r.header(CC), 'max-age=3600')
        r = c.get('/u')
        self.assertEqual(r.header('X-Cache'), 'HIT')
        self.assertEqual(r.header('Test-Header'), 'new')


    def test_a_hit_after_a_304_refresh_has_the_new_header(self):
        # A hit's head is kept per stored value (worker/cache_answer.c):
        # after the refresh, hits show the new fields, not the kept head.
        o = self.origin()

        def fn(method, h):
            if o.count('/k') == 1:
                return 200, [(CC, 'max-age=3600'), ('ETag', '"e"'),
                             ('Test-Header', 'old')], b'body'
            return 304, [(CC, 'max-age=3600'), ('ETag', '"e"'),
                         ('Test-Header', 'new')], b''
        o.script('/k', fn=fn)
        c = self.start_cache(o)
        self.assertEqual(c.get('/k').header('Test-Header'), 'old')
        r = c.get('/k')
        self.assertEqual((r.header('X-Cache'), r.header('Test-Header')),
                         ('HIT', 'old'))
        # The client's no-cache has the stored response revalidated.
        r = c.get('/k', headers=[(CC, 'no-cache')])
        self.assertEqual((r.status, r.body, r.header('Test-Header')),
                         (200, b'body', 'new'))
        r = c.get('/k')
        self.assertEqual((r.header('X-Cache'), r.header('Test-Header'),
                          r.body), ('HIT', 'new', b'body'))
        self.assertEqual(o.count('/k'), 2)

class InvalidationTest(CacheRfcCase):

    def test_unknown_unsafe_method_invalidates(self):
        o = self.origin()
        self.counter(o, '/inv', [(CC, 'max-age=3600')])
        c = self.start_cache(o)
        self.assertEqual(c.get('/inv').body, b'1')
        self.assertEqual(c.get('/inv', method='M-SEARCH').status, 200)
        self.assertEqual(c.get('/inv').body, b'3')


class StatusTest(CacheRfcCase):

    def test_status_outside_100_599_is_relayed(self):
        o = self.origin()
        o.script('/999', status=999, reason='Odd', body=b'odd')
        c = self.start_cache(o)
        r = c.get('/999')
        self.assertEqual((r.status, r.body), (999, b'odd'))


class PoisoningTest(CacheRfcCase):
    """Responses one client provokes, served to nobody else."""

    def assertNotPoisoned(self, c, path, clean=()):
        r = c.get(path, headers=clean)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.body, b'clean')

    def cpdos(self, header, status):
        """The origin fails when header is present, with no freshness."""
        o = self.origin()

        def fn(method, h):
            if header.lower() in h:
                return status, [], b'error'
            return 200, [(CC, 'max-age=60')], b'clean'
        o.script('/page', fn=fn)
        c = self.start_cache(o)
        r = c.get('/page', headers=[(header, 'x')])
        self.assertEqual(r.status, status)
        self.assertNotPoisoned(c, '/page')

    def test_cpdos_method_override_405(self):
        self.cpdos('X-HTTP-Method-Override', 405)

    def test_cpdos_original_url_404(self):
        self.cpdos('X-Original-URL', 404)

    def test_cpdos_rewrite_url_404(self):
        self.cpdos('X-Rewrite-URL', 404)

    def test_cookie_personalised_page_not_stored(self):
        o = self.origin()

        def fn(method, h):
            if 'cookie' in h:
                return 200, [], b'account of ' + h['cookie'].encode()
            return 200, [], b'clean'
        o.script('/account', fn=fn)
        c = self.start_cache(o)
        r = c.get('/account', headers=[('Cookie', 'user=alice')])
        self.assertEqual(r.body, b'account of user=alice')
        self.assertNotPoisoned(c, '/account')

    def test_cookie_request_stored_when_response_is_public(self):
        o = self.origin()
        self.counter(o, '/pub', [(CC, 'public, max-age=60')])
        c = self.start_cache(o)
        self.assertEqual(c.get('/pub', headers=[('Cookie', 'a=b')]).body,
                         b'1')
        self.assertEqual(c.get('/pub').body, b'1')

    def test_client_provoked_400_does_not_make_the_key_pass(self):
        o = self.origin()

        def fn(method, h):
            if 'x-big' in h:
                return 400, [(CC, 'no-store')], b'too big'
            return 200, [(CC, 'max-age=60')], b'%d' % o.count('/hfp')
        o.script('/hfp', fn=fn)
        c = self.start_cache(o)
        self.assertEqual(c.get('/hfp', headers=[('X-Big', 'y')]).status,
                         400)
        self.assertEqual(c.get('/hfp').body, b'2')
        r = c.get('/hfp')
        self.assertEqual(r.body, b'2', 'stored for everyone: %r' % r)
        self.assertEqual(r.header('X-Cache'), 'HIT')

    def test_vary_gzip_q0_is_not_gzip(self):
        o = self.origin()

        def fn(method, h):
            ae = h.get('accept-encoding', '')
            return 200, [(CC, 'max-age=60'), ('Vary', 'Accept-Encoding')], \
                ('for ' + ae).encode()
        o.script('/v', fn=fn)
        c = self.start_cache(o)
        self.assertEqual(c.get('/v', headers=[('Accept-Encoding',
                                               'gzip')]).body, b'for gzip')
        r = c.get('/v', headers=[('Accept-Encoding', 'gzip;q=0')])
        self.assertEqual(r.body, b'for gzip;q=0')

    def test_vary_repeated_field_is_not_its_first_line(self):
        o = self.origin()

        def fn(method, h):
            return 200, [(CC, 'max-age=60'), ('Vary', 'X-Lang')], \
                ('lang ' + h.get('x-lang', '')).encode()
        o.script('/lang', fn=fn)
        c = self.start_cache(o)
        self.assertEqual(c.get('/lang', headers=[('X-Lang', 'en')]).body,
                         b'lang en')
        r = c.get('/lang', headers=[('X-Lang', 'en'), ('X-Lang', 'evil')])
        self.assertEqual(r.header('X-Cache'), 'MISS', r)


class KeyTest(CacheRfcCase):
    """The key and the request forwarded are one request."""

    def reflect(self, o, paths):
        """Each raw path answers what the origin saw, fresh for a minute."""
        def make(path):
            def fn(method, h):
                return 200, [(CC, 'max-age=60')], \
                    ('%s %s' % (path, h.get('host'))).encode()
            return fn
        for p in paths:
            o.script(p, fn=make(p))

    def assertOwnAnswer(self, attack, clean):
        o = self.origin()
        self.reflect(o, [attack, clean])
        c = self.start_cache(o)
        first = c.get(attack)
        self.assertEqual(first.status, 200, first)
        r = c.get(clean)
        self.assertEqual(r.body, ('%s localhost' % clean).encode(),
                         'the answer to %s: %r' % (attack, first))

    def test_double_slash(self):
        self.assertOwnAnswer('/p//home', '/p/home')

    def test_encoded_slash_dot_dot(self):
        self.assertOwnAnswer('/q/x%2F..%2Fhome', '/q/home')

    def test_dot_dot_encoded_slash(self):
        self.assertOwnAnswer('/u/evil/..%2Fhome', '/u/home')

    def test_same_spelling_is_one_entry(self):
        o = self.origin()
        self.counter(o, '/same', [(CC, 'max-age=60')])
        c = self.start_cache(o)
        self.assertEqual(c.get('/same').body, b'1')
        r = c.get('/same')
        self.assertEqual((r.body, r.header('X-Cache')), (b'1', 'HIT'))

    def test_absolute_form_authority_replaces_host(self):
        o = self.origin()
        self.reflect(o, ['/abs'])
        c = self.start_cache(o)
        r = c.get('http://localhost/abs', host='evil')
        self.assertEqual(r.body, b'/abs localhost',
                         'the origin must see the authority as Host')
        r = c.get('/abs')
        self.assertEqual(r.body, b'/abs localhost')

    def test_host_port_keys_apart(self):
        o = self.origin()
        self.reflect(o, ['/port'])
        c = self.start_cache(o)
        self.assertEqual(c.get('/port', host='localhost:6666').body,
                         b'/port localhost:6666')
        self.assertEqual(c.get('/port').body, b'/port localhost')


class TruncatedTest(CacheRfcCase):
    """A response ended by an error is incomplete: never stored."""

    def test_close_delimited_body_reset_is_not_stored(self):
        def answer(s, req):
            s.sendall(b'HTTP/1.1 200 OK\r\nCache-Control: max-age=60'
                      b'\r\n\r\npart of a body')
            # SO_LINGER 0: close() sends a reset, not a FIN.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         b'\x01\x00\x00\x00\x00\x00\x00\x00')
        o = self.raw_origin(answer)
        c = self.start_cache(o)
        try:
            c.get('/reset')
        except Exception:
            pass		# the client may see the cut as it likes
        self.assertTrue(wait_until(lambda: o.served, 5))
        try:
            r = c.get('/reset')
            self.assertNotEqual(r.header('X-Cache'), 'HIT', r)
        except Exception:
            pass
        self.assertEqual(len(o.served), 2, 'served from cache')


class InterimTest(CacheRfcCase):
    """1xx interim responses: relayed to HTTP/1.1 clients, never stored."""

    def test_103_relayed_not_stored(self):
        def answer(s, req):
            s.sendall(b'HTTP/1.1 103 Early Hints\r\n'
                      b'Link: </s.css>; rel=preload\r\n\r\n'
                      b'HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n'
                      b'Content-Length: 2\r\n\r\nok')
        o = self.raw_origin(answer)
        c = self.start_cache(o)
        with c.connect() as s:
            s.send(b'GET /hints HTTP/1.1\r\nHost: localhost\r\n\r\n')
            r = s.read_response()
            self.assertEqual(r.status, 103, r)
            self.assertEqual(r.header('Link'), '</s.css>; rel=preload')
            r = s.read_response()
            self.assertEqual((r.status, r.body), (200, b'ok'))
            # The hit is the final response alone.
            s.send(b'GET /hints HTTP/1.1\r\nHost: localhost\r\n\r\n')
            r = s.read_response()
            self.assertEqual((r.status, r.body, r.header('X-Cache')),
                             (200, b'ok', 'HIT'))
        # An HTTP/1.0 client never gets a 1xx (RFC 9110 15.2).
        r = c.get('/hints10', version='HTTP/1.0')
        self.assertEqual((r.status, r.body), (200, b'ok'))
        self.assertEqual(len(o.served), 2)


class ConfiguredTest(CacheRfcCase):
    """What an operator sets for responses silent on freshness."""

    def silent(self, o, paths):
        for path, status in paths:
            self.counter(o, path, status=status)

    def test_cache_valid_per_status(self):
        o = self.origin()
        self.silent(o, [('/ok', 200), ('/gone', 404), ('/err', 500)])
        self.counter(o, '/nostore', [(CC, 'no-store')])
        self.counter(o, '/short', [(CC, 'max-age=1')])
        c = self.start_cache(o, {'cache_valid':
                                 '{"200 10m", "404 1m"}'})
        for path, status in (('/ok', 200), ('/gone', 404)):
            self.assertEqual(c.get(path).status, status)
            r = c.get(path)
            self.assertEqual((r.status, r.body, r.header('X-Cache')),
                             (status, b'1', 'HIT'), path)
        # A status not named is not stored; what the response says wins.
        self.assertEqual(c.get('/err').body, b'1')
        self.assertEqual(c.get('/err').body, b'2')
        self.assertEqual(c.get('/nostore').body, b'1')
        self.assertEqual(c.get('/nostore').body, b'2')
        t0 = time.time()
        self.assertEqual(c.get('/short').body, b'1')
        wait_until(lambda: time.time() >= t0 + 2.1, 5)
        self.assertEqual(c.get('/short').body, b'2')

    def test_cache_valid_any_and_zero(self):
        o = self.origin()
        self.silent(o, [('/ok', 200), ('/busy', 503)])
        c = self.start_cache(o, {'cache_valid': '{"200 0", "any 1m"}'})
        self.assertEqual(c.get('/busy').status, 503)
        r = c.get('/busy')
        self.assertEqual((r.status, r.body, r.header('X-Cache')),
                         (503, b'1', 'HIT'))
        # 0 keeps 200s out, though "any" would store them.
        self.assertEqual(c.get('/ok').body, b'1')
        self.assertEqual(c.get('/ok').body, b'2')

    def test_cache_ttl_opt_in(self):
        o = self.origin()
        self.silent(o, [('/ok', 200), ('/err', 500)])
        c = self.start_cache(o, {'cache_ttl': '1m'})
        self.assertEqual(c.get('/ok').body, b'1')
        r = c.get('/ok')
        self.assertEqual((r.body, r.header('X-Cache')), (b'1', 'HIT'))
        # Only the statuses RFC 9110 lets a cache reuse heuristically.
        self.assertEqual(c.get('/err').body, b'1')
        self.assertEqual(c.get('/err').body, b'2')

    def test_cookie_request_not_stored_by_cache_valid(self):
        # The operator's validity stores silent responses, never one made
        # for a request with a cookie (issue 14).
        o = self.origin()

        def fn(method, h):
            return 200, [], ('for ' + h.get('cookie', 'all')).encode()
        o.script('/account.php/x.css', fn=fn)
        c = self.start_cache(o, {'cache_valid': '{"200 10m"}'})
        r = c.get('/account.php/x.css', headers=[('Cookie', 'u=alice')])
        self.assertEqual(r.body, b'for u=alice')
        self.assertEqual(c.get('/account.php/x.css').body, b'for all')

    def test_cache_valid_errors(self):
        for bad, why in (('{"abc 10m"}', 'a status is 3 digits'),
                         ('{"200"}', 'the time is missing'),
                         ('{"10m 200"}', 'the time must come last'),
                         ('{"200 31d"}', 'at most 30d')):
            c = self.make()
            c.directives['cache'] = {'size': Raw('8m')}
            text = c.config_text()
            at = text.index('server {\n') + len('server {\n')
            text = (text[:at] + '  location "/" {\n    proxy = "app"\n'
                    '    cache = on\n    cache_valid = %s\n  }\n' % bad +
                    text[at:] + 'upstream "app" {\n  servers = '
                    '{"127.0.0.1:1"}\n}\n')
            with open(c.conf_path, 'w') as f:
                f.write(text)
            line = text[:text.index('    cache_valid')].count('\n') + 1
            out = subprocess.run([BIN, '-t', '-c', c.conf_path],
                                 capture_output=True, text=True, timeout=10)
            self.assertNotEqual(out.returncode, 0, bad)
            self.assertIn('%s:%d' % (c.conf_path, line), out.stderr)
            self.assertIn(why, out.stderr)


class CdnControlTest(CacheRfcCase):
    """CDN-Cache-Control targets corral only with cache_cdn_control."""

    def test_cdn_cache_control_governs_when_on(self):
        o = self.origin()
        self.counter(o, '/cdn', [(CC, 'no-store'),
                                 ('CDN-Cache-Control', 'max-age=60')])
        self.counter(o, '/cdn0', [(CC, 'max-age=60'),
                                  ('CDN-Cache-Control', 'no-store')])
        c = self.start_cache(o, {'cache_cdn_control': 'on'})
        self.assertEqual(c.get('/cdn').body, b'1')
        r = c.get('/cdn')
        self.assertEqual((r.body, r.header('X-Cache')), (b'1', 'HIT'))
        # Clients still get every field.
        self.assertEqual(r.header(CC), 'no-store')
        self.assertEqual(r.header('CDN-Cache-Control'), 'max-age=60')
        self.assertEqual(c.get('/cdn0').body, b'1')
        self.assertEqual(c.get('/cdn0').body, b'2')

    def test_cdn_cache_control_ignored_by_default(self):
        o = self.origin()
        self.counter(o, '/cdn', [(CC, 'no-store'),
                                 ('CDN-Cache-Control', 'max-age=60')])
        c = self.start_cache(o)
        self.assertEqual(c.get('/cdn').body, b'1')
        self.assertEqual(c.get('/cdn').body, b'2')


class StaleTest(CacheRfcCase):
    """Stale copies the response, the request or the config allow."""

    def test_stale_if_error_from_the_response(self):
        o = self.origin()
        self.counter(o, '/sie', [(CC, 'max-age=1, stale-if-error=600')])
        self.counter(o, '/mr', [(CC, 'max-age=1, must-revalidate')])
        c = self.start_cache(o, {'cache_stale': '{}'})
        t0 = time.time()
        self.assertEqual(c.get('/sie').body, b'1')
        self.assertEqual(c.get('/mr').body, b'1')
        wait_until(lambda: time.time() >= t0 + 2.1, 5)
        o.stop()
        r = c.get('/sie')
        self.assertEqual((r.status, r.body), (200, b'1'),
                         'the response allowed its stale copy on errors')
        self.assertEqual(c.get('/mr').status, 502)

    def test_default_serves_stale_on_error_unless_forbidden(self):
        o = self.origin()
        self.counter(o, '/s', [(CC, 'max-age=1')])
        self.counter(o, '/nc', [(CC, 'max-age=1, proxy-revalidate')])
        c = self.start_cache(o)
        t0 = time.time()
        self.assertEqual(c.get('/s').body, b'1')
        self.assertEqual(c.get('/nc').body, b'1')
        wait_until(lambda: time.time() >= t0 + 2.1, 5)
        o.stop()
        r = c.get('/s')
        self.assertEqual((r.status, r.body), (200, b'1'))
        self.assertEqual(c.get('/nc').status, 502)

    def test_only_if_cached(self):
        o = self.origin()
        self.counter(o, '/oic', [(CC, 'max-age=60')])
        c = self.start_cache(o)
        oic = [(CC, 'only-if-cached')]
        self.assertEqual(c.get('/oic', headers=oic).status, 504)
        self.assertEqual(o.count('/oic'), 0)
        c.get('/oic')
        r = c.get('/oic', headers=oic)
        self.assertEqual((r.status, r.body), (200, b'1'))

    def test_heuristic_freshness_from_last_modified(self):
        o = self.origin()
        lm = http_date(time.time() - 10 * 86400)
        self.counter(o, '/lm', [('Last-Modified', lm)])
        self.counter(o, '/lm500', [('Last-Modified', lm)], status=500)
        c = self.start_cache(o)
        r = c.get('/lm')
        self.assertEqual(r.body, b'1', r)
        r = c.get('/lm')
        self.assertEqual((r.body, r.header('X-Cache')), (b'1', 'HIT'))
        # 500 is not heuristically cacheable.
        c.get('/lm500')
        self.assertEqual(c.get('/lm500').body, b'2')


class SizeTest(CacheRfcCase):
    """Storability on the whole object against the store's max_object."""

    def assertWaitersGoOn(self, c, o, path, spans, size):
        """Four clients at once: all answered, none stored, and the
        waiters went on together once the first head said "too large",
        not one fill at a time."""
        out = []

        def client():
            out.append(c.get(path))
        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertEqual([(r.status, len(r.body)) for r in out],
                         [(200, size)] * 4)
        r = c.get(path)
        self.assertNotEqual(r.header('X-Cache'), 'HIT', r)
        self.assertEqual(o.count(path), 5)
        self.assertGreaterEqual(self.stats(c)['too_large'], 1)
        spans.sort()
        self.assertTrue(any(b[0] < a[1] for a, b in zip(spans, spans[1:])),
                        'fetched one at a time: %r' % spans)

    def slow(self, o, path, size, pad=0):
        """path answers size bytes (and pad bytes of fields) after 0.5 s;
        returns the list of (start, end) of its answers."""
        spans = []
        lock = threading.Lock()

        def fn(method, h):
            t = time.monotonic()
            time.sleep(0.5)
            with lock:
                spans.append((t, time.monotonic()))
            return 200, [(CC, 'max-age=60'), ('X-Pad', 'p' * pad)], \
                b'b' * size
        o.script(path, fn=fn)
        return spans

    def test_header_and_body_over_max_object_not_stored_waiters_go_on(self):
        # 15 KB of body, under max_object; 4 KB of fields on top.
        o = self.origin()
        spans = self.slow(o, '/big', 15 * 1024, 4096)
        c = self.start_cache(o, workers=2, store={'max_object': Raw('16k')})
        self.assertWaitersGoOn(c, o, '/big', spans, 15 * 1024)

    def test_reload_raising_max_object_keeps_the_store_limit(self):
        # The store keeps its layout (16k) until a restart; a reload that
        # raises max_object must not make the cache try to store more.
        o = self.origin()
        spans = self.slow(o, '/big', 20 * 1024)
        c = self.start_cache(o, workers=2, store={'max_object': Raw('16k')})
        with open(c.conf_path) as f:
            text = f.read()
        with open(c.conf_path, 'w') as f:
            f.write(text.replace('max_object = 16k', 'max_object = 64k'))
        os.kill(c.master_pid, signal.SIGHUP)
        c.wait_log(r'worker 1 of generation 1 \(pid \d+\) exited')
        self.assertWaitersGoOn(c, o, '/big', spans, 20 * 1024)

if __name__ == '__main__':
    unittest.main()
