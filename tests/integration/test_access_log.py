"""
The access log: combined by default, named log_format strings with every
variable, the JSON format parsed line by line, log_flush (0: at once), and
no line lost at a graceful stop or a reload under load.
"""

import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time

from harness import (BIN, CorralTestCase, Raw, build_request, read_text,
                     wait_until)

COMBINED_RE = re.compile(
    r'^(\S+) - - \[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4})\] '
    r'"([^"]*)" (\d{3}) (\d+) "([^"]*)" "([^"]*)"$')

ALL_VARS = ('remote_addr remote_user time_local time_iso8601 msec request '
            'request_method request_uri uri args server_protocol status '
            'body_bytes_sent request_time http_referer http_user_agent host '
            'server_name upstream_addr upstream_status '
            'upstream_connect_time upstream_response_time '
            'upstream_cache_status ssl_protocol request_id connection '
            'connection_requests pid').split()


class AccessLog(CorralTestCase):

    def start_log(self, formats=(), fmt=None, **kw):
        """A server whose log uses format fmt; formats adds log_format
        sections: (name, format string, escape)."""
        server = dict(kw.pop('server', {}))
        if fmt is not None:
            server['access_log_format'] = fmt
        c = self.make(server=server, **kw)
        with open(c.conf_path, 'a') as f:
            for name, src, esc in formats:
                f.write('log_format %s {\n  format = "%s"\n  escape = %s\n'
                        '}\n' % (name, src.replace('\\', '\\\\')
                                 .replace('"', '\\"'), esc))
        c.start()
        c.write('a.txt', b'a' * 100)
        return c

    def lines(self, c, n, timeout=5):
        got = wait_until(lambda: (lambda t: t if t.count('\n') >= n
                                  else None)(read_text(c.access_log)),
                         timeout)
        self.assertIsNotNone(got, read_text(c.access_log))
        return got.splitlines()

    def test_combined_is_the_default(self):
        c = self.start_log(log_flush=0)
        c.get('/a.txt?q=1', headers=[('Referer', 'http://r.example/'),
                                     ('User-Agent', 'tester "x"')])
        line = self.lines(c, 1)[0]
        m = COMBINED_RE.match(line)
        self.assertTrue(m, line)
        self.assertEqual(m.group(1), '127.0.0.1')
        self.assertEqual(m.group(3), 'GET /a.txt?q=1 HTTP/1.1')
        self.assertEqual((m.group(4), m.group(5)), ('200', '100'))
        self.assertEqual(m.group(6), 'http://r.example/')
        self.assertEqual(m.group(7), 'tester \\x22x\\x22')

    def test_every_variable(self):
        src = '|'.join('$' + v for v in ALL_VARS)
        c = self.start_log([('all', src, 'default')], 'all', log_flush=0)
        t0 = time.time()
        with c.connect() as conn:
            conn.send(build_request('/a.txt', 'HEAD'))
            conn.read_response('HEAD')
            conn.send(build_request(
                '/a.txt?x=1', host='www.example.com',
                headers=[('Referer', 'http://r/'), ('User-Agent', 'ua/1')]))
            conn.read_response()
        lines = self.lines(c, 2)
        v = dict(zip(ALL_VARS, lines[1].split('|')))
        self.assertEqual(len(lines[1].split('|')), len(ALL_VARS), lines[1])
        workers = c.workers()
        self.assertEqual(v['remote_addr'], '127.0.0.1')
        self.assertEqual(v['remote_user'], '-')
        self.assertRegex(v['time_local'],
                         r'^\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}$')
        self.assertRegex(v['time_iso8601'],
                         r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$')
        self.assertLess(abs(float(v['msec']) - t0), 60)	# seconds, now
        self.assertRegex(v['msec'], r'^\d+\.\d{3}$')
        self.assertEqual(v['request'], 'GET /a.txt?x=1 HTTP/1.1')
        self.assertEqual(v['request_method'], 'GET')
        self.assertEqual(v['request_uri'], '/a.txt?x=1')
        self.assertEqual(v['uri'], '/a.txt')
        self.assertEqual(v['args'], 'x=1')
        self.assertEqual(v['server_protocol'], 'HTTP/1.1')
        self.assertEqual(v['status'], '200')
        self.assertEqual(v['body_bytes_sent'], '100')
        self.assertRegex(v['request_time'], r'^\d+\.\d{3}$')
        self.assertEqual(v['http_referer'], 'http://r/')
        self.assertEqual(v['http_user_agent'], 'ua/1')
        self.assertEqual(v['host'], 'www.example.com')
        self.assertEqual(v['server_name'], 'localhost')
        for k in ('upstream_addr', 'upstream_status',
                  'upstream_connect_time', 'upstream_response_time',
                  'upstream_cache_status', 'ssl_protocol'):
            self.assertEqual(v[k], '-', k)	# no upstream, no TLS
        self.assertRegex(v['request_id'], r'^[0-9a-f]{32}$')
        first = dict(zip(ALL_VARS, lines[0].split('|')))
        self.assertNotEqual(first['request_id'], v['request_id'])
        self.assertEqual(first['body_bytes_sent'], '0')	# HEAD
        self.assertEqual(first['request_method'], 'HEAD')
        self.assertEqual(first['connection'], v['connection'])
        self.assertEqual((first['connection_requests'],
                          v['connection_requests']), ('1', '2'))
        self.assertIn(int(v['pid']), workers)
        # The host falls back to the server's name without a Host field.
        c.request(b'GET /a.txt HTTP/1.0\r\n\r\n')
        v3 = dict(zip(ALL_VARS, self.lines(c, 3)[2].split('|')))
        self.assertEqual(v3['host'], 'localhost')
        self.assertEqual(v3['server_protocol'], 'HTTP/1.0')

    def test_request_time_measures_the_request(self):
        src = '$request_time $status'
        stats = os.path.join(tempfile.gettempdir(), 'corral-al-%d.stats' %
                             os.getpid())
        self.addCleanup(lambda: os.path.exists(stats) and os.unlink(stats))
        c = self.start_log([('t', src, 'default')], 't', log_flush=0,
                           stats_file=Raw('"%s"' % stats))

        def bytes_in():
            out = subprocess.run([BIN, '-s', '-j', '-c', c.conf_path],
                                 capture_output=True, text=True,
                                 timeout=10)
            # The counters exist before the port listens: no retry.
            self.assertEqual(out.returncode, 0, out.stderr)
            return json.loads(out.stdout)['bytes']['in']
        with c.connect() as conn:
            conn.send(b'GET /a.txt HTTP/1.1\r\n')
            # Once the server has the first bytes, the client is slow on
            # purpose: the time counts from there.
            self.assertTrue(wait_until(lambda: bytes_in() > 0, 5))
            time.sleep(0.3)
            conn.send(b'Host: localhost\r\n\r\n')
            conn.read_response()
        secs, status = self.lines(c, 1)[0].split()
        self.assertEqual(status, '200')
        self.assertGreaterEqual(float(secs), 0.3)
        self.assertLess(float(secs), 60)	# seconds, not milliseconds

    def test_json_lines(self):
        c = self.start_log(fmt='json', log_flush=0)
        c.get('/a.txt', headers=[('User-Agent', 'bad "ua" \\ \xe9')])
        c.get('/missing')
        c.request(b'BREW / HTTP/1.1\r\nHost: h\r\n\r\n')
        c.request(b'\x00garbage\r\n\r\n')
        lines = self.lines(c, 4)
        docs = [json.loads(l) for l in lines]
        self.assertEqual([d['status'] for d in docs], [200, 404, 501, 400])
        d = docs[0]
        self.assertEqual(d['user_agent'], 'bad "ua" \\ \xe9')
        self.assertEqual((d['method'], d['uri'], d['protocol'], d['host']),
                         ('GET', '/a.txt', 'HTTP/1.1', 'localhost'))
        self.assertEqual(d['body_bytes_sent'], 100)
        self.assertIsInstance(d['request_time'], float)
        self.assertEqual(d['upstream_addr'], '')
        self.assertEqual(d['remote_addr'], '127.0.0.1')
        self.assertRegex(d['request_id'], r'^[0-9a-f]{32}$')
        self.assertEqual(docs[2]['method'], 'BREW')

    def test_user_json_format(self):
        c = self.start_log([('mine', '{"s":$status,"ua":"$http_user_agent"}',
                             'json')], 'mine', log_flush=0)
        c.get('/a.txt', headers=[('User-Agent', 'x"y')])
        self.assertEqual(json.loads(self.lines(c, 1)[0]),
                         {'s': 200, 'ua': 'x"y'})

    def test_flush_interval_buffers_until_stop(self):
        c = self.start_log(log_flush=Raw('1h'))
        for _ in range(5):
            self.assertEqual(c.get('/a.txt').status, 200)
        self.assertEqual(read_text(c.access_log), '')	# held in memory
        os.kill(c.master_pid, signal.SIGQUIT)
        self.assertTrue(wait_until(lambda: c.proc.poll() is not None, 10))
        c.expect_exit = True
        self.assertEqual(read_text(c.access_log).count('\n'), 5)

    def test_flush_every_interval(self):
        c = self.start_log(log_flush=Raw('200ms'))
        self.assertEqual(c.get('/a.txt').status, 200)
        self.lines(c, 1, timeout=3)

    def test_no_line_lost_at_reload_and_graceful_stop(self):
        c = self.start_log(workers=2, log_flush=Raw('1h'))
        got = [0] * 4
        stop = threading.Event()

        def client(i):
            # Until the server stops; bounded in count and time.
            deadline = time.monotonic() + 30
            for _ in range(100000):
                if time.monotonic() > deadline:
                    return
                try:
                    with c.connect(timeout=5) as conn:
                        for _ in range(20):
                            conn.send(build_request('/a.txt'))
                            r = conn.read_response()
                            if r.status == 200:
                                got[i] += 1
                            if r.header('Connection') == 'close':
                                break
                except Exception:
                    if stop.is_set():
                        return

        threads = [threading.Thread(target=client, args=(i,))
                   for i in range(4)]
        for t in threads:
            t.start()
        self.assertTrue(wait_until(lambda: sum(got) > 200, 10))
        for _ in range(2):
            old = c.workers()
            os.kill(c.master_pid, signal.SIGHUP)
            c.wait_workers(2, exclude=old)
            n = sum(got)
            self.assertTrue(wait_until(lambda: sum(got) > n + 100, 10))
        stop.set()
        os.kill(c.master_pid, signal.SIGQUIT)
        self.assertTrue(wait_until(lambda: c.proc.poll() is not None, 20))
        c.expect_exit = True
        for t in threads:
            t.join(30)
        lines = read_text(c.access_log).splitlines()
        self.assertEqual(len(lines), sum(got))
        self.assertTrue(all(' 200 100 ' in l for l in lines))

    def test_config_errors(self):
        cases = [
            ('log_format x {\n format = "$status $nope"\n}\n',
             r':\d+: log_format "x" ending here: unknown variable "\$nope"'),
            ('log_format combined {\n format = "$status"\n}\n',
             r'log_format "combined" ending here is built in'),
            ('log_format x {\n escape = json\n}\n',
             r'log_format "x" ending here has no format'),
            ('log_format x {\n format = "$status"\n escape = xml\n}\n',
             r'escape must be default, json or none'),
        ]
        for text, err in cases:
            c = self.make()
            with open(c.conf_path, 'a') as f:
                f.write(text)
            out = c.check_config()
            self.assertEqual(out.returncode, 1, text)
            self.assertRegex(out.stderr, err)
        c = self.make(server={'access_log_format': 'nope'})
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r'corral\.conf:\d+: access_log_format '
                         r'"nope": no log_format has that name')
        # Defined after the server that uses it: fine.
        c = self.make(server={'access_log_format': 'later'})
        with open(c.conf_path, 'a') as f:
            f.write('log_format later {\n format = "$status"\n}\n')
        self.assertEqual(c.check_config().returncode, 0)
