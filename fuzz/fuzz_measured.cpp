// libFuzzer harness: arbitrary bytes as a file of your own measurements (`ddlsim
// validate --measured FILE.csv`), read beside a small training scenario and its
// HuggingFace file written once into a folder of the harness's own. Only InputError may
// come out of reading; an accepted file's cases replay (at most 4 of them, on two
// threads) and are tabled, and each case's scenario, as --case prints it, reads back.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>

#include "cli/training.hpp"
#include "cli/validation.hpp"
#include "support/input_error.hpp"

namespace {

// The harness's folder, removed when the process exits.
struct Folder {
  std::filesystem::path dir;
  Folder() : dir(std::filesystem::temp_directory_path() / ("ddlsim_fuzz_measured_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir / "sub");
    std::ofstream(dir / "sub" / "gpt.json")
        << R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 128, "n_head": 4, "n_positions": 128, "vocab_size": 1000})";
    std::ofstream(dir / "sub" / "t.json")
        << R"({"name": "t", "cluster": {"preset": "dgx-a100"}, "workload": {"hf_config": "gpt.json"},
              "strategies": [{"name": "dp", "global_batch": 16, "micro_batch": 2},
                             {"name": "tp2", "tp": 2, "global_batch": 16, "micro_batch": 2}],
              "simulation": {"network": "analytical"}})";
  }
  ~Folder() {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
};

const std::filesystem::path& folder() {
  static const Folder f;
  return f.dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Files inside the harness's folder only: no way up, no absolute path (a device file
  // such as /dev/zero would only measure the machine).
  if (text.find("..") != std::string::npos || text.find('/') == 0 || text.find("\n/") != std::string::npos ||
      text.find("\"/") != std::string::npos) {
    return 0;
  }
  const std::filesystem::path csv = folder() / "m.csv";
  std::ofstream(csv, std::ios::binary) << text;
  try {
    std::vector<ddlsim::ValidationCase> cases = ddlsim::measured_cases(csv.string());
    if (cases.empty() || cases.size() > 4) return 0;
    for (const auto& c : cases) (void)ddlsim::read_training_scenario(nlohmann::json::parse(c.reproduce), "");
    ddlsim::run_validation(cases, std::nullopt, 2);  // two threads, as validate runs them
    (void)ddlsim::accuracy_table(cases);
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
