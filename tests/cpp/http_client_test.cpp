// HttpClient on the EventLoop, against the fake LLM server (tests/fixtures/fake_llm, a fake
// provider speaking real HTTP on loopback).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "loop/event_loop.hpp"
#include "net/http_client.hpp"
#include "net/sha256.hpp"

using kagent::EventLoop;
using kagent::HttpClient;
using kagent::HttpRequest;
using kagent::HttpResponse;
using kagent::HttpSink;

namespace {

// The fake server as a child process; killed when the test ends.
class FakeServer {
 public:
  // `script`: the fake's JSON script (tests/fixtures/fake_llm/README.md), written to a temp file.
  explicit FakeServer(double latency, const std::string& script = "") {
    if (!script.empty()) {
      char path[] = "/tmp/kagent-fake-script-XXXXXX";
      const int fd = mkstemp(path);
      REQUIRE(fd >= 0);
      REQUIRE(write(fd, script.data(), script.size()) == static_cast<ssize_t>(script.size()));
      close(fd);
      script_path_ = path;
    }
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      const std::string script = std::string(KAGENT_SOURCE_DIR) + "/tests/fixtures/fake_llm/server.py";
      const std::string lat = std::to_string(latency);
      const char* py = std::getenv("KAGENT_TEST_PYTHON") ? std::getenv("KAGENT_TEST_PYTHON") : "python3";
      if (script_path_.empty())
        execlp(py, py, script.c_str(), "--port", "0", "--latency", lat.c_str(), (char*)nullptr);
      else
        execlp(py, py, script.c_str(), "--port", "0", "--latency", lat.c_str(), "--script",
               script_path_.c_str(), (char*)nullptr);
      _exit(127);
    }
    close(fds[1]);
    FILE* out = fdopen(fds[0], "r");
    char line[256] = {0};
    REQUIRE(std::fgets(line, sizeof line, out) != nullptr);
    std::fclose(out);
    const std::string s(line);
    port_ = std::stoi(s.substr(s.find(':') + 1));
  }
  ~FakeServer() {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    if (!script_path_.empty()) unlink(script_path_.c_str());
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string script_path_;
};

HttpRequest openai_call(const FakeServer& srv, const std::string& text) {
  HttpRequest r;
  r.method = "POST";
  r.url = srv.url("/v1/chat/completions");
  r.headers = {{"Authorization", "Bearer test-key"}, {"Content-Type", "application/json"}};
  r.body = R"({"model":"m","messages":[{"role":"user","content":")" + text + R"("}]})";
  return r;
}

void run_until(EventLoop& loop, const std::function<bool()>& done, double limit) {
  const double t0 = EventLoop::monotonic_now();
  while (!done() && EventLoop::monotonic_now() - t0 < limit) loop.run_once(0.05);
}

}  // namespace

TEST_CASE("sha256 matches the FIPS 180-4 examples", "[net]") {
  CHECK(kagent::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(kagent::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(kagent::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(kagent::sha256_hex(std::string(1000, 'a')) ==
        "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
  // 119 bytes: the padding spills into a second block.
  CHECK(kagent::sha256_hex(std::string(119, 'x')) == "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c");
}

TEST_CASE("redact_url drops the query and credentials", "[net]") {
  CHECK(kagent::redact_url("https://u:secret@host/v1/x?key=abc") == "https://host/v1/x");
  CHECK(kagent::redact_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1");
}

TEST_CASE("many transfers are in flight at once from one thread", "[net]") {
  FakeServer srv(0.5);
  EventLoop loop;
  HttpClient client(loop);
  const int n = 100;
  std::vector<HttpResponse> got(n);
  int done = 0;
  const double t0 = EventLoop::monotonic_now();
  for (int i = 0; i < n; ++i) {
    client.start(openai_call(srv, "call " + std::to_string(i)), [&, i](HttpResponse&& r) {
      got[i] = std::move(r);
      ++done;
    });
  }
  CHECK(client.stats().in_flight == static_cast<size_t>(n));
  run_until(loop, [&] { return done == n; }, 20);
  const double wall = EventLoop::monotonic_now() - t0;
  REQUIRE(done == n);
  // Serial would take n * 0.5 s; concurrent takes about one latency.
  CHECK(wall < 3.0);
  for (const auto& r : got) {
    CHECK(r.error_code.empty());
    CHECK(r.status == 200);
    CHECK(r.body.find("chat.completion") != std::string::npos);
  }
  bool has_ct = false;
  for (const auto& [k, v] : got[0].headers) has_ct |= (k == "content-type" && v == "application/json");
  CHECK(has_ct);
  CHECK(client.stats().completed == static_cast<uint64_t>(n));
  CHECK(client.stats().in_flight == 0);
}

TEST_CASE("a 4xx reply is a result, not a failure", "[net]") {
  FakeServer srv(0);
  EventLoop loop;
  HttpClient client(loop);
  HttpRequest r = openai_call(srv, "x");
  r.headers = {{"Authorization", "Bearer bad"}};
  HttpResponse got;
  bool done = false;
  client.start(r, [&](HttpResponse&& resp) { got = std::move(resp); done = true; });
  run_until(loop, [&] { return done; }, 10);
  REQUIRE(done);
  CHECK(got.error_code.empty());
  CHECK(got.status == 401);
}

TEST_CASE("timeouts, refused connections and cancellation", "[net]") {
  FakeServer srv(2.0);
  EventLoop loop;
  HttpClient client(loop);

  HttpRequest slow = openai_call(srv, "slow");
  slow.timeout = 0.3;
  HttpResponse timed;
  bool t_done = false;
  client.start(slow, [&](HttpResponse&& r) { timed = std::move(r); t_done = true; });

  HttpRequest refused;
  refused.url = "http://127.0.0.1:1/";  // nothing listens on port 1
  HttpResponse ref;
  bool r_done = false;
  client.start(refused, [&](HttpResponse&& r) { ref = std::move(r); r_done = true; });

  bool c_done = false;
  const uint64_t id = client.start(openai_call(srv, "to cancel"), [&](HttpResponse&&) { c_done = true; });
  client.cancel(id);

  const double t0 = EventLoop::monotonic_now();
  run_until(loop, [&] { return t_done && r_done; }, 10);
  CHECK(EventLoop::monotonic_now() - t0 < 1.5);
  REQUIRE(t_done);
  CHECK(timed.error_code == "ETIMEDOUT");
  REQUIRE(r_done);
  CHECK(ref.error_code == "ECONNECT");
  run_until(loop, [] { return false; }, 0.3);
  CHECK_FALSE(c_done);
  CHECK(client.stats().canceled == 1);
}

TEST_CASE("an idle timeout ends a stalled transfer, before or during the reply", "[net]") {
  FakeServer srv(0, R"({"replies": [{"match": "hang", "fault": "hang"},
                                    {"match": "stall", "fault": "stall", "text": "abcdefghijklmnop"},
                                    {"match": "slow", "chunk_delay": 0.2, "text": "abcdefghijklmnop"}]})");
  EventLoop loop;
  HttpClient client(loop);
  auto streamed = [&](const std::string& text) {
    HttpRequest r = openai_call(srv, text);
    r.body.insert(1, R"("stream":true,)");
    r.idle_timeout = 0.3;
    r.timeout = 10;
    return r;
  };
  HttpResponse hang, stall, slow;
  int done = 0;
  const double t0 = EventLoop::monotonic_now();
  double hang_at = 0;
  client.start(streamed("hang"), [&](HttpResponse&& r) {
    hang = std::move(r);
    hang_at = EventLoop::monotonic_now() - t0;
    ++done;
  });
  client.start(streamed("stall"), [&](HttpResponse&& r) { stall = std::move(r); ++done; });
  client.start(streamed("slow"), [&](HttpResponse&& r) { slow = std::move(r); ++done; });
  run_until(loop, [&] { return done == 3; }, 10);
  REQUIRE(done == 3);
  CHECK(hang.error_code == "ETIMEDOUT");
  CHECK(hang.error_message.find("sent no reply for 0.3 s (idle timeout)") != std::string::npos);
  CHECK(hang_at < 1.0);
  CHECK(stall.error_code == "ETIMEDOUT");
  CHECK(stall.error_message.find("the reply stalled") != std::string::npos);
  // Chunks 0.2 s apart keep a 0.3 s idle timeout from firing: a slow reply is not a stall.
  CHECK(slow.error_code.empty());
  CHECK(slow.body.find("[DONE]") != std::string::npos);
  CHECK(client.stats().failed == 2);
}

TEST_CASE("a sink receives the head, then the body bytes as they arrive", "[net]") {
  FakeServer srv(0, R"({"replies": [{"chunk_delay": 0.05, "text": "abcdefghijklmnopqrst"}]})");
  EventLoop loop;
  HttpClient client(loop);
  HttpRequest r = openai_call(srv, "x");
  r.body.insert(1, R"("stream":true,)");
  std::vector<std::string> events;
  std::string streamed;
  long head_status = 0;
  HttpResponse final_resp;
  bool done = false;
  HttpSink sink;
  sink.on_head = [&](long status, const kagent::HttpHeaders& headers) {
    head_status = status;
    bool sse = false;
    for (const auto& [k, v] : headers) sse |= (k == "content-type" && v == "text/event-stream");
    CHECK(sse);
    events.push_back("head");
  };
  sink.on_data = [&](std::string_view bytes) {
    streamed.append(bytes);
    if (events.back() != "data") events.push_back("data");
  };
  client.start(r, [&](HttpResponse&& resp) {
    final_resp = std::move(resp);
    events.push_back("done");
    done = true;
  }, sink);
  run_until(loop, [&] { return done; }, 10);
  REQUIRE(done);
  CHECK(events == std::vector<std::string>{"head", "data", "done"});
  CHECK(head_status == 200);
  CHECK(final_resp.status == 200);
  CHECK(final_resp.body.empty());  // streamed bytes went to the sink only
  CHECK(streamed.find("data: [DONE]") != std::string::npos);
}
