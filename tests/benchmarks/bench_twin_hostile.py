"""The venue twin as a server under hostile clients: its memory and its connection deadlines.

Starts ``python run.py venue`` from this repository in a subprocess and prints:

1. its RSS before and after six unsigned batchCreate bodies of about 47 MB each (500 orders
   with 94 KB of padding): with the defaults each is refused 413 unread; with
   ``--max-body-bytes 100000000`` each passes the size check and is refused 401 from its
   headers, unread;
2. how long 160 hostile connections stay open (40 idle, 40 with half their headers, 40 with
   half their body, 40 trickling one header byte a second), and whether a request is then
   served;
3. with ``--nofile 128``: the twin runs under that file-descriptor limit, 150 idle
   connections are opened, and a real request is retried every 0.5 s until it is answered.

    python tests/benchmarks/bench_twin_hostile.py [--port 8471] [--max-body-bytes N]
    python tests/benchmarks/bench_twin_hostile.py --nofile 128

Not a pytest test: it prints figures (issue 25: RSS within 10 MB of its start; every
connection closed in bounded time). The twin's stderr goes to a temporary file, whose
traceback count is printed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BATCH = "/api/third/hot/order/batchCreate"
BALANCE = "/api/third/hot/order/balance"


def big_body() -> bytes:
    """About 47 MB: 500 orders, each with 94 KB of padding."""
    pad = "x" * 93_900
    orders = ",".join(
        f'{{"clientOrderId":"c{i}","isLong":true,"isMarket":true,"lever":10,"matchType":2,'
        f'"pairName":"ETH-USD","positionType":3,"quantity":"0.01","pad":"{pad}"}}'
        for i in range(500)
    )
    return f'{{"orders":[{orders}],"timestamp":"{int(time.time() * 1000)}"}}'.encode()


def post_unsigned(port: int, body: bytes, timeout: float = 30.0) -> tuple[str, float]:
    """POST batchCreate without credentials; (status line or error, seconds)."""
    start = time.monotonic()
    head = f"POST {BATCH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n\r\n"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(head.encode() + body)
            status = sock.recv(65536).split(b"\r\n", 1)[0].decode()
    except OSError as exc:
        status = f"{type(exc).__name__}: {exc}"
    return status, time.monotonic() - start


def rss_mb(pid: int) -> float:
    """Resident set size in MB (Linux: /proc/PID/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError(f"no VmRSS for pid {pid}")


def memory(port: int, proc: int) -> None:
    """RSS around six unsigned ~47 MB bodies."""
    body = big_body()
    print(f"body: {len(body) / 1e6:.1f} MB, 500 orders, unsigned")
    time.sleep(3)  # let the twin settle after start-up
    start = rss_mb(proc)
    print(f"RSS at start: {start:.1f} MB")
    for i in range(6):
        status, took = post_unsigned(port, body)
        print(f"  body {i + 1}: {status!r} in {took:.2f} s; RSS {rss_mb(proc):.1f} MB")
    time.sleep(3)
    end = rss_mb(proc)
    print(f"RSS 3 s after the six bodies: {end:.1f} MB ({end - start:+.1f} MB)")


def connections(port: int, bound: float) -> None:
    """How long 160 idle, half-sent and trickling connections stay open."""
    starts = {
        "idle": b"",
        "half headers": f"POST {BALANCE} HTTP/1.1\r\nHost: 1".encode(),
        "half body": f"POST {BATCH} HTTP/1.1\r\nHost: 1\r\nAPIKEY: st_x\r\nsignature: 0x00\r\n"
        'Content-Length: 1000\r\n\r\n{"orders":['.encode(),
        "trickle": f"POST {BALANCE} HTTP/1.1\r\nX-Slow: ".encode(),
    }
    socks: list[tuple[socket.socket, str, float]] = []
    for i in range(160):
        kind = list(starts)[i % 4]
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        sock.send(starts[kind])
        socks.append((sock, kind, time.monotonic()))
    open_for: dict[socket.socket, float] = {}
    began = last_byte = time.monotonic()
    while len(open_for) < len(socks) and time.monotonic() - began < bound:
        live = [s for s, _, _ in socks if s not in open_for]
        readable, _, _ = select.select(live, [], [], 0.2)
        for sock, _, opened in socks:
            if sock in readable:
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    open_for[sock] = time.monotonic() - opened
        if time.monotonic() - last_byte >= 1.0:  # the trickle: one byte a second
            last_byte = time.monotonic()
            for sock, kind, _ in socks:
                if kind == "trickle" and sock not in open_for:
                    with contextlib.suppress(OSError):
                        sock.send(b"a")
    for sock, _, _ in socks:
        sock.close()
    print(f"160 connections: {len(open_for)} closed by the twin within {bound:.0f} s")
    for kind in starts:
        times = [open_for[s] for s, k, _ in socks if k == kind and s in open_for]
        if times:
            print(
                f"  {kind}: {len(times)}/40 closed, open {min(times):.2f} .."
                f" {max(times):.2f} s (median {statistics.median(times):.2f})"
            )
    status, took = post_unsigned(port, b"{}")
    print(f"a request afterwards: {status!r} in {took:.3f} s")


def starved(port: int) -> None:
    """150 idle connections under the fd limit, then a real request retried until answered."""
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(150)]
    start = time.monotonic()
    tries, status = 0, ""
    while time.monotonic() - start < 60:
        tries += 1
        status, _ = post_unsigned(port, b"{}", timeout=5)
        if status.startswith("HTTP/"):
            break
        time.sleep(0.5)
    took = time.monotonic() - start
    print(f"150 idle connections; a request retried every 0.5 s: {status!r} after {took:.1f} s")
    print(f"  ({tries} tries)")
    for sock in idle:
        sock.close()


def main() -> None:
    """Start the twin, measure, stop it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=8471)
    parser.add_argument("--max-body-bytes", type=int, default=None)
    parser.add_argument("--nofile", type=int, default=None)
    parser.add_argument("--bound", type=float, default=120.0, help="seconds to wait for closes")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_twin_hostile_"))
    command = [sys.executable, "run.py", "venue", "--port", str(args.port)]
    if args.max_body_bytes is not None:
        config = work / "venue.yaml"
        config.write_text(f"server:\n  max_body_bytes: {args.max_body_bytes}\n")
        command += ["--config", str(config)]
    if args.nofile is not None:
        command = ["prlimit", f"--nofile={args.nofile}:{args.nofile}", *command]
    log_path = work / "twin.stderr"
    with log_path.open("w") as log:
        twin = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", args.port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
            if args.nofile is not None:
                starved(args.port)
            else:
                memory(args.port, twin.pid)
                connections(args.port, args.bound)
        finally:
            twin.terminate()
            try:
                twin.wait(10)
            except subprocess.TimeoutExpired:
                twin.kill()
                twin.wait()
    lines = log_path.read_text().splitlines()
    tracebacks = sum(line.startswith("Traceback") for line in lines)
    print(f"twin stderr: {len(lines)} lines, {tracebacks} tracebacks ({log_path})")


if __name__ == "__main__":
    main()
