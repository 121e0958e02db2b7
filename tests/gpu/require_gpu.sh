# Sourced by the shell GPU checks: exits 77 (skipped) where no GPU is visible.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q GPU; then
  echo "SKIP: no GPU"
  exit 77
fi
