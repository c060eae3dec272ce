// Safetensors parsing and dtype conversion (format: 8-byte little-endian header size, JSON header, data area).
#include "safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <nlohmann/json.hpp>

#include "file_map.h"
#include "fnv1a.h"
#include "focal/error.h"
#include "focal_kernels/shared_math.h"

namespace focal {

using json = nlohmann::json;

size_t StTensor::numel() const {
  size_t n = 1;
  for (int64_t d : shape) n *= (size_t)d;
  return n;
}

static int dtype_size(const std::string& dt) {
  if (dt == "F64" || dt == "I64" || dt == "U64") return 8;
  if (dt == "F32" || dt == "I32" || dt == "U32") return 4;
  if (dt == "F16" || dt == "BF16" || dt == "I16" || dt == "U16") return 2;
  if (dt == "I8" || dt == "U8" || dt == "BOOL" || dt == "F8_E4M3" || dt == "F8_E5M2") return 1;
  return 0;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const FileMap fm = map_file(path, 8, [&](size_t n) {
    return "'" + path + "' is truncated: " + std::to_string(n) + " bytes, a safetensors file needs at least the " +
           "8-byte header length";
  });
  map_ = fm.data;
  size_ = fm.size;
  mapped_ = true;
  try {
    parse();
  } catch (...) {
    unmap_file(fm);
    map_ = nullptr;
    mapped_ = false;
    throw;
  }
}

SafetensorsFile::SafetensorsFile(const uint8_t* data, size_t size, const std::string& name)
    : path_(name), map_(data), size_(size) {
  if (size_ < 8)
    throw Error("'" + path_ + "' is truncated: " + std::to_string(size_) + " bytes, a safetensors file needs at " +
                "least the 8-byte header length");
  parse();
}

void SafetensorsFile::parse() {
  const std::string& path = path_;
  {
    uint64_t hlen = 0;
    std::memcpy(&hlen, map_, 8);  // little-endian host assumed (x86_64 / aarch64)
    if (hlen > size_ - 8)
      throw Error("'" + path + "': header length " + std::to_string(hlen) + " is beyond the end of the file (" +
                  std::to_string(size_) + " bytes) — the file is truncated or not safetensors");
    // The format caps the header at 100 MB; a larger claim is corruption, refused before parsing it.
    constexpr uint64_t kMaxHeader = 100ULL << 20;
    if (hlen > kMaxHeader)
      throw Error("'" + path + "': header length " + std::to_string(hlen) + " exceeds the format's 100 MB limit — " +
                  "the file is corrupt or not safetensors");
    json h;
    std::set<std::string> names;  // a tensor named twice would silently shadow the first: refused
    std::string duplicate;
    const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::key && depth == 1 && !names.insert(parsed.get<std::string>()).second &&
          duplicate.empty())
        duplicate = parsed.get<std::string>();
      return true;
    };
    try {
      h = json::parse(map_ + 8, map_ + 8 + hlen, note_keys);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond 64 bits
      throw Error("'" + path + "': malformed JSON header (" + e.what() + ")");
    }
    if (!duplicate.empty())
      throw Error("'" + path + "': tensor '" + duplicate + "' appears twice in the header — the file is corrupt");
    if (!h.is_object()) throw Error("'" + path + "': header is not a JSON object");
    const uint8_t* data = map_ + 8 + hlen;
    const size_t data_size = size_ - 8 - hlen;
    std::vector<std::pair<size_t, size_t>> ranges;
    for (auto& [name, v] : h.items()) {
      if (name == "__metadata__") continue;
      const std::string where = "'" + path + "': tensor '" + name + "'";
      if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
        throw Error(where + " lacks dtype, shape or data_offsets");
      StTensor t;
      t.name = name;
      t.dtype = v["dtype"].is_string() ? v["dtype"].get<std::string>() : "";
      const int ds = dtype_size(t.dtype);
      if (!ds) throw Error(where + " has unknown dtype '" + t.dtype + "'");
      if (!v["shape"].is_array()) throw Error(where + ": shape is not an array");
      for (auto& d : v["shape"]) {
        if (!d.is_number_integer() || d.get<int64_t>() < 0)
          throw Error(where + ": shape has a negative or non-integer dimension");
        t.shape.push_back(d.get<int64_t>());
      }
      uint64_t n_elems = 1;  // bounded so that numel() * dtype size cannot overflow
      for (int64_t d : t.shape) {
        if (d != 0 && n_elems > (1ULL << 48) / (uint64_t)d) throw Error(where + ": shape has more than 2^48 elements");
        n_elems *= (uint64_t)d;
      }
      auto& off = v["data_offsets"];
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        throw Error(where + ": data_offsets must be two non-negative integers");
      const size_t b = off[0].get<size_t>(), e = off[1].get<size_t>();
      if (b > e || e > data_size)
        throw Error(where + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                    "] lie outside the data area (" + std::to_string(data_size) + " bytes) — the file is truncated");
      if (e - b != t.numel() * (size_t)ds)
        throw Error(where + ": " + std::to_string(e - b) + " bytes of data do not match shape and dtype (" +
                    std::to_string(t.numel() * ds) + " bytes expected)");
      t.data = data + b;
      t.n_bytes = e - b;
      if (e > b) ranges.push_back({b, e});
      tensors_[name] = std::move(t);
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second)
        throw Error("'" + path + "': tensor data ranges overlap at byte " + std::to_string(ranges[i].first) +
                    " — the file is corrupt");
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (mapped_) unmap_file(FileMap{map_, size_});
}

uint64_t SafetensorsFile::fnv1a(uint64_t h) const { return fnv1a_fold(h, map_, size_); }

std::vector<float> tensor_to_f32(const StTensor& t, const std::string& file) {
  if (t.to_f32) return t.to_f32();
  const size_t n = t.numel();
  std::vector<float> out(n);
  if (t.dtype == "F32") {
    if (n) std::memcpy(out.data(), t.data, n * 4);  // empty tensors: out.data() may be null
  } else if (t.dtype == "F16" || t.dtype == "BF16") {
    const bool bf = t.dtype == "BF16";
    for (size_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, t.data + 2 * i, 2);
      out[i] = bf ? math::bf16_bits_to_float(v) : math::half_bits_to_float(v);
    }
  } else {
    throw Error("'" + file + "': tensor '" + t.name + "' has dtype " + t.dtype +
                "; focalscope loads F32, F16 and BF16 weights");
  }
  return out;
}

}  // namespace focal
