// Host simulation launcher (parity/hostsim_test.go). Built per generated source:
//   clang++-19 -std=c++20 -O1 -pthread -rdynamic -I <this dir> -I kernels/out/include \
//     -DHOSTSIM_SOURCE='"kernels/out/sm_90/mmq.cu"' -DHOSTSIM_ARGS=strata_mmq_args main.cpp
// Protocol (little-endian), stdin: symbol (u32 length + bytes), grid x y z, block x (u32 each),
// args (u32 length + bytes), n allocations (u32), each: device base (u64), size (u64), bytes.
// Device addresses in the args that fall inside an allocation are translated to host
// addresses. Runs every block of the grid in order, then writes every allocation back to
// stdout (same order, bytes only).
#include HOSTSIM_SOURCE

#include <dlfcn.h>

#include <cstdio>
#include <thread>
#include <vector>

typedef void (*kernel_fn)(const struct HOSTSIM_ARGS);

static void rd(void* p, size_t n) {
  if (fread(p, 1, n, stdin) != n) {
    fprintf(stderr, "hostsim: short input\n");
    exit(2);
  }
}
static u32 rd32() {
  u32 v;
  rd(&v, 4);
  return v;
}
static u64 rd64() {
  u64 v;
  rd(&v, 8);
  return v;
}

int main() {
  std::string sym(rd32(), '\0');
  rd(sym.data(), sym.size());
  const u32 gx = rd32(), gy = rd32(), gz = rd32(), tx = rd32();
  std::vector<u8> args(rd32());
  rd(args.data(), args.size());
  const u32 n = rd32();
  std::vector<u64> base(n);
  std::vector<std::vector<u8>> mem(n);
  for (u32 i = 0; i < n; ++i) {
    base[i] = rd64();
    mem[i].resize(rd64());
    rd(mem[i].data(), mem[i].size());
  }
  if (args.size() != sizeof(struct HOSTSIM_ARGS) || tx == 0 || tx > hostsim::kMaxThreads || tx % 32) {
    fprintf(stderr, "hostsim: bad launch (args %zu, want %zu; block %u)\n", args.size(), sizeof(struct HOSTSIM_ARGS), tx);
    return 2;
  }
  for (size_t o = 0; o + 8 <= args.size(); o += 8) {
    u64 v;
    memcpy(&v, &args[o], 8);
    for (u32 i = 0; i < n; ++i) {
      if (v >= base[i] && v < base[i] + mem[i].size()) {
        v = (u64)(uintptr_t)(mem[i].data() + (v - base[i]));
        memcpy(&args[o], &v, 8);
        break;
      }
    }
  }
#ifdef HOSTSIM_TRANSLATE_MEMORY
  // Device addresses stored in memory (moe_decode's slot tables): every 8-byte aligned word
  // of an allocation that falls inside an allocation is translated for the run, and put back
  // afterwards where the kernel left it unchanged. Data matching by chance is negligible
  // only because the Go side places allocations at a base whose high bytes kernel data does
  // not hold (hostsim_test.go's simHarness says which and why).
  struct moved {
    u8* at;
    u64 dev, host;
  };
  std::vector<moved> restore;
  for (u32 i = 0; i < n; ++i) {
    for (size_t o = 0; o + 8 <= mem[i].size(); o += 8) {
      u64 v;
      memcpy(&v, &mem[i][o], 8);
      for (u32 j = 0; j < n; ++j) {
        if (v >= base[j] && v < base[j] + mem[j].size()) {
          const u64 h = (u64)(uintptr_t)(mem[j].data() + (v - base[j]));
          memcpy(&mem[i][o], &h, 8);
          restore.push_back({&mem[i][o], v, h});
          break;
        }
      }
    }
  }
#endif
  kernel_fn fn = (kernel_fn)dlsym(RTLD_DEFAULT, sym.c_str());
  if (!fn) {
    fprintf(stderr, "hostsim: no kernel %s\n", sym.c_str());
    return 2;
  }
  struct HOSTSIM_ARGS a;
  memcpy(&a, args.data(), sizeof a);
  hostsim::bdx = tx, hostsim::gdx = gx, hostsim::gdy = gy, hostsim::gdz = gz;
  // One std::thread per thread of a block, kept for every block. A thread that returns
  // early drops out of its block's barriers (on a GPU it would never reach them); the block
  // barriers are rebuilt for the next block by the completion step of the end-of-block
  // barrier, which every thread reaches once per block.
  std::barrier<>* block_bar = nullptr;
  std::vector<std::barrier<>*> wbars(tx / 32, nullptr);
  auto fresh = [&]() noexcept {
    delete block_bar;
    block_bar = new std::barrier<>(tx);
    hostsim::block_bar = block_bar;
    for (u32 w = 0; w < tx / 32; ++w) {
      delete wbars[w];
      wbars[w] = new std::barrier<>(32);
      hostsim::warps[w].bar = wbars[w];
    }
  };
  fresh();
  std::barrier end_bar(tx, fresh);
  std::vector<std::thread> th;
  for (u32 t = 0; t < tx; ++t)
    th.emplace_back([&, t] {
      hostsim::tid = t;
      for (u32 z = 0; z < gz; ++z)
        for (u32 y = 0; y < gy; ++y)
          for (u32 x = 0; x < gx; ++x) {
            hostsim::bx = x, hostsim::by = y, hostsim::bz = z;
            fn(a);
            hostsim::block_bar->arrive_and_drop();
            hostsim::warps[t >> 5].bar->arrive_and_drop();
            end_bar.arrive_and_wait();
          }
    });
  for (auto& t : th) t.join();
#ifdef HOSTSIM_TRANSLATE_MEMORY
  for (const moved& m : restore) {
    u64 now;
    memcpy(&now, m.at, 8);
    if (now == m.host) memcpy(m.at, &m.dev, 8);
  }
#endif
  for (u32 i = 0; i < n; ++i) fwrite(mem[i].data(), 1, mem[i].size(), stdout);
  return 0;
}
