// native.fs: files and folders. Writes are atomic (temporary file + fsync + rename) so a crash
// never leaves a half-written trace or kernel file. lock() takes an advisory lock (flock) that
// the kernel drops with the process, however it ends.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "lua/lua_util.hpp"
#include "lua/native_modules.hpp"
#include "lua/runtime.hpp"

namespace kagent {
namespace {

namespace stdfs = std::filesystem;

int fail_errno(lua_State* L, const char* what, const char* path, int err) {
  std::string msg = std::string(what) + " " + path + ": " + std::strerror(err);
  return push_failure(L, "EIO", msg);
}

int l_read(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  // O_NONBLOCK: opening a named pipe waits for a writer, and reading one for its data, with the
  // main task and every signal handled by it stopped meanwhile; such a path is refused instead
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail_errno(L, "cannot read", path, errno);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return fail_errno(L, "cannot read", path, err);
  }
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
    close(fd);
    return push_failure(L, "EIO", std::string("cannot read ") + path + ": a named pipe or socket, not a file");
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      luaL_pushresult(&b);
      lua_pop(L, 1);
      return fail_errno(L, "cannot read", path, err);
    }
    if (n == 0) break;
    luaL_addlstring(&b, buf, static_cast<size_t>(n));
  }
  close(fd);
  luaL_pushresult(&b);
  return 1;
}

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

int l_write(lua_State* L) {
  size_t n = 0;
  const char* path = luaL_checkstring(L, 1);
  const char* data = luaL_checklstring(L, 2, &n);
  std::string tmp = std::string(path) + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail_errno(L, "cannot write", path, errno);
  bool ok = write_all(fd, data, n) && fsync(fd) == 0;
  int err = errno;
  close(fd);
  if (!ok || rename(tmp.c_str(), path) != 0) {
    if (ok) err = errno;
    unlink(tmp.c_str());
    return fail_errno(L, "cannot write", path, err);
  }
  lua_pushboolean(L, 1);
  return 1;
}

int l_append(lua_State* L) {
  size_t n = 0;
  const char* path = luaL_checkstring(L, 1);
  const char* data = luaL_checklstring(L, 2, &n);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return fail_errno(L, "cannot append to", path, errno);
  bool ok = write_all(fd, data, n);
  int err = errno;
  close(fd);
  if (!ok) return fail_errno(L, "cannot append to", path, err);
  lua_pushboolean(L, 1);
  return 1;
}

int l_mkdir_p(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  std::error_code ec;
  stdfs::create_directories(path, ec);
  // is_directory's own error (a parent this user cannot enter) must not throw: the first error
  // is the one to report
  std::error_code probe;
  if (ec && !stdfs::is_directory(path, probe)) return fail_errno(L, "cannot create", path, ec.value());
  lua_pushboolean(L, 1);
  return 1;
}

int l_list(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  std::vector<std::string> names;
  std::error_code ec;
  for (stdfs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) return fail_errno(L, "cannot list", path, ec.value());
  std::sort(names.begin(), names.end());
  lua_createtable(L, static_cast<int>(names.size()), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    lua_pushlstring(L, names[i].data(), names[i].size());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

int l_exists(lua_State* L) {
  struct stat st {};
  lua_pushboolean(L, stat(luaL_checkstring(L, 1), &st) == 0 ? 1 : 0);
  return 1;
}

int l_is_dir(lua_State* L) {
  struct stat st {};
  lua_pushboolean(L, stat(luaL_checkstring(L, 1), &st) == 0 && S_ISDIR(st.st_mode) ? 1 : 0);
  return 1;
}

int l_remove(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  if (::remove(path) != 0) return fail_errno(L, "cannot remove", path, errno);
  lua_pushboolean(L, 1);
  return 1;
}

int l_abspath(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  std::error_code ec;
  std::string abs = stdfs::weakly_canonical(stdfs::absolute(path, ec), ec).string();
  if (ec) abs = stdfs::absolute(path).lexically_normal().string();
  lua_pushlstring(L, abs.data(), abs.size());
  return 1;
}

int l_isatty(lua_State* L) {
  lua_pushboolean(L, isatty(static_cast<int>(luaL_checkinteger(L, 1))) ? 1 : 0);
  return 1;
}

// term_columns(fd) -> the terminal's width in columns (TIOCGWINSZ), or nil when fd is no terminal
// or the terminal reports no size (0, as a pty nobody sized does). Read afresh at each call, so
// a caller that asks at every redraw follows a resize (SIGWINCH) without handling the signal.
int l_term_columns(lua_State* L) {
  winsize ws{};
  if (ioctl(static_cast<int>(luaL_checkinteger(L, 1)), TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushinteger(L, ws.ws_col);
  return 1;
}

// resizes() -> the number of SIGWINCHs (terminal resizes) the runtime's loop has read so far.
int l_resizes(lua_State* L) {
  lua_pushnumber(L, static_cast<lua_Number>(Runtime::from(L).resizes()));
  return 1;
}

// resize_start() -> op. Completes with the new resizes() count at the next SIGWINCH; the runtime
// reads the signal on its loop (app/main.cpp) and completes every such op.
int l_resize_start(lua_State* L) {
  Runtime& rt = Runtime::from(L);
  const uint64_t op = rt.ops().begin();
  rt.wait_resize(op);
  rt.ops().set_cancel(op, [&rt, op] { rt.unwait_resize(op); });
  lua_pushnumber(L, static_cast<lua_Number>(op));
  return 1;
}

// lock(path) -> handle | nil, "CODE: message", "CODE"[, holder pid]. The file is opened without
// truncation (a refused caller must not erase the holder's pid), locked with flock(LOCK_EX |
// LOCK_NB), and only then rewritten with this process's pid. O_CLOEXEC: a child would otherwise
// keep the lock alive after this process died.
constexpr const char* kLockMeta = "kagent.fs.lock";

struct LockBox {
  int fd;
};

int l_lock(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  auto* box = static_cast<LockBox*>(lua_newuserdata(L, sizeof(LockBox)));
  box->fd = -1;
  luaL_getmetatable(L, kLockMeta);
  lua_setmetatable(L, -2);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return fail_errno(L, "cannot open the lock file", path, errno);
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    int err = errno;
    if (err != EWOULDBLOCK) {
      close(fd);
      return fail_errno(L, "cannot lock", path, err);
    }
    char buf[32] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    long pid = n > 0 ? std::strtol(buf, nullptr, 10) : 0;
    std::string msg = std::string(path) + " is locked by " +
                      (pid > 0 ? "process " + std::to_string(pid) : std::string("another process"));
    push_failure(L, "EBUSY", msg);
    if (pid > 0) lua_pushnumber(L, static_cast<lua_Number>(pid));
    else lua_pushnil(L);
    return 4;
  }
  box->fd = fd;
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    int err = errno;
    close(fd);
    box->fd = -1;
    return fail_errno(L, "cannot write the pid into", path, err);
  }
  return 1;  // the userdata
}

int l_unlock(lua_State* L) {
  auto* box = static_cast<LockBox*>(luaL_checkudata(L, 1, kLockMeta));
  if (box->fd >= 0) close(box->fd);  // closing the last descriptor drops the flock
  box->fd = -1;
  lua_pushboolean(L, 1);
  return 1;
}

int l_locked(lua_State* L) {
  lua_pushboolean(L, static_cast<LockBox*>(luaL_checkudata(L, 1, kLockMeta))->fd >= 0 ? 1 : 0);
  return 1;
}

}  // namespace

int open_native_fs(lua_State* L) {
  if (luaL_newmetatable(L, kLockMeta) != 0) {
    lua_pushcfunction(L, l_unlock);
    lua_setfield(L, -2, "__gc");
    lua_newtable(L);
    lua_pushcfunction(L, l_unlock);
    lua_setfield(L, -2, "unlock");
    lua_pushcfunction(L, l_locked);
    lua_setfield(L, -2, "locked");
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
  static const luaL_Reg fns[] = {{"read", l_read},     {"write", l_write},   {"append", l_append},
                                 {"mkdir_p", l_mkdir_p}, {"list", l_list},     {"exists", l_exists},
                                 {"is_dir", l_is_dir}, {"remove", l_remove}, {"abspath", l_abspath}, {"isatty", l_isatty},
                                 {"term_columns", l_term_columns},
                                 {"resize_start", l_resize_start},
                                 {"resizes", l_resizes},
                                 {"lock", l_lock},
                                 {nullptr, nullptr}};
  lua_newtable(L);
  set_functions(L, fns);
  return 1;
}

}  // namespace kagent
