/* akad compat layer, feature host-reads-device-memory (docs/images.md): PyTorch's CUDA memory
 * as managed memory. ROCm maps device memory into the host's address space, so HIP code written
 * for AMD may read a tensor's device data from the host (x.data_ptr<float>()[0]); on NVIDIA that
 * read of a cudaMalloc pointer is a segmentation fault, while managed memory migrates the page.
 * Loaded by akad_managed_memory.py through torch.cuda.memory.CUDAPluggableAllocator. */
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <sys/types.h>

void* akad_managed_malloc(ssize_t size, int device, cudaStream_t stream) {
  (void)stream;
  void* ptr = NULL;
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != device) cudaSetDevice(device);
  if (cudaMallocManaged(&ptr, size > 0 ? (size_t)size : 1, cudaMemAttachGlobal) != cudaSuccess) ptr = NULL;
  if (current >= 0 && current != device) cudaSetDevice(current);
  return ptr;
}

/* cudaFree waits for the device, so no kernel still uses the memory. */
void akad_managed_free(void* ptr, ssize_t size, int device, cudaStream_t stream) {
  (void)size;
  (void)device;
  (void)stream;
  cudaFree(ptr);
}
