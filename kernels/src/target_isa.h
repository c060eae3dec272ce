// Function attributes for the CPU kernels' ISA variants (kernels-internal).
#pragma once

// Hot loops are compiled for AVX2 and x86-64-v4 besides the baseline and picked at load time (an ifunc resolver).
// ThreadSanitizer builds leave them out: TSan instruments the resolver, which runs before TSan is initialised.
#if defined(__SANITIZE_THREAD__)
#define FOCAL_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FOCAL_UNDER_TSAN 1
#endif
#endif
#ifdef FOCAL_UNDER_TSAN
#define FOCAL_TARGET_CLONES
#else
#define FOCAL_TARGET_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#endif

// Hand-written AVX2 kernels; callers check the CPU first (quant_types.h: cpu_has_avx2).
#define FOCAL_AVX2 __attribute__((target("avx2,fma,f16c")))

// Hand-written AVX-512 kernels with VNNI; callers check the CPU first (quant_types.h: cpu_has_avx512_vnni).
#define FOCAL_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
