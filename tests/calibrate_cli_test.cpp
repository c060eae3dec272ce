// End-to-end tests of `focal calibrate` and of temperature files in the other commands: a calibration of the bundled
// model writes the file, its checkpoint and a training log that `focal figure training` draws; capture and batch
// take calibrated:FILE; bad data, a bad granularity and a file for another model each fail with one message and the
// documented exit code, writing nothing.
#include <algorithm>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "focal/calibrate.h"
#include "test_util.h"

#ifndef FOCAL_CLI_PATH
#error "FOCAL_CLI_PATH must name the built focal binary"
#endif

namespace focal {
namespace {

struct CliRun {
  int rc = -1;
  std::string out;  // stdout and stderr
};

CliRun focal_cli(const std::string& args) {
  CliRun r;
  const std::string cmd = std::string(FOCAL_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

const std::string kModel = std::string(FOCAL_SOURCE_DIR) + "/assets/models/standard";

// A few kB of plain English: enough windows of 32 tokens for a short run.
std::string write_text(const std::string& dir) {
  std::string path = dir + "/text.txt";
  std::ofstream f(path);
  for (int i = 0; i < 12; ++i)
    f << "The old house stood at the end of the lane, and every evening the keeper lit the lamp by the door. "
         "Children passed it on their way home from school and counted the windows that were still dark. "
         "In winter the snow lay deep on the roof, and the smoke rose straight into the cold air.\n\n";
  return path;
}

TEST(CalibrateCli, WritesTheFileCheckpointAndALogThatOtherCommandsTake) {
  const std::string dir = test::make_temp_dir("calibcli");
  const std::string text = write_text(dir), out = dir + "/temps.json";
  const CliRun r = focal_cli("calibrate " + kModel + " --data " + text + " -o " + out +
                             " --granularity layer --steps 4 --eval-every 2 --seq-len 32 --batch 2 --val-windows 2");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("held-out loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ETA"), std::string::npos) << r.out;
  ASSERT_TRUE(exists(out));
  EXPECT_FALSE(exists(out + ".ckpt.json"));  // removed once the run completes: the same command runs again
  EXPECT_TRUE(exists(dir + "/temps.log.h5"));
  const TempFile f = read_temp_file(out);
  EXPECT_EQ(f.granularity, CalibGranularity::kLayer);
  EXPECT_EQ(f.n_layers, 4);
  EXPECT_EQ(f.steps, 4);
  // The log draws as a training log.
  const CliRun fig = focal_cli("figure training " + dir + "/temps.log.h5 -o " + dir + "/log.png");
  EXPECT_EQ(fig.rc, 0) << fig.out;
  // capture and batch take the file.
  const CliRun cap = focal_cli("capture " + kModel + " --prompt 'The keeper lit the lamp.' --temp calibrated:" + out +
                               " --compare standard --store metrics -o " + dir + "/cap.h5");
  EXPECT_EQ(cap.rc, 0) << cap.out;
  EXPECT_TRUE(exists(dir + "/cap.h5"));
  // batch names the run by its item, not by the overrides the file stands for.
  const CliRun bat = focal_cli("batch " + kModel + " --data " + text + " --runs standard,calibrated:" + out +
                               " --max-tokens 32 --limit 2 -o " + dir + "/stats.h5");
  EXPECT_EQ(bat.rc, 0) << bat.out;
  EXPECT_NE(bat.out.find("runs standard calibrated:" + out), std::string::npos) << bat.out;
  // inspect reads the temperature file and its log (it took captures, sweeps and stats files only); the numbers are
  // the file's (oracle: read_temp_file)
  const CliRun it = focal_cli("inspect " + out);
  ASSERT_EQ(it.rc, 0) << it.out;
  EXPECT_NE(it.out.find("temperature file " + out + ": layer granularity, 4 layers"), std::string::npos) << it.out;
  char loss[64];
  std::snprintf(loss, sizeof loss, "held-out loss %.5f -> %.5f", f.val_loss_init, f.val_loss);
  EXPECT_NE(it.out.find(loss), std::string::npos) << it.out;
  {  // one t per layer (not the heads' repeats), the median of an even count the mean of the middle two
    std::vector<double> lt;
    lt.reserve((size_t)f.n_layers);
    for (int l = 0; l < f.n_layers; ++l) lt.push_back(f.focal_temp[(size_t)l * f.n_heads]);
    std::sort(lt.begin(), lt.end());
    ASSERT_EQ(lt.size(), 4u);
    char line[128];
    std::snprintf(line, sizeof line, "t over the layers: min %.4g, median %.4g, max %.4g", lt[0], 0.5 * (lt[1] + lt[2]),
                  lt[3]);
    EXPECT_NE(it.out.find(line), std::string::npos) << line << "\n" << it.out;
  }
  const CliRun il = focal_cli("inspect " + dir + "/temps.log.h5");
  ASSERT_EQ(il.rc, 0) << il.out;
  EXPECT_NE(il.out.find("calibration log"), std::string::npos) << il.out;
  EXPECT_NE(il.out.find("t, mean over heads, at the last evaluation"), std::string::npos) << il.out;
  EXPECT_EQ(il.out.find("nan"), std::string::npos) << "step 0 has no training loss or |g|: '-'\n" << il.out;
  // A sweep of a layer file: every layer has its own t, so the swept t changes nothing; the refusal names the file
  // and what a sweep takes (it said "the setting given is standard", exit 2).
  const CliRun sw =
      focal_cli("sweep " + kModel + " --prompt 'The keeper lit the lamp.' --temp calibrated:" + out + " --temps 0.5,1");
  EXPECT_EQ(sw.rc, 1) << sw.out;
  EXPECT_NE(sw.out.find("the temperature file '" + out + "'"), std::string::npos) << sw.out;
  EXPECT_NE(sw.out.find("leave --temp out"), std::string::npos) << sw.out;
  // Again: the finished run left no checkpoint, so the same command runs again and gives the same file (it was
  // refused, "continue it with --resume", and --resume then said the run was at its last step).
  const CliRun same = focal_cli("calibrate " + kModel + " --data " + text + " -o " + out +
                                " --granularity layer --steps 4 --eval-every 2 --seq-len 32 --batch 2 --val-windows 2");
  ASSERT_EQ(same.rc, 0) << same.out;
  EXPECT_EQ(read_temp_file(out).focal_temp, f.focal_temp);
  // The success line's command pastes into a shell whatever the path holds.
  const std::string spaced = dir + "/my temps.json";
  const CliRun again =
      focal_cli("calibrate " + kModel + " --data " + text + " -o '" + spaced +
                "' --granularity layer --steps 4 --eval-every 2 --seq-len 32 --batch 2 --val-windows 2");
  ASSERT_EQ(again.rc, 0) << again.out;
  EXPECT_NE(again.out.find("apply with --temp 'calibrated:" + spaced + "'"), std::string::npos) << again.out;
  EXPECT_EQ(read_temp_file(spaced).focal_temp, f.focal_temp);
  // An unwritable -o is refused before the model loads (it failed after the first step).
  const CliRun bad = focal_cli("calibrate " + kModel + " --data " + text + " -o " + dir + "/no/such/dir/t.json");
  EXPECT_EQ(bad.rc, 1) << bad.out;
  EXPECT_NE(bad.out.find("-o: cannot write"), std::string::npos) << bad.out;
  EXPECT_EQ(bad.out.find(" tokens of "), std::string::npos) << "it read the data first: " << bad.out;
  // generate with the file on other weights of the same shape: one error and nothing on stdout (it printed the
  // prompt, then refused the file).
  const CliRun other = focal_cli("generate " + std::string(FOCAL_SOURCE_DIR) +
                                 "/assets/models/focal-t0.4 --prompt 'The keeper lit' -n 3 --temp calibrated:" + out);
  EXPECT_EQ(other.rc, 1);
  EXPECT_EQ(other.out.rfind("focal generate: error: temperature file", 0), 0u)
      << "printed before the refusal: " << other.out;
}

// tau-proj: the file holds each layer's projection; capture, generate and batch run it as mode learned; inspect shows
// the run's setting with the weights summarised, not 4 x 192 numbers.
TEST(CalibrateCli, TauProjFileRunsAsLearnedEverywhere) {
  const std::string dir = test::make_temp_dir("calibclitau");
  const std::string text = write_text(dir), out = dir + "/tau.json";
  const CliRun r = focal_cli("calibrate " + kModel + " --data " + text + " -o " + out +
                             " --granularity tau-proj --steps 4 --eval-every 2 --seq-len 32 --batch 2 --val-windows 2");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("mean t = tau / sqrt(d_head) over the held-out tokens"), std::string::npos) << r.out;
  const TempFile f = read_temp_file(out);
  ASSERT_EQ(f.granularity, CalibGranularity::kTauProj);
  ASSERT_TRUE(f.tau_proj);
  EXPECT_EQ(f.tau_proj->weight.size(), (size_t)f.n_layers * f.hidden);
  const CliRun cap = focal_cli("capture " + kModel + " --prompt 'The keeper lit the lamp.' --temp calibrated:" + out +
                               " --store metrics -o " + dir + "/cap.h5");
  ASSERT_EQ(cap.rc, 0) << cap.out;
  const CliRun ins = focal_cli("inspect " + dir + "/cap.h5");
  EXPECT_EQ(ins.rc, 0) << ins.out;
  EXPECT_NE(ins.out.find("\"mode\":\"learned\""), std::string::npos) << ins.out;
  EXPECT_NE(ins.out.find("\"weight\":\"[4 x " + std::to_string(f.hidden) + " values]\""), std::string::npos) << ins.out;
  EXPECT_LT(ins.out.size(), 20000u);
  const CliRun gen = focal_cli("generate " + kModel + " --prompt 'The keeper' -n 4 --temp calibrated:" + out);
  EXPECT_EQ(gen.rc, 0) << gen.out;
  const CliRun bat = focal_cli("batch " + kModel + " --data " + text + " --runs standard,calibrated:" + out +
                               " --max-tokens 32 --limit 2 -o " + dir + "/stats.h5");
  EXPECT_EQ(bat.rc, 0) << bat.out;
  // inspect of the stats file summarises the file's setting as capture inspect does (it printed every weight)
  const CliRun bins = focal_cli("inspect " + dir + "/stats.h5");
  EXPECT_EQ(bins.rc, 0) << bins.out;
  EXPECT_NE(bins.out.find("\"weight\":\"[4 x " + std::to_string(f.hidden) + " values]\""), std::string::npos)
      << bins.out;
  EXPECT_LT(bins.out.size(), 20000u);
  // A sweep runs focal attention at each t: the projections would be dropped while the file recorded them as the
  // swept setting (the sweep ran plain focal attention and named it calibrated:FILE).
  const CliRun sw =
      focal_cli("sweep " + kModel + " --prompt 'The keeper lit the lamp.' --temps 0.3,0.5 --temp calibrated:" + out +
                " -o " + dir + "/sweep.h5");
  EXPECT_EQ(sw.rc, 1) << sw.out;
  EXPECT_NE(sw.out.find("is learned attention (a tau-proj file's projections"), std::string::npos) << sw.out;
  EXPECT_FALSE(exists(dir + "/sweep.h5"));
}

TEST(CalibrateCli, BadInputFailsWithOneMessage) {
  const std::string dir = test::make_temp_dir("calibclibad");
  const std::string text = write_text(dir);
  std::ofstream(dir + "/empty.txt") << "\n";
  CliRun r = focal_cli("calibrate " + kModel + " --data " + dir + "/empty.txt -o " + dir + "/t.json");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("empty.txt' is empty"), std::string::npos) << r.out;
  std::ofstream(dir + "/latin1.txt") << "The caf\xe9 on the corner.\nA second line.\n";  // Latin-1, not UTF-8
  r = focal_cli("calibrate " + kModel + " --data " + dir + "/latin1.txt -o " + dir + "/t.json");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("latin1.txt' is not UTF-8 text: byte 0xe9 at offset 7 (line 1)"), std::string::npos) << r.out;
  r = focal_cli("calibrate " + kModel + " --data " + text + " -o " + dir + "/t.json --seq-len 1000");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("tokens; calibration needs at least 2 x seq_len"), std::string::npos) << r.out;
  r = focal_cli("calibrate " + kModel + " --data " + text + " -o " + dir + "/t.json --granularity block");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("'block' is not a granularity"), std::string::npos) << r.out;
  r = focal_cli("calibrate " + kModel + " -o " + dir + "/t.json");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_FALSE(exists(dir + "/t.json"));
  EXPECT_EQ(focal_cli("calibrate --help").rc, 0);
  // Option values and the checkpoint are checked before the model loads (a model that is not there is not reached),
  // each error naming the option as given.
  const std::string no_model = dir + "/no-such-model";
  for (const auto& [opts, want] : std::vector<std::pair<std::string, std::string>>{
           {"--val-frac 2", "--val-frac: val_frac = 2 must be in (0, 1)"},
           {"--val-windows 0", "--val-windows: val_windows = 0 must be positive"},
           {"--init-temp 0", "--init-temp: init_temp = 0"},
           {"--steps 0", "--steps: steps = 0 must be positive"},
           {"--resume", "--resume: '" + dir + "/t.json.ckpt.json' does not exist"}}) {
    r = focal_cli("calibrate " + no_model + " --data " + text + " -o " + dir + "/t.json " + opts);
    EXPECT_EQ(r.rc, 1) << opts << ": " << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << opts << ": " << r.out;
    EXPECT_EQ(r.out.find("no-such-model"), std::string::npos) << opts << ": " << r.out;
  }
  // Device and precision: a typo is named as one (it read "runs on the CPU only"), cuda and fast are refused for
  // what calibrate is (fast's advice was "choose device cuda", which calibrate refuses); all usage errors.
  for (const auto& [opts, want] : std::vector<std::pair<std::string, std::string>>{
           {"--device bogus", "--device: unknown device 'bogus'"},
           {"--device cuda", "--device cuda: calibration runs on the CPU only"},
           {"--precision fast", "--precision fast: calibration runs on the CPU, which computes exactly"}}) {
    r = focal_cli("calibrate " + no_model + " --data " + text + " -o " + dir + "/t.json " + opts);
    EXPECT_EQ(r.rc, 2) << opts << ": " << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << opts << ": " << r.out;
  }
  // A file for another model: the recall model has 2 layers of 4 heads, the file 4 of 6.
  const std::string out = dir + "/temps.json";
  ASSERT_EQ(focal_cli("calibrate " + kModel + " --data " + text + " -o " + out +
                      " --steps 2 --eval-every 2 --seq-len 32 --batch 1 --val-windows 1")
                .rc,
            0);
  r = focal_cli("capture " + std::string(FOCAL_SOURCE_DIR) + "/assets/models/recall-standard --prompt 'a b c' --temp " +
                "calibrated:" + out + " -o " + dir + "/cap.h5");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("was calibrated for another model: n_layers 4 (file) vs 2 (this model)"), std::string::npos)
      << r.out;
  EXPECT_FALSE(exists(dir + "/cap.h5"));
}

}  // namespace
}  // namespace focal
