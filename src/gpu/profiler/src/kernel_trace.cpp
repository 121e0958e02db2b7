#include "kernel_trace.hpp"

#include <cupti_activity.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "json_writer.hpp"

namespace kp {
namespace {

struct Launch {
    const char* kind = "kernel";  // "kernel", "memcpy" or "memset": all device work is traced
    std::string name;
    std::string mangled;
    unsigned long long start_ns = 0, end_ns = 0;
    int grid[3] = {0, 0, 0};
    int block[3] = {0, 0, 0};
    int registers = 0;
    int static_shared = 0, dynamic_shared = 0;
    unsigned local_mem_per_thread = 0;
    unsigned shared_mem_executed = 0;  // the carveout the driver chose; occupancy depends on it
    unsigned stream = 0, correlation_id = 0, device = 0;
};

constexpr size_t kBufferBytes = 8u << 20;
constexpr size_t kSpareBuffers = 4;

// CUPTI delivers completed buffers on its own thread, so the launch list is shared.
std::mutex g_mutex;
// Buffers allocated and zeroed before a trace starts: CUPTI asks for a buffer from the thread
// that launches work, so allocating (and zeroing) one then would stall a timed call.
std::vector<uint8_t*> g_spare;
std::vector<Launch> g_launches;
size_t g_dropped = 0;
bool g_active = false;
bool g_callbacks_registered = false;

std::string demangle(const char* name) {
    if (!name) return "";
    int status = 0;
    char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
    if (status != 0 || !out) return name;  // Triton kernels are not mangled
    std::string s(out);
    std::free(out);
    return s;
}

uint8_t* zeroed_buffer() {
    // CUPTI wants 8-byte aligned buffers; aligned_alloc is free()-able.
    auto* b = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
    if (b) std::memset(b, 0, kBufferBytes);
    return b;
}

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    uint8_t* b = nullptr;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (!g_spare.empty()) {
            b = g_spare.back();
            g_spare.pop_back();
        }
    }
    *buffer = b ? b : zeroed_buffer();
    *size = *buffer ? kBufferBytes : 0;
    *max_records = 0;
}

// A copy or fill: device work on a stream like a kernel, without launch dimensions.
template <class Record>
Launch transfer(const Record* m, const char* kind) {
    Launch l;
    l.kind = kind;
    l.name = std::string(kind) + " " + std::to_string(m->bytes) + " B";
    l.start_ns = m->start;
    l.end_ns = m->end;
    l.stream = m->streamId;
    l.correlation_id = m->correlationId;
    l.device = m->deviceId;
    return l;
}

void CUPTIAPI on_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    std::vector<Launch> batch;
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        Launch l;
        if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            batch.push_back(transfer(reinterpret_cast<const CUpti_ActivityMemcpy6*>(record), "memcpy"));
            continue;
        }
        if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            batch.push_back(transfer(reinterpret_cast<const CUpti_ActivityMemset4*>(record), "memset"));
            continue;
        }
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
            record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        // The name pointer belongs to CUPTI; copy it now.
        l.mangled = k->name ? k->name : "";
        l.name = demangle(k->name);
        l.start_ns = k->start;
        l.end_ns = k->end;
        l.grid[0] = k->gridX; l.grid[1] = k->gridY; l.grid[2] = k->gridZ;
        l.block[0] = k->blockX; l.block[1] = k->blockY; l.block[2] = k->blockZ;
        l.registers = k->registersPerThread;
        l.static_shared = k->staticSharedMemory;
        l.dynamic_shared = k->dynamicSharedMemory;
        l.local_mem_per_thread = k->localMemoryPerThread;
        l.shared_mem_executed = k->sharedMemoryExecuted;
        l.stream = k->streamId;
        l.correlation_id = k->correlationId;
        l.device = k->deviceId;
        batch.push_back(std::move(l));
    }
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
    std::free(buffer);
    std::lock_guard<std::mutex> lock(g_mutex);
    g_dropped += dropped;
    for (auto& l : batch) g_launches.push_back(std::move(l));
}

void write_launch(std::string& out, const Launch& l) {
    out += "{\"kind\":";
    json_string(out, l.kind);
    out += ",\"name\":";
    json_string(out, l.name);
    out += ",\"mangled\":";
    json_string(out, l.mangled);
    out += ",\"start_ns\":"; json_int(out, (long long)l.start_ns);
    out += ",\"end_ns\":"; json_int(out, (long long)l.end_ns);
    out += ",\"duration_ms\":";
    json_number(out, (double)(l.end_ns - l.start_ns) * 1e-6);
    out += ",\"grid\":[";
    for (int i = 0; i < 3; ++i) { if (i) out += ','; json_int(out, l.grid[i]); }
    out += "],\"block\":[";
    for (int i = 0; i < 3; ++i) { if (i) out += ','; json_int(out, l.block[i]); }
    out += "],\"registers\":"; json_int(out, l.registers);
    out += ",\"static_shared\":"; json_int(out, l.static_shared);
    out += ",\"dynamic_shared\":"; json_int(out, l.dynamic_shared);
    out += ",\"shared_mem\":"; json_int(out, (long long)l.static_shared + l.dynamic_shared);
    out += ",\"local_mem_per_thread\":"; json_int(out, l.local_mem_per_thread);
    out += ",\"shared_mem_executed\":"; json_int(out, l.shared_mem_executed);
    out += ",\"stream\":"; json_int(out, l.stream);
    out += ",\"correlation_id\":"; json_int(out, l.correlation_id);
    out += ",\"device\":"; json_int(out, l.device);
    out += '}';
}

}  // namespace

bool trace_active() { return g_active; }


Status timestamp(unsigned long long& ns) {
    uint64_t t = 0;
    KP_CUPTI(cuptiGetTimestamp(&t));
    ns = t;
    return Status::Ok();
}

Status trace_begin() {
    if (g_active) return Status::Fail(KP_ESTATE, "kp_trace_begin: a trace is already running");
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_launches.clear();
        g_dropped = 0;
    }
    if (!g_callbacks_registered) {
        KP_CUPTI(cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed));
        // the buffers handed to CUPTI come zeroed, so it need not zero them on the launching thread
        uint8_t zeroed = 1;
        size_t len = sizeof(zeroed);
        cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &len, &zeroed);
        g_callbacks_registered = true;
    }
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        while (g_spare.size() < kSpareBuffers) {
            uint8_t* b = zeroed_buffer();
            if (!b) break;
            g_spare.push_back(b);
        }
    }
    // CONCURRENT_KERNEL keeps kernels overlapping as they ran (KIND_KERNEL would serialize them).
    KP_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    // copies and fills are device work too: the timing's all-stream check must see them
    KP_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
    KP_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
    g_active = true;
    return Status::Ok();
}

Status trace_end(std::string& json) {
    if (!g_active) return Status::Fail(KP_ESTATE, "kp_trace_end: no trace is running");
    g_active = false;
    CUptiResult flush = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
    KP_TRY(from_cupti(flush, "cuptiActivityFlushAll"));

    std::vector<Launch> launches;
    size_t dropped;
    {
        std::lock_guard<std::mutex> lock(g_mutex);
        launches.swap(g_launches);
        dropped = g_dropped;
    }
    if (dropped)
        return Status::Fail(KP_ECUPTI, "kp_trace_end: CUPTI dropped " + std::to_string(dropped) +
                                           " activity records (buffer too small)");
    std::stable_sort(launches.begin(), launches.end(),
                     [](const Launch& a, const Launch& b) { return a.start_ns < b.start_ns; });
    json = "[";
    for (size_t i = 0; i < launches.size(); ++i) {
        if (i) json += ',';
        write_launch(json, launches[i]);
    }
    json += ']';
    return Status::Ok();
}

}  // namespace kp
