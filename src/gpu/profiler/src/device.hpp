// The device and context the library profiles, and whether CUPTI's profiler can use them.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "status.hpp"

namespace kp {

struct Device {
    int index = -1;
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    bool retained_primary = false;
    bool profiler_initialized = false;      // cuptiProfilerInitialize done (profiler_init)
    bool profiler_ready = false;            // and the chip and counter availability below known
    std::string chip;                       // e.g. "GH100", needed by the host metric database
    std::vector<uint8_t> counter_availability;  // lets the host side schedule only readable counters
};

// The device and its context: all the activity trace needs.
Status device_init(int index, Device& out);
// CUPTI's profiler on it (support, chip name, counter availability): the metric check and the
// range profiler need it. Once per device; a failure is tried again on the next call.
Status profiler_init(Device& d);
void device_release(Device& d);

}  // namespace kp
