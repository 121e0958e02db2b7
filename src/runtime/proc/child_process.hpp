// ChildProcess: one spawned program with non-blocking pipes, watched by the EventLoop.
// The program runs in its own process group so that a kill reaches everything it started.
// child_process.cpp starts it and ends it (exit, kill); child_process_io.cpp moves its pipes.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loop/event_loop.hpp"

namespace kagent {

struct SpawnOptions {
  std::vector<std::string> argv;
  std::string cwd;
  std::vector<std::pair<std::string, std::optional<std::string>>> env;  // nullopt: unset
  bool clear_env = false;
  bool keep_stdin = false;    // stdin stays open for write()
  std::string stdin_data;     // written then closed (when !keep_stdin)
  double timeout = -1;        // whole-life deadline; <0: none
  double kill_grace = 2.0;    // TERM -> KILL
  size_t max_output = 16u << 20;  // per stream: bytes buffered and not yet taken
  size_t max_line = 1u << 20;     // per stdout line, once stdout is read by lines (<= max_output)
};

struct ExitInfo {
  int code = -1;
  int signal = 0;
  bool timed_out = false;
  double elapsed = 0;
  std::string stdout_text;
  std::string stderr_text;
  size_t stdout_dropped = 0;
  size_t stderr_dropped = 0;
};

class ChildProcess : public std::enable_shared_from_this<ChildProcess> {
 public:
  using LineCallback = std::function<void(std::optional<std::string> line, const char* error_code)>;
  using ExitCallback = std::function<void(const ExitInfo&)>;
  using WriteCallback = std::function<void(const char* error)>;

  // Returns nullptr and sets `error` when the program cannot be started.
  static std::shared_ptr<ChildProcess> spawn(EventLoop& loop, const SpawnOptions& opts, std::string& error);
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  bool running() const { return !exited_; }

  // Takes the next complete stdout line if one is buffered (or the last partial one at EOF).
  // Returns false when none is ready yet; `eof` is set when none will ever come. Once stdout is
  // read by lines (the first call), a line longer than max_line is handed over as its first
  // max_line bytes as soon as it gets there (`cut` set), and the rest of it is dropped (counted
  // in stdout_dropped) up to its newline: neither the buffer nor the time a line costs grows
  // with what a child writes without a newline. Output that is only waited for is kept whole
  // up to max_output.
  bool try_read_line(std::string& line, bool& eof, bool* cut = nullptr);
  // Calls `cb` once with the next line (code "CUT" for a cut one, else nullptr), nullopt+"EOF"
  // at end of output, or nullopt+"ETIMEDOUT".
  void on_line(double timeout, LineCallback cb);
  void cancel_line_wait();

  // Moves out the stderr buffered so far (for a long-lived child whose stderr is consumed as it
  // comes) and returns how many bytes were dropped since the last call (over max_output).
  size_t take_stderr(std::string& out);

  // Queues `data` for stdin; `cb` runs once it is all written (nullptr) or failed (message).
  void write(std::string data, WriteCallback cb);
  void close_stdin();

  // Calls `cb` once the process has exited and its output is drained. A timeout (<0: none)
  // kills the process group (TERM, then KILL after the grace period).
  uint64_t on_exit(double timeout, ExitCallback cb);
  void cancel_exit_wait(uint64_t id);

  // Signals the whole process group; TERM is followed by KILL after the grace period.
  void kill(int sig);
  // Kills at once with SIGKILL (shutdown, garbage collection).
  void kill_now();

 private:
  explicit ChildProcess(EventLoop& loop) : loop_(loop) {}
  void on_readable(int fd, std::string& buf, size_t& dropped, bool& eof);
  void append_stdout(const char* p, size_t n);
  void cut_long_partial();
  void on_writable();
  void on_pidfd();
  void after_exit_or_eof();
  void deliver_line_if_ready();
  LineCallback take_line_cb();  // the pending line callback, cleared with its timer
  void finish_if_done();
  void escalate(bool timed_out);
  void close_fd(int& fd);

  EventLoop& loop_;
  pid_t pid_ = -1;
  int pidfd_ = -1, in_fd_ = -1, out_fd_ = -1, err_fd_ = -1;
  double start_ = 0, kill_grace_ = 2.0;
  size_t max_output_ = 16u << 20, max_line_ = 1u << 20;
  std::string out_buf_, err_buf_, in_pending_;
  size_t out_consumed_ = 0, out_dropped_ = 0, err_dropped_ = 0;
  // Splitting stdout in one pass: out_buf_[line_start_..] is the line still arriving (no newline
  // in it), so a line is looked for only where one is known to end. out_skipping_: dropping the
  // rest of a cut line up to its newline. cuts_: where (counted from the stream's first byte,
  // out_base_ being out_buf_[0]'s) the newline ending each cut line not yet taken was put.
  size_t line_start_ = 0, out_base_ = 0;
  bool out_skipping_ = false, line_mode_ = false;
  std::vector<size_t> cuts_;
  bool out_eof_ = false, err_eof_ = false, exited_ = false, timed_out_ = false, finished_ = false;
  int wait_status_ = 0;
  uint64_t deadline_timer_ = 0, kill_timer_ = 0, drain_timer_ = 0, poll_timer_ = 0;
  LineCallback line_cb_;
  uint64_t line_timer_ = 0;
  WriteCallback write_cb_;
  struct ExitWaiter {
    uint64_t id;
    uint64_t timer;
    ExitCallback cb;
  };
  std::vector<ExitWaiter> exit_waiters_;
  uint64_t next_waiter_ = 1;
  ExitInfo result_;
};

}  // namespace kagent
