"""ping: `PING` answers `PONG`; `PAUSE MS` closes the listener for MS ms, then answers `OK`."""
import asyncio
import json
import sys
import time

events, port = open(sys.argv[1], "a"), int(sys.argv[2])
conns, listener = [0], []


def log(event, **fields):
    events.write(json.dumps({"t_ns": time.monotonic_ns(), "event": event, **fields}) + "\n")
    events.flush()


async def serve(reader, writer):
    conns[0] += 1
    conn = conns[0]
    log("connection_opened", conn=conn, peer_port=writer.get_extra_info("peername")[1])
    try:
        while words := (await reader.readline()).split():
            if words[0] == b"PAUSE":
                log("paused", conn=conn, ms=int(words[1]))
                listener.pop().close()
                await asyncio.sleep(int(words[1]) / 1000)
                await listen(port)
                writer.write(b"OK\n")
            else:
                log("ping", conn=conn)
                writer.write(b"PONG\n")
            await writer.drain()
    except ConnectionError:
        pass
    writer.close()
    log("connection_closed", conn=conn)


async def listen(at):
    listener.append(await asyncio.start_server(serve, "127.0.0.1", at, reuse_address=True))
    return listener[-1].sockets[0].getsockname()[1]


async def main():
    global port
    port = await listen(port)
    log("listening", port=port)
    await asyncio.Event().wait()

asyncio.run(main())
