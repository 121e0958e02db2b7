// .env loading: KEY=VALUE lines become environment variables unless already set.
#pragma once

#include <map>
#include <string>

namespace kagent {

// Loads `path`; returns the number of variables set, or -1 when the file cannot be read.
// Never logs values (they are often API keys).
int load_dotenv(const std::string& path);

// The .env values the environment overrode ({NAME: value in the file}): not set, yet secrets all
// the same where the name says so (a key on disk that a candidate could read by another route),
// so kagent.secrets redacts them too (issue #53).
const std::map<std::string, std::string>& dotenv_overridden();

}  // namespace kagent
