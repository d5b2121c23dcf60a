#include "sandbox/shared_clone.h"

#include <sys/mman.h>
#include <sys/syscall.h>

#include <cerrno>
#include <utility>

#if defined(__x86_64__)
// rdi = args, rsi = size, rdx = fn, rcx = arg. The system call keeps r8 and r9, so the child
// finds fn and arg there; the kernel starts it with rsp at the top of args->stack (16-byte
// aligned: the call leaves it as a function expects). No frame pointer to unwind past.
extern "C" long akabox_clone3_on_stack(clone_args* args, size_t size, int (*fn)(void*), void* arg);
asm(R"(
  .text
  .globl akabox_clone3_on_stack
  .hidden akabox_clone3_on_stack
  .type akabox_clone3_on_stack,@function
akabox_clone3_on_stack:
  mov %rdx, %r8
  mov %rcx, %r9
  mov $435, %eax
  syscall
  test %rax, %rax
  jz 1f
  ret
1:
  xor %ebp, %ebp
  mov %r9, %rdi
  call *%r8
  mov %eax, %edi
  mov $60, %eax
  syscall
  hlt
  .size akabox_clone3_on_stack, .-akabox_clone3_on_stack
)");
static_assert(SYS_clone3 == 435 && SYS_exit == 60, "the system call numbers in the assembly above");
#endif

namespace akad::box {

long cloneOnStack(clone_args& args, int (*fn)(void*), void* arg) {
#if defined(__x86_64__)
  return akabox_clone3_on_stack(&args, sizeof(args), fn, arg);
#else
  (void)args, (void)fn, (void)arg;
  return -ENOSYS;
#endif
}

ChildStack::ChildStack(size_t size) {
  void* p = ::mmap(nullptr, size + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (p == MAP_FAILED) return;
  if (::mprotect(p, kGuard, PROT_NONE) != 0) {
    ::munmap(p, size + kGuard);
    return;
  }
  base_ = p;
  size_ = size;
}

ChildStack::~ChildStack() {
  if (base_) ::munmap(base_, size_ + kGuard);
}

ChildStack::ChildStack(ChildStack&& o) noexcept : base_(std::exchange(o.base_, nullptr)), size_(std::exchange(o.size_, 0)) {}

ChildStack& ChildStack::operator=(ChildStack&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, size_ + kGuard);
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

}  // namespace akad::box
