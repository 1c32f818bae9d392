#!/usr/bin/env bash
# Stages issue 30's third and fourth ports together (scripts/gpu-run/stage-ports3.sh and
# stage-ports4.sh into DEST/ports3 and DEST/ports4) with DEST/run.sh, which runs both on the
# GPU machine, one after the other, logs in $OUT/ports3 and $OUT/ports4 (or DEST/out/..).
# Usage: scripts/gpu-run/stage-ports34.sh DEST (a folder git ignores, e.g. .device-bin/ports34);
# then on the GPU machine `DEST/run.sh` (about 220 s: ports3 about 110, ports4 about 100;
# PORTS3_DEADLINE_S / PORTS4_DEADLINE_S cap each). Look for each script's lines (their headers)
# and, in $OUT/summary.txt, both summaries.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: stage-ports34.sh <dest>}
mkdir -p "$dest"
"$here/stage-ports3.sh" "$dest/ports3"
"$here/stage-ports4.sh" "$dest/ports4"
cat > "$dest/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the staged ports3.sh then ports4.sh (see scripts/gpu-run/stage-ports34.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=${OUT:-$here/out}
mkdir -p "$top/ports3" "$top/ports4"
OUT="$top/ports3" "$here/ports3/ports3.sh" > "$top/ports3.log" 2>&1
OUT="$top/ports4" "$here/ports4/ports4.sh" > "$top/ports4.log" 2>&1
{ echo "== ports3"; cat "$top/ports3/summary.txt"; echo "== ports4"; cat "$top/ports4/summary.txt"; } | tee "$top/summary.txt"
RUN
chmod +x "$dest/run.sh"
ls -la "$dest"
