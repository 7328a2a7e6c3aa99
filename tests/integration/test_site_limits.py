"""
Request limits (a location's return comes before them, as in nginx, so
these locations serve files): limit_req and limit_conn with their state in the shared
store (so the sum over workers is limited, and a worker's crash forgets
nothing), and max_body_size per location.
"""

import os
import re
import signal
import socket
import time
import unittest

from harness import (CorralTestCase, Conn, build_request, quote, wait_until,
                     IO_TIMEOUT)


def loc(title, *lines):
    return '  location %s {\n%s\n  }\n' % (
        quote(title), '\n'.join('    ' + l for l in lines))


ZONE = 'limit_zone "api" {\n  key = "$remote_addr"\n  rate = %s\n' \
       '  status = %d\n}\n'


class LimitReqTest(CorralTestCase):

    def site(self, rate, status, limit, workers=2):
        return self.make(workers=workers, log_level='debug',
                         _raw=ZONE % (rate, status),
                         server={'_raw': loc('/api/', 'limit_req = "%s"' %
                                             limit)})

    def workers_seen(self, c):
        return set(re.findall(r'worker (\d+): accept', c.log()))

    def test_limit_is_shared_by_the_workers(self):
        c = self.site('1r/m', 429, 'api burst=4 nodelay')
        c.write('/api/x', 'ok')
        c.start()
        c.wait_workers(2)
        statuses = []
        # New connections until both workers have taken some: the
        # limit is the sum over them, five, not five each.
        for _ in range(400):
            statuses.append(c.get('/api/x').status)
            if len(statuses) >= 12 and len(self.workers_seen(c)) == 2:
                break
        self.assertEqual(self.workers_seen(c), {'0', '1'})
        self.assertEqual(statuses.count(200), 5, statuses)
        self.assertEqual(statuses.count(429), len(statuses) - 5)
        self.assertEqual(statuses[:5], [200] * 5)
        c.wait_log(r'limiting requests of zone "api"')

    def test_state_survives_a_worker_crash(self):
        c = self.site('1r/m', 503, 'api burst=1 nodelay', workers=1)
        c.write('/api/index.html', 'ok')
        c.start()
        self.assertEqual([c.get('/api/').status for _ in range(3)],
                         [200, 200, 503])
        old = c.wait_workers(1)
        c.expect_worker_death = True
        os.kill(old[0], signal.SIGKILL)
        c.wait_workers(1, exclude=old)
        self.assertEqual(c.get('/api/').status, 503)

    def test_delay_without_nodelay(self):
        c = self.site('10r/s', 503, 'api burst=5', workers=1)
        c.write('/api/index.html', 'ok')
        c.start()
        t0 = time.monotonic()
        got = [c.get('/api/').status for _ in range(3)]
        took = time.monotonic() - t0
        self.assertEqual(got, [200, 200, 200])
        # The second and third waited their turn: 100 ms apart at 10r/s.
        self.assertGreaterEqual(took, 0.15)
        c.wait_log(r'delaying request \d+ ms')

    def test_other_keys_are_not_limited(self):
        c = self.make(_raw=ZONE % ('1r/m', 429),
                      server={'_raw': loc('/api/', 'limit_req = "api"')})
        c.write('/api/index.html', 'ok')
        c.directives['_raw'] = ('limit_zone "api" {\n  key = '
                                '"$http_x_user"\n  rate = 1r/m\n'
                                '  status = 429\n}\n')
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        for user in ['a', 'b', 'c']:
            self.assertEqual(c.get('/api/', headers=['X-User: ' +
                                                     user]).status, 200)
            self.assertEqual(c.get('/api/', headers=['X-User: ' +
                                                     user]).status, 429)


class LimitConnTest(CorralTestCase):

    def test_limit_conn_counts_open_downloads(self):
        c = self.make(workers=2, _raw=ZONE % ('100r/s', 503),
                      server={'_raw': loc('/dl/', 'limit_conn = "api 1"')})
        c.write('/dl/big', os.urandom(8 << 20))
        c.write('/dl/small', 'small')
        c.start()
        hog = socket.create_connection(('127.0.0.1', c.port))
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        hog.settimeout(IO_TIMEOUT * 2)
        hog.sendall(build_request('/dl/big'))
        # Its answer has begun: the request is counted from now on.
        self.assertTrue(hog.recv(64).startswith(b'HTTP/1.1 200 '))
        # While the big response waits for the client to read, the
        # address holds its one connection, in every worker.
        got = wait_until(lambda: c.get('/dl/small').status == 503, 10)
        self.assertTrue(got, c.log()[-2000:])
        hog.close()
        ok = wait_until(lambda: c.get('/dl/small').status == 200, 5)
        self.assertTrue(ok)


class BodySizeTest(CorralTestCase):

    def test_max_body_size_per_location(self):
        c = self.start(server={'_raw': loc('/small/', 'max_body_size = 10',
                                           'return = "200 ok"') +
                               loc('/big/', 'max_body_size = 0',
                                   'return = "200 ok"')})
        r = c.get('/small/', method='POST', body=b'x' * 11,
                  headers=['Content-Length: 11'])
        self.assertEqual(r.status, 413)
        r = c.get('/small/', method='POST', body=b'x' * 10,
                  headers=['Content-Length: 10'])
        self.assertEqual(r.status, 200)
        big = b'y' * (2 << 20)
        r = c.get('/big/', method='POST', body=big,
                  headers=['Content-Length: %d' % len(big)])
        self.assertEqual(r.status, 200)
        r = c.get('/other', method='POST', body=big,
                  headers=['Content-Length: %d' % len(big)])
        self.assertEqual(r.status, 413)


if __name__ == '__main__':
    unittest.main()
