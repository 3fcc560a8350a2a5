# mmq_launch.py CUBIN SYMBOL ROWBYTES_PER_32 [TOKENS] [LAUNCHES]: launch one mmq kernel at
# 4096 x 14336 (random bytes, timing only) through the driver API with ctypes, so that ncu
# has a plain dynamically linked process to profile (fallback for the Go test binary).
import ctypes, sys
cu = ctypes.CDLL("libcuda.so.1")
def ck(r, what):
    if r != 0:
        raise SystemExit(f"{what}: CUresult {r}")
cubin, sym, rb32 = sys.argv[1], sys.argv[2], float(sys.argv[3])
tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 512
launches = int(sys.argv[5]) if len(sys.argv) > 5 else 4
bm, bn = {"r64t64": (64, 64), "r128t64": (128, 64), "r64t128": (64, 128)}[sym.rsplit("_", 1)[1]]
rows, k = 4096, 14336
ck(cu.cuInit(0), "cuInit")
dev, ctx, mod, fn = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
ck(cu.cuCtxSetCurrent(ctx), "setcurrent")
ck(cu.cuModuleLoad(ctypes.byref(mod), cubin.encode()), "cuModuleLoad")
ck(cu.cuModuleGetFunction(ctypes.byref(fn), mod, sym.encode()), "getfunction")
def alloc(n):
    p = ctypes.c_uint64()
    ck(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)), "alloc")
    ck(cu.cuMemsetD8_v2(p, ctypes.c_ubyte(0x11), ctypes.c_size_t(n)), "memset")
    return p.value
wb = int(rows * k / 32 * rb32)
w, x, y = alloc(wb), alloc(tokens * k // 32 * 36), alloc(4 * tokens * rows)
class Args(ctypes.Structure):
    _fields_ = [("w", ctypes.c_uint64), ("x", ctypes.c_uint64), ("y", ctypes.c_uint64), ("rows", ctypes.c_int32),
                ("k", ctypes.c_int32), ("tokens", ctypes.c_int32), ("xrb", ctypes.c_int32), ("ldy", ctypes.c_int32), ("hook", ctypes.c_int32)]
a = Args(w, x, y, rows, k, tokens, k // 32, rows, -1)
size = ctypes.c_size_t(ctypes.sizeof(a))
extra = (ctypes.c_void_p * 5)(1, ctypes.cast(ctypes.pointer(a), ctypes.c_void_p), 2, ctypes.cast(ctypes.pointer(size), ctypes.c_void_p), 0)
for _ in range(launches):
    ck(cu.cuLaunchKernel(fn, (rows + bm - 1) // bm, (tokens + bn - 1) // bn, 1, 128, 1, 1, 0, None, None, extra), "launch")
ck(cu.cuCtxSynchronize(), "sync")
print("ok", sym, tokens)
