// CUPTI activity tracing of kernel launches on every stream of the process.
#pragma once

#include <string>

#include "status.hpp"

namespace kp {

Status trace_begin();
// Flushes and disables tracing; writes the launches as a JSON array into `json`.
Status trace_end(std::string& json);
bool trace_active();

}  // namespace kp
