// CUPTI activity tracing of kernels, copies and fills on every stream of the process.
#pragma once

#include <string>

#include "status.hpp"

namespace kp {

Status trace_begin();
// Flushes and disables tracing; writes the launches as a JSON array into `json`.
Status trace_end(std::string& json);
bool trace_active();
// CUPTI's clock, the one activity records are stamped in (ns).
Status timestamp(unsigned long long& ns);

}  // namespace kp
