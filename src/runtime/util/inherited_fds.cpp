#include "util/inherited_fds.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

namespace kagent {

int mark_inherited_fds_cloexec() {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return 0;
#endif
  // Older kernels: the open descriptors are the entries of /proc/self/fd (collected first, as
  // the listing's own descriptor is one of them).
  std::vector<int> fds;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long fd = std::strtol(e->d_name, &end, 10);
      if (end != e->d_name && *end == '\0' && fd > 2 && fd != dirfd(d)) fds.push_back(static_cast<int>(fd));
    }
    closedir(d);
  }
  int failed = 0;
  for (int fd : fds) {
    const int flags = fcntl(fd, F_GETFD);
    if (flags >= 0 && fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0) ++failed;
  }
  return failed;
}

}  // namespace kagent
