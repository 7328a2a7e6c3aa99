#!/usr/bin/env python3
"""
A real HTTP/1.1 origin server for proxy tests and benchmarks (stdlib only).

  python3 origin.py PORT [HOST]

Origin(unix=PATH) listens on a unix socket instead (addr is then
"unix:PATH", as corral's config writes it).  Origin(tls=CONTEXT) speaks
TLS with that ssl.SSLContext (server side); it records the names clients
sent in SNI (sni), its handshakes and how many resumed a session.

Keep-alive, request bodies with Content-Length or chunked.  It counts
connections accepted and requests per path, and records the headers of
every request.  What it answers depends on the path:

  /echo            200, JSON of the method, target, headers and body
  /size/N          N bytes (Content-Length)
  /chunked/N       N bytes, chunked
  /close/N         N bytes, no length: the body ends at close
  /delay/MS        waits MS milliseconds, then a short body
  /status/CODE     that status, short body (none for 204 and 304)
  /bad/cl-te       both Content-Length and Transfer-Encoding
  /bad/truncated   promises 1000 bytes, sends 10, closes
  /bad/header      a control byte in a header value
  /conn-close/N    N bytes, then "Connection: close"
  /drop-reused     on a connection that already answered a request, close
                   without answering (a kept-alive connection that dies
                   under a request); on a new one, 200 "fresh"
  /name            the origin's name (see Origin(name=...))
  anything else    200, "ok <path>\\n"

Origin.script(path, ...) makes a path answer with a given status, header
fields, body and delay, or what a function of the request says; it wins
over the kinds above.  Every answer's status is recorded per path.

Leading path segments that name none of these are ignored, so /api/size/10
is /size/10.

Bodies are made of repeating bytes from PATTERN, so any slice can be
checked: body(n) gives the bytes of /size/n, /chunked/n and /close/n.
"""

import json
import os
import socket
import socketserver
import sys
import threading
import time

PATTERN = bytes(range(256))
KINDS = {'echo', 'size', 'chunked', 'close', 'delay', 'status', 'bad',
         'conn-close', 'name', 'drop-reused'}


def body(n):
    """The body of /size/n, /chunked/n and /close/n."""
    reps = n // len(PATTERN) + 1
    return (PATTERN * reps)[:n]


class _Handler(socketserver.BaseRequestHandler):

    def setup(self):
        self.buf = b''
        self.served = 0
        if self.request.family != socket.AF_UNIX:
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY,
                                    1)
        self.request.settimeout(30)
        o = self.server.origin
        with o.lock:
            o.connections += 1
        self.tls_failed = False
        if o.tls is not None:
            try:
                self.request = o.tls.wrap_socket(self.request,
                                                 server_side=True)
            except (OSError, ValueError):
                self.tls_failed = True	# the client refused us, say
                with o.lock:
                    o.tls_failures += 1
                return
            with o.lock:
                o.handshakes += 1
                o.resumed += self.request.session_reused
        with o.lock:
            o.socks.add(self.request)

    def finish(self):
        with self.server.origin.lock:
            self.server.origin.socks.discard(self.request)

    def _read(self):
        data = self.request.recv(65536)
        if not data:
            raise EOFError
        self.buf += data

    def _line(self):
        while b'\r\n' not in self.buf:
            self._read()
        line, _, self.buf = self.buf.partition(b'\r\n')
        return line

    def _exact(self, n):
        while len(self.buf) < n:
            self._read()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _request(self):
        while b'\r\n\r\n' not in self.buf:
            self._read()
        head, _, self.buf = self.buf.partition(b'\r\n\r\n')
        lines = head.decode('latin-1').split('\r\n')
        method, target, version = lines[0].split(' ')
        headers = []
        for l in lines[1:]:
            k, _, v = l.partition(':')
            headers.append((k, v.strip()))
        h = {k.lower(): v for k, v in headers}
        data = b''
        if h.get('transfer-encoding', '').lower() == 'chunked':
            while True:
                size = int(self._line().split(b';')[0], 16)
                if size == 0:
                    while self._line():
                        pass
                    break
                data += self._exact(size)
                self._exact(2)
        elif 'content-length' in h:
            data = self._exact(int(h['content-length']))
        return method, target, version, headers, h, data

    def handle(self):
        if self.tls_failed:
            return
        try:
            while True:
                req = self._request()
                if not self._answer(*req):
                    break
                self.served += 1
        except (EOFError, OSError, ValueError):
            pass

    def _send(self, status, hdrs, data, close=False, reason='X'):
        lines = ['HTTP/1.1 %d %s' % (status, reason)] + \
            ['%s: %s' % kv for kv in hdrs]
        if close:
            lines.append('Connection: close')
        self.request.sendall(('\r\n'.join(lines) + '\r\n\r\n')
                             .encode('latin-1') + data)
        return not close

    def _scripted(self, spec, method, h, path, head, close):
        o = self.server.origin
        if spec['delay']:
            time.sleep(spec['delay'])
        if spec['fn'] is not None:
            status, hdrs, out = spec['fn'](method, h)
        else:
            status, hdrs, out = spec['status'], spec['headers'], spec['body']
        hdrs = list(hdrs)
        with o.lock:
            o.answered.append((path, status))
        if status in (204, 304):
            out = b''
        else:
            hdrs.append(('Content-Length', len(out)))
        return self._send(status, hdrs, b'' if head else out, close,
                          spec['reason'])

    def _answer(self, method, target, version, headers, h, data):
        o = self.server.origin
        path = target.split('?')[0]
        with o.lock:
            o.counts[path] = o.counts.get(path, 0) + 1
            o.requests.append({'method': method, 'target': target,
                               'headers': headers, 'body': data,
                               'time': time.monotonic()})
        close = h.get('connection', '').lower() == 'close'
        head = method == 'HEAD'
        with o.lock:
            spec = o.scripts.get(path)
        if spec is not None:
            return self._scripted(spec, method, h, path, head, close)
        parts = path.strip('/').split('/')
        # Leading segments that name no behaviour are a prefix (/api/...).
        i = next((i for i, p in enumerate(parts) if p in KINDS), 0)
        kind = parts[i]
        arg = parts[i + 1] if len(parts) > i + 1 else ''
        if kind == 'echo':
            out = json.dumps({'method': method, 'target': target,
                              'headers': headers,
                              'body': data.decode('latin-1')}).encode()
            return self._send(200, [('Content-Type', 'application/json'),
                                    ('Content-Length', len(out))],
                              b'' if head else out, close)
        if kind == 'size':
            n = int(arg)
            return self._send(200, [('Content-Length', n),
                                    ('X-Origin', o.name)],
                              b'' if head else body(n), close)
        if kind == 'drop-reused':
            if self.served > 0:
                with o.lock:
                    o.dropped += 1
                return False
            return self._send(200, [('Content-Length', 6)], b'fresh\n',
                              close)
        if kind == 'conn-close':
            n = int(arg)
            return self._send(200, [('Content-Length', n)], body(n), True)
        if kind == 'chunked':
            n = int(arg)
            out = bytearray()
            b = body(n)
            step = 1000
            for i in range(0, n, step):
                piece = b[i:i + step]
                out += b'%x\r\n' % len(piece) + piece + b'\r\n'
            out += b'0\r\n\r\n'
            return self._send(200, [('Transfer-Encoding', 'chunked')],
                              b'' if head else bytes(out), close)
        if kind == 'close':
            self._send(200, [('Content-Type', 'application/octet-stream')],
                       body(int(arg)), True)
            return False
        if kind == 'delay':
            time.sleep(int(arg) / 1000.0)
            return self._send(200, [('Content-Length', 5)], b'late\n', close)
        if kind == 'status':
            code = int(arg)
            if code in (204, 304):
                return self._send(code, [], b'', close)
            out = b'status %d\n' % code
            return self._send(code, [('Content-Length', len(out))], out,
                              close)
        if kind == 'bad':
            if arg == 'cl-te':
                self.request.sendall(
                    b'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n'
                    b'Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n'
                    b'0\r\n\r\n')
                return True	# keeps it open: the proxy must not reuse it
            if arg == 'truncated':
                self.request.sendall(b'HTTP/1.1 200 OK\r\n'
                                     b'Content-Length: 1000\r\n\r\n'
                                     + b'x' * 10)
                return False
            if arg == 'header':
                self.request.sendall(b'HTTP/1.1 200 OK\r\nX-Bad: a\x01b\r\n'
                                     b'Content-Length: 2\r\n\r\nok')
                return True
        if kind == 'name':
            out = o.name.encode()
            return self._send(200, [('Content-Length', len(out))], out,
                              close)
        out = ('ok %s\n' % path).encode()
        return self._send(200, [('Content-Length', len(out)),
                                ('Keep-Alive', 'timeout=5'),
                                ('X-Origin', o.name)],
                          b'' if head else out, close)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _UnixServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


class Origin:
    """
    An origin on host:port (0: a free port), or on the unix socket unix,
    served from a thread.
    """

    def __init__(self, port=0, host='127.0.0.1', name='origin', unix=None,
                 tls=None):
        self.name = name
        self.tls = tls
        self.sni = []
        self.handshakes = self.resumed = self.tls_failures = 0
        if tls is not None:
            def sni(sock, name, ctx):
                with self.lock:
                    self.sni.append(name)
            tls.sni_callback = sni
        self.lock = threading.Lock()
        self.connections = 0
        self.dropped = 0	# requests dropped by /drop-reused
        self.counts = {}
        self.requests = []
        self.socks = set()
        self.scripts = {}
        self.answered = []
        self.unix = unix
        if unix is not None:
            self.server = _UnixServer(unix, _Handler)
            # Workers started by root run as nobody: let them connect.
            os.chmod(unix, 0o777)
            self.port = None
        else:
            self.server = _Server((host, port), _Handler)
            self.port = self.server.server_address[1]
        self.server.origin = self
        self.thread = None

    def start(self):
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)
        self.thread.start()
        return self

    def stop(self):
        """Stops listening and cuts the connections that are open."""
        self.server.shutdown()
        self.server.server_close()
        if self.unix is not None:
            try:
                os.unlink(self.unix)
            except FileNotFoundError:
                pass
        with self.lock:
            socks = list(self.socks)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def script(self, path, status=200, headers=(), body=b'', delay=0.0,
               fn=None, reason='X'):
        """
        Answers path with status, reason, headers (pairs; Content-Length
        is added) and body after delay seconds, or with fn(method,
        headers) -> (status, headers, body), headers keyed in lower case.
        """
        with self.lock:
            self.scripts[path] = {'status': status, 'headers': headers,
                                  'body': body, 'delay': delay, 'fn': fn,
                                  'reason': reason}

    def answered_with(self, path, status):
        """How many scripted answers to path had this status."""
        with self.lock:
            return sum(1 for p, s in self.answered
                       if p == path and s == status)

    def count(self, path):
        with self.lock:
            return self.counts.get(path, 0)

    def last(self, path=None):
        """The last request (to path), as recorded."""
        with self.lock:
            for r in reversed(self.requests):
                if path is None or r['target'].split('?')[0] == path:
                    return r
        return None

    @property
    def addr(self):
        if self.unix is not None:
            return 'unix:%s' % self.unix
        return '127.0.0.1:%d' % self.port


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9000
    host = sys.argv[2] if len(sys.argv) > 2 else '127.0.0.1'
    o = Origin(port, host)
    print('origin listening on %s:%d' % (host, o.port), flush=True)
    try:
        o.server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == '__main__':
    main()
