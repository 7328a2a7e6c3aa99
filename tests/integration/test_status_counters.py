"""
The counters' build switch (./configure --disable-counters, CORRAL_COUNTERS
in the environment from configure): with the counters built in, every view
counts and says so; without them, every view says they are off (JSON nulls,
no Total Accesses, corral_counters_enabled 0, "counters off" from corral -T)
instead of showing zeros, and the store's own counters are still there;
the HTML page (in headless Chromium) says so too.
.ci/run runs this module against both builds.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile

from harness import BIN, CorralTestCase, Raw, quote, wait_for
from test_status_page import FLAGS, chromium

COUNTING = os.environ.get('CORRAL_COUNTERS', '1') == '1'


class CountersSwitch(CorralTestCase):

    def setUp(self):
        # file_cache_max_size 0: every request looks a.txt up in the
        # store, so the store's counters move in both builds.
        self.c = self.make(workers=2, file_cache_max_size=0,
                           server={'location "/status"': {'status': True}})
        c = self.c
        c.stats_path = os.path.join(c.tmp, 'corral.stats')
        c.directives['stats_file'] = Raw(quote(c.stats_path))
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        c.wait_workers(2)
        # A worker takes its slot once it runs, after the fork.
        doc = wait_for(lambda: json.loads(self.outside('-s', '-j')),
                       lambda d: d['worker_slots_used'] == 2, 5)
        self.assertIsNotNone(doc, self.outside('-s', '-j'))
        c.write('a.txt', b'a' * 100)
        for _ in range(6):
            self.assertEqual(c.get('/a.txt').status, 200)

    def outside(self, *args):
        out = subprocess.run([BIN] + list(args) + ['-c', self.c.conf_path],
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    def view(self, query):
        resp = self.c.get('/status?' + query)
        self.assertEqual(resp.status, 200, resp)
        return resp.body.decode('latin-1')

    def test_json(self):
        doc = json.loads(self.view('json'))
        self.assertIs(doc['counters'], COUNTING)
        self.assertEqual(doc['workers'], 2)
        self.assertEqual(len(doc['worker_slots']), 2)
        # The store counts for itself, counters or not.
        self.assertGreaterEqual(doc['cache']['store']['hits'], 5)
        if COUNTING:
            self.assertEqual(doc['requests']['total'], 6)
            self.assertEqual(doc['responses']['2xx'], 6)
            self.assertEqual(doc['servers'][0]['requests'], 6)
            self.assertEqual(doc['request_time']['count'], 6)
            self.assertGreater(doc['bytes']['out'], 600)
        else:
            for group in ('connections', 'requests', 'responses',
                          'methods', 'bytes', 'tls', 'memcached',
                          'request_time', 'servers', 'upstreams'):
                self.assertIsNone(doc[group], group)
            self.assertEqual(set(doc['cache']), {'store', 'hit_ratio'})
            for w in doc['worker_slots']:
                self.assertGreater(w['pid'], 0)
                self.assertIsNone(w['requests'])
        # corral -s -j from outside reads the same switch from the file.
        out = wait_for(lambda: json.loads(self.outside('-s', '-j')),
                       lambda d: d['counters'] is COUNTING and
                       (not COUNTING or d['requests']['total'] == 7), 5)
        self.assertIsNotNone(out, self.outside('-s', '-j'))

    def test_apache_auto(self):
        lines = self.view('auto').splitlines()
        self.assertEqual(lines[0], 'localhost')
        fields = dict(l.split(': ', 1) for l in lines[1:])
        self.assertEqual(fields['ServerVersion'], 'corral/0.1.0')
        self.assertEqual(fields['Processes'], '2')
        if COUNTING:
            self.assertEqual(fields['Total Accesses'], '6')
            self.assertNotIn('Counters', fields)
        else:
            self.assertEqual(fields['Counters'], 'off')
            for key in ('Total Accesses', 'Total kBytes', 'ReqPerSec',
                        'BusyWorkers', 'ConnsTotal', 'Scoreboard'):
                self.assertNotIn(key, fields)
        float(fields['CacheHitRatio'])

    def test_prometheus(self):
        text = self.view('prometheus')
        self.assertIn('\ncorral_counters_enabled %d\n' % COUNTING, text)
        self.assertIn('\n# TYPE corral_counters_enabled gauge\n', text)
        self.assertRegex(text, r'\ncorral_store_hits_total [1-9]')
        self.assertRegex(text, r'\ncorral_reloads_total 0\n')
        if COUNTING:
            self.assertIn('\ncorral_http_requests_total 6\n', text)
        else:
            for name in ('http_requests_total', 'connections_active',
                         'http_request_duration_seconds',
                         'server_responses_total'):
                self.assertNotIn('corral_' + name, text)

    def test_summary(self):
        # The master copies the store's counters to the file each second.
        top = wait_for(lambda: self.outside('-T'),
                       lambda t: re.search(r'\ncache +hit ratio \d', t), 5)
        self.assertIsNotNone(top, self.outside('-T'))
        self.assertRegex(top, r'^corral/\S+  master \d+ .* workers 2/2')
        if COUNTING:
            self.assertRegex(top, r'\nrequests +6 total')
        else:
            self.assertRegex(top, r'\ncounters +off \(this corral was '
                             r'built with --disable-counters\)\n')
            self.assertNotIn('requests', top)

    def test_html_page(self):
        profile = tempfile.mkdtemp(prefix='corral-chromium-')
        self.addCleanup(shutil.rmtree, profile, True)
        out = subprocess.run(
            [chromium()] + FLAGS + ['--user-data-dir=' + profile,
                                    '--enable-logging=stderr', '--v=0',
                                    '--virtual-time-budget=3000',
                                    '--dump-dom', self.c.url('/status')],
            capture_output=True, text=True, timeout=90,
            stdin=subprocess.DEVNULL)
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        dom = out.stdout
        root = re.search(r'<html[^>]*>', dom).group(0)
        self.assertRegex(root, r'data-updates="[1-9]', root)
        self.assertNotIn('data-errors', root)
        self.assertEqual([l for l in out.stderr.splitlines()
                          if ':CONSOLE' in l], [])
        cards = [k for _, k in re.findall(r'<b>([^<]*)</b><span>([^<]*)'
                                          r'</span>', dom)]
        if COUNTING:
            self.assertIn('requests', cards)
            self.assertNotIn('<p>Counters are off', dom)
        else:
            self.assertIn('<p>Counters are off: this corral was built '
                          'with ./configure --disable-counters.</p>', dom)
            self.assertEqual(cards, ['store hit ratio'])
