"""
Fault injection: allocations that fail inside a worker (an LD_PRELOAD shim
fails one allocation in N made by corral's own code).  Each failure may
cost one request (500 or 503) or one connection (closed), never a wrong
response and never the worker.
"""
import os
import re
import socket
import subprocess
import unittest

from harness import (BIN, CorralTestCase, build_request, parse_responses,
                     read_text, start_with_env, wait_until)

SHIM = os.environ.get('CORRAL_FAILMALLOC') or os.path.join(
    os.path.dirname(BIN), 'tests', 'fault', 'failmalloc.so')


def sanitized(binary):
    """ASan must come first in the library list: no preloading then."""
    out = subprocess.run(['ldd', binary], capture_output=True, text=True)
    return 'libasan' in out.stdout


@unittest.skipUnless(os.path.exists(SHIM), 'failmalloc.so is not built')
class AllocationFailureTest(CorralTestCase):

    def test_failed_allocations_cost_requests_not_the_worker(self):
        if sanitized(BIN):
            self.skipTest('ASan build: LD_PRELOAD cannot go first')
        c = self.make(workers=1, file_cache_entries=16)
        files = {}
        for i in range(60):
            data = os.urandom(100 + i * 997)
            files['/f%d.bin' % i] = data
            c.write('f%d.bin' % i, data)
        log = os.path.join(c.tmp, 'failmalloc.log')
        # Workers started by root run as nobody: let them write to it.
        with open(log, 'w'):
            pass
        os.chmod(log, 0o666)
        env = {'LD_PRELOAD': SHIM, 'CORRAL_FAILMALLOC_EVERY': '4',
               'CORRAL_FAILMALLOC_SKIP': '8',
               'CORRAL_FAILMALLOC_LOG': log}
        start_with_env(c, env)
        worker = c.wait_workers(1)[0]
        ok = failed = closed = 0
        for round_ in range(40):
            paths = ['/f%d.bin' % ((round_ * 7 + k) % 60) for k in range(4)]
            try:
                with socket.create_connection(('127.0.0.1', c.port),
                                              timeout=5) as s:
                    s.sendall(b''.join(build_request(p) for p in paths[:-1])
                              + build_request(paths[-1], headers=[
                                  ('Connection', 'close')]))
                    data = b''
                    while True:
                        d = s.recv(65536)
                        if not d:
                            break
                        data += d
            except ConnectionResetError:
                closed += 1
                continue
            if not data:
                closed += 1
                continue
            # Whatever came is well formed: complete responses, in order,
            # then possibly a close.
            for path, r in zip(paths, parse_responses(data)):
                if r.status == 200:
                    self.assertEqual(r.body, files[path], path)
                    ok += 1
                else:
                    self.assertIn(r.status, (500, 503), r)
                    failed += 1
        self.assertGreater(ok, 0)
        self.assertGreaterEqual(len(read_text(log).splitlines()), 5,
                                'the shim failed too few allocations')
        self.assertGreater(failed + closed, 0)
        # The worker survived all of it and still serves.
        self.assertEqual(c.workers(), [worker])
        self.assertFalse(re.search(r'killed by signal|exited with code',
                                   c.log()), c.log())
