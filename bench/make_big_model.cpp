// Writes a random-weight model of a big model's exact shape (default Llama-3-8B: 32 layers, hidden 4096, 32 / 8
// heads, intermediate 14336, vocab 128256; --shape 70b: Llama-3-70B's 80 layers, hidden 8192, 64 / 8 heads,
// intermediate 28672) for the memory and speed benchmarks (bench/run_big.sh), never committed:
//   --gguf FILE        llama GGUF, matrices in Q4_K (random blocks whose values average 0), norms F32, a
//                      sentencepiece-style vocabulary (<unk>, <s>, </s>, the 256 byte pieces, then filler pieces);
//                      --mix q2_k | q3_k_m | q4_k_m | q5_k_m | q6_k | q8_0 gives the matrices the types llama.cpp's
//                      quantize gives those file types for a llama model with 4 query heads a KV head (Q4_K_M: Q4_K,
//                      with Q6_K for output.weight and for attn_v / ffn_down of the layers its "more bits" rule
//                      picks: the first and last eighth and every third between; Q5_K_M: the same over Q5_K;
//                      Q3_K_M: Q3_K, with Q6_K output, Q4_K attn_output, Q5_K attn_v in the first two layers and
//                      ffn_down in the first sixteenth, Q4_K for the other attn_v / ffn_down; Q2_K: Q2_K, with Q6_K
//                      output, Q4_K attn_v, Q3_K attn_output and ffn_down; Q6_K and Q8_0: every matrix in that type)
//   --bf16 DIR         Hugging Face directory: config.json, model.safetensors in bf16 (values ~ +-0.02), and
//                      tokenizer.model copied from --tokenizer FILE
// Streams the tensors to a temporary name and renames it, printing progress with an ETA.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string>
#include <vector>

namespace {

struct Shape {
  int64_t layers = 32, hidden = 4096, heads = 32, kv_heads = 8, inter = 14336, vocab = 128256, context = 8192;
};

struct Rng {  // xorshift64*
  uint64_t s = 0x9E3779B97F4A7C15ULL;
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ULL;
  }
};

// GGUF tensor types (ggml's numbers) and their blocks: values per block, bytes per block.
enum GgmlType : uint32_t { kF32 = 0, kQ8_0 = 8, kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14 };
int block_values(uint32_t t) { return t == kF32 ? 1 : t == kQ8_0 ? 32 : 256; }
int block_bytes(uint32_t t) {
  switch (t) {
    case kQ8_0: return 2 + 32;                 // d, qs
    case kQ2_K: return 16 + 64 + 2 + 2;        // scales, qs, d, dmin
    case kQ3_K: return 32 + 64 + 12 + 2;       // hmask, qs, scales, d
    case kQ4_K: return 2 + 2 + 12 + 128;       // d, dmin, scales, qs
    case kQ5_K: return 2 + 2 + 12 + 32 + 128;  // d, dmin, scales, qh, qs
    case kQ6_K: return 128 + 64 + 16 + 2;      // ql, qh, scales (int8), d
    default: return 4;
  }
}

enum class Mix { kQ4K, kQ2K, kQ3KM, kQ4KM, kQ5KM, kQ6K, kQ8_0 };

struct Tensor {
  std::string name;
  std::vector<int64_t> dims;  // HF order [rows, cols] (GGUF writes them reversed)
  bool matrix;
  uint32_t type = kF32;  // GGUF: the stored type
};

// The type llama.cpp's quantize gives a matrix of layer `layer` (-1: none) in file type `mix` (its rules for these
// tensors of a llama model): Q6_K for output.weight in the K mixes, and for attn_v / ffn_down of the layers where
// "more bits" help (the first and last eighth of the layers, and every third layer between).
uint32_t mix_type(Mix mix, const std::string& name, int64_t layer, int64_t n_layers) {
  if (mix == Mix::kQ8_0) return kQ8_0;
  if (mix == Mix::kQ6K) return kQ6_K;
  if (mix == Mix::kQ4K) return kQ4_K;
  const auto is = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (mix == Mix::kQ3KM || mix == Mix::kQ2K) {  // llama-quant.cpp's rules for these types, n_gqa >= 4, no experts
    if (name == "output.weight") return kQ6_K;
    const bool q3 = mix == Mix::kQ3KM;
    if (is("attn_v.")) return q3 && layer < 2 ? kQ5_K : kQ4_K;
    if (is("attn_output.")) return q3 ? kQ4_K : kQ3_K;
    if (is("ffn_down.")) return !q3 ? kQ3_K : layer < n_layers / 16 ? kQ5_K : kQ4_K;
    return q3 ? kQ3_K : kQ2_K;
  }
  const uint32_t base = mix == Mix::kQ4KM ? kQ4_K : kQ5_K;
  if (name == "output.weight") return kQ6_K;
  const bool more_bits =
      layer >= 0 && (layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2);
  const bool v_or_down = name.find("attn_v.") != std::string::npos || name.find("ffn_down.") != std::string::npos;
  return v_or_down && more_bits ? kQ6_K : base;
}

std::vector<Tensor> tensors_of(const Shape& s, bool hf, Mix mix = Mix::kQ4K) {
  const int64_t dh = s.hidden / s.heads, QD = s.heads * dh, KD = s.kv_heads * dh;
  std::vector<Tensor> t;
  int64_t layer = -1;
  auto add = [&](const std::string& g, const std::string& h, std::vector<int64_t> d, bool m) {
    t.push_back({hf ? h : g, std::move(d), m, m ? mix_type(mix, g, layer, s.layers) : kF32});
  };
  add("token_embd.weight", "model.embed_tokens.weight", {s.vocab, s.hidden}, true);
  for (int64_t l = 0; l < s.layers; ++l) {
    layer = l;
    const std::string g = "blk." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
    add(g + "attn_norm.weight", h + "input_layernorm.weight", {s.hidden}, false);
    add(g + "attn_q.weight", h + "self_attn.q_proj.weight", {QD, s.hidden}, true);
    add(g + "attn_k.weight", h + "self_attn.k_proj.weight", {KD, s.hidden}, true);
    add(g + "attn_v.weight", h + "self_attn.v_proj.weight", {KD, s.hidden}, true);
    add(g + "attn_output.weight", h + "self_attn.o_proj.weight", {s.hidden, QD}, true);
    add(g + "ffn_norm.weight", h + "post_attention_layernorm.weight", {s.hidden}, false);
    add(g + "ffn_gate.weight", h + "mlp.gate_proj.weight", {s.inter, s.hidden}, true);
    add(g + "ffn_up.weight", h + "mlp.up_proj.weight", {s.inter, s.hidden}, true);
    add(g + "ffn_down.weight", h + "mlp.down_proj.weight", {s.hidden, s.inter}, true);
  }
  layer = -1;
  add("output_norm.weight", "model.norm.weight", {s.hidden}, false);
  add("output.weight", "lm_head.weight", {s.vocab, s.hidden}, true);
  return t;
}

int64_t numel(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d : t.dims) n *= d;
  return n;
}

// The fp16 bits of a float in fp16's normal range (the scales below: 1e-4 and up).
uint16_t half_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u, exp = ((u >> 23) & 0xFFu) - 127 + 15, mant = (u >> 13) & 0x3FFu;
  return (uint16_t)(sign | (exp << 10) | mant);
}

// Tensor bytes: quantized random blocks whose values average about 0 and stay within a few hundredths — Q2_K
// (d = 1e-4, dmin = 1.5e-4), Q3_K (d = 1e-4), Q4_K (d = 1e-4, dmin = 7.5e-4), Q5_K (d = 1e-4, dmin = 1.55e-3), Q6_K
// (d = 1e-4, sub-block scales -8..8), Q8_0 (d = 1e-4) — or F32 ones for norms; bf16 ~ +-0.02 for the safetensors file.
void fill(const Tensor& t, bool bf16, Rng& rng, std::vector<uint8_t>* out) {
  const int64_t n = numel(t);
  if (!t.matrix) {
    out->resize((size_t)n * (bf16 ? 2 : 4));
    for (int64_t i = 0; i < n; ++i) {
      if (bf16) {
        const uint16_t one = 0x3F80;
        std::memcpy(out->data() + 2 * i, &one, 2);
      } else {
        const float one = 1.0f;
        std::memcpy(out->data() + 4 * i, &one, 4);
      }
    }
    return;
  }
  if (bf16) {
    out->resize((size_t)n * 2);
    uint16_t* p = reinterpret_cast<uint16_t*>(out->data());
    for (int64_t i = 0; i < n; ++i) {
      const float v = (float)((int64_t)(rng.next() >> 40) % 2001 - 1000) * 2e-5f;
      uint32_t u;
      std::memcpy(&u, &v, 4);
      p[i] = (uint16_t)(u >> 16);
    }
    return;
  }
  const int bb = block_bytes(t.type);
  const int64_t nb = n / block_values(t.type);
  out->resize((size_t)nb * bb);
  uint8_t* b = out->data();
  for (int64_t i = 0; i < (int64_t)out->size(); i += 8) {
    const uint64_t r = rng.next();
    std::memcpy(b + i, &r, std::min<int64_t>(8, (int64_t)out->size() - i));
  }
  // where each block's fp16 scale d sits, and its min dmin (-1: none), and their values
  const int d_at = t.type == kQ6_K ? 208 : t.type == kQ3_K ? 108 : t.type == kQ2_K ? 80 : 0;
  const int dmin_at = t.type == kQ4_K || t.type == kQ5_K ? 2 : t.type == kQ2_K ? 82 : -1;
  const uint16_t d = half_bits(1e-4f);
  const uint16_t dmin = half_bits(t.type == kQ5_K ? 1.55e-3f : t.type == kQ2_K ? 1.5e-4f : 7.5e-4f);
  for (int64_t i = 0; i < nb; ++i) {
    std::memcpy(b + i * bb + d_at, &d, 2);
    if (dmin_at >= 0) std::memcpy(b + i * bb + dmin_at, &dmin, 2);
    if (t.type == kQ6_K)  // int8 sub-block scales at 192..207: small, so values stay within a few hundredths
      for (int j = 0; j < 16; ++j) b[i * bb + 192 + j] = (uint8_t)(int8_t)((int)(b[i * bb + 192 + j] % 17) - 8);
  }
}

struct Out {
  FILE* f = nullptr;
  void bytes(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f) != n) {
      std::perror("make_big_model: write");
      std::exit(1);
    }
  }
  template <typename V>
  void put(V v) {
    bytes(&v, sizeof v);
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
};

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Streams every tensor's bytes, with progress and an ETA on stderr.
void write_data(Out& o, const std::vector<Tensor>& ts, bool bf16, size_t align) {
  Rng rng;
  std::vector<uint8_t> buf;
  int64_t total = 0, done = 0;
  for (const Tensor& t : ts) total += numel(t);
  const double t0 = now();
  double last = t0;
  for (const Tensor& t : ts) {
    fill(t, bf16, rng, &buf);
    o.bytes(buf.data(), buf.size());
    if (align) {
      const size_t pad = (align - buf.size() % align) % align;
      std::vector<uint8_t> z(pad, 0);
      o.bytes(z.data(), pad);
    }
    done += numel(t);
    if (now() - last > 2.0 || done == total) {
      last = now();
      const double el = last - t0, eta = done ? el * (double)(total - done) / (double)done : 0.0;
      std::fprintf(stderr, "\rmake_big_model: %5.1f%% of %.2fB values, %.0f s elapsed, ETA %.0f s   ",
                   100.0 * done / total, total / 1e9, el, eta);
    }
  }
  std::fprintf(stderr, "\n");
}

void write_gguf(const std::string& path, const Shape& s, Mix mix) {
  const std::vector<Tensor> ts = tensors_of(s, false, mix);
  const std::string tmp = path + ".tmp";
  Out o{std::fopen(tmp.c_str(), "wb")};
  if (!o.f) {
    std::perror(("make_big_model: " + tmp).c_str());
    std::exit(1);
  }
  std::vector<std::string> toks = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    toks.push_back(hex);
  }
  while ((int64_t)toks.size() < s.vocab) toks.push_back("\xE2\x96\x81w" + std::to_string(toks.size()));
  int n_kv = 0;
  std::string kv;
  auto key = [&](const std::string& name, uint32_t type) {
    uint64_t len = name.size();
    kv.append(reinterpret_cast<const char*>(&len), 8);
    kv += name;
    kv.append(reinterpret_cast<const char*>(&type), 4);
    ++n_kv;
  };
  auto u32 = [&](const std::string& name, uint32_t v) {
    key(name, 4);
    kv.append(reinterpret_cast<const char*>(&v), 4);
  };
  auto f32 = [&](const std::string& name, float v) {
    key(name, 6);
    kv.append(reinterpret_cast<const char*>(&v), 4);
  };
  auto str = [&](const std::string& name, const std::string& v) {
    key(name, 8);
    uint64_t len = v.size();
    kv.append(reinterpret_cast<const char*>(&len), 8);
    kv += v;
  };
  str("general.architecture", "llama");
  str("general.name",
      s.hidden == 8192 ? "random Llama-3-70B shape (focalscope bench)" : "random Llama-3-8B shape (focalscope bench)");
  u32("general.alignment", 32);
  u32("llama.block_count", (uint32_t)s.layers);
  u32("llama.context_length", (uint32_t)s.context);
  u32("llama.embedding_length", (uint32_t)s.hidden);
  u32("llama.feed_forward_length", (uint32_t)s.inter);
  u32("llama.attention.head_count", (uint32_t)s.heads);
  u32("llama.attention.head_count_kv", (uint32_t)s.kv_heads);
  u32("llama.rope.dimension_count", (uint32_t)(s.hidden / s.heads));
  u32("llama.vocab_size", (uint32_t)s.vocab);
  f32("llama.rope.freq_base", 500000.0f);
  f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  str("tokenizer.ggml.model", "llama");
  {
    key("tokenizer.ggml.tokens", 9);
    uint32_t et = 8;
    uint64_t n = toks.size();
    kv.append(reinterpret_cast<const char*>(&et), 4);
    kv.append(reinterpret_cast<const char*>(&n), 8);
    for (const std::string& t : toks) {
      uint64_t len = t.size();
      kv.append(reinterpret_cast<const char*>(&len), 8);
      kv += t;
    }
    key("tokenizer.ggml.scores", 9);
    et = 6;
    kv.append(reinterpret_cast<const char*>(&et), 4);
    kv.append(reinterpret_cast<const char*>(&n), 8);
    for (size_t i = 0; i < toks.size(); ++i) {
      const float sc = -(float)i;
      kv.append(reinterpret_cast<const char*>(&sc), 4);
    }
    key("tokenizer.ggml.token_type", 9);
    et = 5;
    kv.append(reinterpret_cast<const char*>(&et), 4);
    kv.append(reinterpret_cast<const char*>(&n), 8);
    for (size_t i = 0; i < toks.size(); ++i) {
      const int32_t ty = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
      kv.append(reinterpret_cast<const char*>(&ty), 4);
    }
  }
  u32("tokenizer.ggml.bos_token_id", 1);
  u32("tokenizer.ggml.eos_token_id", 2);
  u32("tokenizer.ggml.unknown_token_id", 0);

  o.bytes("GGUF", 4);
  o.put<uint32_t>(3);
  o.put<uint64_t>(ts.size());
  o.put<uint64_t>((uint64_t)n_kv);
  o.bytes(kv.data(), kv.size());
  uint64_t off = 0;
  size_t header = 4 + 4 + 8 + 8 + kv.size();
  for (const Tensor& t : ts) {
    o.str(t.name);
    o.put<uint32_t>((uint32_t)t.dims.size());
    for (size_t d = t.dims.size(); d-- > 0;) o.put<uint64_t>((uint64_t)t.dims[d]);
    o.put<uint32_t>(t.type);
    o.put<uint64_t>(off);
    const uint64_t bytes = (uint64_t)(numel(t) / block_values(t.type)) * (uint64_t)block_bytes(t.type);
    off += (bytes + 31) / 32 * 32;
    header += 8 + t.name.size() + 4 + 8 * t.dims.size() + 4 + 8;
  }
  std::vector<uint8_t> pad((32 - header % 32) % 32, 0);
  o.bytes(pad.data(), pad.size());
  write_data(o, ts, false, 32);
  if (std::fclose(o.f) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::perror(("make_big_model: " + path).c_str());
    std::exit(1);
  }
}

void write_bf16_dir(const std::string& dir, const Shape& s, const std::string& tokenizer) {
  const std::vector<Tensor> ts = tensors_of(s, true);
  if (std::system(("mkdir -p '" + dir + "'").c_str()) != 0) std::exit(1);
  std::string h = "{";
  uint64_t off = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const uint64_t bytes = (uint64_t)numel(ts[i]) * 2;
    h += (i ? "," : "") + std::string("\"") + ts[i].name + "\":{\"dtype\":\"BF16\",\"shape\":[";
    for (size_t d = 0; d < ts[i].dims.size(); ++d) h += (d ? "," : "") + std::to_string(ts[i].dims[d]);
    h += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + bytes) + "]}";
    off += bytes;
  }
  h += "}";
  while (h.size() % 8) h += ' ';
  const std::string path = dir + "/model.safetensors", tmp = path + ".tmp";
  Out o{std::fopen(tmp.c_str(), "wb")};
  if (!o.f) std::exit(1);
  o.put<uint64_t>(h.size());
  o.bytes(h.data(), h.size());
  write_data(o, ts, true, 0);
  if (std::fclose(o.f) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) std::exit(1);
  FILE* c = std::fopen((dir + "/config.json").c_str(), "w");
  std::fprintf(c,
               "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"vocab_size\": %lld, "
               "\"hidden_size\": %lld, \"intermediate_size\": %lld, \"num_hidden_layers\": %lld, "
               "\"num_attention_heads\": %lld, \"num_key_value_heads\": %lld, \"max_position_embeddings\": %lld, "
               "\"rope_theta\": 500000.0, \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": false, "
               "\"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"torch_dtype\": \"bfloat16\"}\n",
               (long long)s.vocab, (long long)s.hidden, (long long)s.inter, (long long)s.layers, (long long)s.heads,
               (long long)s.kv_heads, (long long)s.context);
  std::fclose(c);
  if (!tokenizer.empty() && std::system(("cp '" + tokenizer + "' '" + dir + "/tokenizer.model'").c_str()) != 0)
    std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  Shape s;
  int64_t layers = 0, context = 0;  // --layers / --context, applied over --shape's
  std::string gguf, bf16, tokenizer;
  Mix mix = Mix::kQ4K;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--help") {
      std::printf(
          "usage: make_big_model (--gguf FILE [--mix q2_k|q3_k_m|q4_k|q4_k_m|q5_k_m|q6_k|q8_0] | --bf16 DIR\n"
          "                      --tokenizer tokenizer.model)\n"
          "                      [--shape 8b|70b] [--layers N] [--context N]\n"
          "Writes a random-weight model of Llama-3-8B's shape (32 layers, hidden 4096, 32 / 8 heads,\n"
          "intermediate 14336, vocab 128256; context 8192 unless --context): a GGUF (~4.6 GB in Q4_K; --mix gives\n"
          "the tensor types of llama.cpp's Q2_K, Q3_K_M, Q4_K_M, Q5_K_M, Q6_K or Q8_0 files: ~3.2, ~4.0, ~4.9, ~5.7,\n"
          "~6.6, ~8.5 GB) or a bf16 safetensors directory (~16 GB). --shape 70b: Llama-3-70B's (80 layers,\n"
          "hidden 8192, 64 / 8 heads, intermediate 28672): ~39.8 GB in Q4_K.\n");
      return 0;
    } else if (a == "--gguf") {
      gguf = val();
    } else if (a == "--bf16") {
      bf16 = val();
    } else if (a == "--mix") {
      const std::string m = val();
      if (m == "q4_k") {
        mix = Mix::kQ4K;
      } else if (m == "q2_k") {
        mix = Mix::kQ2K;
      } else if (m == "q3_k_m") {
        mix = Mix::kQ3KM;
      } else if (m == "q4_k_m") {
        mix = Mix::kQ4KM;
      } else if (m == "q5_k_m") {
        mix = Mix::kQ5KM;
      } else if (m == "q6_k") {
        mix = Mix::kQ6K;
      } else if (m == "q8_0") {
        mix = Mix::kQ8_0;
      } else {
        std::fprintf(stderr, "make_big_model: --mix '%s': give q2_k, q3_k_m, q4_k, q4_k_m, q5_k_m, q6_k or q8_0\n",
                     m.c_str());
        return 2;
      }
    } else if (a == "--tokenizer") {
      tokenizer = val();
    } else if (a == "--shape") {
      const std::string m = val();
      if (m == "70b") {
        s.layers = 80, s.hidden = 8192, s.heads = 64, s.kv_heads = 8, s.inter = 28672;
      } else if (m == "8b") {
        s = Shape{};
      } else {
        std::fprintf(stderr, "make_big_model: --shape '%s': give 8b or 70b\n", m.c_str());
        return 2;
      }
    } else if (a == "--layers") {
      layers = std::atoll(val().c_str());
    } else if (a == "--context") {
      context = std::atoll(val().c_str());
    } else {
      std::fprintf(stderr, "make_big_model: unknown option '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (layers > 0) s.layers = layers;
  if (context > 0) s.context = context;
  if (gguf.empty() == bf16.empty()) {
    std::fprintf(stderr, "make_big_model: give one of --gguf FILE or --bf16 DIR (see --help)\n");
    return 2;
  }
  if (!gguf.empty()) write_gguf(gguf, s, mix);
  if (!bf16.empty()) write_bf16_dir(bf16, s, tokenizer);
  return 0;
}
