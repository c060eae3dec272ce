// Binding a model's tensors to its weights (weight_binder.h).
#include "weight_binder.h"

#include <cstring>
#include <functional>

#include "focal/error.h"
#include "focal_kernels/quant.h"
#include "gguf_model.h"

namespace focal {

namespace {

// Non-finite values of a tensor in its file's dtype: count of NaN and of ±Inf, and the first such element.
struct NonFinite {
  size_t nan = 0, inf = 0, first = 0;
};

// Non-finite values of n IEEE floats of `bytes` bytes each (4: fp32, 2: fp16 or bf16), read as bit patterns from
// possibly unaligned memory: all exponent bits set is Inf (mantissa 0) or NaN.
NonFinite scan_nonfinite(const uint8_t* data, size_t n, WeightType type) {
  const size_t bytes = type == WeightType::kF32 ? 4 : 2;
  const uint32_t exp_mask = type == WeightType::kF32 ? 0x7F800000u : type == WeightType::kBF16 ? 0x7F80u : 0x7C00u;
  const uint32_t mant_mask = type == WeightType::kF32 ? 0x007FFFFFu : type == WeightType::kBF16 ? 0x007Fu : 0x03FFu;
  NonFinite r;
  for (size_t i = 0; i < n; ++i) {
    uint32_t b = 0;
    std::memcpy(&b, data + bytes * i, bytes);  // little-endian host, as the loaders assume
    if ((b & exp_mask) == exp_mask) {
      if (r.nan + r.inf == 0) r.first = i;
      ((b & mant_mask) ? r.nan : r.inf)++;
    }
  }
  return r;
}

}  // namespace

WeightBinder::WeightBinder(Backend& be, const LoadOptions& options, ModelConfig& c, const TensorMap& all,
                           std::string dir, std::string cfg_path, GgufModel* gguf, bool held)
    : be_(be),
      options_(options),
      c_(c),
      all_(all),
      dir_(std::move(dir)),
      cfg_path_(std::move(cfg_path)),
      gguf_(gguf),
      held_(held),
      from_gguf_(gguf != nullptr) {}

const StTensor* WeightBinder::lookup(const std::string& name, const std::vector<Dim>& dims, bool required) {
  std::vector<int64_t> shape;
  std::string labels;
  for (const Dim& d : dims) {
    shape.push_back(d.n);
    labels += (labels.empty() ? "" : ", ") + d.from;
  }
  auto it = all_.find(name);
  if (it == all_.end()) {
    // A required one is reported when bind() has asked for every name: the file's tensors it never asked for then
    // say what a misnamed one is called.
    if (required && missing_.empty()) missing_ = name;
    return nullptr;
  }
  const StTensor& t = *it->second.first;
  if (t.shape != shape) {
    std::string why;
    if (t.shape.size() == 2 && shape.size() == 2 && t.shape[0] == shape[1] && t.shape[1] == shape[0])
      why =
          gpt2_layout_ ? " — it looks transposed: GPT-2 stores Conv1D weights as [in, out]" : " — it looks transposed";
    throw Error("'" + it->second.second + "': tensor '" + name + "' has shape " + shape_str(t.shape) + ", expected " +
                shape_str(shape) + " = [" + labels + "] from " + cfg_path_ + why);
  }
  return &t;
}

int WeightBinder::stored_type(const StTensor& t, bool want_transposed) const {
  if (options_.weights != WeightsMode::kNative || t.shape.size() != 2) return -1;
  int type = t.stored_type;
  if (!t.to_f32) type = t.dtype == "BF16" ? ops::kQBF16 : t.dtype == "F16" ? ops::kQF16 : -1;
  if (type < 0 || type == ops::kQF32 || t.stored_transposed != want_transposed) return -1;
  const int64_t cols = want_transposed ? t.shape[0] : t.shape[1];
  const int be = ops::qtype_block_elems(type);
  return be > 0 && cols % be == 0 ? type : -1;
}

StoredWeight WeightBinder::stored_weight(const StTensor& t, int type, const std::string& file, int64_t row0,
                                         int64_t n_rows, int64_t cols) {
  StoredWeight sw;
  sw.type = type;
  sw.cols = cols;
  sw.rows = n_rows;
  sw.row_bytes = (size_t)(cols / ops::qtype_block_elems(type)) * (size_t)ops::qtype_block_bytes(type);
  sw.data = t.data + (size_t)row0 * sw.row_bytes;
  if (t.perm_heads > 0 && n_rows == (int64_t)t.perm_heads * t.perm_d_head) {  // HF row (h, s, i) <- (h, i, s)
    const int dh = t.perm_d_head, half = dh / 2;
    sw.row_map.resize((size_t)n_rows);
    for (int h = 0; h < t.perm_heads; ++h)
      for (int s = 0; s < 2; ++s)
        for (int i = 0; i < half; ++i) sw.row_map[(size_t)h * dh + s * half + i] = h * dh + 2 * i + s;
  }
  const int64_t n_blocks = (int64_t)(n_rows * sw.row_bytes / ops::qtype_block_bytes(type));
  const ops::NonFiniteScan nf = ops::scan_nonfinite_stored(type, sw.data, n_blocks);
  if (nf.count > 0) {
    const std::string tensor = t.source_name.empty() ? "'" + t.name + "'" : "'" + t.source_name + "' (" + t.name + ")";
    const std::string what = "'" + file + "': tensor " + tensor + " holds " + std::to_string(nf.count) +
                             " blocks with a non-finite value or scale (the first at element " +
                             std::to_string(nf.first_block * ops::qtype_block_elems(type)) + ")";
    if (!options_.allow_nonfinite_weights)
      throw Error(what +
                  " — the checkpoint is broken; to study it anyway, load it with --allow-nonfinite-weights (focal) "
                  "or allow_nonfinite_weights=True (Python)");
    c_.warnings.push_back(what + "; loaded as they are");
  }
  // Held in memory on a CPU with the kernel for it: Q4_0 / Q4_1 / Q8_0 / Q2_K .. Q6_K rows re-laid out in panels
  // of 16 for decode (ops::pack_panels; row_map applied), in place; the file's checksum still hashes its own bytes.
  if (held_ && ops::panels_pay_off(type, n_rows)) {
    if (relaid_.insert(sw.data).second) {
      ops::QMatrix src = sw.view(), packed = sw.view();
      packed.row_map = nullptr;
      packed.panels = true;
      std::vector<int32_t> stored_to_row;  // inverse of row_map: where stored row s went
      if (!sw.row_map.empty()) {
        stored_to_row.resize(sw.row_map.size());
        for (size_t r = 0; r < sw.row_map.size(); ++r) stored_to_row[(size_t)sw.row_map[r]] = (int32_t)r;
      }
      gguf_->file->relayout(
          sw.data, n_rows, sw.row_bytes,
          [&src](uint8_t* bytes) {
            src.data = bytes;
            ops::pack_panels(src, bytes);  // in place
          },
          [packed, stored_to_row](int64_t s, uint8_t* out) {
            ops::unpack_panel_row(packed, stored_to_row.empty() ? s : stored_to_row[(size_t)s], out);
          });
    }
    sw.row_map.clear();
    sw.panels = true;
  }
  any_stored_ = true;
  return sw;
}

Weight WeightBinder::keep(const std::string& name, std::vector<int64_t> shape, size_t n, bool decay, WeightBuffer* mat,
                          DeviceBuffer* vec) {
  Weight weight = mat ? mat->get() : Weight::of_f32(vec->data(), n);
  w_->params.push_back(ParamRef{name, std::move(shape), weight.f32(), n, decay, weight});
  if (mat)
    w_->matrices.push_back(std::move(*mat));
  else
    w_->storage.push_back(std::move(*vec));
  n_params_ += n;
  return weight;
}

Weight WeightBinder::take(const std::string& name, const std::vector<Dim>& dims, bool required, bool matrix,
                          const std::function<void(std::vector<float>&)>& host_fn, bool table) {
  const StTensor* tp = lookup(name, dims, required);
  if (!tp) return Weight{};
  const StTensor& t = *tp;
  auto it = all_.find(name);
  std::vector<int64_t> shape = t.shape;
  auto check_finite = [&](const NonFinite& nf) {
    if (nf.nan + nf.inf == 0) return;
    const std::string tensor = t.source_name.empty() ? "'" + name + "'" : "'" + t.source_name + "' (" + name + ")";
    const std::string what = "'" + it->second.second + "': tensor " + tensor + " holds " + std::to_string(nf.nan) +
                             " NaN and " + std::to_string(nf.inf) + " infinite values (the first at element " +
                             std::to_string(nf.first) + ")";
    if (!options_.allow_nonfinite_weights)
      throw Error(what +
                  " — the checkpoint is broken; to study it anyway, load it with --allow-nonfinite-weights (focal) "
                  "or allow_nonfinite_weights=True (Python)");
    c_.warnings.push_back(what + "; loaded as they are");
  };
  const size_t n = t.numel();
  WeightBuffer mat;
  DeviceBuffer vec;
  const int st_type = matrix && !host_fn ? stored_type(t, false) : -1;
  if (st_type >= 0) {
    const StoredWeight sw = stored_weight(t, st_type, it->second.second, 0, t.shape[0], t.shape[1]);
    // rows where the mapped file has them (a token table: where the backend gathers them best)
    mat = WeightBuffer(be_, table ? be_.upload_table_stored(sw) : be_.upload_weight_stored(sw));
  } else if (matrix && !host_fn && !t.to_f32 && (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16")) {
    const WeightType type = t.dtype == "BF16"  ? WeightType::kBF16
                            : t.dtype == "F16" ? WeightType::kF16
                                               : WeightType::kF32;
    check_finite(scan_nonfinite(t.data, n, type));
    mat = WeightBuffer(be_, be_.upload_weight(t.data, type, n));  // straight from the mapped file
  } else {
    std::vector<float> f32 = tensor_to_f32(t, it->second.second);  // throws for unsupported dtypes
    check_finite(scan_nonfinite(reinterpret_cast<const uint8_t*>(f32.data()), n, WeightType::kF32));
    if (host_fn) host_fn(f32);
    if (matrix) {
      mat = WeightBuffer(be_, be_.upload_weight(f32.data(), WeightType::kF32, n));
    } else {
      vec = DeviceBuffer(be_, n);
      be_.upload(vec.data(), f32.data(), n);
    }
  }
  const bool decay =
      name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 && name.find("norm") == std::string::npos;
  used_.insert(name);
  return keep(name, shape, n, decay, matrix ? &mat : nullptr, &vec);
}

std::vector<Weight> WeightBinder::take_parts(const std::string& name, const std::vector<Dim>& dims, bool conv1d,
                                             const std::vector<int64_t>& rows, bool matrix) {
  const StTensor* tp = lookup(name, dims, true);
  if (!tp) return std::vector<Weight>(rows.size());  // missing: bind() reports it
  const StTensor& t = *tp;
  if (const int st_type = matrix ? stored_type(t, conv1d) : -1; st_type >= 0) {  // row blocks of the stored rows
    const int64_t cols = conv1d ? t.shape[0] : t.shape[1];
    std::vector<Weight> out;
    int64_t row0 = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const StoredWeight sw = stored_weight(t, st_type, all_.at(name).second, row0, rows[i], cols);
      const size_t cnt = (size_t)(rows[i] * cols);
      WeightBuffer mat(be_, be_.upload_weight_stored(sw));
      out.push_back(keep(name + "#" + std::to_string(i), {rows[i], cols}, cnt, false, &mat, nullptr));
      row0 += rows[i];
    }
    used_.insert(name);
    return out;
  }
  std::vector<float> f32 = tensor_to_f32(t, all_.at(name).second);
  const NonFinite nf = scan_nonfinite(reinterpret_cast<const uint8_t*>(f32.data()), f32.size(), WeightType::kF32);
  if (nf.nan + nf.inf > 0) {
    const std::string what = "'" + all_.at(name).second + "': tensor '" + name + "' holds " + std::to_string(nf.nan) +
                             " NaN and " + std::to_string(nf.inf) + " infinite values";
    if (!options_.allow_nonfinite_weights)
      throw Error(what +
                  " — the checkpoint is broken; to study it anyway, load it with --allow-nonfinite-weights (focal) "
                  "or allow_nonfinite_weights=True (Python)");
    c_.warnings.push_back(what + "; loaded as they are");
  }
  const int64_t cols = t.shape.size() == 2 ? (conv1d ? t.shape[0] : t.shape[1]) : 1;
  if (conv1d) {  // [in, out] -> [out, in]
    std::vector<float> tr(f32.size());
    const int64_t in = t.shape[0], out = t.shape[1];
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o) tr[(size_t)(o * in + i)] = f32[(size_t)(i * out + o)];
    f32.swap(tr);
  }
  std::vector<Weight> out;
  size_t off = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t cnt = (size_t)(rows[i] * cols);
    WeightBuffer mat;
    DeviceBuffer vec;
    if (matrix) {
      mat = WeightBuffer(be_, be_.upload_weight(f32.data() + off, WeightType::kF32, cnt));
    } else {
      vec = DeviceBuffer(be_, cnt);
      be_.upload(vec.data(), f32.data() + off, cnt);
    }
    off += cnt;
    std::vector<int64_t> shape =
        t.shape.size() == 2 ? std::vector<int64_t>{rows[i], cols} : std::vector<int64_t>{rows[i]};
    out.push_back(keep(name + "#" + std::to_string(i), shape, cnt, false, matrix ? &mat : nullptr, &vec));
  }
  used_.insert(name);
  return out;
}

std::unique_ptr<Model::Weights> WeightBinder::bind(const ArchSpec& spec, bool has_tau_w) {
  auto weights = std::make_unique<Model::Weights>();
  w_ = weights.get();
  gpt2_layout_ = spec.layout == TensorLayout::kGpt2;
  const std::string layer_prefix = gpt2_layout_ ? "transformer.h." : "model.layers.";
  const std::string hd = " * " + field("head_dim", "llama.attention.key_length");
  const Dim H{c_.hidden, field("hidden_size", "llama.embedding_length")},
      V{c_.vocab_size, field("vocab_size", "vocab")},
      I{c_.intermediate, field("intermediate_size", "llama.feed_forward_length")},
      QD{(int64_t)c_.n_heads * c_.d_head, field("num_attention_heads", "llama.attention.head_count") + hd},
      KD{(int64_t)c_.n_kv_heads * c_.d_head, field("num_key_value_heads", "llama.attention.head_count_kv") + hd},
      D{c_.d_head, field("head_dim", "llama.attention.key_length")}, One{1, "1"};
  const ArchConfig& arch = c_.arch;
  // Gemma's RMSNorm scales by (1 + w): the 1 is added to the stored weights once, here (fp32, as transformers does).
  const std::function<void(std::vector<float>&)> plus_one = [](std::vector<float>& v) {
    for (float& x : v) x = 1.0f + x;
  };
  auto take_norm = [&](const std::string& name) {
    return take(name, {H}, true, false, arch.norm_plus_one ? plus_one : nullptr).f32();
  };
  const bool gpt2 = gpt2_layout_;
  if (gpt2) {
    const Dim P{c_.max_positions, field("n_positions", "gpt2.context_length")};
    w_->embed = take("transformer.wte.weight", {V, H}, true, true, nullptr, !c_.tied_embeddings);
    w_->pos_embed = take("transformer.wpe.weight", {P, H}, true, true);
    w_->final_norm = take("transformer.ln_f.weight", {H}).f32();
    w_->final_norm_b = take("transformer.ln_f.bias", {H}).f32();
  } else {
    w_->embed = take("model.embed_tokens.weight", {V, H}, true, true, nullptr, !c_.tied_embeddings);
    w_->final_norm = take_norm("model.norm.weight");
  }
  if (c_.tied_embeddings) {
    w_->lm_head = w_->embed;
    used_.insert("lm_head.weight");  // some exporters store the tied copy too
    // ... and a copy that differs (an edited or mis-exported file) is said: the embedding is the head here, while
    // transformers loads the stored lm_head into both.
    const auto head = all_.find("lm_head.weight");
    const auto emb = all_.find(gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight");
    if (head != all_.end() && emb != all_.end()) {
      const StTensor &h = *head->second.first, &e = *emb->second.first;
      if (h.data && e.data &&
          (h.dtype != e.dtype || h.shape != e.shape || h.n_bytes != e.n_bytes ||
           std::memcmp(h.data, e.data, h.n_bytes) != 0))
        c_.warnings.push_back("'" + head->second.second +
                              "': config.json ties the embeddings (tie_word_embeddings), but the stored "
                              "lm_head.weight differs from the embedding: the embedding is used as the output head "
                              "(transformers 4.47.1 loads lm_head.weight into both)");
    }
  } else {
    w_->lm_head = take("lm_head.weight", {V, H}, true, true);
  }
  const Dim H3{3 * (int64_t)c_.hidden, "3 * " + H.from}, I2{2 * (int64_t)c_.intermediate, "2 * " + I.from},
      QKV{QD.n + 2 * KD.n, "(" + QD.from + " + 2 * " + KD.from + ")"};
  w_->layers.resize(c_.n_layers);
  for (int l = 0; l < c_.n_layers; ++l) {
    const std::string p = layer_prefix + std::to_string(l) + ".";
    LayerWeights& L = w_->layers[l];
    if (gpt2) {  // Conv1D weights stored [in, out]; c_attn holds q, k and v side by side
      L.attn_norm = take(p + "ln_1.weight", {H}).f32();
      L.attn_norm_b = take(p + "ln_1.bias", {H}).f32();
      auto qkv = take_parts(p + "attn.c_attn.weight", {H, H3}, true, {QD.n, KD.n, KD.n}, true);
      auto qkv_b = take_parts(p + "attn.c_attn.bias", {H3}, false, {QD.n, KD.n, KD.n}, false);
      L.wq = qkv[0], L.wk = qkv[1], L.wv = qkv[2];
      L.bq = qkv_b[0].f32(), L.bk = qkv_b[1].f32(), L.bv = qkv_b[2].f32();
      L.wo = take_parts(p + "attn.c_proj.weight", {H, H}, true, {H.n}, true)[0];
      L.bo = take(p + "attn.c_proj.bias", {H}).f32();
      L.mlp_norm = take(p + "ln_2.weight", {H}).f32();
      L.mlp_norm_b = take(p + "ln_2.bias", {H}).f32();
      L.w_up = take_parts(p + "mlp.c_fc.weight", {H, I}, true, {I.n}, true)[0];
      L.b_up = take(p + "mlp.c_fc.bias", {I}).f32();
      L.w_down = take_parts(p + "mlp.c_proj.weight", {I, H}, true, {H.n}, true)[0];
      L.b_down = take(p + "mlp.c_proj.bias", {H}).f32();
      for (const char* buf : {"attn.bias", "attn.masked_bias"}) used_.insert(p + buf);  // old causal-mask buffers
      continue;
    }
    if (arch.pre_attn_norm) L.attn_norm = take_norm(p + "input_layernorm.weight");
    if (spec.fused_qkv) {
      auto qkv = take_parts(p + "self_attn.qkv_proj.weight", {QKV, H}, false, {QD.n, KD.n, KD.n}, true);
      L.wq = qkv[0], L.wk = qkv[1], L.wv = qkv[2];
    } else {
      L.wq = take(p + "self_attn.q_proj.weight", {QD, H}, true, true);
      L.wk = take(p + "self_attn.k_proj.weight", {KD, H}, true, true);
      L.wv = take(p + "self_attn.v_proj.weight", {KD, H}, true, true);
    }
    L.wo = take(p + "self_attn.o_proj.weight", {H, QD}, true, true);
    if (arch.qkv_bias) {
      L.bq = take(p + "self_attn.q_proj.bias", {QD}).f32();
      L.bk = take(p + "self_attn.k_proj.bias", {KD}).f32();
      L.bv = take(p + "self_attn.v_proj.bias", {KD}).f32();
    }
    if (arch.o_bias) L.bo = take(p + "self_attn.o_proj.bias", {H}, false).f32();
    if (arch.qk_norm == QkNormKind::kWhole) {
      L.q_norm = take(p + "self_attn.q_norm.weight", {QD}).f32();
      L.k_norm = take(p + "self_attn.k_norm.weight", {KD}).f32();
    } else if (c_.qk_norm) {
      L.q_norm = take(p + "self_attn.q_norm.weight", {D}).f32();
      L.k_norm = take(p + "self_attn.k_norm.weight", {D}).f32();
    }
    if (has_tau_w) {
      L.tau_w = take(p + "self_attn.tau_proj.weight", {One, H});  // fp32 memory, used as a [1, hidden] matrix
      if (c_.focal.tau_bias) L.tau_b = take(p + "self_attn.tau_proj.bias", {One}).f32();
    }
    // Norm names: LLaMA's post_attention_layernorm is its pre-MLP norm; Gemma 2 / OLMo 2 use it after attention.
    if (arch.post_attn_norm) L.post_attn_norm = take_norm(p + "post_attention_layernorm.weight");
    if (arch.pre_mlp_norm)
      L.mlp_norm =
          take_norm(p + (arch.post_attn_norm ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"));
    if (arch.post_mlp_norm) L.post_mlp_norm = take_norm(p + "post_feedforward_layernorm.weight");
    if (spec.fused_gate_up) {
      auto gu = take_parts(p + "mlp.gate_up_proj.weight", {I2, H}, false, {I.n, I.n}, true);
      L.w_gate = gu[0], L.w_up = gu[1];
    } else {
      L.w_gate = take(p + "mlp.gate_proj.weight", {I, H}, true, true);
      L.w_up = take(p + "mlp.up_proj.weight", {I, H}, true, true);
    }
    L.w_down = take(p + "mlp.down_proj.weight", {H, I}, true, true);
    if (arch.mlp_bias) {
      L.b_gate = take(p + "mlp.gate_proj.bias", {I}).f32();
      L.b_up = take(p + "mlp.up_proj.bias", {I}).f32();
      L.b_down = take(p + "mlp.down_proj.bias", {H}).f32();
    }
  }
  w_ = nullptr;
  if (!missing_.empty()) {
    std::string hint;
    for (const auto& kv : all_)
      if (!used_.count(kv.first) && !is_saved_buffer(kv.first)) {
        hint = " (the file has an unexpected tensor '" + kv.first + "' — misnamed?)";
        break;
      }
    throw Error("model '" + dir_ + "': tensor '" + missing_ + "' is missing" + hint);
  }
  return weights;
}

bool is_saved_buffer(const std::string& name) {
  static const std::string kInvFreq = "rotary_emb.inv_freq";  // RoPE's inverse frequencies, recomputed here
  return name.size() >= kInvFreq.size() && name.compare(name.size() - kInvFreq.size(), kInvFreq.size(), kInvFreq) == 0;
}

}  // namespace focal
