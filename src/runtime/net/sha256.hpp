// SHA-256, used for record/replay keys: a request must map to one stable key on every machine.
#pragma once

#include <string>
#include <string_view>

namespace kagent {

// Lower-case hex digest of `data`.
std::string sha256_hex(std::string_view data);

}  // namespace kagent
