#!/usr/bin/env bash
# The packages as a user gets them: builds the .debs with CPack from BUILD_DIR, unpacks them with
# `dpkg -x` (no root) into a clean folder, and from a folder outside the checkout runs
#   - `kagent-rt agents/beam.lua --help` (the script found on the search path),
#   - the CPU demo (share/kagent-rt/demo.sh) with a user skill in $KAGENT_HOME/skills that the
#     run must load and consult, and a ./.env that must lose to the environment,
#   - a CMake program that embeds kagent::core through find_package(kagent).
# Usage: tests/install/deb_check.sh BUILD_DIR PYTHON   (a ctest test; exit 77 without dpkg-deb)
set -euo pipefail
build=$(cd "$1" && pwd)
python=${2:-/usr/bin/python3}
src=$(cd "$(dirname "$0")/../.." && pwd)
command -v dpkg-deb >/dev/null || { echo "SKIP: dpkg-deb is not installed"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/kagent-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { printf '%-58s' "$1"; t0=$(date +%s%N); }
took() { echo "$(( ($(date +%s%N) - t0) / 1000000 )) ms"; }

step "cpack -G DEB"
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/pkg" >"$work/cpack.log" 2>&1 \
  || { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$work"/pkg/kagent-rt_*.deb)
dev=$(ls "$work"/pkg/kagent-rt-dev_*.deb)
echo "ok ($(du -h "$deb" | cut -f1), $(du -h "$dev" | cut -f1); $(took))"

step "Depends names Debian packages"
depends=$(dpkg-deb -f "$deb" Depends)
for want in libc6 libcurl4 python3 python3-numpy; do
  [[ "$depends" == *"$want"* ]] || fail "Depends of $deb lacks $want: $depends"
done
echo "ok ($depends)"

root="$work/root"
dpkg -x "$deb" "$root"
dpkg -x "$dev" "$root"
bin="$root/usr/bin/kagent-rt"
share="$root/usr/share/kagent-rt"
for f in "$bin" "$share/agents/beam.lua" "$share/skills/coalescing.lua" "$share/prompts/diagnose.md" \
         "$share/eval/kagent_eval/worker/__main__.py" "$share/eval/kagent_eval/common/wire.py" "$share/eval/kagent_eval/VERSION" "$share/types/kagent.lua" "$share/third_party/report/vega.min.js" \
         "$share/demo.sh" "$root/usr/lib/cmake/kagent/kagentConfig.cmake" "$root/usr/include/kagent/lua/runtime.hpp" \
         "$root/usr/share/doc/kagent-rt/copyright" "$root/usr/share/doc/kagent-rt/LICENSE" \
         "$root/usr/share/doc/kagent-rt/CITATION.cff" "$root/usr/share/man/man1/kagent-rt.1" \
         "$root/usr/share/bash-completion/completions/kagent-rt" "$root/usr/share/zsh/vendor-completions/_kagent-rt" \
         "$root/usr/share/fish/vendor_completions.d/kagent-rt.fish"; do
  [ -e "$f" ] || fail "the packages lack ${f#"$root"}"
done
step "man page and completion say what --help says"
grep -q '^\.SH AGENTS/BEAM\.LUA' "$root/usr/share/man/man1/kagent-rt.1" || fail "the man page has no agents/beam.lua section"
grep -q -- '--problem' "$root/usr/share/man/man1/kagent-rt.1" || fail "the man page lacks --problem"
head -1 "$root/usr/share/doc/kagent-rt/copyright" | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' \
  || fail "copyright is not in Debian's format"
bash -c "source '$root/usr/share/bash-completion/completions/kagent-rt'; COMP_WORDS=(kagent-rt agents/beam.lua --dt); COMP_CWORD=2;
  _kagent_rt; [ \"\${COMPREPLY[*]}\" = --dtype ]" || fail "the installed bash completion does not complete --dtype"
echo ok

# a user outside the checkout, with a folder of their own
user="$work/user"
mkdir -p "$user/cwd" "$user/home/skills"
cd "$user/cwd"
export KAGENT_HOME="$user/home" HOME="$user/cwd" KAGENT_DB="$user/cwd/mem.db"
unset KAGENT_ROOT KAGENT_LUA_LIB_DIR PYTHONPATH

step "kagent-rt --version"
"$bin" --version | grep -q "kagent-rt $(cat "$src/src/gpu/eval/kagent_eval/VERSION")" || fail "--version"
echo ok

step "kagent-rt agents/beam.lua --help (from $(basename "$PWD")/)"
out=$("$bin" --env-file /dev/null agents/beam.lua --help 2>&1) || fail "beam.lua --help exited $?: $out"
[[ "$out" == *"--problem"* ]] || fail "beam.lua --help does not list --problem: $out"
echo ok

step "kagent.root and kagent.path of the installed binary"
cat >"$user/cwd/where.lua" <<'EOF'
print(kagent.root)
print(table.concat(kagent.path, ":"))
EOF
where=$("$bin" --env-file /dev/null where.lua)
[ "$(echo "$where" | sed -n 1p)" = "$share" ] || fail "kagent.root is not $share: $where"
[ "$(echo "$where" | sed -n 2p)" = "$KAGENT_HOME:$share" ] || fail "kagent.path: $where"
echo ok

step "bash completion: entry scripts, options, policy names"
mkdir -p "$KAGENT_HOME/agents/policies"
echo 'return {}' >"$KAGENT_HOME/agents/policies/mine.lua"
completion=$(PATH="$root/usr/bin:$PATH" bash -c '
  source "$1"
  comp() { COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMPREPLY=(); _kagent_rt; echo "${COMPREPLY[*]}"; }
  comp kagent-rt agents/b; comp kagent-rt agents/beam.lua --pol; comp kagent-rt agents/beam.lua --policy ""
' _ "$root/usr/share/bash-completion/completions/kagent-rt")
[ "$(echo "$completion" | sed -n 1p)" = "agents/beam.lua agents/bench.lua" ] || fail "completing agents/b: $completion"
[ "$(echo "$completion" | sed -n 2p)" = "--policy" ] || fail "completing --pol: $completion"
# the shipped policy names, the user's (written after the completion file was), .lua files here
[ "$(echo "$completion" | sed -n 3p | tr ' ' '\n' | sort | tr '\n' ' ')" = "beam greedy mine skill tune where.lua " ] \
  || fail "completing --policy: $completion"
rm -r "$KAGENT_HOME/agents"
echo ok

# The user's skill never fires (nil score) but leaves a mark each time a run consults it.
cat >"$KAGENT_HOME/skills/user_marker.lua" <<EOF
return {
  name = "user_marker", category = "test", intent = "marks that user skills are consulted",
  expected = {}, avoid = {},
  applies = function()
    local f = io.open("$user/cwd/skill-consulted", "a"); f:write("x"); f:close()
    return nil
  end,
}
EOF
# A .env that must lose to the environment (kagent-rt's rule) and would run code if bash sourced it.
printf '%s\n' 'KAGENT_PYTHON=/nonexistent/python3' 'KAGENT_ENV_PROBE=$(touch sourced-as-bash)' >.env
step "CPU demo (share/kagent-rt/demo.sh --rounds 2)"
KAGENT_PYTHON="$python" "$share/demo.sh" --rounds 2 >"$work/demo.log" 2>&1 || { cat "$work/demo.log"; fail "the demo exited $?"; }
[ ! -e sourced-as-bash ] || fail "the demo sourced .env as bash"
run=$(ls -d runs/diag_matmul_small_*)
[ -f "$run/best_kernel.py" ] && [ -f "$run/summary.json" ] || { cat "$work/demo.log"; fail "no best_kernel.py/summary.json in $run"; }
# it ends with the one line that says what it showed (scripts/demo.sh, demo_verdict)
tail -n 1 "$work/demo.log" | grep -q '^demo: ' || { cat "$work/demo.log"; fail "the demo did not end with its verdict line"; }
[ -s skill-consulted ] || { cat "$work/demo.log"; fail "the user skill in \$KAGENT_HOME/skills was not consulted"; }
[ ! -e "$share/runs" ] || fail "the demo wrote into the installed tree"
echo "ok ($(took), run in ./$run)"

step "find_package(kagent): a program embedding kagent::core"
mkdir -p "$work/consumer"
cat >"$work/consumer/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(embed_kagent CXX)
find_package(kagent REQUIRED)
add_executable(embed_kagent main.cpp)
target_link_libraries(embed_kagent PRIVATE kagent::core)
set_target_properties(embed_kagent PROPERTIES ENABLE_EXPORTS ON CXX_STANDARD 20)
EOF
cat >"$work/consumer/main.cpp" <<'EOF'
// Runs a Lua script on an embedded kagent-rt runtime.
#include <lua/runtime.hpp>
#include <util/root_dir.hpp>
int main(int argc, char** argv) {
  kagent::RuntimeOptions opts;
  opts.script = argv[1];
  opts.args.assign(argv + 2, argv + argc);
  opts.root = kagent::find_root();
  kagent::Runtime rt(opts);
  return rt.run_main();
}
EOF
cat >"$work/consumer/hello.lua" <<'EOF'
kagent.task.sleep(0.01)
print(kagent.version .. " " .. kagent.json.encode({ args = kagent.args }))
EOF
cmake -S "$work/consumer" -B "$work/consumer/build" -G Ninja -DCMAKE_PREFIX_PATH="$root/usr" \
  -DCMAKE_BUILD_TYPE=Release >"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "configure"; }
cmake --build "$work/consumer/build" >>"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "build"; }
got=$(KAGENT_ROOT="$share" "$work/consumer/build/embed_kagent" "$work/consumer/hello.lua" a b)
[ "$got" = "$(cat "$src/src/gpu/eval/kagent_eval/VERSION") {\"args\":[\"a\",\"b\"]}" ] || fail "embedded run printed: $got"
echo "ok ($(took))"
echo "install check: 9 steps passed"
