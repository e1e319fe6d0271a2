// Preloaded before rdma-core's librspreload.so (--hpc-grpc-preset rsocket-compat): the calls
// gRPC's posix transport makes that rsocket's preload of rdma-core < 63 does not handle.
// Measured with Debian 12's rdma-core 44 and gRPC 1.51 (issue 18):
// - fcntl(F_GETFD/F_SETFD) on an rsocket fails with ENOTSUP (rdma-core 63 handles them), and
//   gRPC gives up on the socket ("Unable to configure socket ... fcntl"): they act on the
//   placeholder descriptor the application holds, which is what close-on-exec is about;
// - accept4 is not intercepted (rdma-core 63 does): accept, then the flags by fcntl;
// - rsocket cannot bind an IPv4-mapped IPv6 address, which gRPC's dual-stack sockets use for
//   an IPv4 listen address ("Cannot assign requested address"): stream sockets of AF_INET6
//   are refused, so gRPC's IPv6 probe fails and it falls back to AF_INET sockets (IPv4 fabric
//   addresses only).
// - rpoll of rdma-core < 63 leaks its count of blocked pollers when a finite timeout runs out
//   after the poller was counted (fixed upstream by a1747742e, "librdmacm: Fix rpoll in case of
//   timeout", v63): from then on every rpoll spins in sched_yield and never sleeps, so gRPC
//   (whose poll engine passes timeouts of a few ms) stalls or crawls, worst on a loaded or
//   emulated CPU. A finite timeout is therefore given to rdma-core's rpoll as an infinite one
//   plus a timerfd of this thread armed for that timeout, one more descriptor in the set.
// Everything else goes on to the next definition (librspreload's, else libc's).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

static int (*next_fcntl)(int, int, ...);
static int (*next_socket)(int, int, int);

int socket(int domain, int type, int protocol) {
  if (domain == AF_INET6 && type == SOCK_STREAM) {
    errno = EAFNOSUPPORT;
    return -1;
  }
  if (!next_socket) next_socket = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
  return next_socket(domain, type, protocol);
}

int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  long arg = va_arg(ap, long);  // an int or a pointer: both fit, as in glibc's own fcntl
  va_end(ap);
  if (cmd == F_GETFD || cmd == F_SETFD) return (int)syscall(SYS_fcntl, fd, cmd, arg);
  if (!next_fcntl) next_fcntl = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl");
  return next_fcntl(fd, cmd, arg);
}

int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  int s = accept(fd, addr, len);
  if (s < 0) return s;
  if ((flags & SOCK_NONBLOCK) && fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK) < 0) {
    int saved = errno;
    close(s);
    errno = saved;
    return -1;
  }
  if (flags & SOCK_CLOEXEC) syscall(SYS_fcntl, s, F_SETFD, FD_CLOEXEC);
  return s;
}

static int (*next_rpoll)(struct pollfd*, nfds_t, int);
static __thread int timer_fd = -1;
static __thread struct pollfd* with_timer;
static __thread nfds_t with_timer_len;

int rpoll(struct pollfd* fds, nfds_t nfds, int timeout) {
  if (!next_rpoll) {
    next_rpoll = (int (*)(struct pollfd*, nfds_t, int))dlvsym(RTLD_NEXT, "rpoll", "RDMACM_1.0");
    if (!next_rpoll) next_rpoll = (int (*)(struct pollfd*, nfds_t, int))dlsym(RTLD_NEXT, "rpoll");
  }
  if (timeout <= 0) return next_rpoll(fds, nfds, timeout);
  if (timer_fd < 0) timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (nfds + 1 > with_timer_len) {
    struct pollfd* grown = realloc(with_timer, (nfds + 1) * sizeof(*grown));
    if (grown) {
      with_timer = grown;
      with_timer_len = nfds + 1;
    }
  }
  if (timer_fd < 0 || nfds + 1 > with_timer_len) return next_rpoll(fds, nfds, timeout);
  memcpy(with_timer, fds, nfds * sizeof(*fds));
  with_timer[nfds].fd = timer_fd;
  with_timer[nfds].events = POLLIN;
  with_timer[nfds].revents = 0;
  struct itimerspec at = {{0, 0}, {timeout / 1000, (long)(timeout % 1000) * 1000000L}};
  struct itimerspec off = {{0, 0}, {0, 0}};
  timerfd_settime(timer_fd, 0, &at, NULL);
  int n = next_rpoll(with_timer, nfds + 1, -1);
  int saved = errno;
  timerfd_settime(timer_fd, 0, &off, NULL);  // disarms and clears its expirations
  errno = saved;
  if (n < 0) return n;
  for (nfds_t i = 0; i < nfds; i++) fds[i].revents = with_timer[i].revents;
  return with_timer[nfds].revents ? n - 1 : n;
}
