#!/usr/bin/env bash
# Runs the GPU checks and benchmarks on a GPU machine, one phase per call (each fits in a few
# minutes), writing logs under $OUT (default /tmp/kagent-device). The binary and profiler
# library come from a build tree: KAGENT_BUILD (default build/).
#   bash bench/device_suite.sh portability|eval|devices|sandbox|profile|profile-app|agent|sweep|latency|
#                              trust|trust-ka|verdicts|parity-baselines|bench-ka|report|
#                              latency-compare|lease|throughput|dispatch|confirm-phases|sweep-cache|
#                              cuda|figures|floor|moved|all
# profile-app compares the multi-kernel targets with ncu's application replay (about 90 s per
# ncu run, so it is not part of `all`); sweep (the tuner over the five showcase problems, about
# 12 minutes on the H100: more than one 10-minute call, so run it again on the same folder to
# resume) is not either, nor bench-ka (agents/bench.lua on KernelAgent's artifacts:
# 2.5 minutes on the H100 without max-autotune, whose compiles add several; run it again until its
# table has the five problems, each call continuing the last), nor
# report (the beam step of the agent check alone, keeping its run folder for a screenshot).
set -uo pipefail
cd "$(dirname "$0")/.."
phase="${1:-all}"
OUT="${OUT:-/tmp/kagent-device}"
mkdir -p "$OUT"
build="${KAGENT_BUILD:-build}"
export KAGENT_BIN="$PWD/$build/kagent-rt"
export KAGENT_BUILD_DIR="$PWD/$build"  # specs that start the binary look for it here
prof=$(find "$build" -name 'libkagent_prof.so' 2>/dev/null | head -1)
[ -n "$prof" ] && export KAGENT_PROF_LIB="$PWD/$prof"
export PYTHONPATH="$PWD/src/gpu/eval" PYTHONUNBUFFERED=1
export KAGENT_DB="$OUT/kagent.db"
summary="$OUT/summary.txt"

step() {  # step NAME COMMAND... : runs, logs, and records the exit code
  local name="$1"; shift
  local t0=$(date +%s)
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  printf '%-28s rc=%-3s %4ss\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" | tee -a "$summary"
  tail -n 25 "$OUT/$name.log"
}

portability() {
  step env sh -c 'uname -a; cat /etc/os-release | head -2; nvidia-smi -L; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; ldd "$KAGENT_BIN"; "$KAGENT_BIN" --version'
  step hello "$KAGENT_BIN" examples/hello.lua
  step core_specs "$KAGENT_BIN" --log-level warn tests/lua/run.lua tests/lua/task_spec.lua tests/lua/proc_spec.lua tests/lua/core_spec.lua
}

case "$phase" in
  portability) portability ;;
  eval) step eval_gpu_check python3 tests/gpu/eval_gpu_check.py ;;
  devices) step devices_gpu_check bash tests/gpu/devices_gpu_check.sh ;;
  lease)  # 3 workers sharing GPU 0 through the timing lease: no overlap, jobs/min 1 vs 3, the control's median
         step lease_gpu_check bash tests/gpu/lease_gpu_check.sh --workers "${KAGENT_LEASE_WORKERS:-3}" ;;
  throughput)  # bench/throughput.lua: 32 knob variants of #4, 1 worker per GPU vs pipelined, 1 GPU vs all
         step throughput "$KAGENT_BIN" bench/throughput.lua --candidates "${KAGENT_THROUGHPUT_CANDIDATES:-32}" \
           ${KAGENT_THROUGHPUT_WORKERS:+--workers "$KAGENT_THROUGHPUT_WORKERS"}
         sed -n '/^pool /,$p' "$OUT/throughput.log" ;;
  dispatch)  # least-loaded dispatch: throughput of #4 with 1 and N workers per GPU, jobs per device
         step dispatch_gpu_check bash tests/gpu/dispatch_gpu_check.sh ${KAGENT_THROUGHPUT_WORKERS:+--workers "$KAGENT_THROUGHPUT_WORKERS"}
         sed -n '/^pool /,$p' "$OUT/dispatch_gpu_check.log" ;;
  confirm-phases)  # #4 confirmed twice on one database: where the confirmation's time goes, cold and cached;
         # and the compiled fingerprint its verdicts are kept under, the same from two processes
         step compiled_fingerprint_gpu_check python3 tests/gpu/compiled_fingerprint_gpu_check.py
         step confirm_phases_gpu_check bash tests/gpu/confirm_phases_gpu_check.sh "$OUT/confirm_phases"
         sed -n '/^== first/,$p' "$OUT/confirm_phases_gpu_check.log" ;;
  sweep-cache)  # the showcase tuner sweep cold then with cached baselines and verdicts: the time split
         # (KAGENT_SWEEP_ARGS="--max-concurrent 5" runs the five at once: 3 min 40 s then 2 min 21 s on
         # an H200, docs/results/2026-11-28-gpu-c.md; one at a time it took about 2 x 12 minutes
         # before #29: run it again on the same folder to continue)
         step sweep_cache_gpu_check bash tests/gpu/sweep_cache_gpu_check.sh "$OUT/sweep_cache"
         sed -n '/^== cold/,$p' "$OUT/sweep_cache_gpu_check.log" ;;
  sandbox) step sandbox_layers python3 bench/sandbox_layers.py
           step sandbox_default_gpu_check python3 tests/gpu/sandbox_default_gpu_check.py
           step sandbox_gpu_check python3 tests/gpu/sandbox_gpu_check.py ;;
  examples) step examples_check python3 tests/gpu/examples_check.py ;;
  profile) step profile_gpu_check python3 tests/gpu/profile_gpu_check.py --out "$OUT/profile_check.json" ;;
  profile-app) step profile_app_check python3 tests/gpu/profile_gpu_check.py --targets fixture,4 --repeat 5 --ncu-repeat 3 --ncu-replay application --no-roofline --out "$OUT/profile_app_check.json" ;;
  agent) step agent_gpu_check bash tests/gpu/agent_gpu_check.sh "$OUT/agent" ;;
  sweep) step sweep_gpu_check bash tests/gpu/sweep_gpu_check.sh "$OUT/sweep_showcase"
         cat "$OUT/sweep_showcase/table.md" ;;
  latency) step eval_latency python3 bench/eval_latency.py
           for m in sol full; do
             step profile_cost_$m python3 bench/profile_cost.py tests/gpu/profile_fixture_problem.py \
               tests/gpu/profile_fixture_kernel.py --metrics $m --no-ncu --breakdown
           done ;;
  trust) step trace_overhead python3 bench/trace_overhead.py
         step trust_gpu_check python3 tests/gpu/trust_gpu_check.py --part escapes,memory,compare,sanitize ;;
  trust-agent) KAGENT_AGENT_CHECK_STEPS="${KAGENT_AGENT_CHECK_STEPS:-trust,skill}" \
         step agent_gpu_check bash tests/gpu/agent_gpu_check.sh "$OUT/agent" ;;
  parity) step parity_77 python3 bench/baseline_parity.py examples/problems/77_conv_transpose3d.py --compile ;;
  trust-ka) step trust_ka python3 tests/gpu/trust_gpu_check.py --part ka,baselines ;;
  verdicts)  # every timed output checked, the physical bound, what the checks cost the figures
         step trust_verdicts python3 tests/gpu/trust_gpu_check.py --part escapes,algorithmic
         step timed_output_cost python3 bench/timed_output_cost.py
         KAGENT_AGENT_CHECK_STEPS=stale step agent_stale bash tests/gpu/agent_gpu_check.sh "$OUT/agent" ;;
  parity-baselines)  # the five showcase baselines (default timed loop) against do_bench; #82 over a long loop
         step parity_82 python3 bench/baseline_parity.py examples/problems/82_depthwise_conv2d.py --long 2
         step trust_baselines python3 tests/gpu/trust_gpu_check.py --part baselines --modes eager,compile ;;
  bench-ka)  # agents/bench.lua on KernelAgent's five artifacts; run again to continue (--resume)
         ka="${KAGENT_KA_ARTIFACTS:-}"
         for d in ../shared/data/ka-artifacts shared/data/ka-artifacts; do [ -z "$ka" ] && [ -d "$d" ] && ka=$d; done
         step bench_ka "$KAGENT_BIN" agents/bench.lua "${ka:-../shared/data/ka-artifacts}" --dtype bf16 \
           --json "$OUT/bench_ka.json" --csv "$OUT/bench_ka.csv" --resume
         sed -n '/^dtype /,$p' "$OUT/bench_ka.log" ;;
  report)  # the agent check's beam run on #36; its run folder (report.html) stays under $OUT for a screenshot
         KAGENT_AGENT_CHECK_STEPS=beam step report_beam bash tests/gpu/agent_gpu_check.sh "$OUT/report_beam"
         grep '^REPORT ' "$OUT/report_beam.log" ;;
  latency-compare)  # per-candidate overhead, this evaluator against KAGENT_OLD_EVAL (a copy of an earlier one)
         step eval_latency_now python3 bench/eval_latency.py --n 4 --fresh 0 --tag now
         [ -n "${KAGENT_OLD_EVAL:-}" ] && step eval_latency_old env KAGENT_EVAL_PYTHONPATH="$KAGENT_OLD_EVAL" \
           python3 bench/eval_latency.py --n 4 --fresh 0 --tag old --id-base 1000 ;;
  cuda)  # CUDA C++ candidates: load_inline builds before the lease, the cache, the library policy,
         # 4 cold builds at once; beam.lua and skill.lua --language cuda with the FAKE LLM (about 9 min)
         step load_inline_gpu_check python3 tests/gpu/load_inline_gpu_check.py --json "$OUT/load_inline.json"
         step language_gpu_check bash tests/gpu/language_gpu_check.sh "$OUT/language" ;;
  figures)  # one figure per kernel (last line, bench.lua, kagent-eval check within 3%) and the demo
         step figures_agree_gpu_check bash tests/gpu/figures_agree_gpu_check.sh "$OUT/figures_agree"
         mkdir -p "$OUT/demo"
         step demo bash -c "cd '$OUT/demo' && bash '$PWD/scripts/demo.sh' --rounds 2" ;;
  floor)  # the LLM-free floor's candidates against torch.compile; kernels inside whole models
         # (KAGENT_KERNELBENCH: a KernelBench copy, when ../shared is not beside the checkout)
         step floor_gpu_check bash tests/gpu/floor_gpu_check.sh "$OUT/floor"
         step integrate_gpu_check bash tests/gpu/integrate_gpu_check.sh "$OUT/integrate" ;;
  moved)  # the evaluator's checks that start its children by module name (kagent_eval/<floor>/)
         step eval_gpu_check python3 tests/gpu/eval_gpu_check.py
         step profile_gpu_check python3 tests/gpu/profile_gpu_check.py --out "$OUT/profile_check.json"
         step profile_fallback_check python3 tests/gpu/profile_fallback_check.py
         step review_gpu_check python3 tests/gpu/review_gpu_check.py
         step sandbox_default_gpu_check python3 tests/gpu/sandbox_default_gpu_check.py ;;
  all) portability
       step eval_gpu_check python3 tests/gpu/eval_gpu_check.py
       step sandbox_gpu_check python3 tests/gpu/sandbox_gpu_check.py
       step profile_gpu_check python3 tests/gpu/profile_gpu_check.py --out "$OUT/profile_check.json"
       step agent_gpu_check bash tests/gpu/agent_gpu_check.sh "$OUT/agent"
       step eval_latency python3 bench/eval_latency.py ;;
  *) echo "unknown phase '$phase'" >&2; exit 2 ;;
esac
echo "== summary"; cat "$summary"
