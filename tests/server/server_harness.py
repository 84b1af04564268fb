"""What the sd-server tests share: a server process on a free loopback port with its log
kept, JSON requests, and PNG decoding to compare pixels (standard library only)."""
import json
import re
import signal
import struct
import subprocess
import threading
import time
import urllib.error
import urllib.request
import zlib


def png_pixels(data):
    """(width, height, channels, rows) of an 8-bit non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0
            channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, bpp = zlib.decompress(idat), width * channels, channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if kind == 1: line[x] = (line[x] + a) & 255
            elif kind == 2: line[x] = (line[x] + b) & 255
            elif kind == 3: line[x] = (line[x] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, channels, b"".join(rows)


class Server:
    """sd-server with `args` (plus -t 1 and a free port), started and waited for."""

    def __init__(self, binary, args, env, start_timeout=120):
        self.proc = subprocess.Popen([binary, "-t", "1", "--listen-port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                     text=True)
        self.log = []
        self.url = None
        deadline = time.time() + start_timeout
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on (http://[0-9.]+:\d+)", line)
            if m:
                self.url = m.group(1)
                break
        if not self.url:
            raise RuntimeError("sd-server did not start:\n" + "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def request(self, method, path, body=None, headers=None, timeout=120, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {"Content-Type": "application/json"} if data is not None else {}
        h.update(headers or {})
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def json(self, method, path, body=None, **kw):
        status, headers, data = self.request(method, path, body, **kw)
        try:
            return status, headers, json.loads(data) if data else None
        except ValueError:
            return status, headers, {"not_json": data[:200].decode(errors="replace")}

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(150)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode
