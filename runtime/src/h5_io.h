// The HDF5 layer under every focalscope file format (captures, sweeps, training logs, evaluations): RAII handles,
// the process-wide HDF5 lock, error context, a Writer and a Reader of attributes and datasets, the atomic write
// (temporary name + rename) and the root header every format shares (format name, version, provenance).
// Internal to the runtime: the HDF5 C API appears in this header and in the files that implement formats.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "focal/error.h"
#include "focal/provenance.h"
#include "h5_guard.h"

namespace focal::h5 {

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
// sees one focal::Error instead of a page of HDF5 diagnostics. Every entry point of a format holds one: the serial
// HDF5 library is not thread-safe, and the app may write a capture on a worker thread while the UI thread reads
// another.
class H5Call {
 public:
  H5Call();
  ~H5Call();
  H5Call(const H5Call&) = delete;
  H5Call& operator=(const H5Call&) = delete;

 private:
  std::lock_guard<std::recursive_mutex> lock_;
  H5E_auto2_t old_func_ = nullptr;
  void* old_data_ = nullptr;
};

// The innermost message of HDF5's error stack (the most specific one), then clears the stack. Where it is one of
// the library's signs of a damaged file (a metadata checksum, inflate, a signature, an address past the end), the
// text says so and ends with kDamagedAdvice.
std::string hdf5_detail();

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

inline void check_h5(herr_t rc, const Where& where, const std::string& what) {
  if (rc < 0) where.fail_h5(what);
}

using Dims = std::vector<hsize_t>;

size_t n_elements(const Dims& dims);
std::string dims_text(const Dims& dims);  // "[2, 3]"
// A short lower-case reason for errno `err` on `path` ("permission denied", "directory 'x' does not exist").
std::string errno_text(int err, const std::string& path);
// Whether errno `err` means the output did not fit: a full file system (ENOSPC), a quota (EDQUOT) or the file size
// limit (EFBIG, RLIMIT_FSIZE with SIGXFSZ ignored).
bool is_out_of_space(int err);
// The one message for an output that did not fit: "no space left on 'PATH' (the file system is full)"; the caller
// adds what was kept and how to go on.
std::string no_space_text(int err, const std::string& path);
std::string hex16(uint64_t v);  // 16 lower-case hex digits

// Content checksums (format note in docs/capture-format.md). HDF5 checksums its own metadata (the superblock and
// object headers, names and numeric attributes included) but not contiguous data, chunk indexes or the global heap
// that holds strings: a flipped bit there read back as a silently different number or token. So every dataset a
// Writer writes carries `crc32`, the CRC-32 (zlib's, as Python's zlib.crc32) of its elements in row-major order as
// stored (little-endian; a variable-length string as its bytes and one NUL), and every object with attributes
// carries `attrs_crc32` over its own path and the attributes it wrote, whose names `attrs_crc32_names` lists in
// ascending order (attrs_crc32_add): attributes added later, a researcher's note, are not covered and do not disturb
// it; one of the listed missing, or a number in another stored type, is damage. Reader::read and read_string_dataset check crc32 where a dataset has one; the
// damaged-file check (h5_guard) checks attrs_crc32. Files written before these attributes existed have none and
// are read as before.
inline constexpr const char* kCrcAttr = "crc32";
inline constexpr const char* kAttrsCrcAttr = "attrs_crc32";
inline constexpr const char* kAttrsCrcNamesAttr = "attrs_crc32_names";
uint32_t crc32_add(uint32_t crc, const void* data, size_t n_bytes);
// A variable-length string value: its bytes, then one NUL.
uint32_t crc32_add_string(uint32_t crc, const char* s);
// What attrs_crc32 takes of one attribute's value: a variable-length string attribute's values, each with a NUL
// (string_attr_bytes); a number's stored bytes, little-endian.
std::string string_attr_bytes(const std::vector<std::string>& values);
// One attribute: its name and a NUL, then its value's bytes.
uint32_t attrs_crc32_add(uint32_t crc, const std::string& name, const std::string& value_bytes);
// Whether s is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(const std::string& s);
// "(CRC-32 0x… read, 0x… stored)": the numbers of a checksum mismatch.
std::string crc_mismatch_text(uint32_t stored, uint32_t computed);
// What every "is damaged" message ends with.
inline constexpr const char* kDamagedAdvice =
    " — the file is corrupt (a truncated download, a bad sector, a hand edit?): write it again";
// What a checksum mismatch adds: the way to keep an edit made on purpose.
inline constexpr const char* kEditAdvice =
    " (an edit made on purpose: delete the edited object's crc32, attrs_crc32 and attrs_crc32_names, as "
    "docs/capture-format.md says)";

TypeId make_utf8_string_type(const Where& where);
// IEEE 754 binary16 (HDF5 1.10 has no predefined half type): sign bit 15, exponent bits 10..14 with bias 15,
// mantissa bits 0..9. h5py reads it as numpy float16. We convert ourselves (math::float_to_half_bits /
// half_bits_to_float) rather than let HDF5 do it: HDF5 1.10's float->half conversion loses the exponent carry when a
// value rounds up to a power of two (0.00195302 became 0.00097656), and its soft conversion is slow.
TypeId make_half_type(const Where& where);

// Converts n consecutive elements of a dataset's source array, starting at element `first` (row-major over the
// dataset's dims), to the file's bytes at dst. Called from several threads at once: it must only read.
using ChunkSource = std::function<void(size_t first, size_t n, unsigned char* dst)>;

// Writes every chunk of the chunked dataset `ds` (dims, chunk as created, filters shuffle then deflate at
// deflate_level) with H5Dwrite_chunk, shuffling and deflating batches of chunks in parallel (h5_chunks.cpp): the
// same stored bytes as H5Dwrite through the filter pipeline, which compresses on one thread.
void write_chunks_deflated(hid_t ds, const std::string& path, const Where& where, const Dims& dims, const Dims& chunk,
                           size_t elem_bytes, const ChunkSource& source, int deflate_level);

class Writer {
 public:
  explicit Writer(Where where);

  const Where& where() const { return where_; }

  // track_order: list children in creation order (runs keep the order they were captured in).
  GroupId group(hid_t parent, const std::string& name, const std::string& path, bool track_order);

  void attr_string(hid_t obj, const std::string& obj_path, const char* name, const std::string& value);

  void attr_strings(hid_t obj, const std::string& obj_path, const char* name, const std::vector<std::string>& v);

  void attr_i32(hid_t obj, const std::string& obj_path, const char* name, int32_t value);

  void attr_u64(hid_t obj, const std::string& obj_path, const char* name, uint64_t value);

  void attr_u32(hid_t obj, const std::string& obj_path, const char* name, uint32_t value);

  // Writes the attrs_crc32 of every object given string attributes (write_atomically calls it after the body).
  void finish(hid_t file);

  // Writes dataset `name` of `parent` (at group path `parent_path`). A non-empty `chunk` asks for chunked storage
  // with shuffle + deflate; it is clamped to the dims, and datasets with a zero-size dim stay contiguous.
  void dataset(hid_t parent, const std::string& parent_path, const char* name, hid_t file_type, hid_t mem_type,
               const Dims& dims, const void* data, const char* shape, Dims chunk = {});

  // Writes float data as float16, converting one slab of the first axis at a time so the copy stays small.
  void dataset_f16(hid_t parent, const std::string& parent_path, const char* name, const Dims& dims, const float* data,
                   const char* shape, Dims chunk = {});

  void dataset_i32(hid_t parent, const std::string& parent_path, const char* name, const Dims& dims,
                   const int32_t* data, const char* shape);

  void dataset_i32(hid_t parent, const std::string& parent_path, const char* name, const std::vector<int>& v,
                   const char* shape);

  void dataset_f32(hid_t parent, const std::string& parent_path, const char* name, const Dims& dims, const float* data,
                   const char* shape, Dims chunk = {});

  void dataset_strings(hid_t parent, const std::string& parent_path, const char* name,
                       const std::vector<std::string>& v, const char* shape);

 private:
  AttrId create_attr(hid_t obj, const std::string& obj_path, const char* name, hid_t type, hid_t space);

  // Remembers an attribute's value bytes (attrs_crc32_add) for its object's attrs_crc32.
  void note_attr(hid_t obj, const char* name, std::string value_bytes);

  // Creates the dataset; `chunk` comes back clamped to the dims, or empty where the storage is contiguous.
  DatasetId create_dataset(hid_t parent, const std::string& path, const char* name, hid_t file_type, const Dims& dims,
                           Dims& chunk);

  Where where_;
  TypeId str_type_, half_type_;
  PlistId lcpl_;
  bool compress_;
  // Every attribute written, its value's bytes by object path ("/", "/runs/a") and name.
  std::map<std::string, std::map<std::string, std::string>> attrs_;
};

template <class T>
struct Array {
  Dims dims;
  std::vector<T> data;
  bool stored_f16 = false;  // read_f32: the file stored float16 (widened here)
};

// Memory a reader may allocate for one file unless told otherwise: half the machine's memory, and half the
// address-space limit (ulimit -v) when one is set.
uint64_t default_read_budget();
std::string bytes_text(uint64_t n);  // "1.5 GB"

// Reads attributes and datasets, checking every declared size before allocating: a dataset's shape against what the
// caller expects (expect_dims before the read), its declared bytes against what the file stores (a contiguous dataset
// must store all of them; a compressed one cannot expand more than deflate's 1032:1), and the total against a
// memory budget. A hostile file is refused with the dataset and the number instead of exhausting memory.
class Reader {
 public:
  explicit Reader(Where where, uint64_t budget_bytes = 0)
      : where_(std::move(where)),
        half_type_(make_half_type(where_)),
        budget_bytes_(budget_bytes ? budget_bytes : default_read_budget()) {}
  const Where& where() const { return where_; }

  // Takes variable-length strings from what the damaged-file check read of `path` (h5_guard.h), where it has them.
  void use_checked_strings(const std::string& path) { strings_ = checked_strings(path); }

  // Whether `parent` links `name`; a lookup that fails (a damaged link index) is an Error, not "absent" (it read as
  // "missing dataset /stats/hist" with no word of damage).
  bool has(hid_t parent, const char* name) {
    const htri_t e = H5Lexists(parent, name, H5P_DEFAULT);
    if (e < 0) where_.fail_h5(std::string("cannot look up '") + name + "'");
    return e > 0;
  }
  bool has_attr(hid_t obj, const char* name) { return H5Aexists(obj, name) > 0; }

  GroupId group(hid_t parent, const std::string& name, const std::string& path);

  // Children of a group, in creation order when the writer tracked it (runs keep their capture order).
  std::vector<std::string> children(hid_t g, const std::string& path);

  std::string attr_string(hid_t obj, const std::string& obj_path, const char* name);

  // scalar: the attribute must hold exactly one string.
  std::vector<std::string> attr_strings(hid_t obj, const std::string& obj_path, const char* name, bool scalar = false);

  int64_t attr_int(hid_t obj, const std::string& obj_path, const char* name);

  // An int attribute that must lie in [lo, hi].
  int attr_int_in(hid_t obj, const std::string& obj_path, const char* name, int64_t lo, int64_t hi);

  uint64_t attr_u64(hid_t obj, const std::string& obj_path, const char* name);

  // Reads a numeric dataset of class `cls` (integer or float) into memory type `mem`, which matches T.
  template <class T>
  // `want` (optional): the expected shape, checked before anything is allocated; kAnyDim matches any size.
  Array<T> read(hid_t parent, const std::string& parent_path, const char* name, hid_t mem, H5T_class_t cls, size_t rank,
                const Dims* want = nullptr, const char* axes = nullptr);

  static constexpr hsize_t kAnyDim = ~hsize_t(0);
  Array<float> read_f32(hid_t parent, const std::string& parent_path, const char* name, size_t rank,
                        const Dims* want = nullptr, const char* axes = nullptr);
  Array<int32_t> read_i32(hid_t parent, const std::string& parent_path, const char* name, size_t rank,
                          const Dims* want = nullptr, const char* axes = nullptr);
  // A 1-D index list of at most max_len entries (`limit` names the bound in the error), checked before reading.
  std::vector<int> read_index(hid_t parent, const std::string& parent_path, const char* name, hsize_t max_len = kAnyDim,
                              const std::string& limit = "");
  // The shape of a dataset, without reading it.
  Dims shape_of(hid_t parent, const std::string& parent_path, const char* name);

  // A 1-D dataset of strings (variable or fixed length).
  std::vector<std::string> read_string_dataset(hid_t parent, const std::string& parent_path, const char* name);

  void expect_dims(const std::string& path, const Dims& got, const Dims& want, const char* axes);

  // Refuses dataset `ds` (at `path`) when it carries a crc32 that `computed`, the CRC-32 of what was read, differs
  // from. For readers that read a dataset themselves.
  void check_crc(hid_t ds, const std::string& path, uint32_t computed);

 private:
  AttrId open_attr(hid_t obj, const std::string& obj_path, const char* name);

  Dims dataset_dims(hid_t ds, const std::string& path);
  // Refuses a dataset whose declared size the file cannot hold or the budget cannot take; charges the budget.
  void check_declared(hid_t ds, hid_t file_type, const std::string& path, const Dims& dims, size_t mem_elem_bytes);

  // Reads n strings of file type `type` with read_fn(mem_type, buffer), or takes variable-length ones from the
  // check's copy under `key` (h5_guard.h's keys) when it holds n of them.
  template <class ReadFn>
  std::vector<std::string> read_strings(hid_t type, size_t n, const std::string& item, const std::string& key,
                                        ReadFn read_fn);

  Where where_;
  TypeId half_type_;
  uint64_t budget_bytes_;                          // what this reader may still allocate
  std::shared_ptr<const CheckedStrings> strings_;  // the check's copy of the file's variable-length strings, or null
};

// Creates `path` under a temporary name in the same directory, lets `body` fill it, closes it, and renames it into
// place. On any failure the temporary is removed and the Error names `path`. kind: "capture", "training log", ...
void write_atomically(const std::string& path, const char* kind, const std::function<void(hid_t root, Writer&)>& body);

// Opens `path` read-only after checking that it exists and is HDF5; kind is "capture", "sweep", ...
FileId open_for_reading(const std::string& path, const char* kind);

// Opens the root group of a file opened by open_for_reading.
GroupId open_root(const FileId& file, const Where& where);

// Checks the root format name and version; `other` is the format name of another file kind, for a hint.
void check_format(Reader& r, hid_t root, const std::string& path, const char* kind, const char* format, int version,
                  const char* other_format, const char* other_hint);

// The root header every format shares: format name and version, then the provenance. with_model: the model_path
// and weights_checksum attributes (training logs record only the tool and the model's config).
void write_root_header(Writer& w, hid_t root, const char* format, int version, const Provenance& p, bool with_model);
// Reads the provenance attributes write_root_header wrote (the format is checked by check_format).
Provenance read_provenance(Reader& r, hid_t root, bool with_model);

// The opening every reader shares: holds the HDF5 lock, opens `path` read-only and its root group, and checks the
// root's format name and version (check_format). kind: "capture", "training log", ...; where: the error prefix,
// e.g. "capture file 'a.h5'"; other_format / other_hint: the format a user may have confused this one with.
class FileReader {
 public:
  // read_budget_bytes: what the Reader may allocate (0: default_read_budget()).
  FileReader(const std::string& path, const char* kind, const std::string& where, const char* format, int version,
             const char* other_format, const char* other_hint, uint64_t read_budget_bytes = 0);
  Reader& reader() { return reader_; }
  hid_t root() const { return root_.get(); }

 private:
  H5Call call_;  // first: the lock is held while the handles below are opened and closed
  FileId file_;
  GroupId root_;
  Reader reader_;
};

}  // namespace focal::h5
