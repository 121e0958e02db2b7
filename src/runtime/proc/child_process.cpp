#include "proc/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

extern char** environ;

namespace kagent {
namespace {

bool make_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC) == 0; }

void set_nonblock(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

std::vector<std::string> build_env(const SpawnOptions& opts) {
  std::map<std::string, std::string> vars;
  if (!opts.clear_env) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const char* eq = std::strchr(*e, '=');
      if (eq != nullptr) vars[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
    }
  }
  for (const auto& [k, v] : opts.env) {
    if (v) vars[k] = *v; else vars.erase(k);
  }
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (const auto& [k, v] : vars) out.push_back(k + "=" + v);
  return out;
}

}  // namespace

std::shared_ptr<ChildProcess> ChildProcess::spawn(EventLoop& loop, const SpawnOptions& opts,
                                                  std::string& error) {
  if (opts.argv.empty()) {
    error = "empty argv";
    return nullptr;
  }
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (!make_pipe(in) || !make_pipe(out) || !make_pipe(err)) {
    error = std::string("pipe: ") + std::strerror(errno);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]})
      if (fd >= 0) close(fd);
    return nullptr;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  if (!opts.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, opts.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group; default signal mask and dispositions (the runtime blocks some signals).
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE, SIGHUP}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> argv;
  for (const auto& a : opts.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = build_env(opts);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = -1;
  // posix_spawnp looks argv[0] up in the *parent's* PATH; that is what users expect.
  int rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    error = "cannot run '" + opts.argv[0] + "': " + std::strerror(rc);
    close(in[1]);
    close(out[0]);
    close(err[0]);
    return nullptr;
  }

  auto p = std::shared_ptr<ChildProcess>(new ChildProcess(loop));
  p->pid_ = pid;
  p->start_ = EventLoop::monotonic_now();
  p->kill_grace_ = opts.kill_grace;
  p->max_output_ = opts.max_output;
  p->max_line_ = std::max<size_t>(1, std::min(opts.max_line, opts.max_output));
  p->in_fd_ = in[1];
  p->out_fd_ = out[0];
  p->err_fd_ = err[0];
  set_nonblock(p->in_fd_);
  set_nonblock(p->out_fd_);
  set_nonblock(p->err_fd_);
  std::weak_ptr<ChildProcess> weak = p;
  loop.watch_fd(p->out_fd_, EPOLLIN, [weak](uint32_t) {
    if (auto s = weak.lock()) s->on_readable(s->out_fd_, s->out_buf_, s->out_dropped_, s->out_eof_);
  });
  loop.watch_fd(p->err_fd_, EPOLLIN, [weak](uint32_t) {
    if (auto s = weak.lock()) s->on_readable(s->err_fd_, s->err_buf_, s->err_dropped_, s->err_eof_);
  });
  p->pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // no glibc wrapper needed
  if (p->pidfd_ >= 0) {
    loop.watch_fd(p->pidfd_, EPOLLIN, [weak](uint32_t) {
      if (auto s = weak.lock()) s->on_pidfd();
    });
  } else {
    // Kernels without pidfd: poll for the exit.
    std::function<void()> poll;
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [weak, tick] {
      auto s = weak.lock();
      if (!s || s->exited_) return;
      s->on_pidfd();
      if (!s->exited_) s->poll_timer_ = s->loop_.add_timer(0.02, *tick);
    };
    p->poll_timer_ = loop.add_timer(0.02, *tick);
  }
  if (!opts.keep_stdin) {
    if (!opts.stdin_data.empty()) {
      p->write(opts.stdin_data, [weak](const char*) {
        if (auto s = weak.lock()) s->close_stdin();
      });
    } else {
      p->close_stdin();
    }
  }
  if (opts.timeout >= 0) {
    p->deadline_timer_ = loop.add_timer(opts.timeout, [weak] {
      if (auto s = weak.lock()) {
        s->deadline_timer_ = 0;
        if (!s->exited_) s->escalate(true);
      }
    });
  }
  return p;
}

ChildProcess::~ChildProcess() {
  if (!exited_ && pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);  // SIGKILL'd: returns at once; avoids a zombie
  }
  for (uint64_t t : {deadline_timer_, kill_timer_, drain_timer_, poll_timer_, line_timer_})
    if (t) loop_.cancel_timer(t);
  for (auto& w : exit_waiters_)
    if (w.timer) loop_.cancel_timer(w.timer);
  close_fd(in_fd_);
  close_fd(out_fd_);
  close_fd(err_fd_);
  close_fd(pidfd_);
}

void ChildProcess::close_fd(int& fd) {
  if (fd < 0) return;
  loop_.unwatch_fd(fd);
  close(fd);
  fd = -1;
}

void ChildProcess::on_readable(int fd, std::string& buf, size_t& dropped, bool& eof) {
  auto self = shared_from_this();  // callbacks below may drop the last outside reference
  char chunk[65536];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n > 0) {
      if (fd == out_fd_) {
        append_stdout(chunk, static_cast<size_t>(n));
        continue;
      }
      size_t room = buf.size() < max_output_ ? max_output_ - buf.size() : 0;
      size_t keep = std::min(room, static_cast<size_t>(n));
      buf.append(chunk, keep);
      dropped += static_cast<size_t>(n) - keep;
      continue;
    }
    if (n == 0) {
      eof = true;
      if (fd == out_fd_) close_fd(out_fd_); else close_fd(err_fd_);
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    eof = true;
    if (fd == out_fd_) close_fd(out_fd_); else close_fd(err_fd_);
    break;
  }
  deliver_line_if_ready();
  finish_if_done();
}

void ChildProcess::append_stdout(const char* p, size_t n) {
  while (n > 0) {
    if (out_skipping_) {  // the rest of a cut line: dropped up to and with its newline
      const void* nl = std::memchr(p, '\n', n);
      size_t upto = nl ? static_cast<size_t>(static_cast<const char*>(nl) - p) + 1 : n;
      out_dropped_ += nl ? upto - 1 : upto;
      out_skipping_ = nl == nullptr;
      p += upto;
      n -= upto;
      continue;
    }
    const void* nl = std::memchr(p, '\n', n);
    const size_t body = nl ? static_cast<size_t>(static_cast<const char*>(nl) - p) : n;
    const size_t pending = out_buf_.size() - out_consumed_;
    const size_t room = pending < max_output_ ? max_output_ - pending : 0;
    const size_t partial = out_buf_.size() - line_start_;
    if (line_mode_ && partial + body > max_line_) {  // past max_line: its head goes out now
      const size_t keep = std::min(max_line_ - partial, room);
      out_buf_.append(p, keep);
      out_dropped_ += max_line_ - partial - keep;  // the reader is behind: part of the head too
      out_buf_.push_back('\n');
      cuts_.push_back(out_base_ + out_buf_.size() - 1);
      line_start_ = out_buf_.size();
      out_skipping_ = true;
      p += max_line_ - partial;
      n -= max_line_ - partial;
      continue;
    }
    const size_t want = nl ? body + 1 : body;
    const size_t take = std::min(want, room);
    out_buf_.append(p, take);
    out_dropped_ += want - take;  // the reader is behind by max_output: dropped and counted
    if (nl && take == want) line_start_ = out_buf_.size();
    p += want;
    n -= want;
  }
}

void ChildProcess::cut_long_partial() {
  if (out_buf_.size() - line_start_ <= max_line_) return;
  out_dropped_ += out_buf_.size() - line_start_ - max_line_;
  out_buf_.resize(line_start_ + max_line_);
  out_buf_.push_back('\n');
  cuts_.push_back(out_base_ + out_buf_.size() - 1);
  line_start_ = out_buf_.size();
  out_skipping_ = !out_eof_;
}

bool ChildProcess::try_read_line(std::string& line, bool& eof, bool* cut) {
  eof = false;
  if (cut) *cut = false;
  if (!line_mode_) {  // the first read by lines: from now on a line is held to max_line
    line_mode_ = true;
    cut_long_partial();
  }
  // a newline is only known to be there before line_start_: nothing past it is scanned again
  size_t nl = out_consumed_ < line_start_ ? out_buf_.find('\n', out_consumed_) : std::string::npos;
  if (nl != std::string::npos) {
    line.assign(out_buf_, out_consumed_, nl - out_consumed_);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out_consumed_ = nl + 1;
    if (!cuts_.empty() && cuts_.front() == out_base_ + nl) {
      cuts_.erase(cuts_.begin());
      if (cut) *cut = true;
    }
    // Compact once the consumed prefix is large, so a long-lived worker's buffer stays small.
    if (out_consumed_ > (1u << 20)) {
      out_buf_.erase(0, out_consumed_);
      line_start_ -= out_consumed_;
      out_base_ += out_consumed_;
      out_consumed_ = 0;
    }
    return true;
  }
  if (out_eof_) {
    if (out_consumed_ < out_buf_.size()) {
      line.assign(out_buf_, out_consumed_, std::string::npos);
      out_consumed_ = out_buf_.size();
      return true;
    }
    eof = true;
  }
  return false;
}

size_t ChildProcess::take_stderr(std::string& out) {
  out.swap(err_buf_);
  err_buf_.clear();
  const size_t dropped = err_dropped_;
  err_dropped_ = 0;
  return dropped;
}

void ChildProcess::deliver_line_if_ready() {
  if (!line_cb_) return;
  std::string line;
  bool eof = false;
  bool cut = false;
  if (try_read_line(line, eof, &cut)) {
    auto cb = std::move(line_cb_);
    line_cb_ = nullptr;
    if (line_timer_) loop_.cancel_timer(line_timer_), line_timer_ = 0;
    cb(std::move(line), cut ? "CUT" : nullptr);
  } else if (eof) {
    auto cb = std::move(line_cb_);
    line_cb_ = nullptr;
    if (line_timer_) loop_.cancel_timer(line_timer_), line_timer_ = 0;
    cb(std::nullopt, "EOF");
  }
}

void ChildProcess::on_line(double timeout, LineCallback cb) {
  line_cb_ = std::move(cb);
  if (timeout >= 0) {
    std::weak_ptr<ChildProcess> weak = shared_from_this();
    line_timer_ = loop_.add_timer(timeout, [weak] {
      auto s = weak.lock();
      if (!s || !s->line_cb_) return;
      s->line_timer_ = 0;
      auto cb = std::move(s->line_cb_);
      s->line_cb_ = nullptr;
      cb(std::nullopt, "ETIMEDOUT");
    });
  }
  deliver_line_if_ready();
}

void ChildProcess::cancel_line_wait() {
  line_cb_ = nullptr;
  if (line_timer_) loop_.cancel_timer(line_timer_), line_timer_ = 0;
}

void ChildProcess::write(std::string data, WriteCallback cb) {
  if (in_fd_ < 0) {
    cb("stdin is closed");
    return;
  }
  in_pending_ += data;
  write_cb_ = std::move(cb);
  std::weak_ptr<ChildProcess> weak = shared_from_this();
  loop_.watch_fd(in_fd_, EPOLLOUT, [weak](uint32_t) {
    if (auto s = weak.lock()) s->on_writable();
  });
}

void ChildProcess::on_writable() {
  while (!in_pending_.empty()) {
    ssize_t n = ::write(in_fd_, in_pending_.data(), in_pending_.size());
    if (n > 0) {
      in_pending_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // wait for EPOLLOUT again
    // EPIPE: the child closed its stdin or died.
    std::string msg = std::string("write to stdin failed: ") + std::strerror(errno);
    in_pending_.clear();
    loop_.unwatch_fd(in_fd_);
    if (auto cb = std::move(write_cb_)) {
      write_cb_ = nullptr;
      cb(msg.c_str());
    }
    return;
  }
  loop_.unwatch_fd(in_fd_);
  if (auto cb = std::move(write_cb_)) {
    write_cb_ = nullptr;
    cb(nullptr);
  }
}

void ChildProcess::close_stdin() {
  close_fd(in_fd_);
  in_pending_.clear();
}

void ChildProcess::on_pidfd() {
  if (exited_) return;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return;
  auto self = shared_from_this();
  exited_ = true;
  wait_status_ = status;
  result_.elapsed = EventLoop::monotonic_now() - start_;
  close_fd(pidfd_);
  if (deadline_timer_) loop_.cancel_timer(deadline_timer_), deadline_timer_ = 0;
  // Whatever the process group still holds open keeps our pipes alive; give the output a
  // moment to drain, then stop waiting for it.
  if (!(out_eof_ && err_eof_)) {
    std::weak_ptr<ChildProcess> weak = self;
    drain_timer_ = loop_.add_timer(0.5, [weak] {
      auto s = weak.lock();
      if (!s) return;
      s->drain_timer_ = 0;
      if (s->out_fd_ >= 0) s->on_readable(s->out_fd_, s->out_buf_, s->out_dropped_, s->out_eof_);
      if (s->err_fd_ >= 0) s->on_readable(s->err_fd_, s->err_buf_, s->err_dropped_, s->err_eof_);
      s->out_eof_ = s->err_eof_ = true;
      s->close_fd(s->out_fd_);
      s->close_fd(s->err_fd_);
      s->deliver_line_if_ready();
      s->finish_if_done();
    });
  }
  finish_if_done();
}

void ChildProcess::finish_if_done() {
  if (finished_ || !exited_ || !out_eof_ || !err_eof_) return;
  finished_ = true;
  if (kill_timer_) loop_.cancel_timer(kill_timer_), kill_timer_ = 0;
  if (drain_timer_) loop_.cancel_timer(drain_timer_), drain_timer_ = 0;
  if (WIFEXITED(wait_status_)) {
    result_.code = WEXITSTATUS(wait_status_);
  } else if (WIFSIGNALED(wait_status_)) {
    result_.signal = WTERMSIG(wait_status_);
    result_.code = 128 + result_.signal;
  }
  result_.timed_out = timed_out_;
  if (timed_out_) result_.code = 124;
  result_.stdout_text = out_buf_.substr(out_consumed_);
  result_.stderr_text = err_buf_;
  result_.stdout_dropped = out_dropped_;
  result_.stderr_dropped = err_dropped_;
  auto waiters = std::move(exit_waiters_);
  exit_waiters_.clear();
  for (auto& w : waiters) {
    if (w.timer) loop_.cancel_timer(w.timer);
    w.cb(result_);
  }
}

uint64_t ChildProcess::on_exit(double timeout, ExitCallback cb) {
  const uint64_t id = next_waiter_++;
  if (finished_) {
    // Never complete synchronously: the caller has not parked yet.
    std::weak_ptr<ChildProcess> weak = shared_from_this();
    exit_waiters_.push_back({id, 0, std::move(cb)});
    loop_.post([weak, id] {
      auto s = weak.lock();
      if (!s) return;
      for (auto it = s->exit_waiters_.begin(); it != s->exit_waiters_.end(); ++it) {
        if (it->id == id) {
          auto c = std::move(it->cb);
          s->exit_waiters_.erase(it);
          c(s->result_);
          return;
        }
      }
    });
    return id;
  }
  uint64_t timer = 0;
  if (timeout >= 0) {
    std::weak_ptr<ChildProcess> weak = shared_from_this();
    timer = loop_.add_timer(timeout, [weak] {
      if (auto s = weak.lock(); s && !s->exited_) s->escalate(true);
    });
  }
  exit_waiters_.push_back({id, timer, std::move(cb)});
  return id;
}

void ChildProcess::cancel_exit_wait(uint64_t id) {
  for (auto it = exit_waiters_.begin(); it != exit_waiters_.end(); ++it) {
    if (it->id == id) {
      if (it->timer) loop_.cancel_timer(it->timer);
      exit_waiters_.erase(it);
      return;
    }
  }
}

void ChildProcess::escalate(bool timed_out) {
  if (timed_out) timed_out_ = true;
  ::kill(-pid_, SIGTERM);
  if (kill_timer_) return;
  std::weak_ptr<ChildProcess> weak = shared_from_this();
  kill_timer_ = loop_.add_timer(kill_grace_, [weak] {
    auto s = weak.lock();
    if (!s) return;
    s->kill_timer_ = 0;
    // The leader may be gone while others in its group still run: always signal the group.
    ::kill(-s->pid_, SIGKILL);
  });
}

void ChildProcess::kill(int sig) {
  if (exited_) {
    ::kill(-pid_, sig);  // stragglers in the group
    return;
  }
  if (sig == SIGTERM) {
    escalate(false);
  } else {
    ::kill(-pid_, sig);
  }
}

void ChildProcess::kill_now() {
  if (pid_ > 0) ::kill(-pid_, SIGKILL);
}

}  // namespace kagent
