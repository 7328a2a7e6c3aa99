"""
Large files on both of their paths: up to cache.file_max they are held in
the shared store, and up to cache.file_copy_max (set to file_max here
unless a test says otherwise) they are copied from it (pinned while the
socket takes them); above, they go out with sendfile() from the file.  Ranges, HEAD, a reader that stops
reading, a file changed while it is sent, and a worker killed in the
middle of a send: the bytes a client gets are always one version of the
file, and the store gives back every pin (its bytes_used tells).
"""
import os
import re
import signal
import socket
import time
import zlib

from harness import (CorralTestCase, Raw, build_request, parse_byteranges,
                     wait_until)

STORED = (8 << 20) - (64 << 10)	# under file_max: from the store
FROM_FILE = 12 << 20	# over it: sendfile from the file


class LargeFileTest(CorralTestCase):

    def start_cached(self, size='64m', stripes=16, copy_max='8m', **kw):
        c = self.make(**kw)
        c.directives['cache'] = {
            'path': os.path.join(c.tmp, 'cache.store'),
            'size': Raw(size), 'stripes': Raw(str(stripes)),
            'max_object': Raw('8m'), 'file_max': Raw('8m')}
        if copy_max is not None:
            c.directives['cache']['file_copy_max'] = Raw(copy_max)
        with open(c.conf_path, 'w') as f:
            f.write(c.config_text())
        c.start()
        return c

    def setUp(self):
        self.stored = os.urandom(STORED)
        self.from_file = os.urandom(FROM_FILE)

    def stalled(self, c, path):
        """A client that asked for path, read the head and a little of
        the body, and reads no more; the server is then mid-send."""
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect(('127.0.0.1', c.port))
        s.sendall(build_request(path))
        got = b''
        while b'\r\n\r\n' not in got or len(got) < 2048:
            d = s.recv(4096)
            self.assertTrue(d, 'closed before the body')
            got += d
        self.assertTrue(got.startswith(b'HTTP/1.1 200 '), got[:100])
        return s, got

    def read_rest(self, s, got):
        """The rest of the one response on s: (head, body)."""
        s.settimeout(20)
        head, _, body = got.partition(b'\r\n\r\n')
        length = int([ln.split(b':')[1] for ln in head.split(b'\r\n')
                      if ln.lower().startswith(b'content-length:')][0])
        body = bytearray(body)
        while len(body) < length:
            d = s.recv(1 << 20)
            if not d:
                break
            body += d
        return head, bytes(body)

    def check_paths(self, sendfile):
        c = self.start_cached(sendfile=sendfile)
        c.write('stored.bin', self.stored)
        c.write('file.bin', self.from_file)
        for name, data in (('/stored.bin', self.stored),
                           ('/file.bin', self.from_file)):
            n = len(data)
            with c.connect(timeout=20) as conn:
                conn.send(
                    build_request(name, method='HEAD') +
                    build_request(name, headers=[
                        'Range: bytes=1000000-1999999']) +
                    build_request(name, headers=['Range: bytes=-70000']) +
                    build_request(name, headers=[
                        'Range: bytes=0-99,%d-%d' % (n - 5000, n - 1)]) +
                    build_request(name, method='HEAD', headers=[
                        'Range: bytes=10-19']) +
                    build_request(name))
                r = conn.read_response('HEAD')
                self.assertEqual(r.status, 200)
                self.assertEqual(r.header('Content-Length'), str(n))
                self.assertEqual(r.body, b'')
                r = conn.read_response()
                self.assertEqual(r.header('Content-Range'),
                                 'bytes 1000000-1999999/%d' % n)
                self.assertBody(r, data[1000000:2000000], 206)
                self.assertBody(conn.read_response(), data[-70000:], 206)
                parts = parse_byteranges(conn.read_response())
                self.assertEqual([p[1] for p in parts],
                                 [data[:100], data[n - 5000:]])
                r = conn.read_response('HEAD')
                self.assertEqual(r.status, 206)
                self.assertEqual(r.header('Content-Range'),
                                 'bytes 10-19/%d' % n)
                self.assertEqual(r.body, b'')
                self.assertBody(conn.read_response(), data)
        st = self.stats(c)
        # The small file went to the store once; the large one never.
        self.assertEqual(st['sets'], 1, st)
        self.assertEqual(st['items'], 1, st)
        self.assertGreaterEqual(st['hits'], 4, st)

    def check_copy_max(self, sendfile, tls=False):
        """The default file_copy_max (32k): a 31 KB file is copied from
        the store, a 200 KB one (under file_max) goes out with sendfile()
        from the file and only a compressed copy needs the store's."""
        c = self.start_cached(copy_max=None, sendfile=sendfile, gzip=True)
        small, big = os.urandom(31 << 10), os.urandom(200 << 10)
        text = b''.join(b'line %06d of a style sheet\n' % i
                        for i in range(8000))
        c.write('small.bin', small)
        c.write('big.bin', big)
        c.write('big.css', text)
        for name, data in (('/small.bin', small), ('/big.bin', big),
                           ('/big.css', text)):
            with c.connect(timeout=20) as conn:
                conn.send(build_request(name) + build_request(
                    name, headers=['Range: bytes=1000-1099']) +
                    build_request(name))
                self.assertBody(conn.read_response(), data)
                self.assertBody(conn.read_response(), data[1000:1100], 206)
                self.assertBody(conn.read_response(), data)
        st = self.stats(c)
        # small.bin always; the large ones only when sendfile is off.
        self.assertEqual(st['sets'], 1 if sendfile else 3, st)
        # The compressed copy is made from a store copy of the file.
        r = c.get('/big.css', headers=['Accept-Encoding: gzip'])
        self.assertEqual(r.status, 200)
        self.assertEqual(r.header('Content-Encoding'), 'gzip')
        self.assertEqual(zlib.decompress(r.body, 31), text)
        self.assertEqual(self.stats(c)['sets'], 3 if sendfile else 4)
        self.assertBody(c.get('/big.css'), text)

    def test_copy_max_default_sendfile(self):
        self.check_copy_max(True)

    def test_copy_max_default_no_sendfile(self):
        self.check_copy_max(False)

    def test_ranges_and_head_sendfile(self):
        self.check_paths(True)

    def test_ranges_and_head_no_sendfile(self):
        self.check_paths(False)

    def test_rewritten_in_place_while_sent_from_the_store(self):
        # The store's copy is the one version the client gets, even when
        # the file is overwritten under the send; the next request sees
        # the new bytes.
        c = self.start_cached(file_cache_valid=Raw('0s'))
        c.write('stored.bin', self.stored)
        s, got = self.stalled(c, '/stored.bin')
        try:
            new = os.urandom(STORED)
            c.write('stored.bin', new, mtime=time.time() + 5)
            self.assertBody(c.get('/stored.bin'), new)
            _, body = self.read_rest(s, got)
        finally:
            s.close()
        self.assertEqual(len(body), STORED)
        self.assertTrue(body == self.stored, 'the body mixes two versions')
        self.assertBody(c.get('/stored.bin'), new)
        self.assertEqual(self.stats(c)['sets'], 2)

    def test_replaced_while_sent_from_the_file(self):
        # A deploy renames a new file over the old one: the open file
        # keeps sending the old version whole.
        c = self.start_cached(file_cache_valid=Raw('0s'))
        path = c.write('file.bin', self.from_file)
        s, got = self.stalled(c, '/file.bin')
        try:
            new = os.urandom(FROM_FILE)
            tmp = path + '.new'
            with open(tmp, 'wb') as f:
                f.write(new)
            os.replace(tmp, path)
            self.assertBody(c.get('/file.bin'), new)
            _, body = self.read_rest(s, got)
        finally:
            s.close()
        self.assertEqual(len(body), FROM_FILE)
        self.assertTrue(body == self.from_file, 'the body mixes versions')
        self.assertEqual(self.stats(c)['sets'], 0)

    def pinned_while_stalled(self, c, released=None):
        """
        Starts a client that stalls in the middle of the stored file, then
        changes the file: the old copy is deleted but stays pinned by that
        send.  The store holds two such copies, so a third file (other.bin)
        can only come in by evicting the new copy: evictions 1 proves the
        pin.  Returns the client's socket, and whether the pin was already
        given back: only when released() says so may other.bin have come
        in without an eviction (the old copy's room was free again).
        """
        s, _ = self.stalled(c, '/stored.bin')
        new = os.urandom(STORED)
        c.write('stored.bin', new, mtime=time.time() + 5)
        self.assertBody(c.get('/stored.bin'), new)
        self.assertBody(c.get('/other.bin'), self.other)
        st = self.stats(c)
        got = (st['sets'], st['evictions'], st['items'])
        if released is not None and got == (3, 0, 2) and released():
            return s, True
        self.assertEqual(got, (3, 1, 1), st)
        return s, False

    def assert_unpinned(self, c):
        """Once the old copy is given back, a new version of stored.bin
        fits beside other.bin without evicting anything."""
        newer = os.urandom(STORED)
        c.write('stored.bin', newer, mtime=time.time() + 10)
        self.assertBody(c.get('/stored.bin'), newer)
        self.assertBody(c.get('/other.bin'), self.other)
        st = self.stats(c)
        self.assertEqual((st['sets'], st['evictions'], st['items']),
                         (4, 1, 2), 'the old copy is still held: %r' % st)
        self.assertEqual(st['corruptions'], 0, st)
        self.assertEqual(st['lock_recoveries'], 0, st)

    def start_small(self, **kw):
        """A store that holds two stored.bin-sized copies, not three."""
        c = self.start_cached(file_cache_valid=Raw('0s'), size='17m',
                              stripes=1, **kw)
        self.assertLess(self.stats(c)['bytes_total'], 3 * STORED)
        c.write('stored.bin', self.stored)
        self.other = os.urandom(STORED)
        c.write('other.bin', self.other)
        self.assertBody(c.get('/stored.bin'), self.stored)
        return c

    def test_slow_reader_of_a_stored_file_gives_its_pin_back(self):
        c = self.start_small(send_timeout=Raw('1s'))
        mark = c.log_mark()
        timed_out = r'timed out reading the response'
        # On a loaded machine the second can pass before other.bin comes
        # in: then its room was given back already, which proves the same.
        s, early = self.pinned_while_stalled(
            c, lambda: re.search(timed_out, c.log_since(mark)))
        try:
            if early:
                st = self.stats(c)
                self.assertEqual((st['corruptions'], st['lock_recoveries']),
                                 (0, 0), st)
                return
            # The server gives up on the reader at send_timeout and
            # unpins the old copy, which nothing else refers to.
            c.wait_log(timed_out, mark=mark)
            self.assert_unpinned(c)
        finally:
            s.close()

    def test_worker_killed_mid_send_leaves_the_store_sound(self):
        c = self.start_small()
        c.expect_worker_death = True
        pid = c.wait_workers(1)[0]
        s, _ = self.pinned_while_stalled(c)
        try:
            os.kill(pid, signal.SIGKILL)
            # The master reaps the dead worker's pins.
            c.wait_workers(1, exclude=[pid])
            self.assert_unpinned(c)
        finally:
            s.close()
