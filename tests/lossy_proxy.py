"""A loopback HTTP proxy that can lose answers: it forwards each request to the server and
relays the answer, except for the requests a test marks, whose answer it reads in full (so
the server finished and committed) and then drops, closing the client's connection without a
byte. One request per connection (the client must not keep connections alive)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def _read_message(sock: socket.socket) -> bytes:
    """One HTTP/1.1 message: the head, then ``Content-Length`` bytes of body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class LossyProxy:
    def __init__(self, upstream_port: int, lose: Callable[[bytes], bool]) -> None:
        self.upstream_port = upstream_port
        self.lose = lose  # given each request's head and body; True: drop its answer
        self.lost: list[bytes] = []
        # Each relayed exchange: the request's first line and headers, the answer's status line.
        self.exchanges: list[tuple[bytes, bytes]] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        with client, socket.create_connection(("127.0.0.1", self.upstream_port)) as upstream:
            request = _read_message(client)
            upstream.sendall(request)
            answer = _read_message(upstream)
            self.exchanges.append((request.split(b"\r\n\r\n", 1)[0], answer.split(b"\r\n", 1)[0]))
            if self.lose(request):
                self.lost.append(request)
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return  # closed with a reset: the answer never arrives
            client.sendall(answer)


@contextmanager
def lossy_proxy(upstream_port: int, lose: Callable[[bytes], bool]) -> Iterator[LossyProxy]:
    proxy = LossyProxy(upstream_port, lose)
    thread = threading.Thread(target=proxy.serve, daemon=True)
    thread.start()
    try:
        yield proxy
    finally:
        proxy.listener.close()


def first_create_lost() -> Callable[[bytes], bool]:
    """Loses the answer to the first POST, and no other."""
    posts = 0

    def lose(request: bytes) -> bool:
        nonlocal posts
        if request.startswith(b"POST"):
            posts += 1
            return posts == 1
        return False

    return lose
