"""The python harness's channel (tasks/common/python/akachannel.py) against a hostile peer, over
a real socket pair: what the worker sends the trusted driver is refused as a ChannelError (the
worker's fault), never raised as another exception that would read as the driver's own failure."""
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tasks", "common", "python"))
import akachannel as chan  # noqa: E402


def refused(body):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        a.sendall(struct.pack("<I", len(body)) + body)
        try:
            chan.receive_message(b)
        except chan.ChannelError as e:
            return str(e)
        return None
    finally:
        a.close()
        b.close()


failures = 0
for name, body in (("nested 100000 deep", b"[" * 100000 + b"]" * 100000),
                   ("not JSON", b"{not json"),
                   ("announced past the limit", None)):
    if body is None:
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        a.sendall(struct.pack("<I", chan.MAX_MESSAGE + 1))
        try:
            chan.receive_message(b)
            why = None
        except chan.ChannelError as e:
            why = str(e)
        a.close()
        b.close()
    else:
        why = refused(body)
    print(f"{name}: {'refused: ' + why if why else 'NOT refused'}")
    failures += why is None
# A well-formed message still passes.
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
chan.send_message(a, {"type": "hello", "depth": [[[1]]]})
msg, fd = chan.receive_message(b)
print(f"well formed: {msg}")
failures += msg != {"type": "hello", "depth": [[[1]]]}
print("akachannel test: " + ("passed" if failures == 0 else f"{failures} failed"))
sys.exit(1 if failures else 0)
