// .env loading: KEY=VALUE lines become environment variables unless already set.
#pragma once

#include <string>

namespace kagent {

// Loads `path`; returns the number of variables set, or -1 when the file cannot be read.
// Never logs values (they are often API keys).
int load_dotenv(const std::string& path);

}  // namespace kagent
