"""A follower with no Scalebook behind it: what anyone holding a class link can send the class
listener by hand. Run as any user; argv: ADDRESS SHA256 (HOST:PORT, [V6]:PORT, or a Unix
socket's absolute path). Reads the bearer (the class link's
token, or NAME~TOKEN) as stdin's first line, then each further line is a message to send; prints
one JSON line per event: {"status": ...} for the upgrade's answer, {"message": ...} for each
message received, {"close": CODE, "reason": ...} when the listener closes."""

import base64
import hashlib
import json
import os
import select
import socket
import ssl
import struct
import sys


def say(event):
    print(json.dumps(event), flush=True)


def frame(opcode, payload):
    """A client's frame: final, masked, as RFC 6455 requires."""
    mask = os.urandom(4)
    size = len(payload)
    head = bytes([0x80 | opcode])
    if size < 126:
        head += bytes([0x80 | size])
    elif size < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", size)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", size)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def frames(buffer):
    """The whole frames at the start of `buffer` (a server's, unmasked), and what is left."""
    found = []
    while len(buffer) >= 2:
        opcode, size, at = buffer[0] & 0x0F, buffer[1] & 0x7F, 2
        if size == 126:
            if len(buffer) < 4:
                break
            size, at = struct.unpack("!H", buffer[2:4])[0], 4
        elif size == 127:
            if len(buffer) < 10:
                break
            size, at = struct.unpack("!Q", buffer[2:10])[0], 10
        if len(buffer) < at + size:
            break
        found.append((opcode, buffer[at : at + size]))
        buffer = buffer[at + size :]
    return found, buffer


def main():
    address, fingerprint = sys.argv[1], sys.argv[2]
    if address.startswith("/"):
        connection, host = socket.socket(socket.AF_UNIX), "localhost"
        connection.connect(address)
    else:
        host, port = address.rsplit(":", 1)
        connection, host = socket.create_connection((host.strip("[]"), int(port))), host.strip("[]")
    bearer = sys.stdin.readline().strip()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    tls = context.wrap_socket(connection, server_hostname=host)
    if hashlib.sha256(tls.getpeercert(binary_form=True)).hexdigest() != fingerprint:
        sys.exit("not the class listener's certificate")
    key = base64.b64encode(os.urandom(16)).decode()
    tls.sendall(
        (
            f"GET /api/ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {bearer}\r\n\r\n"
        ).encode()
    )
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        buffer += tls.recv(65536)
    head, buffer = buffer.split(b"\r\n\r\n", 1)
    status = head.split(b"\r\n")[0].decode()
    say({"status": status})
    if " 101 " not in status:
        return
    sending = True
    while True:
        watched = [tls, sys.stdin] if sending else [tls]
        readable, _, _ = select.select(watched, [], []) if not tls.pending() else ([tls], [], [])
        if sys.stdin in readable:
            line = sys.stdin.readline()
            if not line:
                return
            try:
                tls.sendall(frame(0x1, line.strip().encode()))
            except OSError:
                # The listener closed first (a removed follower is let go at once): what it
                # said before closing is still there to read.
                sending = False
        if tls in readable:
            try:
                data = tls.recv(65536)
            except OSError:
                data = b""
            if not data:
                say({"close": None, "reason": "the connection ended"})
                return
            found, buffer = frames(buffer + data)
            for opcode, payload in found:
                if opcode == 0x1:
                    say({"message": json.loads(payload)})
                elif opcode == 0x8:
                    code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                    say({"close": code, "reason": payload[2:].decode(errors="replace")})
                    return
                elif opcode == 0x9:
                    tls.sendall(frame(0xA, payload))


main()
