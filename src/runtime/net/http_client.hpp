// HttpClient: many HTTP transfers in flight from the one loop thread, on a libcurl multi handle
// whose sockets and timer are driven by the EventLoop (curl's "multi_socket" API), so a slow
// reply costs a file descriptor, not a thread. A transfer may stream: its header block and body
// bytes are handed to a sink as they arrive instead of being collected.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loop/event_loop.hpp"

namespace kagent {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  HttpHeaders headers;
  std::string body;
  double timeout = 600;         // whole transfer, seconds
  double connect_timeout = 10;  // connection set-up, seconds
  double idle_timeout = 0;      // seconds with no byte moving either way (a stall); 0: none
  // seconds from the start until the reply's status and headers are in; 0: none. A server that
  // streams answers with its headers at once, so their absence tells a dead server quickly.
  double start_timeout = 0;
  size_t max_body = 256u << 20; // reply bytes, collected or streamed
};

struct HttpResponse {
  long status = 0;
  HttpHeaders headers;  // names lower-cased
  std::string body;
  double elapsed = 0;
  // Empty on success (any status); else ETIMEDOUT, ECONNECT, ETOOBIG (over max_body) or EHTTP
  // with a message.
  std::string error_code;
  std::string error_message;
};

// Receives a streaming transfer as it arrives. Both run inside curl's callbacks: they must not
// start or cancel transfers (post to the loop for that). The final `Done` still runs, with an
// empty body.
struct HttpSink {
  std::function<void(long status, const HttpHeaders& headers)> on_head;  // once, headers complete
  std::function<void(std::string_view bytes)> on_data;                   // body bytes, in order
};

class HttpClient {
 public:
  using Done = std::function<void(HttpResponse&&)>;
  struct Stats {
    uint64_t started = 0, completed = 0, failed = 0, canceled = 0;
    size_t in_flight = 0;
  };

  explicit HttpClient(EventLoop& loop);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts a transfer; `done` runs from a loop callback when it ends (never from inside start).
  // Returns an id for cancel. A request curl refuses outright still completes through `done`.
  uint64_t start(HttpRequest req, Done done, HttpSink sink = {});
  // Aborts a transfer; its `done` never runs. Unknown ids are ignored.
  void cancel(uint64_t id);
  const Stats& stats() const { return stats_; }

  // one easy handle and what it collects (http_transfer.hpp; public for curl's C callbacks)
  struct Transfer;

 private:
  static int on_socket(CURL* easy, curl_socket_t s, int what, void* self, void* socketp);
  static int on_timer(CURLM* multi, long timeout_ms, void* self);
  void socket_action(curl_socket_t s, int flags);
  void collect_done();
  void finish(Transfer* t, CURLcode rc);
  void arm_idle_timer(Transfer* t, double seconds);
  void arm_start_timer(Transfer* t, double seconds);
  Transfer* find(uint64_t id);  // a transfer in flight, or nullptr
  // Ends a transfer that curl has not finished (idle timeout, refused by the multi handle).
  void fail(uint64_t id, const std::string& code, const std::string& message);

  EventLoop& loop_;
  CURLM* multi_ = nullptr;
  uint64_t timer_ = 0;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Transfer>> transfers_;
  Stats stats_;
};

// Strips the query and credentials from a URL so it can appear in messages and logs.
std::string redact_url(const std::string& url);

}  // namespace kagent
