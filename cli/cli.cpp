#include "cli/cli.hpp"

#include <new>
#include <ostream>

#include "cli/commands.hpp"
#include "sim/core/errors.hpp"
#include "support/input_error.hpp"

namespace ddlsim {
namespace {

constexpr const char* kUsage = R"(ddlsim )" DDLSIM_VERSION R"( - a discrete-event simulator of distributed deep-learning training

Usage: ddlsim COMMAND [OPTIONS] [ARGS]
       ddlsim --help | --version

Commands:
  run [SCENARIO.json]   Replay every strategy of a scenario on its cluster and report step
                        time, throughput, MFU, where the time goes and peak memory.
                        Without a file, runs the embedded default scenario (a GPT on 4
                        DGX A100 servers: DP, ZeRO-3, TP+DP, PTD-P).
  topology --preset NAME
                        Build a cluster (DGX A100/H100/B200, Llama 3 RoCE, GB200 NVL72,
                        TPU pods) and describe it: links, injection bandwidth, diameter,
                        bisection bandwidth.
  collective --preset NAME
                        Time a collective (all-reduce, all-to-all, ...) over message sizes
                        on a simulated cluster, like nccl-tests: time, algbw, busbw per
                        algorithm, on the max-min flow or the analytical network model.
  workload --preset NAME | --hf-config FILE
                        Build a model (GPT, Llama, HuggingFace config, VGG, ResNet, MLP) as
                        operators and print each one's parameters, FLOPs, activation memory
                        and predicted time on an accelerator.
  search [SCENARIO.json] [--method grid]
                        Find a parallel plan for the scenario's model and cluster: every
                        Megatron-style plan that fits in memory, ranked by an estimate,
                        the best replayed; --out writes the winner as a strategy.
  sweep [SCENARIO.json] --vary PATH=V1,V2,...
                        What if: replay the scenario at every point of the product of
                        field values (cluster size, NIC, device, batch, tp/pp/dp, network
                        model) in parallel; one CSV/JSON row per point and strategy.
                        --shard K/N splits a sweep over machines; 'merge' joins the parts.
  merge PART.json...    Join the JSON parts of a sharded sweep into one table, CSV or JSON,
                        as a single run would have printed it.
  validate [--suite NAME]
                        Replay measurements (vTrain's 1,549 A100 iteration times, NCCL bus
                        bandwidths, published runs) and report the error and rank
                        correlation per model; --cost-model checks analytical estimates.
  help COMMAND          Show the help of one command (same as COMMAND --help).

Examples:
  ddlsim run                                        # the embedded default scenario
  ddlsim run scenarios/default.json --json          # machine-readable report
  ddlsim run --set cluster.nodes=8                  # what if the cluster had 8 servers?
  ddlsim run --strategy ptd-p --trace step.json     # open in ui.perfetto.dev
  ddlsim sweep --vary cluster.nodes=1,2,4,8 --csv scaling.csv   # a scaling study
  ddlsim validate --suite vtrain-multi              # predicted against measured step times
  ddlsim topology --preset dgx-h100 --nodes 32      # a DGX H100 SuperPOD scalable unit
  ddlsim collective --preset dgx-a100 --nodes 4 -b 1M -e 1G --algorithm all
  ddlsim workload --preset llama3-8b --seq 8192 --device h100-sxm

Exit status: 0 success; 1 an output file, or the report on standard output, failed
while being written once the work was done (a full disk), or an internal error; 2
invalid input (command line, scenario, an output path that cannot be written, checked
before any work), with one line on stderr saying what and where; 3 'validate --check'
found an accuracy figure worse than recorded.
)";

}  // namespace

int exit_for_current_exception(const char* command, std::ostream& err) {
  err << "ddlsim " << command << ": ";
  try {
    throw;
  } catch (const InputError& e) {
    err << e.what() << "\n";
    return kExitBadInput;
  } catch (const ReplayError& e) {
    err << "the replay failed: " << e.what() << "\n";
  } catch (const std::bad_alloc&) {
    err << "out of memory: the input needs more memory than this machine can give\n";
  } catch (const std::exception& e) {
    err << e.what() << "\n";
  }
  return kExitFailure;
}

namespace {

int dispatch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << kUsage;
    return kExitBadInput;
  }
  const std::string& cmd = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "--help" || cmd == "-h") {
    out << kUsage;
    return kExitOk;
  }
  if (cmd == "--version" || cmd == "-V") {
    out << "ddlsim " DDLSIM_VERSION "\n";
    return kExitOk;
  }
  if (cmd == "help") {
    if (rest.empty()) {
      out << kUsage;
      return kExitOk;
    }
    if (rest[0] == "run") return run_command({"--help"}, out, err);
    if (rest[0] == "topology") return topology_command({"--help"}, out, err);
    if (rest[0] == "collective") return collective_command({"--help"}, out, err);
    if (rest[0] == "workload") return workload_command({"--help"}, out, err);
    if (rest[0] == "validate") return validate_command({"--help"}, out, err);
    if (rest[0] == "search") return search_command({"--help"}, out, err);
    if (rest[0] == "sweep") return sweep_command({"--help"}, out, err);
    if (rest[0] == "merge") return merge_command({"--help"}, out, err);
    err << "ddlsim help: unknown command '" << rest[0]
        << "' (commands: run, search, sweep, merge, topology, collective, workload, validate)\n";
    return kExitBadInput;
  }
  if (cmd == "run") return run_command(rest, out, err);
  if (cmd == "topology") return topology_command(rest, out, err);
  if (cmd == "collective") return collective_command(rest, out, err);
  if (cmd == "workload") return workload_command(rest, out, err);
  if (cmd == "validate") return validate_command(rest, out, err);
  if (cmd == "search") return search_command(rest, out, err);
  if (cmd == "sweep") return sweep_command(rest, out, err);
  if (cmd == "merge") return merge_command(rest, out, err);
  err << "ddlsim: unknown command '" << cmd << "'" << (cmd.rfind('-', 0) == 0 ? " (an option before the command?)" : "")
      << "; commands: run, search, sweep, merge, topology, collective, workload, validate, help (see 'ddlsim --help')\n";
  return kExitBadInput;
}

}  // namespace

int cli_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const int status = dispatch(args, out, err);
  // A report that did not reach standard output (a full disk, a closed descriptor) is a
  // failed output like a file's: the stream drops what follows its first failed write,
  // so a partial or empty report must not pass for one with status 0.
  // (Status 1 already said what failed; bad input printed nothing there. A --check that
  // failed (3) with its report cut short becomes 1: the report is the failure to mend.)
  out.flush();
  if (!out && status != kExitBadInput && status != kExitFailure) {
    err << "ddlsim: writing standard output failed (a full disk, a closed pipe or descriptor?): the report is "
           "incomplete\n";
    return kExitFailure;
  }
  return status;
}

}  // namespace ddlsim
