#!/bin/bash
# usage: table.sh file.ptx out.tsv  -> entry regs spill_st spill_ld stack sass_count (attention* entries)
ptx=$1; out=$2; tmp=$(mktemp -d)
ptxas -arch=sm_90a -v -O3 "$ptx" -o $tmp/x.cubin 2> $tmp/v.txt
python3 - "$tmp/v.txt" > $tmp/regs.tsv <<'PY'
import sys,re
cur=None; d={}
for line in open(sys.argv[1]):
    m=re.search(r"Function properties for (\S+)",line)
    if m: cur=m.group(1); d[cur]={}; continue
    m=re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",line)
    if m and cur: d[cur].update(stack=m.group(1),st=m.group(2),ld=m.group(3)); continue
    m=re.search(r"Used (\d+) registers",line)
    if m and cur: d[cur]['regs']=m.group(1)
for k in sorted(d):
    if k.startswith('attention'): v=d[k]; print(k,v.get('regs'),v.get('st'),v.get('ld'),v.get('stack'),sep='\t')
PY
nvdisasm -c $tmp/x.cubin > $tmp/sass.txt
python3 - $tmp/sass.txt $tmp/regs.tsv > "$out" <<'PY'
import sys,re
counts={}; cur=None
for line in open(sys.argv[1]):
    m=re.match(r"\s*\.text\.(\S+):",line)
    if m: cur=m.group(1); counts[cur]=0; continue
    if cur and re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+\S",line): counts[cur]+=1
for line in open(sys.argv[2]):
    f=line.rstrip('\n').split('\t'); print('\t'.join(f+[str(counts.get(f[0],'?'))]))
PY
rm -rf $tmp
