#!/usr/bin/env bash
# regs.sh DIR: ptxas -v (sm_90) of every *.ptx in DIR -> DIR/regs.tsv (file, kernel, registers, spill stores, spill loads)
dir=$1
out=$dir/regs.tsv; : > "$out"
for p in "$dir"/*.ptx; do
  f=$(basename "$p" .ptx); f=${f%.sm_90}
  ptxas -arch=sm_90 -v "$p" -o /dev/null 2>&1 | awk -v f="$f" '
    /Compiling entry function/ { match($0, /'"'"'[^'"'"']*'"'"'/); k=substr($0, RSTART+1, RLENGTH-2); ss=0; sl=0 }
    /bytes spill stores/ { for (i=1;i<=NF;i++) { if ($(i+1)=="bytes" && $(i+2)=="spill" && $(i+3)~/^stores/) ss=$i; if ($(i+1)=="bytes" && $(i+2)=="spill" && $(i+3)~/^loads/) sl=$i } }
    /Used [0-9]+ registers/ { match($0, /Used [0-9]+ registers/); r=substr($0, RSTART+5, RLENGTH-15); if (k!="") print f "\t" k "\t" r "\t" ss "\t" sl; k="" }' >> "$out"
done
wc -l "$out"
