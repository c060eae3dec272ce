// The reading half of the HDF5 layer (h5_io.h): the Reader (sizes checked before allocating, content checksums
// checked after reading), the opening of a file (its checks: exists, is HDF5, is not damaged or truncated), the
// format check and the provenance every reader shares.

#include "h5_io.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "focal/byte_size.h"
#include "focal_kernels/shared_math.h"
#include "h5_guard.h"

namespace focal::h5 {

// ---------------------------------------------------------------------------------------------------------------
// Reader.

GroupId Reader::group(hid_t parent, const std::string& name, const std::string& path) {
  if (!has(parent, name.c_str())) where_.fail("missing group " + path);
  return checked<GroupId>(H5Gopen2(parent, name.c_str(), H5P_DEFAULT), where_, "cannot open group " + path);
}

std::vector<std::string> Reader::children(hid_t g, const std::string& path) {
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
    // focalscope writes UTF-8 names (link names are UTF-8 by the writer's property list); a name that is not is a
    // damaged one (it reached Python as a UnicodeDecodeError, or as an error with no message).
    if (!valid_utf8(name))
      where_.fail("a name in " + path + " is not valid UTF-8 (" + std::to_string(name.size()) + " bytes)" +
                  kDamagedAdvice);
    names.push_back(name);
  }
  return names;
}

std::string Reader::attr_string(hid_t obj, const std::string& obj_path, const char* name) {
  std::vector<std::string> v = attr_strings(obj, obj_path, name, true);
  return v.front();
}

std::vector<std::string> Reader::attr_strings(hid_t obj, const std::string& obj_path, const char* name, bool scalar) {
  AttrId a = open_attr(obj, obj_path, name);
  const std::string item = "attribute " + obj_path + "@" + name;
  TypeId type = checked<TypeId>(H5Aget_type(a.get()), where_, "cannot read " + item);
  if (H5Tget_class(type.get()) != H5T_STRING) where_.fail(item + " is not a string");
  SpaceId space = checked<SpaceId>(H5Aget_space(a.get()), where_, "cannot read " + item);
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0) where_.fail_h5("cannot read " + item);
  if (scalar && n != 1) where_.fail(item + " should hold one string, not " + std::to_string(n));
  return read_strings(type.get(), size_t(n), item, obj_path + "@" + name,
                      [&](hid_t mem, void* buf) { return H5Aread(a.get(), mem, buf); });
}

int64_t Reader::attr_int(hid_t obj, const std::string& obj_path, const char* name) {
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

int Reader::attr_int_in(hid_t obj, const std::string& obj_path, const char* name, int64_t lo, int64_t hi) {
  int64_t v = attr_int(obj, obj_path, name);
  if (v < lo || v > hi)
    where_.fail("attribute " + obj_path + "@" + name + " = " + std::to_string(v) + " is outside " + std::to_string(lo) +
                ".." + std::to_string(hi));
  return int(v);
}

uint64_t Reader::attr_u64(hid_t obj, const std::string& obj_path, const char* name) {
  AttrId a = open_attr(obj, obj_path, name);
  const std::string item = "attribute " + obj_path + "@" + name;
  TypeId type = checked<TypeId>(H5Aget_type(a.get()), where_, "cannot read " + item);
  if (H5Tget_class(type.get()) != H5T_INTEGER) where_.fail(item + " is not an integer");
  uint64_t v = 0;
  check_h5(H5Aread(a.get(), H5T_NATIVE_UINT64, &v), where_, "cannot read " + item);
  return v;
}

uint64_t default_read_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t budget = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 2 : (uint64_t(4) << 30);
  struct rlimit lim;
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    budget = std::min<uint64_t>(budget, lim.rlim_cur / 2);
  return budget;
}

std::string bytes_text(uint64_t n) {
  char b[32];
  if (n < 10000)
    std::snprintf(b, sizeof b, "%llu bytes", (unsigned long long)n);
  else if (n < 1000000)
    std::snprintf(b, sizeof b, "%.1f kB", n / 1e3);
  else if (n < 1000000000)
    std::snprintf(b, sizeof b, "%.1f MB", n / 1e6);
  else if (n < 1000000000000ULL)
    std::snprintf(b, sizeof b, "%.1f GB", n / 1e9);
  else
    std::snprintf(b, sizeof b, "%.1f TB", n / 1e12);
  return b;
}

void Reader::check_declared(hid_t ds, hid_t file_type, const std::string& path, const Dims& dims,
                            size_t mem_elem_bytes) {
  // Sizes saturate at 2^62, far beyond any real file, so a forged shape cannot overflow the comparisons below.
  const auto mul = [](uint64_t a, uint64_t b) {
    constexpr uint64_t kCap = uint64_t(1) << 62;
    return (b != 0 && a > kCap / b) ? kCap : a * b;
  };
  uint64_t n = 1;  // elements
  for (hsize_t d : dims) n = mul(n, d);
  if (n == 0) return;
  const uint64_t declared = mul(n, H5Tget_size(file_type));
  PlistId dcpl = checked<PlistId>(H5Dget_create_plist(ds), where_, "cannot read the layout of " + path);
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  // Compact data lives in the object header (at most 64 KiB) and must hold every declared byte: libhdf5 1.10 reads
  // past a shorter buffer (found by fuzz/h5_bytes_fuzz.cpp). A virtual dataset maps other files' storage, so only
  // the budget below bounds it.
  if (layout == H5D_COMPACT) {
    const uint64_t stored = H5Dget_storage_size(ds);
    if (stored != declared)
      where_.fail(path + " declares shape " + dims_text(dims) + " (" + bytes_text(declared) +
                  ") but its compact storage holds " + bytes_text(stored) + " — the file is corrupt or forged");
  } else if (layout != H5D_VIRTUAL) {
    const uint64_t stored = H5Dget_storage_size(ds);
    // Deflate expands at most 1032:1; shuffle does not compress. Unwritten chunks or contiguous space read as the
    // fill value, which no focalscope writer leaves.
    const bool chunked = layout == H5D_CHUNKED;
    const uint64_t can_hold = chunked ? mul(stored, 1100) + 65536 : stored;
    if (declared > can_hold)
      where_.fail(path + " declares shape " + dims_text(dims) + " (" + bytes_text(declared) +
                  ") but the file stores only " + bytes_text(stored) + " of it" +
                  (chunked ? ", more than compression can expand" : "") + " — the file is corrupt or forged");
  }
  const uint64_t need = mul(n, mem_elem_bytes);
  if (need > budget_bytes_)
    where_.fail(path + " of shape " + dims_text(dims) + " needs " + bytes_text(need) + " of memory, over the " +
                bytes_text(budget_bytes_) + " left of the read budget");
  budget_bytes_ -= need;
}

template <class T>
Array<T> Reader::read(hid_t parent, const std::string& parent_path, const char* name, hid_t mem, H5T_class_t cls,
                      size_t rank, const Dims* want, const char* axes) {
  const std::string path = parent_path + "/" + name;
  if (!has(parent, name)) where_.fail("missing dataset " + path);
  DatasetId ds = checked<DatasetId>(H5Dopen2(parent, name, H5P_DEFAULT), where_, "cannot open dataset " + path);
  TypeId type = checked<TypeId>(H5Dget_type(ds.get()), where_, "cannot read " + path);
  if (H5Tget_class(type.get()) != cls)
    where_.fail(path + " has the wrong element type (expected " + (cls == H5T_FLOAT ? "floating point" : "integers") +
                ")");
  Array<T> out;
  out.dims = dataset_dims(ds.get(), path);
  if (out.dims.size() != rank)
    where_.fail(path + " has " + std::to_string(out.dims.size()) + " dimensions, expected " + std::to_string(rank));
  if (want) {
    Dims w = *want;
    for (size_t i = 0; i < w.size() && i < out.dims.size(); ++i)
      if (w[i] == kAnyDim) w[i] = out.dims[i];
    expect_dims(path, out.dims, w, axes ? axes : "");
  }
  check_declared(ds.get(), type.get(), path, out.dims, sizeof(T));
  out.data.resize(n_elements(out.dims));
  if (out.data.empty()) return out;
  if constexpr (std::is_same<T, float>::value) {
    if (H5Tequal(type.get(), half_type_.get()) > 0) {  // float16: read the bits a slab at a time, widen them
      out.stored_f16 = true;
      Dims start(rank, 0), count = out.dims;
      count[0] = 1;
      const size_t slab = out.data.size() / size_t(out.dims[0]);
      uint32_t crc = 0;
      SpaceId mem_space =
          checked<SpaceId>(H5Screate_simple(int(rank), count.data(), nullptr), where_, "cannot read " + path);
      SpaceId file_space = checked<SpaceId>(H5Dget_space(ds.get()), where_, "cannot read " + path);
      std::vector<uint16_t> half(slab);
      for (hsize_t i = 0; i < out.dims[0]; ++i) {
        start[0] = i;
        check_h5(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
                 where_, "cannot read " + path);
        check_h5(H5Dread(ds.get(), half_type_.get(), mem_space.get(), file_space.get(), H5P_DEFAULT, half.data()),
                 where_, "cannot read " + path);
        crc = crc32_add(crc, half.data(), half.size() * sizeof(uint16_t));
        float* dst = out.data.data() + size_t(i) * slab;
        for (size_t j = 0; j < slab; ++j) dst[j] = math::half_bits_to_float(half[j]);
      }
      check_crc(ds.get(), path, crc);
      return out;
    }
  }
  if (has_attr(ds.get(), kCrcAttr) && H5Tequal(type.get(), mem) <= 0)
    // focalscope stores what it reads: float32 or float16, int32, little-endian. Another stored type under a
    // checksum is a damaged type description (one byte of a float's exponent bias doubled every loss of a copy
    // made by h5repack, whose format has no header checksums), and the checksum of the stored bytes cannot see it.
    where_.fail("dataset " + path + " is damaged: its stored type is not the one focalscope wrote" + kDamagedAdvice);
  check_h5(H5Dread(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data.data()), where_, "cannot read " + path);
  check_crc(ds.get(), path, crc32_add(0, out.data.data(), out.data.size() * sizeof(T)));
  return out;
}

void Reader::check_crc(hid_t ds, const std::string& path, uint32_t computed) {
  if (!has_attr(ds, kCrcAttr)) return;
  const uint64_t stored = attr_u64(ds, path, kCrcAttr);
  if (stored != computed)
    where_.fail("dataset " + path + " is damaged: its data does not match the checksum stored with it " +
                crc_mismatch_text(uint32_t(stored), computed) + kDamagedAdvice + kEditAdvice);
}

Array<float> Reader::read_f32(hid_t parent, const std::string& parent_path, const char* name, size_t rank,
                              const Dims* want, const char* axes) {
  return read<float>(parent, parent_path, name, H5T_NATIVE_FLOAT, H5T_FLOAT, rank, want, axes);
}

Array<int32_t> Reader::read_i32(hid_t parent, const std::string& parent_path, const char* name, size_t rank,
                                const Dims* want, const char* axes) {
  return read<int32_t>(parent, parent_path, name, H5T_NATIVE_INT32, H5T_INTEGER, rank, want, axes);
}

std::vector<int> Reader::read_index(hid_t parent, const std::string& parent_path, const char* name, hsize_t max_len,
                                    const std::string& limit) {
  if (max_len != kAnyDim) {
    const Dims d = shape_of(parent, parent_path, name);
    if (d.size() == 1 && d[0] > max_len)
      where_.fail(parent_path + "/" + name + " lists " + std::to_string(d[0]) + " entries, more than " + limit + " = " +
                  std::to_string(max_len));
  }
  Array<int32_t> a = read_i32(parent, parent_path, name, 1);
  return std::vector<int>(a.data.begin(), a.data.end());
}

Dims Reader::shape_of(hid_t parent, const std::string& parent_path, const char* name) {
  const std::string path = parent_path + "/" + name;
  if (!has(parent, name)) where_.fail("missing dataset " + path);
  DatasetId ds = checked<DatasetId>(H5Dopen2(parent, name, H5P_DEFAULT), where_, "cannot open dataset " + path);
  return dataset_dims(ds.get(), path);
}

std::vector<std::string> Reader::read_string_dataset(hid_t parent, const std::string& parent_path, const char* name) {
  const std::string path = parent_path + "/" + name;
  if (!has(parent, name)) where_.fail("missing dataset " + path);
  DatasetId ds = checked<DatasetId>(H5Dopen2(parent, name, H5P_DEFAULT), where_, "cannot open dataset " + path);
  TypeId type = checked<TypeId>(H5Dget_type(ds.get()), where_, "cannot read " + path);
  if (H5Tget_class(type.get()) != H5T_STRING) where_.fail(path + " does not hold strings");
  Dims dims = dataset_dims(ds.get(), path);
  if (dims.size() != 1) where_.fail(path + " should be one-dimensional, has shape " + dims_text(dims));
  check_declared(ds.get(), type.get(), path, dims, sizeof(char*) + sizeof(std::string));
  std::vector<std::string> out = read_strings(type.get(), size_t(dims[0]), path, path, [&](hid_t mem, void* buf) {
    return H5Dread(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  });
  if (has_attr(ds.get(), kCrcAttr)) {
    uint32_t crc = 0;
    if (H5Tis_variable_str(type.get()) > 0) {
      for (const std::string& v : out) crc = crc32_add_string(crc, v.c_str());
    } else {  // fixed length: the stored bytes, each value padded with NULs to the size
      const size_t size = H5Tget_size(type.get());
      std::vector<char> padded(size);
      for (const std::string& v : out) {
        std::fill(padded.begin(), padded.end(), '\0');
        std::memcpy(padded.data(), v.data(), std::min(size, v.size()));
        crc = crc32_add(crc, padded.data(), size);
      }
    }
    check_crc(ds.get(), path, crc);
  }
  return out;
}

void Reader::expect_dims(const std::string& path, const Dims& got, const Dims& want, const char* axes) {
  if (got != want)
    where_.fail(path + " has shape " + dims_text(got) + ", expected " + (axes && *axes ? std::string(axes) + " " : "") +
                dims_text(want));
}

AttrId Reader::open_attr(hid_t obj, const std::string& obj_path, const char* name) {
  if (!has_attr(obj, name)) where_.fail("missing attribute '" + std::string(name) + "' on " + obj_path);
  return checked<AttrId>(H5Aopen(obj, name, H5P_DEFAULT), where_, "cannot open attribute " + obj_path + "@" + name);
}

Dims Reader::dataset_dims(hid_t ds, const std::string& path) {
  SpaceId space = checked<SpaceId>(H5Dget_space(ds), where_, "cannot read the shape of " + path);
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) where_.fail_h5("cannot read the shape of " + path);
  Dims dims(static_cast<size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
    where_.fail_h5("cannot read the shape of " + path);
  return dims;
}

template <class ReadFn>
std::vector<std::string> Reader::read_strings(hid_t type, size_t n, const std::string& item, const std::string& key,
                                              ReadFn read_fn) {
  std::vector<std::string> out;
  if (n == 0) return out;
  TypeId mem = checked<TypeId>(H5Tcopy(type), where_, "cannot read " + item);
  const htri_t vl = H5Tis_variable_str(type);
  if (vl < 0) where_.fail_h5("cannot read " + item);
  if (vl && strings_) {  // read once already, in the check's child: no second trip through the global heap
    auto it = strings_->find(key);
    if (it != strings_->end() && it->second.size() == n) return it->second;
  }
  if (vl) {
    std::vector<char*> ptrs(n, nullptr);
    // After a failed read the buffer is undefined: libhdf5 1.10 may leave pointers there that it has freed itself
    // (a conversion that fails half-way through a damaged global heap), and freeing them again corrupts the heap.
    // So the strings are freed only after a read that succeeded; a failed one leaks what it allocated.
    check_h5(read_fn(mem.get(), ptrs.data()), where_, "cannot read " + item);
    struct Free {
      std::vector<char*>& p;
      ~Free() {
        for (char* s : p) H5free_memory(s);
      }
    } free_guard{ptrs};
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

// Opens `path` read-only after checking that it exists and is HDF5; kind is "capture", "sweep", ... or "file" (any
// focalscope file).
FileId open_for_reading(const std::string& path, const char* kind) {
  const bool any = std::strcmp(kind, "file") == 0;
  const Where where{std::string("cannot read ") + (any ? "" : std::string(kind) + " ") + "file '" + path + "'"};
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    where.fail(err == ENOENT ? std::string("no such file") : errno_text(err, path));
  }
  if (S_ISDIR(st.st_mode)) where.fail("it is a directory");
  if (!S_ISREG(st.st_mode)) where.fail("it is not a regular file (a FIFO, device or socket): give a file");
  if (::access(path.c_str(), R_OK) != 0) {
    const int err = errno;
    where.fail(errno_text(err, path));
  }
  if (st.st_size == 0)
    where.fail(
        std::string("the file is empty (0 bytes): an interrupted copy or download? Copy it again, or write the ") +
        kind + " again with focal");
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
  if (is_h5 <= 0) where.fail(std::string("not an HDF5 file (expected a focalscope ") + kind + " written by focal)");
  check_in_child(path, "HDF5 file '" + path + "'");  // a damaged file: an Error, not a crash (any kind)
  PlistId fapl = checked<PlistId>(H5Pcreate(H5P_FILE_ACCESS), where, "cannot create access properties");
  check_h5(H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG), where, "cannot set the close degree");
#if H5_VERSION_GE(1, 10, 7)
  // Files are replaced by rename, never modified in place, so locks buy nothing and fail on some network mounts.
  check_h5(H5Pset_file_locking(fapl.get(), 0, 1), where, "cannot disable file locking");
#endif
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (f < 0) {
    // The file may be open already in this process with the library's default access properties (h5py in the same
    // Python session: weak close and file locking; HDF5 refuses a second open whose properties differ): open it as
    // that handle did. Every object this reader opens is closed by its handle, so the weak close changes nothing.
    f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  }
  if (f < 0) {
    // A truncated file (a copy or download cut short): say how much of it is there and what to do, not only the
    // library's "eof = ..., stored_eof = ..." numbers.
    const std::string detail = hdf5_detail();
    const size_t at = detail.find("stored_eof = ");
    if (detail.find("truncated file") != std::string::npos && at != std::string::npos) {
      const double stored = std::strtod(detail.c_str() + at + 13, nullptr);
      std::string have = format_byte_size((uint64_t)st.st_size), full = format_byte_size((uint64_t)stored);
      if (have == full)  // a few bytes short: "80.2 KiB of the 80.2 KiB" said nothing
        have = std::to_string((uint64_t)st.st_size) + " bytes", full = std::to_string((uint64_t)stored) + " bytes";
      where.fail("the file is truncated: " + have + " of the " + full +
                 " it was written with (an interrupted copy or download?): copy it again, or write the " + kind +
                 " again with focal");
    }
    where.fail("cannot open the file" + detail);
  }
  return FileId(f);
}

// Checks the root format name and version; `other` is the format name of the other file kind, for a hint.
void check_format(Reader& r, hid_t root, const std::string& path, const char* kind, const char* format, int version,
                  const char* other_format, const char* other_hint) {
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

Provenance read_provenance(Reader& r, hid_t root, bool with_model) {
  Provenance p;
  p.tool_version = r.attr_string(root, "/", "tool_version");
  p.created_utc = r.attr_string(root, "/", "created_utc");
  if (with_model) p.model_path = r.attr_string(root, "/", "model_path");
  p.model_config_json = r.attr_string(root, "/", "model_config_json");
  if (with_model) p.weights_checksum = r.attr_u64(root, "/", "weights_checksum");
  if (with_model && r.has_attr(root, "device")) p.device = r.attr_string(root, "/", "device");
  if (with_model && r.has_attr(root, "precision")) p.precision = r.attr_string(root, "/", "precision");
  if (with_model && r.has_attr(root, "tokenizer")) p.tokenizer = r.attr_string(root, "/", "tokenizer");
  if (r.has_attr(root, "warnings")) p.warnings = r.attr_string(root, "/", "warnings");
  return p;
}

FileReader::FileReader(const std::string& path, const char* kind, const std::string& where, const char* format,
                       int version, const char* other_format, const char* other_hint, uint64_t read_budget_bytes)
    : file_(open_for_reading(path, kind)),
      root_(open_root(file_, Where{where})),
      reader_(Where{where}, read_budget_bytes) {
  reader_.use_checked_strings(path);
  check_format(reader_, root_.get(), path, kind, format, version, other_format, other_hint);
}

}  // namespace focal::h5

namespace focal {

std::string read_file_format(const std::string& path) {
  h5::H5Call h5;
  const h5::FileId file = h5::open_for_reading(path, "file");
  const h5::Where where{"focalscope file '" + path + "'"};
  const h5::GroupId root = h5::open_root(file, where);
  h5::Reader r(where);
  r.use_checked_strings(path);
  return r.has_attr(root.get(), "format") ? r.attr_string(root.get(), "/", "format") : std::string();
}

}  // namespace focal

namespace focal::h5 {

GroupId open_root(const FileId& file, const Where& where) {
  return checked<GroupId>(H5Gopen2(file.get(), "/", H5P_DEFAULT), where, "cannot open the root group");
}

}  // namespace focal::h5
