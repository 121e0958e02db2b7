#!/usr/bin/env bash
# GPU check of agents/integrate.lua (exits 77 = skipped without a GPU): kernels inside whole models.
#  1. a Triton RMSNorm (tests/fixtures/integrate/rmsnorm_lastdim_triton.py) into every LlamaRMSNorm
#     of a Llama-style decoder built by transformers from a config, random weights (bf16);
#  2. examples/problems/36_rmsnorm.py's kernel (dim 1, no weight) into the same model: it computes
#     another function, so every target must be left out with the reason;
#  2b. the same kernel through examples/adapters/rmsnorm_dim1_as_llama.py (the hidden dimension moved
#     to dim 1 and back, the weight applied after): every target replaced, the model verified;
#  3. a Level 1 kernel (Triton ReLU, tests/fixtures/integrate/relu_triton.py, for KernelBench
#     level1/19_ReLU) into every ReLU of a Level 3 problem (level3/9_ResNet18.py), fp32.
# Prints each run's line and FIGURE lines with the in-model and standalone speedups.
#   KAGENT_KERNELBENCH=<folder with level1/ and level3/> (default ../shared/data/kernelbench, then .kb/kernelbench)
# Usage: tests/gpu/integrate_gpu_check.sh [out_dir]   (KAGENT_BIN overrides build/kagent-rt)
set -u
cd "$(dirname "$0")/../.."
. tests/gpu/require_gpu.sh
BIN="${KAGENT_BIN:-build/kagent-rt}"
OUT="${1:-/tmp/kagent-integrate}"
rm -rf "$OUT" && mkdir -p "$OUT"
KB="${KAGENT_KERNELBENCH:-}"
for c in ../shared/data/kernelbench .kb/kernelbench shared/data/kernelbench; do
  [ -z "$KB" ] && [ -d "$c/level3" ] && KB="$c"
done
FX=tests/fixtures/integrate
fails=0
"$BIN" agents/integrate.lua --kernel $FX/rmsnorm_lastdim_triton.py --kernel-problem $FX/rmsnorm_lastdim.py \
  --model $FX/llama_model.py --class LlamaRMSNorm --dtype bf16 --devices 0 --out "$OUT/llama" || fails=$((fails + 1))
"$BIN" agents/integrate.lua --kernel examples/kernels/36_rmsnorm.py --kernel-problem examples/problems/36_rmsnorm.py \
  --model $FX/llama_model.py --class LlamaRMSNorm --dtype bf16 --devices 0 --out "$OUT/llama36"
[ $? -eq 1 ] || fails=$((fails + 1))
"$BIN" agents/integrate.lua --kernel examples/kernels/36_rmsnorm.py --kernel-problem examples/problems/36_rmsnorm.py \
  --adapter examples/adapters/rmsnorm_dim1_as_llama.py \
  --model $FX/llama_model.py --class LlamaRMSNorm --dtype bf16 --devices 0 --out "$OUT/llama36_adapted" || fails=$((fails + 1))
if [ -d "$KB/level3" ]; then
  "$BIN" agents/integrate.lua --kernel $FX/relu_triton.py --kernel-problem "$KB/level1/19_ReLU.py" \
    --model "$KB/level3/9_ResNet18.py" --class ReLU --devices 0 --out "$OUT/resnet" || fails=$((fails + 1))
else
  echo "SKIP step 3: no KernelBench folder (set KAGENT_KERNELBENCH)"
fi
python3 - "$OUT" <<'PY'
import glob, json, sys
bad = []
for name in ("llama", "llama36", "llama36_adapted", "resnet"):
    for p in glob.glob("%s/%s/*/summary.json" % (sys.argv[1], name)):
        s = json.load(open(p))
        print("FIGURE %s: verified %s, %d of %d targets replaced, model %s -> %s ms, in the model %s, standalone %s%s" % (
            name, s["verified"], len(s["replaced"]), len(s["targets"]), s["model_ms_before"], s["model_ms_after"],
            s["in_model_speedup"], s["standalone_speedup"],
            " (faster standalone, slower in the model)" if s["standalone_faster_model_slower"] else ""))
        reasons = {t.get("reason") for t in s["targets"] if not t.get("matched")}
        if reasons:
            print("  left out: %s" % "; ".join(str(r)[:200] for r in reasons))
        if name == "llama36" and (s["verified"] or s["replaced"]):
            bad.append("llama36: the dim-1 kernel was put in")
        if name != "llama36" and not (s["verified"] and isinstance(s["in_model_speedup"], float)):
            bad.append("%s: %s" % (name, s.get("reason") or s.get("error")))
        m = s.get("in_model") or {}
        if s["verified"]:  # the evaluator's figure: its spread and the trust rules' record
            print("  in the model: p10-p90 %s-%s ms, spread %s, %s calls, trust %s" % (
                m.get("p10"), m.get("p90"), m.get("spread"), m.get("n"), json.dumps(m.get("trust"))))
            if not (isinstance(m.get("spread"), float) and isinstance(m.get("trust"), dict)):
                bad.append("%s: the in-model figure has no spread or trust record" % name)
for b in bad:
    print("FAIL " + b)
sys.exit(1 if bad else 0)
PY
check=$?
[ "$fails" -eq 0 ] && [ "$check" -eq 0 ] && echo "integrate GPU check: passed" && exit 0
echo "integrate GPU check: FAILED ($fails runs, check $check)"
exit 1
