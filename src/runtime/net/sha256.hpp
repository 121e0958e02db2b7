// SHA-256 (FIPS 180-4), used for record/replay keys: a request must map to one stable key on
// every machine, without pulling a crypto library into the runtime for one digest.
#pragma once

#include <string>
#include <string_view>

namespace kagent {

// Lower-case hex digest of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace kagent
