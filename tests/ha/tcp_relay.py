#!/usr/bin/env python3
"""A TCP relay for tests: for every PORT, listens on LISTEN_HOST:PORT and
forwards each connection to TARGET_HOST:PORT, both ways, until either side
closes. Prints "ready" once every port listens. Run inside a network
namespace, it puts a namespace's link between a client and a server, so a
test can cut that link (ip link set ... down) under an open connection.

usage: tcp_relay.py LISTEN_HOST TARGET_HOST PORT [PORT ...]
"""
import asyncio
import sys


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def serve(listen_host, target_host, port):
    async def on_client(reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(target_host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return await asyncio.start_server(on_client, listen_host, port)


async def main():
    if len(sys.argv) < 4:
        sys.exit("usage: tcp_relay.py LISTEN_HOST TARGET_HOST PORT [PORT ...]")
    listen_host, target_host = sys.argv[1], sys.argv[2]
    ports = []
    for arg in sys.argv[3:]:
        if not arg.isdigit() or not 1 <= int(arg) <= 65535:
            sys.exit(f"tcp_relay.py: port {arg!r} is not 1..65535")
        ports.append(int(arg))
    servers = [await serve(listen_host, target_host, p) for p in ports]
    print("ready", flush=True)
    await asyncio.gather(*(s.serve_forever() for s in servers))


if __name__ == "__main__":
    asyncio.run(main())
