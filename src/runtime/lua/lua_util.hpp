// Small helpers shared by the bind_*.cpp files.
#pragma once

#include <lua.hpp>

#include <string>
#include <string_view>

namespace kagent {

// The operational-failure convention: nil, "CODE: message", "CODE". Returns 3 (values pushed).
int push_failure(lua_State* L, std::string_view code, std::string_view message);

// Reads an optional field of the table at `idx`.
double opt_number_field(lua_State* L, int idx, const char* key, double dflt);
std::string opt_string_field(lua_State* L, int idx, const char* key, const std::string& dflt);
bool opt_bool_field(lua_State* L, int idx, const char* key, bool dflt);

// Sets t[key] = value on the table at the top of the stack.
void set_field(lua_State* L, const char* key, double value);
void set_field(lua_State* L, const char* key, std::string_view value);
void set_bool_field(lua_State* L, const char* key, bool value);

// Registers `fns` into the table at the top of the stack.
void set_functions(lua_State* L, const luaL_Reg* fns);

}  // namespace kagent
