// ChildProcess (child_process.hpp): starting the program (posix_spawn into its own process group,
// its environment), its exit (pidfd, or polling where there is none) and killing its group. The
// pipes are in child_process_io.cpp.
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
  // The child starts with stdin, stdout and stderr (its own pipes) only: nothing else we hold, or
  // inherited without close-on-exec, reaches it (glibc >= 2.34 does it with close_range in the
  // child; older, main's close-on-exec marks at start are what keeps inherited ones out).
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
  if (!opts.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, opts.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group; default signal mask and dispositions (the runtime blocks some signals).
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE, SIGHUP, SIGWINCH}) sigaddset(&defaults, s);
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
