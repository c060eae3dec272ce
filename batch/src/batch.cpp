// The batch driver (batch.h): documents from the work queue, one forward per setting and window, statistics,
// per-document rows, sampled attention rows, checkpoints and --resume, and the final stats.h5 (or shards + merge).
#include "focal_batch/batch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <memory>
#include <set>

#include "batch_internal.h"
#include "comm.h"
#include "focal/atomic_file.h"
#include "focal/error.h"
#include "focal/log.h"

namespace focal::batch {

namespace {

uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t row_priority(uint64_t seed, int64_t doc, int window, int layer, int head, int row) {
  uint64_t h = mix64(seed);
  h = mix64(h ^ (uint64_t)doc);
  h = mix64(h ^ (uint64_t)window);
  h = mix64(h ^ ((uint64_t)layer << 32 | (uint32_t)head));
  return mix64(h ^ (uint64_t)row);
}

bool by_priority(const KeptRow& a, const KeptRow& b) { return a.priority < b.priority; }

// Observes one forward (one run, one window): streams the metrics into the statistics and copies the sampled rows.
class BatchObserver : public ForwardObserver {
 public:
  BatchObserver(Accumulator& acc, CorpusStats& st, CommImpl& comm, int run, int max_tokens,
                const std::vector<KeptRow*>& rows, int n_layers, int n_heads)
      : acc_(acc),
        st_(st),
        comm_(comm),
        run_(run),
        max_tokens_(max_tokens),
        by_head_((size_t)n_layers * n_heads),
        n_heads_(n_heads) {
    for (KeptRow* r : rows) by_head_[(size_t)r->layer * n_heads + r->head].push_back(r);
  }
  bool wants_metrics() const override { return true; }
  bool wants_rows(int layer, int head) const override { return !by_head_[(size_t)layer * n_heads_ + head].empty(); }
  void on_rows(int layer, int head, int row0, int n_rows, int stride, const float* probs, const float*) override {
    for (KeptRow* r : by_head_[(size_t)layer * n_heads_ + head]) {
      if (r->row < row0 || r->row >= row0 + n_rows) continue;
      const float* src = probs + (size_t)(r->row - row0) * stride;
      std::copy(src, src + r->row + 1, r->probs.begin() + (ptrdiff_t)run_ * max_tokens_);
    }
  }
  void on_layer(const LayerRecord& rec) override { acc_.add_layer(st_, run_, rec.layer, rec.n_tokens, rec.metrics); }
  bool cancelled() const override {
    comm_.serve();  // rank 0 keeps the queue moving while it computes
    return false;
  }

 private:
  Accumulator& acc_;
  CorpusStats& st_;
  CommImpl& comm_;
  int run_, max_tokens_;
  std::vector<std::vector<KeptRow*>> by_head_;  // [L * H] rows wanted of each head
  int n_heads_;
};

// ----- checkpoint: a small binary file written atomically -----
constexpr char kCkptMagic[] = "FOCALBATCHCKPT1";

struct Ckpt {
  std::string key;
  int64_t next_index = 0;
  uint64_t rows_bytes = 0;
};

void put(std::string& b, const void* p, size_t n) {
  if (n > 0) b.append(static_cast<const char*>(p), n);  // an empty vector's data() may be null
}
template <class T>
void put_v(std::string& b, const std::vector<T>& v) {
  const uint64_t n = v.size();
  put(b, &n, sizeof n);
  put(b, v.data(), n * sizeof(T));
}
struct Cursor {
  const std::string& b;
  size_t at = 0;
  void get(void* p, size_t n) {
    if (at + n > b.size()) throw Error("truncated");
    if (n > 0) std::memcpy(p, b.data() + at, n);
    at += n;
  }
  template <class T>
  void get_v(std::vector<T>& v) {
    uint64_t n = 0;
    get(&n, sizeof n);
    if (n > (b.size() - at) / sizeof(T)) throw Error("truncated");
    v.resize(n);
    get(v.data(), n * sizeof(T));
  }
};

std::string serialize_stats(const CorpusStats& s, const std::vector<KeptRow>& kept) {
  std::string b;
  put_v(b, s.moments);
  put_v(b, s.min);
  put_v(b, s.max);
  put_v(b, s.hist);
  put_v(b, s.pos_sum);
  put_v(b, s.pos_count);
  put(b, &s.n_docs, sizeof s.n_docs);
  put(b, &s.n_tokens, sizeof s.n_tokens);
  const uint64_t nk = kept.size();
  put(b, &nk, sizeof nk);
  for (const KeptRow& k : kept) {
    put(b, &k.priority, sizeof k.priority);
    put(b, &k.doc, sizeof k.doc);
    const int32_t meta[4] = {k.window, k.layer, k.head, k.row};
    put(b, meta, sizeof meta);
    put_v(b, k.probs);
  }
  return b;
}

void deserialize_stats(Cursor& c, CorpusStats& s, std::vector<KeptRow>& kept) {
  const size_t cells = s.moments.size(), hist = s.hist.size(), pos = s.pos_sum.size();
  c.get_v(s.moments);
  c.get_v(s.min);
  c.get_v(s.max);
  c.get_v(s.hist);
  c.get_v(s.pos_sum);
  c.get_v(s.pos_count);
  if (s.moments.size() != cells || s.min.size() != cells || s.max.size() != cells || s.hist.size() != hist ||
      s.pos_sum.size() != pos || s.pos_count.size() != pos)
    throw Error("shape differs");
  c.get(&s.n_docs, sizeof s.n_docs);
  c.get(&s.n_tokens, sizeof s.n_tokens);
  uint64_t nk = 0;
  c.get(&nk, sizeof nk);
  kept.clear();
  for (uint64_t i = 0; i < nk; ++i) {
    KeptRow k;
    c.get(&k.priority, sizeof k.priority);
    c.get(&k.doc, sizeof k.doc);
    int32_t meta[4];
    c.get(meta, sizeof meta);
    k.window = meta[0];
    k.layer = meta[1];
    k.head = meta[2];
    k.row = meta[3];
    c.get_v(k.probs);
    kept.push_back(std::move(k));
  }
}

std::string read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return {};
  std::string s;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  std::fclose(f);
  return s;
}

std::string base_of(const std::string& p) {
  const size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

void remove_tree(const std::string& dir) {
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      const std::string p = dir + "/" + n;
      struct stat st {};
      if (::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        remove_tree(p);
      else
        ::unlink(p.c_str());
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
}

// Test hook (docs/batch.md): FOCAL_BATCH_DIE_AFTER=N kills this process with SIGKILL after its N-th document has been
// appended to the row file and before it is checkpointed (N = 0: before the first document); FOCAL_BATCH_DIE_RANK=R limits that to rank R.
void maybe_die(int rank, int64_t docs_done) {
  const char* after = std::getenv("FOCAL_BATCH_DIE_AFTER");
  if (!after) return;
  const char* r = std::getenv("FOCAL_BATCH_DIE_RANK");
  if (r && std::atoi(r) != rank) return;
  if (docs_done >= std::atoll(after)) std::raise(SIGKILL);
}

}  // namespace

int64_t count_documents(const std::string& path, OnError on_error, int64_t limit, uint64_t* skipped) {
  // The one pass that reports malformed lines: under kFail the first one is the batch's error, under kSkip each is
  // logged once here (the batch's own readers are quiet) and counted up to the --limit'th document.
  CorpusReader r(path, on_error);
  Document d;
  int64_t n = 0;
  while ((limit <= 0 || n < limit) && r.next(d)) ++n;
  if (skipped) *skipped = r.skipped();
  return n;
}

void run_batch(const Model& model, const BatchOptions& opt, Comm& comm_base,
               const std::function<void(const BatchProgress&)>& progress) {
  CommImpl& comm = static_cast<CommImpl&>(comm_base);
  const ModelConfig& cfg = model.config();
  if (opt.runs.empty()) throw Error("--runs: give at least one setting, e.g. --runs standard,focal:0.4");
  if (opt.max_tokens < 2)
    throw Error("--max-tokens " + std::to_string(opt.max_tokens) + " is too small: give at least 2");
  if (opt.max_tokens > cfg.max_positions)
    throw Error("--max-tokens " + std::to_string(opt.max_tokens) + " is longer than the model's context of " +
                std::to_string(cfg.max_positions) + " tokens: give at most " + std::to_string(cfg.max_positions) +
                " (longer documents are cut, or split with --long window)");
  if (opt.keep_rows < 0) throw Error("--keep-rows must be >= 0");
  if (opt.n_bins < 2 || opt.n_bins > 4096) throw Error("--bins must be in 2..4096");
  if (opt.topk_mass_k < 1 || opt.topk_mass_k > 64)  // as capture's; 0 wrote topk_mass = 0 everywhere
    throw Error("--topk-mass " + std::to_string(opt.topk_mass_k) + ": k must be in 1..64");
  if (opt.limit < 0) throw Error("--limit must be >= 0 (0: every document)");
  if (!(opt.checkpoint_s >= 0))  // NaN never checkpointed
    throw Error("--checkpoint-every must be a number of seconds >= 0 (0: after every document)");
  for (const BatchRun& r : opt.runs) r.spec.validate(cfg);
  if (opt.resume && comm.size() > 1)
    throw Error("--resume works for single-process runs only; rerun the MPI job from the start");
  const Tokenizer& tok = model.require_tokenizer();

  StatsShape shape;
  shape.n_runs = (int)opt.runs.size();
  shape.n_layers = cfg.n_layers;
  shape.n_heads = cfg.n_heads;
  shape.n_metrics = kNumRowMetrics;
  shape.n_bins = opt.n_bins;
  shape.max_tokens = opt.max_tokens;
  CorpusStats stats(shape);
  Accumulator acc(shape);
  std::vector<KeptRow> kept;  // max-heap by priority, at most keep_rows

  StatsHeader header;
  header.provenance.tool_version = version();
  header.provenance.model_path = model.recorded_path();
  header.provenance.model_config_json = cfg.source_json;
  header.provenance.weights_checksum = model.weights_checksum();
  header.provenance.device = device_name(model.device());
  header.provenance.precision = precision_name(model.precision());
  header.provenance.tokenizer = model.tokenizer() ? model.tokenizer()->source : std::string();
  header.provenance.warnings =
      run_warnings(cfg, opt.max_tokens);  // a rope_scaling override (no run passes the context)
  header.data_path = absolute_data_path(opt.data_path);
  header.window = opt.window;
  header.n_ranks = comm.size();
  for (const BatchRun& r : opt.runs) {
    header.run_names.push_back(r.name);
    header.run_specs_json.push_back(r.spec.to_json());
  }

  // Single process: the lock on -o first, so that the checkpoint a running batch is writing is not taken for an
  // unfinished one's (a --resume of it mixed two runs' rows and wrote an empty per-document table).
  std::unique_ptr<OutputLock> out_lock;
  if (comm.size() == 1) out_lock = std::make_unique<OutputLock>(opt.out_path);

  // A checkpoint of an unfinished single-process batch writing -o: without --resume it was thrown away silently
  // (hours of a batch lost to a forgotten flag), and an MPI run over the same -o left it to meet a later --resume.
  // Refused before the counting pass over the corpus.
  {
    struct stat ks {};
    const std::string ckpt = opt.out_path + ".ckpt";
    if (comm.rank() == 0 && (!opt.resume || comm.size() > 1) && ::stat(ckpt.c_str(), &ks) == 0 && ks.st_size > 0)
      throw Error("-o: an unfinished batch writing '" + opt.out_path + "' left its checkpoint '" + ckpt + "': " +
                  (comm.size() > 1 ? std::string("continue it in one process with --resume, or delete it and '") +
                                         opt.out_path + ".rows' to start again"
                                   : std::string("add --resume to continue it, or delete it and '") + opt.out_path +
                                         ".rows' to start again"));
  }

  int64_t total = 0;
  uint64_t n_skipped = 0;  // malformed lines before the last document read (rank 0's counting pass)
  if (comm.rank() == 0) {
    total = count_documents(opt.data_path, opt.on_error, opt.limit, &n_skipped);
    if (total == 0)
      throw Error("--data '" + opt.data_path + "' holds no documents" +
                  (opt.on_error == OnError::kSkip ? " (after skipping malformed lines)" : "") +
                  ": nothing to compute, nothing written");
  }

  // Where this rank's rows go: beside the output (single process, with the checkpoint), or in the job's shard
  // directory <out>.d/<token>/ (MPI).
  const bool mpi = comm.size() > 1;
  std::string shard_rel, shard_dir, rows_path, ckpt_path;
  if (mpi) {
    std::string token;
    if (comm.rank() == 0) {
      token = std::to_string((long long)std::chrono::system_clock::now().time_since_epoch().count()) + "." +
              std::to_string((long)::getpid());
      const std::string top = opt.out_path + ".d";
      ::mkdir(top.c_str(), 0777);
      const std::string d = top + "/" + token;
      if (::mkdir(d.c_str(), 0777) != 0)
        throw Error("-o: cannot create the shard directory '" + d + "': " + std::strerror(errno));
    }
    token = comm.bcast_string(token);  // also a barrier: the directory exists before anyone writes to it
    shard_rel = base_of(opt.out_path) + ".d/" + token;
    shard_dir = opt.out_path + ".d/" + token;
    rows_path = shard_dir + "/rank" + std::to_string(comm.rank()) + ".rows";
  } else {
    rows_path = opt.out_path + ".rows";
    ckpt_path = opt.out_path + ".ckpt";
  }

  const std::string key = options_key(model, opt);
  int64_t start_index = 0;
  bool resume = opt.resume;
  struct stat cs {};
  if (resume && !mpi && (::stat(ckpt_path.c_str(), &cs) != 0 || cs.st_size == 0)) {
    // Killed before its first checkpoint (one comes every --checkpoint-every seconds): its row file is there but
    // nothing to resume from, so the batch starts from the first document. (The row file as it was before this
    // run's lock made one; a kill may leave it empty, its rows in an unflushed buffer.)
    if (!out_lock->rows_existed())
      throw Error("--resume: no checkpoint '" + ckpt_path + "' (the batch finished, or never started with this -o)");
    log_warning("--resume: the batch writing '" + opt.out_path +
                "' was stopped before its first checkpoint; starting from the first document");
    resume = false;
  }
  if (resume) {
    const std::string bytes = read_file(ckpt_path);
    if (bytes.empty())
      throw Error("--resume: no checkpoint '" + ckpt_path + "' (the batch finished, or never started with this -o)");
    try {
      Cursor c{bytes};
      char magic[sizeof kCkptMagic];
      c.get(magic, sizeof magic);
      if (std::memcmp(magic, kCkptMagic, sizeof magic) != 0) throw Error("not a checkpoint");
      std::vector<char> kb;
      c.get_v(kb);
      if (std::string(kb.begin(), kb.end()) != key)
        throw Error("it was made with other options or another model: " +
                    key_difference(std::string(kb.begin(), kb.end()), key) +
                    "; rerun with the checkpoint's, or delete it and '" + rows_path + "' to start again");
      uint64_t rows_bytes = 0;
      c.get(&start_index, sizeof start_index);
      c.get(&rows_bytes, sizeof rows_bytes);
      deserialize_stats(c, stats, kept);
      // Rows appended after the checkpoint belong to documents that will run again: drop them.
      struct stat rs {};
      if (::stat(rows_path.c_str(), &rs) != 0 || (uint64_t)rs.st_size < rows_bytes)
        throw Error("the row file '" + rows_path +
                    "' is missing or shorter than the checkpoint says; delete the checkpoint and start again");
      if (::truncate(rows_path.c_str(), (off_t)rows_bytes) != 0)
        throw Error("cannot truncate the row file '" + rows_path + "': " + std::strerror(errno));
    } catch (const Error& e) {
      const std::string why = e.what();  // with what to do, when the reason did not say ("truncated")
      throw Error("--resume: checkpoint '" + ckpt_path + "': " + why +
                  (why.find("start again") == std::string::npos
                       ? "; delete it and '" + rows_path + "' to start again, without --resume"
                       : std::string()));
    }
  }
  if (!resume && !mpi) ::unlink(ckpt_path.c_str());  // a stale checkpoint must never meet a new row file
  std::FILE* rows = std::fopen(rows_path.c_str(), resume ? "ab" : "wb");
  if (!rows) throw Error("-o: cannot write '" + rows_path + "': " + std::strerror(errno));
  struct Closer {
    std::FILE*& f;
    ~Closer() {
      if (f) std::fclose(f);
    }
  } closer{rows};

  CorpusReader reader(opt.data_path, OnError::kSkip, /*quiet=*/true);  // the counting pass reported and counted
  Session session(model, opt.max_tokens, /*prefill_only=*/true);
  const auto t0 = std::chrono::steady_clock::now();
  auto last_ckpt = t0, last_progress = t0;
  int64_t done = 0, next_ckpt_index = start_index;
  uint64_t my_tokens = 0;
  Document doc;
  bool have_doc = false;
  auto report = [&](bool force) {
    if (comm.rank() != 0 || !progress) return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_progress < std::chrono::seconds(1)) return;
    last_progress = now;
    BatchProgress p;
    p.docs = mpi ? std::min(comm.handed_out(), total) : start_index + done;
    p.total_docs = total;
    p.docs_at_start = mpi ? 0 : start_index;
    p.final = force;
    p.tokens = my_tokens;
    p.elapsed_s = std::chrono::duration<double>(now - t0).count();
    progress(p);
  };
  auto checkpoint = [&](int64_t next_index) {
    if (mpi) return;
    if (std::fflush(rows) != 0) write_failed(rows_path, errno);
    (void)::fsync(::fileno(rows));
    std::string b(kCkptMagic, sizeof kCkptMagic);
    put_v(b, std::vector<char>(key.begin(), key.end()));
    const uint64_t rows_bytes = (uint64_t)std::ftell(rows);
    put(b, &next_index, sizeof next_index);
    put(b, &rows_bytes, sizeof rows_bytes);
    b += serialize_stats(stats, kept);
    write_file_atomically(ckpt_path, b,
                          {.when_full = "the batch stopped — free some space and run the same command with --resume "
                                        "(it goes on from its last checkpoint, or from the first document before one)",
                           .fsync = true});
    last_ckpt = std::chrono::steady_clock::now();
  };

  const int L = cfg.n_layers, H = cfg.n_heads;
  maybe_die(comm.rank(), 0);
  for (;;) {
    comm.serve();
    int64_t want = mpi ? comm.next_index() : start_index + done;
    if (opt.limit > 0 && want >= opt.limit) break;
    // Advance this rank's reader to document `want` (indices only rise).
    bool found = false;
    while (true) {
      if (!have_doc || doc.index < want) {
        if (!reader.next(doc)) break;
        have_doc = true;
        if (!mpi || doc.index % 64 == 0) comm.serve();
        continue;
      }
      found = doc.index == want;
      break;
    }
    if (!found) break;

    std::vector<int32_t> ids = tok.encode(doc.text, cfg.add_bos);
    const int n_total = (int)ids.size();
    std::vector<std::pair<int, int>> windows;  // (offset, length)
    for (int off = 0; off < n_total; off += opt.max_tokens) {
      windows.emplace_back(off, std::min(opt.max_tokens, n_total - off));
      if (!opt.window) break;
    }
    // Sampled rows of this document: the bottom-k hash priorities that can still enter the global sample.
    std::vector<KeptRow> cand;
    if (opt.keep_rows > 0) {
      const bool full = (int)kept.size() >= opt.keep_rows;
      const uint64_t bound = full ? kept.front().priority : ~0ull;
      for (int w = 0; w < (int)windows.size(); ++w)
        for (int l = 0; l < L; ++l)
          for (int h = 0; h < H; ++h)
            for (int row = 1; row < windows[(size_t)w].second; ++row) {
              const uint64_t p = row_priority(opt.seed, doc.index, w, l, h, row);
              if (p < bound) {
                KeptRow k;
                k.priority = p;
                k.doc = doc.index;
                k.window = w;
                k.layer = l;
                k.head = h;
                k.row = row;
                cand.push_back(std::move(k));
              }
            }
      if ((int)cand.size() > opt.keep_rows) {
        std::nth_element(cand.begin(), cand.begin() + opt.keep_rows, cand.end(), by_priority);
        cand.resize((size_t)opt.keep_rows);
      }
      for (KeptRow& k : cand) k.probs.assign((size_t)shape.n_runs * opt.max_tokens, 0.0f);
    }
    int n_tokens_doc = 0;
    for (int r = 0; r < shape.n_runs; ++r) {
      for (int w = 0; w < (int)windows.size(); ++w) {
        const auto [off, len] = windows[(size_t)w];
        std::vector<KeptRow*> wanted;
        for (KeptRow& k : cand)
          if (k.window == w) wanted.push_back(&k);
        BatchObserver obs(acc, stats, comm, r, opt.max_tokens, wanted, L, H);
        RunOptions ro;
        ro.topk_mass_k = opt.topk_mass_k;
        ro.all_logits = false;
        for (int32_t p : doc.relevant)
          if (p >= off && p < off + len) ro.relevant.push_back(p - off);
        session.reset();
        session.forward(ids.data() + off, len, opt.runs[(size_t)r].spec, ro, &obs, nullptr);
        if (r == 0) n_tokens_doc += len;
      }
    }
    DocRecord rec;
    rec.index = doc.index;
    rec.id = doc.id;
    rec.n_tokens = n_tokens_doc;
    rec.n_tokens_total = n_total;
    rec.n_windows = (int)windows.size();
    rec.head_means = acc.finish_document(stats);
    ++stats.n_docs;
    stats.n_tokens += (uint64_t)n_tokens_doc;
    my_tokens += (uint64_t)n_tokens_doc;  // once per document, however many runs went over it
    for (KeptRow& k : cand) {
      if ((int)kept.size() < opt.keep_rows) {
        kept.push_back(std::move(k));
        std::push_heap(kept.begin(), kept.end(), by_priority);
      } else if (k.priority < kept.front().priority) {
        std::pop_heap(kept.begin(), kept.end(), by_priority);
        kept.back() = std::move(k);
        std::push_heap(kept.begin(), kept.end(), by_priority);
      }
    }
    write_doc_record(rows, shape, rec, rows_path);
    ++done;
    maybe_die(comm.rank(), done);
    next_ckpt_index = doc.index + 1;
    if (!mpi && std::chrono::duration<double>(std::chrono::steady_clock::now() - last_ckpt).count() >= opt.checkpoint_s)
      checkpoint(next_ckpt_index);
    report(false);
  }
  comm.finish_queue();
  stats.n_skipped = n_skipped;  // rank 0's count stays through reduce_stats (only totals and statistics are summed)
  report(true);
  if (std::fclose(rows) != 0) {
    const int err = errno;
    rows = nullptr;
    write_failed(rows_path, err);
  }
  rows = nullptr;
  std::sort(kept.begin(), kept.end(), by_priority);

  if (!mpi) {
    write_stats_file(opt.out_path, header, stats, kept, rows_path, nullptr);
    ::unlink(ckpt_path.c_str());  // first: a kill between the two leaves rows without a checkpoint (started over)
    ::unlink(rows_path.c_str());
    out_lock->done();
    return;
  }

  // MPI: shard per rank, statistics reduced onto rank 0, per-document datasets as virtual datasets over the shards.
  const std::string shard_name = "rank" + std::to_string(comm.rank()) + ".h5";
  std::vector<int64_t> mine = write_shard(shard_dir + "/" + shard_name, header, shape, rows_path);
  ::unlink(rows_path.c_str());
  std::string idx_bytes(mine.size() * sizeof(int64_t), '\0');
  if (!mine.empty()) std::memcpy(idx_bytes.data(), mine.data(), idx_bytes.size());
  std::vector<std::string> all_idx = comm.gather_bytes(idx_bytes);
  std::vector<std::string> all_kept = comm.gather_bytes(serialize_stats(CorpusStats(), kept));
  comm.reduce_stats(stats);
  if (comm.rank() == 0) {
    std::vector<ShardInfo> shards;
    for (int r = 0; r < comm.size(); ++r) {
      ShardInfo s;
      s.file = shard_rel + "/rank" + std::to_string(r) + ".h5";
      s.indices.resize(all_idx[(size_t)r].size() / sizeof(int64_t));
      if (!s.indices.empty())  // a rank that got no document: no memcpy from / to a null pointer
        std::memcpy(s.indices.data(), all_idx[(size_t)r].data(), s.indices.size() * sizeof(int64_t));
      shards.push_back(std::move(s));
    }
    std::vector<KeptRow> merged;
    for (const std::string& b : all_kept) {
      CorpusStats empty;
      std::vector<KeptRow> part;
      Cursor c{b};
      deserialize_stats(c, empty, part);
      for (KeptRow& k : part) merged.push_back(std::move(k));
    }
    std::sort(merged.begin(), merged.end(), by_priority);
    if ((int)merged.size() > opt.keep_rows) merged.resize((size_t)opt.keep_rows);
    write_stats_file(opt.out_path, header, stats, merged, "", &shards);
    // The new file is in place: shard directories of earlier runs of this -o are no longer referenced.
    const std::string top = opt.out_path + ".d";
    const std::string token = shard_dir.substr(shard_dir.find_last_of('/') + 1);
    if (DIR* d = ::opendir(top.c_str())) {
      std::vector<std::string> old;
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n != "." && n != ".." && n != token) old.push_back(top + "/" + n);
      }
      ::closedir(d);
      for (const std::string& o : old) remove_tree(o);
    }
  }
  comm.barrier();
}

}  // namespace focal::batch
