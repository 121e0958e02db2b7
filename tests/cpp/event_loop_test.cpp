#include <catch2/catch.hpp>
#include <sys/epoll.h>
#include <unistd.h>

#include <vector>

#include "loop/event_loop.hpp"

using kagent::EventLoop;

TEST_CASE("timers fire in due order and can be canceled", "[loop]") {
  EventLoop loop;
  std::vector<int> fired;
  loop.add_timer(0.03, [&] { fired.push_back(3); });
  loop.add_timer(0.01, [&] { fired.push_back(1); });
  uint64_t id = loop.add_timer(0.02, [&] { fired.push_back(2); });
  loop.cancel_timer(id);
  const double t0 = EventLoop::monotonic_now();
  while (fired.size() < 2 && EventLoop::monotonic_now() - t0 < 2) loop.run_once(0.1);
  REQUIRE(fired == std::vector<int>{1, 3});
  REQUIRE_FALSE(loop.has_timers());
}

TEST_CASE("fd callbacks run when data arrives and stop after unwatch", "[loop]") {
  EventLoop loop;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  int calls = 0;
  loop.watch_fd(fds[0], EPOLLIN, [&](uint32_t) {
    char buf[16];
    REQUIRE(read(fds[0], buf, sizeof buf) > 0);
    ++calls;
  });
  REQUIRE(write(fds[1], "x", 1) == 1);
  loop.run_once(1.0);
  REQUIRE(calls == 1);
  loop.unwatch_fd(fds[0]);
  REQUIRE(write(fds[1], "y", 1) == 1);
  loop.run_once(0.01);
  REQUIRE(calls == 1);
  close(fds[0]);
  close(fds[1]);
}

TEST_CASE("posted callbacks run on the next iteration, not inside the caller", "[loop]") {
  EventLoop loop;
  int order = 0, posted_at = -1;
  loop.post([&] { posted_at = order; });
  order = 1;
  REQUIRE(posted_at == -1);
  loop.run_once(0);
  REQUIRE(posted_at == 1);
}

TEST_CASE("run_once does not block after a posted callback ran", "[loop]") {
  // A posted completion makes a task ready; the caller must get control back to resume it.
  EventLoop loop;
  bool ran = false;
  loop.post([&] { ran = true; });
  loop.add_timer(2.0, [] {});  // bounds the test if run_once wrongly blocks
  const double t0 = EventLoop::monotonic_now();
  loop.run_once(-1);
  REQUIRE(ran);
  REQUIRE(EventLoop::monotonic_now() - t0 < 1.0);
}
