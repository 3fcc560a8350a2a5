// launch_baseline: the same launch-overhead measurements as bench/ceilings, written in
// C against the CUDA driver API, so the cost Strata's purego path adds can be told
// apart from the driver's own. Built and run on the GPU machine by run.sh:
//   nvcc -O2 -o launch_baseline bench/device/launch_baseline.c -lcuda
// Same PTX (sm_50, JIT-compiled forward), same launch shapes (1 block of 32 threads),
// the 40-byte argument struct passed through extra, as Strata does.
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char ptx[] =
    ".version 4.2\n.target sm_50\n.address_size 64\n"
    ".visible .entry strata_empty()\n{\n\tret;\n}\n"
    ".visible .entry strata_empty_args40(\n\t.param .align 8 .b8 strata_empty_args40_param_0[40]\n)\n{\n\tret;\n}\n";

#define CK(x)                                                              \
  do {                                                                     \
    CUresult r_ = (x);                                                     \
    if (r_ != CUDA_SUCCESS) {                                              \
      const char* n_ = 0;                                                  \
      cuGetErrorName(r_, &n_);                                             \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, n_);      \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static void report(const char* name, double* v, int n) {
  qsort(v, n, sizeof *v, cmp);
  printf("%-62s %12.3f %-5s %12.3f %12.3f %5d\n", name, v[n / 2], "µs", v[0], v[n - 1], n);
}

int main(void) {
  CUdevice dev;
  CUcontext ctx;
  CUmodule mod;
  CUstream s;
  CUevent e0, e1;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CK(cuModuleLoadData(&mod, ptx));
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&e0, 0));
  CK(cuEventCreate(&e1, 0));
  printf("C baseline (cuLaunchKernel from C, same kernels and shapes)\n");
  printf("%-62s %12s %-5s %12s %12s %5s\n", "measurement", "median", "unit", "min", "max", "reps");
  const char* names[2] = {"strata_empty", "strata_empty_args40"};
  static double v[2000];
  for (int k = 0; k < 2; k++) {
    CUfunction f;
    CK(cuModuleGetFunction(&f, mod, names[k]));
    unsigned char args[40];
    memset(args, 0, sizeof args);
    size_t size = sizeof args;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    void** ex = k == 1 ? extra : NULL;
#define LAUNCH() CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, ex))
    for (int i = 0; i < 100; i++) LAUNCH();
    CK(cuStreamSynchronize(s));
    double dev_per[7], host_per[7];
    for (int rep = 0; rep < 7; rep++) {
      CK(cuEventRecord(e0, s));
      double t0 = now_us();
      for (int i = 0; i < 10000; i++) LAUNCH();
      host_per[rep] = (now_us() - t0) / 10000;
      CK(cuEventRecord(e1, s));
      CK(cuEventSynchronize(e1));
      float ms;
      CK(cuEventElapsedTime(&ms, e0, e1));
      dev_per[rep] = ms * 1e3 / 10000;
    }
    char label[128];
    snprintf(label, sizeof label, "%s back-to-back, device time per launch", names[k]);
    report(label, dev_per, 7);
    snprintf(label, sizeof label, "%s host submit per launch", names[k]);
    report(label, host_per, 7);
    for (int rep = 0; rep < 2000; rep++) {
      CK(cuEventRecord(e0, s));
      LAUNCH();
      CK(cuEventRecord(e1, s));
      CK(cuEventSynchronize(e1));
      float ms;
      CK(cuEventElapsedTime(&ms, e0, e1));
      v[rep] = ms * 1e3;
    }
    snprintf(label, sizeof label, "%s single launch, event-timed", names[k]);
    report(label, v, 2000);
    for (int rep = 0; rep < 2000; rep++) {
      double t0 = now_us();
      LAUNCH();
      CK(cuStreamSynchronize(s));
      v[rep] = now_us() - t0;
    }
    snprintf(label, sizeof label, "%s launch + stream sync, host clock", names[k]);
    report(label, v, 2000);
    for (int rep = 0; rep < 2000; rep++) {
      double t0 = now_us();
      LAUNCH();
      CK(cuEventRecord(e1, s));
      CUresult r;
      while ((r = cuEventQuery(e1)) == CUDA_ERROR_NOT_READY) {
      }
      CK(r);
      v[rep] = now_us() - t0;
    }
    snprintf(label, sizeof label, "%s launch + event-query polling, host clock", names[k]);
    report(label, v, 2000);
  }
  return 0;
}
