// Runtime: owns the Lua state, the event loop and the table of pending operations, and runs a
// script as the main task. Bindings reach it through Runtime::from(L).
#pragma once

#include <lua.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loop/event_loop.hpp"
#include "lua/op_table.hpp"

namespace kagent {

struct RuntimeOptions {
  std::string script;                 // path of the main script
  std::vector<std::string> args;      // kagent.args
  std::string root;                   // kagent.root
};

class Runtime {
 public:
  // Pushes the results of a completed operation; returns how many values it pushed.
  using Pusher = std::function<int(lua_State*)>;

  explicit Runtime(RuntimeOptions opts);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  static Runtime& from(lua_State* L);

  lua_State* lua() { return L_; }
  EventLoop& loop() { return loop_; }
  OpTable& ops() { return ops_; }
  const RuntimeOptions& options() const { return opts_; }

  // Delivers the results of op `id` to the task parked on it. Ignored when the op is no longer
  // pending (it was canceled). Never resumes a task directly: the scheduler does that.
  void complete(uint64_t id, const Pusher& push);

  // Runs the main script to completion. Returns the process exit code.
  int run_main();

  // Asks the main loop to stop after the current iteration (signals).
  void request_stop(int signo) { stop_signal_ = signo; }

  // A terminal resize (SIGWINCH, read on the loop's signalfd) is counted, and every op parked in
  // fs.wait_resize completes with the count. wait_resize(op) parks one; the op's cancel takes
  // it back. resizes(): the count so far, so a waiter that starts late misses none.
  uint64_t resizes() const { return resizes_; }
  void wait_resize(uint64_t op) { resize_waiters_.push_back(op); }
  void unwait_resize(uint64_t op) { std::erase(resize_waiters_, op); }
  void notify_resize();

  // Hooks run at shutdown (after tasks are killed), e.g. to close databases.
  void at_shutdown(std::function<void()> fn) { shutdown_hooks_.push_back(std::move(fn)); }

 private:
  void open_libraries();
  int call_scheduler(const char* fn, int nargs, int nresults);

  RuntimeOptions opts_;
  lua_State* L_ = nullptr;
  EventLoop loop_;
  OpTable ops_;
  int task_module_ref_ = LUA_NOREF;
  int stop_signal_ = 0;
  std::vector<uint64_t> resize_waiters_;
  uint64_t resizes_ = 0;
  std::vector<std::function<void()>> shutdown_hooks_;
};

}  // namespace kagent
