#!/usr/bin/env python3
"""The clients of the stampede suite: N connections opened first, then one
GET of the same URL written on each of them in one go, and each response
timed from its own request's write to its last byte.

  python3 stampede_client.py PORT PATH N SIZE

Prints one line of JSON: the latencies in microseconds of the responses
that came whole with status 200 and the SIZE bytes of origin.body(SIZE),
and what went wrong with the others.  One thread and non-blocking
sockets, so the writes go out within a millisecond or so of each other
and no client waits for another to be scheduled.
"""

import json
import selectors
import socket
import sys
import time

from origin import body

TIMEOUT = 15.0


class Client:
    def __init__(self, port, request):
        self.sock = socket.create_connection(("127.0.0.1", port), 5)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.request = request
        self.buf = b""
        self.sent = None
        self.done = None

    def complete(self):
        """(status, body) once the whole response is in, else None."""
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = self.buf[:end].decode("latin-1").split("\r\n")
        fields = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            fields[k.strip().lower()] = v.strip()
        status = int(head[0].split(" ")[1])
        rest = self.buf[end + 4:]
        if "content-length" in fields:
            n = int(fields["content-length"])
            return (status, rest[:n]) if len(rest) >= n else None
        if fields.get("transfer-encoding", "").lower() == "chunked":
            return _dechunk(status, rest)
        return None


def _dechunk(status, data):
    out = b""
    while True:
        eol = data.find(b"\r\n")
        if eol < 0:
            return None
        n = int(data[:eol].split(b";")[0], 16)
        if n == 0:
            return (status, out) if b"\r\n\r\n" in data[eol:] else None
        if len(data) < eol + 2 + n + 2:
            return None
        out += data[eol + 2:eol + 2 + n]
        data = data[eol + 2 + n + 2:]


def main():
    port, path, n, size = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4])
    want = body(size)
    request = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (
        path, port)).encode()
    clients = [Client(port, request) for _ in range(n)]
    sel = selectors.DefaultSelector()
    for c in clients:
        sel.register(c.sock, selectors.EVENT_READ, c)
    for c in clients:                   # the barrier: all go out at once
        c.sent = time.monotonic()
        c.sock.send(c.request)
    errors = []
    latencies = []
    left = n
    deadline = time.monotonic() + TIMEOUT
    while left and time.monotonic() < deadline:
        for key, _ in sel.select(0.5):
            c = key.data
            try:
                data = c.sock.recv(65536)
            except OSError as e:
                data, err = b"", str(e)
            else:
                err = "closed before the whole response"
            now = time.monotonic()
            if data:
                c.buf += data
                got = c.complete()
                if got is None:
                    continue
                status, payload = got
                if status != 200:
                    errors.append("status %d" % status)
                elif payload != want:
                    errors.append("wrong bytes (%d of %d)" % (
                        len(payload), size))
                else:
                    latencies.append((now - c.sent) * 1e6)
            else:
                errors.append(err)
            sel.unregister(c.sock)
            c.sock.close()
            left -= 1
    if left:
        errors += ["no response after %.0f s" % TIMEOUT] * left
    print(json.dumps({"latencies_us": latencies, "errors": errors}))


if __name__ == "__main__":
    main()
