"""
A FastCGI application that misbehaves on purpose, for the tests of what
corral does with records php-fpm would never send (stdlib only, a real
server on a unix socket or a loopback port).

  app = FcgiApp().start()       # app.addr: "unix:/tmp/.../app.sock"
  app.stop()

What it answers depends on SCRIPT_NAME (the path corral asks for):

  /good          a well-formed response, "good\\n"
  /bad-version   a STDOUT record of version 2
  /bad-type      a record of type 12
  /begin         a BEGIN_REQUEST record (an application may not send one)
  /wrong-id      STDOUT for request id 2
  /after-end     END_REQUEST, then a STDOUT record, in the same write
  /late          a good response; the next request on the connection
                 gets a STDOUT record of this one's id before its own
  /end-short     END_REQUEST of 7 bytes
  /overloaded    END_REQUEST with protocol status OVERLOADED
  /truncated     the header, part of the body, then the connection closes
  /no-end        a whole response but no END_REQUEST, then close
  /padded        a good response in padded records, split oddly
  /cl-more       Content-Length: 3 and 6 body bytes
  /cl-less       Content-Length: 10 and 4 body bytes
  /no-head-end   STDOUT that never ends its header block, then END
  /huge-head     a header block larger than any limit
  /stderr        two STDERR lines, then a good response
  /stderr-body   a good response ("one two\n") with a STDERR line
                 between its body's records, all in one write

It answers with the request id the request came with, as php-fpm does,
and counts requests per SCRIPT_NAME (app.count(path)) and connections.
"""

import os
import socket
import struct
import tempfile
import threading

STDOUT, STDERR, END = 6, 7, 3


def rec(rtype, content=b'', rid=1, pad=0, version=1):
    return struct.pack('>BBHHBB', version, rtype, rid, len(content), pad,
                       0) + content + b'\0' * pad


HEAD = b'Content-Type: text/plain\r\nCache-Control: max-age=60\r\n\r\n'


def answer(script, rid=1):
    """The bytes to send for a script, and whether to close after."""
    def r(rtype, content=b'', **kw):
        kw.setdefault('rid', rid)
        return rec(rtype, content, **kw)

    def e(status=0, proto=0, clen=8):
        return r(END, struct.pack('>IB3x', status, proto)[:clen])

    ok = r(STDOUT, HEAD + b'good\n') + r(STDOUT) + e()
    table = {
        '/good': (ok, False),
        '/late': (ok, False),
        '/bad-version': (r(STDOUT, HEAD, version=2) + e(), False),
        '/bad-type': (r(12, b'x') + e(), False),
        '/begin': (r(1, b'\0\1\0\0\0\0\0\0') + e(), False),
        '/wrong-id': (r(STDOUT, HEAD, rid=rid % 65535 + 1) + e(), False),
        '/after-end': (ok + r(STDOUT, b'late'), False),
        '/end-short': (r(STDOUT, HEAD + b'x') + e(clen=7), False),
        '/overloaded': (e(proto=2), False),
        '/truncated': (r(STDOUT, HEAD + b'part') +
                       struct.pack('>BBHHBB', 1, STDOUT, rid, 100, 0, 0) +
                       b'only some', True),
        '/no-end': (r(STDOUT, HEAD + b'body') + r(STDOUT), True),
        '/padded': (r(STDOUT, HEAD[:10], pad=6) +
                    r(STDOUT, HEAD[10:] + b'pad', pad=5) +
                    r(STDOUT, b'ded\n', pad=4) + r(STDOUT, pad=8) +
                    r(END, struct.pack('>IB3x', 0, 0), pad=8), False),
        '/cl-more': (r(STDOUT, b'Content-Length: 3\r\n\r\nabcdef') +
                     e(), False),
        '/cl-less': (r(STDOUT, b'Content-Length: 10\r\n\r\nabcd') +
                     e(), False),
        '/no-head-end': (r(STDOUT, b'X-A: 1\r\n') + e(), False),
        '/huge-head': (b''.join(r(STDOUT, b'X-Pad: ' + b'p' * 60000 +
                                  b'\r\n') for _ in range(3)) +
                       r(STDOUT, b'\r\n') + e(), False),
        '/stderr': (r(STDERR, b'first problem\nsecond problem\n') +
                    r(STDOUT, HEAD + b'fine\n') + r(STDERR) +
                    r(STDOUT) + e(), False),
        '/stderr-body': (r(STDOUT, HEAD + b'one ') +
                         r(STDERR, b'in the middle\n') +
                         r(STDOUT, b'two\n') + r(STDOUT) + e(), False),
    }
    return table.get(script, (r(STDOUT, b'Status: 404\r\n\r\n') + e(),
                              False))


def _read_request(f):
    """
    Reads one request's records; returns its params and request id, or
    None at EOF.
    """
    params = b''
    rid = None
    stdin_done = params_done = False
    while not (stdin_done and params_done):
        head = f.read(8)
        if len(head) < 8:
            return None
        _, rtype, hid, clen, pad = struct.unpack('>BBHHB', head[:7])
        content = f.read(clen + pad)[:clen]
        if rtype == 1:
            rid = hid
        elif rtype == 4:
            params += content
            params_done = clen == 0
        elif rtype == 5:
            stdin_done = clen == 0
    out, i = {}, 0
    while i < len(params):
        lens = []
        for _ in range(2):
            if params[i] < 128:
                lens.append(params[i])
                i += 1
            else:
                lens.append(struct.unpack('>I', params[i:i + 4])[0] &
                            0x7fffffff)
                i += 4
        name = params[i:i + lens[0]].decode()
        out[name] = params[i + lens[0]:i + lens[0] + lens[1]].decode()
        i += lens[0] + lens[1]
    return out, rid


class FcgiApp:

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix='corral-fcgi-app-')
        os.chmod(self.tmp, 0o755)
        self.path = os.path.join(self.tmp, 'app.sock')
        self.addr = 'unix:' + self.path
        self.counts = {}
        self.connections = 0
        self.lock = threading.Lock()
        self.sock = None
        self.stopping = False
        self.conns = set()	# open connections, for stop()
        self.threads = []

    def start(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o666)
        self.sock.listen(64)
        t = threading.Thread(target=self._accept, args=(self.sock,),
                             daemon=True)
        self.threads.append(t)
        t.start()
        return self

    def _accept(self, sock):
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with self.lock:
                if self.stopping:
                    conn.close()
                    return
                self.connections += 1
                self.conns.add(conn)
                t = threading.Thread(target=self._serve, args=(conn,),
                                     daemon=True)
                self.threads.append(t)
            t.start()

    def _serve(self, conn):
        try:
            self._answer(conn)
        finally:
            with self.lock:
                self.conns.discard(conn)

    def _answer(self, conn):
        junk = b''
        with conn, conn.makefile('rb') as f:
            while True:
                try:
                    req = _read_request(f)
                except OSError:
                    return
                if req is None:
                    return
                params, rid = req
                script = params.get('SCRIPT_NAME', '')
                with self.lock:
                    self.counts[script] = self.counts.get(script, 0) + 1
                data, close = answer(script, rid)
                # Late output of the previous request comes first.
                data, junk = junk + data, b''
                if script == '/late':
                    junk = rec(STDOUT, b'late', rid=rid)
                try:
                    conn.sendall(data)
                except OSError:
                    return
                if close:
                    return

    def count(self, script):
        with self.lock:
            return self.counts.get(script, 0)

    def stop(self):
        """
        Ends the threads before any descriptor is closed.  A thread left
        in accept() once the listening socket was closed would, when a
        later test's socket got the same descriptor number, take that
        test's connections and answer them (seen: MalformedTest's counts
        one connection short, the request answered by an earlier app).
        """
        if self.sock is None:
            return
        with self.lock:
            self.stopping = True
            conns = list(self.conns)
        # shutdown() wakes a blocked accept() and recv() (EINVAL, EOF).
        for s in [self.sock] + conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self.threads:
            t.join(10)
            if t.is_alive():
                raise RuntimeError('FcgiApp: a thread did not end')
        self.sock.close()
        self.sock = None
        try:
            os.unlink(self.path)
            os.rmdir(self.tmp)
        except OSError:
            pass
