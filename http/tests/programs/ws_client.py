"""A WebSocket client (Python's `websockets`) that tests/websocket.rs drives.

    python3 ws_client.py SCENARIO URL [N]

Each scenario prints what it saw, one fact a line, and exits 0; any
surprise raises (exit 1, the traceback on stderr).
"""

import asyncio
import sys

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed


def say(*words):
    print(*words, flush=True)


async def echo(url):
    async with connect(url) as ws:
        await ws.send("hello")
        say("text", await ws.recv())
        await ws.send(b"\x00\x01\xff")
        say("binary", (await ws.recv()).hex())
        await ws.close(1000, "done")
        say("closed", ws.close_code)


async def fragments(url):
    async with connect(url) as ws:
        # One text message in three frames (RFC 6455 5.4).
        await ws.send(["frag", "men", "ted"])
        say("text", await ws.recv())
        await ws.send([b"\x01" * 70000, b"\x02" * 70000])
        reply = await ws.recv()
        say("binary", len(reply), reply[0], reply[-1])


async def too_big(url):
    async with connect(url, max_size=None) as ws:
        await ws.send(b"x" * (200 * 1024))
        try:
            await ws.recv()
            raise AssertionError("the server answered a message over its limit")
        except ConnectionClosed as closed:
            say("closed", closed.rcvd.code if closed.rcvd else None)


async def ping(url):
    async with connect(url, ping_interval=None) as ws:
        waiter = await ws.ping(b"are you there")
        latency = await waiter
        say("pong", latency >= 0)
        # The server keeps serving after the pong.
        await ws.send("after")
        say("text", await ws.recv())


async def hold(url, n):
    """Opens n sockets, says so, and waits for each one's Close."""
    sockets = [await connect(url, ping_interval=None, close_timeout=30) for _ in range(n)]
    say("open", len(sockets))

    async def closed_with(ws):
        try:
            await ws.recv()
            return None
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None

    codes = await asyncio.gather(*(closed_with(ws) for ws in sockets))
    say("codes", " ".join(sorted(set(str(c) for c in codes))), codes.count(1001))


async def main():
    scenario, url = sys.argv[1], sys.argv[2]
    if scenario == "hold":
        await hold(url, int(sys.argv[3]))
    else:
        await {"echo": echo, "fragments": fragments, "too_big": too_big, "ping": ping}[scenario](url)


asyncio.run(main())
