"""
The status page in a real browser: headless Chromium loads it from the
server while traffic runs, and the test checks through the DOM it dumps
that the charts drew data points from the JSON endpoint, that the page
logged no error to the console, that it asked nothing of any other host,
and saves screenshots under the build folder (tests/status-page.png,
and tests/status-page-phone.png at a phone's width).
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import unittest

from harness import BIN, CorralTestCase, Raw, quote

FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
         '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync',
         '--disable-default-apps', '--disable-domain-reliability',
         # Nothing may leave the machine, not even the browser's own
         # background requests: every name but loopback fails to resolve.
         '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1']


def chromium():
    path = shutil.which('chromium') or shutil.which('chromium-browser')
    if path is None:
        if os.environ.get('CI'):
            raise AssertionError('chromium is missing; quickstart '
                                 'installs it')
        raise unittest.SkipTest('chromium is not installed')
    return path


class StatusPage(CorralTestCase):

    def run_browser(self, url, *args, timeout=90):
        profile = tempfile.mkdtemp(prefix='corral-chromium-')
        self.addCleanup(shutil.rmtree, profile, True)
        cmd = [chromium()] + FLAGS + ['--user-data-dir=' + profile] + \
            list(args) + [url]
        return subprocess.run(cmd, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def test_charts_draw_live_data(self):
        c = self.make(workers=2, server={'location "/status"':
                                         {'status': True}})
        c.start()
        c.write('a.txt', b'a' * 100)
        stop = threading.Event()

        def load():
            for _ in range(20000):	# bounded: stops with the browser
                if stop.is_set():
                    return
                try:
                    c.get('/a.txt')
                    c.get('/missing')
                except Exception:
                    return

        t = threading.Thread(target=load)
        t.start()
        try:
            net = os.path.join(c.tmp, 'net.json')
            page = c.url('/status')
            out = self.run_browser(page, '--enable-logging=stderr',
                                   '--v=0', '--log-net-log=' + net,
                                   '--virtual-time-budget=6000',
                                   '--dump-dom')
            shot = os.path.join(os.path.dirname(BIN), 'tests',
                                'status-page.png')
            os.makedirs(os.path.dirname(shot), exist_ok=True)
            if os.path.exists(shot):
                os.unlink(shot)
            out2 = self.run_browser(page, '--window-size=1000,1300',
                                    '--virtual-time-budget=4000',
                                    '--screenshot=' + shot)
            phone = shot.replace('.png', '-phone.png')
            out3 = self.run_browser(page, '--window-size=412,900',
                                    '--force-device-scale-factor=1',
                                    '--virtual-time-budget=3000',
                                    '--screenshot=' + phone)
        finally:
            stop.set()
            t.join(30)
        self.assertEqual(out.returncode, 0, out.stderr[-3000:])
        dom = out.stdout
        # Polled the JSON endpoint several times, with no script error.
        root = re.search(r'<html[^>]*>', dom).group(0)
        updates = re.search(r'data-updates="(\d+)"', root)
        self.assertTrue(updates, root)
        self.assertGreaterEqual(int(updates.group(1)), 3, root)
        self.assertNotIn('data-errors', root)
        self.assertIn('<p id="msg"></p>', dom)
        points = dict(re.findall(r'<canvas id="c-([a-z]+)"[^>]*'
                                 r'data-points="(\d+)"', dom))
        self.assertEqual(set(points), {'rps', 'status', 'conns', 'hits',
                                       'up'}, dom[-2000:])
        for chart in ('rps', 'status', 'conns'):
            self.assertGreaterEqual(int(points[chart]), 2, chart)
        # The request rate drawn is not all zero: it saw the traffic.
        legend = re.search(r'id="l-rps">([^<]*)<', dom).group(1)
        self.assertRegex(legend, r'req/s [0-9.]+')
        cards = re.findall(r'<b>([^<]*)</b><span>([^<]*)</span>', dom)
        self.assertIn('requests', [k for _, k in cards])
        # Nothing on the console.
        console = [l for l in out.stderr.splitlines() if ':CONSOLE' in l]
        self.assertEqual(console, [])
        # Every request the page made went to the server it came from.
        origin = 'http://127.0.0.1:%d' % c.port
        asked = page_requests(net, origin)
        self.assertIn(origin + '/status?json', asked)
        self.assertEqual([u for u in asked if not u.startswith(origin + '/')],
                         [])
        # The screenshot, for people to look at.
        self.assertEqual(out2.returncode, 0, out2.stderr[-3000:])
        with open(shot, 'rb') as f:
            png = f.read()
        self.assertEqual(png[:8], b'\x89PNG\r\n\x1a\n')
        self.assertGreater(len(png), 10000)
        self.assertEqual(out3.returncode, 0, out3.stderr[-3000:])
        with open(phone, 'rb') as f:
            png = f.read()
        # A phone's width, as asked: the IHDR chunk says 412 pixels.
        self.assertEqual(int.from_bytes(png[16:20], 'big'), 412)
        c.stop()


def page_requests(path, origin):
    """URLs of the requests a page of origin started, from a net log."""
    with open(path) as f:
        log = json.load(f)
    names = {v: k for k, v in log['constants']['logEventTypes'].items()}
    urls = []
    for e in log['events']:
        if names.get(e['type']) != 'URL_REQUEST_START_JOB':
            continue
        p = e.get('params', {})
        if p.get('initiator') == origin or \
                p.get('url', '').startswith(origin + '/'):
            urls.append(p.get('url'))
    return urls
