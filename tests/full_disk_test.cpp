// A full disk while writing a capture or a sweep: the file size limit (RLIMIT_FSIZE, through the shell's ulimit; the
// CLI ignores SIGXFSZ so the write fails with EFBIG as it would with ENOSPC) makes the write fail half-way. The
// command says "no space left on FILE", exits 1, removes its temporary, and leaves an earlier file of that name as
// it was. Figures go through focal/atomic_file.h, the writer of every file that is not HDF5 (figures, JSON,
// checkpoints, safetensors). (Batches and training checkpoints: batch_test.cpp, trainer_test.cpp.)
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "focal/atomic_file.h"
#include "focal/capture.h"
#include "focal/error.h"
#include "test_util.h"

#ifndef FOCAL_CLI_PATH
#error "FOCAL_CLI_PATH must name the built focal binary"
#endif

namespace focal {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kModel = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

struct Result {
  int rc;
  std::string err;
};

// `focal ARGS` with every file it writes limited to `kib` KiB (0: no limit); stderr kept outside `dir`.
Result focal_limited(const std::string& args, int kib, const std::string& err_path) {
  const std::string limit = kib > 0 ? "ulimit -f " + std::to_string(kib * 2) + " && " : "";  // dash: 512-byte blocks
  const std::string cmd = "true; " + limit + "OMP_NUM_THREADS=2 '" + std::string(FOCAL_CLI_PATH) + "' " + args +
                          " > /dev/null 2> '" + err_path + "'";
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), slurp(err_path)};
}

TEST(FullDisk, CaptureAndSweepFailCleanlyAndKeepTheEarlierFile) {
  const std::string base = test::make_temp_dir("full_disk");
  const std::string dir = base + "/out", err = base + "/err.txt";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  std::string prompt;
  for (int i = 0; i < 12; ++i) prompt += "the river ran past a quiet town where nobody spoke. ";
  struct Case {
    std::string what, args;
  };
  const std::vector<Case> cases = {
      {"capture", "capture '" + kModel + "' --prompt '" + prompt + "' -o '" + dir + "/c.h5'"},
      {"sweep", "sweep '" + kModel + "' --prompt '" + prompt + "' --temps 0.1:2:0.019 -o '" + dir + "/s.h5'"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string out = dir + (c.what == "capture" ? "/c.h5" : "/s.h5");
    // Without a limit the file is larger than 64 KiB, so the limit below cuts it.
    const Result full = focal_limited(c.args, 0, err);
    ASSERT_EQ(full.rc, 0) << full.err;
    ASSERT_GT(slurp(out).size(), (size_t)64 << 10);
    std::ofstream(out, std::ios::trunc) << "an earlier file";
    const Result r = focal_limited(c.args, 64, err);
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_THAT(r.err, AllOf(HasSubstr("no space left on '" + out + "'"), HasSubstr("file size limit"),
                             HasSubstr("any earlier file of that name is untouched")));
    EXPECT_EQ(slurp(out), "an earlier file");
    EXPECT_EQ(files_in(dir).size(), 1u) << "a temporary was left behind";
    std::remove(out.c_str());
  }
}

// The position-loss file of `focal eval --positions` (batch/): its writer did not hold the HDF5 lock that silences the
// library's printing, so a full disk printed pages of HDF5 diagnostics and the process crashed at exit (SIGSEGV in
// libhdf5's shutdown); now one message and exit 1, as for a capture.
TEST(FullDisk, PositionLossFileFailsCleanly) {
  const std::string base = test::make_temp_dir("full_disk_positions");
  const std::string dir = base + "/out", err = base + "/err.txt", docs = base + "/docs.txt";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  {
    std::ofstream f(docs);
    for (int d = 0; d < 3; ++d) {
      for (int i = 0; i < 20; ++i) f << "the lamp burned low over the quiet water while the boat drifted. ";
      f << "\n\n";
    }
  }
  const std::string out = dir + "/p.h5";
  const std::string args = "eval '" + kModel + "' --positions --data '" + docs + "' --max-tokens 96 --bucket 8 " +
                           "--bootstrap 10 --quiet -o '" + out + "'";
  const Result full = focal_limited(args, 0, err);
  ASSERT_EQ(full.rc, 0) << full.err;
  const size_t size = slurp(out).size();
  ASSERT_GT(size, (size_t)4 << 10);
  std::ofstream(out, std::ios::trunc) << "an earlier file";
  const Result r = focal_limited(args, (int)(size >> 11), err);  // half the file
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no space left on '" + out + "'"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("HDF5-DIAG")));
  EXPECT_EQ(slurp(out), "an earlier file");
  EXPECT_EQ(files_in(dir).size(), 1u) << "a temporary was left behind";
}

TEST(FullDisk, FigureFailsCleanlyAndKeepsTheEarlierFile) {
  const std::string base = test::make_temp_dir("full_disk_figure");
  const std::string dir = base + "/out", err = base + "/err.txt", cap = base + "/c.h5";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  const Result c =
      focal_limited("capture '" + kModel + "' --prompt 'the river ran past a quiet town' -o '" + cap + "'", 0, err);
  ASSERT_EQ(c.rc, 0) << c.err;
  const std::string out = dir + "/f.png";
  const std::string args = "figure grid '" + cap + "' --dpi 300 -o '" + out + "'";
  const Result full = focal_limited(args, 0, err);
  ASSERT_EQ(full.rc, 0) << full.err;
  ASSERT_GT(slurp(out).size(), (size_t)16 << 10);  // so the limit below cuts it
  std::ofstream(out, std::ios::trunc) << "an earlier file";
  const Result r = focal_limited(args, 16, err);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_THAT(r.err, AllOf(HasSubstr("no space left on '" + out + "'"), HasSubstr("file size limit"),
                           HasSubstr("any earlier file of that name is untouched")));
  EXPECT_EQ(slurp(out), "an earlier file");
  EXPECT_EQ(files_in(dir).size(), 1u) << "a temporary was left behind";
}

// export and init write a whole model directory: on a full disk (here: the safetensors past the limit) a new
// directory is not created at all (a half-written one without config.json blocked the rerun: "not empty"), and
// --force over an existing model leaves it as it was (not new weights under its old config.json).
TEST(FullDisk, ExportAndInitWriteAWholeModelDirectoryOrNone) {
  const std::string base = test::make_temp_dir("full_disk_export");
  const std::string err = base + "/err.txt", fresh = base + "/fresh", kept = base + "/kept";
  Result r = focal_limited("export '" + kModel + "' '" + fresh + "'", 1024, err);
  EXPECT_EQ(r.rc, 1) << r.err;
  // Named by the directory asked for (it named the internal stage, FRESH.tmp.PID/model.safetensors).
  EXPECT_THAT(r.err, HasSubstr("no space left on '" + fresh + "/model.safetensors'"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr(".tmp.")));
  EXPECT_EQ(files_in(base), (std::vector<std::string>{"err.txt"})) << "a half-written directory or its stage";
  ASSERT_EQ(focal_limited("export '" + kModel + "' '" + fresh + "'", 0, err).rc, 0) << slurp(err);  // then it runs
  ASSERT_EQ(focal_limited("init '" + kept + "' --attn focal --temp 0.3", 0, err).rc, 0) << slurp(err);
  const std::string config = slurp(kept + "/config.json"), weights = slurp(kept + "/model.safetensors");
  std::ofstream(kept + "/notes.txt") << "mine";
  for (const std::string& args : {"export '" + kModel + "' '" + kept + "' --force --dtype F32",
                                  "init '" + kept + "' --force --seed 7 --layers 8"}) {
    r = focal_limited(args, 1024, err);
    EXPECT_EQ(r.rc, 1) << args << ": " << r.err;
    EXPECT_EQ(slurp(kept + "/config.json"), config) << args;
    EXPECT_EQ(slurp(kept + "/model.safetensors"), weights) << args;
    EXPECT_EQ(files_in(base).size(), 3u) << args << ": a stage left beside it";
  }
  // Done whole: the files replaced, another file of the directory kept.
  ASSERT_EQ(focal_limited("export '" + kModel + "' '" + kept + "' --force", 0, err).rc, 0) << slurp(err);
  EXPECT_EQ(slurp(kept + "/config.json"), slurp(fresh + "/config.json"));
  EXPECT_EQ(slurp(kept + "/notes.txt"), "mine");
  // A link to an empty directory: the directory gets the model, the link stays a link.
  ASSERT_EQ(std::system(("mkdir '" + base + "/real' && ln -s real '" + base + "/link'").c_str()), 0);
  ASSERT_EQ(focal_limited("export '" + kModel + "' '" + base + "/link'", 0, err).rc, 0) << slurp(err);
  struct stat ls {};
  ASSERT_EQ(::lstat((base + "/link").c_str(), &ls), 0);
  EXPECT_TRUE(S_ISLNK(ls.st_mode));
  EXPECT_EQ(slurp(base + "/real/config.json"), slurp(fresh + "/config.json"));
}

// A model directory copied with its relative tokenizer link (cp -r of a bundled model): the link to nothing is
// named, where the model read as having no tokenizer and export wrote one without.
TEST(OutputPaths, ALinkToNothingInAModelIsNamed) {
  const std::string base = test::make_temp_dir("dangling_tokenizer"), copy = base + "/copy", err = base + "/err.txt";
  ASSERT_EQ(std::system(("cp -r '" + kModel + "' '" + copy + "'").c_str()), 0);  // keeps ../tokenizer.model
  for (const std::string& args : {"info '" + copy + "'", "export '" + copy + "' '" + base + "/out'"}) {
    const Result r = focal_limited(args, 0, err);
    EXPECT_EQ(r.rc, 1) << args;
    EXPECT_THAT(r.err, AllOf(HasSubstr("'" + copy +
                                       "/tokenizer.model' is a symbolic link to '../tokenizer.model', "
                                       "which does not exist")))
        << args;
  }
  // -o with a name that fits only without the writers' temporary suffix: said so, before the model runs.
  const std::string long_name = base + "/" + std::string(250, 'b') + ".h5";
  const Result r = focal_limited("capture '" + kModel + "' --prompt hi -o '" + long_name + "'", 0, err);
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("the name is too long for the file system with the temporary suffix"));
}

// -o at a FIFO, a directory or a device: the rename into place would replace the node itself with a plain file (as
// root, `-o /dev/null` would have replaced /dev/null). Refused before the model runs, naming what is there; nothing
// is written and the node stays. A symbolic link is followed: its file gets the capture and the link stays a link.
TEST(OutputPaths, NodesThatAreNotFilesAreRefusedAndLinksFollowed) {
  const std::string base = test::make_temp_dir("output_nodes");
  const std::string dir = base + "/out", err = base + "/err.txt";
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "/sub'").c_str()), 0);
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0644), 0);
  const std::string capture = "capture '" + kModel + "' --prompt 'the river ran' -o ";
  for (const auto& [node, what] : std::vector<std::pair<std::string, std::string>>{
           {dir + "/fifo", "is a FIFO"}, {dir + "/sub", "is a directory"}, {"/dev/null", "is a device"}}) {
    SCOPED_TRACE(node);
    const Result r = focal_limited(capture + "'" + node + "'", 0, err);
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_THAT(r.err, AllOf(HasSubstr("-o: '" + node + "' " + what), HasSubstr("give a file path")));
  }
  struct stat st;
  ASSERT_EQ(lstat((dir + "/fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  // The library's own writer refuses the same (a figure, JSON, ...), before it opens a temporary.
  EXPECT_THROW(write_file_atomically(dir + "/fifo", "x"), Error);
  EXPECT_THROW(write_file_atomically(dir + "/sub", "x"), Error);
  // A link (relative, to a file that does not exist yet) is followed.
  ASSERT_EQ(symlink("target.h5", (dir + "/link.h5").c_str()), 0);
  const Result r = focal_limited(capture + "'" + dir + "/link.h5'", 0, err);
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_EQ(lstat((dir + "/link.h5").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced";
  EXPECT_NO_THROW(read_capture(dir + "/target.h5"));
  std::vector<std::string> names = files_in(dir);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"fifo", "link.h5", "sub", "target.h5"})) << "a temporary was left";
}

// What an interrupted command's handler does (the CLI's for SIGINT / SIGTERM / SIGHUP): every temporary registered
// while it is written is unlinked; one whose write has finished (its PendingTemporary gone) is not touched.
TEST(OutputPaths, PendingTemporariesAreRemovedOnRequest) {
  const std::string base = test::make_temp_dir("pending_tmp");
  const std::string a = base + "/a.h5.tmp.1", b = base + "/b.h5.tmp.1", done = base + "/done.tmp";
  for (const std::string& p : {a, b, done}) std::ofstream(p) << "partial";
  { const PendingTemporary finished(done); }
  {
    const PendingTemporary pa(a), pb(b);
    remove_pending_temporaries();
    EXPECT_NE(access(a.c_str(), F_OK), 0);
    EXPECT_NE(access(b.c_str(), F_OK), 0);
  }
  EXPECT_EQ(access(done.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace focal
