#!/usr/bin/env python3
"""Turns kernels/cuda/ops_cuda.cu into C++ for the CPU emulation in this directory (cuda_runtime.h):
kernel<<<grid, block, smem, stream>>>(args); (or kernel<T><<<..>>>) becomes
emu::launch(dim3(grid), dim3(block), smem, stream, "kernel", <a closure holding the args' values>): the arguments are
evaluated at the launch, as CUDA copies them then (a stream capture runs the kernel later), and a kernel named by a
local function pointer is copied too;
__shared__ arrays become static (blocks run one at a time), the dynamic shared array a buffer sized by the launch;
local includes of .cuh files beside the input are inlined first.
usage: make_emu_source.py IN.cu OUT.cpp"""
import os
import re
import sys


def split_top(cfg):
    parts, depth, cur = [], 0, ''
    for ch in cfg:
        depth += ch == '('
        depth -= ch == ')'
        if ch == ',' and depth == 0:
            parts.append(cur.strip())
            cur = ''
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def launch(m):
    name, cfg, args = m.group(1), m.group(2), m.group(3)
    parts = split_top(cfg) + ['0', 'nullptr'][len(split_top(cfg)) - 2:]
    return ('emu::launch(dim3(%s), dim3(%s), %s, %s, "%s", [=, emu_args = std::make_tuple(%s)]() mutable { '
            'std::apply([&](auto&... a) { %s(a...); }, emu_args); });' % (parts[0], parts[1], parts[2], parts[3], name,
                                                                        args, name))


def main():
    src = open(sys.argv[1]).read()
    # Local includes ("name.cuh" beside the .cu) are inlined, so their kernels are rewritten too.
    here = os.path.dirname(os.path.abspath(sys.argv[1]))
    src = re.sub(r'^#include "([^"/]+\.cuh)"\s*$', lambda m: open(os.path.join(here, m.group(1))).read(), src,
                 flags=re.M)
    out = src.replace('extern __shared__ float smem[];', 'float* smem = emu::dyn_smem_.data();')
    out = out.replace('__shared__', 'static')
    out = re.sub(r'^[ \t]*#pragma unroll.*$', '', out, flags=re.M)  # the host compiler knows no unroll hint
    # the kernel's name may carry template arguments: kernel<true><<<..>>>(..)
    out, n = re.subn(r'(\w+(?:<[^<>;()]*>)?)<<<(.*?)>>>\(([^;]*)\);', launch, out, flags=re.S)
    if n == 0 or '<<<' in out or '__shared__' in out:
        sys.exit('make_emu_source.py: %s: unexpected kernel launch or shared memory syntax' % sys.argv[1])
    with open(sys.argv[2] + '.tmp', 'w') as f:
        f.write('// Generated from %s by tests/cuda_emu/make_emu_source.py; do not edit.\n' % sys.argv[1] + out)
    os.replace(sys.argv[2] + '.tmp', sys.argv[2])


if __name__ == '__main__':
    main()
