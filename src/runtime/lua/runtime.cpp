#include "lua/runtime.hpp"

#include <spdlog/spdlog.h>
#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <filesystem>
#include <string>

#include "lua/lua_util.hpp"
#include "lua/native_modules.hpp"
#include "lua/stack_guard.hpp"
#include "util/version.hpp"

namespace kagent {
namespace {

// Address used as the registry key for the Runtime pointer.
const char kRuntimeKey = 0;

// package.preload loader for an embedded module; upvalue 1 is its index in kEmbeddedLua.
int load_embedded(lua_State* L) {
  const auto idx = static_cast<unsigned long>(lua_tointeger(L, lua_upvalueindex(1)));
  const EmbeddedLua& m = kEmbeddedLua[idx];
  // A developer can point KAGENT_LUA_LIB_DIR at src/runtime/lua_lib to edit without rebuilding.
  std::string chunkname = std::string("@") + m.path;
  int rc;
  if (const char* dir = std::getenv("KAGENT_LUA_LIB_DIR"); dir != nullptr && *dir != '\0') {
    std::string rel = m.path;
    const std::string marker = "lua_lib/";
    auto pos = rel.find(marker);
    if (pos != std::string::npos) rel = rel.substr(pos + marker.size());
    std::string file = std::string(dir) + "/" + rel;
    rc = luaL_loadfile(L, file.c_str());
  } else {
    rc = luaL_loadbuffer(L, m.source, m.size, chunkname.c_str());
  }
  if (rc != 0) return lua_error(L);
  lua_pushstring(L, m.module);
  lua_call(L, 1, 1);
  return 1;
}

// Seeds math.random once per process from the kernel's entropy, so that processes started
// together (workers, several clients of one LLM server) do not draw the same numbers and retry in
// lockstep. KAGENT_SEED=N fixes the seed for a reproducible run.
void seed_random(lua_State* L) {
  uint64_t seed = 0;
  const char* fixed = std::getenv("KAGENT_SEED");
  if (fixed != nullptr && *fixed != '\0') {
    seed = std::strtoull(fixed, nullptr, 10);
  } else if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof seed)) {
    seed = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           (static_cast<uint64_t>(getpid()) << 32);
  }
  lua_getglobal(L, "math");
  lua_getfield(L, -1, "randomseed");
  // A double holds 53 bits exactly; LuaJIT mixes all of them into its generator's state.
  lua_pushnumber(L, static_cast<lua_Number>(seed >> 11));
  lua_call(L, 1, 0);
  lua_pop(L, 1);
}

int traceback_handler(lua_State* L) {
  const char* msg = lua_tostring(L, 1);
  luaL_traceback(L, L, msg ? msg : "(error object is not a string)", 1);
  return 1;
}

}  // namespace

Runtime::Runtime(RuntimeOptions opts) : opts_(std::move(opts)) {
  L_ = luaL_newstate();
  if (L_ == nullptr) throw std::runtime_error("cannot create the Lua state (out of memory)");
  lua_pushlightuserdata(L_, const_cast<char*>(&kRuntimeKey));
  lua_pushlightuserdata(L_, this);
  lua_rawset(L_, LUA_REGISTRYINDEX);
  luaL_openlibs(L_);
  seed_random(L_);
  open_libraries();
}

Runtime::~Runtime() {
  ops_.cancel_all();
  for (auto it = shutdown_hooks_.rbegin(); it != shutdown_hooks_.rend(); ++it) (*it)();
  shutdown_hooks_.clear();
  if (L_ != nullptr) lua_close(L_);
}

Runtime& Runtime::from(lua_State* L) {
  lua_pushlightuserdata(L, const_cast<char*>(&kRuntimeKey));
  lua_rawget(L, LUA_REGISTRYINDEX);
  auto* rt = static_cast<Runtime*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  return *rt;
}

void Runtime::open_libraries() {
  StackGuard guard(L_);
  // package.preload[module] for each embedded Lua file.
  lua_getglobal(L_, "package");
  lua_getfield(L_, -1, "preload");
  for (unsigned long i = 0; i < kEmbeddedLuaCount; ++i) {
    lua_pushinteger(L_, static_cast<lua_Integer>(i));
    lua_pushcclosure(L_, load_embedded, 1);
    lua_setfield(L_, -2, kEmbeddedLua[i].module);
  }
  lua_pop(L_, 2);

  // The internal table of native functions, reachable as require("kagent.native").
  lua_newtable(L_);
  const struct {
    const char* name;
    int (*open)(lua_State*);
  } natives[] = {{"ops", open_native_ops},   {"time", open_native_time}, {"fs", open_native_fs},
                 {"json", open_native_json}, {"log", open_native_log},   {"proc", open_native_proc},
                 {"http", open_native_http}, {"mem", open_native_mem},   {"yaml", open_native_yaml}};
  for (const auto& n : natives) {
    n.open(L_);
    lua_setfield(L_, -2, n.name);
  }
  // Facts about this run, read by kagent/init.lua.
  lua_newtable(L_);
  set_field(L_, "version", std::string_view(kVersion));
  set_field(L_, "script", std::string_view(opts_.script));
  set_field(L_, "root", std::string_view(opts_.root));
  // The binary's path, read here: children cannot read it from our /proc (we are not dumpable).
  std::error_code exe_error;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", exe_error).string();
  if (!exe_error) set_field(L_, "exe", std::string_view(exe));
  lua_newtable(L_);
  for (size_t i = 0; i < opts_.args.size(); ++i) {
    lua_pushlstring(L_, opts_.args[i].data(), opts_.args[i].size());
    lua_rawseti(L_, -2, static_cast<int>(i + 1));
  }
  lua_setfield(L_, -2, "args");
  lua_setfield(L_, -2, "info");
  lua_getglobal(L_, "package");
  lua_getfield(L_, -1, "loaded");
  lua_pushvalue(L_, -3);
  lua_setfield(L_, -2, "kagent.native");
  lua_pop(L_, 3);

  // The global `kagent` and the scheduler.
  lua_getglobal(L_, "require");
  lua_pushstring(L_, "kagent");
  if (lua_pcall(L_, 1, 1, 0) != 0) {
    std::string err = lua_tostring(L_, -1) ? lua_tostring(L_, -1) : "?";
    lua_pop(L_, 1);
    throw std::runtime_error("cannot load the kagent library: " + err);
  }
  lua_setglobal(L_, "kagent");
  lua_getglobal(L_, "require");
  lua_pushstring(L_, "kagent.task");
  if (lua_pcall(L_, 1, 1, 0) != 0) {
    std::string err = lua_tostring(L_, -1) ? lua_tostring(L_, -1) : "?";
    lua_pop(L_, 1);
    throw std::runtime_error("cannot load kagent.task: " + err);
  }
  task_module_ref_ = luaL_ref(L_, LUA_REGISTRYINDEX);
}

// Calls task.<fn>(args...) with the arguments already pushed; leaves `nresults` on the stack.
int Runtime::call_scheduler(const char* fn, int nargs, int nresults) {
  lua_pushcfunction(L_, traceback_handler);
  lua_rawgeti(L_, LUA_REGISTRYINDEX, task_module_ref_);
  lua_getfield(L_, -1, fn);
  lua_remove(L_, -2);
  // Move handler and function below the arguments.
  const int base = lua_gettop(L_) - 2 - nargs + 1;
  lua_insert(L_, base);
  lua_insert(L_, base);
  int rc = lua_pcall(L_, nargs, nresults, base);
  lua_remove(L_, base);
  return rc;
}

void Runtime::notify_resize() {
  ++resizes_;
  std::vector<uint64_t> waiters;
  waiters.swap(resize_waiters_);
  const auto count = static_cast<lua_Number>(resizes_);
  for (uint64_t op : waiters) {
    complete(op, [count](lua_State* S) {
      lua_pushnumber(S, count);
      return 1;
    });
  }
}

void Runtime::complete(uint64_t id, const Pusher& push) {
  if (!ops_.finish(id)) return;
  StackGuard guard(L_);
  lua_pushnumber(L_, static_cast<lua_Number>(id));
  int n = push(L_);
  if (call_scheduler("_complete", 1 + n, 0) != 0) {
    spdlog::error("scheduler failed to accept a completion: {}", lua_tostring(L_, -1));
    lua_pop(L_, 1);
  }
}

int Runtime::run_main() {
  lua_pushlstring(L_, opts_.script.data(), opts_.script.size());
  if (call_scheduler("_start_main", 1, 2) != 0) {
    std::fprintf(stderr, "kagent-rt: %s\n", lua_tostring(L_, -1));
    lua_pop(L_, 1);
    return 1;
  }
  if (!lua_toboolean(L_, -2)) {
    // The script did not load (syntax error, missing file): the message names file:line.
    std::fprintf(stderr, "kagent-rt: %s\n", lua_tostring(L_, -1));
    lua_pop(L_, 2);
    return 1;
  }
  lua_pop(L_, 2);

  int exit_code = 0;
  for (;;) {
    if (stop_signal_ != 0) {
      std::fprintf(stderr, "kagent-rt: interrupted by signal %d; stopping tasks\n", stop_signal_);
      exit_code = 128 + stop_signal_;
      break;
    }
    // _run_ready() -> state ("running"|"done"|"error"|"deadlock"), value (exit code or message)
    if (call_scheduler("_run_ready", 0, 2) != 0) {
      std::fprintf(stderr, "kagent-rt: scheduler error: %s\n", lua_tostring(L_, -1));
      lua_pop(L_, 1);
      exit_code = 1;
      break;
    }
    std::string state = lua_tostring(L_, -2) ? lua_tostring(L_, -2) : "";
    if (state == "done") {
      exit_code = static_cast<int>(lua_tointeger(L_, -1));
      lua_pop(L_, 2);
      break;
    }
    if (state == "error") {
      std::fprintf(stderr, "kagent-rt: %s\n", lua_tostring(L_, -1));
      lua_pop(L_, 2);
      exit_code = 1;
      break;
    }
    const bool has_ready = lua_toboolean(L_, -1) != 0;
    lua_pop(L_, 2);
    if (!has_ready && ops_.size() == 0 && !loop_.has_timers()) {
      std::fprintf(stderr,
                   "kagent-rt: deadlock: every task is waiting and nothing can wake one "
                   "(a task.wait, a semaphore never released or a condition never notified)\n");
      exit_code = 1;
      break;
    }
    loop_.run_once(has_ready ? 0.0 : -1.0);
  }
  // Kill what is left, then let their cancel functions run.
  if (call_scheduler("_shutdown", 0, 0) != 0) lua_pop(L_, 1);
  ops_.cancel_all();
  return exit_code;
}

}  // namespace kagent
