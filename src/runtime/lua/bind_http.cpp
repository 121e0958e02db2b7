// native.http: HTTP transfers on the runtime's HttpClient (one per Runtime, made on first use),
// plus sha256 for request keys. The Lua half is kagent/http.lua.
#include <cstdio>
#include <memory>
#include <string>

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

HttpClient& client_for(lua_State* L) {
  lua_pushlightuserdata(L, const_cast<char*>(&kClientKey));
  lua_rawget(L, LUA_REGISTRYINDEX);
  auto* c = static_cast<HttpClient*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  if (c != nullptr) return *c;
  Runtime& rt = Runtime::from(L);
  c = new HttpClient(rt.loop());
  lua_pushlightuserdata(L, const_cast<char*>(&kClientKey));
  lua_pushlightuserdata(L, c);
  lua_rawset(L, LUA_REGISTRYINDEX);
  // Shutdown hooks run after every op was canceled and before the loop is destroyed.
  rt.at_shutdown([c] { delete c; });
  return *c;
}

// Reads the request table at index 1. Returns an empty string or a misuse message.
std::string read_request(lua_State* L, HttpRequest& req) {
  StackGuard guard(L);
  req.method = opt_string_field(L, 1, "method", "GET");
  req.url = opt_string_field(L, 1, "url", "");
  req.body = opt_string_field(L, 1, "body", "");
  req.timeout = opt_number_field(L, 1, "timeout", req.timeout);
  req.connect_timeout = opt_number_field(L, 1, "connect_timeout", req.connect_timeout);
  const double max_body = opt_number_field(L, 1, "max_body", static_cast<double>(req.max_body));
  if (max_body < 0) return "max_body must be >= 0";
  req.max_body = static_cast<size_t>(max_body);
  if (req.timeout <= 0 || req.connect_timeout <= 0) return "timeouts must be > 0";
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
      lua_newtable(S);
      for (const auto& [name, value] : resp->headers) set_field(S, name.c_str(), std::string_view(value));
      lua_setfield(S, -2, "headers");
      return 1;
    });
  });
  rt.ops().set_cancel(op, [&client, transfer] { client.cancel(transfer); });
  lua_pushnumber(L, static_cast<lua_Number>(op));
  return true;
}

// request_start{method,url,headers,body,timeout,connect_timeout,max_body} -> op.
// Completes with {status, headers, body, elapsed} or nil, "CODE: message", "CODE".
int l_request_start(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  char err[256] = {0};
  // Raised here, after every C++ object of the attempt is gone.
  if (!start_request(L, err)) return luaL_error(L, "%s", err);
  return 1;
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
  static const luaL_Reg fns[] = {{"request_start", l_request_start},
                                 {"stats", l_stats},
                                 {"sha256", l_sha256},
                                 {nullptr, nullptr}};
  lua_newtable(L);
  set_functions(L, fns);
  return 1;
}

}  // namespace kagent
