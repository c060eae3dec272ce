// stats.h5 and its rank shards: writing (from CorpusStats and the row file) and reading (stats_file.h). Layout in
// docs/batch.md. Uses the runtime's HDF5 layer (lock, RAII handles, atomic write, the shared root header).
#include <hdf5.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "batch_internal.h"
#include "focal/error.h"
#include "focal/model.h"
#include "h5_io.h"

namespace focal::batch {

using namespace focal::h5;

// ---------------------------------------------------------------------------------------------------------------
// Row file records.

namespace {
struct RecordHead {
  int64_t index;
  int32_t n_tokens, n_tokens_total, n_windows, pad;
  char id[kDocIdBytes];
};
}  // namespace

size_t doc_record_bytes(const StatsShape& s) { return sizeof(RecordHead) + s.cells() * sizeof(float); }

void write_doc_record(std::FILE* f, const StatsShape& s, const DocRecord& r, const std::string& path) {
  RecordHead h{};
  h.index = r.index;
  h.n_tokens = r.n_tokens;
  h.n_tokens_total = r.n_tokens_total;
  h.n_windows = r.n_windows;
  // Cut at kDocIdBytes without splitting a UTF-8 sequence.
  size_t n = std::min(r.id.size(), (size_t)kDocIdBytes);
  while (n > 0 && n < r.id.size() && ((unsigned char)r.id[n] & 0xC0) == 0x80) --n;
  std::memcpy(h.id, r.id.data(), n);
  if (std::fwrite(&h, sizeof h, 1, f) != 1 ||
      std::fwrite(r.head_means.data(), sizeof(float), s.cells(), f) != s.cells())
    write_failed(path, errno);
}

void write_failed(const std::string& path, int err) {
  if (is_out_of_space(err))
    throw Error(no_space_text(err, path) +
                ": the batch stopped — free some space and run the same command with --resume (it goes on from its "
                "last checkpoint, or from the first document before one)");
  throw Error("cannot write '" + path + "': " + errno_text(err, path));
}

std::vector<DocRecord> read_doc_records(std::FILE* f, const StatsShape& s, size_t first, size_t n,
                                        const std::string& path) {
  std::vector<DocRecord> out(n);
  if (std::fseek(f, (long)(first * doc_record_bytes(s)), SEEK_SET) != 0) throw Error("cannot seek in '" + path + "'");
  for (DocRecord& r : out) {
    RecordHead h{};
    r.head_means.resize(s.cells());
    if (std::fread(&h, sizeof h, 1, f) != 1 ||
        std::fread(r.head_means.data(), sizeof(float), s.cells(), f) != s.cells())
      throw Error("row file '" + path + "' is shorter than its checkpoint says: it was changed since");
    r.index = h.index;
    r.n_tokens = h.n_tokens;
    r.n_tokens_total = h.n_tokens_total;
    r.n_windows = h.n_windows;
    r.id.assign(h.id, strnlen(h.id, kDocIdBytes));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Writing.

namespace {

void write_raw(hid_t parent, const Where& w, const char* name, hid_t type, const Dims& dims, const void* data,
               const char* shape, Writer& wr, const std::string& ppath) {
  SpaceId sp = checked<SpaceId>(H5Screate_simple((int)dims.size(), dims.data(), nullptr), w, "dataspace");
  PlistId dcpl = checked<PlistId>(H5Pcreate(H5P_DATASET_CREATE), w, "dataset properties");
  const size_t n = n_elements(dims);
  if (n > 4096 && dims.size() > 1) {  // big arrays: chunked by their leading slab, shuffle + deflate
    Dims chunk = dims;
    chunk[0] = 1;
    check_h5(H5Pset_chunk(dcpl.get(), (int)chunk.size(), chunk.data()), w, "chunk");
    check_h5(H5Pset_shuffle(dcpl.get()), w, "shuffle");
    check_h5(H5Pset_deflate(dcpl.get(), 4), w, "deflate");
  }
  DatasetId ds = checked<DatasetId>(H5Dcreate2(parent, name, type, sp.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), w,
                                    std::string("cannot create ") + ppath + "/" + name);
  if (n > 0) check_h5(H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), w, std::string("write ") + name);
  // `type` is the memory's as well as the file's: the bytes written are the stored ones.
  wr.attr_u32(ds.get(), ppath + "/" + name, kCrcAttr, crc32_add(0, data, n * H5Tget_size(type)));
  wr.attr_string(ds.get(), ppath + "/" + name, "shape", shape);
}

TypeId id_type(const Where& w) {
  TypeId t = checked<TypeId>(H5Tcopy(H5T_C_S1), w, "string type");
  check_h5(H5Tset_size(t.get(), kDocIdBytes), w, "string type");
  check_h5(H5Tset_strpad(t.get(), H5T_STR_NULLPAD), w, "string type");
  return t;
}

void write_header(hid_t root, Writer& w, const StatsHeader& h, const StatsShape& s) {
  write_root_header(w, root, kStatsFormat, kStatsVersion, h.provenance, true);
  std::vector<std::string> names;
  names.reserve((size_t)s.n_metrics);
  for (int m = 0; m < s.n_metrics; ++m) names.push_back(row_metric_name(m));
  w.attr_strings(root, "/", "metric_names", names);
  w.attr_string(root, "/", "data_path", h.data_path);
  w.attr_string(root, "/", "long_docs", h.window ? "window" : "cut");
  w.attr_i32(root, "/", "max_tokens", s.max_tokens);
  w.attr_i32(root, "/", "n_layers", s.n_layers);
  w.attr_i32(root, "/", "n_heads", s.n_heads);
  w.attr_i32(root, "/", "n_ranks", h.n_ranks);
  w.attr_strings(root, "/", "run_names", h.run_names);
  w.attr_strings(root, "/", "run_specs_json", h.run_specs_json);
}

// The per-document datasets of `docs` (D rows), filled from the row file in blocks so memory stays bounded.
void write_doc_datasets(hid_t docs, Writer& w, const StatsShape& s, const std::string& row_file, size_t n_docs,
                        std::vector<int64_t>* indices_out) {
  const Where& where = w.where();
  const Dims d1{n_docs};
  const Dims dh{n_docs, (hsize_t)s.n_runs, (hsize_t)s.n_layers, (hsize_t)s.n_heads, (hsize_t)s.n_metrics};
  TypeId idt = id_type(where);
  auto create = [&](const char* name, hid_t type, const Dims& dims, const char* shape, bool chunked) {
    SpaceId sp = checked<SpaceId>(H5Screate_simple((int)dims.size(), dims.data(), nullptr), where, "dataspace");
    PlistId dcpl = checked<PlistId>(H5Pcreate(H5P_DATASET_CREATE), where, "dataset properties");
    if (chunked && n_docs > 0) {
      Dims chunk = dims;
      chunk[0] = std::min<hsize_t>(n_docs, 16);
      check_h5(H5Pset_chunk(dcpl.get(), (int)chunk.size(), chunk.data()), where, "chunk");
      check_h5(H5Pset_shuffle(dcpl.get()), where, "shuffle");
      check_h5(H5Pset_deflate(dcpl.get(), 4), where, "deflate");
    }
    DatasetId ds = checked<DatasetId>(H5Dcreate2(docs, name, type, sp.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                                      where, std::string("cannot create /docs/") + name);
    w.attr_string(ds.get(), std::string("/docs/") + name, "shape", shape);
    return ds;
  };
  DatasetId ds_index = create("index", H5T_STD_I64LE, d1, "[doc]", false);
  DatasetId ds_id = create("id", idt.get(), d1, "[doc]", false);
  DatasetId ds_ntok = create("n_tokens", H5T_STD_I32LE, d1, "[doc]", false);
  DatasetId ds_ntot = create("n_tokens_total", H5T_STD_I32LE, d1, "[doc]", false);
  DatasetId ds_nwin = create("n_windows", H5T_STD_I32LE, d1, "[doc]", false);
  DatasetId ds_hm = create("head_means", H5T_IEEE_F32LE, dh, "[doc, run, layer, head, metric]", true);
  // The CRC-32 of each dataset's stored bytes, in row order (the blocks below are written in order).
  uint32_t crc_index = 0, crc_id = 0, crc_ntok = 0, crc_ntot = 0, crc_nwin = 0, crc_hm = 0;
  auto seal = [&] {
    w.attr_u32(ds_index.get(), "/docs/index", kCrcAttr, crc_index);
    w.attr_u32(ds_id.get(), "/docs/id", kCrcAttr, crc_id);
    w.attr_u32(ds_ntok.get(), "/docs/n_tokens", kCrcAttr, crc_ntok);
    w.attr_u32(ds_ntot.get(), "/docs/n_tokens_total", kCrcAttr, crc_ntot);
    w.attr_u32(ds_nwin.get(), "/docs/n_windows", kCrcAttr, crc_nwin);
    w.attr_u32(ds_hm.get(), "/docs/head_means", kCrcAttr, crc_hm);
  };
  if (n_docs == 0) {
    seal();
    return;
  }

  std::FILE* f = std::fopen(row_file.c_str(), "rb");
  if (!f) throw Error("cannot read the row file '" + row_file + "'");
  try {
    const size_t kBlock = 256;
    for (size_t first = 0; first < n_docs; first += kBlock) {
      const size_t n = std::min(kBlock, n_docs - first);
      std::vector<DocRecord> recs = read_doc_records(f, s, first, n, row_file);
      std::vector<int64_t> index(n);
      std::vector<int32_t> ntok(n), ntot(n), nwin(n);
      std::vector<char> ids(n * kDocIdBytes, 0);
      std::vector<float> hm(n * s.cells());
      for (size_t i = 0; i < n; ++i) {
        index[i] = recs[i].index;
        ntok[i] = recs[i].n_tokens;
        ntot[i] = recs[i].n_tokens_total;
        nwin[i] = recs[i].n_windows;
        std::memcpy(&ids[i * kDocIdBytes], recs[i].id.data(), recs[i].id.size());
        std::copy(recs[i].head_means.begin(), recs[i].head_means.end(), hm.begin() + (ptrdiff_t)(i * s.cells()));
        if (indices_out) indices_out->push_back(recs[i].index);
      }
      auto put = [&](const DatasetId& ds, hid_t mem_type, const Dims& full, const void* data) {
        SpaceId fsp = checked<SpaceId>(H5Dget_space(ds.get()), where, "dataspace");
        Dims start(full.size(), 0), count = full;
        start[0] = first;
        count[0] = n;
        check_h5(H5Sselect_hyperslab(fsp.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), where,
                 "select");
        SpaceId msp = checked<SpaceId>(H5Screate_simple((int)count.size(), count.data(), nullptr), where, "mem space");
        check_h5(H5Dwrite(ds.get(), mem_type, msp.get(), fsp.get(), H5P_DEFAULT, data), where, "write /docs");
      };
      put(ds_index, H5T_NATIVE_INT64, d1, index.data());
      put(ds_id, idt.get(), d1, ids.data());
      put(ds_ntok, H5T_NATIVE_INT32, d1, ntok.data());
      put(ds_ntot, H5T_NATIVE_INT32, d1, ntot.data());
      put(ds_nwin, H5T_NATIVE_INT32, d1, nwin.data());
      put(ds_hm, H5T_NATIVE_FLOAT, dh, hm.data());
      crc_index = crc32_add(crc_index, index.data(), n * sizeof(int64_t));
      crc_id = crc32_add(crc_id, ids.data(), ids.size());
      crc_ntok = crc32_add(crc_ntok, ntok.data(), n * sizeof(int32_t));
      crc_ntot = crc32_add(crc_ntot, ntot.data(), n * sizeof(int32_t));
      crc_nwin = crc32_add(crc_nwin, nwin.data(), n * sizeof(int32_t));
      crc_hm = crc32_add(crc_hm, hm.data(), hm.size() * sizeof(float));
    }
  } catch (...) {
    std::fclose(f);
    throw;
  }
  std::fclose(f);
  seal();
}

size_t count_records(const std::string& row_file, const StatsShape& s) {
  std::FILE* f = std::fopen(row_file.c_str(), "rb");
  if (!f) return 0;
  std::fseek(f, 0, SEEK_END);
  const long bytes = std::ftell(f);
  std::fclose(f);
  return bytes > 0 ? (size_t)bytes / doc_record_bytes(s) : 0;
}

// Virtual datasets /docs/* over the shards: global row = document index.
void write_doc_vds(hid_t docs, Writer& w, const StatsShape& s, const std::vector<ShardInfo>& shards) {
  const Where& where = w.where();
  size_t n_docs = 0;
  for (const ShardInfo& sh : shards) n_docs += sh.indices.size();
  TypeId idt = id_type(where);
  struct Item {
    const char* name;
    hid_t type;
    Dims tail;
    const char* shape;
  };
  const Dims hm_tail{(hsize_t)s.n_runs, (hsize_t)s.n_layers, (hsize_t)s.n_heads, (hsize_t)s.n_metrics};
  const std::vector<Item> items = {{"index", H5T_STD_I64LE, {}, "[doc]"},
                                   {"id", idt.get(), {}, "[doc]"},
                                   {"n_tokens", H5T_STD_I32LE, {}, "[doc]"},
                                   {"n_tokens_total", H5T_STD_I32LE, {}, "[doc]"},
                                   {"n_windows", H5T_STD_I32LE, {}, "[doc]"},
                                   {"head_means", H5T_IEEE_F32LE, hm_tail, "[doc, run, layer, head, metric]"}};
  for (const Item& it : items) {
    Dims full{n_docs};
    full.insert(full.end(), it.tail.begin(), it.tail.end());
    SpaceId vsp = checked<SpaceId>(H5Screate_simple((int)full.size(), full.data(), nullptr), where, "dataspace");
    PlistId dcpl = checked<PlistId>(H5Pcreate(H5P_DATASET_CREATE), where, "dataset properties");
    for (const ShardInfo& sh : shards) {
      const hsize_t rows = sh.indices.size();
      if (rows == 0) continue;
      Dims sdims{rows};
      sdims.insert(sdims.end(), it.tail.begin(), it.tail.end());
      // Runs of consecutive document indices map as one block.
      for (size_t i = 0; i < sh.indices.size();) {
        size_t j = i + 1;
        while (j < sh.indices.size() && sh.indices[j] == sh.indices[j - 1] + 1) ++j;
        Dims vstart(full.size(), 0), sstart(full.size(), 0), count = full;
        vstart[0] = (hsize_t)sh.indices[i];
        sstart[0] = i;
        count[0] = j - i;
        SpaceId ssp = checked<SpaceId>(H5Screate_simple((int)sdims.size(), sdims.data(), nullptr), where, "space");
        check_h5(H5Sselect_hyperslab(vsp.get(), H5S_SELECT_SET, vstart.data(), nullptr, count.data(), nullptr), where,
                 "select");
        check_h5(H5Sselect_hyperslab(ssp.get(), H5S_SELECT_SET, sstart.data(), nullptr, count.data(), nullptr), where,
                 "select");
        const std::string src = std::string("/docs/") + it.name;
        check_h5(H5Pset_virtual(dcpl.get(), vsp.get(), sh.file.c_str(), src.c_str(), ssp.get()), where,
                 "cannot map " + src + " of shard '" + sh.file + "'");
        i = j;
      }
    }
    check_h5(H5Sselect_all(vsp.get()), where, "select");
    DatasetId ds =
        checked<DatasetId>(H5Dcreate2(docs, it.name, it.type, vsp.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT), where,
                           std::string("cannot create the virtual dataset /docs/") + it.name);
    // Its crc32 is of what the view reads (the shards' data in document order), read back through it: the reader
    // checks the view, never the shards themselves.
    std::vector<unsigned char> all(n_elements(full) * H5Tget_size(it.type));
    if (!all.empty())
      check_h5(H5Dread(ds.get(), it.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, all.data()), where,
               std::string("cannot read the shards through /docs/") + it.name);
    w.attr_u32(ds.get(), std::string("/docs/") + it.name, kCrcAttr, crc32_add(0, all.data(), all.size()));
    w.attr_string(ds.get(), std::string("/docs/") + it.name, "shape", it.shape);
  }
}

void write_kept(hid_t root, Writer& w, const StatsShape& s, const std::vector<KeptRow>& kept) {
  GroupId g = w.group(root, "rows", "/rows", false);
  const Where& where = w.where();
  const size_t n = kept.size();
  std::vector<int64_t> doc(n);
  std::vector<int32_t> meta(n * 4);
  std::vector<float> probs(n * (size_t)s.n_runs * s.max_tokens);
  for (size_t i = 0; i < n; ++i) {
    doc[i] = kept[i].doc;
    meta[i * 4 + 0] = kept[i].window;
    meta[i * 4 + 1] = kept[i].layer;
    meta[i * 4 + 2] = kept[i].head;
    meta[i * 4 + 3] = kept[i].row;
    std::copy(kept[i].probs.begin(), kept[i].probs.end(), probs.begin() + (ptrdiff_t)(i * s.n_runs * s.max_tokens));
  }
  write_raw(g.get(), where, "doc", H5T_STD_I64LE, {n}, doc.data(), "[row]", w, "/rows");
  w.dataset_i32(g.get(), "/rows", "window_layer_head_row", {n, 4}, meta.data(), "[row, (window, layer, head, row)]");
  w.dataset_f32(g.get(), "/rows", "probs", {n, (hsize_t)s.n_runs, (hsize_t)s.max_tokens}, probs.data(),
                "[row, run, key]", {1, (hsize_t)s.n_runs, (hsize_t)s.max_tokens});
}

}  // namespace

void write_stats_file(const std::string& path, const StatsHeader& h, const CorpusStats& st,
                      const std::vector<KeptRow>& kept, const std::string& row_file,
                      const std::vector<ShardInfo>* shards) {
  H5Call lock;
  const StatsShape& s = st.shape;
  write_atomically(path, "batch statistics", [&](hid_t root, Writer& w) {
    const Where& where = w.where();
    write_header(root, w, h, s);
    w.attr_u64(root, "/", "n_docs", st.n_docs);
    w.attr_u64(root, "/", "n_tokens", st.n_tokens);
    w.attr_u64(root, "/", "n_skipped", st.n_skipped);
    GroupId g = w.group(root, "stats", "/stats", false);
    const Dims cells{(hsize_t)s.n_runs, (hsize_t)s.n_layers, (hsize_t)s.n_heads, (hsize_t)s.n_metrics};
    const char* kCellShape = "[run, layer, head, metric]";
    std::vector<double> count(s.cells()), mean(s.cells()), m2(s.cells()), var(s.cells());
    for (size_t c = 0; c < s.cells(); ++c) {
      count[c] = st.moments[c].n;
      mean[c] = st.moments[c].mean_or_nan();
      m2[c] = st.moments[c].m2;
      var[c] = st.moments[c].variance_or_nan();
    }
    write_raw(g.get(), where, "count", H5T_IEEE_F64LE, cells, count.data(), kCellShape, w, "/stats");
    write_raw(g.get(), where, "mean", H5T_IEEE_F64LE, cells, mean.data(), kCellShape, w, "/stats");
    write_raw(g.get(), where, "m2", H5T_IEEE_F64LE, cells, m2.data(), kCellShape, w, "/stats");
    write_raw(g.get(), where, "variance", H5T_IEEE_F64LE, cells, var.data(), kCellShape, w, "/stats");
    write_raw(g.get(), where, "min", H5T_IEEE_F64LE, cells, st.min.data(), kCellShape, w, "/stats");
    write_raw(g.get(), where, "max", H5T_IEEE_F64LE, cells, st.max.data(), kCellShape, w, "/stats");
    Dims hd = cells;
    hd.push_back((hsize_t)s.n_bins);
    write_raw(g.get(), where, "hist", H5T_STD_U64LE, hd, st.hist.data(), "[run, layer, head, metric, bin]", w,
              "/stats");
    std::vector<double> edges;
    for (int m = 0; m < s.n_metrics; ++m) {
      const std::vector<double> e = histogram_edges(s, m);
      edges.insert(edges.end(), e.begin(), e.end());
    }
    write_raw(g.get(), where, "hist_edges", H5T_IEEE_F64LE, {(hsize_t)s.n_metrics, (hsize_t)s.n_bins + 1}, edges.data(),
              "[metric, edge]", w, "/stats");
    Dims pd = cells;
    pd.push_back((hsize_t)s.n_buckets());
    write_raw(g.get(), where, "pos_sum", H5T_IEEE_F64LE, pd, st.pos_sum.data(), "[run, layer, head, metric, bucket]", w,
              "/stats");
    write_raw(g.get(), where, "pos_count", H5T_STD_U64LE, pd, st.pos_count.data(), "[run, layer, head, metric, bucket]",
              w, "/stats");
    std::vector<int32_t> pe = position_bucket_edges(s);
    w.dataset_i32(g.get(), "/stats", "pos_edges", {pe.size()}, pe.data(), "[bucket + 1]");
    GroupId docs = w.group(root, "docs", "/docs", false);
    if (shards)
      write_doc_vds(docs.get(), w, s, *shards);
    else
      write_doc_datasets(docs.get(), w, s, row_file, count_records(row_file, s), nullptr);
    write_kept(root, w, s, kept);
  });
}

std::vector<int64_t> write_shard(const std::string& path, const StatsHeader& h, const StatsShape& s,
                                 const std::string& row_file) {
  H5Call lock;
  std::vector<int64_t> indices;
  write_atomically(path, "batch shard", [&](hid_t root, Writer& w) {
    write_header(root, w, h, s);
    GroupId docs = w.group(root, "docs", "/docs", false);
    write_doc_datasets(docs.get(), w, s, row_file, count_records(row_file, s), &indices);
  });
  return indices;
}

// ---------------------------------------------------------------------------------------------------------------
// Reading.

float StatsFile::doc_head_mean(size_t d, int run, int layer, int head, int metric) const {
  return doc_head_means[d * stats.shape.cells() + stats.cell(run, layer, head, metric)];
}

float StatsFile::doc_mean(size_t d, int run, int metric) const {
  double sum = 0;
  int n = 0;
  for (int l = 0; l < stats.shape.n_layers; ++l)
    for (int h = 0; h < stats.shape.n_heads; ++h) {
      const float v = doc_head_mean(d, run, l, h, metric);
      if (!std::isnan(v)) {
        sum += v;
        ++n;
      }
    }
  return n ? float(sum / n) : std::numeric_limits<float>::quiet_NaN();
}

namespace {
// After an MPI run /docs/* are virtual datasets over the rank shards (file names relative to the stats file's
// folder). HDF5 reads a missing source as fill values without an error: refuse it here, naming the shard.
void check_shards_present(hid_t docs, const std::string& path, const Where& where) {
  DatasetId ds = checked<DatasetId>(H5Dopen2(docs, "index", H5P_DEFAULT), where, "cannot open /docs/index");
  PlistId dcpl = checked<PlistId>(H5Dget_create_plist(ds.get()), where, "dataset properties of /docs/index");
  if (H5Pget_layout(dcpl.get()) != H5D_VIRTUAL) return;
  size_t n = 0;
  check_h5(H5Pget_virtual_count(dcpl.get(), &n), where, "cannot read the mappings of /docs/index");
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
  std::set<std::string> names;  // a mapping per run of documents: a shard's name recurs
  for (size_t i = 0; i < n; ++i) {
    const ssize_t len = H5Pget_virtual_filename(dcpl.get(), i, nullptr, 0);
    if (len < 0) where.fail("cannot read shard name " + std::to_string(i) + " of /docs/index");
    std::string name((size_t)len + 1, '\0');
    H5Pget_virtual_filename(dcpl.get(), i, name.data(), name.size());
    name.resize((size_t)len);
    names.insert(name);
  }
  for (const std::string& name : names) {
    const std::string full = !name.empty() && name[0] == '/' ? name : dir + name;
    if (::access(full.c_str(), R_OK) != 0)
      where.fail("/docs are virtual datasets over the MPI run's shard files, and shard '" + full +
                 "' is missing or unreadable: keep the folder " + name.substr(0, name.rfind('/')) +
                 " beside the stats file");
  }
}

template <class T>
std::vector<T> read_all(Reader& r, hid_t parent, const std::string& ppath, const char* name, hid_t mem,
                        const Dims& want) {
  const std::string p = ppath + "/" + name;
  if (!r.has(parent, name)) r.where().fail("missing dataset " + p);
  Dims got = r.shape_of(parent, ppath, name);
  r.expect_dims(p, got, want, "");
  std::vector<T> v(n_elements(want));
  DatasetId ds = checked<DatasetId>(H5Dopen2(parent, name, H5P_DEFAULT), r.where(), "cannot open " + p);
  if (!v.empty()) {
    PlistId dcpl = checked<PlistId>(H5Dget_create_plist(ds.get()), r.where(), "cannot read " + p);
    const bool view = H5Pget_layout(dcpl.get()) == H5D_VIRTUAL;  // /docs of an MPI run: over the shard files
    check_h5(H5Dread(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), r.where(),
             "cannot read " + p + (view ? " (after an MPI run the shard files must sit beside the stats file)" : ""));
  }
  TypeId ftype = checked<TypeId>(H5Dget_type(ds.get()), r.where(), "cannot read " + p);
  if (r.has_attr(ds.get(), kCrcAttr) && H5Tequal(ftype.get(), mem) <= 0)  // as Reader::read: a damaged type
    r.where().fail("dataset " + p + " is damaged: its stored type is not the one focalscope wrote" + kDamagedAdvice);
  r.check_crc(ds.get(), p, crc32_add(0, v.data(), v.size() * sizeof(T)));
  return v;
}
}  // namespace

StatsFile read_stats(const std::string& path, bool with_docs) {
  H5Call lock;
  FileId file = open_for_reading(path, "batch statistics");
  Where where{"batch statistics file '" + path + "'"};
  GroupId root = open_root(file, where);
  Reader r(where);
  r.use_checked_strings(path);
  check_format(r, root.get(), path, "batch statistics", kStatsFormat, kStatsVersion, "focalscope-capture",
               "it is a capture: open it as one (focal inspect, the app, fs.open_capture)");
  StatsFile f;
  f.provenance = read_provenance(r, root.get(), true);
  f.data_path = r.attr_string(root.get(), "/", "data_path");
  f.window = r.attr_string(root.get(), "/", "long_docs") == "window";
  f.n_ranks = (int)r.attr_int(root.get(), "/", "n_ranks");
  f.metric_names = r.attr_strings(root.get(), "/", "metric_names");
  f.run_names = r.attr_strings(root.get(), "/", "run_names");
  f.run_specs_json = r.attr_strings(root.get(), "/", "run_specs_json");
  StatsShape s;
  s.n_runs = (int)f.run_names.size();
  s.n_layers = r.attr_int_in(root.get(), "/", "n_layers", 1, 1 << 16);
  s.n_heads = r.attr_int_in(root.get(), "/", "n_heads", 1, 1 << 16);
  s.n_metrics = (int)f.metric_names.size();
  s.max_tokens = r.attr_int_in(root.get(), "/", "max_tokens", 1, 1 << 24);
  if (s.n_runs < 1 || s.n_metrics != kNumRowMetrics)
    where.fail("has " + std::to_string(s.n_runs) + " runs and " + std::to_string(s.n_metrics) +
               " metrics; expected at least one run and " + std::to_string(kNumRowMetrics) + " metrics");
  GroupId g = r.group(root.get(), "stats", "/stats");
  const Dims hd = r.shape_of(g.get(), "/stats", "hist");
  if (hd.size() != 5) where.fail("/stats/hist is not 5-dimensional");
  s.n_bins = (int)hd[4];
  f.stats = CorpusStats(s);
  f.stats.n_docs = r.attr_u64(root.get(), "/", "n_docs");
  f.stats.n_tokens = r.attr_u64(root.get(), "/", "n_tokens");
  f.stats.n_skipped = r.attr_u64(root.get(), "/", "n_skipped");
  const Dims cells{(hsize_t)s.n_runs, (hsize_t)s.n_layers, (hsize_t)s.n_heads, (hsize_t)s.n_metrics};
  std::vector<double> count = read_all<double>(r, g.get(), "/stats", "count", H5T_NATIVE_DOUBLE, cells);
  std::vector<double> mean = read_all<double>(r, g.get(), "/stats", "mean", H5T_NATIVE_DOUBLE, cells);
  std::vector<double> m2 = read_all<double>(r, g.get(), "/stats", "m2", H5T_NATIVE_DOUBLE, cells);
  for (size_t c = 0; c < s.cells(); ++c) f.stats.moments[c] = {count[c], count[c] > 0 ? mean[c] : 0.0, m2[c]};
  f.stats.min = read_all<double>(r, g.get(), "/stats", "min", H5T_NATIVE_DOUBLE, cells);
  f.stats.max = read_all<double>(r, g.get(), "/stats", "max", H5T_NATIVE_DOUBLE, cells);
  Dims hdims = cells;
  hdims.push_back((hsize_t)s.n_bins);
  f.stats.hist = read_all<uint64_t>(r, g.get(), "/stats", "hist", H5T_NATIVE_UINT64, hdims);
  Dims pd = cells;
  pd.push_back((hsize_t)s.n_buckets());
  f.stats.pos_sum = read_all<double>(r, g.get(), "/stats", "pos_sum", H5T_NATIVE_DOUBLE, pd);
  f.stats.pos_count = read_all<uint64_t>(r, g.get(), "/stats", "pos_count", H5T_NATIVE_UINT64, pd);
  f.pos_edges = position_bucket_edges(s);
  for (int m = 0; m < s.n_metrics; ++m) f.hist_edges.push_back(histogram_edges(s, m));
  if (!with_docs) return f;

  GroupId docs = r.group(root.get(), "docs", "/docs");
  const Dims dd = r.shape_of(docs.get(), "/docs", "index");
  if (dd.size() != 1) where.fail("/docs/index is not 1-dimensional");
  check_shards_present(docs.get(), path, where);
  const hsize_t D = dd[0];
  f.doc_index = read_all<int64_t>(r, docs.get(), "/docs", "index", H5T_NATIVE_INT64, {D});
  f.doc_n_tokens = read_all<int32_t>(r, docs.get(), "/docs", "n_tokens", H5T_NATIVE_INT32, {D});
  f.doc_n_tokens_total = read_all<int32_t>(r, docs.get(), "/docs", "n_tokens_total", H5T_NATIVE_INT32, {D});
  f.doc_n_windows = read_all<int32_t>(r, docs.get(), "/docs", "n_windows", H5T_NATIVE_INT32, {D});
  f.doc_head_means = read_all<float>(r, docs.get(), "/docs", "head_means", H5T_NATIVE_FLOAT,
                                     {D, cells[0], cells[1], cells[2], cells[3]});
  {
    TypeId idt = id_type(where);
    DatasetId ds = checked<DatasetId>(H5Dopen2(docs.get(), "id", H5P_DEFAULT), where, "cannot open /docs/id");
    std::vector<char> raw((size_t)D * kDocIdBytes, 0);
    if (D > 0)
      check_h5(H5Dread(ds.get(), idt.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()), where, "cannot read /docs/id");
    r.check_crc(ds.get(), "/docs/id", crc32_add(0, raw.data(), raw.size()));
    for (hsize_t i = 0; i < D; ++i)
      f.doc_id.emplace_back(&raw[i * kDocIdBytes], strnlen(&raw[i * kDocIdBytes], kDocIdBytes));
  }
  if (r.has(root.get(), "rows")) {
    GroupId rows = r.group(root.get(), "rows", "/rows");
    const Dims rd = r.shape_of(rows.get(), "/rows", "doc");
    const hsize_t n = rd.empty() ? 0 : rd[0];
    std::vector<int64_t> doc = read_all<int64_t>(r, rows.get(), "/rows", "doc", H5T_NATIVE_INT64, {n});
    std::vector<int32_t> meta =
        read_all<int32_t>(r, rows.get(), "/rows", "window_layer_head_row", H5T_NATIVE_INT32, {n, 4});
    std::vector<float> probs = read_all<float>(r, rows.get(), "/rows", "probs", H5T_NATIVE_FLOAT,
                                               {n, (hsize_t)s.n_runs, (hsize_t)s.max_tokens});
    const size_t stride = (size_t)s.n_runs * s.max_tokens;
    for (hsize_t i = 0; i < n; ++i) {
      KeptRow k;
      k.doc = doc[i];
      k.window = meta[i * 4];
      k.layer = meta[i * 4 + 1];
      k.head = meta[i * 4 + 2];
      k.row = meta[i * 4 + 3];
      k.probs.assign(probs.begin() + (ptrdiff_t)(i * stride), probs.begin() + (ptrdiff_t)((i + 1) * stride));
      f.kept_rows.push_back(std::move(k));
    }
  }
  return f;
}

}  // namespace focal::batch
