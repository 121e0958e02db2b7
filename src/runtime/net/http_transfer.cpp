#include "net/http_transfer.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kagent {
namespace {

size_t write_body(char* data, size_t size, size_t n, void* userp) {
  auto* t = static_cast<HttpClient::Transfer*>(userp);
  const size_t len = size * n;
  t->last_activity = EventLoop::monotonic_now();
  if (t->received + len > t->max_body) {
    t->too_big = true;
    return 0;  // makes curl fail the transfer with CURLE_WRITE_ERROR
  }
  t->received += len;
  if (t->sink.on_data) {
    t->sink.on_data(std::string_view(data, len));
  } else {
    t->resp.body.append(data, len);
  }
  return len;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

size_t write_header(char* data, size_t size, size_t n, void* userp) {
  auto* t = static_cast<HttpClient::Transfer*>(userp);
  const size_t len = size * n;
  t->last_activity = EventLoop::monotonic_now();
  std::string line(data, len);
  // A new status line (after a 100 Continue or a redirect) starts a new header set.
  if (line.rfind("HTTP/", 0) == 0) {
    t->resp.headers.clear();
    const auto sp = line.find(' ');
    t->head_status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return len;
  }
  // The blank line ends a header block; an interim (1xx) block is followed by the real one.
  if (trim(line).empty()) {
    if (t->head_status >= 200 && !t->head_done) {
      t->head_done = true;
      if (t->start_timer != 0) t->loop->cancel_timer(t->start_timer), t->start_timer = 0;
      if (t->sink.on_head) t->sink.on_head(t->head_status, t->resp.headers);
    }
    return len;
  }
  auto colon = line.find(':');
  if (colon == std::string::npos) return len;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  t->resp.headers.emplace_back(trim(name), trim(line.substr(colon + 1)));
  return len;
}

// Upload progress counts as activity, so a large request body on a slow link is not a stall.
int on_progress(void* userp, curl_off_t, curl_off_t, curl_off_t, curl_off_t sent) {
  auto* t = static_cast<HttpClient::Transfer*>(userp);
  if (sent != t->sent_seen) {
    t->sent_seen = sent;
    t->last_activity = EventLoop::monotonic_now();
  }
  return 0;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

bool connected(CURL* easy) {
  curl_off_t us = 0;
  curl_easy_getinfo(easy, CURLINFO_PRETRANSFER_TIME_T, &us);
  return us > 0;
}

}  // namespace

HttpClient::Transfer::Transfer(uint64_t transfer_id, EventLoop& event_loop, const HttpRequest& req,
                               Done on_done, HttpSink stream_sink)
    : id(transfer_id), easy(curl_easy_init()), loop(&event_loop), sink(std::move(stream_sink)),
      max_body(req.max_body),
      timeout(req.timeout), connect_timeout(req.connect_timeout), idle_timeout(req.idle_timeout),
      start_timeout(req.start_timeout), t0(EventLoop::monotonic_now()), last_activity(t0),
      safe_url(redact_url(req.url)), done(std::move(on_done)) {
  CURL* e = easy;
  curl_easy_setopt(e, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PRIVATE, this);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, this);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, write_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, this);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(std::ceil(req.timeout * 1000.0)));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::ceil(req.connect_timeout * 1000.0)));
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");  // any encoding curl can decode
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  if (req.idle_timeout > 0) {
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, this);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
  }
  if (req.method == "HEAD") {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (req.method != "GET" || !req.body.empty()) {
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, req.body.c_str());
    if (req.method != "POST") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  for (const auto& [name, value] : req.headers)
    header_list = curl_slist_append(header_list, (name + ": " + value).c_str());
  // Without this curl waits up to a second for "100 Continue" before sending a large body.
  header_list = curl_slist_append(header_list, "Expect:");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, header_list);
}

HttpClient::Transfer::~Transfer() {
  if (idle_timer != 0) loop->cancel_timer(idle_timer);
  if (start_timer != 0) loop->cancel_timer(start_timer);
  if (header_list != nullptr) curl_slist_free_all(header_list);
  if (easy != nullptr) curl_easy_cleanup(easy);
}

void HttpClient::Transfer::set_failure(CURLcode rc) {
  HttpResponse& r = resp;
  const std::string what = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      r.error_code = "ETIMEDOUT";
      break;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
      r.error_code = "ECONNECT";
      break;
    default:
      r.error_code = "EHTTP";
  }
  std::string message = what;
  if (too_big) {
    // its own code: a reply too large is no passing fault, so callers do not ask again
    r.error_code = "ETOOBIG";
    message = "reply larger than max_body (" + std::to_string(max_body) + " bytes)";
  } else if (rc == CURLE_OPERATION_TIMEDOUT) {
    message = timeout_message();
  }
  r.error_message = message + " (" + safe_url + ")";
}

std::string HttpClient::Transfer::stall_message() const {
  const std::string idle = seconds(idle_timeout);
  if (!connected(easy) && received == 0 && !head_done)
    return "no connection after " + idle + " s (idle timeout)";
  if (!head_done)
    return "the server accepted the request but sent no reply for " + idle + " s (idle timeout)";
  return "the reply stalled: no data for " + idle + " s after " + std::to_string(received) +
         " body bytes (idle timeout)";
}

std::string HttpClient::Transfer::start_timeout_message() const {
  const std::string s = seconds(start_timeout);
  if (!connected(easy)) return "no connection after " + s + " s (start timeout)";
  return "the server accepted the request but sent no reply for " + s + " s (start timeout)";
}

std::string HttpClient::Transfer::timeout_message() const {
  if (!connected(easy))
    return "could not connect within " + seconds(std::min(connect_timeout, timeout)) +
           " s (connect timeout)";
  if (!head_done) return "no reply within the " + seconds(timeout) + " s timeout";
  return "the reply was not complete within the " + seconds(timeout) + " s timeout (" +
         std::to_string(received) + " body bytes received)";
}

}  // namespace kagent
