// Replays inputs through a fuzz target without libFuzzer (a normal ctest): every file named on the command line,
// or every file in the directories named. Exit status 0 when every input ran to completion.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int run_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "replay: cannot read %s\n", p.c_str());
    return 1;
  }
  std::vector<char> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  return 0;
}

int main(int argc, char** argv) {
  int n = 0, bad = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st {};
    if (stat(argv[i], &st) != 0) continue;  // an empty regressions directory is fine
    if (S_ISDIR(st.st_mode)) {
      DIR* d = opendir(argv[i]);
      while (dirent* e = d ? readdir(d) : nullptr) {
        const std::string name = e->d_name;
        if (name == "." || name == ".." || name == ".gitkeep") continue;
        bad += run_file(std::string(argv[i]) + "/" + name);
        ++n;
      }
      if (d) closedir(d);
    } else {
      bad += run_file(argv[i]);
      ++n;
    }
  }
  std::printf("replay: %d inputs, %d unreadable\n", n, bad);
  return bad ? 1 : 0;
}
