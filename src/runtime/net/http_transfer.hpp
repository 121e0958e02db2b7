// HttpClient::Transfer: one transfer of HttpClient (http_client.hpp): its curl easy handle set up
// from the request, what curl's callbacks collect into it (headers, body or stream, activity
// times), and what its failures and timeouts say. HttpClient drives it; nothing else sees it.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <string>

#include "net/http_client.hpp"

namespace kagent {

struct HttpClient::Transfer {
  // Sets up the easy handle for `req` (curl's callbacks write into this transfer).
  Transfer(uint64_t id, EventLoop& loop, const HttpRequest& req, Done done, HttpSink sink);
  ~Transfer();
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  // Fills resp.error_code and resp.error_message for a transfer curl ended with `rc` (not OK).
  void set_failure(CURLcode rc);
  // What stalled, for an idle timeout: the connection, the reply's start, or the reply mid-way.
  std::string stall_message() const;
  // What the start timeout found: no connection, or no reply on one.
  std::string start_timeout_message() const;

  uint64_t id = 0;
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  EventLoop* loop = nullptr;
  HttpResponse resp;
  HttpSink sink;
  size_t max_body = 0;
  size_t received = 0;  // body bytes, collected or streamed
  bool too_big = false;
  bool head_done = false;  // the final header block has ended
  long head_status = 0;    // from the last status line
  double timeout = 0, connect_timeout = 0, idle_timeout = 0, start_timeout = 0;
  double t0 = 0;
  double last_activity = 0;  // monotonic time a byte last moved
  curl_off_t sent_seen = 0;
  uint64_t idle_timer = 0;
  uint64_t start_timer = 0;  // cancelled when the headers are in
  std::string safe_url;
  Done done;
  char errbuf[CURL_ERROR_SIZE] = {0};

 private:
  // What ran out, for curl's own timeouts: connecting, or the whole transfer.
  std::string timeout_message() const;
};

}  // namespace kagent
