// Weight matrices kept as stored: ggml block formats (Q4_0 .. Q6_K), fp16 and bf16. Dequantisation to fp32 and the
// products the forward needs, computed from the stored bytes. The math of every format is the one dequant_blocks
// defines; the fused kernels below compute sum_j w_j x_j in fp32 from exactly those w_j (only the summation order
// differs from an fp32 sgemm over the dequantised matrix). Format facts: docs/model-format.md.
#pragma once

#include <cstddef>
#include <cstdint>

namespace focal::ops {

// Stored types, numbered as ggml numbers them in GGUF tensor infos.
enum QType : int {
  kQF32 = 0,
  kQF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQBF16 = 30,
};

int qtype_block_elems(int type);  // values per block: 1 (F32, F16, BF16), 32, or 256 (K formats); 0 if unknown
int qtype_block_bytes(int type);  // bytes per block; 0 if unknown

// Dequantises n values (a multiple of the block size) of `type` from src (any alignment) into dst[n].
void dequant_blocks(int type, const uint8_t* src, float* dst, int64_t n);

// Blocks whose values include NaN or Inf: a block format's block with a non-finite fp16 scale or min (its integer
// quants are finite by construction), or an fp16 / bf16 value that is NaN or Inf (a block of one). Reads only the
// scale fields, in parallel.
struct NonFiniteScan {
  int64_t count = 0;
  int64_t first_block = 0;  // the lowest such block when count > 0
};
NonFiniteScan scan_nonfinite_stored(int type, const uint8_t* src, int64_t n_blocks);

// A weight matrix in its stored format, row-major [rows, cols] in the Hugging Face [out, in] layout: row r is
// stored at data + row_map[r] * row_bytes (row_map null: row r itself). cols is a multiple of the block size.
// panels: the same bytes re-laid out by pack_panels (below) instead; row() then does not apply and row_map is null.
struct QMatrix {
  int type = kQF32;
  const uint8_t* data = nullptr;  // [stored rows, row_bytes], or [rows / kPanelRows, cols / block values, panel block]
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
  const int32_t* row_map = nullptr;  // [rows] stored row of each row, or null
  bool panels = false;
  const uint8_t* row(int64_t r) const { return data + (size_t)(row_map ? row_map[r] : r) * row_bytes; }
};

// The decode layout of Q4_0, Q4_1 and Q2_K .. Q6_K (weights held in process memory on a CPU with AVX2) and Q8_0
// (with AVX-512 VNNI): rows in panels of kPanelRows, and within a panel, block by block, the 16 rows' block j side by
// side — their fp16 scales (and Q4_1's mins; Q4_K / Q5_K's d, dmin, scale words and Q5_K's fifth bits; Q6_K's d,
// scale words and high two bits; Q2_K's d, dmin and scale words, Q3_K's d, scale words and high bits), then the quants
// with 4 values of one row per 32-bit lane, 16 rows per 64 bytes (4-bit: low nibbles values 8c..8c+3, high nibbles
// 8c+4..8c+7 of chunk c, the K formats sub-block by sub-block; 2-bit: values 4k+i at bits 2k of byte i; Q8_0: values
// 4c..4c+3 of chunk c, stored + 128). One vpdpbusd then multiplies 16 rows at once with 4 broadcast
// values of x (AVX2: one vpmaddubsw 8 rows), with no horizontal sums (the layout llama.cpp's CPU repacking also
// uses). The same bytes per row as stored: a re-layout, not a copy.
constexpr int kPanelRows = 16;
// Whether pack_panels applies to `type` with `rows`, this CPU has the kernel that reads it and the kernel level
// (set_quant_isa, FOCAL_QUANT_ISA) allows it: a load under a lower level keeps the rows as stored.
bool panels_pay_off(int type, int64_t rows);
// dst[rows * row_bytes] = w (row-major, row_map followed) in the panel layout. dst is either w.data itself (packed in
// place: panel by panel through a copy of its 16 rows, or, with a row_map, through a copy of the whole matrix) or
// memory that does not overlap it.
void pack_panels(const QMatrix& w, uint8_t* dst);
// out[row_bytes] = row r of a panel matrix in the stored block format (the bytes pack_panels read).
void unpack_panel_row(const QMatrix& w, int64_t r, uint8_t* out);

// dst[nr, cols] = rows r0 .. r0 + nr - 1 of w, dequantised.
void dequant_rows(const QMatrix& w, int64_t r0, int64_t nr, float* dst);

// y[m, rows] = x[m, cols] . w^T. Up to kFusedMaxRows rows of x: each block of w is dequantised once in registers /
// L1 and dotted with every row of x (decode reads the weights once, in their stored size). More rows (prefill):
// panels of w's rows are dequantised into an fp32 tile (at most 8 MiB, one per calling thread) and multiplied with
// sgemm, or, where the CPU has AVX2 (set_blocked_prefill), the blocked product of quant_gemm.cpp. Panel
// matrices: a panel kernel for one row of x (VNNI; AVX2 for every panel format), else as above. Multi-threaded
// (OpenMP).
constexpr int kFusedMaxRows = 8;
void matmul_xwt_q(const float* x, const QMatrix& w, float* y, int m);
// ys[i][m, ws[i]->rows] = x[m, cols] . ws[i]^T for n matrices of the same cols sharing x (Q, K, V; gate, up). One
// row of x and panel matrices: x is split into digits once and every panel of them runs in one parallel region;
// otherwise one matmul_xwt_q each.
void matmul_xwt_q_shared(const float* x, const QMatrix* const* ws, float* const* ys, int n, int m);

// Which fused kernel the CPU runs for `type` and m rows of x: "avx512-vnni" (decode, m = 1: Q4_0, Q4_1, Q8_0, Q4_K,
// Q5_K, Q6_K with x in integer digits), "avx2" (hand-written AVX2 + FMA + F16C; decode of Q4_0, Q4_1 and the K
// formats with x in integer digits), or "generic" (block dequantisation compiled for the baseline, AVX2 and x86-64-v4 ISAs, picked at
// load time); for more rows than kFusedMaxRows, prefill's product: "sgemm" (dequantised tiles through the BLAS) or,
// opted in, "blocked-avx512" / "blocked-avx2" (quant_gemm.cpp: fp32 register tiles over weights dequantised a chunk
// at a time).
// For benchmarks and logs.
const char* qtype_kernel(int type, int m = 1);
// Stored-format bytes held for decode (the CPU backend adds each matrix it binds and subtracts it when it frees it).
// Past the last-level cache they stream from memory every token and the decode kernels prefetch 2 KiB ahead; within
// it, farther (the panels 6 KiB, the K formats' row kernels 4 KiB). Measured on the Xeon (480 MiB L3), 2
// threads: Llama-3-8B's shape decode at 2 KiB against the far distances, Q8_0 3.1 -> 3.6 tok/s, Q4_K_M 4.6 -> 4.8;
// SmolLM2 (96 MB, L3-resident) decodes ~8 % faster at 6 KiB than at 2. On AMD Zen 5 the K formats stream 8 KiB
// ahead: there the 8B shape's Q4_K decode measured 3-18 % faster than at 2 KiB, Q4_K_M -1..+14 % (three alternating
// rounds each, row kernels; docs/performance.md); the Q4_0 / Q4_1 panels showed no steady difference, and the Q4_K /
// Q5_K / Q6_K panels (since 2026-12-05) take the K formats' distance, unmeasured there. FOCAL_DECODE_PREFETCH=BYTES (at
// most 1 MiB) sets the streamed distance of the AVX-512 K-format kernels and of every panel kernel, to measure
// another CPU (the AVX2 row kernels keep their own).
void note_held_weight_bytes(int64_t delta);
// The most a fused kernel may use, below what the CPU has: tests compare the levels, benchmarks measure each.
// kAvx512 (all the CPU has) by default.
enum class QuantIsa { kGeneric = 0, kAvx2 = 1, kAvx512 = 2 };
void set_quant_isa(QuantIsa most);
// Prefill (more rows of x than kFusedMaxRows; panels from 2) through quant_gemm.cpp's blocked product where the CPU
// has AVX2: fp32 register tiles over chunks of w dequantised into L1, 1.6x the sgemm path on an 8B Q4_K_M prefill
// (docs/performance.md). On by default; FOCAL_BLOCKED_PREFILL=0 (or this) turns it off, for the sgemm path. Its fp32
// sums run in the order of OpenBLAS's SkylakeX sgemm (the accuracy suite's attention rows agree bit for bit under
// that core) and in another than its Haswell core's (up to 4e-6 there, 6.6e-6 in a Debug build; issue 14: 1e-5).
void set_blocked_prefill(bool on);
bool blocked_prefill();

}  // namespace focal::ops
