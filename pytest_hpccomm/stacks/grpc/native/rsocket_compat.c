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
// Everything else goes on to the next definition (librspreload's, else libc's).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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
