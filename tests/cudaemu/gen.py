# gen.py SRC DST — part of the CPU emulator of the GPU (tests/cudaemu; a test double, see
# fakecuda.h for what it checks and what it cannot: cuBLAS numerics, real concurrency and races,
# timing). Rewrites the CUDA-only syntax of a .cu/.cuh into calls of the emulator, leaving
# everything else as it is: <<<grid, block, smem, stream>>> launches, __shared__ declarations
# (poisoned per block), extern __shared__ (dynamic shared memory), __launch_bounds__ (checked at
# run time). The CUDA headers are tests/cudaemu/include/, which all lead to fakecuda.h.
import re, sys

def split_top(s):
    out, depth, cur = [], 0, ''
    for ch in s:
        if ch in '([{<': depth += 1
        elif ch in ')]}>': depth -= 1
        if ch == ',' and depth == 0:
            out.append(cur.strip()); cur = ''
        else:
            cur += ch
    out.append(cur.strip())
    return out

def launches(s):
    pat = re.compile(r'([A-Za-z_]\w*(?:<[^<>;()]*>)?)\s*<<<(.*?)>>>\s*\(', re.S)
    n = 0
    def rep(m):
        nonlocal n
        n += 1
        cfg = split_top(m.group(2))
        assert 2 <= len(cfg) <= 4, cfg
        while len(cfg) < 4: cfg.append('0')
        return 'emu_launch(%s, dim3(%s), dim3(%s), (size_t)(%s), %s, ' % (m.group(1), *cfg)
    s = pat.sub(rep, s)
    s = s.replace(', )', ')')  # kernels without arguments
    assert '<<<' not in s, 'launch left'
    return s, n

def shared(s):
    # extern __shared__ T name[];  ->  T *name = emu_dyn_smem<T>();
    s, n1 = re.subn(r'extern\s+__shared__\s+([\w:]+)\s+(\w+)\s*\[\s*\]\s*;',
                    r'\1 *\2 = emu_dyn_smem<\1>();', s)
    out, i, n2 = '', 0, 0
    while True:
        j = s.find('__shared__', i)
        if j < 0:
            out += s[i:]; break
        out += s[i:j]
        k, depth = j, 0
        while True:  # the end of the declaration: ';' outside braces
            ch = s[k]
            if ch == '{': depth += 1
            elif ch == '}': depth -= 1
            elif ch == ';' and depth == 0: break
            k += 1
        decl = s[j + len('__shared__'):k]
        flat = re.sub(r'\{[^{}]*\}', ' ', decl)
        while '{' in flat: flat = re.sub(r'\{[^{}]*\}', ' ', flat)
        flat = re.sub(r'\[[^\]]*\]', '', flat)
        names = [re.findall(r'\w+', piece)[-1] for piece in split_top(flat)]
        out += 'static' + decl + ';' + ''.join(' emu_shared(&%s, sizeof %s);' % (x, x) for x in names)
        n2 += 1
        i = k + 1
    return out, n1, n2

def bounds(s):
    return re.subn(r'__launch_bounds__\(([^()]*)\)(.*?)\{', r'\2{ emu_bounds(\1);', s, flags=re.S)

src, dst = sys.argv[1], sys.argv[2]
s = open(src).read()
s, nl = launches(s)
s, nd, ns = shared(s)
s, nb = bounds(s)
print('%s: %d launches, %d dynamic and %d static shared declarations, %d launch bounds' % (src, nl, nd, ns, nb), file=sys.stderr)
open(dst, 'w').write(s)
