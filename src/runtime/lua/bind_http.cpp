// native.http: HTTP transfers on the runtime's HttpClient (one per Runtime, made on first use),
// whole (request_start) or streamed (stream_*), plus sha256 for request keys. The Lua half is
// kagent/http.lua.
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "lua/lua_util.hpp"
#include "lua/native_modules.hpp"
#include "lua/runtime.hpp"
#include "lua/stack_guard.hpp"
#include "net/http_client.hpp"
#include "net/sha256.hpp"

namespace kagent {
namespace {

// Address used as the registry key for this runtime's HttpClient.
const char kClientKey = 0;

// The runtime's client, and a flag that streams still held by Lua (collected after the client
// is gone, at shutdown) check before they touch it.
struct ClientBox {
  HttpClient client;
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  explicit ClientBox(EventLoop& loop) : client(loop) {}
};

ClientBox& box_for(lua_State* L) {
  lua_pushlightuserdata(L, const_cast<char*>(&kClientKey));
  lua_rawget(L, LUA_REGISTRYINDEX);
  auto* c = static_cast<ClientBox*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  if (c != nullptr) return *c;
  Runtime& rt = Runtime::from(L);
  c = new ClientBox(rt.loop());
  lua_pushlightuserdata(L, const_cast<char*>(&kClientKey));
  lua_pushlightuserdata(L, c);
  lua_rawset(L, LUA_REGISTRYINDEX);
  // Shutdown hooks run after every op was canceled and before the loop is destroyed.
  rt.at_shutdown([c] {
    *c->alive = false;
    delete c;
  });
  return *c;
}

HttpClient& client_for(lua_State* L) { return box_for(L).client; }

// Reads the request table at index 1. Returns an empty string or a misuse message.
std::string read_request(lua_State* L, HttpRequest& req) {
  StackGuard guard(L);
  req.method = opt_string_field(L, 1, "method", "GET");
  req.url = opt_string_field(L, 1, "url", "");
  req.body = opt_string_field(L, 1, "body", "");
  req.timeout = opt_number_field(L, 1, "timeout", req.timeout);
  req.connect_timeout = opt_number_field(L, 1, "connect_timeout", req.connect_timeout);
  req.idle_timeout = opt_number_field(L, 1, "idle_timeout", req.idle_timeout);
  req.start_timeout = opt_number_field(L, 1, "start_timeout", req.start_timeout);
  const double max_body = opt_number_field(L, 1, "max_body", static_cast<double>(req.max_body));
  if (max_body < 0) return "max_body must be >= 0";
  req.max_body = static_cast<size_t>(max_body);
  if (req.timeout <= 0 || req.connect_timeout <= 0 || req.idle_timeout < 0 || req.start_timeout < 0)
    return "timeouts must be > 0";
  lua_getfield(L, 1, "headers");
  if (lua_istable(L, -1)) {
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {
      if (lua_type(L, -2) == LUA_TSTRING && (lua_type(L, -1) == LUA_TSTRING || lua_isnumber(L, -1))) {
        req.headers.emplace_back(lua_tostring(L, -2), lua_tostring(L, -1));
      }
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return {};
}

void push_headers(lua_State* L, const HttpHeaders& headers) {
  lua_newtable(L);
  for (const auto& [name, value] : headers) set_field(L, name.c_str(), std::string_view(value));
}

// Starts the transfer and pushes its op id; on misuse fills `err` and pushes nothing.
bool start_request(lua_State* L, char (&err)[256]) {
  HttpRequest req;
  const std::string misuse = read_request(L, req);
  if (!misuse.empty()) {
    std::snprintf(err, sizeof err, "http.request: %s", misuse.c_str());
    return false;
  }
  Runtime& rt = Runtime::from(L);
  HttpClient& client = client_for(L);
  const uint64_t op = rt.ops().begin();
  const uint64_t transfer = client.start(std::move(req), [&rt, op](HttpResponse&& r) {
    auto resp = std::make_shared<HttpResponse>(std::move(r));
    rt.complete(op, [resp](lua_State* S) {
      if (!resp->error_code.empty()) return push_failure(S, resp->error_code, resp->error_message);
      lua_newtable(S);
      set_field(S, "status", static_cast<double>(resp->status));
      set_field(S, "body", std::string_view(resp->body));
      set_field(S, "elapsed", resp->elapsed);
      push_headers(S, resp->headers);
      lua_setfield(S, -2, "headers");
      return 1;
    });
  });
  rt.ops().set_cancel(op, [&client, transfer] { client.cancel(transfer); });
  lua_pushnumber(L, static_cast<lua_Number>(op));
  return true;
}

// request_start{method,url,headers,body,timeout,connect_timeout,idle_timeout,start_timeout,max_body} -> op.
// Completes with {status, headers, body, elapsed} or nil, "CODE: message", "CODE".
int l_request_start(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  char err[256] = {0};
  // Raised here, after every C++ object of the attempt is gone.
  if (!start_request(L, err)) return luaL_error(L, "%s", err);
  return 1;
}

// Streams ---------------------------------------------------------------------------------------
// A stream is a transfer whose head, body bytes and end are queued here as they arrive; the
// reading task takes them with stream_next and, when nothing is queued, parks on an op from
// stream_wait_start that completes (through a loop post, never inside curl) when something is.

const char* const kStreamMeta = "kagent.http.stream";

struct StreamState {
  Runtime* rt = nullptr;
  HttpClient* client = nullptr;
  std::shared_ptr<bool> client_alive;
  uint64_t transfer = 0;
  bool live = false;  // the transfer is running
  bool head = false, head_taken = false;
  long status = 0;
  HttpHeaders headers;
  std::string data;  // body bytes not yet taken
  bool ended = false, end_taken = false;
  std::string code, message;  // of a failed end
  uint64_t waiter = 0;        // op of the parked reader; 0: none
  bool wake_posted = false;

  bool has_news() const { return (head && !head_taken) || !data.empty() || (ended && !end_taken); }

  // Wakes the parked reader from the loop, once per batch of news.
  void notify(const std::shared_ptr<StreamState>& self) {
    if (waiter == 0 || wake_posted) return;
    wake_posted = true;
    rt->loop().post([self] {
      self->wake_posted = false;
      const uint64_t op = self->waiter;
      if (op == 0) return;
      self->waiter = 0;
      self->rt->complete(op, [](lua_State*) { return 0; });
    });
  }

  void abort() {
    if (live && *client_alive) client->cancel(transfer);
    live = false;
  }
};

struct StreamBox {
  std::shared_ptr<StreamState> s;
};

StreamState& check_stream(lua_State* L) {
  return *static_cast<StreamBox*>(luaL_checkudata(L, 1, kStreamMeta))->s;
}

bool open_stream(lua_State* L, char (&err)[256]) {
  // The userdata first: allocating it may raise, which must not skip the destructors below.
  auto* box = static_cast<StreamBox*>(lua_newuserdata(L, sizeof(StreamBox)));
  new (box) StreamBox{};
  luaL_getmetatable(L, kStreamMeta);
  lua_setmetatable(L, -2);
  HttpRequest req;
  const std::string misuse = read_request(L, req);
  if (!misuse.empty()) {
    std::snprintf(err, sizeof err, "http.stream: %s", misuse.c_str());
    return false;
  }
  auto st = std::make_shared<StreamState>();
  st->rt = &Runtime::from(L);
  ClientBox& cb = box_for(L);
  st->client = &cb.client;
  st->client_alive = cb.alive;
  std::weak_ptr<StreamState> weak = st;
  HttpSink sink;
  sink.on_head = [weak](long status, const HttpHeaders& headers) {
    auto s = weak.lock();
    if (!s) return;
    s->head = true;
    s->status = status;
    s->headers = headers;
    s->notify(s);
  };
  sink.on_data = [weak](std::string_view bytes) {
    auto s = weak.lock();
    if (!s) return;
    s->data.append(bytes);
    s->notify(s);
  };
  st->transfer = st->client->start(
      std::move(req),
      [weak](HttpResponse&& r) {
        auto s = weak.lock();
        if (!s) return;
        s->live = false;
        if (!s->head && r.error_code.empty()) {  // a reply whose header block we did not see end
          s->head = true;
          s->status = r.status;
          s->headers = std::move(r.headers);
        }
        s->ended = true;
        s->code = r.error_code;
        s->message = r.error_message;
        s->notify(s);
      },
      std::move(sink));
  st->live = true;
  box->s = std::move(st);
  return true;
}

// stream_open{method,url,headers,body,timeout,connect_timeout,idle_timeout,start_timeout,max_body} -> stream.
int l_stream_open(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  char err[256] = {0};
  if (!open_stream(L, err)) return luaL_error(L, "%s", err);
  return 1;
}

// stream_next(s) -> "head", status, headers | "data", bytes | "end" | "error", code, message |
// nil (nothing queued: park on stream_wait_start). The head comes first and the end last.
int l_stream_next(lua_State* L) {
  StreamState& s = check_stream(L);
  if (s.head && !s.head_taken) {
    s.head_taken = true;
    lua_pushliteral(L, "head");
    lua_pushnumber(L, static_cast<lua_Number>(s.status));
    push_headers(L, s.headers);
    return 3;
  }
  if (!s.data.empty()) {
    lua_pushliteral(L, "data");
    lua_pushlstring(L, s.data.data(), s.data.size());
    s.data.clear();
    return 2;
  }
  if (s.ended && !s.end_taken) {
    s.end_taken = true;
    if (s.code.empty()) {
      lua_pushliteral(L, "end");
      return 1;
    }
    lua_pushliteral(L, "error");
    lua_pushlstring(L, s.code.data(), s.code.size());
    lua_pushlstring(L, s.message.data(), s.message.size());
    return 3;
  }
  lua_pushnil(L);
  return 1;
}

// stream_wait_start(s) -> op; completes with no values once stream_next has something. Canceling
// it (the reader was killed) aborts the transfer: nobody is left to read it.
int l_stream_wait_start(lua_State* L) {
  auto* box = static_cast<StreamBox*>(luaL_checkudata(L, 1, kStreamMeta));
  StreamState& s = *box->s;
  if (s.waiter != 0) return luaL_error(L, "http.stream: another task is already reading this stream");
  if (s.ended && s.end_taken) return luaL_error(L, "http.stream: read after the end");
  std::shared_ptr<StreamState> keep = box->s;
  s.waiter = s.rt->ops().begin([keep] {
    keep->waiter = 0;
    keep->abort();
  });
  lua_pushnumber(L, static_cast<lua_Number>(s.waiter));
  if (s.has_news()) s.notify(box->s);
  return 1;
}

int l_stream_close(lua_State* L) {
  check_stream(L).abort();
  return 0;
}

int l_stream_gc(lua_State* L) {
  auto* box = static_cast<StreamBox*>(luaL_checkudata(L, 1, kStreamMeta));
  if (box->s) box->s->abort();
  box->~StreamBox();
  return 0;
}

int l_stats(lua_State* L) {
  const HttpClient::Stats& s = client_for(L).stats();
  lua_newtable(L);
  set_field(L, "started", static_cast<double>(s.started));
  set_field(L, "completed", static_cast<double>(s.completed));
  set_field(L, "failed", static_cast<double>(s.failed));
  set_field(L, "canceled", static_cast<double>(s.canceled));
  set_field(L, "in_flight", static_cast<double>(s.in_flight));
  return 1;
}

int l_sha256(lua_State* L) {
  size_t n = 0;
  const char* s = luaL_checklstring(L, 1, &n);
  const std::string hex = sha256_hex(std::string_view(s, n));
  lua_pushlstring(L, hex.data(), hex.size());
  return 1;
}

}  // namespace

int open_native_http(lua_State* L) {
  luaL_newmetatable(L, kStreamMeta);
  lua_pushcfunction(L, l_stream_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  static const luaL_Reg fns[] = {{"request_start", l_request_start},
                                 {"stream_open", l_stream_open},
                                 {"stream_next", l_stream_next},
                                 {"stream_wait_start", l_stream_wait_start},
                                 {"stream_close", l_stream_close},
                                 {"stats", l_stats},
                                 {"sha256", l_sha256},
                                 {nullptr, nullptr}};
  lua_newtable(L);
  set_functions(L, fns);
  return 1;
}

}  // namespace kagent
