// The attention's row work shared by its two CPU paths (kernels-internal): ops_cpu.cpp's blocked prefill
// (ops::attention) and attention_decode.cpp's decode step.
#pragma once

#include <cstdint>

#include "focal_kernels/ops.h"
#include "target_isa.h"

namespace focal::ops {

namespace rows {

// Calls of at most this many new rows (a decode step, a few speculative rows) take attention_decode.
constexpr int kDecodeRows = 4;

// p[n] = softmax(raw[n] * scale), scale >= 0; metrics as in softmax_row. With inv_z_out, p keeps the unnormalised
// e[n] = exp(raw * scale - max) and *inv_z_out = 1 / sum e (the caller scales what it computes from p); metrics are
// those of the normalised row either way. p may be raw.
FOCAL_TARGET_CLONES void softmax_scaled_row(const float* raw, float scale, float* p, int n, float* metrics, int topk,
                                            const int32_t* relevant, int n_relevant, float* inv_z_out = nullptr);

// attention_row's work; with inv_z_out, p[first_key, n_vis) keeps the row's unnormalised exponentials and
// *inv_z_out their normalisation (as in softmax_scaled_row); p[0, first_key) is set to 0. p may be raw.
void attention_row_scaled(const float* raw, float scale, float softcap, int first_key, float* p, int n_vis,
                          float* metrics, int topk, const int32_t* relevant, int n_relevant, float* inv_z_out);

// Row `row` (of a.n_tokens) of query head h, whose scaled scores q.k * logit_scale fill tr[0, n_keys) over the
// keys the call computed (tr[0, lo) may be unset where the row's window starts at lo): tr becomes the row's
// unnormalised exponentials, 0 outside its window and past its last key, *inv_z their normalisation, and the
// row's metrics go to a.metrics. kept (or null): [n_keys] the raw scores as row_fn gets them, 0 outside.
void attention_exps_row(const AttentionArgs& a, int h, int row, float* tr, int n_keys, float* kept, float* inv_z);

// A captured head's nr rows pb[nr, n_keys] of exponentials become the probabilities row_fn gets: times inv_z[r]
// (the values softmax_row's normalisation stores), rounded to fp16 where a.probs_fp16.
void captured_probs(const AttentionArgs& a, float* pb, int nr, int n_keys, const float* inv_z);

}  // namespace rows

// ops::attention for a.n_tokens <= rows::kDecodeRows: the same results (output, metrics, rows handed to row_fn)
// computed with each cached key and value read once per call (attention_decode.cpp).
void attention_decode(const AttentionArgs& a);

}  // namespace focal::ops
