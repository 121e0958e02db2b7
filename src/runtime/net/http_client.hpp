// HttpClient: many HTTP transfers in flight from the one loop thread, on a libcurl multi handle
// whose sockets and timer are driven by the EventLoop (curl's "multi_socket" API), so a slow
// reply costs a file descriptor, not a thread.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loop/event_loop.hpp"

namespace kagent {

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  double timeout = 600;         // whole transfer, seconds
  double connect_timeout = 10;  // connection set-up, seconds
  size_t max_body = 256u << 20;
};

struct HttpResponse {
  long status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  double elapsed = 0;
  // Empty on success (any status); else ETIMEDOUT, ECONNECT or EHTTP with a message.
  std::string error_code;
  std::string error_message;
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
  uint64_t start(HttpRequest req, Done done);
  // Aborts a transfer; its `done` never runs. Unknown ids are ignored.
  void cancel(uint64_t id);
  const Stats& stats() const { return stats_; }

  struct Transfer;  // one easy handle and what it collects (public for curl's C callbacks)

 private:
  static int on_socket(CURL* easy, curl_socket_t s, int what, void* self, void* socketp);
  static int on_timer(CURLM* multi, long timeout_ms, void* self);
  void socket_action(curl_socket_t s, int flags);
  void collect_done();
  void finish(Transfer* t, CURLcode rc);

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
