#!/usr/bin/env python3
"""The origin of the proxy and stampede suites: a small HTTP/1.1 server
(asyncio, one thread, keep-alive, stdlib only) that answers fast and
counts what it was asked.

  python3 origin.py PORT

  GET /size/N[/ANY]        N bytes, cacheable 10 minutes
  GET /delay/MS/N[/ANY]    the same after MS milliseconds (other requests
                           are served meanwhile)

Leading segments before "size" or "delay" are a prefix and ignored
(/cached/size/4000 is /size/4000); ANY makes a fresh key.
  GET /hits/PATH           how many requests PATH got so far (not counted)
  GET /hits                the number of requests so far (not counted)

The body of /size/N is body(N): bytes from a repeating pattern, so a proxy
that serves wrong bytes shows.  The answers carry Cache-Control: max-age
and Expires, so every cache may keep them without settings of its own.
"""

import asyncio
import email.utils
import sys
import time

PATTERN = bytes(range(256))
MAX_AGE = 600
KINDS = ("size", "delay")


def body(n):
    """The body of /size/n and /delay/ms/n."""
    return (PATTERN * (n // len(PATTERN) + 1))[:n]


def _response(status, data, cacheable):
    hdrs = ["HTTP/1.1 %s" % status, "Content-Length: %d" % len(data)]
    if cacheable:
        hdrs.append("Cache-Control: public, max-age=%d" % MAX_AGE)
        hdrs.append("Expires: " + email.utils.formatdate(
            time.time() + MAX_AGE, usegmt=True))
    return ("\r\n".join(hdrs) + "\r\n\r\n").encode() + data


class Origin:
    def __init__(self):
        self.total = 0
        self.counts = {}
        self.cache = {}                 # path -> response bytes

    def answer(self, path):
        """(delay in seconds, response bytes) for a GET of path."""
        if path == "/hits" or path.startswith("/hits/"):
            rest = path[len("/hits"):]
            n = self.counts.get(rest, 0) if rest else self.total
            return 0, _response("200 OK", b"%d\n" % n, False)
        self.total += 1
        self.counts[path] = self.counts.get(path, 0) + 1
        resp = self.cache.get(path)
        if resp is not None:
            return 0, resp
        parts = path.split("/")
        i = next((i for i, p in enumerate(parts) if p in KINDS), None)
        delay = 0
        try:
            if i is None:
                return 0, _response("404 Not Found", b"no\n", False)
            if parts[i] == "size":
                size = int(parts[i + 1])
            else:
                delay, size = int(parts[i + 1]) / 1000, int(parts[i + 2])
        except (IndexError, ValueError):
            return 0, _response("400 Bad Request", b"bad\n", False)
        resp = _response("200 OK", body(size), True)
        if delay == 0 and len(self.cache) < 1000:
            self.cache[path] = resp
        return delay, resp


class Conn(asyncio.Protocol):
    """One client connection: requests in order, answers in order (a
    delayed answer holds back the ones pipelined behind it)."""

    def __init__(self, origin):
        self.origin = origin
        self.buf = b""
        self.transport = None
        self.queue = []                 # pending delayed answers, in order

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 65536:
                    self.transport.close()
                return
            head, self.buf = self.buf[:end], self.buf[end + 4:]
            line = head.split(b"\r\n", 1)[0].split(b" ")
            if len(line) != 3:
                self.transport.close()
                return
            path = line[1].decode("latin-1").split("?")[0]
            delay, resp = self.origin.answer(path)
            if line[0] == b"HEAD":
                resp = resp[:resp.find(b"\r\n\r\n") + 4]
            if delay or self.queue:
                fut = asyncio.get_running_loop().create_future()
                self.queue.append((fut, resp))
                asyncio.get_running_loop().call_later(
                    delay, self._ready, fut)
            else:
                self.transport.write(resp)

    def _ready(self, fut):
        if not fut.done():
            fut.set_result(None)
        while self.queue and self.queue[0][0].done():
            _, resp = self.queue.pop(0)
            if not self.transport.is_closing():
                self.transport.write(resp)

    def connection_lost(self, exc):
        self.queue = []


async def serve(port):
    origin = Origin()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Conn(origin), "127.0.0.1",
                                      port, backlog=4096)
    async with server:
        await server.serve_forever()


def main():
    try:
        asyncio.run(serve(int(sys.argv[1])))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
