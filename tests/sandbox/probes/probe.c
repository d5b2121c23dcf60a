/* A hostile program in a box: each mode tries one way out of (or around) the sandbox and
 * prints what happened as "key=value" lines. Built statically so it runs in any root. The
 * tests decide from the output and from akabox's result whether the sandbox held. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

static const char* err(int rc) { return rc == 0 ? "ok" : strerror(errno); }

static int tryRead(const char* path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) { printf("read=%s\n", strerror(errno)); return 0; }
  char buf[256] = {0};
  ssize_t n = read(fd, buf, sizeof buf - 1);
  printf("read=ok bytes=%zd content=%s\n", n, buf);
  close(fd);
  return 0;
}

static int tryWrite(const char* dir) {
  char path[4096];
  snprintf(path, sizeof path, "%s/probe-was-here", dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) { printf("write=%s\n", strerror(errno)); return 0; }
  printf("write=%s\n", write(fd, "x", 1) == 1 ? "ok" : strerror(errno));
  close(fd);
  return 0;
}

static int listProcs(void) {
  DIR* d = opendir("/proc");
  struct dirent* e;
  int count = 0;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], cmd[256] = {0};
    snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
      ssize_t n = read(fd, cmd, sizeof cmd - 1);
      for (ssize_t i = 0; i < n; ++i) if (!cmd[i]) cmd[i] = ' ';
      close(fd);
    }
    printf("proc=%s %s\n", e->d_name, cmd);
    ++count;
  }
  printf("proc_count=%d\n", count);
  return 0;
}

static int trySignal(pid_t pid) {
  int rc = kill(pid, SIGKILL);
  printf("kill=%s\n", err(rc));
  return 0;
}

static int tryConnect(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int rc = connect(s, (struct sockaddr*)&a, sizeof a);
  printf("connect=%s\n", err(rc));
  /* Loopback inside must work: listen and connect to ourselves. */
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in b = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof b;
  int ok = bind(l, (struct sockaddr*)&b, sizeof b) == 0 && listen(l, 1) == 0 && getsockname(l, (struct sockaddr*)&b, &len) == 0;
  int c = socket(AF_INET, SOCK_STREAM, 0);
  ok = ok && connect(c, (struct sockaddr*)&b, sizeof b) == 0;
  printf("loopback=%s\n", ok ? "ok" : strerror(errno));
  return 0;
}

static int trySyscalls(void) {
  printf("mount=%s\n", err(mount("tmpfs", "/tmp", "tmpfs", 0, NULL)));
  printf("ptrace=%s\n", err((int)ptrace(PTRACE_ATTACH, 1, 0, 0)));
  printf("unshare=%s\n", err(unshare(CLONE_NEWUSER)));
  printf("unshare_ns=%s\n", err(unshare(CLONE_NEWNS)));
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.map_type = BPF_MAP_TYPE_ARRAY;
  attr.key_size = 4;
  attr.value_size = 4;
  attr.max_entries = 1;
  long b = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
  printf("bpf=%s\n", b >= 0 ? "ok" : strerror(errno));
  long k = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 1);
  printf("keyctl=%s\n", k >= 0 ? "ok" : strerror(errno));
  long p = syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
  printf("perf_event_open=%s\n", p >= 0 ? "ok" : strerror(errno));
  long u = syscall(SYS_userfaultfd, 0);
  printf("userfaultfd=%s\n", u >= 0 ? "ok" : strerror(errno));
  int nsfd = open("/proc/1/ns/mnt", O_RDONLY);
  printf("setns=%s\n", nsfd >= 0 ? err(setns(nsfd, 0)) : strerror(errno));
  /* clone with a namespace flag must fail too (the policy filters clone's flags). */
  long c = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
  if (c == 0) _exit(0);
  if (c > 0) waitpid((pid_t)c, NULL, 0);
  printf("clone_newuser=%s\n", c >= 0 ? "ok" : strerror(errno));
  /* Socket families: the ones programs use must open, the others (AF_VSOCK reaches a VM's host
     whatever the network namespace) must not. */
  static const struct { const char* name; int family; int type; } families[] = {
      {"socket_unix", AF_UNIX, SOCK_STREAM},       {"socket_inet", AF_INET, SOCK_STREAM},
      {"socket_inet6", AF_INET6, SOCK_STREAM},     {"socket_netlink", AF_NETLINK, SOCK_RAW},
      {"socket_vsock", 40 /* AF_VSOCK */, SOCK_STREAM}, {"socket_alg", 38 /* AF_ALG */, SOCK_SEQPACKET},
      {"socket_packet", AF_PACKET, SOCK_DGRAM},    {"socket_key", 15 /* AF_KEY */, SOCK_RAW},
      {"socket_bluetooth", 31 /* AF_BLUETOOTH */, SOCK_STREAM}};
  for (size_t i = 0; i < sizeof families / sizeof families[0]; ++i) {
    int s = socket(families[i].family, families[i].type, 0);
    printf("%s=%s\n", families[i].name, s >= 0 ? "ok" : strerror(errno));
    if (s >= 0) close(s);
  }
  return 0;
}

static int ids(void) {
  printf("uid=%d euid=%d gid=%d egid=%d\n", getuid(), geteuid(), getgid(), getegid());
  printf("setuid0=%s\n", err(setuid(0)));
  char host[128] = {0};
  gethostname(host, sizeof host - 1);
  char cwd[512] = {0};
  if (!getcwd(cwd, sizeof cwd)) strcpy(cwd, "?");
  printf("hostname=%s\ncwd=%s\n", host, cwd);
  extern char** environ;
  for (char** e = environ; *e; ++e) printf("env=%s\n", *e);
  return 0;
}

static int procRoot(const char* file) {
  char path[4096], link[4096] = {0};
  snprintf(path, sizeof path, "/proc/1/root%s", file);
  int fd = open(path, O_RDONLY);
  printf("proc1root=%s\n", fd >= 0 ? "ok" : strerror(errno));
  ssize_t n = readlink("/proc/1/root", link, sizeof link - 1);
  printf("proc1root_link=%s\n", n >= 0 ? link : strerror(errno));
  fd = open("/proc/1/environ", O_RDONLY);
  printf("proc1environ=%s\n", fd >= 0 ? "ok" : strerror(errno));
  return 0;
}

static int fds(void) {
  int open_count = 0;
  for (int fd = 3; fd < 4096; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0) {
      char p[64], t[512] = {0};
      snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
      if (readlink(p, t, sizeof t - 1) < 0) strcpy(t, "?");
      printf("openfd=%d %s\n", fd, t);
      ++open_count;
    }
  }
  printf("open_fds=%d\n", open_count);
  return 0;
}

static int memoryHog(long mb) {
  for (long i = 0; i < mb; ++i) {
    char* p = malloc(1 << 20);
    if (!p) { printf("malloc failed at %ld MiB\n", i); return 3; }
    memset(p, 1, 1 << 20);
  }
  printf("allocated=%ld\n", mb);
  return 0;
}

static int forkBomb(int n) {
  int fds[2];
  if (pipe(fds) != 0) return 2;
  int made = 0;
  for (int i = 0; i < n; ++i) {
    pid_t p = fork();
    if (p == 0) { close(fds[1]); char c; (void)!read(fds[0], &c, 1); _exit(0); }
    if (p < 0) break;
    ++made;
  }
  printf("forked=%d errno=%s\n", made, strerror(errno));
  fflush(stdout);
  close(fds[1]);
  while (wait(NULL) > 0) {}
  return 0;
}

_Noreturn static void ignoreTerm(void) {
  signal(SIGTERM, SIG_IGN);
  signal(SIGINT, SIG_IGN);
  printf("sleeping\n");
  fflush(stdout);
  for (;;) pause();
}

_Noreturn static void spin(void) {
  volatile unsigned long x = 0;
  for (;;) ++x;
}

static int flood(void) {
  char buf[65536];
  memset(buf, 'y', sizeof buf);
  for (;;) if (write(1, buf, sizeof buf) < 0) return 1;
}

static int bigFile(const char* path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) { printf("open=%s\n", strerror(errno)); return 2; }
  char buf[65536];
  memset(buf, 'z', sizeof buf);
  for (;;) if (write(fd, buf, sizeof buf) < 0) { printf("write=%s\n", strerror(errno)); return 1; }
}

/* Leaves a session leader behind that outlives the command; its argv carries the marker. */
static int daemonize(const char* self, const char* marker) {
  int ready[2];
  if (pipe(ready) != 0) return 2;
  pid_t p = fork();
  if (p == 0) {
    setsid();
    if (fork() == 0) {
      close(ready[0]);
      dup2(ready[1], 3);
      execl(self, self, "daemon-child", marker, (char*)NULL);
      _exit(1);
    }
    _exit(0);
  }
  close(ready[1]);
  waitpid(p, NULL, 0);
  char c;
  ssize_t n = read(ready[0], &c, 1);
  printf("daemon=%s\n", n == 1 ? "started" : "failed");
  return 0;
}

_Noreturn static void daemonChild(void) {
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  (void)!write(3, "r", 1);
  close(3);
  for (;;) pause();
}

static int i386Syscall(void) {
#if defined(__x86_64__)
  long ret;
  __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20) : "memory"); /* getpid, 32-bit ABI */
  printf("int80=%ld\n", ret);
#else
  printf("int80=unsupported\n");
#endif
  return 0;
}

/* The x32 ABI: the 64-bit syscall instruction with bit 30 of the number set. */
static int x32Syscall(void) {
#if defined(__x86_64__)
  long ret = syscall(0x40000000L | SYS_getpid);
  printf("x32=%ld errno=%d\n", ret, ret < 0 ? errno : 0);
#else
  printf("x32=unsupported\n");
#endif
  return 0;
}

static int devOpen(const char* path) {
  int fd = open(path, O_RDWR);
  printf("devopen=%s\n", fd >= 0 ? "ok" : strerror(errno));
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) { fprintf(stderr, "usage: probe MODE [ARG]\n"); return 2; }
  const char* m = argv[1];
  const char* a = argc > 2 ? argv[2] : "";
  if (!strcmp(m, "read")) return tryRead(a);
  if (!strcmp(m, "write")) return tryWrite(a);
  if (!strcmp(m, "procs")) return listProcs();
  if (!strcmp(m, "signal")) return trySignal(atoi(a));
  if (!strcmp(m, "connect")) return tryConnect(atoi(a));
  if (!strcmp(m, "syscalls")) return trySyscalls();
  if (!strcmp(m, "ids")) return ids();
  if (!strcmp(m, "proc1root")) return procRoot(a);
  if (!strcmp(m, "fds")) return fds();
  if (!strcmp(m, "memory")) return memoryHog(atol(a));
  if (!strcmp(m, "forkbomb")) return forkBomb(atoi(a));
  if (!strcmp(m, "ignore-term")) ignoreTerm();
  if (!strcmp(m, "spin")) spin();
  if (!strcmp(m, "flood")) return flood();
  if (!strcmp(m, "bigfile")) return bigFile(a);
  if (!strcmp(m, "daemon")) return daemonize(argv[0], a);
  if (!strcmp(m, "daemon-child")) daemonChild();
  if (!strcmp(m, "i386")) return i386Syscall();
  if (!strcmp(m, "x32")) return x32Syscall();
  if (!strcmp(m, "devopen")) return devOpen(a);
  if (!strcmp(m, "exit")) return atoi(a);
  if (!strcmp(m, "kill-self")) { kill(getpid(), atoi(a)); return 99; }
  fprintf(stderr, "unknown mode %s\n", m);
  return 2;
}
