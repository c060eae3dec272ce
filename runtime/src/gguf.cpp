// GGUF parsing (dequantisation of the ggml block types: gguf_dequant.cpp). Layout: "GGUF", u32 version, u64 tensor
// count, u64 metadata count, metadata (string key, u32 value type, value), tensor infos (string name, u32 n_dims,
// u64 dims[n_dims], u32 type, u64 offset), padding to general.alignment (default 32), data area. All little-endian.
#include "gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>

#include "file_map.h"
#include "fnv1a.h"
#include "focal/error.h"

namespace focal {

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

// One line a type: the switches read as tables.
// clang-format off
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
    case kGgufI8: { auto v = r.get<int8_t>(what); *i64 = v; return v; }  // NOLINT(bugprone-signed-char-misuse): signed by the format
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
// clang-format on

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

std::ptrdiff_t GgufFile::read_into_memory(const std::function<void(size_t done, size_t total)>& progress) {
  if (!mapped_ || in_memory_) return 0;
  const FileMap held = copy_into_memory(FileMap{data_, size_}, path_, progress);
  const std::ptrdiff_t delta = held.data - data_;
  unmap_file(FileMap{data_, size_});
  data_ = held.data;
  in_memory_ = true;
  for (GgufTensor& t : tensors_)
    if (t.data) t.data += delta;
  return delta;
}

void GgufFile::relayout(const uint8_t* at, int64_t rows, size_t row_bytes,
                        const std::function<void(uint8_t* bytes)>& pack,
                        std::function<void(int64_t r, uint8_t* out)> original_row) {
  const size_t n = (size_t)rows * row_bytes;
  if (!in_memory_ || at < data_ || n > size_ || (size_t)(at - data_) > size_ - n)
    throw Error("internal: '" + path_ + "': relayout of bytes outside the file held in memory");
  auto* dst = const_cast<uint8_t*>(at);  // the held copy is ours (copy_into_memory maps it read-only)
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uint8_t* p0 = dst - reinterpret_cast<uintptr_t>(dst) % page;  // mprotect works on whole pages
  const size_t len = (size_t)(dst + n - p0);
  if (mprotect(p0, len, PROT_READ | PROT_WRITE) != 0)
    throw Error("'" + path_ + "': cannot write to the weights held in memory: " + std::strerror(errno));
  pack(dst);
  mprotect(p0, len, PROT_READ);
  Relaid r;
  r.offset = (size_t)(at - data_);
  r.rows = rows;
  r.row_bytes = row_bytes;
  r.original_row = std::move(original_row);
  relaid_.insert(std::upper_bound(relaid_.begin(), relaid_.end(), r.offset,
                                  [](size_t off, const Relaid& e) { return off < e.offset; }),
                 std::move(r));
}

uint64_t GgufFile::fnv1a(uint64_t h) const {
  auto fold = [&h](const uint8_t* p, size_t n) { h = fnv1a_fold(h, p, n); };
  size_t at = 0;
  std::vector<uint8_t> row;
  for (const Relaid& r : relaid_) {  // the file's own bytes of re-laid-out ranges, row by row
    fold(data_ + at, r.offset - at);
    row.resize(r.row_bytes);
    for (int64_t i = 0; i < r.rows; ++i) {
      r.original_row(i, row.data());
      fold(row.data(), row.size());
    }
    at = r.offset + (size_t)r.rows * r.row_bytes;
  }
  fold(data_ + at, size_ - at);
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
          throw Error(where + ": string array of " + std::to_string(v.count) +
                      " entries runs past the end of the "
                      "file — the file is truncated or corrupt");
        v.strs.reserve((size_t)v.count);
        for (uint64_t i = 0; i < v.count; ++i) v.strs.push_back(r.str("a metadata string array entry"));
      } else {
        const size_t es = scalar_size(v.elem_type);
        if (!es) throw Error(where + ": array element type " + std::to_string(v.elem_type) + " is not supported");
        if (v.count > (size_ - r.pos) / es)
          throw Error(where + ": array of " + std::to_string(v.count) +
                      " entries runs past the end of the file — "
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
  // Two tensors on one byte range would read each other's weights, and a panel relayout of one (done in place in
  // the memory held) would rewrite the other: refused as safetensors' data_offsets are.
  std::vector<std::pair<uint64_t, const GgufTensor*>> ranges;  // [n nonempty tensors] (offset, tensor)
  for (const GgufTensor& t : tensors_)
    if (t.n_bytes > 0) ranges.push_back({t.offset, &t});
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    const GgufTensor& prev = *ranges[i - 1].second;
    if (ranges[i].first < prev.offset + prev.n_bytes)
      throw Error("'" + p + "': tensors '" + prev.name + "' and '" + ranges[i].second->name +
                  "' share data bytes from offset " + std::to_string(ranges[i].first) + " — the file is corrupt");
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
