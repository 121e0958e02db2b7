#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "loop/event_loop.hpp"
#include "proc/child_process.hpp"

using namespace kagent;

namespace {
ExitInfo run_to_exit(EventLoop& loop, ChildProcess& p, double timeout) {
  std::optional<ExitInfo> info;
  p.on_exit(timeout, [&](const ExitInfo& e) { info = e; });
  const double t0 = EventLoop::monotonic_now();
  while (!info && EventLoop::monotonic_now() - t0 < 10) loop.run_once(0.05);
  REQUIRE(info.has_value());
  return *info;
}
}  // namespace

TEST_CASE("a child's output and exit code are captured", "[proc]") {
  EventLoop loop;
  SpawnOptions o;
  o.argv = {"sh", "-c", "echo hi; echo err >&2; exit 7"};
  std::string error;
  auto p = ChildProcess::spawn(loop, o, error);
  REQUIRE(p);
  ExitInfo e = run_to_exit(loop, *p, -1);
  REQUIRE(e.code == 7);
  REQUIRE(e.stdout_text == "hi\n");
  REQUIRE(e.stderr_text == "err\n");
}

TEST_CASE("a timeout sends TERM, then KILL to a child that ignores it", "[proc]") {
  EventLoop loop;
  SpawnOptions o;
  o.argv = {"sh", "-c", "trap '' TERM; sleep 20"};
  o.kill_grace = 0.2;
  std::string error;
  auto p = ChildProcess::spawn(loop, o, error);
  REQUIRE(p);
  ExitInfo e = run_to_exit(loop, *p, 0.1);
  REQUIRE(e.timed_out);
  REQUIRE(e.code == 124);
  REQUIRE(e.signal == 9);
}

TEST_CASE("spawning a missing program fails with a message", "[proc]") {
  EventLoop loop;
  SpawnOptions o;
  o.argv = {"/no/such/program"};
  std::string error;
  REQUIRE_FALSE(ChildProcess::spawn(loop, o, error));
  REQUIRE(error.find("/no/such/program") != std::string::npos);
}

TEST_CASE("a child gets stdin, stdout and stderr only, not what the parent holds", "[proc]") {
  // opened without O_CLOEXEC, as a descriptor inherited from kagent-rt's own parent would be
  // where nothing marked it (issue #53: a .env on fd 7)
  const int held = open("/dev/null", O_RDONLY);
  REQUIRE(held > 2);
  EventLoop loop;
  SpawnOptions o;
  o.argv = {"sh", "-c", "ls /proc/$$/fd"};
  std::string error;
  auto p = ChildProcess::spawn(loop, o, error);
  REQUIRE(p);
  ExitInfo e = run_to_exit(loop, *p, -1);
  close(held);
  REQUIRE(e.code == 0);
  REQUIRE(e.stdout_text == "0\n1\n2\n");
}
