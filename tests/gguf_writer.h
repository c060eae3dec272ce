// A minimal GGUF writer for tests: metadata of any scalar / string / array type, F32 or raw-typed tensors, and the
// byte image, so that tests can corrupt any part of a file on purpose.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace focal::test {

class GgufBuilder {
 public:
  uint32_t version = 3;
  uint64_t alignment = 32;

  void u32(const std::string& k, uint32_t v) { kv_scalar(k, 4, &v, 4); }
  void i32(const std::string& k, int32_t v) { kv_scalar(k, 5, &v, 4); }
  void f32(const std::string& k, float v) { kv_scalar(k, 6, &v, 4); }
  void boolean(const std::string& k, bool v) {
    uint8_t b = v;
    kv_scalar(k, 7, &b, 1);
  }
  void str(const std::string& k, const std::string& v) {
    key(k, 8);
    put_str(&kv_, v);
    ++n_kv_;
  }
  void strs(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9);
    put(&kv_, (uint32_t)8);
    put(&kv_, (uint64_t)v.size());
    for (auto& s : v) put_str(&kv_, s);
    ++n_kv_;
  }
  void i32s(const std::string& k, const std::vector<int32_t>& v) {
    key(k, 9);
    put(&kv_, (uint32_t)5);
    put(&kv_, (uint64_t)v.size());
    for (int32_t x : v) put(&kv_, x);
    ++n_kv_;
  }
  void f32s(const std::string& k, const std::vector<float>& v) {
    key(k, 9);
    put(&kv_, (uint32_t)6);
    put(&kv_, (uint64_t)v.size());
    for (float x : v) put(&kv_, x);
    ++n_kv_;
  }
  // dims in ggml order (dims[0] contiguous); bytes must match the type.
  void tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, const std::vector<uint8_t>& bytes) {
    tensors_.push_back({name, std::move(dims), type, bytes});
  }
  void tensor_f32(const std::string& name, std::vector<uint64_t> dims, const std::vector<float>& v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    tensor(name, std::move(dims), 0, b);
  }

  // The file image. offsets[i] (if given) overrides tensor i's stored offset.
  std::string bytes(const std::vector<int64_t>& offsets = {}) const {
    std::string o = "GGUF";
    put(&o, version);
    put(&o, (uint64_t)tensors_.size());
    put(&o, (uint64_t)n_kv_);
    o += kv_;
    uint64_t off = 0;
    std::vector<uint64_t> offs;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const T& t = tensors_[i];
      put_str(&o, t.name);
      put(&o, (uint32_t)t.dims.size());
      for (uint64_t d : t.dims) put(&o, d);
      put(&o, t.type);
      const uint64_t stored = i < offsets.size() && offsets[i] >= 0 ? (uint64_t)offsets[i] : off;
      put(&o, stored);
      offs.push_back(off);
      off += (t.bytes.size() + alignment - 1) / alignment * alignment;
    }
    o.resize((o.size() + alignment - 1) / alignment * alignment, '\0');
    const size_t base = o.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      o.resize(base + offs[i], '\0');
      o.append(reinterpret_cast<const char*>(tensors_[i].bytes.data()), tensors_[i].bytes.size());
    }
    return o;
  }

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::vector<uint8_t> bytes;
  };
  template <typename V>
  static void put(std::string* o, V v) {
    o->append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  static void put_str(std::string* o, const std::string& s) {
    put(o, (uint64_t)s.size());
    *o += s;
  }
  void key(const std::string& k, uint32_t type) {
    put_str(&kv_, k);
    put(&kv_, type);
  }
  void kv_scalar(const std::string& k, uint32_t type, const void* p, size_t n) {
    key(k, type);
    kv_.append(static_cast<const char*>(p), n);
    ++n_kv_;
  }
  std::string kv_;
  uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

struct TinyLlamaDims {
  int layers = 2, hidden = 64, heads = 2, kv_heads = 1, inter = 96, vocab = 300;
  uint32_t matrix_type = 0;  // ggml type of the 2-D tensors (0: F32 normal values; else random_blocks)
  int matrix_block_elems = 1, matrix_block_bytes = 4;  // that type's block size (gguf.h's ggml_block_*)
  bool output = false;  // an untied head: output.weight [vocab, hidden] beside token_embd.weight
  int n_tokens = -1;    // entries of tokenizer.ggml.tokens (-1: vocab, as a converter pads them)
};

// Random blocks of a ggml type whose values are of order 0.05: every byte random except the fp16 scale fields,
// which are set so that scale x quant stays small (block layouts: docs/model-format.md).
inline std::vector<uint8_t> random_blocks(uint32_t type, size_t n_blocks, int block_bytes, std::mt19937& rng) {
  std::vector<uint8_t> b(n_blocks * (size_t)block_bytes);
  for (auto& x : b) x = (uint8_t)(rng() & 0xFF);
  auto put = [&](size_t blk, int off, uint16_t h) {
    b[blk * block_bytes + off] = (uint8_t)(h & 0xFF);
    b[blk * block_bytes + off + 1] = (uint8_t)(h >> 8);
  };
  // fp16 bits of scales: 0x2148 ~ 0.0102, 0x1D1F ~ 0.0050, 0x10EA ~ 0.0006, 0x0A8E ~ 0.0001, 0x068E ~ 0.00004,
  // 0x0150 ~ 0.00002, 0xAD1F ~ -0.08 (min of the _1 types), 0x1A25 ~ 0.003, 0x1C9C ~ 0.0045,
  // 0x1225 ~ 0.00075, 0x1114 ~ 0.00062
  for (size_t i = 0; i < n_blocks; ++i) {
    switch (type) {
      case 1:  // F16 value ~ +-0.01 .. 0.08
      case 30: break;
      case 2: put(i, 0, 0x2148); break;
      case 3: put(i, 0, 0x2148), put(i, 2, 0xAD1F); break;
      case 6: put(i, 0, 0x1D1F); break;
      case 7: put(i, 0, 0x1D1F), put(i, 2, 0xAD1F); break;
      case 8: put(i, 0, 0x10EA); break;
      // Q2_K / Q4_K / Q5_K: dmin = d times the mean quant (1.5 / 7.5 / 15.5), and for Q4_K / Q5_K each sub-block's
      // min m = its scale sc (below), so that d sc q - dmin m is centred in every sub-block, as in real files (whose
      // mins span their blocks). With dmin = d every weight leant positive, and with random m each sub-block had its
      // own offset: the tiny model's hidden states grew along a few directions and its attention rows turned near
      // one-hot, where fp32 summation order alone moved them by up to 3e-5, too ill-conditioned for issue 14's 1e-5
      // comparison of two kernels.
      case 10: put(i, 80, 0x1A25), put(i, 82, 0x1C9C); break;  // 0.003, 0.0045
      case 11: put(i, 108, 0x10EA); break;
      case 12: put(i, 0, 0x0A8E), put(i, 2, 0x1225); break;  // 0.0001, 0.00075
      case 13: put(i, 0, 0x068E), put(i, 2, 0x1114); break;  // 0.00004, 0.00062
      case 14: put(i, 208, 0x0150); break;
      default: break;
    }
    if (type == 12 || type == 13) {  // each sub-block's 6-bit min m equal to its scale sc: d sc (q - mean q), centred
      uint8_t* sc = &b[i * block_bytes + 4];  // 12 bytes: sc0..3 | m0..3 (low 6 bits, top 2 of sc4..7 / m4..7) | sc, m
      for (int j = 0; j < 4; ++j) sc[4 + j] = sc[j];
      for (int j = 8; j < 12; ++j) sc[j] = (uint8_t)((sc[j] & 0x0F) | (sc[j] << 4));
    }
    if (type == 1 || type == 30) {  // one random small value: sign, exponent near 2^-5 .. 2^-7
      const float v = ((int)(rng() % 2001) - 1000) * 8e-5f;
      uint32_t u;
      std::memcpy(&u, &v, 4);
      if (type == 30) {
        put(i, 0, (uint16_t)(u >> 16));
      } else {
        const uint32_t sign = (u >> 16) & 0x8000u;
        const int e = (int)((u >> 23) & 0xFF) - 127 + 15;
        put(i, 0, (uint16_t)(e <= 0 ? sign : sign | (uint32_t)(e << 10) | ((u >> 13) & 0x3FFu)));
      }
    }
  }
  return b;
}

// A complete tiny llama GGUF with F32 random weights and a byte-level BPE vocabulary (the 256 byte pieces, two
// merges, and "<|im_start|>" as a control token). `skip_key` / `skip_tensor` leave one out.
inline GgufBuilder tiny_llama_gguf(const TinyLlamaDims& d = {}, const std::string& skip_key = "",
                                   const std::string& skip_tensor = "") {
  GgufBuilder b;
  auto u32 = [&](const std::string& k, uint32_t v) {
    if (k != skip_key) b.u32(k, v);
  };
  b.str("general.architecture", "llama");
  u32("llama.block_count", d.layers);
  u32("llama.context_length", 1024);
  u32("llama.embedding_length", d.hidden);
  u32("llama.feed_forward_length", d.inter);
  u32("llama.attention.head_count", d.heads);
  u32("llama.attention.head_count_kv", d.kv_heads);
  if (skip_key != "llama.rope.freq_base") b.f32("llama.rope.freq_base", 10000.0f);
  if (skip_key != "llama.attention.layer_norm_rms_epsilon") b.f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  // Vocabulary: GPT-2's byte stand-ins in byte order, then merged pieces and a control token.
  std::vector<std::string> toks;
  int next = 256;
  for (int c = 0; c < 256; ++c) {
    const bool printable = (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
    const int cp = printable ? c : next++;
    std::string s;
    if (cp < 0x80)
      s = std::string(1, (char)cp);
    else {
      s += (char)(0xC0 | (cp >> 6));
      s += (char)(0x80 | (cp & 0x3F));
    }
    toks.push_back(s);
  }
  toks.push_back("\xC4\xA0t");  // "Ġt"
  toks.push_back("he");
  toks.push_back("\xC4\xA0the");
  toks.push_back("<|im_start|>");
  std::vector<int32_t> types(toks.size(), 1);
  types.back() = 3;
  while ((int)toks.size() < (d.n_tokens >= 0 ? d.n_tokens : d.vocab)) {
    toks.push_back("<unused" + std::to_string(toks.size()) + ">");
    types.push_back(5);
  }
  if (skip_key != "tokenizer.ggml.model") b.str("tokenizer.ggml.model", "gpt2");
  if (skip_key != "tokenizer.ggml.pre") b.str("tokenizer.ggml.pre", "gpt2");
  b.strs("tokenizer.ggml.tokens", toks);
  b.i32s("tokenizer.ggml.token_type", types);
  b.strs("tokenizer.ggml.merges", {"\xC4\xA0 t", "h e", "\xC4\xA0t he"});
  u32("tokenizer.ggml.bos_token_id", 259);
  u32("tokenizer.ggml.eos_token_id", 259);

  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.08f);
  auto rnd = [&](size_t n, float base = 0.0f) {
    std::vector<float> v(n);
    for (auto& x : v) x = base + nd(rng);
    return v;
  };
  const uint64_t H = d.hidden, I = d.inter, V = d.vocab, dh = d.hidden / d.heads;
  const uint64_t QD = d.heads * dh, KD = d.kv_heads * dh;
  auto t = [&](const std::string& n, const std::vector<uint64_t>& dims, float base = 0.0f) {
    if (n == skip_tensor) return;
    size_t cnt = 1;
    for (auto x : dims) cnt *= x;
    if (d.matrix_type != 0 && dims.size() == 2)
      b.tensor(n, dims, d.matrix_type,
               random_blocks(d.matrix_type, cnt / d.matrix_block_elems, d.matrix_block_bytes, rng));
    else
      b.tensor_f32(n, dims, rnd(cnt, base));
  };
  t("token_embd.weight", {H, V});
  if (d.output) t("output.weight", {H, V});
  t("output_norm.weight", {H}, 1.0f);
  for (int l = 0; l < d.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t(p + "attn_norm.weight", {H}, 1.0f);
    t(p + "attn_q.weight", {H, QD});
    t(p + "attn_k.weight", {H, KD});
    t(p + "attn_v.weight", {H, KD});
    t(p + "attn_output.weight", {QD, H});
    t(p + "ffn_norm.weight", {H}, 1.0f);
    t(p + "ffn_gate.weight", {H, I});
    t(p + "ffn_up.weight", {H, I});
    t(p + "ffn_down.weight", {I, H});
  }
  return b;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), (std::streamsize)bytes.size());
}

}  // namespace focal::test
