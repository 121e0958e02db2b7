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
    std::string chip;                       // e.g. "GH100", needed by the host metric database
    std::vector<uint8_t> counter_availability;  // lets the host side schedule only readable counters
};

Status device_init(int index, Device& out);
void device_release(Device& d);

}  // namespace kp
