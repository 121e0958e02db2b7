#include "net/http_client.hpp"

#include <sys/epoll.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <mutex>

namespace kagent {

struct HttpClient::Transfer {
  uint64_t id = 0;
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  HttpResponse resp;
  size_t max_body = 0;
  bool too_big = false;
  double t0 = 0;
  std::string safe_url;
  Done done;
  char errbuf[CURL_ERROR_SIZE] = {0};

  ~Transfer() {
    if (header_list != nullptr) curl_slist_free_all(header_list);
    if (easy != nullptr) curl_easy_cleanup(easy);
  }
};

namespace {

size_t write_body(char* data, size_t size, size_t n, void* userp) {
  auto* t = static_cast<HttpClient::Transfer*>(userp);
  const size_t len = size * n;
  if (t->resp.body.size() + len > t->max_body) {
    t->too_big = true;
    return 0;  // makes curl fail the transfer with CURLE_WRITE_ERROR
  }
  t->resp.body.append(data, len);
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
  std::string line(data, len);
  // A new status line (after a 100 Continue or a redirect) starts a new header set.
  if (line.rfind("HTTP/", 0) == 0) {
    t->resp.headers.clear();
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
    r.error_message = t->too_big ? "reply larger than max_body (" + std::to_string(t->max_body) +
                                       " bytes) from " + t->safe_url
                                 : what + " (" + t->safe_url + ")";
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

uint64_t HttpClient::start(HttpRequest req, Done done) {
  auto t = std::make_unique<Transfer>();
  t->id = next_id_++;
  t->easy = curl_easy_init();
  t->max_body = req.max_body;
  t->t0 = EventLoop::monotonic_now();
  t->safe_url = redact_url(req.url);
  t->done = std::move(done);
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
  const CURLMcode mc = curl_multi_add_handle(multi_, raw->easy);
  if (mc != CURLM_OK) {
    // Deliver the failure from the loop: callers expect `done` after start returns.
    std::string msg = curl_multi_strerror(mc);
    loop_.post([this, id, msg] {
      auto it = transfers_.find(id);
      if (it == transfers_.end()) return;
      auto owned = std::move(it->second);
      transfers_.erase(it);
      ++stats_.failed;
      stats_.in_flight = transfers_.size();
      HttpResponse r;
      r.error_code = "EHTTP";
      r.error_message = msg + " (" + owned->safe_url + ")";
      Done done = std::move(owned->done);
      owned.reset();
      done(std::move(r));
    });
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
