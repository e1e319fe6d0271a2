"""grpcio's asyncio server ignores a unary handler's context.set_compression(Gzip): the
response crosses the wire uncompressed. The sync server compresses the same response, and so
does the asyncio server once the handler has sent its initial metadata itself.

Run: python grpcio_aio_unary_set_compression.py [aio|sync|aio-initial-metadata]
Exit 1 and "uncompressed" on the defect; exit 0 when 1 MiB of zeros crosses compressed.
Only loopback: a server, a byte-counting TCP relay and a client on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
from concurrent import futures

import grpc

METHOD = "/replay.Zeros/Get"
SIZE = 1 << 20


def relay(target_port: int) -> tuple[int, list[int]]:
    """A TCP relay on loopback that counts the bytes the server sends back."""
    listener = socket.create_server(("127.0.0.1", 0))
    down = [0]

    def pipe(src: socket.socket, dst: socket.socket, count: bool) -> None:
        try:
            while data := src.recv(1 << 16):
                if count:
                    down[0] += len(data)
                dst.sendall(data)
        except OSError:
            pass  # the other direction closed both sockets first
        dst.close()

    def serve() -> None:
        client, _ = listener.accept()
        server = socket.create_connection(("127.0.0.1", target_port))
        threading.Thread(target=pipe, args=(client, server, False), daemon=True).start()
        threading.Thread(target=pipe, args=(server, client, True), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1], down


def call(port: int) -> int:
    relay_port, down = relay(port)
    with grpc.insecure_channel(f"127.0.0.1:{relay_port}") as channel:
        answer = channel.unary_unary(METHOD)(b"", timeout=30)
    assert answer == bytes(SIZE)
    return down[0]


def sync_handler(request: bytes, context: grpc.ServicerContext) -> bytes:
    context.set_compression(grpc.Compression.Gzip)
    return bytes(SIZE)


def run_sync() -> int:
    handler = grpc.method_handlers_generic_handler(
        "replay.Zeros", {"Get": grpc.unary_unary_rpc_method_handler(sync_handler)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(2), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        return call(port)
    finally:
        server.stop(0)


async def run_aio(send_initial_metadata: bool) -> int:
    async def get(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        context.set_compression(grpc.Compression.Gzip)
        if send_initial_metadata:
            await context.send_initial_metadata(())
        return bytes(SIZE)

    handler = grpc.method_handlers_generic_handler(
        "replay.Zeros", {"Get": grpc.unary_unary_rpc_method_handler(get)}
    )
    server = grpc.aio.server(handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        return await asyncio.get_running_loop().run_in_executor(None, call, port)
    finally:
        await server.stop(0)


def main() -> int:
    kind = sys.argv[1] if len(sys.argv) > 1 else "aio"
    if kind == "sync":
        down = run_sync()
    else:
        down = asyncio.run(run_aio(kind == "aio-initial-metadata"))
    how = "compressed" if down < SIZE // 4 else "uncompressed"
    print(
        f"grpcio {grpc.__version__} {kind} server: {SIZE} zero bytes came back as {down} "
        f"bytes on the wire ({how})"
    )
    return 0 if how == "compressed" else 1


if __name__ == "__main__":
    sys.exit(main())
