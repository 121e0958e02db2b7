// The database schema as an ordered list of forward migrations, keyed by PRAGMA user_version.
#pragma once

#include <span>

#include "store/sqlite_handle.hpp"

namespace kagent::store {

struct Migration {
  int version;      // user_version after this migration
  const char* sql;  // statements run in one transaction
};

// The migrations of this build, oldest first. Append, never edit: databases in the field have
// already run the old ones.
std::span<const Migration> schema_migrations();
int latest_schema_version();

// Brings `conn` from its user_version up to the last of `migrations`, each in its own
// IMMEDIATE transaction. Throws DbError when the database is newer than the list (opening it
// would misread data written by a later build). Returns the resulting version.
int apply_migrations(Connection& conn, std::span<const Migration> migrations,
                     const std::string& label);

}  // namespace kagent::store
