// The HDF5 layer shared by every file format (h5_io.h): handles, lock, errors, content checksums, the Writer, the
// atomic write and the root header. The Reader and the opening of files are in h5_read.cpp.

#include "h5_io.h"

#include "focal/atomic_file.h"

#include "h5_guard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>

#include <zlib.h>

#include "focal_kernels/shared_math.h"

namespace focal::h5 {

// Every file type is little-endian, and the writers checksum (and convert) memory bytes as the stored ones.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the HDF5 writers assume a little-endian host");

namespace {
std::recursive_mutex g_hdf5_mutex;  // recursive: write_atomically holds one inside its callers' own
constexpr int kDeflateLevel = 4;    // zlib level of chunked datasets

herr_t keep_innermost(unsigned, const H5E_error2_t* err, void* out) {
  if (err && err->desc && err->desc[0]) *static_cast<std::string*>(out) = err->desc;
  return 0;
}
}  // namespace

H5Call::H5Call() : lock_(g_hdf5_mutex) {
  // No HDF5 shutdown at exit: a file whose writing failed (a full disk) cannot be closed and stays in the library's
  // tables, and libhdf5 1.10 crashes closing it at exit (H5F__close_cb). Every file this project opens is closed
  // before the process ends, so nothing is lost. Must precede the library's initialisation (the first call).
  static const bool kNoAtexit = [] {
    (void)H5dont_atexit();
    return true;
  }();
  (void)kNoAtexit;
  H5Eget_auto2(H5E_DEFAULT, &old_func_, &old_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  H5Eclear2(H5E_DEFAULT);
}

H5Call::~H5Call() {
  H5Eclear2(H5E_DEFAULT);
  H5Eset_auto2(H5E_DEFAULT, old_func_, old_data_);
}

// The innermost message of HDF5's error stack (the most specific one), then clears the stack.
std::string hdf5_detail() {
  std::string desc;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_innermost, &desc);
  H5Eclear2(H5E_DEFAULT);
  if (desc.empty()) return std::string();
  for (const char* sign :
       {"checksum", "inflate", "signature", "past end of allocation", "addr overflow", "bad object header", "corrupt",
        "B-tree", "global heap", "message type not found", "fill size exceeds buffer size"})
    if (desc.find(sign) != std::string::npos) return " (HDF5: " + desc + ")" + kDamagedAdvice;
  return " (HDF5: " + desc + ")";
}

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

bool is_out_of_space(int err) { return err == ENOSPC || err == EDQUOT || err == EFBIG; }

std::string no_space_text(int err, const std::string& path) {
  const char* why = err == EFBIG    ? "the file size limit was reached"
                    : err == EDQUOT ? "the disk quota is exhausted"
                                    : "the file system is full";
  return "no space left on '" + path + "' (" + why + ")";
}

std::string hex16(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

TypeId make_utf8_string_type(const Where& where) {
  TypeId t = checked<TypeId>(H5Tcopy(H5T_C_S1), where, "cannot create the string type");
  check_h5(H5Tset_size(t.get(), H5T_VARIABLE), where, "cannot create the string type");
  check_h5(H5Tset_cset(t.get(), H5T_CSET_UTF8), where, "cannot create the string type");
  return t;
}

uint32_t crc32_add(uint32_t crc, const void* data, size_t n_bytes) {
  if (n_bytes == 0) return crc;  // zlib answers 0 for a null buffer, whatever the running value
  return uint32_t(::crc32_z(crc, static_cast<const Bytef*>(data), n_bytes));
}

uint32_t crc32_add_string(uint32_t crc, const char* s) {
  return crc32_add(crc, s ? s : "", (s ? std::strlen(s) : 0) + 1);  // the NUL included
}

std::string string_attr_bytes(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) {
    out.append(v.c_str());  // as HDF5 stores it: up to the first NUL
    out.push_back('\0');
  }
  return out;
}

uint32_t attrs_crc32_add(uint32_t crc, const std::string& name, const std::string& value_bytes) {
  crc = crc32_add_string(crc, name.c_str());
  return crc32_add(crc, value_bytes.data(), value_bytes.size());
}

std::string crc_mismatch_text(uint32_t stored, uint32_t computed) {
  char b[96];
  std::snprintf(b, sizeof b, "(CRC-32 0x%08x read, 0x%08x stored)", unsigned(computed), unsigned(stored));
  return b;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

namespace {
// The path of an object ("/" for the root or a file id), as the damaged-file check names it.
std::string object_path(hid_t obj) {
  if (H5Iget_type(obj) == H5I_FILE) return "/";
  const ssize_t n = H5Iget_name(obj, nullptr, 0);
  if (n <= 0) return "";
  std::string name(size_t(n) + 1, '\0');
  if (H5Iget_name(obj, &name[0], name.size()) < 0) return "";
  name.resize(size_t(n));
  return name;
}
}  // namespace

TypeId make_half_type(const Where& where) {
  TypeId t = checked<TypeId>(H5Tcopy(H5T_IEEE_F32LE), where, "cannot create the float16 type");
  if (H5Tset_fields(t.get(), 15, 10, 5, 0, 10) < 0 || H5Tset_precision(t.get(), 16) < 0 ||
      H5Tset_size(t.get(), 2) < 0 || H5Tset_ebias(t.get(), 15) < 0)
    where.fail_h5("cannot create the float16 type");
  return t;
}

// ---------------------------------------------------------------------------------------------------------------
// Writer.

Writer::Writer(Where where)
    : where_(std::move(where)),
      str_type_(make_utf8_string_type(where_)),
      half_type_(make_half_type(where_)),
      lcpl_(checked<PlistId>(H5Pcreate(H5P_LINK_CREATE), where_, "cannot create link properties")),
      compress_(H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0 && H5Zfilter_avail(H5Z_FILTER_SHUFFLE) > 0) {
  check_h5(H5Pset_char_encoding(lcpl_.get(), H5T_CSET_UTF8), where_, "cannot set UTF-8 link names");
}

GroupId Writer::group(hid_t parent, const std::string& name, const std::string& path, bool track_order) {
  PlistId gcpl = checked<PlistId>(H5Pcreate(H5P_GROUP_CREATE), where_, "cannot create group properties");
  check_h5(H5Pset_obj_track_times(gcpl.get(), 0), where_, "cannot disable time tracking");
  if (track_order)
    check_h5(H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED), where_,
             "cannot track creation order of " + path);
  return checked<GroupId>(H5Gcreate2(parent, name.c_str(), lcpl_.get(), gcpl.get(), H5P_DEFAULT), where_,
                          "cannot create group " + path);
}

void Writer::attr_string(hid_t obj, const std::string& obj_path, const char* name, const std::string& value) {
  SpaceId space = checked<SpaceId>(H5Screate(H5S_SCALAR), where_, "cannot create a dataspace");
  AttrId a = create_attr(obj, obj_path, name, str_type_.get(), space.get());
  const char* p = value.c_str();
  check_h5(H5Awrite(a.get(), str_type_.get(), &p), where_, "cannot write attribute " + obj_path + "@" + name);
  note_attr(obj, name, string_attr_bytes({value}));
}

void Writer::attr_strings(hid_t obj, const std::string& obj_path, const char* name, const std::vector<std::string>& v) {
  const hsize_t n = v.size();
  SpaceId space = checked<SpaceId>(H5Screate_simple(1, &n, nullptr), where_, "cannot create a dataspace");
  AttrId a = create_attr(obj, obj_path, name, str_type_.get(), space.get());
  std::vector<const char*> ptrs;
  ptrs.reserve(v.size());
  for (const std::string& s : v) ptrs.push_back(s.c_str());
  if (n > 0)
    check_h5(H5Awrite(a.get(), str_type_.get(), ptrs.data()), where_,
             "cannot write attribute " + obj_path + "@" + name);
  note_attr(obj, name, string_attr_bytes(v));
}

void Writer::note_attr(hid_t obj, const char* name, std::string value_bytes) {
  const std::string key = object_path(obj);
  if (key.empty()) where_.fail_h5(std::string("cannot name the object of attribute ") + name);
  attrs_[key][name] = std::move(value_bytes);
}

void Writer::finish(hid_t file) {
  const std::map<std::string, std::map<std::string, std::string>> attrs = std::move(attrs_);
  attrs_.clear();  // the two attributes below are not covered
  for (const auto& [key, values] : attrs) {
    uint32_t crc = crc32_add_string(0, key.c_str());  // the object's path: a damaged link cannot swap objects
    std::vector<std::string> names;
    for (const auto& [name, bytes] : values) {  // ascending name order
      crc = attrs_crc32_add(crc, name, bytes);
      names.push_back(name);
    }
    const hid_t obj = H5Oopen(file, key.c_str(), H5P_DEFAULT);
    if (obj < 0) where_.fail_h5("cannot open " + key);
    try {
      attr_u32(obj, key, kAttrsCrcAttr, crc);
      attr_strings(obj, key, kAttrsCrcNamesAttr, names);
    } catch (...) {
      (void)H5Oclose(obj);
      throw;
    }
    check_h5(H5Oclose(obj), where_, "cannot close " + key);
  }
  attrs_.clear();
}

void Writer::attr_i32(hid_t obj, const std::string& obj_path, const char* name, int32_t value) {
  SpaceId space = checked<SpaceId>(H5Screate(H5S_SCALAR), where_, "cannot create a dataspace");
  AttrId a = create_attr(obj, obj_path, name, H5T_STD_I32LE, space.get());
  check_h5(H5Awrite(a.get(), H5T_NATIVE_INT32, &value), where_, "cannot write attribute " + obj_path + "@" + name);
  note_attr(obj, name, std::string(reinterpret_cast<const char*>(&value), sizeof value));  // little-endian, as stored
}

void Writer::attr_u32(hid_t obj, const std::string& obj_path, const char* name, uint32_t value) {
  SpaceId space = checked<SpaceId>(H5Screate(H5S_SCALAR), where_, "cannot create a dataspace");
  AttrId a = create_attr(obj, obj_path, name, H5T_STD_U32LE, space.get());
  check_h5(H5Awrite(a.get(), H5T_NATIVE_UINT32, &value), where_, "cannot write attribute " + obj_path + "@" + name);
  note_attr(obj, name, std::string(reinterpret_cast<const char*>(&value), sizeof value));
}

void Writer::attr_u64(hid_t obj, const std::string& obj_path, const char* name, uint64_t value) {
  SpaceId space = checked<SpaceId>(H5Screate(H5S_SCALAR), where_, "cannot create a dataspace");
  AttrId a = create_attr(obj, obj_path, name, H5T_STD_U64LE, space.get());
  check_h5(H5Awrite(a.get(), H5T_NATIVE_UINT64, &value), where_, "cannot write attribute " + obj_path + "@" + name);
  note_attr(obj, name, std::string(reinterpret_cast<const char*>(&value), sizeof value));
}

void Writer::dataset(hid_t parent, const std::string& parent_path, const char* name, hid_t file_type, hid_t mem_type,
                     const Dims& dims, const void* data, const char* shape, Dims chunk) {
  const std::string path = parent_path + "/" + name;
  DatasetId ds = create_dataset(parent, path, name, file_type, dims, chunk);
  const size_t elem_bytes = H5Tget_size(file_type);
  if (!chunk.empty() && compress_ && H5Tequal(file_type, mem_type) > 0) {  // the memory's bytes are the file's
    const auto* bytes = static_cast<const unsigned char*>(data);
    write_chunks_deflated(
        ds.get(), path, where_, dims, chunk, elem_bytes,
        [&](size_t first, size_t n, unsigned char* dst) {
          std::memcpy(dst, bytes + first * elem_bytes, n * elem_bytes);
        },
        kDeflateLevel);
  } else if (n_elements(dims) > 0) {
    check_h5(H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), where_, "cannot write " + path);
  }
  const size_t n = n_elements(dims);
  if (H5Tis_variable_str(file_type) > 0) {
    uint32_t crc = 0;
    for (size_t i = 0; i < n; ++i) crc = crc32_add_string(crc, static_cast<const char* const*>(data)[i]);
    attr_u32(ds.get(), path, kCrcAttr, crc);
  } else if (H5Tequal(file_type, mem_type) > 0) {  // the memory's bytes are the file's (little-endian)
    attr_u32(ds.get(), path, kCrcAttr, crc32_add(0, data, n * elem_bytes));
  }
  attr_string(ds.get(), path, "shape", shape);
}

void Writer::dataset_f16(hid_t parent, const std::string& parent_path, const char* name, const Dims& dims,
                         const float* data, const char* shape, Dims chunk) {
  const std::string path = parent_path + "/" + name;
  DatasetId ds = create_dataset(parent, path, name, half_type_.get(), dims, chunk);
  const size_t n = n_elements(dims);
  if (!chunk.empty() && compress_) {
    write_chunks_deflated(
        ds.get(), path, where_, dims, chunk, sizeof(uint16_t),
        [&](size_t first, size_t count, unsigned char* dst) {
          for (size_t j = 0; j < count; ++j) {
            const uint16_t h = math::float_to_half_bits(data[first + j]);
            std::memcpy(dst + j * sizeof h, &h, sizeof h);  // little-endian, as the file type
          }
        },
        kDeflateLevel);
  } else if (n > 0) {
    Dims start(dims.size(), 0), count = dims;
    count[0] = 1;
    const size_t slab = n / size_t(dims[0]);
    SpaceId mem = checked<SpaceId>(H5Screate_simple(int(count.size()), count.data(), nullptr), where_,
                                   "cannot create a dataspace for " + path);
    SpaceId file = checked<SpaceId>(H5Dget_space(ds.get()), where_, "cannot write " + path);
    std::vector<uint16_t> half(slab);
    for (hsize_t i = 0; i < dims[0]; ++i) {
      const float* src = data + size_t(i) * slab;
      for (size_t j = 0; j < slab; ++j) half[j] = math::float_to_half_bits(src[j]);
      start[0] = i;
      check_h5(H5Sselect_hyperslab(file.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), where_,
               "cannot write " + path);
      check_h5(H5Dwrite(ds.get(), half_type_.get(), mem.get(), file.get(), H5P_DEFAULT, half.data()), where_,
               "cannot write " + path);
    }
  }
  uint32_t crc = 0;
  uint16_t block[4096];  // the stored float16 bits, little-endian as the file type
  for (size_t first = 0; first < n; first += std::size(block)) {
    const size_t m = std::min(std::size(block), n - first);
    for (size_t j = 0; j < m; ++j) block[j] = math::float_to_half_bits(data[first + j]);
    crc = crc32_add(crc, block, m * sizeof(uint16_t));
  }
  attr_u32(ds.get(), path, kCrcAttr, crc);
  attr_string(ds.get(), path, "shape", shape);
}

void Writer::dataset_i32(hid_t parent, const std::string& parent_path, const char* name, const Dims& dims,
                         const int32_t* data, const char* shape) {
  dataset(parent, parent_path, name, H5T_STD_I32LE, H5T_NATIVE_INT32, dims, data, shape);
}

void Writer::dataset_i32(hid_t parent, const std::string& parent_path, const char* name, const std::vector<int>& v,
                         const char* shape) {
  static_assert(sizeof(int) == sizeof(int32_t), "int must be 32-bit");
  dataset(parent, parent_path, name, H5T_STD_I32LE, H5T_NATIVE_INT32, {hsize_t(v.size())}, v.data(), shape);
}

void Writer::dataset_f32(hid_t parent, const std::string& parent_path, const char* name, const Dims& dims,
                         const float* data, const char* shape, Dims chunk) {
  dataset(parent, parent_path, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims, data, shape, std::move(chunk));
}

void Writer::dataset_strings(hid_t parent, const std::string& parent_path, const char* name,
                             const std::vector<std::string>& v, const char* shape) {
  std::vector<const char*> ptrs;
  ptrs.reserve(v.size());
  for (const std::string& s : v) ptrs.push_back(s.c_str());
  dataset(parent, parent_path, name, str_type_.get(), str_type_.get(), {hsize_t(v.size())}, ptrs.data(), shape);
}

AttrId Writer::create_attr(hid_t obj, const std::string& obj_path, const char* name, hid_t type, hid_t space) {
  return checked<AttrId>(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), where_,
                         "cannot create attribute " + obj_path + "@" + name);
}

DatasetId Writer::create_dataset(hid_t parent, const std::string& path, const char* name, hid_t file_type,
                                 const Dims& dims, Dims& chunk) {
  SpaceId space = checked<SpaceId>(H5Screate_simple(int(dims.size()), dims.data(), nullptr), where_,
                                   "cannot create the dataspace of " + path);
  PlistId dcpl = checked<PlistId>(H5Pcreate(H5P_DATASET_CREATE), where_, "cannot create dataset properties");
  check_h5(H5Pset_obj_track_times(dcpl.get(), 0), where_, "cannot disable time tracking");
  if (!chunk.empty() && n_elements(dims) > 0) {
    for (size_t i = 0; i < dims.size(); ++i) chunk[i] = std::max<hsize_t>(1, std::min(chunk[i], dims[i]));
    check_h5(H5Pset_chunk(dcpl.get(), int(chunk.size()), chunk.data()), where_, "cannot chunk " + path);
    if (compress_) {
      check_h5(H5Pset_shuffle(dcpl.get()), where_, "cannot set the shuffle filter on " + path);
      check_h5(H5Pset_deflate(dcpl.get(), kDeflateLevel), where_, "cannot set the deflate filter on " + path);
    }
  } else {
    chunk.clear();
  }
  return checked<DatasetId>(H5Dcreate2(parent, name, file_type, space.get(), lcpl_.get(), dcpl.get(), H5P_DEFAULT),
                            where_, "cannot create dataset " + path);
}

void write_atomically(const std::string& given, const char* kind,
                      const std::function<void(hid_t root, Writer&)>& body) {
  // Its own lock and silenced HDF5 printing, whether or not the caller holds them (the position-loss writer did not:
  // a full disk printed pages of HDF5 diagnostics and crashed at exit in the library's shutdown).
  const H5Call h5;
  if (given.empty()) throw Error(std::string("cannot create ") + kind + " file: the output path is empty");
  const std::string path = output_target(given);  // a link's file; not a directory, device or FIFO
  remove_stale_temporaries(path);  // a killed earlier write's PATH.tmp.PID (kill -9 leaves it: no handler runs)
  const std::string tmp = path + ".tmp." + std::to_string(long(::getpid()));
  const PendingTemporary pending(tmp);  // unlinked by the CLI's handler if the command is interrupted
  const Where create_where{std::string("cannot create ") + kind + " file '" + path + "'"};
  const Where write_where{std::string("cannot write ") + kind + " file '" + path + "'"};

  // Probe with open(2) first: HDF5 does not report errno reliably, and the user should hear "permission denied".
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    create_where.fail(errno_text(err, path) + " — choose a writable output path");
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
    w.finish(file.get());
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
    note_written(path);  // our own file: opening it again needs no damage check
  } catch (...) {
    const int err = errno;  // the failed write(2)'s, as HDF5's sec2 driver leaves it
    ::unlink(tmp.c_str());
    if (is_out_of_space(err))
      throw Error(no_space_text(err, path) +
                  ": nothing was written and any earlier file of that name is untouched; free some space, or write "
                  "elsewhere, and run again");
    throw;
  }
}

void write_root_header(Writer& w, hid_t root, const char* format, int version, const Provenance& p, bool with_model) {
  w.attr_string(root, "/", "format", format);
  w.attr_i32(root, "/", "format_version", version);
  w.attr_string(root, "/", "tool_version", p.tool_version);
  w.attr_string(root, "/", "created_utc", p.created_utc.empty() ? utc_timestamp_now() : p.created_utc);
  if (with_model) w.attr_string(root, "/", "model_path", p.model_path);
  w.attr_string(root, "/", "model_config_json", p.model_config_json);
  if (with_model) w.attr_u64(root, "/", "weights_checksum", p.weights_checksum);
  if (with_model && !p.device.empty()) w.attr_string(root, "/", "device", p.device);
  if (with_model && !p.precision.empty()) w.attr_string(root, "/", "precision", p.precision);
  if (with_model && !p.tokenizer.empty()) w.attr_string(root, "/", "tokenizer", p.tokenizer);
  if (!p.warnings.empty()) w.attr_string(root, "/", "warnings", p.warnings);
  // the checksum again as text, for tools without uint64 (every file with a model: captures, sweeps, batch
  // statistics, position-loss and evaluation files)
  if (with_model) w.attr_string(root, "/", "weights_fnv1a64", hex16(p.weights_checksum));
}

}  // namespace focal::h5
