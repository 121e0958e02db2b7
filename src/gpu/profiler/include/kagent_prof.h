/* libkagent_prof: CUPTI kernel tracing and Nsight-Compute-named metrics, behind a C ABI so the
 * Python evaluator can load it with ctypes inside the candidate's process.
 *
 * Every function returns a KP_* code; on failure kp_last_error() says why. Nothing here calls
 * exit() or abort(): a profiler failure must become a job result, not a dead evaluator.
 * JSON results are kept inside the library until the next call that produces one; copy them out.
 * Not thread-safe: one caller thread, one device, one session at a time (CUPTI allows a single
 * profiling client per process anyway). */
#ifndef KAGENT_PROF_H
#define KAGENT_PROF_H

#include <stddef.h>

#if defined(KP_BUILDING) && defined(__GNUC__)
#define KP_API __attribute__((visibility("default")))
#else
#define KP_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
    KP_OK = 0,
    KP_ENOTSUP = 1,  /* device, driver or configuration cannot profile (reason in kp_last_error) */
    KP_EPERM = 2,    /* counters not readable by this user (NVreg_RestrictProfilingToAdminUsers) */
    KP_EINVAL = 3,   /* bad argument: unknown metric name, empty list, too many ranges */
    KP_ESTATE = 4,   /* call out of order (e.g. pass_begin without profile_begin) */
    KP_ECUDA = 5,    /* CUDA driver error */
    KP_ECUPTI = 6,   /* other CUPTI error */
    KP_EBUSY = 7     /* another process is profiling this GPU: try again once it is done */
};

/* Version of this ABI; bump when a signature changes. */
KP_API int kp_abi_version(void);

/* Binds to `device`: the calling thread's current context if it is on that device, else the
 * device's primary context (retained); all the activity trace needs. CUPTI's profiler is set up
 * (and the device's support for range profiling checked) by the first kp_metrics_check or
 * kp_profile_begin, which fail with its reason and try again on the next call. */
KP_API int kp_init(int device);

/* Human-readable reason for the last failure (empty after success). */
KP_API const char* kp_last_error(void);

/* Last JSON document produced by kp_trace_end, kp_metrics_check or kp_profile_end. */
KP_API const char* kp_result(void);

/* Activity tracing over every stream of the process: kernels, memory copies and fills.
 * kp_trace_end flushes the records (the caller synchronizes the device first) and leaves a JSON
 * array in kp_result(), in start order:
 * [{"kind":"kernel"|"memcpy"|"memset","name","mangled","start_ns","end_ns","duration_ms",
 *   "grid":[x,y,z],"block":[x,y,z],
 *   "registers","static_shared","dynamic_shared","shared_mem","local_mem_per_thread",
 *   "shared_mem_executed" (the shared-memory carveout per SM the driver chose),
 *   "stream","correlation_id","device"}...] in start order. */
KP_API int kp_trace_begin(void);
KP_API int kp_trace_end(void);
/* Copies and fills carry kind, name ("memcpy <n> B"), start_ns, end_ns, duration_ms, stream,
 * correlation_id and device; their launch fields are zero.
 * kp_timestamp: now on CUPTI's clock, the clock of start_ns/end_ns (host-side marks). */
KP_API int kp_timestamp(unsigned long long* ns);
/* The "stream" value activity records carry for a CUstream (given as an integer handle). */
KP_API int kp_stream_id(unsigned long long stream, unsigned* id);

/* Checks a comma-separated metric list against this chip. kp_result():
 * {"supported":[...],"unsupported":[...],"passes":n} (passes for the supported ones). The
 * supported list's host object and config image are kept for the process (they cost tens of ms
 * to build), so a kp_profile_begin with the same list, in the same order, skips building them;
 * kp_shutdown drops them. */
KP_API int kp_metrics_check(const char* metrics_csv);

/* Range profiler, auto range (one range per kernel launch), in one of two replay modes:
 *   KP_REPLAY_KERNEL: CUPTI saves and restores device memory and replays each kernel as many
 *     times as the metric set needs; the forward runs once. The restores leave dirty lines in
 *     L2 that are written back during the kernel, so DRAM write counts run high.
 *   KP_REPLAY_USER: the caller runs the whole forward once per pass (the forward must give the
 *     same launches each time and not depend on its earlier runs) and can bring the caches to a
 *     known state before each pass, as Nsight Compute's cache control does.
 *   KP_REPLAY_USER_SWEEP: user replay, and the library itself sweeps the L2 (a read-only kernel
 *     over 4x its size, launched from a CUPTI launch callback after the device is idle) before
 *     every kernel of a pass, as `ncu --cache-control all` flushes before every kernel; the
 *     sweeps' own ranges are dropped. Every pass must launch the same kernel sequence.
 * Usage: kp_profile_begin; do { kp_profile_pass_begin; run the forward; synchronize;
 * kp_profile_pass_end(&done) } while (!done); kp_profile_end.
 * Unsupported metric names fail with KP_EINVAL (check them first). */
enum { KP_REPLAY_KERNEL = 0, KP_REPLAY_USER = 1, KP_REPLAY_USER_SWEEP = 2 };
KP_API int kp_profile_begin(const char* metrics_csv, int max_ranges, int replay_mode);
KP_API int kp_profile_pass_begin(void);
KP_API int kp_profile_pass_end(int* all_passes_done);
/* kp_result(): {"passes":n,"dropped":n,"sweeps":n,"ranges":[{"range":"0","metrics":{...}}...]}
 * ("sweeps": sweep ranges removed from "ranges", per pass; 0 outside KP_REPLAY_USER_SWEEP). */
KP_API int kp_profile_end(void);

/* Ends any open trace or profiling session and releases CUPTI state. Safe to call twice. */
KP_API void kp_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif
