# Third-party libraries, all from Debian packages. LuaJIT, SQLite, yaml-cpp, spdlog and fmt are linked
# statically / header-only because the GPU machines lack libluajit and carry other spdlog/fmt
# versions; libcurl is dynamic (libcurl.so.4 is everywhere).
find_package(Threads REQUIRED)
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)

find_path(LUAJIT_INCLUDE_DIR luajit.h PATH_SUFFIXES luajit-2.1 REQUIRED)
find_library(LUAJIT_STATIC_LIB NAMES libluajit-5.1.a REQUIRED)
find_library(SQLITE3_STATIC_LIB NAMES libsqlite3.a REQUIRED)
find_path(SQLITE3_INCLUDE_DIR sqlite3.h REQUIRED)
# kagent.yaml (--config files): Debian's libyaml-cpp-dev ships the static library too.
find_library(YAML_CPP_STATIC_LIB NAMES libyaml-cpp.a REQUIRED)
find_path(YAML_CPP_INCLUDE_DIR yaml-cpp/yaml.h REQUIRED)
find_path(SPDLOG_INCLUDE_DIR spdlog/spdlog.h REQUIRED)
find_path(FMT_INCLUDE_DIR fmt/format.h REQUIRED)
# The agents' command-line parser (Debian lua-argparse), compiled into the binary with the Lua
# library (cmake/embed_lua.cmake), so machines without the package have it. Its licence
# (Debian's copyright file) is copied beside the binary and installed with the docs.
find_file(ARGPARSE_LUA argparse.lua PATHS /usr/share/lua/5.1 NO_DEFAULT_PATH)
find_file(ARGPARSE_COPYRIGHT copyright PATHS /usr/share/doc/lua-argparse NO_DEFAULT_PATH)
if(NOT ARGPARSE_LUA OR NOT ARGPARSE_COPYRIGHT)
  message(FATAL_ERROR "lua-argparse is missing: install the Debian package lua-argparse (scripts/setup.sh does)")
endif()
configure_file("${ARGPARSE_COPYRIGHT}" "${CMAKE_BINARY_DIR}/licenses/argparse.copyright" COPYONLY)

add_library(kagent_deps INTERFACE)
add_library(kagent::deps ALIAS kagent_deps)
target_include_directories(kagent_deps SYSTEM INTERFACE
  ${LUAJIT_INCLUDE_DIR} ${SQLITE3_INCLUDE_DIR} ${YAML_CPP_INCLUDE_DIR} ${SPDLOG_INCLUDE_DIR} ${FMT_INCLUDE_DIR})
target_compile_definitions(kagent_deps INTERFACE SPDLOG_HEADER_ONLY FMT_HEADER_ONLY)
target_link_libraries(kagent_deps INTERFACE
  ${LUAJIT_STATIC_LIB} ${SQLITE3_STATIC_LIB} ${YAML_CPP_STATIC_LIB} CURL::libcurl OpenSSL::Crypto nlohmann_json::nlohmann_json
  Threads::Threads ${CMAKE_DL_LIBS} m)

add_library(kagent_cli INTERFACE)
add_library(kagent::cli ALIAS kagent_cli)
target_link_libraries(kagent_cli INTERFACE CLI11::CLI11)
