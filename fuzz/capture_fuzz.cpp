// libFuzzer target: the HDF5 capture reader (read_capture) against what a hostile capture can declare — shapes,
// attribute values and types, dataset types, unwritten (forged) storage, missing or extra objects — without
// corrupting the HDF5 container itself. Any exception other than focal::Error, any allocation beyond the fuzzer's
// -malloc_limit_mb, and any sanitizer report are findings (scripts/fuzz.sh).
//
// Why structure-aware: raw-byte mutation of HDF5 files finds memory errors inside libhdf5 1.10's own decoder within
// seconds (e.g. H5HG_read on a corrupted global heap), which are the library's bugs, not the reader's. So the input is
// a small text program of edits applied through the HDF5 API to a valid capture written at start-up:
//   attr PATH NAME i VALUE       integer attribute (int64)       attr PATH NAME s TEXT   string attribute
//   attrs PATH NAME N            string-list attribute of N entries
//   dset PATH TYPE D0,D1,.. [w]  replace dataset PATH: TYPE i32 | f32 | f16 | str | i8, dims (T = the token count);
//                                chunked + compressed and unwritten, or with w: written with ascending values
//   del PATH [NAME]              delete an object (or the attribute NAME of it)
// Unknown lines are skipped. fuzz/corpus/capture/ holds programs that mirror the bad-input corpus (tests/badinput).
#include <hdf5.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/error.h"

namespace {

const int kTokens = 6;

focal::CaptureFile seed_capture() {
  focal::CaptureFile f;
  f.tool_version = "fuzz";
  f.model_path = "fuzz";
  f.model_config_json = "{}";
  f.n_layers = 2;
  f.n_heads = 2;
  f.d_head = 4;
  for (int i = 0; i < kTokens; ++i) {
    f.token_ids.push_back(i + 1);
    f.pieces.push_back("t" + std::to_string(i));
  }
  f.relevant = {1};
  for (const char* name : {"a", "b"}) {
    focal::RunCapture r;
    r.name = name;
    r.temp_spec_json = R"({"mode":"standard"})";
    r.topk_mass_k = 2;
    r.layers = {1};
    r.heads = {0, 1};
    r.queries = {4, 5};
    const size_t rows = r.layers.size() * r.heads.size() * r.queries.size() * kTokens;
    r.probs.assign(rows, 0.0f);
    r.scores.assign(rows, 0.5f);
    for (size_t i = 0; i < rows; i += kTokens) r.probs[i] = 1.0f;
    r.metrics.assign(size_t(f.n_layers) * f.n_heads * kTokens * focal::kNumRowMetrics, 0.25f);
    r.row_scale.assign(size_t(f.n_layers) * f.n_heads * kTokens, 1.0f);
    r.topk_ids.assign(kTokens * 2, 3);
    r.topk_probs.assign(kTokens * 2, 0.5f);
    r.token_nll.assign(kTokens, 1.0f);
    f.runs.push_back(r);
  }
  focal::Comparison c;
  c.run_a = "a";
  c.run_b = "b";
  c.layers = {1};
  c.heads = {0, 1};
  c.queries = {4, 5};
  c.kl.assign(4, 0.0f);
  c.js.assign(4, 0.0f);
  f.comparisons.push_back(c);
  return f;
}

std::vector<hsize_t> parse_dims(const std::string& s) {
  std::vector<hsize_t> d;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',') && d.size() < 5)
    d.push_back(part == "T" ? hsize_t(kTokens) : hsize_t(std::strtoull(part.c_str(), nullptr, 10)));
  return d;
}

void set_int_attr(hid_t obj, const std::string& name, long long v) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(obj, name.c_str(), H5T_NATIVE_INT64, sp, H5P_DEFAULT, H5P_DEFAULT);
  if (a >= 0) {
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
  }
  H5Sclose(sp);
}

void set_str_attr(hid_t obj, const std::string& name, const std::vector<std::string>& v, bool scalar) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  const hsize_t n = v.size();
  hid_t sp = scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr);
  std::vector<const char*> p;
  p.reserve(v.size());
  for (const std::string& s : v) p.push_back(s.c_str());
  hid_t a = H5Acreate2(obj, name.c_str(), t, sp, H5P_DEFAULT, H5P_DEFAULT);
  if (a >= 0) {
    if (!p.empty()) H5Awrite(a, t, p.data());
    H5Aclose(a);
  }
  H5Sclose(sp);
  H5Tclose(t);
}

void replace_dataset(hid_t file, const std::string& path, const std::string& type, std::vector<hsize_t> dims,
                     bool written) {
  if (H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0) H5Ldelete(file, path.c_str(), H5P_DEFAULT);
  hid_t t = -1;
  if (type == "i32")
    t = H5Tcopy(H5T_NATIVE_INT32);
  else if (type == "i8")
    t = H5Tcopy(H5T_NATIVE_INT8);
  else if (type == "f16") {
    t = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(t, 15, 10, 5, 0, 10);
    H5Tset_precision(t, 16);
    H5Tset_size(t, 2);
    H5Tset_ebias(t, 15);
  } else if (type == "str") {
    t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
  } else
    t = H5Tcopy(H5T_NATIVE_FLOAT);
  uint64_t n = 1;
  for (hsize_t d : dims) n = (d && n > (uint64_t(1) << 40) / d) ? (uint64_t(1) << 40) : n * d;
  written = written && n <= (1u << 16) && type != "str";
  std::vector<hsize_t> maxd(dims.size(), H5S_UNLIMITED);
  hid_t sp = dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr);
  hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!written && !dims.empty()) {  // chunked, compressed, never written: the declared size is all there is
    std::vector<hsize_t> chunk(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) chunk[i] = dims[i] == 0 ? 1 : std::min<hsize_t>(dims[i], 64);
    H5Pset_chunk(dcpl, int(chunk.size()), chunk.data());
    H5Pset_deflate(dcpl, 1);
  }
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  hid_t ds = sp >= 0 ? H5Dcreate2(file, path.c_str(), t, sp, lcpl, dcpl, H5P_DEFAULT) : -1;
  if (ds >= 0 && written) {
    std::vector<int32_t> v(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = int32_t(i);
    H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  }
  if (ds >= 0) H5Dclose(ds);
  H5Pclose(lcpl);
  H5Pclose(dcpl);
  if (sp >= 0) H5Sclose(sp);
  H5Tclose(t);
}

void apply_program(hid_t file, const std::string& program) {
  std::stringstream lines(program);
  std::string line;
  int n_ops = 0;
  while (std::getline(lines, line) && n_ops++ < 16) {
    std::stringstream ls(line);
    std::string op, path, a, b, c;
    ls >> op >> path >> a >> b;
    std::getline(ls, c);
    if (path.empty() || path[0] != '/') continue;
    const htri_t exists = path == "/" ? 1 : H5Lexists(file, path.c_str(), H5P_DEFAULT);
    if (op == "attr" && exists > 0) {
      hid_t obj = H5Oopen(file, path.c_str(), H5P_DEFAULT);
      if (obj < 0) continue;
      if (b == "i")
        set_int_attr(obj, a, std::strtoll(c.c_str(), nullptr, 10));
      else
        set_str_attr(obj, a, {c.empty() ? c : c.substr(1)}, true);
      H5Oclose(obj);
    } else if (op == "attrs" && exists > 0) {
      hid_t obj = H5Oopen(file, path.c_str(), H5P_DEFAULT);
      if (obj < 0) continue;
      std::vector<std::string> v(std::min<size_t>(std::strtoull(b.c_str(), nullptr, 10), 4096), "x");
      set_str_attr(obj, a, v, false);
      H5Oclose(obj);
    } else if (op == "dset") {
      replace_dataset(file, path, a, parse_dims(b), c.find('w') != std::string::npos);
    } else if (op == "del" && exists > 0) {
      if (a.empty())
        H5Ldelete(file, path.c_str(), H5P_DEFAULT);
      else if (H5Aexists_by_name(file, path.c_str(), a.c_str(), H5P_DEFAULT) > 0)
        H5Adelete_by_name(file, path.c_str(), a.c_str(), H5P_DEFAULT);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = "/dev/shm/focal_capture_fuzz_" + std::to_string(getpid());
  static const std::string seed = dir + ".seed.h5", path = dir + ".h5";
  static const bool made = [] {
    focal::write_capture(seed_capture(), seed, false);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)made;
  {  // a fresh copy of the seed, edited by the program
    FILE* in = std::fopen(seed.c_str(), "rb");
    FILE* out = std::fopen(path.c_str(), "wb");
    if (!in || !out) {
      if (in) std::fclose(in);
      if (out) std::fclose(out);
      return 0;
    }
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, in)) > 0) std::fwrite(buf, 1, n, out);
    std::fclose(in);
    std::fclose(out);
  }
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return 0;
  apply_program(file, std::string(reinterpret_cast<const char*>(data), size));
  H5Fclose(file);
  try {
    (void)focal::read_capture(path);
  } catch (const focal::Error&) {}
  std::remove(path.c_str());
  return 0;
}
