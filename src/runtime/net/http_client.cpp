// HttpClient (http_client.hpp): the curl multi handle driven by the EventLoop (its sockets and
// its timer), the transfers in flight, and how each ends (done, failed, canceled). One transfer's
// easy handle and callbacks are in http_transfer.cpp.
#include "net/http_client.hpp"

#include <sys/epoll.h>

#include <exception>
#include <mutex>

#include "net/http_transfer.hpp"

namespace kagent {
namespace {

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
    t->set_failure(rc);
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
    Transfer* tr = find(id);
    if (tr == nullptr) return;
    tr->idle_timer = 0;
    const double quiet = EventLoop::monotonic_now() - tr->last_activity;
    if (quiet + 1e-3 < tr->idle_timeout) {
      arm_idle_timer(tr, tr->idle_timeout - quiet);
      return;
    }
    fail(id, "ETIMEDOUT", tr->stall_message());
  });
}

void HttpClient::arm_start_timer(Transfer* t, double secs) {
  const uint64_t id = t->id;
  t->start_timer = loop_.add_timer(secs, [this, id] {
    Transfer* tr = find(id);
    if (tr == nullptr) return;
    tr->start_timer = 0;
    if (tr->head_done) return;
    fail(id, "ETIMEDOUT", tr->start_timeout_message());
  });
}

HttpClient::Transfer* HttpClient::find(uint64_t id) {
  auto it = transfers_.find(id);
  return it == transfers_.end() ? nullptr : it->second.get();
}

uint64_t HttpClient::start(HttpRequest req, Done done, HttpSink sink) {
  auto t = std::make_unique<Transfer>(next_id_++, loop_, req, std::move(done), std::move(sink));
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