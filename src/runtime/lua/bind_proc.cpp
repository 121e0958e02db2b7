// native.proc: child processes for kagent.proc. A process is a userdata holding a
// shared_ptr<ChildProcess>; every process still running when the runtime stops is stopped (TERM,
// then KILL).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <vector>
#include <set>
#include <string>

#include "lua/lua_util.hpp"
#include "lua/native_modules.hpp"
#include "lua/runtime.hpp"
#include "proc/child_process.hpp"
#include "util/dotenv.hpp"

namespace kagent {
namespace {

const char* const kProcMeta = "kagent.proc";

struct ProcBox {
  std::shared_ptr<ChildProcess> p;
};

// Every process spawned by this runtime, killed at shutdown so none outlives kagent-rt.
std::set<std::weak_ptr<ChildProcess>, std::owner_less<std::weak_ptr<ChildProcess>>>& registry() {
  static std::set<std::weak_ptr<ChildProcess>, std::owner_less<std::weak_ptr<ChildProcess>>> r;
  return r;
}

ChildProcess& check_proc(lua_State* L, int idx) {
  auto* box = static_cast<ProcBox*>(luaL_checkudata(L, idx, kProcMeta));
  return *box->p;
}

void push_exit_info(lua_State* L, const ExitInfo& e) {
  lua_createtable(L, 0, 8);
  set_field(L, "code", static_cast<double>(e.code));
  if (e.signal != 0) set_field(L, "signal", static_cast<double>(e.signal));
  set_field(L, "stdout", std::string_view(e.stdout_text));
  set_field(L, "stderr", std::string_view(e.stderr_text));
  set_bool_field(L, "timed_out", e.timed_out);
  set_field(L, "elapsed", e.elapsed);
  set_field(L, "stdout_dropped", static_cast<double>(e.stdout_dropped));
  set_field(L, "stderr_dropped", static_cast<double>(e.stderr_dropped));
}

// spawn(argv, opts) -> proc | nil, err, code
int l_spawn(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  // Validate before any C++ object exists: luaL_error must not unwind live destructors.
  const size_t argc = lua_objlen(L, 1);
  if (argc == 0) return luaL_error(L, "proc.spawn: argv is empty");
  for (size_t i = 1; i <= argc; ++i) {
    lua_rawgeti(L, 1, static_cast<int>(i));
    const bool is_string = lua_type(L, -1) == LUA_TSTRING;
    lua_pop(L, 1);
    if (!is_string) return luaL_error(L, "proc.spawn: argv[%d] is not a string", static_cast<int>(i));
  }
  SpawnOptions opts;
  for (size_t i = 1; i <= argc; ++i) {
    lua_rawgeti(L, 1, static_cast<int>(i));
    opts.argv.emplace_back(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  if (lua_istable(L, 2)) {
    opts.cwd = opt_string_field(L, 2, "cwd", "");
    opts.clear_env = opt_bool_field(L, 2, "clear_env", false);
    opts.timeout = opt_number_field(L, 2, "timeout", -1);
    opts.kill_grace = opt_number_field(L, 2, "kill_grace", 2.0);
    opts.max_output = static_cast<size_t>(opt_number_field(L, 2, "max_output", 16u << 20));
    opts.max_line = static_cast<size_t>(opt_number_field(L, 2, "max_line", 1u << 20));
    lua_getfield(L, 2, "stdin");
    if (lua_type(L, -1) == LUA_TSTRING) {
      size_t n = 0;
      const char* s = lua_tolstring(L, -1, &n);
      opts.stdin_data.assign(s, n);
    } else if (lua_toboolean(L, -1)) {
      opts.keep_stdin = true;
    }
    lua_pop(L, 1);
    lua_getfield(L, 2, "env");
    if (lua_istable(L, -1)) {
      lua_pushnil(L);
      while (lua_next(L, -2) != 0) {
        if (lua_type(L, -2) == LUA_TSTRING) {
          std::string key = lua_tostring(L, -2);
          if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
            opts.env.emplace_back(key, std::nullopt);
          } else if (lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER) {
            opts.env.emplace_back(key, std::string(lua_tostring(L, -1)));
          }
        }
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
  std::string error;
  auto p = ChildProcess::spawn(Runtime::from(L).loop(), opts, error);
  if (!p) return push_failure(L, "ESPAWN", error);
  auto& reg = registry();
  for (auto it = reg.begin(); it != reg.end();) it = it->expired() ? reg.erase(it) : std::next(it);
  reg.insert(p);
  auto* box = static_cast<ProcBox*>(lua_newuserdata(L, sizeof(ProcBox)));
  new (box) ProcBox{std::move(p)};
  luaL_getmetatable(L, kProcMeta);
  lua_setmetatable(L, -2);
  return 1;
}

int l_gc(lua_State* L) {
  auto* box = static_cast<ProcBox*>(luaL_checkudata(L, 1, kProcMeta));
  // Unreachable from Lua and no operation pending on it (pending ops hold a reference): nobody
  // can wait for it any more, so it must not run on unseen.
  if (box->p && box->p.use_count() == 1) box->p->kill_now();
  box->~ProcBox();
  return 0;
}

int l_pid(lua_State* L) {
  lua_pushnumber(L, check_proc(L, 1).pid());
  return 1;
}

int l_running(lua_State* L) {
  lua_pushboolean(L, check_proc(L, 1).running() ? 1 : 0);
  return 1;
}

// try_read_line(p) -> line, cut(boolean) | nil, eof(boolean)
int l_try_read_line(lua_State* L) {
  std::string line;
  bool eof = false, cut = false;
  bool got = check_proc(L, 1).try_read_line(line, eof, &cut);
  if (got) {
    lua_pushlstring(L, line.data(), line.size());
    lua_pushboolean(L, cut ? 1 : 0);
    return 2;
  }
  lua_pushnil(L);
  lua_pushboolean(L, eof ? 1 : 0);
  return 2;
}

// read_line_start(p, timeout) -> op; completes with line, cut | nil, "CODE: msg", "CODE"
int l_read_line_start(lua_State* L) {
  auto* box = static_cast<ProcBox*>(luaL_checkudata(L, 1, kProcMeta));
  const double timeout = luaL_optnumber(L, 2, -1);
  Runtime& rt = Runtime::from(L);
  // The op holds the process: a tail call may drop the last Lua reference while it is pending.
  std::shared_ptr<ChildProcess> keep = box->p;
  const uint64_t op = rt.ops().begin([keep] { keep->cancel_line_wait(); });
  box->p->on_line(timeout, [&rt, op](std::optional<std::string> line, const char* code) {
    rt.loop().post([&rt, op, line = std::move(line), code = std::string(code ? code : "")] {
      rt.complete(op, [&](lua_State* S) {
        if (line) {
          lua_pushlstring(S, line->data(), line->size());
          lua_pushboolean(S, code == "CUT" ? 1 : 0);
          return 2;
        }
        return push_failure(S, code, code == "EOF" ? "end of output" : "no line before the timeout");
      });
    });
  });
  lua_pushnumber(L, static_cast<lua_Number>(op));
  return 1;
}

// write_start(p, data) -> op; completes with true | nil, err, code
int l_write_start(lua_State* L) {
  auto* box = static_cast<ProcBox*>(luaL_checkudata(L, 1, kProcMeta));
  size_t n = 0;
  const char* data = luaL_checklstring(L, 2, &n);
  Runtime& rt = Runtime::from(L);
  std::shared_ptr<ChildProcess> keep = box->p;
  const uint64_t op = rt.ops().begin([keep] {});
  box->p->write(std::string(data, n), [&rt, op](const char* err) {
    std::string msg = err ? err : "";
    rt.loop().post([&rt, op, msg] {
      rt.complete(op, [&](lua_State* S) {
        if (msg.empty()) {
          lua_pushboolean(S, 1);
          return 1;
        }
        return push_failure(S, "EIO", msg);
      });
    });
  });
  lua_pushnumber(L, static_cast<lua_Number>(op));
  return 1;
}

int l_close_stdin(lua_State* L) {
  check_proc(L, 1).close_stdin();
  return 0;
}

// wait_start(p, timeout) -> op; completes with the exit table. Canceling it (task killed)
// kills the process group: a killed waiter means nobody wants the result.
int l_wait_start(lua_State* L) {
  auto* box = static_cast<ProcBox*>(luaL_checkudata(L, 1, kProcMeta));
  const double timeout = luaL_optnumber(L, 2, -1);
  Runtime& rt = Runtime::from(L);
  const uint64_t op = rt.ops().begin();
  const uint64_t waiter = box->p->on_exit(timeout, [&rt, op](const ExitInfo& e) {
    rt.complete(op, [&](lua_State* S) {
      push_exit_info(S, e);
      return 1;
    });
  });
  std::shared_ptr<ChildProcess> keep = box->p;
  rt.ops().set_cancel(op, [keep, waiter] {
    keep->cancel_exit_wait(waiter);
    keep->kill(SIGTERM);
  });
  lua_pushnumber(L, static_cast<lua_Number>(op));
  return 1;
}

// take_stderr(p) -> text, dropped: the stderr buffered since the last call
int l_take_stderr(lua_State* L) {
  std::string text;
  const size_t dropped = check_proc(L, 1).take_stderr(text);
  lua_pushlstring(L, text.data(), text.size());
  lua_pushnumber(L, static_cast<lua_Number>(dropped));
  return 2;
}

// environ() -> {NAME = value}: this process's environment, .env values included
int l_environ(lua_State* L) {
  lua_newtable(L);
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    lua_pushlstring(L, *e, static_cast<size_t>(eq - *e));
    lua_pushstring(L, eq + 1);
    lua_rawset(L, -3);
  }
  return 1;
}

// env_file_overridden() -> {NAME = value}: the .env values the environment overrode
int l_env_file_overridden(lua_State* L) {
  lua_newtable(L);
  for (const auto& [k, v] : dotenv_overridden()) {
    lua_pushlstring(L, k.data(), k.size());
    lua_pushlstring(L, v.data(), v.size());
    lua_rawset(L, -3);
  }
  return 1;
}

int l_kill(lua_State* L) {
  ChildProcess& p = check_proc(L, 1);
  p.kill(static_cast<int>(luaL_optinteger(L, 2, SIGTERM)));
  return 0;
}

// At shutdown every process still running gets TERM, and KILL once it has had kShutdownGrace
// seconds: a child that cleans up on TERM (an evaluator worker removing its sandboxes' folders)
// can, and none outlives kagent-rt.
constexpr double kShutdownGrace = 1.0;

bool has_exited(pid_t pid) {
  siginfo_t info{};
  // WNOWAIT: leaves the zombie for the ChildProcess to reap
  return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == pid;
}

void stop_all() {
  std::vector<std::shared_ptr<ChildProcess>> live;
  for (const auto& w : registry()) {
    auto p = w.lock();
    if (p && p->running() && !has_exited(p->pid())) {
      ::kill(-p->pid(), SIGTERM);
      live.push_back(std::move(p));
    }
  }
  const double deadline = EventLoop::monotonic_now() + kShutdownGrace;
  while (!live.empty() && EventLoop::monotonic_now() < deadline) {
    std::erase_if(live, [](const auto& p) { return has_exited(p->pid()); });
    if (!live.empty()) usleep(10000);
  }
  for (const auto& w : registry())
    if (auto p = w.lock()) p->kill_now();  // the stragglers of every group too
}

}  // namespace

int open_native_proc(lua_State* L) {
  luaL_newmetatable(L, kProcMeta);
  lua_pushcfunction(L, l_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  Runtime::from(L).at_shutdown([] {
    stop_all();
    registry().clear();
  });
  static const luaL_Reg fns[] = {{"spawn", l_spawn},
                                 {"pid", l_pid},
                                 {"running", l_running},
                                 {"try_read_line", l_try_read_line},
                                 {"read_line_start", l_read_line_start},
                                 {"write_start", l_write_start},
                                 {"close_stdin", l_close_stdin},
                                 {"wait_start", l_wait_start},
                                 {"kill", l_kill},
                                 {"take_stderr", l_take_stderr},
                                 {"environ", l_environ},
                                 {"env_file_overridden", l_env_file_overridden},
                                 {nullptr, nullptr}};
  lua_newtable(L);
  set_functions(L, fns);
  return 1;
}

}  // namespace kagent
