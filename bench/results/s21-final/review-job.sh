#!/bin/bash
# Session 21 final call: the held-out review's repros (audit/2026-11-29) against merged main's
# wheel (staged by stage.sh in .device-bin/final), and fixpy's opt-in slow G21R-1 test.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
O=${OUT:-/tmp/rv-out}/review; mkdir -p "$O"
w=$(mktemp -d)
tar -xJf "$root/.device-bin/final/bins.tar.xz" -C "$w" python
py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
for f in "$w"/python/wheel/*.whl "$w"/python/pywheels/*.whl; do "$py" -m zipfile -e "$f" "$w/lib"; done
export PYTHONPATH="$w/lib" PYTHONDONTWRITEBYTECODE=1
cd "$here/audit"
for s in G21R-2/repro_real_torch.py G21R-2/repro_fake_torch.py G21R-2/repro_numpy_type.py open-gc-finalizers/repro_torch.py; do
  echo "== $s"; timeout 60 "$py" "$s" 2>&1 | tail -15; echo "rc=$?"
done > "$O/g21r2-gc.txt" 2>&1
{ echo "== G21R-1 attack 10 s (fixed wheel: any crash now inside torch's clone)"; timeout 40 "$py" G21R-1/repro.py attack 10 2>&1 | tail -8; echo "rc=$?"; } > "$O/g21r1.txt" 2>&1
{ echo "== fixpy slow G21R-1 tests (torch-only control beside)"; cd "$w/python/tests" 2>/dev/null || cd "$w"; FERROCUDA_SLOW_TESTS=1 timeout 90 "$py" -m pytest -q -rs -p no:cacheprovider -k "g21r1" . 2>&1 | tail -20; } > "$O/g21r1-slow.txt" 2>&1
tail -n 40 "$O"/*.txt
