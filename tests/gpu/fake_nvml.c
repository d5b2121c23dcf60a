/* A stand-in for the driver's libnvidia-ml.so.1, which cannot exist on a host without an NVIDIA
 * driver: the NVML entry points akad uses, with NVML's C ABI. It knows one GPU, the H200 of
 * tests/gpu/fixtures (143771 MiB, as nvidia-smi reports it there). */
#include <string.h>

typedef struct {
  unsigned long long total, free, used;
} fake_memory;

static int initialised;
static int known_gpu;

int nvmlInit_v2(void) {
  initialised = 1;
  return 0;
}

int nvmlShutdown(void) {
  if (!initialised) return 1; /* NVML_ERROR_UNINITIALIZED */
  initialised = 0;
  return 0;
}

int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  if (!initialised) return 1;
  if (strcmp(uuid, "GPU-4421ad8f-e3e4-cef2-4db5-6e174abaa159") != 0) return 6; /* NOT_FOUND */
  *device = &known_gpu;
  return 0;
}

int nvmlDeviceGetMemoryInfo(void* device, fake_memory* memory) {
  if (!initialised) return 1;
  if (device != &known_gpu) return 2; /* INVALID_ARGUMENT */
  memory->total = 143771ULL << 20;
  memory->used = 0;
  memory->free = memory->total;
  return 0;
}

const char* nvmlErrorString(int result) {
  switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 6: return "Not Found";
    default: return "Unknown Error";
  }
}
