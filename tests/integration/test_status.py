"""
The counters in shared memory and their views: exact numbers after known
traffic across two workers, totals that survive a killed worker and a
reload, ?json, Apache's ?auto, Prometheus text (checked by promtool and a
strict parser here), access control, and corral -s / -T from outside.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import threading

from harness import (BIN, CorralTestCase, Raw, build_request, quote,
                     read_text, wait_until, wait_for)

A_BODY = b'a' * 100


def resp_bytes(resp):
    """Bytes of a response on the wire (none of ours is chunked)."""
    return len(resp.head) + 4 + len(resp.body)


def sockets_of(pid):
    """The socket inodes in pid's descriptor table."""
    out = set()
    try:
        for fd in os.listdir('/proc/%d/fd' % pid):
            try:
                link = os.readlink('/proc/%d/fd/%s' % (pid, fd))
            except OSError:
                continue
            if link.startswith('socket:['):
                out.add(link)
    except OSError:
        pass
    return out


def worker_gaining(c, before):
    """The one worker with a socket that is not in before[pid]."""
    gained = [pid for pid in c.workers()
              if sockets_of(pid) - before.get(pid, set())]
    return gained[0] if len(gained) == 1 else None


class Status(CorralTestCase):

    def start_status(self, location=None, **kw):
        loc = {'status': True}
        loc.update(location or {})
        kw.setdefault('workers', 2)
        server = {'location "/status"': loc}
        server.update(kw.pop('server', {}))
        c = self.make(server=server, **kw)
        c.stats_path = os.path.join(c.tmp, 'corral.stats')
        c.directives['stats_file'] = Raw(quote(c.stats_path))
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        c.wait_workers(kw['workers'])
        c.write('a.txt', A_BODY)
        return c

    def outside(self, c, *args):
        """corral ARGS -c CONF, run from outside the server."""
        out = subprocess.run([BIN] + list(args) + ['-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    def file_json(self, c):
        return json.loads(self.outside(c, '-s', '-j'))

    def settled(self, c, active=0):
        """The file's counters once every client connection is closed."""
        doc = wait_for(lambda: self.file_json(c),
                       lambda d: d['connections']['active'] == active and
                       d['connections']['writing'] == 0 and
                       d['worker_slots_used'] == d['workers'], 5)
        self.assertIsNotNone(doc, self.file_json(c))
        return doc

    def probe_accepted(self, c):
        """The harness's readiness probe is one connection: wait for it."""
        doc = wait_for(lambda: self.file_json(c),
                       lambda d: d['connections']['accepted'] == 1, 5)
        self.assertIsNotNone(doc, self.file_json(c))

    def status(self, c, query='json', path='/status'):
        resp = c.get(path + ('?' + query if query else ''))
        self.assertEqual(resp.status, 200, resp)
        return resp

    def traffic(self, c):
        """
        100 requests on 4 connections side by side, 7 of them 404 and 5
        of them HEAD, two connections on each of the two workers (the
        other one is stopped while a connection is taken); returns (bytes
        sent, bytes received, 404 body, {worker pid: requests}).
        """
        sent = [0] * 4
        got = [0] * 4
        errors = []
        notfound = []
        conns = [c.connect() for _ in range(4)]
        for conn in conns:
            self.addCleanup(conn.close)

        def one(i, k):
            n = i * 25 + k
            path = '/missing-%d' % n if n % 14 == 3 else '/a.txt'
            method = 'HEAD' if n % 20 == 10 else 'GET'
            data = build_request(path, method)
            conns[i].send(data)
            sent[i] += len(data)
            resp = conns[i].read_response(method)
            got[i] += resp_bytes(resp)
            if path == '/a.txt':
                assert resp.status == 200, resp
            else:
                assert resp.status == 404, resp
                notfound.append(resp.body)

        # With TCP_DEFER_ACCEPT a connection is accepted with its first
        # request: each pair's first request goes while the other worker
        # is stopped, so the pair is that worker's.
        pids = c.workers()
        self.assertEqual(len(pids), 2)
        owner = {}
        for w, (a, b) in ((0, (0, 1)), (1, (2, 3))):
            other = pids[1 - w]
            os.kill(other, signal.SIGSTOP)
            try:
                one(a, 0)
                one(b, 0)
            finally:
                os.kill(other, signal.SIGCONT)
            owner[a] = owner[b] = pids[w]

        def client(i):
            try:
                for k in range(1, 25):
                    one(i, k)
            except Exception as e:	# reported by the main thread
                errors.append(e)

        threads = [threading.Thread(target=client, args=(i,))
                   for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        for conn in conns:
            conn.close()
        self.assertEqual(errors, [])
        self.assertEqual(len(notfound), 7)
        per = {}
        for i in range(4):
            per[owner[i]] = per.get(owner[i], 0) + 25
        return sum(sent), sum(got), notfound[0], per

    def test_counts_after_known_traffic(self):
        # traffic() steers connections by stopping a worker: the other
        # takes them only from a socket they share.
        c = self.start_status(reuseport=False)
        self.probe_accepted(c)
        sent, got, body404, per = self.traffic(c)
        doc = self.settled(c)
        self.assertEqual(doc['requests']['total'], 100)
        # Two workers, fifty each, summed.
        self.assertEqual({w['pid']: w['requests']
                          for w in doc['worker_slots']}, per)
        self.assertEqual(sorted(per.values()), [50, 50])
        self.assertEqual(doc['responses'], {'1xx': 0, '2xx': 93, '3xx': 0,
                                            '4xx': 7, '5xx': 0})
        methods = {k: v for k, v in doc['methods'].items() if v}
        self.assertEqual(methods, {'GET': 95, 'HEAD': 5})
        conns = doc['connections']
        self.assertEqual(conns['accepted'], 1 + 4)
        self.assertEqual((conns['active'], conns['reading'],
                          conns['writing'], conns['idle'],
                          conns['timeouts']), (0, 0, 0, 0, 0))
        self.assertEqual(doc['bytes'], {'in': sent, 'out': got})
        self.assertEqual(doc['request_time']['count'], 100)
        self.assertEqual(sum(doc['request_time']['counts']), 100)
        self.assertEqual(doc['worker_slots_used'], 2)
        self.assertEqual((doc['workers'], doc['generation'],
                          doc['reloads'], doc['worker_restarts']),
                         (2, 1, 0, 0))
        srv = doc['servers']
        self.assertEqual([s['name'] for s in srv], ['localhost'])
        self.assertEqual((srv[0]['requests'], srv[0]['2xx'],
                          srv[0]['4xx']), (100, 93, 7))
        self.assertEqual(srv[0]['body_bytes_out'],
                         88 * len(A_BODY) + 7 * len(body404))
        self.assertEqual(doc['upstreams'], [])

        # Over HTTP: the same, plus the status request being answered.
        req = build_request('/status?json')
        with c.connect() as conn:
            conn.send(req)
            resp = conn.read_response()
        self.assertEqual(resp.header('Content-Type'), 'application/json')
        self.assertEqual(resp.header('Cache-Control'), 'no-store')
        live = json.loads(resp.body)
        self.assertEqual(live['requests']['total'], 100)
        self.assertEqual(live['connections']['accepted'], 1 + 4 + 1)
        self.assertEqual(live['connections']['active'], 1)
        self.assertEqual(live['connections']['writing'], 1)
        self.assertEqual(live['bytes'], {'in': sent + len(req), 'out': got})
        self.assertEqual(live['responses'], doc['responses'])
        # ... and the status response counted once it went out.
        after = self.settled(c)
        self.assertEqual(after['requests']['total'], 101)
        self.assertEqual(after['bytes']['out'], got + resp_bytes(resp))

    def test_killed_worker_keeps_its_totals(self):
        c = self.start_status()
        self.probe_accepted(c)
        # The worker that takes the connection is the one whose
        # descriptor table gains a socket.
        before = {pid: sockets_of(pid) for pid in c.workers()}
        with c.connect() as conn:
            for _ in range(30):
                conn.send(build_request('/a.txt'))
                self.assertEqual(conn.read_response().status, 200)
            victim = worker_gaining(c, before)
            self.assertIsNotNone(victim)
            doc = self.file_json(c)
            self.assertEqual(doc['connections']['idle'], 1)
            c.expect_worker_death = True
            os.kill(victim, signal.SIGKILL)
            c.wait_workers(2, exclude=[victim])
        doc = self.settled(c)
        self.assertEqual(doc['requests']['total'], 30)
        self.assertEqual(doc['responses']['2xx'], 30)
        self.assertEqual(doc['worker_restarts'], 1)
        self.assertEqual(doc['worker_slots_used'], 2)
        # The dead worker's gauges went with it.
        self.assertEqual(doc['connections']['idle'], 0)
        self.assertEqual(doc['connections']['active'], 0)
        self.assertEqual(self.status(c).status, 200)
        self.assertEqual(self.settled(c)['requests']['total'], 31)

    def test_reload_keeps_totals(self):
        c = self.start_status()
        for _ in range(10):
            self.assertEqual(c.get('/a.txt').status, 200)
        old = c.workers()
        os.kill(c.master_pid, signal.SIGHUP)
        c.wait_workers(2, exclude=old)
        doc = self.settled(c)
        self.assertEqual(doc['requests']['total'], 10)
        self.assertEqual((doc['reloads'], doc['generation']), (1, 2))
        self.assertEqual(doc['worker_restarts'], 0)
        self.assertEqual([s['name'] for s in doc['servers']], ['localhost'])

    def test_timeouts_are_counted(self):
        c = self.start_status(header_timeout=Raw('300ms'))
        with c.connect() as conn:
            conn.send(b'GET /a.txt HTTP/1.1\r\n')
            self.assertEqual(conn.read_response().status, 408)
        doc = self.settled(c)
        self.assertEqual(doc['connections']['timeouts'], 1)
        self.assertEqual(doc['responses']['4xx'], 1)

    def test_apache_auto(self):
        c = self.start_status()
        for _ in range(12):
            self.assertEqual(c.get('/a.txt').status, 200)
        self.settled(c)
        resp = self.status(c, 'auto')
        self.assertEqual(resp.header('Content-Type'),
                         'text/plain; charset=ISO-8859-1')
        lines = resp.body.decode('latin-1').splitlines()
        # As Apache 2.4: the host name, then "Key: value" lines.
        self.assertEqual(lines[0], 'localhost')
        fields = {}
        for line in lines[1:]:
            m = re.match(r'^([A-Za-z][A-Za-z0-9 ]*): (.*)$', line)
            self.assertTrue(m, line)
            fields[m.group(1)] = m.group(2)
        self.assertEqual(fields['Total Accesses'], '12')
        self.assertEqual(fields['ServerVersion'], 'corral/0.1.0')
        for key in ('Total kBytes', 'Uptime', 'ServerUptimeSeconds',
                    'BusyWorkers', 'IdleWorkers', 'ConnsTotal',
                    'ConnsAsyncKeepAlive', 'ConnsAsyncWriting'):
            self.assertRegex(fields[key], r'^\d+$', key)
        for key in ('ReqPerSec', 'BytesPerSec', 'BytesPerReq', 'Load1'):
            float(fields[key])
        busy, idle = int(fields['BusyWorkers']), int(fields['IdleWorkers'])
        self.assertEqual(busy + idle, 2)
        self.assertEqual(busy, 1)	# the one answering this
        self.assertRegex(fields['Scoreboard'], r'^[W_]{2}$')
        self.assertEqual(fields['ConnsTotal'], '1')

    def test_prometheus(self):
        c = self.start_status()
        for _ in range(20):
            self.assertEqual(c.get('/a.txt').status, 200)
        self.assertEqual(c.get('/nope').status, 404)
        self.settled(c)
        resp = self.status(c, 'prometheus')
        self.assertEqual(resp.header('Content-Type'),
                         'text/plain; version=0.0.4; charset=utf-8')
        text = resp.body.decode()
        fams, s = parse_prometheus(self, text)
        self.assertEqual(s[('corral_http_requests_total', ())], 21)
        self.assertEqual(s[('corral_http_responses_total',
                            (('code', '2xx'),))], 20)
        self.assertEqual(s[('corral_http_responses_total',
                            (('code', '4xx'),))], 1)
        self.assertEqual(s[('corral_http_request_duration_seconds_count',
                            ())], 21)
        self.assertEqual(s[('corral_server_responses_total',
                            (('code', '4xx'), ('server', 'localhost')))], 1)
        self.assertEqual(s[('corral_connections_active', ())], 1)
        self.assertEqual(fams['corral_http_request_duration_seconds'],
                         'histogram')
        # /metrics answers the same format, as Prometheus expects.
        c2 = self.start_status(server={'location "/metrics"':
                                       {'status': True}})
        m = c2.get('/metrics')
        self.assertEqual(m.status, 200)
        self.assertTrue(m.body.startswith(b'# HELP corral_'), m.body[:80])
        promtool = shutil.which('promtool')
        if promtool is None:
            if os.environ.get('CI'):
                self.fail('promtool is missing; quickstart installs it')
            return
        out = subprocess.run([promtool, 'check', 'metrics'], input=text,
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_html_page(self):
        c = self.start_status()
        resp = self.status(c, None)
        self.assertEqual(resp.header('Content-Type'),
                         'text/html; charset=utf-8')
        self.assertIn(b'<canvas id="c-rps">', resp.body)
        # Nothing from elsewhere: no URL with a scheme or a host.
        self.assertNotRegex(resp.body, rb'(?i)(https?:)?//[a-z0-9]')
        head = c.request(build_request('/status', 'HEAD'), ('HEAD',))
        self.assertEqual(head.header('Content-Length'), str(len(resp.body)))
        self.assertEqual(head.body, b'')

    def test_access_control(self):
        c = self.start_status({'status_allow': ['10.1.2.3']})
        self.assertEqual(c.get('/status?json').status, 403)
        self.assertIn('status page not allowed', c.log())
        c2 = self.start_status()
        self.assertEqual(c2.get('/status', method='POST').status, 405)
        self.assertEqual(c2.get('/status', method='DELETE').status, 405)
        self.assertEqual(c2.get('/a.txt').status, 200)

    def test_allow_deny_replace_status_allow(self):
        # With allow/deny in the status location, they decide (first
        # match wins) and status_allow is not consulted.
        c = self.start_status({'status_allow': ['10.1.2.3'],
                               'allow': ['127.0.0.0/8'], 'deny': ['all']})
        self.assertEqual(c.get('/status?json').status, 200)
        c2 = self.start_status({'allow': ['10.0.0.0/8'], 'deny': ['all']})
        r = c2.get('/status?json')
        self.assertEqual(r.status, 403)
        self.assertIn('access forbidden by rule', c2.log())
        self.assertNotIn('status page not allowed', c2.log())

    def test_server_rules_protect_the_status_location(self):
        # The server's allow/deny are the location's when it has none:
        # they decide for the status views too, not status_allow.
        c3 = self.start_status({'status_allow': ['10.1.2.3']}, workers=1,
                               server={'allow': ['127.0.0.1'],
                                       'deny': ['all']})
        self.assertEqual(c3.get('/status?auto').status, 200)
        c4 = self.start_status(workers=1, server={'deny': ['127.0.0.1']})
        self.assertEqual(c4.get('/status').status, 403)
        self.assertEqual(c4.get('/a.txt').status, 403)

    def test_outside_views(self):
        c = self.start_status()
        self.probe_accepted(c)
        for _ in range(7):
            self.assertEqual(c.get('/a.txt').status, 200)
        self.settled(c)
        lines = dict(l.rsplit(' ', 1) for l in
                     self.outside(c, '-s').splitlines())
        self.assertEqual(lines['corral_http_requests_total'], '7')
        self.assertEqual(lines['corral_connections_accepted_total'], '8')
        top = self.outside(c, '-T')
        self.assertRegex(top, r'requests +7 total')
        self.assertRegex(top, r'\nlocalhost +7 ')
        two = self.outside(c, '-T', '-i', '1', '-n', '2')
        self.assertEqual(len(re.findall(r'^requests ', two, re.M)), 2)
        self.assertRegex(two, r'requests +7 total, 0\.0/s\b')

    def test_corralctl(self):
        ctl = os.environ.get('CORRALCTL')
        if not ctl or not os.access(ctl, os.X_OK):
            self.skipTest('no corralctl (set CORRALCTL)')
        c = self.make()
        c.directives['pid_file'] = os.path.join(c.tmp, 'corral.pid')
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        self.assertTrue(wait_until(lambda: os.path.exists(
            os.path.join(c.tmp, 'corral.pid')), 5))
        for _ in range(3):
            self.assertEqual(c.get('/nothing').status, 404)

        def ctl_run(*args):
            return subprocess.run([ctl, '-c', c.conf_path] + list(args),
                                  capture_output=True, text=True, timeout=20)
        out = wait_for(lambda: ctl_run('status'),
                       lambda o: re.search(r'requests +3 total', o.stdout),
                       5)
        self.assertIsNotNone(out, ctl_run('status').stdout)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn('corral is running (pid %d)' % c.master_pid,
                      out.stdout)
        self.assertRegex(out.stdout, r'4xx 3')
        out = ctl_run('top', '-d', '1', '-n', '2')
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(len(re.findall(r'^requests ', out.stdout, re.M)), 2)
        out = ctl_run('stats')
        self.assertIn('corral_http_requests_total 3\n', out.stdout)
        out = ctl_run('stats', '--json')
        self.assertEqual(json.loads(out.stdout)['responses']['4xx'], 3)
        out = ctl_run('top', '-n', 'x')
        self.assertEqual(out.returncode, 2)

    def test_cache_counters_without_cache_path(self):
        # The store is anonymous (no cache.path): the master copies its
        # counters into the stats file every second.  With
        # file_cache_max_size 0 every request looks a.txt up in the store
        # (a worker's entry otherwise keeps its pin: one lookup).
        c = self.start_status(workers=1, file_cache_max_size=0)
        for _ in range(5):
            self.assertEqual(c.get('/a.txt').status, 200)
        live = json.loads(self.status(c).body)['cache']
        store = live['store']
        self.assertEqual(store['sets'], 1)
        self.assertGreaterEqual(store['hits'], 4)
        self.assertAlmostEqual(live['hit_ratio'],
                               store['hits'] / store['gets'], places=3)
        doc = wait_for(lambda: self.file_json(c),
                       lambda d: d['cache']['store'] == store, 5)
        self.assertIsNotNone(doc, self.file_json(c))
        lines = self.outside(c, '-s')
        self.assertIn('\ncorral_store_hits_total %d\n' % store['hits'],
                      lines)
        self.assertRegex(self.outside(c, '-T'), r'hit ratio %.1f%%' %
                         (100.0 * store['hits'] / store['gets']))

    def test_no_stats_file(self):
        c = self.start(pid_file='off')
        out = subprocess.run([BIN, '-T', '-c', c.conf_path],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 1)
        self.assertIn('stats_file', out.stderr)

    def test_stats_file_follows_pid_file(self):
        c = self.make()
        pid = os.path.join(c.tmp, 'run.pid')
        c.directives['pid_file'] = pid
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        self.assertTrue(wait_until(lambda: os.path.exists(
            os.path.join(c.tmp, 'run.stats')), 5))
        self.assertEqual(c.get('/nothing').status, 404)
        doc = wait_for(lambda: self.file_json(c),
                       lambda d: d['requests']['total'] == 1, 5)
        self.assertIsNotNone(doc)

    def test_config_errors(self):
        c = self.make()
        with open(c.conf_path, 'a') as f:
            f.write('upstream app {\n servers = {"127.0.0.1:1"}\n}\n'
                    'server {\n names = {"b"}\n root = "%s"\n'
                    ' location "/s" {\n  status = on\n  proxy = "app"\n'
                    ' }\n}\n' % c.htdocs)
        out = c.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r'corral\.conf:\d+: location "/s" '
                         r'ending here has both proxy and status')
        # -t says what start would: the stats file's folder must exist.
        c3 = self.make()
        with open(c3.conf_path, 'a') as f:
            f.write('stats_file = "%s/none/corral.stats"\n' % c3.tmp)
        out = c3.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r'corral\.conf:\d+: stats_file .*/none/'
                         r'corral\.stats: .*/none: No such file')
        with self.assertRaises(Exception):
            c3.start()
        self.assertIn('No such file', read_text(c3.stderr_path))
        c2 = self.make(server={'location "/s"': {
            'status': True, 'status_allow': ['localhost']}})
        out = c2.check_config()
        self.assertEqual(out.returncode, 1)
        self.assertRegex(out.stderr, r'corral\.conf:\d+: status_allow '
                         r'"localhost" is not a numeric address')


# ------------------------------------------------------- Prometheus parser

NAME_RE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$')


def parse_prometheus(t, text):
    """
    Parses the text format 0.0.4 strictly; returns {family: type} and
    {(name, sorted labels): value}, and checks the conventions: HELP and TYPE before the samples, counters
    named _total, histograms with ascending le ending in +Inf, cumulative
    buckets, _count equal to the +Inf bucket, no duplicate series.
    """
    t.assertTrue(text.endswith('\n'))
    types, helped, seen = {}, set(), set()
    values = {}
    hist = {}
    for line in text.splitlines():
        if line.startswith('#'):
            m = re.match(r'^# (HELP|TYPE) (\S+) (.+)$', line)
            t.assertTrue(m, line)
            name = m.group(2)
            t.assertRegex(name, NAME_RE)
            if m.group(1) == 'TYPE':
                t.assertNotIn(name, types, 'TYPE twice: ' + name)
                t.assertIn(m.group(3), ('counter', 'gauge', 'histogram'))
                types[name] = m.group(3)
            else:
                t.assertNotIn(name, helped)
                helped.add(name)
            continue
        m = SAMPLE_RE.match(line)
        t.assertTrue(m, 'bad sample line %r' % line)
        name, labels, value = m.group(1), m.group(2) or '', m.group(3)
        pairs = []
        if labels:
            inner = labels[1:-1]
            pos = 0
            while pos < len(inner):
                lm = LABEL_RE.match(inner, pos)
                t.assertTrue(lm, 'bad labels %r' % labels)
                pairs.append((lm.group(1), lm.group(2)))
                pos = lm.end()
                if pos < len(inner):
                    t.assertEqual(inner[pos], ',', labels)
                    pos += 1
        v = float(value)
        family = name
        for suffix in ('_bucket', '_sum', '_count'):
            if name.endswith(suffix) and \
                    types.get(name[:-len(suffix)]) == 'histogram':
                family = name[:-len(suffix)]
        t.assertIn(family, types, 'sample before its TYPE: ' + line)
        t.assertIn(family, helped, 'sample without HELP: ' + line)
        if types[family] == 'counter':
            t.assertTrue(family.endswith('_total'), family)
            t.assertGreaterEqual(v, 0)
        else:
            t.assertFalse(family.endswith('_total'), family)
        key = (name, tuple(sorted(pairs)))
        t.assertNotIn(key, seen, 'duplicate series ' + line)
        seen.add(key)
        values[key] = v
        if types[family] == 'histogram':
            rest = tuple(p for p in sorted(pairs) if p[0] != 'le')
            h = hist.setdefault((family, rest), {'le': [], 'count': None})
            if name.endswith('_bucket'):
                le = dict(pairs)['le']
                h['le'].append((float(le), v))
            elif name.endswith('_count'):
                h['count'] = v
    for (family, rest), h in hist.items():
        les = [le for le, _ in h['le']]
        t.assertEqual(les, sorted(les), family)
        t.assertEqual(les[-1], float('inf'), family)
        counts = [n for _, n in h['le']]
        t.assertEqual(counts, sorted(counts), 'not cumulative: ' + family)
        t.assertEqual(h['count'], counts[-1], family)
    return types, values
