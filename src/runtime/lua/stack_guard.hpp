// StackGuard: in debug builds, asserts that a binding leaves the Lua stack as it promised.
#pragma once

#include <lua.hpp>

#include <cassert>

namespace kagent {

class StackGuard {
 public:
  explicit StackGuard(lua_State* L, int expected_delta = 0)
      : L_(L), top_(lua_gettop(L)), delta_(expected_delta) {}
  ~StackGuard() { assert(lua_gettop(L_) == top_ + delta_ && "Lua stack unbalanced"); }
  StackGuard(const StackGuard&) = delete;
  StackGuard& operator=(const StackGuard&) = delete;

 private:
  lua_State* L_;
  int top_;
  int delta_;
};

}  // namespace kagent
