#include "loop/event_loop.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <ctime>
#include <stdexcept>
#include <string>
#include <system_error>

namespace kagent {

double EventLoop::monotonic_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

EventLoop::EventLoop() {
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epfd_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
}

EventLoop::~EventLoop() {
  if (epfd_ >= 0) close(epfd_);
}

void EventLoop::watch_fd(int fd, uint32_t events, FdCallback cb) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  const bool known = fds_.count(fd) != 0;
  if (epoll_ctl(epfd_, known ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) != 0)
    throw std::system_error(errno, std::generic_category(), "epoll_ctl watch fd " + std::to_string(fd));
  fds_[fd] = std::move(cb);
}

void EventLoop::modify_fd(int fd, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev) != 0)
    throw std::system_error(errno, std::generic_category(), "epoll_ctl modify fd " + std::to_string(fd));
}

void EventLoop::unwatch_fd(int fd) {
  if (fds_.erase(fd) == 0) return;
  // The fd may already be closed by its owner; ENOENT/EBADF are harmless then.
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
}

uint64_t EventLoop::add_timer(double seconds, Callback cb) {
  if (!(seconds >= 0) || std::isinf(seconds)) seconds = seconds > 0 ? 1e9 : 0;
  const uint64_t id = next_timer_id_++;
  timers_.push(Timer{monotonic_now() + seconds, id});
  timer_callbacks_.emplace(id, std::move(cb));
  return id;
}

void EventLoop::cancel_timer(uint64_t id) {
  // The heap entry stays and is skipped when it comes due: cheaper than a removable heap.
  timer_callbacks_.erase(id);
}

void EventLoop::post(Callback cb) { posted_.push_back(std::move(cb)); }

double EventLoop::next_timeout(double cap) const {
  if (!posted_.empty()) return 0;
  double wait = cap;
  // Skip canceled entries at the top without mutating (const); they only make us wake early.
  if (!timers_.empty()) {
    double until = timers_.top().due - monotonic_now();
    if (until < 0) until = 0;
    if (wait < 0 || until < wait) wait = until;
  }
  return wait;
}

void EventLoop::fire_due_timers() {
  const double now = monotonic_now();
  while (!timers_.empty() && timers_.top().due <= now) {
    const uint64_t id = timers_.top().id;
    timers_.pop();
    auto it = timer_callbacks_.find(id);
    if (it == timer_callbacks_.end()) continue;
    Callback cb = std::move(it->second);
    timer_callbacks_.erase(it);
    cb();
  }
  // Drop canceled entries so has_timers() tells the truth.
  while (!timers_.empty() && timer_callbacks_.count(timers_.top().id) == 0) timers_.pop();
}

void EventLoop::run_posted() {
  while (!posted_.empty()) {
    std::vector<Callback> batch;
    batch.swap(posted_);
    for (auto& cb : batch) cb();
  }
}

void EventLoop::run_once(double max_wait) {
  // Posted callbacks run after the wait, never before it: one that completes an operation makes
  // a task ready, and the caller must get control back (to resume it) before blocking again.
  const double wait = next_timeout(max_wait);
  int timeout_ms = wait < 0 ? -1 : static_cast<int>(std::ceil(wait * 1000.0));
  epoll_event events[64];
  int n = epoll_wait(epfd_, events, 64, timeout_ms);
  if (n < 0 && errno != EINTR) throw std::system_error(errno, std::generic_category(), "epoll_wait");
  for (int i = 0; i < n; ++i) {
    auto it = fds_.find(events[i].data.fd);
    if (it == fds_.end()) continue;
    // Copy: the callback may unwatch (and so destroy) itself.
    FdCallback cb = it->second;
    cb(events[i].events);
  }
  fire_due_timers();
  run_posted();
}

}  // namespace kagent
