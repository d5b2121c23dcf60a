"""akacuda - GPU memory that the trusted driver and a candidate worker share, through the CUDA
driver API's virtual memory management (ctypes on libcuda.so.1); and the GPU state report.

Why not torch's own sharing: legacy CUDA IPC (cudaIpcGetMemHandle, what torch's storage
`_share_cuda_` uses) finds the exporting process by its pid, and the driver and the worker run in
separate pid namespaces (two akabox sandboxes). A VMM allocation made shareable as
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR exports as a plain file descriptor, which travels over
the channel's socket by SCM_RIGHTS like the header's memfd and needs nothing else in common.

  driver: cuMemCreate (device memory on its GPU, POSIX fd handle type, size rounded up to the
          recommended granularity), cuMemAddressReserve + cuMemMap + cuMemSetAccess (read-write
          for its device), cuMemExportToShareableHandle -> fd, sent to the worker
  worker: cuMemImportFromShareableHandle(fd), then the same reserve, map and set-access in its
          own address space

Both sides use torch's primary context (torch creates it first; the VMM calls need a current
context) and wrap byte ranges of their mapping as torch tensors through __cuda_array_interface__.
The physical memory lives until both have unmapped and released it. The worker can reach this
allocation and nothing else of the driver's: the driver's inputs, its copies of the outputs and
the reference's answers are in its own process's context.
"""
import ctypes
import os
import subprocess

import torch

_PINNED = 1                 # CU_MEM_ALLOCATION_TYPE_PINNED
_POSIX_FD = 1               # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_LOCATION_DEVICE = 1        # CU_MEM_LOCATION_TYPE_DEVICE
_READWRITE = 3              # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_GRANULARITY_RECOMMENDED = 1
_ATTR_VMM = 102             # CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
_ATTR_POSIX_FD = 103        # CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED


class CudaError(RuntimeError):
    pass


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class _Memcpy2D(ctypes.Structure):  # CUDA_MEMCPY2D
    _fields_ = [("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t), ("srcMemoryType", ctypes.c_int),
                ("srcHost", ctypes.c_void_p), ("srcDevice", ctypes.c_uint64), ("srcArray", ctypes.c_void_p),
                ("srcPitch", ctypes.c_size_t),
                ("dstXInBytes", ctypes.c_size_t), ("dstY", ctypes.c_size_t), ("dstMemoryType", ctypes.c_int),
                ("dstHost", ctypes.c_void_p), ("dstDevice", ctypes.c_uint64), ("dstArray", ctypes.c_void_p),
                ("dstPitch", ctypes.c_size_t),
                ("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t)]


_MEMORYTYPE_HOST, _MEMORYTYPE_DEVICE = 1, 2
# The largest pitch a 2D copy takes (cudaDevAttrMaxPitch on current GPUs).
MAX_PITCH = (1 << 31) - 1

_u64p = ctypes.POINTER(ctypes.c_uint64)
_SIGNATURES = {
    "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuCtxGetCurrent": [ctypes.POINTER(ctypes.c_void_p)],
    "cuCtxGetDevice": [ctypes.POINTER(ctypes.c_int)],
    "cuDeviceGetAttribute": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int],
    "cuDeviceGetPCIBusId": [ctypes.c_char_p, ctypes.c_int, ctypes.c_int],
    "cuMemGetAllocationGranularity": [ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(_AllocationProp), ctypes.c_int],
    "cuMemCreate": [_u64p, ctypes.c_size_t, ctypes.POINTER(_AllocationProp), ctypes.c_uint64],
    "cuMemRelease": [ctypes.c_uint64],
    "cuMemExportToShareableHandle": [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.c_uint64],
    "cuMemImportFromShareableHandle": [_u64p, ctypes.c_void_p, ctypes.c_int],
    "cuMemAddressReserve": [_u64p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_uint64],
    "cuMemAddressFree": [ctypes.c_uint64, ctypes.c_size_t],
    "cuMemMap": [ctypes.c_uint64, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_uint64],
    "cuMemUnmap": [ctypes.c_uint64, ctypes.c_size_t],
    "cuMemSetAccess": [ctypes.c_uint64, ctypes.c_size_t, ctypes.POINTER(_AccessDesc), ctypes.c_size_t],
    "cuMemcpyDtoHAsync_v2": [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p],
    "cuMemcpy2DAsync_v2": [ctypes.c_void_p, ctypes.c_void_p],
    "cuStreamSynchronize": [ctypes.c_void_p],
    "cuGraphCreate": [ctypes.c_void_p, ctypes.c_uint],
    "cuGraphAddChildGraphNode": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p],
    "cuGraphInstantiateWithFlags": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong],
    "cuGraphLaunch": [ctypes.c_void_p, ctypes.c_void_p],
    "cuGraphExecDestroy": [ctypes.c_void_p],
    "cuGraphDestroy": [ctypes.c_void_p],
}
_lib = None


def _cu():
    global _lib
    if _lib is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise CudaError(f"cannot load the CUDA driver library libcuda.so.1: {e}")
        for name, args in _SIGNATURES.items():
            f = getattr(lib, name)
            f.argtypes = args
            f.restype = ctypes.c_int
        _lib = lib
    return _lib


def _check(rc, call):
    if rc != 0:
        text = ctypes.c_char_p()
        _cu().cuGetErrorString(rc, ctypes.byref(text))
        raise CudaError(f"{call} failed: CUDA error {rc} ({text.value.decode() if text.value else 'unknown'})")


def current_device():
    """Initialises torch's primary context on the current device, makes sure the driver API sees
    it current on this thread, and returns the device's ordinal."""
    torch.cuda.init()
    torch.empty(1, device="cuda")
    ctx = ctypes.c_void_p()
    _check(_cu().cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        raise CudaError("no current CUDA context after torch's initialisation")
    dev = ctypes.c_int()
    _check(_cu().cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
    return dev.value


def device_id(device):
    """The device's PCI bus id: what tells the worker that it sees the driver's GPU (device
    ordinals differ between sandboxes that see different GPU sets)."""
    buf = ctypes.create_string_buffer(64)
    _check(_cu().cuDeviceGetPCIBusId(buf, len(buf), device), "cuDeviceGetPCIBusId")
    return buf.value.decode().lower()


class _DeviceBytes:
    """A byte range of device memory as __cuda_array_interface__, for torch.as_tensor."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "strides": None, "version": 2}


def create_handle(nbytes, device):
    """A shareable VMM allocation of at least `nbytes` (rounded up to the recommended
    granularity), mapped nowhere: (handle, size). cuMemRelease it when done."""
    cu = _cu()
    for attr, what in ((_ATTR_VMM, "virtual memory management"), (_ATTR_POSIX_FD, "POSIX file descriptor handles")):
        v = ctypes.c_int()
        _check(cu.cuDeviceGetAttribute(ctypes.byref(v), attr, device), "cuDeviceGetAttribute")
        if not v.value:
            raise CudaError(f"GPU {device} does not support {what}: the driver cannot share memory with a worker")
    prop = _AllocationProp(type=_PINNED, requestedHandleTypes=_POSIX_FD, location=_Location(_LOCATION_DEVICE, device))
    gran = ctypes.c_size_t()
    _check(cu.cuMemGetAllocationGranularity(ctypes.byref(gran), ctypes.byref(prop), _GRANULARITY_RECOMMENDED),
           "cuMemGetAllocationGranularity")
    g = max(gran.value, 1)
    size = (max(nbytes, 1) + g - 1) // g * g
    handle = ctypes.c_uint64()
    _check(cu.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(prop), 0), f"cuMemCreate({size} bytes)")
    return handle.value, size


class Reservation:
    """An address range of `size` bytes whose backing changes: nothing, a placeholder allocation
    of the worker's own, or an allocation the driver lends (graph windows: the calls are
    captured over the placeholder and run over the lent memory). Tensors made over it keep their
    addresses whatever is mapped there."""

    def __init__(self, size, device):
        self.size, self.device = size, device
        self.ptr, self.mapped, self._bytes = 0, 0, None
        ptr = ctypes.c_uint64()
        _check(_cu().cuMemAddressReserve(ctypes.byref(ptr), size, 0, 0, 0), f"cuMemAddressReserve({size})")
        self.ptr = ptr.value

    def map(self, handle):
        """Maps `handle` (an allocation of exactly `size` bytes) over the range, read-write."""
        cu = _cu()
        self.unmap()
        _check(cu.cuMemMap(self.ptr, self.size, 0, handle, 0), f"cuMemMap({self.size})")
        self.mapped = handle
        desc = _AccessDesc(_Location(_LOCATION_DEVICE, self.device), _READWRITE)
        _check(cu.cuMemSetAccess(self.ptr, self.size, ctypes.byref(desc), 1), "cuMemSetAccess")

    def unmap(self):
        if self.mapped:
            _check(_cu().cuMemUnmap(self.ptr, self.size), "cuMemUnmap")
            self.mapped = 0

    def tensor(self, offset, dtype, dims):
        """A tensor of `dtype` and shape `dims` at byte `offset` of the range (no copy); make
        them while something is mapped."""
        count = 1
        for d in dims:
            count *= d
        nbytes = count * dtype.itemsize
        if offset < 0 or offset + nbytes > self.size:
            raise CudaError(f"a tensor of {nbytes} bytes at offset {offset} does not fit {self.size} bytes")
        # One as_tensor per range (it costs tens of microseconds; the worker makes a window's
        # input tensors inside the driver's clock), then a slice per tensor.
        if self._bytes is None:
            self._bytes = torch.as_tensor(_DeviceBytes(self.ptr, self.size), device=f"cuda:{self.device}")
        return self._bytes[offset:offset + nbytes].view(dtype).view(list(dims))

    def close(self):
        self._bytes = None
        if self.mapped:
            _cu().cuMemUnmap(self.ptr, self.size)
            self.mapped = 0
        if self.ptr:
            _cu().cuMemAddressFree(self.ptr, self.size)
            self.ptr = 0


class GraphChain:
    """Graphs (CUgraph handles) as the child nodes of one graph, each depending on the one before:
    one launch runs them in order, a child starting only once the whole child before it has
    finished, without a launch of its own per graph (runner_main.GraphWindow)."""

    def __init__(self, children):
        cu = _cu()
        self.graph, self.exec = ctypes.c_void_p(), ctypes.c_void_p()
        _check(cu.cuGraphCreate(ctypes.byref(self.graph), 0), "cuGraphCreate")
        try:
            before = None
            for child in children:
                node = ctypes.c_void_p()
                deps, ndeps = (ctypes.byref(before), 1) if before is not None else (None, 0)
                _check(cu.cuGraphAddChildGraphNode(ctypes.byref(node), self.graph, deps, ndeps, ctypes.c_void_p(child)),
                       "cuGraphAddChildGraphNode")
                before = node
            _check(cu.cuGraphInstantiateWithFlags(ctypes.byref(self.exec), self.graph, 0), "cuGraphInstantiateWithFlags")
        except BaseException:
            self.close()
            raise

    def launch(self, stream):
        _check(_cu().cuGraphLaunch(self.exec, ctypes.c_void_p(stream)), "cuGraphLaunch")

    def close(self):
        if self.exec:
            _cu().cuGraphExecDestroy(self.exec)
            self.exec = ctypes.c_void_p()
        if self.graph:
            _cu().cuGraphDestroy(self.graph)
            self.graph = ctypes.c_void_p()


def import_handle(fd):
    """The allocation behind a descriptor the driver sent (cuMemRelease it when done)."""
    handle = ctypes.c_uint64()
    _check(_cu().cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD),
           "cuMemImportFromShareableHandle")
    return handle.value


def release(handle):
    if handle:
        _cu().cuMemRelease(handle)


class SharedMemory(Reservation):
    """One process's mapping of a shareable VMM allocation: a Reservation with the allocation
    mapped for good. `create` is the driver's, `import_fd` the worker's; `close` unmaps and
    releases (drop the tensors first)."""

    def __init__(self, handle, size, device):
        super().__init__(size, device)
        try:
            self.map(handle)
        except BaseException:
            Reservation.close(self)  # the handle stays the caller's to release
            raise
        self.handle = handle

    @classmethod
    def create(cls, nbytes, device):
        handle, size = create_handle(nbytes, device)
        try:
            return cls(handle, size, device)
        except BaseException:
            release(handle)
            raise

    @classmethod
    def import_fd(cls, fd, size, device):
        handle = import_handle(fd)
        try:
            return cls(handle, size, device)
        except BaseException:
            release(handle)
            raise

    def export_fd(self):
        fd = ctypes.c_int(-1)
        _check(_cu().cuMemExportToShareableHandle(ctypes.byref(fd), self.handle, _POSIX_FD, 0),
               "cuMemExportToShareableHandle")
        return fd.value

    def close(self):
        super().close()
        release(self.handle)
        self.handle = 0


def read_pieces(pieces, host_ptr, piece_bytes, stream, wait=True):
    """Copies device byte ranges [(device_ptr, nbytes)] into page-locked host memory at
    host_ptr, piece k at k * piece_bytes, on `stream` (a CUstream handle), and waits unless
    `wait` is false (then the caller synchronises the stream). A device-to-host copy runs on a
    copy engine: it needs no switch of the GPU's compute engine to this process's context
    (docs/scoring.md)."""
    cu = _cu()
    for k, (ptr, n) in enumerate(pieces):
        _check(cu.cuMemcpyDtoHAsync_v2(host_ptr + k * piece_bytes, ptr, n, stream), "cuMemcpyDtoHAsync")
    if wait:
        synchronize(stream)


def read_rows(src, src_pitch, host_ptr, host_pitch, width, rows, stream):
    """Queues one copy of `rows` rows of `width` bytes, row r from device address src + r *
    src_pitch to host_ptr + r * host_pitch (page-locked), on `stream`: one call for a piece of
    every output set of a window. Pitches up to MAX_PITCH."""
    c = _Memcpy2D(srcMemoryType=_MEMORYTYPE_DEVICE, srcDevice=src, srcPitch=src_pitch,
                  dstMemoryType=_MEMORYTYPE_HOST, dstHost=host_ptr, dstPitch=host_pitch,
                  WidthInBytes=width, Height=rows)
    _check(_cu().cuMemcpy2DAsync_v2(ctypes.byref(c), stream), "cuMemcpy2DAsync")


def synchronize(stream):
    _check(_cu().cuStreamSynchronize(stream), "cuStreamSynchronize")


def gpu_state():
    """GPU clocks and temperature for the scorer's throttling check: nvidia-smi when the
    sandbox has it (every visible GPU, with CUDA_VISIBLE_DEVICES), else what torch offers."""
    state = {"cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    fields = ["index", "pci.bus_id", "clocks.sm", "clocks.mem", "clocks.max.sm", "temperature.gpu", "power.draw"]
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode == 0:
            gpus = []
            for line in r.stdout.strip().splitlines():
                gpu = {}
                for k, v in zip(fields, (v.strip() for v in line.split(","))):
                    try:
                        gpu[k] = float(v)
                    except ValueError:
                        gpu[k] = v
                gpus.append(gpu)
            state["gpus"] = gpus
            state["source"] = "nvidia-smi"
            return state
    except (OSError, subprocess.SubprocessError):
        pass
    state["source"] = "torch (nvidia-smi unavailable)"
    for key, fn in (("clocks.sm", "clock_rate"), ("temperature.gpu", "temperature")):
        try:
            state[key] = getattr(torch.cuda, fn)()
        except Exception as e:  # needs pynvml, which may be missing
            state[key] = f"unavailable: {type(e).__name__}"
    return state
