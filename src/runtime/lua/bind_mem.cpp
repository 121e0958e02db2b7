// native.mem: the SQLite MemoryStore as a Lua userdata. The typed API (runs, attempts, skills,
// lessons...) is SQL in kagent/mem.lua over the generic exec/query here, so a researcher can read
// and extend it without recompiling. Misuse raises; SQL failures return nil, "EDB: ...", "EDB",
// except a database another process holds locked: nil, "EBUSY: ...", "EBUSY" at once (no busy
// timeout: SQLite's would sleep on the event loop's thread), which kagent/mem.lua retries off the
// loop (docs/lua-api.md, kagent.mem).
#include <cmath>
#include <stdexcept>
#include <string>

#include "lua/lua_util.hpp"
#include "lua/native_modules.hpp"
#include "lua/stack_guard.hpp"
#include "store/memory_store.hpp"
#include "store/merge.hpp"
#include "store/schema.hpp"

namespace kagent {
namespace {

using store::DbError;
using store::MemoryStore;
using store::Params;
using store::Value;

constexpr const char* kDbMeta = "kagent.mem.db";

struct DbBox {
  MemoryStore* store;
};

// A wrong argument found while C++ objects are live; raised once they are gone.
struct Misuse : std::runtime_error {
  using std::runtime_error::runtime_error;
};

MemoryStore& check_open(lua_State* L, int idx) {
  auto* box = static_cast<DbBox*>(luaL_checkudata(L, idx, kDbMeta));
  if (box->store == nullptr) throw Misuse("database is closed");
  return *box->store;
}

Value to_value(lua_State* L, int idx, const char* what) {
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      return std::monostate{};
    case LUA_TBOOLEAN:
      return static_cast<int64_t>(lua_toboolean(L, idx));
    case LUA_TNUMBER: {
      const double d = lua_tonumber(L, idx);
      // Integral values stay INTEGER so ids and counts compare equal in SQL.
      if (std::floor(d) == d && std::fabs(d) < 9.007199254740992e15) return static_cast<int64_t>(d);
      return d;
    }
    case LUA_TSTRING: {
      size_t n = 0;
      const char* s = lua_tolstring(L, idx, &n);
      return std::string(s, n);
    }
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, idx) == nullptr) return std::monostate{};  // kagent.json.null
      [[fallthrough]];
    default:
      throw Misuse(std::string("parameter ") + what + ": cannot bind a " +
                   luaL_typename(L, idx) + " (encode tables with kagent.json)");
  }
}

Params to_params(lua_State* L, int idx) {
  Params p;
  if (idx < 0) idx = lua_gettop(L) + idx + 1;
  if (lua_isnoneornil(L, idx)) return p;
  if (!lua_istable(L, idx)) throw Misuse("params must be a table");
  // No StackGuard here: a Misuse thrown mid-walk leaves values that the caller's error path drops.
  // Arrays may hold nil holes: `n` (as from table.pack) gives the true length.
  lua_getfield(L, idx, "n");
  size_t len = lua_isnumber(L, -1) ? static_cast<size_t>(lua_tonumber(L, -1)) : lua_objlen(L, idx);
  lua_pop(L, 1);
  for (size_t i = 1; i <= len; ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    const std::string label = std::to_string(i);
    p.positional.push_back(to_value(L, -1, label.c_str()));
    lua_pop(L, 1);
  }
  // Named values are read from the table when the statement asks for them: no copy of fields
  // the statement does not use. The table stays at `idx` for the whole call.
  p.lookup = [L, idx](const char* name, Value& out) {
    lua_getfield(L, idx, name);
    out = to_value(L, -1, name);
    lua_pop(L, 1);
    return true;
  };
  return p;
}

void push_value(lua_State* L, const Value& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) {
    lua_pushnumber(L, static_cast<lua_Number>(*i));
  } else if (const auto* d = std::get_if<double>(&v)) {
    lua_pushnumber(L, *d);
  } else if (const auto* s = std::get_if<std::string>(&v)) {
    lua_pushlstring(L, s->data(), s->size());
  } else {
    lua_pushnil(L);
  }
}

// Runs `body` (which pushes its results and returns their count) and turns exceptions into the
// error convention only after every C++ object of the body is destroyed.
template <class Body>
int guarded(lua_State* L, const char* fname, Body&& body) {
  std::string error;
  bool misuse = false;
  bool busy = false;
  try {
    return body();
  } catch (const Misuse& e) {
    error = std::string(fname) + ": " + e.what();
    misuse = true;
  } catch (const DbError& e) {
    // A closed database or several statements with parameters is a script bug, not a failure.
    misuse = e.sqlite_code() == SQLITE_MISUSE;
    error = misuse ? std::string(fname) + ": " + e.what() : e.what();
    const int primary = e.sqlite_code() & 0xff;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) busy = true;
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (misuse) {
    lua_pushlstring(L, error.data(), error.size());
    error.clear();
    error.shrink_to_fit();
    return lua_error(L);
  }
  return push_failure(L, busy ? "EBUSY" : "EDB", error);
}

// open(path) -> db userdata | nil, err, "EDB" (or "EBUSY": the caller retries)
int l_open(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  return guarded(L, "mem.open", [&] {
    auto store = std::make_unique<MemoryStore>(path, /*busy_timeout_ms=*/0);
    auto* box = static_cast<DbBox*>(lua_newuserdata(L, sizeof(DbBox)));
    box->store = store.release();
    luaL_getmetatable(L, kDbMeta);
    lua_setmetatable(L, -2);
    return 1;
  });
}

int l_close(lua_State* L) {
  auto* box = static_cast<DbBox*>(luaL_checkudata(L, 1, kDbMeta));
  delete box->store;
  box->store = nullptr;
  return 0;
}

int l_is_open(lua_State* L) {
  auto* box = static_cast<DbBox*>(luaL_checkudata(L, 1, kDbMeta));
  lua_pushboolean(L, box->store != nullptr);
  return 1;
}

// exec(db, sql, params) -> changes, last_insert_id. Without params, sql may hold several statements.
int l_exec(lua_State* L) {
  return guarded(L, "db:exec", [&] {
    MemoryStore& db = check_open(L, 1);
    const std::string sql = luaL_checkstring(L, 2);
    store::ExecResult r;
    if (lua_isnoneornil(L, 3)) {
      r = db.exec_script(sql);
    } else {
      r = db.exec(sql, to_params(L, 3));
    }
    lua_pushnumber(L, static_cast<lua_Number>(r.changes));
    lua_pushnumber(L, static_cast<lua_Number>(r.last_insert_id));
    return 2;
  });
}

// query(db, sql, params) -> array of rows keyed by column name (NULL columns absent).
int l_query(lua_State* L) {
  return guarded(L, "db:query", [&] {
    MemoryStore& db = check_open(L, 1);
    const std::string sql = luaL_checkstring(L, 2);
    const Params params = to_params(L, 3);
    lua_newtable(L);  // rows
    const int rows = lua_gettop(L);
    int n = 0;
    db.query(sql, params, [&](const store::Statement& st) {
      const int cols = st.column_count();
      lua_createtable(L, 0, cols);
      for (int c = 0; c < cols; ++c) {
        const Value v = st.column(c);
        if (std::holds_alternative<std::monostate>(v)) continue;
        push_value(L, v);
        lua_setfield(L, -2, st.column_name(c));
      }
      lua_rawseti(L, rows, ++n);
    });
    return 1;
  });
}

// merge(db, path) -> {table = rows added, ...}. Inside a transaction it raises (misuse).
int l_merge(lua_State* L) {
  return guarded(L, "db:merge", [&] {
    MemoryStore& db = check_open(L, 1);
    const std::string path = luaL_checkstring(L, 2);
    const store::MergeCounts counts = store::merge_database(db, path);
    lua_createtable(L, 0, static_cast<int>(counts.size()));
    for (const auto& [table, added] : counts) {
      lua_pushnumber(L, static_cast<lua_Number>(added));
      lua_setfield(L, -2, table.c_str());
    }
    return 1;
  });
}

int l_path(lua_State* L) {
  return guarded(L, "db:path", [&] {
    lua_pushstring(L, check_open(L, 1).path().c_str());
    return 1;
  });
}

int l_schema_version(lua_State* L) {
  return guarded(L, "db:schema_version", [&] {
    lua_pushinteger(L, check_open(L, 1).schema_version());
    return 1;
  });
}

int l_in_transaction(lua_State* L) {
  return guarded(L, "db:in_transaction", [&] {
    lua_pushboolean(L, check_open(L, 1).in_transaction());
    return 1;
  });
}

}  // namespace

int open_native_mem(lua_State* L) {
  StackGuard guard(L, 1);
  if (luaL_newmetatable(L, kDbMeta) != 0) {
    lua_pushcfunction(L, l_close);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  static const luaL_Reg fns[] = {{"open", l_open},
                                 {"close", l_close},
                                 {"is_open", l_is_open},
                                 {"exec", l_exec},
                                 {"query", l_query},
                                 {"merge", l_merge},
                                 {"path", l_path},
                                 {"schema_version", l_schema_version},
                                 {"in_transaction", l_in_transaction},
                                 {nullptr, nullptr}};
  lua_newtable(L);
  set_functions(L, fns);
  set_field(L, "SCHEMA_VERSION", static_cast<double>(store::latest_schema_version()));
  set_field(L, "sqlite_version", std::string_view(sqlite3_libversion()));
  return 1;
}

}  // namespace kagent
