"""
A master killed with SIGKILL: its workers notice, give the listening
sockets back, finish what they serve and exit, and a new master starts on
the same port and the same store file.
"""

import os
import signal
import socket
import time

from harness import (CorralTestCase, Raw, build_request, proc_stat,
                     refused, same_process, wait_until)

BIG = 24 * 1024 * 1024


class MasterDeathTest(CorralTestCase):

    def start_cached(self, **kw):
        c = self.make(workers=2, worker_shutdown_timeout=Raw('30s'), **kw)
        c.directives['cache'] = {'path': os.path.join(c.tmp, 'cache.store'),
                                 'size': Raw('8m'), 'stripes': 4,
                                 'max_object': Raw('256k'),
                                 'file_max': Raw('64k')}
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        return c

    def test_sigkill_master_workers_finish_and_exit(self):
        c = self.start_cached()
        body = bytes(range(256)) * (BIG // 256)
        c.write('big.bin', body)
        c.write('small.txt', b'small\n')
        c.start()
        kids = c.wait_workers(2)
        starts = {p: proc_stat(p)[2] for p in kids}

        # A: a large response in progress, its client not reading yet.
        busy = c.connect(timeout=20)
        self.addCleanup(busy.close)
        busy.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        busy.send(build_request('/big.bin'))
        self.assertTrue(busy._fill(time.monotonic() + 5,
                                   'the first bytes'))
        # B: an idle keep-alive connection.
        idle = c.connect()
        self.addCleanup(idle.close)
        idle.send(build_request('/small.txt'))
        self.assertBody(idle.read_response(), b'small\n')

        mark = c.log_mark()
        c.expect_exit = True
        os.kill(c.master_pid, signal.SIGKILL)
        c.proc.wait(10)

        # The workers give the port back at once and close idle
        # connections...
        self.assertTrue(wait_until(lambda: refused(c.port), 5),
                        'workers still accept after the master died\n' +
                        c.diagnostics())
        self.assertTrue(idle.closed_within(5),
                        'idle connection kept open by an orphan worker')
        c.wait_log(r'\[warn\] \d+ worker \d: the master process is gone',
                   mark=mark)

        # ...and finish the response in progress, byte for byte.
        resp = busy.read_response(timeout=20)
        self.assertBody(resp, body)

        def alive():
            return [p for p in kids if same_process(p, starts[p])]
        self.assertTrue(wait_until(lambda: not alive(), 10),
                        'workers %r outlived their master' % alive())

        # A new master takes the same port and the same store file.
        c.proc = None
        c.returncode = None
        c.expect_exit = False
        c.seen = {}
        c.start()
        c.wait_workers(2)
        self.assertBody(c.get('/small.txt'), b'small\n')
        self.assertBody(c.get('/small.txt'), b'small\n')
        self.assertGreaterEqual(self.stats(c)['hits'], 1)

    def test_sigkill_master_idle_workers_exit_at_once(self):
        c = self.start_cached()
        c.write('small.txt', b'small\n')
        c.start()
        kids = c.wait_workers(2)
        starts = {p: proc_stat(p)[2] for p in kids}
        c.expect_exit = True
        os.kill(c.master_pid, signal.SIGKILL)
        c.proc.wait(10)

        def alive():
            return [p for p in kids if same_process(p, starts[p])]
        self.assertTrue(wait_until(lambda: not alive(), 5),
                        'idle workers %r outlived their master' % alive())
        self.assertTrue(refused(c.port))

    def test_sigkill_master_stalled_client_bounded(self):
        # A client that never reads keeps its response in flight: without
        # a master, the worker itself ends it at worker_shutdown_timeout.
        c = self.make(workers=1, worker_shutdown_timeout=Raw('1s'),
                      send_timeout=Raw('60s'))
        c.write('big.bin', b'x' * BIG)
        c.start()
        worker = c.wait_workers(1)[0]
        start = proc_stat(worker)[2]
        stalled = c.connect(timeout=20)
        self.addCleanup(stalled.close)
        stalled.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.send(build_request('/big.bin'))
        self.assertTrue(stalled._fill(time.monotonic() + 5,
                                      'the first bytes'))
        mark = c.log_mark()
        c.expect_exit = True
        t0 = time.monotonic()
        os.kill(c.master_pid, signal.SIGKILL)
        c.proc.wait(10)
        # Without worker_shutdown_timeout it would wait send_timeout (60 s).
        self.assertTrue(wait_until(lambda: not same_process(worker, start),
                                   40), 'the orphan worker did not exit')
        elapsed = time.monotonic() - t0
        self.assertGreater(elapsed, 0.8, 'did not wait for the response')
        self.assertLess(elapsed, 30)
        c.wait_log(r'\[warn\] .*still in progress after '
                   r'worker_shutdown_timeout', mark=mark)
