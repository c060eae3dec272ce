// Models by their Hugging Face name (focal/hf_cache.h): a hub cache laid out as huggingface_hub lays it out (refs/,
// snapshots/ of symlinks into blobs/), built here from the bundled model; resolution by name, revision and commit,
// the errors for what is not cached, a local directory of the same name winning (unless it holds no model),
// incomplete downloads, GGUF-only snapshots, and `focal info ORG/NAME`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>

#include "focal/error.h"
#include "focal/hf_cache.h"
#include "focal/model.h"
#include "test_util.h"

#ifndef FOCAL_CLI_PATH
#error "FOCAL_CLI_PATH must name the built focal binary"
#endif

namespace focal {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kBundled = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
const char* kCommit = "0123456789abcdef0123456789abcdef01234567";

// HUB/models--focal--tiny: refs/main -> kCommit, refs/v1 -> kCommit, snapshots/kCommit/FILE -> ../../blobs/HASH_i.
class HfCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("focal_hf_" + std::to_string(getpid()));
    fs::remove_all(root_);
    hub_ = root_ / "hub";
    const fs::path repo = hub_ / "models--focal--tiny";
    fs::create_directories(repo / "refs");
    fs::create_directories(repo / "blobs");
    fs::create_directories(repo / "snapshots" / kCommit);
    std::ofstream(repo / "refs" / "main") << kCommit;  // no newline, as huggingface_hub writes it
    std::ofstream(repo / "refs" / "v1") << kCommit << "\n";
    int i = 0;
    for (const auto& e : fs::directory_iterator(kBundled)) {
      if (!e.is_regular_file()) continue;
      const std::string blob = "blob" + std::to_string(i++);
      fs::copy_file(e.path(), repo / "blobs" / blob);
      fs::create_symlink(fs::path("../../blobs") / blob, repo / "snapshots" / kCommit / e.path().filename());
    }
    fs::create_directories(hub_ / "models--other--thing" / "snapshots" / "abc");
    setenv("HF_HUB_CACHE", hub_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("HF_HUB_CACHE");
    fs::remove_all(root_);
  }
  fs::path root_, hub_;
};

TEST(HfName, TellsNamesFromPaths) {
  for (const char* s : {"meta-llama/Llama-3.2-1B", "org/name@main", "HuggingFaceTB/SmolLM2-135M@0123abc", "a/b"})
    EXPECT_TRUE(is_hf_model_name(s)) << s;
  for (const char* s :
       {"model", "/abs/path", "./rel/dir", "a/b/c", "../x/y", "~/x", "a/", "/b", "a/b@", "a/b@x/y", "a b/c"})
    EXPECT_FALSE(is_hf_model_name(s)) << s;
}

TEST(HfName, CacheDirFollowsHuggingfaceHub) {
  unsetenv("HF_HUB_CACHE");
  setenv("HF_HOME", "/opt/hf", 1);
  EXPECT_EQ(hf_hub_cache_dir(), "/opt/hf/hub");
  setenv("HF_HUB_CACHE", "/data/hub", 1);
  EXPECT_EQ(hf_hub_cache_dir(), "/data/hub");
  unsetenv("HF_HUB_CACHE");
  unsetenv("HF_HOME");
  EXPECT_EQ(hf_hub_cache_dir(), std::string(std::getenv("HOME")) + "/.cache/huggingface/hub");
}

TEST(HfName, ACachedPathIsShownByItsName) {
  EXPECT_EQ(hf_cache_display_name("/h/hub/models--HuggingFaceTB--SmolLM2-135M/snapshots/abc123/"),
            "HuggingFaceTB/SmolLM2-135M");
  EXPECT_EQ(hf_cache_display_name("/h/hub/models--bartowski--X-GGUF/snapshots/abc/X-Q4_K_M.gguf"),
            "bartowski/X-GGUF/X-Q4_K_M");
  EXPECT_EQ(hf_cache_display_name("/models/SmolLM2-135M"), "");
  EXPECT_EQ(hf_cache_display_name("/x/snapshots/abc/models--a--b"), "");  // not the cache's layout
}

TEST_F(HfCacheTest, NameRevisionAndCommitResolveToTheSnapshot) {
  const std::string snap = (hub_ / "models--focal--tiny" / "snapshots" / kCommit).string();
  EXPECT_EQ(resolve_model_path("focal/tiny"), snap);
  EXPECT_EQ(resolve_model_path("focal/tiny@v1"), snap);
  EXPECT_EQ(resolve_model_path(std::string("focal/tiny@") + kCommit), snap);
  // A commit in upper case, a unique prefix of it, and a pull request's ref (they read as paths or were not found).
  std::string upper = kCommit;
  for (char& c : upper) c = (char)std::toupper((unsigned char)c);
  EXPECT_EQ(resolve_model_path("focal/tiny@" + upper), snap);
  EXPECT_EQ(resolve_model_path("focal/tiny@0123456"), snap);
  fs::create_directories(hub_ / "models--focal--tiny" / "refs" / "pr");
  std::ofstream(hub_ / "models--focal--tiny" / "refs" / "pr" / "1") << kCommit;
  EXPECT_TRUE(is_hf_model_name("focal/tiny@refs/pr/1"));
  EXPECT_EQ(resolve_model_path("focal/tiny@refs/pr/1"), snap);
  // A ref whose snapshot is gone says so, naming its commit.
  std::ofstream(hub_ / "models--focal--tiny" / "refs" / "gone") << "fedcba9876543210fedcba9876543210fedcba98";
  try {
    resolve_model_path("focal/tiny@gone");
    FAIL() << "a ref without its snapshot resolved";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("points at commit fedcba98"), HasSubstr("--revision gone")));
  }
  EXPECT_EQ(hf_cached_models(), (std::vector<std::string>{"focal/tiny", "other/thing"}));
  // The model loads by name and computes what the bundled directory computes (the same files).
  auto by_name = Model::load("focal/tiny", Device::kCpu);
  auto by_path = Model::load(kBundled, Device::kCpu);
  EXPECT_EQ(by_name->path(), snap);
  EXPECT_EQ(by_name->weights_checksum(), by_path->weights_checksum());
}

TEST_F(HfCacheTest, WhatIsNotCachedIsOneErrorListingCloseNames) {
  try {
    resolve_model_path("focal/tiyn");
    FAIL() << "an uncached name resolved";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("'focal/tiyn'"), HasSubstr("close to it: focal/tiny"),
                                HasSubstr("never downloads"), HasSubstr(hub_.string())));
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("other/thing")));
  }
  try {
    resolve_model_path("focal/tiny@v2");
    FAIL() << "a missing revision resolved";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("revision 'v2'"), HasSubstr(kCommit), HasSubstr("--revision v2")));
  }
  EXPECT_EQ(resolve_model_path("no/such/path"), "no/such/path");  // not a name: the loader reports it missing
}

TEST_F(HfCacheTest, ALocalDirectoryOfTheSameNameWinsAndSaysSo) {
  const fs::path cwd = fs::current_path();
  fs::create_directories(root_ / "work" / "focal");
  fs::create_directory_symlink(kBundled, root_ / "work" / "focal" / "tiny");
  fs::current_path(root_ / "work");
  std::string note;
  EXPECT_EQ(resolve_model_path("focal/tiny", &note), "focal/tiny");
  EXPECT_THAT(note, AllOf(HasSubstr("also a model in the Hugging Face cache"), HasSubstr("the path is used")));
  fs::current_path(cwd);
}

TEST_F(HfCacheTest, ALocalDirectoryWithoutAModelDoesNotHideTheCachedOne) {
  const fs::path cwd = fs::current_path();
  fs::create_directories(root_ / "work" / "focal" / "tiny");  // a run's outputs named after the model, say
  std::ofstream(root_ / "work" / "focal" / "tiny" / "capture.h5") << "x";
  fs::current_path(root_ / "work");
  std::string note;
  const std::string snap = (hub_ / "models--focal--tiny" / "snapshots" / kCommit).string();
  EXPECT_EQ(resolve_model_path("focal/tiny", &note), snap);
  EXPECT_THAT(note, AllOf(HasSubstr("without a model"), HasSubstr("cache's model is used"), HasSubstr(snap)));
  fs::current_path(cwd);
}

TEST_F(HfCacheTest, ASnapshotLinkingToAMissingBlobIsAnIncompleteDownload) {
  const fs::path snap = hub_ / "models--focal--tiny" / "snapshots" / kCommit;
  // A dangling link the loader never reads (README.md) does not refuse the model.
  fs::create_symlink(fs::path("../../blobs") / "gone", snap / "README.md");
  EXPECT_EQ(resolve_model_path("focal/tiny"), snap.string());
  // One it reads does.
  fs::remove(snap.parent_path().parent_path() / "blobs" / fs::read_symlink(snap / "config.json").filename());
  try {
    resolve_model_path("focal/tiny");
    FAIL() << "a snapshot with a dangling link resolved";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("incomplete download"), HasSubstr("links to a blob that is missing"),
                                HasSubstr("huggingface-cli download focal/tiny")));
  }
}

// An interrupted download: the weights' blob is still SHA.incomplete and not linked into the snapshot. The message
// names the model and the fix (it said "neither model.safetensors nor ... is present" about the snapshot path).
TEST_F(HfCacheTest, AnInterruptedDownloadIsNamedWithTheFix) {
  const fs::path repo = hub_ / "models--focal--tiny";
  fs::remove(repo / "snapshots" / kCommit / "model.safetensors");
  std::ofstream(repo / "blobs" / "0123abcd.incomplete") << "partial";
  try {
    resolve_model_path("focal/tiny");
    FAIL() << "a snapshot without its weights resolved";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("model 'focal/tiny'"), HasSubstr("incomplete download (it lacks its weights"),
                                HasSubstr("huggingface-cli download focal/tiny")));
  }
}

TEST_F(HfCacheTest, AGgufOnlySnapshotIsItsFileOrNamesThem) {
  const fs::path snap = hub_ / "models--gguf--one" / "snapshots" / "c1";
  fs::create_directories(snap);
  std::ofstream(snap / "model-Q4_K_M.gguf") << "GGUF";
  std::ofstream(snap / "README.md") << "readme";
  std::string note;
  EXPECT_EQ(resolve_model_path("gguf/one@c1", &note), (snap / "model-Q4_K_M.gguf").string());
  EXPECT_THAT(note, AllOf(HasSubstr("holds a GGUF file and no config.json"), HasSubstr("model-Q4_K_M.gguf")));
  std::ofstream(snap / "model-Q8_0.gguf") << "GGUF";
  try {
    resolve_model_path("gguf/one@c1");
    FAIL() << "a snapshot of two GGUF files resolved";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("2 GGUF files and no config.json"), HasSubstr("model-Q4_K_M.gguf, "),
                                HasSubstr("model-Q8_0.gguf")));
  }
}

TEST_F(HfCacheTest, FocalInfoOpensAModelByName) {
  const std::string out = (root_ / "info.txt").string(), err = (root_ / "err.txt").string();
  auto run = [&](const std::string& model) {
    const std::string cmd =
        std::string(FOCAL_CLI_PATH) + " info '" + model + "' > '" + out + "' 2> '" + err + "' < /dev/null";
    const int st = std::system(cmd.c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  ASSERT_EQ(run("focal/tiny"), 0) << slurp(err);
  EXPECT_THAT(slurp(out), HasSubstr(kCommit));  // the snapshot it resolved to
  EXPECT_EQ(run("focal/tiyn"), 1);
  EXPECT_THAT(slurp(err), AllOf(HasSubstr("close to it: focal/tiny"), HasSubstr("never downloads")));
}

}  // namespace
}  // namespace focal
