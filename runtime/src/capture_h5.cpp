// HDF5 reader and writer of capture and sweep files (layout: docs/capture-format.md), and CaptureFile::find_run.
// The HDF5 C API stays inside this file. Every entry point holds one process-wide lock: the serial HDF5 library is
// not thread-safe, and the app may write a capture on a worker thread while the UI thread reads another.

#include <fcntl.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "focal/capture.h"
#include "focal/error.h"
#include "focal/eval.h"
#include "focal/trainer.h"

namespace focal {

const RunCapture* CaptureFile::find_run(const std::string& name) const {
  for (const RunCapture& run : runs)
    if (run.name == name) return &run;
  return nullptr;
}

namespace {

std::mutex g_hdf5_mutex;

// Owns one HDF5 identifier and closes it with Close; -1 means none.
template <herr_t (*Close)(hid_t)>
class H5Id {
 public:
  H5Id() = default;
  explicit H5Id(hid_t id) : id_(id) {}
  H5Id(H5Id&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  H5Id& operator=(H5Id&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = -1;
    }
    return *this;
  }
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  ~H5Id() { reset(); }

  hid_t get() const { return id_; }
  void reset() { (void)close(); }
  herr_t close() {
    herr_t rc = id_ >= 0 ? Close(id_) : 0;
    id_ = -1;
    return rc;
  }

 private:
  hid_t id_ = -1;
};

using FileId = H5Id<H5Fclose>;
using GroupId = H5Id<H5Gclose>;
using DatasetId = H5Id<H5Dclose>;
using SpaceId = H5Id<H5Sclose>;
using TypeId = H5Id<H5Tclose>;
using AttrId = H5Id<H5Aclose>;
using PlistId = H5Id<H5Pclose>;

// Holds the HDF5 lock for one call and keeps the library's automatic error-stack printing off meanwhile, so a user
// sees one focal::Error instead of a page of HDF5 diagnostics.
class H5Call {
 public:
  H5Call() : lock_(g_hdf5_mutex) {
    H5Eget_auto2(H5E_DEFAULT, &old_func_, &old_data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    H5Eclear2(H5E_DEFAULT);
  }
  ~H5Call() {
    H5Eclear2(H5E_DEFAULT);
    H5Eset_auto2(H5E_DEFAULT, old_func_, old_data_);
  }
  H5Call(const H5Call&) = delete;
  H5Call& operator=(const H5Call&) = delete;

 private:
  std::lock_guard<std::mutex> lock_;
  H5E_auto2_t old_func_ = nullptr;
  void* old_data_ = nullptr;
};

herr_t keep_innermost(unsigned, const H5E_error2_t* err, void* out) {
  if (err && err->desc && err->desc[0]) *static_cast<std::string*>(out) = err->desc;
  return 0;
}

// The innermost message of HDF5's error stack (the most specific one), then clears the stack.
std::string hdf5_detail() {
  std::string desc;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, &desc);
  H5Eclear2(H5E_DEFAULT);
  return desc.empty() ? std::string() : " (HDF5: " + desc + ")";
}

// Error context: every message starts with `prefix`, e.g. "capture file 'a.h5'".
struct Where {
  std::string prefix;

  [[noreturn]] void fail(const std::string& msg) const { throw Error(prefix + ": " + msg); }
  // For failures reported by an HDF5 call: appends the library's own reason.
  [[noreturn]] void fail_h5(const std::string& msg) const { throw Error(prefix + ": " + msg + hdf5_detail()); }
};

template <class Id>
Id checked(hid_t id, const Where& where, const std::string& what) {
  if (id < 0) where.fail_h5(what);
  return Id(id);
}

void check_h5(herr_t rc, const Where& where, const std::string& what) {
  if (rc < 0) where.fail_h5(what);
}

using Dims = std::vector<hsize_t>;

size_t n_elements(const Dims& dims) {
  size_t n = 1;
  for (hsize_t d : dims) n *= size_t(d);
  return n;
}

std::string dims_text(const Dims& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string errno_text(int err, const std::string& path) {
  switch (err) {
    case EACCES:
    case EPERM: return "permission denied";
    case ENOENT: {
      const size_t slash = path.find_last_of('/');
      const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
      struct stat st;
      if (::stat(dir.c_str(), &st) != 0) return "directory '" + dir + "' does not exist";
      return "no such file or directory";
    }
    case ENOTDIR: return "a component of the path is not a directory";
    case EROFS: return "read-only file system";
    case ENOSPC: return "no space left on device";
    case EISDIR: return "it is a directory";
    default: {
      std::string s = std::strerror(err);
      if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z') s[0] = char(s[0] - 'A' + 'a');
      return s;
    }
  }
}

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// Shape strings stored in each dataset's "shape" attribute.
constexpr const char* kShapePosition = "[position]";
constexpr const char* kShapeRelevant = "[relevant_key]";
constexpr const char* kShapeLayer = "[layer]";
constexpr const char* kShapeHead = "[head]";
constexpr const char* kShapeQuery = "[query]";
constexpr const char* kShapeRows = "[layer, head, query, key]";
constexpr const char* kShapeMetrics = "[layer, head, row, metric]";
constexpr const char* kShapeRowScale = "[layer, head, row]";
constexpr const char* kShapeTau = "[layer, row]";
constexpr const char* kShapeTopk = "[position, rank]";
constexpr const char* kShapeCompare = "[layer, head, query]";
constexpr const char* kShapeTemp = "[temp]";
constexpr const char* kShapeHeadMetrics = "[temp, layer, head, metric]";

// ---------------------------------------------------------------------------------------------------------------
// Validation shared by the writers (before any file is touched) and the readers (after everything is read).

bool valid_link_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

void check_values(const Where& where, const std::string& item, size_t n_values, const Dims& dims,
                  const char* axes) {
  if (n_values != n_elements(dims))
    where.fail(item + " has " + std::to_string(n_values) + " values, expected " + axes + " " + dims_text(dims) +
               " = " + std::to_string(n_elements(dims)));
}

void check_indices(const Where& where, const std::string& item, const std::vector<int>& v, int limit,
                   const char* limit_name) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < 0 || v[i] >= limit)
      where.fail(item + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) + " is outside 0.." + limit_name +
                 "-1 (" + limit_name + " = " + std::to_string(limit) + ")");
}

Dims rows_dims(const std::vector<int>& layers, const std::vector<int>& heads, const std::vector<int>& queries,
               int n_tokens) {
  return {hsize_t(layers.size()), hsize_t(heads.size()), hsize_t(queries.size()), hsize_t(n_tokens)};
}

Dims compare_dims(const Comparison& c) {
  return {hsize_t(c.layers.size()), hsize_t(c.heads.size()), hsize_t(c.queries.size())};
}

// k of the stored next-token top-k: topk_ids is [T, k].
int topk_width(const RunCapture& run, int n_tokens) {
  return n_tokens > 0 ? int(run.topk_ids.size() / size_t(n_tokens)) : 0;
}

void check_run(const Where& where, const RunCapture& run, int n_layers, int n_heads, int n_tokens) {
  const std::string r = "run '" + run.name + "': ";
  if (!valid_link_name(run.name))
    where.fail("run name '" + run.name + "' is not usable as an HDF5 group name (empty, '.', or contains '/')");
  check_indices(where, r + "layers", run.layers, n_layers, "n_layers");
  check_indices(where, r + "heads", run.heads, n_heads, "n_heads");
  check_indices(where, r + "queries", run.queries, n_tokens, "n_tokens");
  const Dims rd = rows_dims(run.layers, run.heads, run.queries, n_tokens);
  if (!run.probs.empty()) check_values(where, r + "probs", run.probs.size(), rd, "[layers, heads, queries, tokens]");
  if (!run.scores.empty())
    check_values(where, r + "scores", run.scores.size(), rd, "[layers, heads, queries, tokens]");
  const hsize_t L = hsize_t(n_layers), H = hsize_t(n_heads), T = hsize_t(n_tokens);
  check_values(where, r + "metrics", run.metrics.size(), {L, H, T, hsize_t(kNumRowMetrics)},
               "[n_layers, n_heads, tokens, metrics]");
  check_values(where, r + "row_scale", run.row_scale.size(), {L, H, T}, "[n_layers, n_heads, tokens]");
  if (!run.tau.empty()) check_values(where, r + "tau", run.tau.size(), {L, T}, "[n_layers, tokens]");
  if (n_tokens > 0 && run.topk_ids.size() % size_t(n_tokens) != 0)
    where.fail(r + "topk_ids has " + std::to_string(run.topk_ids.size()) + " values, not a multiple of " +
               std::to_string(n_tokens) + " tokens ([tokens, k])");
  const hsize_t k = hsize_t(topk_width(run, n_tokens));
  check_values(where, r + "topk_ids", run.topk_ids.size(), {T, k}, "[tokens, k]");
  check_values(where, r + "topk_probs", run.topk_probs.size(), {T, k}, "[tokens, k]");
  check_values(where, r + "token_nll", run.token_nll.size(), {T}, "[tokens]");
}

void check_comparison(const Where& where, const Comparison& c, int n_layers, int n_heads, int n_tokens) {
  const std::string r = "comparison '" + c.run_a + "' vs '" + c.run_b + "': ";
  if (!valid_link_name(c.run_a) || !valid_link_name(c.run_b))
    where.fail(r + "run names must be non-empty and contain no '/'");
  check_indices(where, r + "layers", c.layers, n_layers, "n_layers");
  check_indices(where, r + "heads", c.heads, n_heads, "n_heads");
  check_indices(where, r + "queries", c.queries, n_tokens, "n_tokens");
  check_values(where, r + "kl", c.kl.size(), compare_dims(c), "[layers, heads, queries]");
  check_values(where, r + "js", c.js.size(), compare_dims(c), "[layers, heads, queries]");
}

std::string compare_group_name(const Comparison& c) { return c.run_a + "__vs__" + c.run_b; }

void check_capture(const Where& where, const CaptureFile& file) {
  if (file.n_layers < 0 || file.n_heads < 0 || file.d_head < 0)
    where.fail("n_layers, n_heads and d_head must not be negative");
  const int T = file.n_tokens();
  if (!file.pieces.empty() && int(file.pieces.size()) != T)
    where.fail("pieces has " + std::to_string(file.pieces.size()) + " entries, expected 0 or one per token (" +
               std::to_string(T) + ")");
  for (size_t i = 0; i < file.relevant.size(); ++i)
    if (file.relevant[i] < 0 || file.relevant[i] >= T)
      where.fail("relevant[" + std::to_string(i) + "] = " + std::to_string(file.relevant[i]) +
                 " is outside 0..n_tokens-1 (n_tokens = " + std::to_string(T) + ")");
  std::set<std::string> names;
  for (const RunCapture& run : file.runs) {
    check_run(where, run, file.n_layers, file.n_heads, T);
    if (!names.insert(run.name).second) where.fail("two runs are named '" + run.name + "'");
  }
  std::set<std::string> pairs;
  for (const Comparison& c : file.comparisons) {
    check_comparison(where, c, file.n_layers, file.n_heads, T);
    if (!pairs.insert(compare_group_name(c)).second)
      where.fail("comparison '" + c.run_a + "' vs '" + c.run_b + "' appears twice");
  }
}

void check_sweep(const Where& where, const SweepFile& file) {
  if (file.n_layers < 0 || file.n_heads < 0) where.fail("n_layers and n_heads must not be negative");
  const hsize_t S = hsize_t(file.focal_temps.size());
  check_values(where, "head_metrics", file.head_metrics.size(),
               {S, hsize_t(file.n_layers), hsize_t(file.n_heads), hsize_t(kNumRowMetrics)},
               "[temps, n_layers, n_heads, metrics]");
  check_values(where, "mean_nll", file.mean_nll.size(), {S}, "[temps]");
}

std::vector<std::string> metric_names() {
  std::vector<std::string> names;
  for (int m = 0; m < kNumRowMetrics; ++m) names.push_back(row_metric_name(m));
  return names;
}

// ---------------------------------------------------------------------------------------------------------------
// float16 <-> float32, round to nearest even; overflow gives inf, NaN stays NaN.

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (a >= 0x38800000u)                                   // normal half: rebias the exponent, round 13 bits away
    return uint16_t(sign | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13));
  if (a < 0x33000000u) return sign;  // below 2^-25: rounds to zero
  const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24: the value in units of 2^-24 is m >> shift
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u), tie = 1u << (shift - 1u);
  if (rem > tie || (rem == tie && (q & 1u))) ++q;
  return uint16_t(sign | q);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t x;
  if (e == 0) {
    const float v = std::ldexp(float(m), -24);
    return sign ? -v : v;
  }
  x = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112u) << 23) | (m << 13));
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// ---------------------------------------------------------------------------------------------------------------
// Writing.

TypeId make_utf8_string_type(const Where& where) {
  TypeId t = checked<TypeId>(H5Tcopy(H5T_C_S1), where, "cannot create the string type");
  check_h5(H5Tset_size(t.get(), H5T_VARIABLE), where, "cannot create the string type");
  check_h5(H5Tset_cset(t.get(), H5T_CSET_UTF8), where, "cannot create the string type");
  return t;
}

// IEEE 754 binary16 (HDF5 1.10 has no predefined half type): sign bit 15, exponent bits 10..14 with bias 15,
// mantissa bits 0..9. h5py reads it as numpy float16. We convert ourselves (float_to_half / half_to_float) rather
// than let HDF5 do it: HDF5 1.10's float->half conversion loses the exponent carry when a value rounds up to a power
// of two (0.00195302 became 0.00097656), and its soft conversion is slow.
TypeId make_half_type(const Where& where) {
  TypeId t = checked<TypeId>(H5Tcopy(H5T_IEEE_F32LE), where, "cannot create the float16 type");
  if (H5Tset_fields(t.get(), 15, 10, 5, 0, 10) < 0 || H5Tset_precision(t.get(), 16) < 0 ||
      H5Tset_size(t.get(), 2) < 0 || H5Tset_ebias(t.get(), 15) < 0)
    where.fail_h5("cannot create the float16 type");
  return t;
}

class Writer {
 public:
  explicit Writer(Where where)
      : where_(std::move(where)),
        str_type_(make_utf8_string_type(where_)),
        half_type_(make_half_type(where_)),
        lcpl_(checked<PlistId>(H5Pcreate(H5P_LINK_CREATE), where_, "cannot create link properties")),
        compress_(H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0 && H5Zfilter_avail(H5Z_FILTER_SHUFFLE) > 0) {
    check_h5(H5Pset_char_encoding(lcpl_.get(), H5T_CSET_UTF8), where_, "cannot set UTF-8 link names");
  }

  const Where& where() const { return where_; }

  // track_order: list children in creation order (runs keep the order they were captured in).
  GroupId group(hid_t parent, const std::string& name, const std::string& path, bool track_order) {
    PlistId gcpl = checked<PlistId>(H5Pcreate(H5P_GROUP_CREATE), where_, "cannot create group properties");
    check_h5(H5Pset_obj_track_times(gcpl.get(), 0), where_, "cannot disable time tracking");
    if (track_order)
      check_h5(H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED), where_,
               "cannot track creation order of " + path);
    return checked<GroupId>(H5Gcreate2(parent, name.c_str(), lcpl_.get(), gcpl.get(), H5P_DEFAULT), where_,
                            "cannot create group " + path);
  }

  void attr_string(hid_t obj, const std::string& obj_path, const char* name, const std::string& value) {
    SpaceId space = checked<SpaceId>(H5Screate(H5S_SCALAR), where_, "cannot create a dataspace");
    AttrId a = create_attr(obj, obj_path, name, str_type_.get(), space.get());
    const char* p = value.c_str();
    check_h5(H5Awrite(a.get(), str_type_.get(), &p), where_, "cannot write attribute " + obj_path + "@" + name);
  }

  void attr_strings(hid_t obj, const std::string& obj_path, const char* name, const std::vector<std::string>& v) {
    const hsize_t n = v.size();
    SpaceId space = checked<SpaceId>(H5Screate_simple(1, &n, nullptr), where_, "cannot create a dataspace");
    AttrId a = create_attr(obj, obj_path, name, str_type_.get(), space.get());
    std::vector<const char*> ptrs;
    for (const std::string& s : v) ptrs.push_back(s.c_str());
    if (n > 0)
      check_h5(H5Awrite(a.get(), str_type_.get(), ptrs.data()), where_,
               "cannot write attribute " + obj_path + "@" + name);
  }

  void attr_i32(hid_t obj, const std::string& obj_path, const char* name, int32_t value) {
    SpaceId space = checked<SpaceId>(H5Screate(H5S_SCALAR), where_, "cannot create a dataspace");
    AttrId a = create_attr(obj, obj_path, name, H5T_STD_I32LE, space.get());
    check_h5(H5Awrite(a.get(), H5T_NATIVE_INT32, &value), where_, "cannot write attribute " + obj_path + "@" + name);
  }

  void attr_u64(hid_t obj, const std::string& obj_path, const char* name, uint64_t value) {
    SpaceId space = checked<SpaceId>(H5Screate(H5S_SCALAR), where_, "cannot create a dataspace");
    AttrId a = create_attr(obj, obj_path, name, H5T_STD_U64LE, space.get());
    check_h5(H5Awrite(a.get(), H5T_NATIVE_UINT64, &value), where_,
             "cannot write attribute " + obj_path + "@" + name);
  }

  // Writes dataset `name` of `parent` (at group path `parent_path`). A non-empty `chunk` asks for chunked storage
  // with shuffle + deflate; it is clamped to the dims, and datasets with a zero-size dim stay contiguous.
  void dataset(hid_t parent, const std::string& parent_path, const char* name, hid_t file_type, hid_t mem_type,
               const Dims& dims, const void* data, const char* shape, Dims chunk = {}) {
    const std::string path = parent_path + "/" + name;
    DatasetId ds = create_dataset(parent, path, name, file_type, dims, std::move(chunk));
    if (n_elements(dims) > 0)
      check_h5(H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), where_, "cannot write " + path);
    attr_string(ds.get(), path, "shape", shape);
  }

  // Writes float data as float16, converting one slab of the first axis at a time so the copy stays small.
  void dataset_f16(hid_t parent, const std::string& parent_path, const char* name, const Dims& dims,
                   const float* data, const char* shape, Dims chunk = {}) {
    const std::string path = parent_path + "/" + name;
    DatasetId ds = create_dataset(parent, path, name, half_type_.get(), dims, std::move(chunk));
    const size_t n = n_elements(dims);
    if (n > 0) {
      Dims start(dims.size(), 0), count = dims;
      count[0] = 1;
      const size_t slab = n / size_t(dims[0]);
      SpaceId mem = checked<SpaceId>(H5Screate_simple(int(count.size()), count.data(), nullptr), where_,
                                     "cannot create a dataspace for " + path);
      SpaceId file = checked<SpaceId>(H5Dget_space(ds.get()), where_, "cannot write " + path);
      std::vector<uint16_t> half(slab);
      for (hsize_t i = 0; i < dims[0]; ++i) {
        const float* src = data + size_t(i) * slab;
        for (size_t j = 0; j < slab; ++j) half[j] = float_to_half(src[j]);
        start[0] = i;
        check_h5(H5Sselect_hyperslab(file.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                 where_, "cannot write " + path);
        check_h5(H5Dwrite(ds.get(), half_type_.get(), mem.get(), file.get(), H5P_DEFAULT, half.data()), where_,
                 "cannot write " + path);
      }
    }
    attr_string(ds.get(), path, "shape", shape);
  }

  void dataset_i32(hid_t parent, const std::string& parent_path, const char* name, const Dims& dims,
                   const int32_t* data, const char* shape) {
    dataset(parent, parent_path, name, H5T_STD_I32LE, H5T_NATIVE_INT32, dims, data, shape);
  }

  void dataset_i32(hid_t parent, const std::string& parent_path, const char* name, const std::vector<int>& v,
                   const char* shape) {
    static_assert(sizeof(int) == sizeof(int32_t), "int must be 32-bit");
    dataset(parent, parent_path, name, H5T_STD_I32LE, H5T_NATIVE_INT32, {hsize_t(v.size())}, v.data(), shape);
  }

  void dataset_f32(hid_t parent, const std::string& parent_path, const char* name, const Dims& dims,
                   const float* data, const char* shape, Dims chunk = {}) {
    dataset(parent, parent_path, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims, data, shape, std::move(chunk));
  }

  void dataset_strings(hid_t parent, const std::string& parent_path, const char* name,
                       const std::vector<std::string>& v, const char* shape) {
    std::vector<const char*> ptrs;
    for (const std::string& s : v) ptrs.push_back(s.c_str());
    dataset(parent, parent_path, name, str_type_.get(), str_type_.get(), {hsize_t(v.size())}, ptrs.data(), shape);
  }

 private:
  AttrId create_attr(hid_t obj, const std::string& obj_path, const char* name, hid_t type, hid_t space) {
    return checked<AttrId>(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), where_,
                           "cannot create attribute " + obj_path + "@" + name);
  }

  DatasetId create_dataset(hid_t parent, const std::string& path, const char* name, hid_t file_type, const Dims& dims,
                           Dims chunk) {
    SpaceId space = checked<SpaceId>(H5Screate_simple(int(dims.size()), dims.data(), nullptr), where_,
                                     "cannot create the dataspace of " + path);
    PlistId dcpl = checked<PlistId>(H5Pcreate(H5P_DATASET_CREATE), where_, "cannot create dataset properties");
    check_h5(H5Pset_obj_track_times(dcpl.get(), 0), where_, "cannot disable time tracking");
    if (!chunk.empty() && n_elements(dims) > 0) {
      for (size_t i = 0; i < dims.size(); ++i) chunk[i] = std::max<hsize_t>(1, std::min(chunk[i], dims[i]));
      check_h5(H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data()), where_, "cannot chunk " + path);
      if (compress_) {
        check_h5(H5Pset_shuffle(dcpl.get()), where_, "cannot set the shuffle filter on " + path);
        check_h5(H5Pset_deflate(dcpl.get(), 4), where_, "cannot set the deflate filter on " + path);
      }
    }
    return checked<DatasetId>(
        H5Dcreate2(parent, name, file_type, space.get(), lcpl_.get(), dcpl.get(), H5P_DEFAULT), where_,
        "cannot create dataset " + path);
  }

  Where where_;
  TypeId str_type_, half_type_;
  PlistId lcpl_;
  bool compress_;
};

// Chunk of a [Lc, Hc, Qc, T] row dataset: one (layer, head), up to 64 queries, about 1 MiB of float32 at most.
Dims rows_chunk(const Dims& dims) {
  const hsize_t T = std::max<hsize_t>(1, dims[3]);
  const hsize_t q = std::max<hsize_t>(1, std::min<hsize_t>(64, (hsize_t(1) << 20) / (T * 4)));
  return {1, 1, q, dims[3]};
}

// Chunk of a [L, H, T, M] metrics dataset: one layer, as many heads as fit in about 256 KiB.
Dims metrics_chunk(const Dims& dims) {
  const hsize_t per_head = std::max<hsize_t>(1, dims[2] * dims[3] * 4);
  const hsize_t h = std::max<hsize_t>(1, (hsize_t(256) << 10) / per_head);
  return {1, h, dims[2], dims[3]};
}

// Creates `path` under a temporary name in the same directory, lets `body` fill it, closes it, and renames it into
// place. On any failure the temporary is removed and the Error names `path`.
template <class Body>
void write_atomically(const std::string& path, const char* kind, Body&& body) {
  const std::string tmp = path + ".tmp." + std::to_string(long(::getpid()));
  const Where create_where{std::string("cannot create ") + kind + " file '" + path + "'"};
  const Where write_where{std::string("cannot write ") + kind + " file '" + path + "'"};
  if (path.empty()) throw Error(std::string("cannot create ") + kind + " file: the output path is empty");

  // Probe with open(2) first: HDF5 does not report errno reliably, and the user should hear "permission denied".
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    create_where.fail(errno_text(err, path) + " — choose a writable -o path");
  }
  ::close(fd);

  try {
    PlistId fcpl = checked<PlistId>(H5Pcreate(H5P_FILE_CREATE), write_where, "cannot create file properties");
    check_h5(H5Pset_obj_track_times(fcpl.get(), 0), write_where, "cannot disable time tracking");
    PlistId fapl = checked<PlistId>(H5Pcreate(H5P_FILE_ACCESS), write_where, "cannot create access properties");
    // Pinned format bounds so the same data always gives the same bytes (1.8-format objects: creation-order
    // tracking and large attributes; readable by any HDF5 >= 1.8, so by every h5py).
    check_h5(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V110), write_where,
             "cannot set the format bounds");
    check_h5(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG), write_where, "cannot set the close degree");
#if H5_VERSION_GE(1, 10, 7)
    // Only this process ever opens the temporary, so HDF5's file lock is not needed.
    check_h5(H5Pset_file_locking(fapl.get(), 0, 1), write_where, "cannot disable file locking");
#endif
    FileId file = checked<FileId>(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), create_where,
                                  "cannot create the temporary file '" + tmp + "'");
    Writer w(write_where);
    body(file.get(), w);
    check_h5(file.close(), write_where, "cannot finish the file (disk full?)");

    // Flush the data to disk before the rename makes it visible, so a crash leaves the old file or the new one.
    fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      (void)::fsync(fd);
      ::close(fd);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      write_where.fail("cannot rename '" + tmp + "' into place: " + errno_text(err, path));
    }
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

void write_root_header(Writer& w, hid_t root, const char* format, int version, const std::string& tool_version,
                       const std::string& created_utc, const std::string& model_path,
                       const std::string& model_config_json, uint64_t checksum) {
  w.attr_string(root, "/", "format", format);
  w.attr_i32(root, "/", "format_version", version);
  w.attr_string(root, "/", "tool_version", tool_version);
  w.attr_string(root, "/", "created_utc", created_utc.empty() ? now_utc() : created_utc);
  w.attr_string(root, "/", "model_path", model_path);
  w.attr_string(root, "/", "model_config_json", model_config_json);
  w.attr_u64(root, "/", "weights_checksum", checksum);
  w.attr_string(root, "/", "weights_fnv1a64", hex16(checksum));
  w.attr_strings(root, "/", "metric_names", metric_names());
}

void write_run(Writer& w, hid_t runs, const CaptureFile& file, const RunCapture& run, bool probs_fp16) {
  const std::string path = "/runs/" + run.name;
  GroupId g = w.group(runs, run.name, path, false);
  const hsize_t L = hsize_t(file.n_layers), H = hsize_t(file.n_heads), T = hsize_t(file.n_tokens());
  w.attr_string(g.get(), path, "temp_spec_json", run.temp_spec_json);
  w.attr_i32(g.get(), path, "topk_mass_k", run.topk_mass_k);
  w.dataset_i32(g.get(), path, "layers", run.layers, kShapeLayer);
  w.dataset_i32(g.get(), path, "heads", run.heads, kShapeHead);
  w.dataset_i32(g.get(), path, "queries", run.queries, kShapeQuery);
  const Dims rd = rows_dims(run.layers, run.heads, run.queries, file.n_tokens());
  if (!run.probs.empty() && probs_fp16) {
    w.dataset_f16(g.get(), path, "probs", rd, run.probs.data(), kShapeRows, rows_chunk(rd));
  } else if (!run.probs.empty()) {
    w.dataset_f32(g.get(), path, "probs", rd, run.probs.data(), kShapeRows, rows_chunk(rd));
  }
  if (!run.scores.empty()) w.dataset_f32(g.get(), path, "scores", rd, run.scores.data(), kShapeRows, rows_chunk(rd));
  const Dims md = {L, H, T, hsize_t(kNumRowMetrics)};
  w.dataset_f32(g.get(), path, "metrics", md, run.metrics.data(), kShapeMetrics, metrics_chunk(md));
  w.dataset_f32(g.get(), path, "row_scale", {L, H, T}, run.row_scale.data(), kShapeRowScale);
  if (!run.tau.empty()) w.dataset_f32(g.get(), path, "tau", {L, T}, run.tau.data(), kShapeTau);
  const hsize_t k = hsize_t(topk_width(run, file.n_tokens()));
  w.dataset_i32(g.get(), path, "topk_ids", {T, k}, run.topk_ids.data(), kShapeTopk);
  w.dataset_f32(g.get(), path, "topk_probs", {T, k}, run.topk_probs.data(), kShapeTopk);
  w.dataset_f32(g.get(), path, "token_nll", {T}, run.token_nll.data(), kShapePosition);
}

void write_comparison(Writer& w, hid_t compare, const Comparison& c) {
  const std::string name = compare_group_name(c), path = "/compare/" + name;
  GroupId g = w.group(compare, name, path, false);
  w.attr_string(g.get(), path, "run_a", c.run_a);
  w.attr_string(g.get(), path, "run_b", c.run_b);
  w.dataset_i32(g.get(), path, "layers", c.layers, kShapeLayer);
  w.dataset_i32(g.get(), path, "heads", c.heads, kShapeHead);
  w.dataset_i32(g.get(), path, "queries", c.queries, kShapeQuery);
  w.dataset_f32(g.get(), path, "kl", compare_dims(c), c.kl.data(), kShapeCompare);
  w.dataset_f32(g.get(), path, "js", compare_dims(c), c.js.data(), kShapeCompare);
}

// ---------------------------------------------------------------------------------------------------------------
// Reading.

template <class T>
struct Array {
  Dims dims;
  std::vector<T> data;
};

class Reader {
 public:
  explicit Reader(Where where) : where_(std::move(where)), half_type_(make_half_type(where_)) {}
  const Where& where() const { return where_; }

  bool has(hid_t parent, const char* name) { return H5Lexists(parent, name, H5P_DEFAULT) > 0; }
  bool has_attr(hid_t obj, const char* name) { return H5Aexists(obj, name) > 0; }

  GroupId group(hid_t parent, const std::string& name, const std::string& path) {
    if (!has(parent, name.c_str())) where_.fail("missing group " + path);
    return checked<GroupId>(H5Gopen2(parent, name.c_str(), H5P_DEFAULT), where_, "cannot open group " + path);
  }

  // Children of a group, in creation order when the writer tracked it (runs keep their capture order).
  std::vector<std::string> children(hid_t g, const std::string& path) {
    H5G_info_t info;
    check_h5(H5Gget_info(g, &info), where_, "cannot list " + path);
    PlistId gcpl = checked<PlistId>(H5Gget_create_plist(g), where_, "cannot list " + path);
    unsigned order = 0;
    check_h5(H5Pget_link_creation_order(gcpl.get(), &order), where_, "cannot list " + path);
    const H5_index_t index = (order & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
    std::vector<std::string> names;
    for (hsize_t i = 0; i < info.nlinks; ++i) {
      ssize_t n = H5Lget_name_by_idx(g, ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
      if (n < 0) where_.fail_h5("cannot list " + path);
      std::string name(size_t(n) + 1, '\0');
      if (H5Lget_name_by_idx(g, ".", index, H5_ITER_INC, i, &name[0], name.size(), H5P_DEFAULT) < 0)
        where_.fail_h5("cannot list " + path);
      name.resize(size_t(n));
      names.push_back(name);
    }
    return names;
  }

  std::string attr_string(hid_t obj, const std::string& obj_path, const char* name) {
    std::vector<std::string> v = attr_strings(obj, obj_path, name, true);
    return v.front();
  }

  // scalar: the attribute must hold exactly one string.
  std::vector<std::string> attr_strings(hid_t obj, const std::string& obj_path, const char* name,
                                        bool scalar = false) {
    AttrId a = open_attr(obj, obj_path, name);
    const std::string item = "attribute " + obj_path + "@" + name;
    TypeId type = checked<TypeId>(H5Aget_type(a.get()), where_, "cannot read " + item);
    if (H5Tget_class(type.get()) != H5T_STRING) where_.fail(item + " is not a string");
    SpaceId space = checked<SpaceId>(H5Aget_space(a.get()), where_, "cannot read " + item);
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    if (n < 0) where_.fail_h5("cannot read " + item);
    if (scalar && n != 1) where_.fail(item + " should hold one string, not " + std::to_string(n));
    return read_strings(type.get(), size_t(n), item,
                        [&](hid_t mem, void* buf) { return H5Aread(a.get(), mem, buf); });
  }

  int64_t attr_int(hid_t obj, const std::string& obj_path, const char* name) {
    AttrId a = open_attr(obj, obj_path, name);
    const std::string item = "attribute " + obj_path + "@" + name;
    TypeId type = checked<TypeId>(H5Aget_type(a.get()), where_, "cannot read " + item);
    if (H5Tget_class(type.get()) != H5T_INTEGER) where_.fail(item + " is not an integer");
    SpaceId space = checked<SpaceId>(H5Aget_space(a.get()), where_, "cannot read " + item);
    if (H5Sget_simple_extent_npoints(space.get()) != 1) where_.fail(item + " should hold one integer");
    if (H5Tget_sign(type.get()) == H5T_SGN_NONE) {
      uint64_t v = 0;
      check_h5(H5Aread(a.get(), H5T_NATIVE_UINT64, &v), where_, "cannot read " + item);
      if (v > uint64_t(std::numeric_limits<int64_t>::max())) where_.fail(item + " is out of range");
      return int64_t(v);
    }
    int64_t v = 0;
    check_h5(H5Aread(a.get(), H5T_NATIVE_INT64, &v), where_, "cannot read " + item);
    return v;
  }

  // An int attribute that must lie in [lo, hi].
  int attr_int_in(hid_t obj, const std::string& obj_path, const char* name, int64_t lo, int64_t hi) {
    int64_t v = attr_int(obj, obj_path, name);
    if (v < lo || v > hi)
      where_.fail("attribute " + obj_path + "@" + name + " = " + std::to_string(v) + " is outside " +
                  std::to_string(lo) + ".." + std::to_string(hi));
    return int(v);
  }

  uint64_t attr_u64(hid_t obj, const std::string& obj_path, const char* name) {
    AttrId a = open_attr(obj, obj_path, name);
    const std::string item = "attribute " + obj_path + "@" + name;
    TypeId type = checked<TypeId>(H5Aget_type(a.get()), where_, "cannot read " + item);
    if (H5Tget_class(type.get()) != H5T_INTEGER) where_.fail(item + " is not an integer");
    uint64_t v = 0;
    check_h5(H5Aread(a.get(), H5T_NATIVE_UINT64, &v), where_, "cannot read " + item);
    return v;
  }

  // Reads a numeric dataset of class `cls` (integer or float) into memory type `mem`, which matches T.
  template <class T>
  Array<T> read(hid_t parent, const std::string& parent_path, const char* name, hid_t mem, H5T_class_t cls,
                size_t rank) {
    const std::string path = parent_path + "/" + name;
    if (!has(parent, name)) where_.fail("missing dataset " + path);
    DatasetId ds = checked<DatasetId>(H5Dopen2(parent, name, H5P_DEFAULT), where_, "cannot open dataset " + path);
    TypeId type = checked<TypeId>(H5Dget_type(ds.get()), where_, "cannot read " + path);
    if (H5Tget_class(type.get()) != cls)
      where_.fail(path + " has the wrong element type (expected " +
                  (cls == H5T_FLOAT ? "floating point" : "integers") + ")");
    Array<T> out;
    out.dims = dataset_dims(ds.get(), path);
    if (out.dims.size() != rank)
      where_.fail(path + " has " + std::to_string(out.dims.size()) + " dimensions, expected " +
                  std::to_string(rank));
    out.data.resize(n_elements(out.dims));
    if (out.data.empty()) return out;
    if constexpr (std::is_same<T, float>::value) {
      if (H5Tequal(type.get(), half_type_.get()) > 0) {  // float16: read the bits a slab at a time, widen them
        Dims start(rank, 0), count = out.dims;
        count[0] = 1;
        const size_t slab = out.data.size() / size_t(out.dims[0]);
        SpaceId mem_space = checked<SpaceId>(H5Screate_simple(int(rank), count.data(), nullptr), where_,
                                             "cannot read " + path);
        SpaceId file_space = checked<SpaceId>(H5Dget_space(ds.get()), where_, "cannot read " + path);
        std::vector<uint16_t> half(slab);
        for (hsize_t i = 0; i < out.dims[0]; ++i) {
          start[0] = i;
          check_h5(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                                       nullptr),
                   where_, "cannot read " + path);
          check_h5(H5Dread(ds.get(), half_type_.get(), mem_space.get(), file_space.get(), H5P_DEFAULT, half.data()),
                   where_, "cannot read " + path);
          float* dst = out.data.data() + size_t(i) * slab;
          for (size_t j = 0; j < slab; ++j) dst[j] = half_to_float(half[j]);
        }
        return out;
      }
    }
    check_h5(H5Dread(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data.data()), where_, "cannot read " + path);
    return out;
  }

  Array<float> read_f32(hid_t parent, const std::string& parent_path, const char* name, size_t rank) {
    return read<float>(parent, parent_path, name, H5T_NATIVE_FLOAT, H5T_FLOAT, rank);
  }
  Array<int32_t> read_i32(hid_t parent, const std::string& parent_path, const char* name, size_t rank) {
    return read<int32_t>(parent, parent_path, name, H5T_NATIVE_INT32, H5T_INTEGER, rank);
  }
  std::vector<int> read_index(hid_t parent, const std::string& parent_path, const char* name) {
    Array<int32_t> a = read_i32(parent, parent_path, name, 1);
    return std::vector<int>(a.data.begin(), a.data.end());
  }

  // A 1-D dataset of strings (variable or fixed length).
  std::vector<std::string> read_string_dataset(hid_t parent, const std::string& parent_path, const char* name) {
    const std::string path = parent_path + "/" + name;
    if (!has(parent, name)) where_.fail("missing dataset " + path);
    DatasetId ds = checked<DatasetId>(H5Dopen2(parent, name, H5P_DEFAULT), where_, "cannot open dataset " + path);
    TypeId type = checked<TypeId>(H5Dget_type(ds.get()), where_, "cannot read " + path);
    if (H5Tget_class(type.get()) != H5T_STRING) where_.fail(path + " does not hold strings");
    Dims dims = dataset_dims(ds.get(), path);
    if (dims.size() != 1) where_.fail(path + " should be one-dimensional, has shape " + dims_text(dims));
    return read_strings(type.get(), size_t(dims[0]), path, [&](hid_t mem, void* buf) {
      return H5Dread(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    });
  }

  void expect_dims(const std::string& path, const Dims& got, const Dims& want, const char* axes) {
    if (got != want)
      where_.fail(path + " has shape " + dims_text(got) + ", expected " + axes + " " + dims_text(want));
  }

 private:
  AttrId open_attr(hid_t obj, const std::string& obj_path, const char* name) {
    if (!has_attr(obj, name)) where_.fail("missing attribute '" + std::string(name) + "' on " + obj_path);
    return checked<AttrId>(H5Aopen(obj, name, H5P_DEFAULT), where_,
                           "cannot open attribute " + obj_path + "@" + name);
  }

  Dims dataset_dims(hid_t ds, const std::string& path) {
    SpaceId space = checked<SpaceId>(H5Dget_space(ds), where_, "cannot read the shape of " + path);
    int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0) where_.fail_h5("cannot read the shape of " + path);
    Dims dims(static_cast<size_t>(rank));
    if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
      where_.fail_h5("cannot read the shape of " + path);
    return dims;
  }

  // Reads n strings of file type `type` with read_fn(mem_type, buffer); VL strings are freed even on failure.
  template <class ReadFn>
  std::vector<std::string> read_strings(hid_t type, size_t n, const std::string& item, ReadFn read_fn) {
    std::vector<std::string> out;
    if (n == 0) return out;
    TypeId mem = checked<TypeId>(H5Tcopy(type), where_, "cannot read " + item);
    const htri_t vl = H5Tis_variable_str(type);
    if (vl < 0) where_.fail_h5("cannot read " + item);
    if (vl) {
      std::vector<char*> ptrs(n, nullptr);
      struct Free {
        std::vector<char*>& p;
        ~Free() {
          for (char* s : p) H5free_memory(s);
        }
      } free_guard{ptrs};
      check_h5(read_fn(mem.get(), ptrs.data()), where_, "cannot read " + item);
      for (char* s : ptrs) out.emplace_back(s ? s : "");
    } else {
      const size_t size = H5Tget_size(type);
      if (size == 0) where_.fail_h5("cannot read " + item);
      std::vector<char> buf(n * size);
      check_h5(read_fn(mem.get(), buf.data()), where_, "cannot read " + item);
      for (size_t i = 0; i < n; ++i) {
        const char* s = buf.data() + i * size;
        out.emplace_back(s, strnlen(s, size));
      }
    }
    return out;
  }

  Where where_;
  TypeId half_type_;
};

// Opens `path` read-only after checking that it exists and is HDF5; kind is "capture" or "sweep".
FileId open_for_reading(const std::string& path, const char* kind) {
  const Where where{std::string("cannot read ") + kind + " file '" + path + "'"};
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    where.fail(err == ENOENT ? std::string("no such file") : errno_text(err, path));
  }
  if (S_ISDIR(st.st_mode)) where.fail("it is a directory");
  if (::access(path.c_str(), R_OK) != 0) {
    const int err = errno;
    where.fail(errno_text(err, path));
  }
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
  if (is_h5 <= 0)
    where.fail(std::string("not an HDF5 file (expected a focalscope ") + kind + " written by focal)");
  PlistId fapl = checked<PlistId>(H5Pcreate(H5P_FILE_ACCESS), where, "cannot create access properties");
  check_h5(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG), where, "cannot set the close degree");
#if H5_VERSION_GE(1, 10, 7)
  // Files are replaced by rename, never modified in place, so locks buy nothing and fail on some network mounts.
  check_h5(H5Pset_file_locking(fapl.get(), 0, 1), where, "cannot disable file locking");
#endif
  return checked<FileId>(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), where, "cannot open the file");
}

// Checks the root format name and version; `other` is the format name of the other file kind, for a hint.
void check_format(Reader& r, hid_t root, const std::string& path, const char* kind, const char* format,
                  int version, const char* other_format, const char* other_hint) {
  const std::string f = "'" + path + "'";
  if (!r.has_attr(root, "format"))
    throw Error(f + " is an HDF5 file but not a focalscope " + kind + " (it has no 'format' attribute)");
  const std::string got = r.attr_string(root, "/", "format");
  if (got != format) {
    std::string msg = f + " is not a focalscope " + kind + ": its format is '" + got + "', expected '" + format + "'";
    if (got == other_format) msg += std::string(" — ") + other_hint;
    throw Error(msg);
  }
  const int64_t v = r.attr_int(root, "/", "format_version");
  if (v > version)
    throw Error(f + " is a " + kind + " of format version " + std::to_string(v) +
                ", newer than this focalscope reads (" + std::to_string(version) + ") — update focalscope");
  if (v < 1) throw Error(f + ": invalid format_version " + std::to_string(v));
}

void check_metric_names(Reader& r, hid_t root) {
  const std::vector<std::string> got = r.attr_strings(root, "/", "metric_names");
  const std::vector<std::string> want = metric_names();
  if (got != want) {
    std::string g, w;
    for (const std::string& s : got) g += (g.empty() ? "" : ", ") + s;
    for (const std::string& s : want) w += (w.empty() ? "" : ", ") + s;
    r.where().fail("metric_names [" + g + "] differ from this focalscope's [" + w + "]");
  }
}

RunCapture read_run(Reader& r, hid_t runs, const std::string& name, const CaptureFile& file) {
  const std::string path = "/runs/" + name;
  GroupId g = r.group(runs, name, path);
  RunCapture run;
  run.name = name;
  run.temp_spec_json = r.attr_string(g.get(), path, "temp_spec_json");
  run.topk_mass_k = r.attr_int_in(g.get(), path, "topk_mass_k", 0, std::numeric_limits<int>::max());
  run.layers = r.read_index(g.get(), path, "layers");
  run.heads = r.read_index(g.get(), path, "heads");
  run.queries = r.read_index(g.get(), path, "queries");
  const int n_tokens = file.n_tokens();
  const Dims rd = rows_dims(run.layers, run.heads, run.queries, n_tokens);
  const char* rows_axes = "[layers, heads, queries, tokens]";
  if (r.has(g.get(), "probs")) {
    Array<float> a = r.read_f32(g.get(), path, "probs", 4);
    r.expect_dims(path + "/probs", a.dims, rd, rows_axes);
    run.probs = std::move(a.data);
  }
  if (r.has(g.get(), "scores")) {
    Array<float> a = r.read_f32(g.get(), path, "scores", 4);
    r.expect_dims(path + "/scores", a.dims, rd, rows_axes);
    run.scores = std::move(a.data);
  }
  const hsize_t L = hsize_t(file.n_layers), H = hsize_t(file.n_heads), T = hsize_t(n_tokens);
  Array<float> metrics = r.read_f32(g.get(), path, "metrics", 4);
  r.expect_dims(path + "/metrics", metrics.dims, {L, H, T, hsize_t(kNumRowMetrics)},
                "[n_layers, n_heads, tokens, metrics]");
  run.metrics = std::move(metrics.data);
  Array<float> row_scale = r.read_f32(g.get(), path, "row_scale", 3);
  r.expect_dims(path + "/row_scale", row_scale.dims, {L, H, T}, "[n_layers, n_heads, tokens]");
  run.row_scale = std::move(row_scale.data);
  if (r.has(g.get(), "tau")) {
    Array<float> tau = r.read_f32(g.get(), path, "tau", 2);
    r.expect_dims(path + "/tau", tau.dims, {L, T}, "[n_layers, tokens]");
    run.tau = std::move(tau.data);
  }
  Array<int32_t> topk_ids = r.read_i32(g.get(), path, "topk_ids", 2);
  const hsize_t k = topk_ids.dims[1];
  r.expect_dims(path + "/topk_ids", topk_ids.dims, {T, k}, "[tokens, k]");
  run.topk_ids = std::move(topk_ids.data);
  Array<float> topk_probs = r.read_f32(g.get(), path, "topk_probs", 2);
  r.expect_dims(path + "/topk_probs", topk_probs.dims, {T, k}, "[tokens, k]");
  run.topk_probs = std::move(topk_probs.data);
  Array<float> nll = r.read_f32(g.get(), path, "token_nll", 1);
  r.expect_dims(path + "/token_nll", nll.dims, {T}, "[tokens]");
  run.token_nll = std::move(nll.data);
  check_run(r.where(), run, file.n_layers, file.n_heads, n_tokens);
  return run;
}

Comparison read_comparison(Reader& r, hid_t compare, const std::string& name, const CaptureFile& file) {
  const std::string path = "/compare/" + name;
  GroupId g = r.group(compare, name, path);
  Comparison c;
  c.run_a = r.attr_string(g.get(), path, "run_a");
  c.run_b = r.attr_string(g.get(), path, "run_b");
  c.layers = r.read_index(g.get(), path, "layers");
  c.heads = r.read_index(g.get(), path, "heads");
  c.queries = r.read_index(g.get(), path, "queries");
  Array<float> kl = r.read_f32(g.get(), path, "kl", 3);
  r.expect_dims(path + "/kl", kl.dims, compare_dims(c), "[layers, heads, queries]");
  c.kl = std::move(kl.data);
  Array<float> js = r.read_f32(g.get(), path, "js", 3);
  r.expect_dims(path + "/js", js.dims, compare_dims(c), "[layers, heads, queries]");
  c.js = std::move(js.data);
  check_comparison(r.where(), c, file.n_layers, file.n_heads, file.n_tokens());
  return c;
}

}  // namespace

void write_capture(const CaptureFile& file, const std::string& path, bool probs_fp16) {
  check_capture(Where{"cannot write capture file '" + path + "'"}, file);
  H5Call h5;
  write_atomically(path, "capture", [&](hid_t root, Writer& w) {
    write_root_header(w, root, CaptureFile::kFormatName, CaptureFile::kFormatVersion, file.tool_version,
                      file.created_utc, file.model_path, file.model_config_json, file.weights_checksum);
    w.attr_i32(root, "/", "n_layers", file.n_layers);
    w.attr_i32(root, "/", "n_heads", file.n_heads);
    w.attr_i32(root, "/", "d_head", file.d_head);

    const hsize_t T = hsize_t(file.n_tokens());
    GroupId tokens = w.group(root, "tokens", "/tokens", false);
    w.dataset_i32(tokens.get(), "/tokens", "ids", {T}, file.token_ids.data(), kShapePosition);
    w.dataset_strings(tokens.get(), "/tokens", "pieces", file.pieces, kShapePosition);
    w.dataset_i32(tokens.get(), "/tokens", "relevant", {hsize_t(file.relevant.size())}, file.relevant.data(),
                  kShapeRelevant);

    GroupId runs = w.group(root, "runs", "/runs", true);
    for (const RunCapture& run : file.runs) write_run(w, runs.get(), file, run, probs_fp16);
    GroupId compare = w.group(root, "compare", "/compare", true);
    for (const Comparison& c : file.comparisons) write_comparison(w, compare.get(), c);
  });
}

CaptureFile read_capture(const std::string& path) {
  H5Call h5;
  FileId f = open_for_reading(path, "capture");
  GroupId root = checked<GroupId>(H5Gopen2(f.get(), "/", H5P_DEFAULT), Where{"capture file '" + path + "'"},
                                  "cannot open the root group");
  Reader r(Where{"capture file '" + path + "'"});
  check_format(r, root.get(), path, "capture", CaptureFile::kFormatName, CaptureFile::kFormatVersion,
               SweepFile::kFormatName, "it is a temperature sweep; open it as a sweep");
  check_metric_names(r, root.get());

  CaptureFile file;
  file.tool_version = r.attr_string(root.get(), "/", "tool_version");
  file.created_utc = r.attr_string(root.get(), "/", "created_utc");
  file.model_path = r.attr_string(root.get(), "/", "model_path");
  file.model_config_json = r.attr_string(root.get(), "/", "model_config_json");
  file.weights_checksum = r.attr_u64(root.get(), "/", "weights_checksum");
  const int kMax = std::numeric_limits<int>::max();
  file.n_layers = r.attr_int_in(root.get(), "/", "n_layers", 0, kMax);
  file.n_heads = r.attr_int_in(root.get(), "/", "n_heads", 0, kMax);
  file.d_head = r.attr_int_in(root.get(), "/", "d_head", 0, kMax);

  GroupId tokens = r.group(root.get(), "tokens", "/tokens");
  file.token_ids = r.read_i32(tokens.get(), "/tokens", "ids", 1).data;
  file.pieces = r.read_string_dataset(tokens.get(), "/tokens", "pieces");
  if (!file.pieces.empty() && file.pieces.size() != file.token_ids.size())
    r.where().fail("/tokens/pieces has " + std::to_string(file.pieces.size()) + " entries but /tokens/ids has " +
                   std::to_string(file.token_ids.size()));
  file.relevant = r.read_i32(tokens.get(), "/tokens", "relevant", 1).data;

  GroupId runs = r.group(root.get(), "runs", "/runs");
  for (const std::string& name : r.children(runs.get(), "/runs"))
    file.runs.push_back(read_run(r, runs.get(), name, file));
  if (r.has(root.get(), "compare")) {
    GroupId compare = r.group(root.get(), "compare", "/compare");
    for (const std::string& name : r.children(compare.get(), "/compare"))
      file.comparisons.push_back(read_comparison(r, compare.get(), name, file));
  }
  check_capture(r.where(), file);
  return file;
}

void write_sweep(const SweepFile& file, const std::string& path) {
  check_sweep(Where{"cannot write sweep file '" + path + "'"}, file);
  H5Call h5;
  write_atomically(path, "sweep", [&](hid_t root, Writer& w) {
    write_root_header(w, root, SweepFile::kFormatName, SweepFile::kFormatVersion, file.tool_version,
                      file.created_utc, file.model_path, file.model_config_json, file.weights_checksum);
    w.attr_string(root, "/", "base_spec_json", file.base_spec_json);
    w.attr_i32(root, "/", "n_layers", file.n_layers);
    w.attr_i32(root, "/", "n_heads", file.n_heads);
    const hsize_t S = hsize_t(file.focal_temps.size());
    w.dataset_i32(root, "", "token_ids", {hsize_t(file.token_ids.size())}, file.token_ids.data(), kShapePosition);
    w.dataset_f32(root, "", "focal_temps", {S}, file.focal_temps.data(), kShapeTemp);
    const Dims hd = {S, hsize_t(file.n_layers), hsize_t(file.n_heads), hsize_t(kNumRowMetrics)};
    w.dataset_f32(root, "", "head_metrics", hd, file.head_metrics.data(), kShapeHeadMetrics,
                  {1, hd[1], hd[2], hd[3]});
    w.dataset_f32(root, "", "mean_nll", {S}, file.mean_nll.data(), kShapeTemp);
  });
}

SweepFile read_sweep(const std::string& path) {
  H5Call h5;
  FileId f = open_for_reading(path, "sweep");
  GroupId root = checked<GroupId>(H5Gopen2(f.get(), "/", H5P_DEFAULT), Where{"sweep file '" + path + "'"},
                                  "cannot open the root group");
  Reader r(Where{"sweep file '" + path + "'"});
  check_format(r, root.get(), path, "sweep", SweepFile::kFormatName, SweepFile::kFormatVersion,
               CaptureFile::kFormatName, "it is an attention capture; open it as a capture");
  check_metric_names(r, root.get());

  SweepFile file;
  file.tool_version = r.attr_string(root.get(), "/", "tool_version");
  file.created_utc = r.attr_string(root.get(), "/", "created_utc");
  file.model_path = r.attr_string(root.get(), "/", "model_path");
  file.model_config_json = r.attr_string(root.get(), "/", "model_config_json");
  file.weights_checksum = r.attr_u64(root.get(), "/", "weights_checksum");
  file.base_spec_json = r.attr_string(root.get(), "/", "base_spec_json");
  const int kMax = std::numeric_limits<int>::max();
  file.n_layers = r.attr_int_in(root.get(), "/", "n_layers", 0, kMax);
  file.n_heads = r.attr_int_in(root.get(), "/", "n_heads", 0, kMax);

  file.token_ids = r.read_i32(root.get(), "", "token_ids", 1).data;
  Array<float> temps = r.read_f32(root.get(), "", "focal_temps", 1);
  const hsize_t S = temps.dims[0];
  file.focal_temps = std::move(temps.data);
  Array<float> hm = r.read_f32(root.get(), "", "head_metrics", 4);
  r.expect_dims("/head_metrics", hm.dims, {S, hsize_t(file.n_layers), hsize_t(file.n_heads), hsize_t(kNumRowMetrics)},
                "[temps, n_layers, n_heads, metrics]");
  file.head_metrics = std::move(hm.data);
  Array<float> nll = r.read_f32(root.get(), "", "mean_nll", 1);
  r.expect_dims("/mean_nll", nll.dims, {S}, "[temps]");
  file.mean_nll = std::move(nll.data);
  return file;
}

}  // namespace focal

// ---- training logs and evaluation files (same conventions as captures) ----
namespace focal {

void write_train_log(const TrainLog& log, const std::string& path) {
  H5Call h5;
  const size_t N = log.eval_step.size();
  const Where where{"cannot write training log '" + path + "'"};
  for (const auto* v : {&log.train_loss, &log.val_loss, &log.lr, &log.grad_norm, &log.tokens_per_s, &log.tau_clip_frac})
    if (v->size() != N) where.fail("every per-evaluation column must have one value per evaluation");
  if (log.tau_mean.size() != N * size_t(log.n_layers)) where.fail("tau_mean must be [evaluations, n_layers]");
  write_atomically(path, "training log", [&](hid_t root, Writer& w) {
    w.attr_string(root, "/", "format", TrainLog::kFormatName);
    w.attr_i32(root, "/", "format_version", TrainLog::kFormatVersion);
    w.attr_string(root, "/", "tool_version", log.tool_version);
    w.attr_string(root, "/", "created_utc", log.created_utc.empty() ? now_utc() : log.created_utc);
    w.attr_string(root, "/", "run_name", log.run_name);
    w.attr_string(root, "/", "train_config_json", log.train_config_json);
    w.attr_string(root, "/", "model_config_json", log.model_config_json);
    w.attr_i32(root, "/", "n_layers", log.n_layers);
    const hsize_t n = hsize_t(N);
    w.dataset_i32(root, "", "eval_step", {n}, log.eval_step.data(), "[evaluation]");
    w.dataset_f32(root, "", "train_loss", {n}, log.train_loss.data(), "[evaluation]");
    w.dataset_f32(root, "", "val_loss", {n}, log.val_loss.data(), "[evaluation]");
    w.dataset_f32(root, "", "lr", {n}, log.lr.data(), "[evaluation]");
    w.dataset_f32(root, "", "grad_norm", {n}, log.grad_norm.data(), "[evaluation]");
    w.dataset_f32(root, "", "tokens_per_s", {n}, log.tokens_per_s.data(), "[evaluation]");
    w.dataset_f32(root, "", "tau_mean", {n, hsize_t(log.n_layers)}, log.tau_mean.data(), "[evaluation, layer]");
    w.dataset_f32(root, "", "tau_clip_frac", {n}, log.tau_clip_frac.data(), "[evaluation]");
    w.dataset_f32(root, "", "step_loss", {hsize_t(log.step_loss.size())}, log.step_loss.data(), "[step]");
  });
}

TrainLog read_train_log(const std::string& path) {
  H5Call h5;
  FileId f = open_for_reading(path, "training log");
  const Where where{"training log '" + path + "'"};
  GroupId root = checked<GroupId>(H5Gopen2(f.get(), "/", H5P_DEFAULT), where, "cannot open the root group");
  Reader r(where);
  check_format(r, root.get(), path, "training log", TrainLog::kFormatName, TrainLog::kFormatVersion,
               CaptureFile::kFormatName, "it is an attention capture, not a training log");
  TrainLog log;
  log.tool_version = r.attr_string(root.get(), "/", "tool_version");
  log.created_utc = r.attr_string(root.get(), "/", "created_utc");
  log.run_name = r.attr_string(root.get(), "/", "run_name");
  log.train_config_json = r.attr_string(root.get(), "/", "train_config_json");
  log.model_config_json = r.attr_string(root.get(), "/", "model_config_json");
  log.n_layers = r.attr_int_in(root.get(), "/", "n_layers", 0, 1 << 20);
  log.eval_step = r.read_i32(root.get(), "", "eval_step", 1).data;
  const hsize_t N = log.eval_step.size();
  auto col = [&](const char* name) {
    Array<float> a = r.read_f32(root.get(), "", name, 1);
    r.expect_dims(std::string("/") + name, a.dims, {N}, "[evaluation]");
    return std::move(a.data);
  };
  log.train_loss = col("train_loss");
  log.val_loss = col("val_loss");
  log.lr = col("lr");
  log.grad_norm = col("grad_norm");
  log.tokens_per_s = col("tokens_per_s");
  log.tau_clip_frac = col("tau_clip_frac");
  Array<float> tm = r.read_f32(root.get(), "", "tau_mean", 2);
  r.expect_dims("/tau_mean", tm.dims, {N, hsize_t(log.n_layers)}, "[evaluation, layer]");
  log.tau_mean = std::move(tm.data);
  log.step_loss = r.read_f32(root.get(), "", "step_loss", 1).data;
  return log;
}

void write_eval(const EvalFile& e, const std::string& path) {
  H5Call h5;
  const Where where{"cannot write evaluation file '" + path + "'"};
  const size_t K = e.task_kinds.size(), Ln = e.lengths.size(), L = size_t(e.n_layers);
  if (e.n_answers.size() != K * Ln || e.accuracy.size() != K * Ln || e.relevant_mass.size() != K * Ln * L ||
      e.entropy.size() != K * Ln * L)
    where.fail("task tables must be [kinds, lengths] and [kinds, lengths, layers]");
  write_atomically(path, "evaluation", [&](hid_t root, Writer& w) {
    w.attr_string(root, "/", "format", EvalFile::kFormatName);
    w.attr_i32(root, "/", "format_version", EvalFile::kFormatVersion);
    w.attr_string(root, "/", "tool_version", e.tool_version);
    w.attr_string(root, "/", "created_utc", e.created_utc.empty() ? now_utc() : e.created_utc);
    w.attr_string(root, "/", "model_path", e.model_path);
    w.attr_string(root, "/", "model_config_json", e.model_config_json);
    w.attr_string(root, "/", "temp_spec_json", e.temp_spec_json);
    w.attr_u64(root, "/", "weights_checksum", e.weights_checksum);
    w.attr_i32(root, "/", "n_layers", e.n_layers);
    const float scalars[2] = {e.val_loss, e.val_ppl};
    w.dataset_f32(root, "", "val_loss_ppl", {2}, scalars, "[val_loss_nats, val_ppl]");
    const int32_t vt = int32_t(std::min<int64_t>(e.val_tokens, std::numeric_limits<int32_t>::max()));
    w.dataset_i32(root, "", "val_tokens", {1}, &vt, "[1]");
    w.dataset_strings(root, "", "task_kinds", e.task_kinds, "[kind]");
    w.dataset_i32(root, "", "lengths", {hsize_t(Ln)}, e.lengths.data(), "[length]");
    w.dataset_i32(root, "", "n_answers", {hsize_t(K), hsize_t(Ln)}, e.n_answers.data(), "[kind, length]");
    w.dataset_f32(root, "", "accuracy", {hsize_t(K), hsize_t(Ln)}, e.accuracy.data(), "[kind, length]");
    w.dataset_f32(root, "", "relevant_mass", {hsize_t(K), hsize_t(Ln), hsize_t(L)}, e.relevant_mass.data(),
                  "[kind, length, layer]");
    w.dataset_f32(root, "", "entropy", {hsize_t(K), hsize_t(Ln), hsize_t(L)}, e.entropy.data(),
                  "[kind, length, layer]");
  });
}

EvalFile read_eval(const std::string& path) {
  H5Call h5;
  FileId f = open_for_reading(path, "evaluation");
  const Where where{"evaluation file '" + path + "'"};
  GroupId root = checked<GroupId>(H5Gopen2(f.get(), "/", H5P_DEFAULT), where, "cannot open the root group");
  Reader r(where);
  check_format(r, root.get(), path, "evaluation", EvalFile::kFormatName, EvalFile::kFormatVersion,
               CaptureFile::kFormatName, "it is an attention capture, not an evaluation");
  EvalFile e;
  e.tool_version = r.attr_string(root.get(), "/", "tool_version");
  e.created_utc = r.attr_string(root.get(), "/", "created_utc");
  e.model_path = r.attr_string(root.get(), "/", "model_path");
  e.model_config_json = r.attr_string(root.get(), "/", "model_config_json");
  e.temp_spec_json = r.attr_string(root.get(), "/", "temp_spec_json");
  e.weights_checksum = r.attr_u64(root.get(), "/", "weights_checksum");
  e.n_layers = r.attr_int_in(root.get(), "/", "n_layers", 0, 1 << 20);
  Array<float> sc = r.read_f32(root.get(), "", "val_loss_ppl", 1);
  r.expect_dims("/val_loss_ppl", sc.dims, {2}, "[2]");
  e.val_loss = sc.data[0];
  e.val_ppl = sc.data[1];
  e.val_tokens = r.read_i32(root.get(), "", "val_tokens", 1).data.at(0);
  e.task_kinds = r.read_string_dataset(root.get(), "", "task_kinds");
  e.lengths = r.read_i32(root.get(), "", "lengths", 1).data;
  const hsize_t K = e.task_kinds.size(), Ln = e.lengths.size(), L = hsize_t(e.n_layers);
  Array<int32_t> na = r.read_i32(root.get(), "", "n_answers", 2);
  r.expect_dims("/n_answers", na.dims, {K, Ln}, "[kind, length]");
  e.n_answers = std::move(na.data);
  Array<float> acc = r.read_f32(root.get(), "", "accuracy", 2);
  r.expect_dims("/accuracy", acc.dims, {K, Ln}, "[kind, length]");
  e.accuracy = std::move(acc.data);
  Array<float> rm = r.read_f32(root.get(), "", "relevant_mass", 3);
  r.expect_dims("/relevant_mass", rm.dims, {K, Ln, L}, "[kind, length, layer]");
  e.relevant_mass = std::move(rm.data);
  Array<float> en = r.read_f32(root.get(), "", "entropy", 3);
  r.expect_dims("/entropy", en.dims, {K, Ln, L}, "[kind, length, layer]");
  e.entropy = std::move(en.data);
  return e;
}

}  // namespace focal
