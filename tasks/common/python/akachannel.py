"""akachannel - the channel between the scorer's trusted driver and a candidate worker, for the
python harness (docs/scoring.md, "Driver and worker"). The same protocol as the cpp harness's
akachannel.h, so that the scorer treats both alike:

 - a Unix stream socket (the driver listens, the worker connects) for set-up messages: each a
   little-endian u32 length and that many bytes of JSON, at most MAX_MESSAGE; one file
   descriptor may ride along (SCM_RIGHTS);
 - one header page per configuration (a sealed memfd the driver makes and passes) with the
   go/done words, laid out as akachannel.h's `Header`:
       0 magic u32 "AKC1"   4 version u32
      64 go u32             68 cmd u32         (go on a cache line of its own)
      72 slot u32           76 outSet u32      80 window u32 (the GPU harnesses' windows)
     128 done u32          132 status u32     136 inprocNs u64 (done on another)

A call: the driver writes the inputs, sets `cmd`, stores the call's number in `go` and wakes it;
the worker runs the kernel, writes `status` and `inprocNs`, stores the same number in `done` and
wakes that. Both words are shared futexes, so either side may sleep or spin on them. The driver
trusts nothing in the header but `done`, and that only as "the worker says it has finished".

Python issues no memory fences: the word stores here are plain stores through ctypes, ordered by
x86-64's total store order (cmd before go, status and inprocNs before done). The harness runs
on x86-64 hosts; an Arm host would need the words written through C atomics.
"""
import ctypes
import fcntl
import json
import mmap
import os
import platform
import select
import socket
import struct
import time

MAGIC = 0x31434B41  # "AKC1"
VERSION = 2
HEADER_BYTES = 4096
TENSOR_ALIGN = 4096
MAX_MESSAGE = 1 << 20

CALL = 1       # run the kernel once on the configuration's tensors
EMPTY = 2      # do everything but the kernel (the driver calibrates its overhead; baseline only)
END_GROUP = 3  # the configuration is done: go back to the socket for the next message
PRIME = 4      # run an empty kernel and synchronise, untimed, so that the GPU holds the worker's
               # context when the driver's clock starts (docs/scoring.md)
# Graph windows (a task's timing.window: graph, or the driver's AKA_WINDOW=graph; this harness
# only): untimed, the worker captures the calls the "window" message describes, one CUDA graph
# each, over a range where only a placeholder of its own is mapped, and unmaps it; timed, it
# maps the pool that follows on the socket into that range and launches the graphs in order.
CAPTURE = 5
REPLAY = 6

OK = 0
FAILED = 1

# Header window flags: this call opens a window (its pool's descriptor follows on the socket)
# and/or closes it (the worker unmaps the pool after done). WINDOW_QUEUED: the worker says done
# once the call is launched and synchronises only at the window's last call (akachannel.h).
WINDOW_OPEN = 1
WINDOW_CLOSE = 2
WINDOW_QUEUED = 4

# How a side waits for the other's word (_wait).
SPIN_NS = 2_000_000
NAP_AFTER_NS = 10_000_000_000
LOOK_NS = 10_000_000
NAP_NS = 20_000_000

_GO, _CMD, _SLOT, _OUTSET, _WINDOW, _DONE, _STATUS, _INPROC = 64, 68, 72, 76, 80, 128, 132, 136

_SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(platform.machine())
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_libc = ctypes.CDLL(None, use_errno=True)


class ChannelError(Exception):
    pass


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def align_up(n, a):
    return (n + a - 1) // a * a


# --- socket messages ---------------------------------------------------------------------------

def send_message(sock, obj, fd=None):
    data = json.dumps(obj, separators=(",", ":")).encode()
    if len(data) > MAX_MESSAGE:
        raise ChannelError(f"channel: message of {len(data)} bytes is too long")
    frame = struct.pack("<I", len(data)) + data
    if fd is None:
        sock.sendall(frame)
        return
    # The descriptor rides on the first piece; the rest may take several writes.
    sent = socket.send_fds(sock, [frame], [fd])
    if sent < len(frame):
        sock.sendall(frame[sent:])


def _read_exact(sock, n, fds):
    chunks, got = [], 0
    while got < n:
        data, anc, _flags, _addr = sock.recvmsg(n - got, socket.CMSG_SPACE(4 * 4), socket.MSG_CMSG_CLOEXEC)
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(struct.unpack(f"<{len(payload) // 4}i", payload[:len(payload) // 4 * 4]))
        if not data:
            if got == 0:
                return None
            raise ChannelError("channel: the peer closed the connection in the middle of a message")
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


def receive_message(sock):
    """Returns (message, fd or None), or (None, None) on a clean end of stream. A message longer
    than MAX_MESSAGE is refused unread: the peer may be hostile. Descriptors beyond the first
    are closed."""
    fds = []
    try:
        head = _read_exact(sock, 4, fds)
        if head is None:
            return None, None
        (n,) = struct.unpack("<I", head)
        if n > MAX_MESSAGE:
            raise ChannelError(f"channel: the peer announced a message of {n} bytes")
        body = _read_exact(sock, n, fds) if n else b""
        if body is None:
            raise ChannelError("channel: the peer closed the connection")
        try:
            msg = json.loads(body)
        except ValueError:
            raise ChannelError("channel: the peer sent something that is not JSON")
        except RecursionError:
            # Nested deeper than Python's parser goes: the peer's fault, not the reader's.
            raise ChannelError("channel: the peer sent JSON nested too deeply")
    except BaseException:
        for f in fds:
            os.close(f)
        raise
    for f in fds[1:]:
        os.close(f)
    return msg, (fds[0] if fds else None)


def peer_gone(sock):
    """True when the peer has hung up (or sent something while none was expected)."""
    p = select.poll()
    p.register(sock, select.POLLIN | select.POLLRDHUP)
    for _fd, ev in p.poll(0):
        if ev & (select.POLLHUP | select.POLLRDHUP | select.POLLERR):
            return True
    return False


def connect(path, timeout_s=120):
    """The worker's side: connects, waiting for the driver to listen (both start together)."""
    deadline = time.monotonic() + timeout_s
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except (FileNotFoundError, ConnectionRefusedError) as e:
            s.close()
            if time.monotonic() > deadline:
                raise ChannelError(f"channel: cannot connect to {path}: {e.strerror}")
            time.sleep(0.02)


# --- the header page ---------------------------------------------------------------------------

def _futex(addr, op, val, timeout_ns):
    ts = None
    if timeout_ns:
        ts = ctypes.byref(_Timespec(timeout_ns // 1_000_000_000, timeout_ns % 1_000_000_000))
    # Shared futexes (no FUTEX_PRIVATE_FLAG): the two sides are different processes.
    _libc.syscall(_SYS_FUTEX, ctypes.c_void_p(addr), op, val, ts, None, 0)


class Header:
    """The header page, mapped. `create()` is the driver's (a sealed memfd it then passes),
    `attach(fd)` the worker's."""

    def __init__(self, fd, size):
        self.fd = fd
        self.size = size
        self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._go = ctypes.c_uint32.from_buffer(self._map, _GO)
        self._cmd = ctypes.c_uint32.from_buffer(self._map, _CMD)
        self._slot = ctypes.c_uint32.from_buffer(self._map, _SLOT)
        self._outset = ctypes.c_uint32.from_buffer(self._map, _OUTSET)
        self._window = ctypes.c_uint32.from_buffer(self._map, _WINDOW)
        self._done = ctypes.c_uint32.from_buffer(self._map, _DONE)
        self._status = ctypes.c_uint32.from_buffer(self._map, _STATUS)
        self._inproc = ctypes.c_uint64.from_buffer(self._map, _INPROC)

    @classmethod
    def create(cls):
        if _SYS_FUTEX is None:
            raise ChannelError(f"channel: no futex system call number known for {platform.machine()}")
        fd = os.memfd_create("akachan-region", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, HEADER_BYTES)
            # Neither side can shrink it (that would fault the other's next access) or grow it.
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            h = cls(fd, HEADER_BYTES)
        except BaseException:
            os.close(fd)
            raise
        struct.pack_into("<II", h._map, 0, MAGIC, VERSION)
        return h

    @classmethod
    def attach(cls, fd, size):
        if _SYS_FUTEX is None:
            raise ChannelError(f"channel: no futex system call number known for {platform.machine()}")
        if size < HEADER_BYTES or os.fstat(fd).st_size < size:
            raise ChannelError("channel: the region is smaller than its header")
        h = cls(fd, size)
        magic, version = struct.unpack_from("<II", h._map, 0)
        if (magic, version) != (MAGIC, VERSION):
            raise ChannelError(f"channel: region header {magic:#x}/{version} is not AKC1/{VERSION}")
        return h

    def close(self):
        # ctypes views pin the mapping; they go first. One still held elsewhere (a traceback's
        # frame) keeps the page mapped until it is collected: 4 KiB, never an error.
        del self._go, self._cmd, self._slot, self._outset, self._window, self._done, self._status, self._inproc
        try:
            self._map.close()
        except BufferError:
            pass
        os.close(self.fd)

    # The driver's side.
    def post(self, n, cmd, slot=0, out_set=0, window=0):
        self._cmd.value = cmd
        self._slot.value = slot
        self._outset.value = out_set
        self._window.value = window
        self._go.value = n
        _futex(ctypes.addressof(self._go), _FUTEX_WAKE, 1, 0)

    def done(self):
        return self._done.value

    def status(self):
        return self._status.value

    def inproc_ns(self):
        return self._inproc.value

    # The worker's side.
    def go(self):
        return self._go.value

    def cmd(self):
        return self._cmd.value

    def call_fields(self):
        """(slot, outSet, window) of the call `go` names."""
        return self._slot.value, self._outset.value, self._window.value

    def finish(self, n, status, inproc_ns):
        self._status.value = status
        self._inproc.value = inproc_ns
        self._done.value = n
        _futex(ctypes.addressof(self._done), _FUTEX_WAKE, 1, 0)

    def wait_go(self, seen, alive):
        return _wait(self._go, seen, alive)

    def wait_done(self, n, alive):
        while True:
            d = self._done.value
            if d == n:
                return
            _wait(self._done, d, alive)


def _wait(word, seen, alive):
    """Returns the word's value once it differs from `seen`. A GPU call takes tens of
    microseconds, and waking a process asleep on a futex costs about as much in a virtual
    machine, with jitter, inside the driver's clock. So it spins on the word, gives the core
    away between looks (sched_yield: other runnable work goes first, an idle core returns at
    once) once the wait has lasted SPIN_NS, and naps on the futex only after NAP_AFTER_NS without
    news (the driver making large inputs on the CPU, a kernel that hangs). From SPIN_NS on it
    asks alive() every LOOK_NS: a peer that has gone raises ChannelError."""
    start = time.perf_counter_ns()
    next_look = start + SPIN_NS
    while True:
        for _ in range(64):
            v = word.value
            if v != seen:
                return v
        now = time.perf_counter_ns()
        if now - start < SPIN_NS:
            continue
        if now - start > NAP_AFTER_NS:
            break
        os.sched_yield()
        if now >= next_look:
            next_look = now + LOOK_NS
            if word.value == seen and not alive():
                raise ChannelError("channel: the peer hung up")
    addr = ctypes.addressof(word)
    while True:
        v = word.value
        if v != seen:
            return v
        _futex(addr, _FUTEX_WAIT, seen, NAP_NS)
        v = word.value
        if v != seen:
            return v
        if not alive():
            raise ChannelError("channel: the peer hung up")
