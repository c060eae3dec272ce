// GGUF parsing and ggml block dequantisation. Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count,
// metadata (string key, u32 value type, value), tensor infos (string name, u32 n_dims, u64 dims[n_dims], u32 type,
// u64 offset), padding to general.alignment (default 32), data area. All little-endian.
#include "gguf.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "file_map.h"
#include "focal/error.h"
#include "safetensors.h"  // fp16_to_f32, bf16_to_f32

namespace focal {

// ---- ggml types ----

std::string ggml_type_name(uint32_t t) {
  static const char* kNames[] = {"F32",     "F16",   "Q4_0",    "Q4_1",  "Q4_2",   "Q4_3",  "Q5_0",  "Q5_1",
                                 "Q8_0",    "Q8_1",  "Q2_K",    "Q3_K",  "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",
                                 "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
                                 "I8",      "I16",   "I32",     "I64",   "F64",    "IQ1_M", "BF16",  "Q4_0_4_4",
                                 "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8",
                                 "IQ4_NL_8_8", "MXFP4", "NVFP4", "Q1_0"};
  if (t < sizeof(kNames) / sizeof(kNames[0])) return std::string(kNames[t]) + " (type " + std::to_string(t) + ")";
  return "unknown type " + std::to_string(t);
}

const char* ggml_supported_types() { return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K"; }

int ggml_block_elems(uint32_t t) {
  switch (t) {
    case kGgmlF32: case kGgmlF16: case kGgmlBF16: return 1;
    case kGgmlQ4_0: case kGgmlQ4_1: case kGgmlQ5_0: case kGgmlQ5_1: case kGgmlQ8_0: return 32;
    case kGgmlQ2_K: case kGgmlQ3_K: case kGgmlQ4_K: case kGgmlQ5_K: case kGgmlQ6_K: return 256;
    default: return 0;
  }
}

int ggml_block_bytes(uint32_t t) {
  switch (t) {
    case kGgmlF32: return 4;
    case kGgmlF16: case kGgmlBF16: return 2;
    case kGgmlQ4_0: return 2 + 16;          // d, qs[16]
    case kGgmlQ4_1: return 2 + 2 + 16;      // d, m, qs[16]
    case kGgmlQ5_0: return 2 + 4 + 16;      // d, qh[4], qs[16]
    case kGgmlQ5_1: return 2 + 2 + 4 + 16;  // d, m, qh[4], qs[16]
    case kGgmlQ8_0: return 2 + 32;          // d, qs[32]
    case kGgmlQ2_K: return 16 + 64 + 2 + 2;       // scales[16], qs[64], d, dmin
    case kGgmlQ3_K: return 32 + 64 + 12 + 2;      // hmask[32], qs[64], scales[12], d
    case kGgmlQ4_K: return 2 + 2 + 12 + 128;      // d, dmin, scales[12], qs[128]
    case kGgmlQ5_K: return 2 + 2 + 12 + 32 + 128; // d, dmin, scales[12], qh[32], qs[128]
    case kGgmlQ6_K: return 128 + 64 + 16 + 2;     // ql[128], qh[64], scales[16] (int8), d
    default: return 0;
  }
}

bool ggml_type_supported(uint32_t t) { return ggml_block_elems(t) > 0; }

static inline float f16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return fp16_to_f32(v);
}

// Q4_K / Q5_K: eight 6-bit (scale, min) pairs packed into 12 bytes.
static inline void scale_min_k4(int j, const uint8_t* q, int* sc, int* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

static void dequant_block(uint32_t t, const uint8_t* b, float* y) {
  switch (t) {
    case kGgmlQ4_0: {
      const float d = f16_at(b);
      const uint8_t* qs = b + 2;
      for (int j = 0; j < 16; ++j) {
        y[j] = ((qs[j] & 0xF) - 8) * d;
        y[j + 16] = ((qs[j] >> 4) - 8) * d;
      }
      break;
    }
    case kGgmlQ4_1: {
      const float d = f16_at(b), m = f16_at(b + 2);
      const uint8_t* qs = b + 4;
      for (int j = 0; j < 16; ++j) {
        y[j] = (qs[j] & 0xF) * d + m;
        y[j + 16] = (qs[j] >> 4) * d + m;
      }
      break;
    }
    case kGgmlQ5_0: case kGgmlQ5_1: {
      const bool has_m = t == kGgmlQ5_1;
      const float d = f16_at(b), m = has_m ? f16_at(b + 2) : 0.0f;
      const uint8_t* p = b + (has_m ? 4 : 2);
      uint32_t qh;
      std::memcpy(&qh, p, 4);
      const uint8_t* qs = p + 4;
      for (int j = 0; j < 16; ++j) {
        const int hi0 = (qh >> j) & 1, hi1 = (qh >> (j + 16)) & 1;
        const int q0 = (qs[j] & 0xF) | (hi0 << 4), q1 = (qs[j] >> 4) | (hi1 << 4);
        if (has_m) {
          y[j] = q0 * d + m;
          y[j + 16] = q1 * d + m;
        } else {
          y[j] = (q0 - 16) * d;
          y[j + 16] = (q1 - 16) * d;
        }
      }
      break;
    }
    case kGgmlQ8_0: {
      const float d = f16_at(b);
      const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
      for (int j = 0; j < 32; ++j) y[j] = qs[j] * d;
      break;
    }
    case kGgmlQ2_K: {
      const uint8_t* scales = b;
      const uint8_t* q = b + 16;
      const float d = f16_at(b + 80), dmin = f16_at(b + 82);
      int is = 0;
      for (int n = 0; n < 256; n += 128) {
        int shift = 0;
        for (int j = 0; j < 4; ++j) {
          for (int half = 0; half < 2; ++half) {
            const uint8_t sc = scales[is++];
            const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
            for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
          }
          shift += 2;
        }
        q += 32;
      }
      break;
    }
    case kGgmlQ3_K: {
      const uint8_t* hm = b;
      const uint8_t* q = b + 32;
      const uint8_t* sraw = b + 96;
      const float d_all = f16_at(b + 108);
      // 16 6-bit scales: low 4 bits in bytes 0..7 (two per byte), high 2 bits in bytes 8..11.
      int scales[16];
      for (int i = 0; i < 16; ++i) {
        const int lo = i < 8 ? (sraw[i] & 0xF) : (sraw[i - 8] >> 4);
        const int hi = (sraw[8 + (i % 4)] >> (2 * (i / 4))) & 3;
        scales[i] = (lo | (hi << 4)) - 32;
      }
      int is = 0;
      uint8_t m = 1;
      for (int n = 0; n < 256; n += 128) {
        int shift = 0;
        for (int j = 0; j < 4; ++j) {
          for (int half = 0; half < 2; ++half) {
            const float dl = d_all * scales[is++];
            for (int l = 16 * half; l < 16 * half + 16; ++l)
              *y++ = dl * ((int)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
          }
          shift += 2;
          m <<= 1;
        }
        q += 32;
      }
      break;
    }
    case kGgmlQ4_K: case kGgmlQ5_K: {
      const bool five = t == kGgmlQ5_K;
      const float d = f16_at(b), dmin = f16_at(b + 2);
      const uint8_t* scales = b + 4;
      const uint8_t* qh = b + 16;
      const uint8_t* ql = b + (five ? 48 : 16);
      int is = 0;
      uint8_t u1 = 1, u2 = 2;
      for (int j = 0; j < 256; j += 64) {
        int sc, mn;
        scale_min_k4(is, scales, &sc, &mn);
        const float d1 = d * sc, m1 = dmin * mn;
        scale_min_k4(is + 1, scales, &sc, &mn);
        const float d2 = d * sc, m2 = dmin * mn;
        for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
        ql += 32;
        is += 2;
        u1 <<= 2;
        u2 <<= 2;
      }
      break;
    }
    case kGgmlQ6_K: {
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
      const float d = f16_at(b + 208);
      for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          y[l] = d * sc[is] * q1;
          y[l + 32] = d * sc[is + 2] * q2;
          y[l + 64] = d * sc[is + 4] * q3;
          y[l + 96] = d * sc[is + 6] * q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
      }
      break;
    }
    default: throw Error("internal: dequant_block on type " + ggml_type_name(t));
  }
}

void ggml_dequantize(uint32_t t, const uint8_t* src, float* dst, int64_t n) {
  if (t == kGgmlF32) {
    std::memcpy(dst, src, (size_t)n * 4);
    return;
  }
  if (t == kGgmlF16 || t == kGgmlBF16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      dst[i] = t == kGgmlBF16 ? bf16_to_f32(v) : fp16_to_f32(v);
    }
    return;
  }
  const int be = ggml_block_elems(t), bb = ggml_block_bytes(t);
  if (!be) throw Error("GGUF tensor type " + ggml_type_name(t) + " is not supported (supported: " +
                       ggml_supported_types() + ")");
  const int64_t nb = n / be;
#pragma omp parallel for schedule(static) if (nb > 4096)
  for (int64_t i = 0; i < nb; ++i) dequant_block(t, src + i * bb, dst + i * be);
}

// ---- file parsing ----

namespace {

// Bounds-checked little-endian reader over [p, end); every failure names the file and what was being read.
struct Reader {
  const uint8_t* base;
  size_t size;
  size_t pos = 0;
  const std::string& path;

  void need(size_t n, const char* what) {
    if (n > size - pos)
      throw Error("'" + path + "' is truncated: reading " + what + " at byte " + std::to_string(pos) + " needs " +
                  std::to_string(n) + " bytes but the file has " + std::to_string(size) +
                  " (re-download or re-convert the file)");
  }
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string str(const char* what) {
    const uint64_t n = get<uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(base + pos), (size_t)n);
    pos += (size_t)n;
    return s;
  }
};

size_t scalar_size(uint32_t t) {
  switch (t) {
    case kGgufU8: case kGgufI8: case kGgufBool: return 1;
    case kGgufU16: case kGgufI16: return 2;
    case kGgufU32: case kGgufI32: case kGgufF32: return 4;
    case kGgufU64: case kGgufI64: case kGgufF64: return 8;
    default: return 0;
  }
}

double read_scalar(Reader& r, uint32_t t, int64_t* i64, const char* what) {
  switch (t) {
    case kGgufU8: { auto v = r.get<uint8_t>(what); *i64 = v; return v; }
    case kGgufI8: { auto v = r.get<int8_t>(what); *i64 = v; return v; }
    case kGgufBool: { auto v = r.get<uint8_t>(what); *i64 = v != 0; return v != 0; }
    case kGgufU16: { auto v = r.get<uint16_t>(what); *i64 = v; return v; }
    case kGgufI16: { auto v = r.get<int16_t>(what); *i64 = v; return v; }
    case kGgufU32: { auto v = r.get<uint32_t>(what); *i64 = v; return v; }
    case kGgufI32: { auto v = r.get<int32_t>(what); *i64 = v; return v; }
    case kGgufF32: { auto v = r.get<float>(what); *i64 = 0; return v; }
    case kGgufU64: { auto v = r.get<uint64_t>(what); *i64 = v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v; return (double)v; }
    case kGgufI64: { auto v = r.get<int64_t>(what); *i64 = v; return (double)v; }
    case kGgufF64: { auto v = r.get<double>(what); *i64 = 0; return v; }
    default: return 0;
  }
}

}  // namespace

GgufFile::GgufFile(const std::string& path) : path_(path) {
  const FileMap fm = map_file(path, 1, [&](size_t) { return "'" + path + "' is empty (0 bytes), not a GGUF file"; });
  data_ = fm.data;
  size_ = fm.size;
  mapped_ = true;
  try {
    parse();
  } catch (...) {
    unmap_file(fm);
    mapped_ = false;
    throw;
  }
}

GgufFile::GgufFile(const uint8_t* data, size_t size, const std::string& name) : path_(name), data_(data), size_(size) {
  parse();
}

GgufFile::~GgufFile() {
  if (mapped_) unmap_file(FileMap{data_, size_});
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

uint64_t GgufFile::fnv1a(uint64_t h) const {
  for (size_t i = 0; i < size_; ++i) {
    h ^= data_[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

void GgufFile::parse() {
  const std::string& p = path_;
  if (size_ < 4 || std::memcmp(data_, "GGUF", 4) != 0) {
    std::string got;
    for (size_t i = 0; i < 4 && i < size_; ++i) {
      const char c = (char)data_[i];
      got += (c >= 0x20 && c < 0x7f) ? std::string(1, c) : "?";
    }
    throw Error("'" + p + "' is not a GGUF file: it starts with '" + got + "', a GGUF file starts with 'GGUF'");
  }
  Reader r{data_, size_, 4, p};
  version_ = r.get<uint32_t>("the version");
  if (version_ != 2 && version_ != 3)
    throw Error("'" + p + "': GGUF version " + std::to_string(version_) +
                " is not supported (focalscope reads versions 2 and 3; re-convert the model with a current "
                "llama.cpp)");
  const uint64_t n_tensors = r.get<uint64_t>("the tensor count");
  const uint64_t n_kv = r.get<uint64_t>("the metadata count");
  // Each metadata entry takes at least 12 bytes and each tensor info at least 24: bound the counts by the file.
  if (n_kv > size_ / 12 || n_tensors > size_ / 24)
    throw Error("'" + p + "': header claims " + std::to_string(n_kv) + " metadata entries and " +
                std::to_string(n_tensors) + " tensors, more than a " + std::to_string(size_) +
                "-byte file can hold — the file is truncated or corrupt");

  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = r.str("a metadata key");
    GgufValue v;
    v.type = r.get<uint32_t>("a metadata value type");
    const std::string where = "'" + p + "': metadata key '" + key + "'";
    if (v.type == kGgufString) {
      v.str = r.str("a metadata string");
    } else if (v.type == kGgufArray) {
      v.elem_type = r.get<uint32_t>("an array element type");
      v.count = r.get<uint64_t>("an array length");
      if (v.elem_type == kGgufString) {
        if (v.count > (size_ - r.pos) / 8)
          throw Error(where + ": string array of " + std::to_string(v.count) + " entries runs past the end of the "
                      "file — the file is truncated or corrupt");
        v.strs.reserve((size_t)v.count);
        for (uint64_t i = 0; i < v.count; ++i) v.strs.push_back(r.str("a metadata string array entry"));
      } else {
        const size_t es = scalar_size(v.elem_type);
        if (!es) throw Error(where + ": array element type " + std::to_string(v.elem_type) + " is not supported");
        if (v.count > (size_ - r.pos) / es)
          throw Error(where + ": array of " + std::to_string(v.count) + " entries runs past the end of the file — "
                      "the file is truncated or corrupt");
        v.nums.resize((size_t)v.count);
        int64_t dummy;
        for (uint64_t i = 0; i < v.count; ++i) v.nums[i] = read_scalar(r, v.elem_type, &dummy, "an array entry");
      }
    } else if (scalar_size(v.type)) {
      v.num = read_scalar(r, v.type, &v.i64, "a metadata value");
    } else {
      throw Error(where + " has unknown value type " + std::to_string(v.type) + " — the file is corrupt");
    }
    if (kv_.count(key)) throw Error("'" + p + "': metadata key '" + key + "' appears twice");
    kv_[key] = std::move(v);
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (!a->is_int() || a->i64 <= 0 || (a->i64 & (a->i64 - 1)) != 0 || a->i64 > (1 << 20))
      throw Error("'" + p + "': general.alignment must be a power of two up to 2^20, got " +
                  (a->is_int() ? std::to_string(a->i64) : std::string("a non-integer")));
    alignment_ = (uint64_t)a->i64;
  }

  std::set<std::string> names;
  tensors_.reserve((size_t)n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = r.str("a tensor name");
    const std::string where = "'" + p + "': tensor '" + t.name + "'";
    if (!names.insert(t.name).second) throw Error(where + " appears twice");
    const uint32_t nd = r.get<uint32_t>("a tensor's dimension count");
    if (nd == 0 || nd > 4) throw Error(where + " has " + std::to_string(nd) + " dimensions (1 to 4 are valid)");
    t.numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t n = r.get<uint64_t>("a tensor dimension");
      if (n == 0 || n > (1ULL << 40) || t.numel > (1ULL << 40) / n)
        throw Error(where + ": dimension " + std::to_string(d) + " is " + std::to_string(n) +
                    " (the tensor would be empty or larger than 2^40 elements)");
      t.dims.push_back(n);
      t.numel *= n;
    }
    t.type = r.get<uint32_t>("a tensor type");
    t.offset = r.get<uint64_t>("a tensor offset");
    if (!ggml_type_supported(t.type))
      throw Error(where + " has type " + ggml_type_name(t.type) + ", which focalscope does not load (supported: " +
                  ggml_supported_types() + ") — re-quantise the model to one of those");
    const uint64_t be = (uint64_t)ggml_block_elems(t.type);
    if (t.dims[0] % be != 0)
      throw Error(where + ": row length " + std::to_string(t.dims[0]) + " is not a multiple of the " +
                  ggml_type_name(t.type) + " block size " + std::to_string(be));
    t.n_bytes = (size_t)(t.numel / be * (uint64_t)ggml_block_bytes(t.type));
    if (t.offset % alignment_ != 0)
      throw Error(where + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                  std::to_string(alignment_) + " — the file is corrupt");
    tensors_.push_back(std::move(t));
  }

  const uint64_t data_start = (r.pos + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t data_size = data_start <= size_ ? size_ - data_start : 0;
  for (GgufTensor& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      throw Error("'" + p + "': tensor '" + t.name + "' data [" + std::to_string(t.offset) + ", " +
                  std::to_string(t.offset + t.n_bytes) + ") lies past the end of the data area (" +
                  std::to_string(data_size) + " bytes) — the file is truncated");
    t.data = data_ + data_start + t.offset;
  }
}

bool is_gguf_path(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return true;
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  char magic[4] = {0, 0, 0, 0};
  const bool ok = ::read(fd, magic, 4) == 4 && std::memcmp(magic, "GGUF", 4) == 0;
  ::close(fd);
  return ok;
}

}  // namespace focal
