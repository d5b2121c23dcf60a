/* akad compat layer, feature host-reads-device-memory (docs/images.md): PyTorch's CUDA memory
 * as managed memory. ROCm maps device memory into the host's address space, so HIP code written
 * for AMD may read a tensor's device data from the host (x.data_ptr<float>()[0]); on NVIDIA that
 * read of a cudaMalloc pointer is a segmentation fault, while managed memory migrates the page.
 * Loaded by akad_managed_memory.py through torch.cuda.memory.CUDAPluggableAllocator.
 *
 * A pluggable allocator replaces PyTorch's caching one, and cudaMallocManaged and cudaFree (which
 * waits for the device) on every tensor would weigh on every timed call. So freed blocks are kept
 * for reuse by a request of the same size, device and stream, as PyTorch's cache does: work on
 * one stream runs in order, so the next user of a block cannot overtake the last. Blocks go back
 * to CUDA only when the process ends. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/types.h>

struct block {
  void* ptr;
  size_t size;
  int device;
  cudaStream_t stream;
  struct block* next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct block* free_blocks;  /* kept for reuse */
static struct block* spare_nodes;  /* list nodes not in use */

static void* take_kept(size_t size, int device, cudaStream_t stream) {
  void* ptr = NULL;
  pthread_mutex_lock(&lock);
  for (struct block **at = &free_blocks, *b = *at; b != NULL; at = &b->next, b = *at) {
    if (b->size == size && b->device == device && b->stream == stream) {
      *at = b->next;
      ptr = b->ptr;
      b->next = spare_nodes;
      spare_nodes = b;
      break;
    }
  }
  pthread_mutex_unlock(&lock);
  return ptr;
}

void* akad_managed_malloc(ssize_t size, int device, cudaStream_t stream) {
  const size_t bytes = size > 0 ? (size_t)size : 1;
  void* ptr = take_kept(bytes, device, stream);
  if (ptr != NULL) return ptr;
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != device) cudaSetDevice(device);
  if (cudaMallocManaged(&ptr, bytes, cudaMemAttachGlobal) != cudaSuccess) ptr = NULL;
  if (current >= 0 && current != device) cudaSetDevice(current);
  return ptr;
}

void akad_managed_free(void* ptr, ssize_t size, int device, cudaStream_t stream) {
  if (ptr == NULL) return;
  pthread_mutex_lock(&lock);
  struct block* b = spare_nodes;
  if (b != NULL) spare_nodes = b->next;
  else b = malloc(sizeof *b);
  if (b != NULL) {
    b->ptr = ptr;
    b->size = size > 0 ? (size_t)size : 1;
    b->device = device;
    b->stream = stream;
    b->next = free_blocks;
    free_blocks = b;
  }
  pthread_mutex_unlock(&lock);
  if (b == NULL) cudaFree(ptr); /* no memory for the list: give it back at once */
}
