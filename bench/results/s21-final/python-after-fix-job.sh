#!/bin/bash
# Session 21: the ferrocuda-torch fix for test_s21 (DLPack calls leaving the primary context
# current through parked events' destruction), the merged package's tests with the fixed wheel.
set -u
root=$PWD
O=${OUT:-/tmp/py21}; mkdir -p "$O"
w=$(mktemp -d)
tar -xJf .device-bin/final/bins.tar.xz -C "$w" python
py=/opt/torch/.venv/bin/python; [ -x "$py" ] || py=python3
for f in .device-bin/py21/wheel/*.whl "$w"/python/pywheels/*.whl; do "$py" -m zipfile -e "$f" "$w/lib"; done
cd "$w/python/tests"
REQUIRE_GPU=1 PYTHONPATH="$w/lib" PYTHONDONTWRITEBYTECODE=1 timeout 200 "$py" -m pytest -q -rs -p no:cacheprovider . > "$O/pytest.txt" 2>&1
echo "rc=$?" >> "$O/pytest.txt"
tail -15 "$O/pytest.txt"
