// Values crossing the store boundary, and the parameters of one statement.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace kagent::store {

// NULL, INTEGER, REAL, TEXT. BLOBs are read as strings (Lua strings hold bytes).
using Value = std::variant<std::monostate, int64_t, double, std::string>;

// Positional values fill `?`/`?NNN` parameters in order; named values fill `:name`, `@name` and
// `$name`. A parameter with no value binds NULL, so optional fields can simply be left out.
struct Params {
  std::vector<Value> positional;
  std::unordered_map<std::string, Value> named;
  // Asked for a name (without its prefix) that `named` lacks; returns false to bind NULL. Lets a
  // binding read values straight from its own table, only for the names the statement uses.
  std::function<bool(const char* name, Value& out)> lookup;

  bool empty() const { return positional.empty() && named.empty() && !lookup; }
};

}  // namespace kagent::store
