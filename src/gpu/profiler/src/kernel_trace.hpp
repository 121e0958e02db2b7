// CUPTI activity tracing of kernels, copies and fills on every stream of the process.
#pragma once

#include <string>

#include "status.hpp"

namespace kp {

Status trace_begin();
// Flushes and disables tracing; writes the launches as a JSON array into `json`.
Status trace_end(std::string& json);
bool trace_active();
// Delivers the records completed so far (between timed calls, so CUPTI's buffers never fill
// during one).
Status trace_flush();
// CUPTI's clock, the one activity records are stamped in (ns).
Status timestamp(unsigned long long& ns);

}  // namespace kp
