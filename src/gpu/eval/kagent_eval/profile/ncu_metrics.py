"""Nsight-Compute-named metric sets, launch statistics, and time-weighted aggregation.

Pure Python (no torch, no CUDA): shared by the CUPTI path, the ncu CLI path and the tests.
"""
import time

# The 27 metrics of KernelAgent's published traces, in their order; all exist on Hopper with
# Nsight Compute 2025.3 (the fp32-pipe and memory-dependency-stall metrics it once asked for do not).
PUBLISHED = [
    "sm__cycles_active.avg",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__occupancy_limit_blocks",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__registers_per_thread",
    "sm__inst_executed.sum",
    "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes.sum.per_second",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "launch__shared_mem_per_block_allocated",
    "l1tex__t_sector_hit_rate.pct",
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "lts__t_sector_hit_rate.pct",
    "lts__throughput.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
    "smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct",
    "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
    "smsp__warp_issue_stalled_barrier_per_warp_active.pct",
    "smsp__warp_issue_stalled_branch_resolving_per_warp_active.pct",
    "smsp__sass_average_branch_targets_threads_uniform.pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
]

TIME_METRIC = "gpu__time_duration.sum"
COMPUTE_SOL = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_SOL = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"

FULL = PUBLISHED + [
    # The tensor pipe's share of active (not elapsed) cycles: the elapsed variant hides a kernel
    # whose tensor cores are busy only while its SMs are.
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    TIME_METRIC,
]

# Cheap set for ranking candidates: time, the two speed-of-light figures and DRAM traffic.
SOL = [
    TIME_METRIC,
    COMPUTE_SOL,
    MEMORY_SOL,
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
]

METRIC_SETS = {"sol": SOL, "full": FULL}

# Launch statistics are not hardware counters: Nsight Compute derives them from the launch
# configuration, and so do we (from the CUPTI kernel record and the device's limits).
LAUNCH_PREFIX = "launch__"


def resolve(metrics):
    """A set name ("sol"/"full") or an explicit list -> list of metric names."""
    if metrics is None:
        return list(FULL)
    if isinstance(metrics, str):
        if metrics in METRIC_SETS:
            return list(METRIC_SETS[metrics])
        return [m.strip() for m in metrics.split(",") if m.strip()]
    return list(metrics)


def split_launch(metrics):
    """(counter metrics for the profiler, launch metrics computed from the trace)."""
    counters = [m for m in metrics if not m.startswith(LAUNCH_PREFIX)]
    launch = [m for m in metrics if m.startswith(LAUNCH_PREFIX)]
    return counters, launch


# Per-SM limits by compute capability: (max blocks, max warps, registers, register allocation
# unit per warp, shared-memory allocation unit, shared memory reserved per block by the system).
_SM_LIMITS = {
    (7, 0): (32, 64, 65536, 256, 256, 0),
    (7, 5): (16, 32, 65536, 256, 256, 0),
    (8, 0): (32, 64, 65536, 256, 128, 1024),
    (8, 6): (16, 48, 65536, 256, 128, 1024),
    (8, 9): (24, 48, 65536, 256, 128, 1024),
    (9, 0): (32, 64, 65536, 256, 128, 1024),
    (10, 0): (32, 64, 65536, 256, 128, 1024),
    (12, 0): (32, 48, 65536, 256, 128, 1024),
}


def sm_limits(capability):
    return _SM_LIMITS.get(tuple(capability), _SM_LIMITS[(9, 0)])


def _round_up(x, unit):
    return -(-x // unit) * unit


def launch_metrics(launch, capability):
    """Nsight Compute's launch__* statistics for one kernel record of the trace.

    The shared-memory limit uses the carveout the driver actually chose (CUPTI's
    shared_mem_executed), which is what Nsight Compute reports too."""
    max_blocks, max_warps, regs_per_sm, reg_unit, smem_unit, smem_reserved = sm_limits(capability)
    threads = 1
    for d in launch.get("block", [1, 1, 1]):
        threads *= max(int(d), 1)
    warps = -(-threads // 32)
    regs = int(launch.get("registers", 0))
    smem = int(launch.get("static_shared", 0)) + int(launch.get("dynamic_shared", 0))
    smem_alloc = _round_up(smem, smem_unit) + smem_reserved
    out = {
        "launch__registers_per_thread": regs,
        "launch__shared_mem_per_block_allocated": smem_alloc,
        "launch__occupancy_limit_blocks": max_blocks,
        "launch__occupancy_limit_warps": max_warps // warps if warps else max_blocks,
    }
    if regs > 0:
        per_warp = _round_up(regs * 32, reg_unit)
        out["launch__occupancy_limit_registers"] = (regs_per_sm // per_warp) // warps
    else:
        out["launch__occupancy_limit_registers"] = max_blocks
    carveout = int(launch.get("shared_mem_executed", 0))
    if smem_alloc > 0 and carveout > 0:
        out["launch__occupancy_limit_shared_mem"] = min(carveout // smem_alloc, 255)
    else:
        out["launch__occupancy_limit_shared_mem"] = max_blocks
    return out


def is_additive(metric):
    """Counters (bytes, instructions, cycles, time) add across kernels; rates, percentages and
    launch statistics are averaged, weighted by each kernel's time."""
    if metric.startswith(LAUNCH_PREFIX):
        return False
    if metric.endswith(".per_second") or ".pct" in metric or ".ratio" in metric:
        return False
    return metric.endswith((".sum", ".avg", ".max", ".min"))


def aggregate(rows, weight_key="duration_ms"):
    """Time-weighted aggregate over kernel rows [{duration_ms, metrics: {...}}].

    Additive counters are summed; everything else is sum(value * time) / sum(time) over the
    kernels that report it. For rates such as dram__bytes.sum.per_second this equals the total
    over the total time."""
    sums, weights = {}, {}
    for row in rows:
        w = float(row.get(weight_key) or 0.0)
        for name, value in (row.get("metrics") or {}).items():
            if value is None:
                continue
            if is_additive(name):
                sums[name] = sums.get(name, 0.0) + float(value)
                weights.setdefault(name, None)
            else:
                sums[name] = sums.get(name, 0.0) + float(value) * w
                weights[name] = (weights.get(name) or 0.0) + w
    out = {}
    for name, total in sums.items():
        w = weights[name]
        if w is None:
            out[name] = total
        elif w > 0:
            out[name] = total / w
    return out


def max_sol_pct(metrics):
    """Nsight Compute's "hardware efficiency" as KernelAgent reports it: max(compute SOL, memory
    SOL). Kept only for comparison; it calls an L1-bound gather "at roofline"."""
    vals = [metrics.get(COMPUTE_SOL), metrics.get(MEMORY_SOL)]
    vals = [float(v) for v in vals if v is not None]
    return max(vals) if vals else None


def by_kernel_name(rows):
    """The published *_ncu_metrics.json "metrics" map: kernel name -> metrics. A kernel launched
    several times is aggregated over its launches (time-weighted), like the forward aggregate."""
    groups = {}
    for row in rows:
        groups.setdefault(row["name"], []).append(row)
    return {name: aggregate(group) for name, group in groups.items()}


def profile_result(rows, passes, metadata, **fields):
    """The result every profiler backend gives (profiling.profile): the launches and their
    metrics by kernel name and time-weighted over the forward, `fields` of the backend's own,
    and `metadata` with a timestamp."""
    total = aggregate(rows)
    return dict({"metrics": by_kernel_name(rows), "kernels": rows, "aggregate": total,
                 "total_ms": sum(r["duration_ms"] for r in rows), "passes": passes,
                 "ncu_max_sol_pct": max_sol_pct(total)}, **fields,
                metadata=dict(metadata, timestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                time.gmtime())))
