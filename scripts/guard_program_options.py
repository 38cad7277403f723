# Fences boost::program_options add_options() chains with clang-format off/on (idempotent):
# clang-format cannot lay out the chained call operator readably. Run from the repository root.
import re, sys, subprocess
files = subprocess.check_output(['git', 'ls-files', '*.cpp', '*.hpp']).decode().split()
for f in files:
    lines = open(f).read().split('\n')
    out = []; i = 0; changed = False
    while i < len(lines):
        l = lines[i]
        if 'add_options()' in l and (i == 0 or 'clang-format off' not in lines[i-1]):
            indent = re.match(r'\s*', l).group(0)
            j = i; depth = 0
            while True:
                s = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j])
                s = re.sub(r'//.*', '', s)
                depth += s.count('(') - s.count(')')
                if depth <= 0 and s.rstrip().endswith(';'):
                    break
                j += 1
            out.append(indent + '// clang-format off')
            out.extend(lines[i:j+1])
            out.append(indent + '// clang-format on')
            i = j + 1; changed = True
            continue
        out.append(l); i += 1
    if changed:
        open(f, 'w').write('\n'.join(out))
