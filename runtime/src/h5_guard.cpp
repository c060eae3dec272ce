// The damaged-file check of h5_guard.h: a walk over every object, attribute, string and chunk index of a file, run
// in a child process with a time limit, and the per-file cache of what has been checked.
#include "h5_guard.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <mutex>
#include <new>
#include <vector>

#include "h5_io.h"

// Present only in a sanitizer build (weak: null otherwise).
extern "C" void __sanitizer_set_death_callback(void (*callback)(void))  // NOLINT(bugprone-reserved-identifier)
    __attribute__((weak));

namespace focal::h5 {
namespace {

// What the walk reads in full: every string and variable-length value (where libhdf5 follows heap addresses) and
// every dataset up to this size; larger numeric datasets only at their first and last element (their chunk index is
// walked whole by H5Dget_storage_size). Nothing larger than kMaxReadBytes is read at all: the callers' readers refuse
// such sizes before allocating.
constexpr hsize_t kSmallDatasetBytes = hsize_t(1) << 20;
constexpr hsize_t kMaxReadBytes = hsize_t(256) << 20;
constexpr int kMaxDepth = 64;          // group nesting walked (focalscope files nest 3 deep)
constexpr long kMaxObjects = 1 << 20;  // objects walked
constexpr double kDefaultTimeoutS = 10.0;
// Address space the child may add to what it inherits: this plus 8 bytes per byte of the file (a file holds at most
// one 16-byte string descriptor per 16 bytes, and the walk keeps each string it reads as a std::string and a pointer:
// ~48 bytes a string). A damaged string length (up to 4 GiB each) makes libhdf5 allocate and clear that much before
// it reads a byte, and a string that cannot be read within the limit is damage.
constexpr uint64_t kChildHeadroomBytes = uint64_t(2) << 30;

struct Walk {
  long n_objects = 0;
  std::set<haddr_t> seen;     // the objects walked, by address
  std::string damage;         // the first content checksum that did not match ("" none)
  std::string unreadable;     // the first string value libhdf5 could not read ("" none)
  CheckedStrings strings;     // every variable-length string value read, by key (see checked_strings)
  uint64_t string_bytes = 0;  // their total size: past kMaxReadBytes no more are kept (the caller reads them itself)
};

// Keeps the strings of a successful read into the variable-length string type `mem` (n values at buf) in `walk`
// under `key`, and in *values_out when given.
void keep_strings(Walk* walk, const std::string& key, hid_t mem, size_t n, const void* buf,
                  std::vector<std::string>* values_out) {
  if (H5Tis_variable_str(mem) <= 0) return;
  const char* const* ptrs = static_cast<const char* const*>(buf);
  std::vector<std::string> values;
  values.reserve(n);
  for (size_t i = 0; i < n; ++i) values.emplace_back(ptrs[i] ? ptrs[i] : "");
  if (values_out) *values_out = values;
  if (!walk || key.empty()) return;
  for (const std::string& v : values) walk->string_bytes += v.size() + 4;
  if (walk->string_bytes <= kMaxReadBytes) walk->strings[key] = std::move(values);
}

// The memory types a value of file type `ftype` is read into: its native type, and for numbers also every type the
// project's readers convert numbers to (float, double, the float16 of make_half_type, 32/64-bit integers), so the
// conversions a damaged type description sends libhdf5 into are the readers' own.
std::vector<TypeId> memory_types(hid_t ftype) {
  std::vector<TypeId> out;
  out.emplace_back(H5Tget_native_type(ftype, H5T_DIR_ASCEND));
  if (out.back().get() < 0) out.pop_back();
  const H5T_class_t cls = H5Tget_class(ftype);
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) return out;
  for (hid_t t : {H5T_NATIVE_FLOAT, H5T_NATIVE_DOUBLE, H5T_NATIVE_INT32, H5T_NATIVE_INT64, H5T_NATIVE_UINT64})
    out.emplace_back(H5Tcopy(t));
  if (cls == H5T_FLOAT) {
    try {
      out.push_back(make_half_type(Where{"damage check"}));
    } catch (const Error&) {  // not expected; the other types are still read
    }
  }
  std::vector<TypeId> valid;
  for (TypeId& t : out)
    if (t.get() >= 0) valid.push_back(std::move(t));
  return valid;
}

// Reads every element of an attribute or dataset of file type `ftype` over `space` with read(mem_type, buffer), into
// each of memory_types(ftype), then frees what libhdf5 allocated for variable-length values. A variable-length string
// that does not read is recorded in walk->unreadable (damage); other failures are left to the readers' own messages:
// here only a crash or a hang matters.
// Variable-length strings that read are kept in `walk` under `key`, and in *values_out when given.
template <class ReadFn>
void read_whole(hid_t ftype, hid_t space, ReadFn read, Walk* walk = nullptr, const std::string& key = "",
                std::vector<std::string>* values_out = nullptr) {
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n <= 0) return;
  for (const TypeId& mem : memory_types(ftype)) {
    const size_t elem_bytes = H5Tget_size(mem.get());
    if (elem_bytes == 0 || hsize_t(n) > kMaxReadBytes / elem_bytes) continue;
    std::vector<unsigned char> buf(size_t(n) * elem_bytes, 0);  // [n * elem_bytes]
    if (read(mem.get(), buf.data()) >= 0) {
      keep_strings(walk, key, mem.get(), size_t(n), buf.data(), values_out);
      (void)H5Dvlen_reclaim(mem.get(), space, H5P_DEFAULT, buf.data());
    } else if (walk && !key.empty() && walk->unreadable.empty() && H5Tis_variable_str(mem.get()) > 0) {
      // The readers would fail on it too, or (a damaged length under the child's memory limit) allocate gigabytes.
      walk->unreadable = "the HDF5 library cannot read the text of " + key + " (a damaged string length?)";
    }
  }
}

// Reads element `index` (row-major) of a dataset into each of memory_types(ftype): the chunk that holds it goes
// through the filter pipeline.
void read_one(hid_t ds, hid_t ftype, hid_t space, const std::vector<hsize_t>& dims, hsize_t index) {
  std::vector<hsize_t> start(dims.size()), count(dims.size(), 1);  // [rank]
  for (size_t d = dims.size(); d-- > 0;) {
    start[d] = index % dims[d];
    index /= dims[d];
  }
  SpaceId file_space(H5Scopy(space));
  const hsize_t one = 1;
  SpaceId mem_space(H5Screate_simple(1, &one, nullptr));
  if (file_space.get() < 0 || mem_space.get() < 0) return;
  if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0) return;
  for (const TypeId& mem : memory_types(ftype)) {
    const size_t elem_bytes = H5Tget_size(mem.get());
    if (elem_bytes == 0 || elem_bytes > kSmallDatasetBytes) continue;
    std::vector<unsigned char> buf(elem_bytes, 0);  // [elem_bytes]
    if (H5Dread(ds, mem.get(), mem_space.get(), file_space.get(), H5P_DEFAULT, buf.data()) >= 0)
      (void)H5Dvlen_reclaim(mem.get(), mem_space.get(), H5P_DEFAULT, buf.data());
  }
}

// The object being walked: where its strings go and its key ("/" or "/runs/x").
struct ObjectAt {
  Walk* walk;
  std::string key;
  std::map<std::string, std::string> attr_bytes;  // what attrs_crc32 takes of each attribute read, by name
  std::vector<std::string> crc_names;             // attrs_crc32_names, as read
  bool has_crc_names = false;
  std::set<std::string> odd_type;  // numbers stored in a type focalscope does not write (a damaged type: its bytes
                                   // pass the checksum while their value changes)
};

herr_t read_attribute(hid_t obj, const char* name, const H5A_info_t* /*info*/, void* data) {
  auto& at = *static_cast<ObjectAt*>(data);
  AttrId a(H5Aopen(obj, name, H5P_DEFAULT));
  if (a.get() < 0) return 0;
  TypeId ftype(H5Aget_type(a.get()));
  SpaceId space(H5Aget_space(a.get()));
  if (ftype.get() < 0 || space.get() < 0) return 0;
  const bool text = H5Tis_variable_str(ftype.get()) > 0;
  std::vector<std::string> values;
  read_whole(
      ftype.get(), space.get(), [&](hid_t mem, void* buf) { return H5Aread(a.get(), mem, buf); }, at.walk,
      at.key + "@" + name, text ? &values : nullptr);
  if (text) {
    if (std::strcmp(name, kAttrsCrcNamesAttr) == 0) at.crc_names = values, at.has_crc_names = true;
    at.attr_bytes[name] = string_attr_bytes(values);  // an empty one counts with its name
  } else {                                            // a number or fixed-size value: its stored bytes
    bool known = false;
    for (hid_t t : {H5T_STD_I32LE, H5T_STD_U32LE, H5T_STD_I64LE, H5T_STD_U64LE, H5T_IEEE_F32LE, H5T_IEEE_F64LE})
      known = known || H5Tequal(ftype.get(), t) > 0;
    if (!known) at.odd_type.insert(name);
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    const size_t size = H5Tget_size(ftype.get());
    if (n >= 0 && size > 0 && hsize_t(n) <= kSmallDatasetBytes / size) {
      std::string bytes(size_t(n) * size, '\0');
      if (n == 0 || H5Aread(a.get(), ftype.get(), &bytes[0]) >= 0) at.attr_bytes[name] = std::move(bytes);
    }
  }
  return 0;
}

// Checks the object's attrs_crc32 (h5_io.h), where it has one, over the attributes attrs_crc32_names lists.
void check_attrs_crc(hid_t obj, ObjectAt& at) {
  if (!at.walk || !at.walk->damage.empty()) return;
  if (H5Aexists(obj, kAttrsCrcAttr) <= 0) {
    // Without attrs_crc32 an object is read unchecked (a file of another tool, an edit kept as the docs say, both
    // attributes deleted); with the list left, the checksum's name was damaged.
    if (at.has_crc_names)
      at.walk->damage = "the attributes of " + at.key + ": " + kAttrsCrcNamesAttr + " lists them but " + kAttrsCrcAttr +
                        " is missing";
    return;
  }
  AttrId a(H5Aopen(obj, kAttrsCrcAttr, H5P_DEFAULT));
  uint32_t stored = 0;
  if (a.get() < 0 || H5Aread(a.get(), H5T_NATIVE_UINT32, &stored) < 0) return;  // the readers say what failed
  std::string damage;
  uint32_t crc = crc32_add_string(0, at.key.c_str());  // the object's own path first: a link to another object
  if (!at.has_crc_names) {
    damage = "the list of its checksummed attributes (" + std::string(kAttrsCrcNamesAttr) + ") is missing";
  } else {
    for (const std::string& name : at.crc_names) {
      const auto it = at.attr_bytes.find(name);
      if (it == at.attr_bytes.end()) {
        damage = "its attribute '" + name + "', listed in " + kAttrsCrcNamesAttr +
                 ", is missing or unreadable (deleted, or a damaged name in the list)";
        break;
      }
      if (at.odd_type.count(name)) {
        damage = "its attribute '" + name + "' has a stored type focalscope does not write";
        break;
      }
      crc = attrs_crc32_add(crc, name, it->second);
    }
    if (damage.empty() && crc != stored)
      damage = "they do not match the checksum stored with them " + crc_mismatch_text(stored, crc);
  }
  if (!damage.empty()) at.walk->damage = "the attributes of " + at.key + " (" + kAttrsCrcAttr + "): " + damage;
}

herr_t attribute_exists(hid_t obj, const char* name, const H5A_info_t* /*info*/, void* /*data*/) {
  (void)H5Aexists(obj, name);
  return 0;
}

// Every attribute, through both of its indexes (name and, where tracked, creation order): readers look attributes
// up by name (H5Aexists, H5Aopen).
void read_attributes(hid_t obj, ObjectAt& at) {
  hsize_t idx = 0;
  (void)H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, read_attribute, &at);
  idx = 0;
  (void)H5Aiterate2(obj, H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, attribute_exists, nullptr);
  check_attrs_crc(obj, at);
}

// A group's links the way Reader::children lists them (by index, in creation order where tracked, and by name),
// each looked up by name as Reader::has does. Returns the names of the name index (the objects to walk into).
std::vector<std::string> list_links(hid_t g) {
  std::vector<std::string> names;
  H5G_info_t info;
  if (H5Gget_info(g, &info) < 0) return names;
  constexpr hsize_t kMaxLinks = 1 << 16;
  for (H5_index_t index : {H5_INDEX_NAME, H5_INDEX_CRT_ORDER}) {
    for (hsize_t i = 0; i < std::min(info.nlinks, kMaxLinks); ++i) {
      const ssize_t n = H5Lget_name_by_idx(g, ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
      if (n < 0 || n > (1 << 20)) continue;  // a damaged entry: the others are still walked
      std::string name(size_t(n) + 1, '\0');
      if (H5Lget_name_by_idx(g, ".", index, H5_ITER_INC, i, &name[0], name.size(), H5P_DEFAULT) < 0) continue;
      name.resize(size_t(n));
      (void)H5Lexists(g, name.c_str(), H5P_DEFAULT);
      if (index == H5_INDEX_NAME) names.push_back(std::move(name));
    }
  }
  return names;
}

void read_dataset(hid_t ds, ObjectAt& at) {
  TypeId ftype(H5Dget_type(ds));
  SpaceId space(H5Dget_space(ds));
  if (ftype.get() < 0 || space.get() < 0) return;
  (void)H5Dget_storage_size(ds);  // walks a chunked dataset's whole chunk index
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) return;
  std::vector<hsize_t> dims(size_t(rank), 0);  // [rank]
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) return;
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n <= 0) return;
  const size_t elem_bytes = H5Tget_size(ftype.get());
  const bool variable = H5Tdetect_class(ftype.get(), H5T_VLEN) > 0 || H5Tdetect_class(ftype.get(), H5T_STRING) > 0 ||
                        H5Tget_class(ftype.get()) == H5T_REFERENCE;
  if (variable || (elem_bytes > 0 && hsize_t(n) <= kSmallDatasetBytes / elem_bytes)) {
    read_whole(
        ftype.get(), space.get(),
        [&](hid_t mem, void* buf) { return H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf); }, at.walk, at.key);
    return;
  }
  if (rank == 0) return;
  read_one(ds, ftype.get(), space.get(), dims, 0);
  read_one(ds, ftype.get(), space.get(), dims, hsize_t(n) - 1);
}

// Reads the object, and a group's members depth first. By hand rather than H5Lvisit: that stops at the first
// object whose header does not read, and the damage in the objects after it went unread here and crashed the
// reader (a capture copied by h5repack, two damaged bytes). Each object is walked once (hard links can form cycles).
void read_object(hid_t obj, Walk& walk, const std::string& key, int depth = 0) {
  ++walk.n_objects;
  ObjectAt at{&walk, key, {}, {}, false, {}};
  read_attributes(obj, at);
  const H5I_type_t type = H5Iget_type(obj);
  if (type == H5I_DATASET) {
    (void)H5Aexists(obj, kCrcAttr);  // the readers' lookup by name (a damaged header crashed there)
    read_dataset(obj, at);
  }
  if (type != H5I_GROUP || depth >= kMaxDepth) return;
  for (const std::string& name : list_links(obj)) {
    H5L_info_t link;
    if (H5Lget_info(obj, name.c_str(), &link, H5P_DEFAULT) < 0 || link.type != H5L_TYPE_HARD) continue;
    if (walk.n_objects >= kMaxObjects || !walk.seen.insert(link.u.address).second) continue;
    const hid_t child = H5Oopen(obj, name.c_str(), H5P_DEFAULT);
    if (child < 0) continue;
    read_object(child, walk, (key == "/" ? key : key + "/") + name, depth + 1);
    (void)H5Oclose(child);
  }
}

double timeout_s() {
  const char* v = std::getenv("FOCAL_H5_CHECK_TIMEOUT_S");
  if (!v || !*v) return kDefaultTimeoutS;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  return (end && *end == '\0' && std::isfinite(s) && s > 0) ? s : kDefaultTimeoutS;
}

bool check_enabled() {
  const char* v = std::getenv("FOCAL_H5_CHECK");
  return !(v && (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0));
}

// Identity of a file as it is on disk now; a replaced or rewritten file gets another.
struct Stamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const Stamp& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
  }
};

bool stamp_of(const std::string& path, Stamp& s) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  s = Stamp{st.st_dev, st.st_ino, st.st_size, int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
  return true;
}

std::atomic<long> g_checks_run{0};

// What the check found for one file: "" (it reads) or the damage message.
struct Checked {
  Stamp stamp;
  std::string damage;
  std::shared_ptr<const CheckedStrings> strings;  // null for a file this process wrote
};

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, Checked>& checked_files() {
  static std::map<std::string, Checked> m;  // guarded by cache_mutex()
  return m;
}

// Whether `path`, as stamped, was checked before; `damage` gets what was found.
bool lookup(const std::string& path, const Stamp& s, std::string& damage) {
  std::lock_guard<std::mutex> lock(cache_mutex());
  auto it = checked_files().find(path);
  if (it == checked_files().end() || !(it->second.stamp == s)) return false;
  damage = it->second.damage;
  return true;
}

void remember(const std::string& path, const Stamp& s, const std::string& damage,
              std::shared_ptr<const CheckedStrings> strings = nullptr) {
  std::lock_guard<std::mutex> lock(cache_mutex());
  checked_files()[path] = Checked{s, damage, std::move(strings)};
}

// Parses what run_child wrote; false unless it ends with 'K'. damage: what did not match its checksum, or "";
// unreadable: a string libhdf5 could not read, or "".
bool parse_strings(const std::string& in, CheckedStrings& out, std::string& damage, std::string& unreadable) {
  size_t at = 0;
  auto u32 = [&](uint32_t& v) {
    if (in.size() - at < 4) return false;
    std::memcpy(&v, in.data() + at, 4);
    at += 4;
    return true;
  };
  auto str = [&](std::string& v) {
    uint32_t n = 0;
    if (!u32(n) || in.size() - at < n) return false;
    v.assign(in.data() + at, n);
    at += n;
    return true;
  };
  while (at < in.size()) {
    const char tag = in[at++];
    if (tag == 'K') return at == in.size();
    if (tag == 'D' || tag == 'U') {
      if (!str(tag == 'D' ? damage : unreadable)) return false;
      continue;
    }
    if (tag != 'S') return false;
    std::string key;
    uint32_t count = 0;
    if (!str(key) || !u32(count) || count > in.size()) return false;
    std::vector<std::string> values(count);
    for (std::string& v : values)
      if (!str(v)) return false;
    out[key] = std::move(values);
  }
  return false;
}

void walk_into(const std::string& path, Walk& walk);

// A memory error that a sanitizer catches in the child ends it as a crash (SIGABRT), like the signal it would have
// been without the sanitizer, rather than as the sanitizer's exit status.
void die_as_crash() {
  (void)::signal(SIGABRT, SIG_DFL);
  ::abort();
}

// Limits the child's address space to what it has now (/proc/self/statm: pages mapped) plus kChildHeadroomBytes and
// 8 bytes per byte of the file.
[[maybe_unused]] void limit_address_space(uint64_t file_bytes) {  // unused under ASan / TSan
  FILE* f = std::fopen("/proc/self/statm", "re");
  if (!f) return;
  unsigned long long pages = 0;
  const bool ok = std::fscanf(f, "%llu", &pages) == 1;
  std::fclose(f);
  const long page = sysconf(_SC_PAGESIZE);
  if (!ok || page <= 0) return;
  struct rlimit lim;
  if (getrlimit(RLIMIT_AS, &lim) != 0) return;
  const rlim_t want = rlim_t(pages * uint64_t(page) + kChildHeadroomBytes + 8 * file_bytes);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur <= want) return;
  lim.rlim_cur = want;
  (void)setrlimit(RLIMIT_AS, &lim);
}

// The child: restores the default action of the crash signals (a front end or a sanitizer may have installed
// handlers that would report the child's crash as the parent's), walks the file, and writes one byte when done.
[[noreturn]] void run_child(const std::string& path, int done_fd) {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGXFSZ}) (void)::signal(sig, SIG_DFL);
  sigset_t none;
  sigemptyset(&none);
  (void)::sigprocmask(SIG_SETMASK, &none, nullptr);
  // libc's own abort messages ("free(): invalid pointer") would reach the user's terminal before the one error.
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull >= 0) (void)::dup2(devnull, STDERR_FILENO);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(die_as_crash);
    // Not under AddressSanitizer or ThreadSanitizer: their shadow memory and allocators reserve address space as they
    // go (a damaged length then ends the child by the time limit or the allocator's own limit instead).
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  struct stat fs {};
  limit_address_space(::stat(path.c_str(), &fs) == 0 ? uint64_t(fs.st_size) : 0);
#endif
  Walk walk;
  try {
    walk_into(path, walk);
  } catch (const std::bad_alloc&) {  // the walk's own copies under the limit: a string too long to hold is damage
    if (walk.unreadable.empty()) walk.unreadable = "the check ran out of memory reading its strings";
  }
  // The strings read, then 'K': 'S', u32 key length, key, u32 count, then each value as u32 length and bytes; a
  // checksum that did not match as 'D', u32 length, text.
  std::string out;
  auto u32 = [&](size_t v) {
    const uint32_t x = uint32_t(v);
    out.append(reinterpret_cast<const char*>(&x), 4);
  };
  for (const auto& [key, values] : walk.strings) {
    out += 'S';
    u32(key.size());
    out += key;
    u32(values.size());
    for (const std::string& v : values) {
      u32(v.size());
      out += v;
    }
  }
  if (!walk.damage.empty()) {
    out += 'D';
    u32(walk.damage.size());
    out += walk.damage;
  }
  if (!walk.unreadable.empty()) {
    out += 'U';
    u32(walk.unreadable.size());
    out += walk.unreadable;
  }
  out += 'K';
  size_t at = 0;
  while (at < out.size()) {
    const ssize_t w = ::write(done_fd, out.data() + at, out.size() - at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    at += size_t(w);
  }
  ::_exit(0);  // no atexit handlers: they belong to the parent (HDF5's own would close the parent's files)
}

std::string signal_text(int sig) {
  const char* name = sigabbrev_np(sig);
  return "signal " + std::to_string(sig) + (name ? std::string(", SIG") + name : std::string());
}

}  // namespace

namespace {
void walk_into(const std::string& path, Walk& walk) {
  // The access properties of open_for_reading: the same close (strong) and no file locking.
  PlistId fapl(H5Pcreate(H5P_FILE_ACCESS));
  if (fapl.get() >= 0) (void)H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 10, 7)
  if (fapl.get() >= 0) (void)H5Pset_file_locking(fapl.get(), 0, 1);
#endif
  FileId file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get() >= 0 ? fapl.get() : H5P_DEFAULT));
  if (file.get() < 0) return;
  const hid_t root = H5Oopen(file.get(), "/", H5P_DEFAULT);
  if (root < 0) return;
  read_object(root, walk, "/");
  (void)H5Oclose(root);
  H5Eclear2(H5E_DEFAULT);
}
}  // namespace

long walk_file(const std::string& path) {
  Walk walk;
  walk_into(path, walk);
  return walk.n_objects;
}

long checks_run() { return g_checks_run.load(); }

std::shared_ptr<const CheckedStrings> checked_strings(const std::string& path) {
  Stamp now;
  if (!stamp_of(path, now)) return nullptr;
  std::lock_guard<std::mutex> lock(cache_mutex());
  auto it = checked_files().find(path);
  if (it == checked_files().end() || !(it->second.stamp == now) || !it->second.damage.empty()) return nullptr;
  return it->second.strings;
}

void note_written(const std::string& path) {
  Stamp s;
  if (stamp_of(path, s)) remember(path, s, "");  // no strings: the readers read a file of ours themselves
}

void check_in_child(const std::string& path, const std::string& where) {
  if (!check_enabled()) return;
  Stamp before;
  if (!stamp_of(path, before)) return;  // a missing file: the caller says so
  std::string damage;
  if (lookup(path, before, damage)) {
    if (!damage.empty()) throw Error(where + damage);
    return;
  }

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;  // no check possible: open as before
  ++g_checks_run;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  if (pid == 0) {
    ::close(fds[0]);
    run_child(path, fds[1]);
  }
  ::close(fds[1]);

  const double limit_s = timeout_s();
  const auto t0 = std::chrono::steady_clock::now();
  bool timed_out = false;
  std::string got;  // what the child wrote: its strings, then 'K'
  for (;;) {
    const double left_s = limit_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (left_s <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int rc = ::poll(&p, 1, int(std::min(std::ceil(left_s * 1000), 1e9)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) break;
    if (rc == 0) {
      timed_out = true;
      break;
    }
    char buf[65536];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of the pipe: the child is gone
    got.append(buf, size_t(n));
  }
  ::close(fds[0]);
  if (timed_out) (void)::kill(pid, SIGKILL);
  int status = 0;
  pid_t w;
  do { w = ::waitpid(pid, &status, 0); } while (w < 0 && errno == EINTR);

  auto strings = std::make_shared<CheckedStrings>();
  std::string mismatch, unreadable;
  const bool parsed = !timed_out && parse_strings(got, *strings, mismatch, unreadable);
  if (parsed && mismatch.empty() && unreadable.empty()) {
    remember(path, before, "", std::move(strings));
    return;
  }
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", limit_s);
  if (parsed && !unreadable.empty())
    damage = " is damaged: " + unreadable;
  else if (parsed)
    damage = " is damaged: " + mismatch;  // a checksum: kEditAdvice follows kDamagedAdvice
  else if (timed_out) {
    // Not remembered: a good file on a busy machine can miss the limit, and the next open checks it again.
    throw Error(where + " could not be checked: the HDF5 library did not finish reading it within " + limit +
                " s — the file is damaged, or the machine was too busy (FOCAL_H5_CHECK_TIMEOUT_S sets the limit; "
                "opening it again checks it again)");
  } else if (w == pid && WIFSIGNALED(status))
    damage = " is damaged: the HDF5 library crashed reading it (" + signal_text(WTERMSIG(status)) + ")";
  else if (w == pid && WIFEXITED(status))
    damage =
        " is damaged: the HDF5 library stopped reading it (exit status " + std::to_string(WEXITSTATUS(status)) + ")";
  else
    damage = " is damaged: the HDF5 library crashed reading it";
  damage += kDamagedAdvice;
  if (parsed && unreadable.empty()) damage += kEditAdvice;
  remember(path, before, damage);
  throw Error(where + damage);
}

}  // namespace focal::h5
