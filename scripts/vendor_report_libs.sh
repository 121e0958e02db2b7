#!/usr/bin/env bash
# Fetches the pinned browser libraries that the HTML reports inline (agents/tools/report/) from the
# npm registry and copies their minified files and licenses into third_party/report/, with
# VERSIONS listing each file's package, version, license and SHA-256. The files are committed:
# a report needs no network, and neither does a build. Run this only to change a version.
# Usage: scripts/vendor_report_libs.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# package@version  file in the package                      name in third_party/report/
libs=(
  "vega@6.4.0          build/vega.min.js                           vega.min.js"
  "vega-lite@6.5.0     build/vega-lite.min.js                      vega-lite.min.js"
  "diff@9.0.0          dist/diff.min.js                            diff.min.js"
  "diff2html@3.4.56    bundles/js/diff2html-ui-slim.min.js         diff2html-ui-slim.min.js"
  "diff2html@3.4.56    bundles/css/diff2html.min.css               diff2html.min.css"
)
# the slim diff2html bundle carries highlight.js (its optional dependency, pinned there)
licenses=("vega@6.4.0 LICENSE" "vega-lite@6.5.0 LICENSE" "diff@9.0.0 LICENSE" "diff2html@3.4.56 LICENSE.md"
          "highlight.js@11.11.1 LICENSE")

out=third_party/report
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

unpack() {  # unpack PKG@VERSION -> folder of the unpacked package
  local spec=$1 dir="$work/${1//[@\/]/_}"
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir"
    (cd "$dir" && npm pack --silent "$spec" >/dev/null && tar xzf ./*.tgz)
  fi
  echo "$dir/package"
}

{
  echo "# Browser libraries inlined into kagent-rt's HTML reports (scripts/vendor_report_libs.sh)"
  echo "# file | npm package@version | license | sha256"
} >"$out/VERSIONS"
for line in "${libs[@]}"; do
  read -r spec file name <<<"$line"
  src=$(unpack "$spec")
  cp "$src/$file" "$out/$name"
  license=$(cd "$src" && node -p 'require("./package.json").license')
  echo "$name | $spec | $license | $(sha256sum "$out/$name" | cut -d' ' -f1)" >>"$out/VERSIONS"
done
for line in "${licenses[@]}"; do
  read -r spec file <<<"$line"
  src=$(unpack "$spec")
  cp "$src/$file" "$out/LICENSE.${spec%@*}"
done
echo "vendored into $out:"
cat "$out/VERSIONS"
