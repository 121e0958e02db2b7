#!/usr/bin/env bash
# The evaluator as a Python package: `pip install --no-build-isolation --no-deps --target` of a
# copy of src/gpu/eval (offline, Debian's setuptools; the copy keeps build/ and *.egg-info out of
# the checkout), then the installed package imports and its version is the binary's.
# Usage: tests/install/pip_check.sh PYTHON
set -euo pipefail
python=${1:-/usr/bin/python3}
src=$(cd "$(dirname "$0")/../.." && pwd)
"$python" -m pip --version >/dev/null 2>&1 || { echo "SKIP: $python has no pip (Debian: python3-pip)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/kagent-pip-XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$src/src/gpu/eval" "$work/eval"
find "$work/eval/kagent_eval" -name __pycache__ -prune -exec rm -rf {} +
"$python" -m pip install --quiet --no-build-isolation --no-deps --no-index --target "$work/site" "$work/eval" \
  >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; echo "FAIL: pip install"; exit 1; }
got=$(cd "$work" && PYTHONPATH="$work/site" "$python" -c \
  'import kagent_eval, os; print(kagent_eval.__version__, os.path.dirname(kagent_eval.__file__))')
want=$(cat "$src/src/gpu/eval/kagent_eval/VERSION")
[ "$got" = "$want $work/site/kagent_eval" ] || { echo "FAIL: imported '$got', want version $want from $work/site"; exit 1; }
[ -x "$work/site/bin/kagent-eval-worker" ] || { echo "FAIL: no kagent-eval-worker script"; exit 1; }
[ -x "$work/site/bin/kagent-eval" ] || { echo "FAIL: no kagent-eval script"; exit 1; }
(cd "$work" && PYTHONPATH="$work/site" "$python" "$work/site/bin/kagent-eval" check --help | grep -q "verify\|problem") ||
  { echo "FAIL: kagent-eval check --help"; exit 1; }
(cd "$work" && PYTHONPATH="$work/site" "$python" "$work/site/bin/kagent-eval-worker" --help | grep -q -- "--device") ||
  { echo "FAIL: kagent-eval-worker --help"; exit 1; }
# every module of every floor's folder is installed (pyproject.toml lists the sub-packages)
missing=$(comm -23 <(cd "$src/src/gpu/eval" && find kagent_eval -name '*.py' | sort) \
                   <(cd "$work/site" && find kagent_eval -name '*.py' | sort))
[ -z "$missing" ] || { echo "FAIL: not installed by pip:"; echo "$missing"; exit 1; }
ls "$work/site" | grep -q "^kagent_eval-$want.dist-info$" || { echo "FAIL: no kagent_eval-$want.dist-info"; exit 1; }
echo "pip install ./src/gpu/eval: kagent_eval $want installed and importable"
