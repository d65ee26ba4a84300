#!/usr/bin/env bash
# split_text.sh TEXT FIRST SECOND — cut TEXT at the paragraph break ("\n\n")
# nearest after its middle byte: FIRST gets the part before (calibration),
# SECOND the rest (evaluation). The same cut the calibration tests make.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: split_text.sh TEXT FIRST SECOND" >&2; exit 2; }
python3 - "$@" <<'PY'
import sys
data = open(sys.argv[1], 'rb').read()
cut = data.find(b'\n\n', len(data) // 2)
if cut < 0:
    sys.exit("split_text.sh: no paragraph break after the middle of " + sys.argv[1])
cut += 2
open(sys.argv[2], 'wb').write(data[:cut])
open(sys.argv[3], 'wb').write(data[cut:])
PY
