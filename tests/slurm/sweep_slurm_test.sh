#!/usr/bin/env bash
# A real single-node Slurm (Debian's slurm-wlm and munge, no systemd): munged with a generated
# key, slurmctld -D and slurmd -D with a generated slurm.conf, all in a temporary folder. Then
# tests/slurm/sweep_slurm_check.lua runs a CPU-mode sweep through it as a job array, kills two
# tasks mid-run and checks the merged database against a local run of the same sweep.
# Exit 77 (skipped) when the Slurm or munge packages, or torch for KAGENT_PYTHON, are missing.
# Every daemon and folder it makes is removed on exit, also on failure.
#   tests/slurm/sweep_slurm_test.sh [CHECK] (KAGENT_BIN, KAGENT_PYTHON: the binary and the python)
# CHECK: the Lua spec to run against this Slurm (default tests/slurm/sweep_slurm_check.lua;
# tests/slurm/fuse_slurm_test.sh passes its own).
set -uo pipefail
cd "$(dirname "$0")/../.."
CHECK="${1:-tests/slurm/sweep_slurm_check.lua}"
BIN="${KAGENT_BIN:-build/kagent-rt}"
PY="${KAGENT_PYTHON:-python3}"

for cmd in munged mungekey slurmctld slurmd sbatch squeue scancel scontrol sinfo; do
  if ! command -v "$cmd" >/dev/null 2>&1; then
    echo "SKIP: $cmd not found (install slurm-wlm and munge: scripts/setup.sh --tests does)"
    exit 77
  fi
done
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: slurmd must run as root to start jobs"
  exit 77
fi
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "SKIP: no torch for $PY (set KAGENT_PYTHON)"
  exit 77
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/kagent-slurm-XXXXXX")
chmod 755 "$T"
pids=()
cleanup() {
  local rc=$?
  if [ -n "${check_pid:-}" ] && kill -0 "$check_pid" 2>/dev/null; then
    kill "$check_pid" 2>/dev/null
    wait "$check_pid" 2>/dev/null
  fi
  # runs of a sweep driver that was stopped mid-way: the sweeps' task records name their processes
  for pid in $(cat "$T"/work/*/tasks/*.json 2>/dev/null | sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p'); do
    if { tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | grep -qF "$T/"; then kill -9 "$pid" 2>/dev/null; fi
  done
  if [ -f "$T/slurm.conf" ] && [ -n "${SLURM_CONF:-}" ]; then
    # jobs first (their processes belong to slurmstepd, not to us), then the daemons
    # the controller is this test's own: every job in it is ours
    squeue -h -o %A 2>/dev/null | xargs -r scancel >/dev/null 2>&1
    for _ in $(seq 1 30); do
      [ -z "$(squeue -h 2>/dev/null)" ] && break
      sleep 1
    done
  fi
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[$i]}" 2>/dev/null; done
  for p in "${pids[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    for f in slurmctld.log slurmd.log munge/munged.log; do
      [ -f "$T/$f" ] && { echo "== $f (last lines)"; tail -n 20 "$T/$f"; }
    done
  fi
  rm -rf "$T"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# munge: its own key, socket, pid and log files
mkdir -p "$T/munge" "$T/state" "$T/spool"
chmod 700 "$T/munge"
mungekey --create --keyfile="$T/munge/munge.key" || exit 1
munged -F --force --socket="$T/munge/sock" --key-file="$T/munge/munge.key" --log-file="$T/munge/munged.log" \
  --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/munged.seed" >/dev/null 2>&1 &
pids+=($!)

ctld_port=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
cat > "$T/slurm.conf" <<EOF
ClusterName=kagenttest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge/sock
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
MinJobAge=600
KillWait=5
NodeName=kagent-node NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=4 RealMemory=4000 State=UNKNOWN
PartitionName=kagent Nodes=kagent-node Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$T/slurm.conf"

for _ in $(seq 1 50); do [ -S "$T/munge/sock" ] && break; sleep 0.1; done
slurmctld -D >"$T/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N kagent-node >"$T/slurmd.out" 2>&1 &
pids+=($!)
up=""
for _ in $(seq 1 60); do
  state=$(sinfo -h -n kagent-node -o %T 2>/dev/null)
  if [ "$state" = "idle" ]; then up=1; break; fi
  sleep 0.5
done
if [ -z "$up" ]; then
  echo "FAIL: the test Slurm did not come up (node state: ${state:-none})"
  cat "$T/slurmctld.out" "$T/slurmd.out" 2>/dev/null | tail -n 20
  exit 1
fi
echo "slurm up: slurmctld :$ctld_port, slurmd :$slurmd_port, node kagent-node idle"

mkdir -p "$T/work"
# in the background, so a TERM to this script is handled at once (cleanup stops the check first)
KAGENT_SLURM_TEST_DIR="$T/work" KAGENT_BIN="$(readlink -f "$BIN")" KAGENT_PYTHON="$PY" \
  "$BIN" --env-file /dev/null --log-level warn tests/lua/run.lua "$CHECK" &
check_pid=$!
wait "$check_pid"
