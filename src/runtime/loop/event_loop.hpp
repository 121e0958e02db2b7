// EventLoop: the single-threaded epoll loop that every native operation runs on.
// Timers live in a min-heap; fds are watched edge-free (level-triggered) so a callback
// that reads only part of the data is simply called again.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>
#include <vector>

namespace kagent {

class EventLoop {
 public:
  using FdCallback = std::function<void(uint32_t events)>;
  using Callback = std::function<void()>;

  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Watch `fd` for `events` (EPOLLIN/EPOLLOUT bits). Re-watching an fd replaces its callback.
  void watch_fd(int fd, uint32_t events, FdCallback cb);
  void modify_fd(int fd, uint32_t events);
  void unwatch_fd(int fd);
  bool watching(int fd) const { return fds_.count(fd) != 0; }

  // One-shot timer after `seconds`; returns an id for cancel_timer (0 is never used).
  uint64_t add_timer(double seconds, Callback cb);
  void cancel_timer(uint64_t id);

  // Runs `cb` at the next iteration, outside whatever callback is running now.
  void post(Callback cb);

  // Waits at most `max_wait` seconds (<0: until something happens) and dispatches what is ready.
  void run_once(double max_wait);

  // Seconds until the next timer (or -1 when none), capped at `cap` when cap >= 0.
  double next_timeout(double cap) const;
  bool has_timers() const { return !timers_.empty(); }

  static double monotonic_now();

 private:
  struct Timer {
    double due;
    uint64_t id;
    bool operator>(const Timer& o) const { return due > o.due || (due == o.due && id > o.id); }
  };
  void fire_due_timers();
  void run_posted();

  int epfd_ = -1;
  std::unordered_map<int, FdCallback> fds_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  std::unordered_map<uint64_t, Callback> timer_callbacks_;
  uint64_t next_timer_id_ = 1;
  std::vector<Callback> posted_;
};

}  // namespace kagent
