#include "net/http_client.hpp"

#include <sys/epoll.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>

namespace kagent {

struct HttpClient::Transfer {
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

  ~Transfer() {
    if (idle_timer != 0) loop->cancel_timer(idle_timer);
    if (start_timer != 0) loop->cancel_timer(start_timer);
    if (header_list != nullptr) curl_slist_free_all(header_list);
    if (easy != nullptr) curl_easy_cleanup(easy);
  }
};

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

// What stalled, for an idle timeout: the connection, the reply's start, or the reply mid-way.
std::string stall_message(HttpClient::Transfer& t) {
  const std::string idle = seconds(t.idle_timeout);
  if (!connected(t.easy) && t.received == 0 && !t.head_done)
    return "no connection after " + idle + " s (idle timeout)";
  if (!t.head_done)
    return "the server accepted the request but sent no reply for " + idle + " s (idle timeout)";
  return "the reply stalled: no data for " + idle + " s after " + std::to_string(t.received) +
         " body bytes (idle timeout)";
}

// What ran out, for curl's own timeouts: connecting, or the whole transfer.
std::string timeout_message(HttpClient::Transfer& t) {
  if (!connected(t.easy))
    return "could not connect within " + seconds(std::min(t.connect_timeout, t.timeout)) +
           " s (connect timeout)";
  if (!t.head_done) return "no reply within the " + seconds(t.timeout) + " s timeout";
  return "the reply was not complete within the " + seconds(t.timeout) + " s timeout (" +
         std::to_string(t.received) + " body bytes received)";
}

std::once_flag curl_init_once;

}  // namespace

std::string redact_url(const std::string& url) {
  std::string out = url.substr(0, url.find_first_of("?#"));
  auto scheme = out.find("://");
  if (scheme != std::string::npos) {
    auto host_start = scheme + 3;
    auto at = out.find('@', host_start);
    auto slash = out.find('/', host_start);
    if (at != std::string::npos && (slash == std::string::npos || at < slash))
      out.erase(host_start, at - host_start + 1);
  }
  return out;
}

HttpClient::HttpClient(EventLoop& loop) : loop_(loop) {
  std::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  multi_ = curl_multi_init();
  curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &HttpClient::on_socket);
  curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &HttpClient::on_timer);
  curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
}

HttpClient::~HttpClient() {
  for (auto& [id, t] : transfers_) curl_multi_remove_handle(multi_, t->easy);
  transfers_.clear();
  if (timer_ != 0) loop_.cancel_timer(timer_);
  curl_multi_cleanup(multi_);
}

int HttpClient::on_socket(CURL*, curl_socket_t s, int what, void* self, void*) {
  auto* c = static_cast<HttpClient*>(self);
  if (what == CURL_POLL_REMOVE) {
    c->loop_.unwatch_fd(s);
    return 0;
  }
  uint32_t events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= EPOLLIN;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= EPOLLOUT;
  try {
    c->loop_.watch_fd(s, events, [c, s](uint32_t ev) {
      int flags = 0;
      if (ev & EPOLLIN) flags |= CURL_CSELECT_IN;
      if (ev & EPOLLOUT) flags |= CURL_CSELECT_OUT;
      if (ev & (EPOLLERR | EPOLLHUP)) flags |= CURL_CSELECT_ERR;
      c->socket_action(s, flags);
    });
  } catch (const std::exception&) {
    return -1;  // an exception must not cross curl's C frames; -1 makes curl fail the transfer
  }
  return 0;
}

int HttpClient::on_timer(CURLM*, long timeout_ms, void* self) {
  auto* c = static_cast<HttpClient*>(self);
  if (c->timer_ != 0) {
    c->loop_.cancel_timer(c->timer_);
    c->timer_ = 0;
  }
  // Curl must not be re-entered from its own callback, so even a 0 ms timeout goes through the loop.
  if (timeout_ms >= 0) {
    c->timer_ = c->loop_.add_timer(static_cast<double>(timeout_ms) / 1000.0, [c] {
      c->timer_ = 0;
      c->socket_action(CURL_SOCKET_TIMEOUT, 0);
    });
  }
  return 0;
}

void HttpClient::socket_action(curl_socket_t s, int flags) {
  int running = 0;
  curl_multi_socket_action(multi_, s, flags, &running);
  collect_done();
}

void HttpClient::collect_done() {
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    Transfer* t = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
    const CURLcode rc = msg->data.result;
    if (t != nullptr) finish(t, rc);
  }
}

void HttpClient::finish(Transfer* t, CURLcode rc) {
  curl_multi_remove_handle(multi_, t->easy);
  auto owned = std::move(transfers_.at(t->id));
  transfers_.erase(t->id);
  HttpResponse& r = t->resp;
  r.elapsed = EventLoop::monotonic_now() - t->t0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &r.status);
  if (rc != CURLE_OK) {
    const std::string what = t->errbuf[0] != '\0' ? t->errbuf : curl_easy_strerror(rc);
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
    if (t->too_big) {
      // its own code: a reply too large is no passing fault, so callers do not ask again
      r.error_code = "ETOOBIG";
      message = "reply larger than max_body (" + std::to_string(t->max_body) + " bytes)";
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
      message = timeout_message(*t);
    }
    r.error_message = message + " (" + t->safe_url + ")";
    ++stats_.failed;
  } else {
    ++stats_.completed;
  }
  stats_.in_flight = transfers_.size();
  Done done = std::move(t->done);
  HttpResponse resp = std::move(r);
  owned.reset();
  done(std::move(resp));
}

void HttpClient::fail(uint64_t id, const std::string& code, const std::string& message) {
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return;
  auto owned = std::move(it->second);
  transfers_.erase(it);
  curl_multi_remove_handle(multi_, owned->easy);  // fine for a handle the multi never took
  ++stats_.failed;
  stats_.in_flight = transfers_.size();
  HttpResponse r = std::move(owned->resp);
  r.body.clear();
  r.elapsed = EventLoop::monotonic_now() - owned->t0;
  curl_easy_getinfo(owned->easy, CURLINFO_RESPONSE_CODE, &r.status);
  r.error_code = code;
  r.error_message = message + " (" + owned->safe_url + ")";
  Done done = std::move(owned->done);
  owned.reset();
  done(std::move(r));
}

// The idle timer is re-armed for the quiet time left rather than reset on every byte, so a
// fast stream costs one timer per idle period, not one per chunk.
void HttpClient::arm_idle_timer(Transfer* t, double secs) {
  const uint64_t id = t->id;
  t->idle_timer = loop_.add_timer(secs, [this, id] {
    auto it = transfers_.find(id);
    if (it == transfers_.end()) return;
    Transfer* tr = it->second.get();
    tr->idle_timer = 0;
    const double quiet = EventLoop::monotonic_now() - tr->last_activity;
    if (quiet + 1e-3 < tr->idle_timeout) {
      arm_idle_timer(tr, tr->idle_timeout - quiet);
      return;
    }
    fail(id, "ETIMEDOUT", stall_message(*tr));
  });
}

void HttpClient::arm_start_timer(Transfer* t, double secs) {
  const uint64_t id = t->id;
  t->start_timer = loop_.add_timer(secs, [this, id] {
    auto it = transfers_.find(id);
    if (it == transfers_.end()) return;
    Transfer* tr = it->second.get();
    tr->start_timer = 0;
    if (tr->head_done) return;
    const std::string s = seconds(tr->start_timeout);
    fail(id, "ETIMEDOUT", connected(tr->easy)
                              ? "the server accepted the request but sent no reply for " + s + " s (start timeout)"
                              : "no connection after " + s + " s (start timeout)");
  });
}

uint64_t HttpClient::start(HttpRequest req, Done done, HttpSink sink) {
  auto t = std::make_unique<Transfer>();
  t->id = next_id_++;
  t->easy = curl_easy_init();
  t->loop = &loop_;
  t->max_body = req.max_body;
  t->t0 = EventLoop::monotonic_now();
  t->last_activity = t->t0;
  t->timeout = req.timeout;
  t->connect_timeout = req.connect_timeout;
  t->idle_timeout = req.idle_timeout;
  t->start_timeout = req.start_timeout;
  t->safe_url = redact_url(req.url);
  t->done = std::move(done);
  t->sink = std::move(sink);
  CURL* e = t->easy;
  curl_easy_setopt(e, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, write_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(std::ceil(req.timeout * 1000.0)));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::ceil(req.connect_timeout * 1000.0)));
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");  // any encoding curl can decode
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  if (req.idle_timeout > 0) {
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, t.get());
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
    t->header_list = curl_slist_append(t->header_list, (name + ": " + value).c_str());
  // Without this curl waits up to a second for "100 Continue" before sending a large body.
  t->header_list = curl_slist_append(t->header_list, "Expect:");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->header_list);

  const uint64_t id = t->id;
  Transfer* raw = t.get();
  transfers_.emplace(id, std::move(t));
  ++stats_.started;
  stats_.in_flight = transfers_.size();
  if (req.idle_timeout > 0) arm_idle_timer(raw, req.idle_timeout);
  if (req.start_timeout > 0) arm_start_timer(raw, req.start_timeout);
  const CURLMcode mc = curl_multi_add_handle(multi_, raw->easy);
  if (mc != CURLM_OK) {
    // Deliver the failure from the loop: callers expect `done` after start returns.
    std::string msg = curl_multi_strerror(mc);
    loop_.post([this, id, msg] { fail(id, "EHTTP", msg); });
  }
  return id;
}

void HttpClient::cancel(uint64_t id) {
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return;
  auto owned = std::move(it->second);
  transfers_.erase(it);
  curl_multi_remove_handle(multi_, owned->easy);
  ++stats_.canceled;
  stats_.in_flight = transfers_.size();
}

}  // namespace kagent
