import re, sys
def entries(path):
    text = open(path).read()
    out = {}
    for m in re.finditer(r'^\.(?:visible|weak) \.entry (\w+)\(', text, re.M):
        start = m.start()
        end = text.find('\n}\n', start)
        body = text[start:end]
        body = '\n'.join(l for l in body.split('\n') if not l.strip().startswith('.loc') and not re.match(r'^\$L__tmp\d+:$', l.strip()))
        body = re.sub(r'\$L__tmp\d+', 'TMP', body)
        body = re.sub(r'anon_\$_[0-9a-f]+_\$_\d+', 'ANON', body)
        out[m.group(1)] = body
    # strip the file header comments (compiler ids) not needed: compare entries only
    return out
b, a = entries(sys.argv[1]), entries(sys.argv[2])
same = [k for k in b if k in a and b[k] == a[k]]
diff = [k for k in b if k in a and b[k] != a[k]]
only = sorted(set(b) ^ set(a))
print(f"{sys.argv[1].split('/')[-1]}: {len(b)} entries before, {len(a)} after; identical {len(same)}, differing {len(diff)}, in one only {len(only)}")
for k in diff:
    print("  differs:", k)
if '-v' in sys.argv:
    import difflib
    for k in diff[:int(sys.argv[-1]) if sys.argv[-1].isdigit() else 3]:
        print('\n'.join(difflib.unified_diff(b[k].splitlines(), a[k].splitlines(), lineterm='', n=1)))
