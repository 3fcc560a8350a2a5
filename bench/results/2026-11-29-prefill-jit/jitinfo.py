# jitinfo.py: what the driver's JIT makes of a PTX file, through the same call the runtime
# uses (cuModuleLoadDataEx), with the verbose info log, per kernel registers / local memory /
# static shared memory (cuFuncGetAttribute) and blocks per SM (cuOccupancy...) at 0 and at
# given dynamic shared bytes; optionally the JIT's cubin (cuLink*) for cuobjdump.
#
#   python3 jitinfo.py PTX [DYNFILE] [CUBIN_OUT]
#
# DYNFILE: lines "symbol bytes" (the dynamic shared memory some launch passes). Needs only
# libcuda.so.1 (ctypes).
import ctypes as C
import re
import sys
import time

cu = C.CDLL("libcuda.so.1")


def ck(r, what):
    if r != 0:
        s = C.c_char_p()
        cu.cuGetErrorString(r, C.byref(s))
        raise RuntimeError(f"{what}: {r} {s.value}")


ck(cu.cuInit(0), "cuInit")
dev = C.c_int()
ck(cu.cuDeviceGet(C.byref(dev), 0), "cuDeviceGet")
ctx = C.c_void_p()
ck(cu.cuDevicePrimaryCtxRetain(C.byref(ctx), dev), "retain")
ck(cu.cuCtxSetCurrent(ctx), "setcurrent")
ver = C.c_int()
cu.cuDriverGetVersion(C.byref(ver))

ptx_path = sys.argv[1]
dyn = {}
if len(sys.argv) > 2 and sys.argv[2] != "-":
    for line in open(sys.argv[2]):
        f = line.split()
        if len(f) == 2:
            dyn[f[0]] = int(f[1])
cubin_out = sys.argv[3] if len(sys.argv) > 3 else None
ptx = open(ptx_path, "rb").read() + b"\0"
names = re.findall(rb"\.entry\s+(\w+)\(", ptx)

# CUjit_option: 3 INFO_LOG_BUFFER, 4 INFO_LOG_BUFFER_SIZE_BYTES, 5 ERROR_LOG_BUFFER,
# 6 ERROR_LOG_BUFFER_SIZE_BYTES, 12 LOG_VERBOSE
N = 1 << 20
info = C.create_string_buffer(N)
err = C.create_string_buffer(N)
opts = (C.c_int * 5)(3, 4, 5, 6, 12)
vals = (C.c_void_p * 5)(C.cast(info, C.c_void_p), C.c_void_p(N), C.cast(err, C.c_void_p), C.c_void_p(N), C.c_void_p(1))
mod = C.c_void_p()
t = time.time()
r = cu.cuModuleLoadDataEx(C.byref(mod), ptx, 5, opts, vals)
el = time.time() - t
print(f"== {ptx_path}: driver {ver.value}, cuModuleLoadDataEx {el:.2f} s, {len(names)} kernels")
if r != 0:
    print(err.value.decode(errors="replace"))
    ck(r, "cuModuleLoadDataEx")
log = info.value.decode(errors="replace")
# the verbose log, condensed like the ptxas -v summaries
cur = None
for line in log.splitlines():
    m = re.search(r"Compiling entry function '(\w+)'", line)
    if m:
        cur = m.group(1)
        continue
    if cur and ("spill" in line or "Used" in line):
        print(f"  jit-log {cur}: {line.split(':', 1)[-1].strip()}")
if not log.strip():
    print("  (empty info log)")
for n in names:
    f = C.c_void_p()
    ck(cu.cuModuleGetFunction(C.byref(f), mod, n), "getfunction")
    a = {}
    for k, i in (("regs", 4), ("local", 3), ("static_smem", 1), ("maxthreads", 0)):
        v = C.c_int()
        cu.cuFuncGetAttribute(C.byref(v), i, f)
        a[k] = v.value
    occ = []
    sym = n.decode()
    for d in sorted({0, dyn.get(sym, 0)}):
        if d > 48 * 1024:
            cu.cuFuncSetAttribute(f, 8, d)  # MAX_DYNAMIC_SHARED_SIZE_BYTES
        b = C.c_int(-1)
        rr = cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(C.byref(b), f, 128, C.c_size_t(d))
        occ.append(f"dyn {d}: {b.value if rr == 0 else 'err %d' % rr} blocks/SM")
    print(f"  attr {sym}: regs {a['regs']}, local {a['local']} B, static smem {a['static_smem']} B; " + ", ".join(occ))
cu.cuModuleUnload(mod)

if cubin_out:
    st = C.c_void_p()
    ck(cu.cuLinkCreate_v2(0, None, None, C.byref(st)), "cuLinkCreate")
    ck(cu.cuLinkAddData_v2(st, 1, ptx, C.c_size_t(len(ptx)), b"in.ptx", 0, None, None), "cuLinkAddData")
    out, size = C.c_void_p(), C.c_size_t()
    ck(cu.cuLinkComplete(st, C.byref(out), C.byref(size)), "cuLinkComplete")
    open(cubin_out, "wb").write(C.string_at(out, size.value))
    cu.cuLinkDestroy(st)
    print(f"  JIT cubin (cuLink): {cubin_out}, {size.value} bytes")
