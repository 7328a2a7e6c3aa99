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
  /after-end     END_REQUEST, then a STDOUT record
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

It counts requests per SCRIPT_NAME (app.count(path)) and connections.
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


def end(status=0, proto=0, clen=8):
    return rec(END, struct.pack('>IB3x', status, proto)[:clen])


HEAD = b'Content-Type: text/plain\r\nCache-Control: max-age=60\r\n\r\n'


def answer(script):
    """The bytes to send for a script, and whether to close after."""
    ok = rec(STDOUT, HEAD + b'good\n') + rec(STDOUT) + end()
    table = {
        '/good': (ok, False),
        '/bad-version': (rec(STDOUT, HEAD, version=2) + end(), False),
        '/bad-type': (rec(12, b'x') + end(), False),
        '/begin': (rec(1, b'\0\1\0\0\0\0\0\0') + end(), False),
        '/wrong-id': (rec(STDOUT, HEAD, rid=2) + end(), False),
        '/after-end': (ok + rec(STDOUT, b'late'), False),
        '/end-short': (rec(STDOUT, HEAD + b'x') + end(clen=7), False),
        '/overloaded': (end(proto=2), False),
        '/truncated': (rec(STDOUT, HEAD + b'part') +
                       struct.pack('>BBHHBB', 1, STDOUT, 1, 100, 0, 0) +
                       b'only some', True),
        '/no-end': (rec(STDOUT, HEAD + b'body') + rec(STDOUT), True),
        '/padded': (rec(STDOUT, HEAD[:10], pad=6) +
                    rec(STDOUT, HEAD[10:] + b'pad', pad=5) +
                    rec(STDOUT, b'ded\n', pad=4) + rec(STDOUT, pad=8) +
                    rec(END, struct.pack('>IB3x', 0, 0), pad=8), False),
        '/cl-more': (rec(STDOUT, b'Content-Length: 3\r\n\r\nabcdef') +
                     end(), False),
        '/cl-less': (rec(STDOUT, b'Content-Length: 10\r\n\r\nabcd') +
                     end(), False),
        '/no-head-end': (rec(STDOUT, b'X-A: 1\r\n') + end(), False),
        '/huge-head': (b''.join(rec(STDOUT, b'X-Pad: ' + b'p' * 60000 +
                                    b'\r\n') for _ in range(3)) +
                       rec(STDOUT, b'\r\n') + end(), False),
        '/stderr': (rec(STDERR, b'first problem\nsecond problem\n') +
                    rec(STDOUT, HEAD + b'fine\n') + rec(STDERR) +
                    rec(STDOUT) + end(), False),
    }
    return table.get(script, (rec(STDOUT, b'Status: 404\r\n\r\n') + end(),
                              False))


def _read_request(f):
    """Reads one request's records; returns its params, or None at EOF."""
    params = b''
    stdin_done = params_done = False
    while not (stdin_done and params_done):
        head = f.read(8)
        if len(head) < 8:
            return None
        _, rtype, _, clen, pad = struct.unpack('>BBHHB', head[:7])
        content = f.read(clen + pad)[:clen]
        if rtype == 4:
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
    return out


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

    def start(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o666)
        self.sock.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,),
                             daemon=True).start()

    def _serve(self, conn):
        with conn, conn.makefile('rb') as f:
            while True:
                try:
                    params = _read_request(f)
                except OSError:
                    return
                if params is None:
                    return
                script = params.get('SCRIPT_NAME', '')
                with self.lock:
                    self.counts[script] = self.counts.get(script, 0) + 1
                data, close = answer(script)
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
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        try:
            os.unlink(self.path)
            os.rmdir(self.tmp)
        except OSError:
            pass
