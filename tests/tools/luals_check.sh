#!/usr/bin/env bash
# lua-language-server --check over the checkout with the project's .luarc.json (types/ as the
# library): no undefined-global or undefined-field diagnostic about `kagent` in agents/, skills/
# or examples/. Exit 77 (skipped) when the server is not installed: Debian 12 has no package and
# the npm registry has none, so it must come from its own release (put it on PATH or set
# LUA_LANGUAGE_SERVER). tests/lua/lua_types_spec.lua checks the same names without the server.
set -euo pipefail
cd "$(dirname "$0")/../.."
luals=${LUA_LANGUAGE_SERVER:-$(command -v lua-language-server || true)}
if [ -z "$luals" ]; then
  echo "SKIP: lua-language-server is not installed (not in Debian 12 nor on npm); install it from its release to run this check"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/kagent-luals-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$luals" --check="$PWD" --configpath="$PWD/.luarc.json" --checklevel=Warning --logpath="$work" \
  >"$work/out.txt" 2>&1 || true
report="$work/check.json"
if [ ! -f "$report" ]; then
  if grep -qi "no problems found" "$work/out.txt"; then echo "lua-language-server: no problems found"; exit 0; fi
  cat "$work/out.txt"; echo "FAIL: lua-language-server wrote no $report"; exit 1
fi
python3 - "$report" "$PWD" <<'PY'
import json, sys, urllib.parse
report, root = sys.argv[1], sys.argv[2]
bad, total = [], 0
for uri, diags in json.load(open(report)).items():
    path = urllib.parse.unquote(uri.replace("file://", ""))
    rel = path[len(root) + 1:] if path.startswith(root + "/") else path
    if not rel.startswith(("agents/", "skills/", "examples/")):
        continue
    for d in diags:
        total += 1
        code, msg = d.get("code", ""), d.get("message", "")
        if code in ("undefined-global", "undefined-field") and "kagent" in msg:
            line = d.get("range", {}).get("start", {}).get("line", 0) + 1
            bad.append("%s:%d: %s: %s" % (rel, line, code, msg))
print("lua-language-server: %d diagnostics in agents/, skills/, examples/; %d about undefined kagent names" % (total, len(bad)))
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
PY
