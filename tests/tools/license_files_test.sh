#!/usr/bin/env bash
# The files people look for: LICENSE (MIT), CITATION.cff whose version is the project's
# (src/gpu/eval/kagent_eval/VERSION, the one source), and the .deb's copyright in Debian's format.
set -euo pipefail
cd "$(dirname "$0")/../.."
head -1 LICENSE | grep -qx "MIT License" || { echo "LICENSE is not the MIT licence"; exit 1; }
want=$(cat src/gpu/eval/kagent_eval/VERSION)
got=$(sed -n 's/^version: "\(.*\)"$/\1/p' CITATION.cff)
[ "$got" = "$want" ] || { echo "CITATION.cff says version '$got', the project is $want"; exit 1; }
grep -q '^cff-version: 1\.2\.0$' CITATION.cff || { echo "CITATION.cff has no cff-version 1.2.0"; exit 1; }
head -1 packaging/copyright | grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/$' ||
  { echo "packaging/copyright is not in Debian's copyright format"; exit 1; }
echo "LICENSE, CITATION.cff ($got), packaging/copyright: ok"
