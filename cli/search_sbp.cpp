#include "cli/search.hpp"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>

#include "sim/compute_model.hpp"
#include "strategies/sbp_mcmc.hpp"

namespace ddlsim {

SbpChain transformer_layer_chain(const TransformerConfig& m, std::int64_t global_batch) {
  const std::int64_t d = m.head_dim();
  const std::int64_t qkv = (m.heads + 2 * m.kv_heads) * d;
  const bool gated = m.family == TransformerConfig::Family::kLlama;  // SwiGLU: gate and up in one
  SbpChain c;
  c.m = global_batch * m.seq;
  c.layers = {{"qkv", m.hidden, qkv, true},
              {"proj", m.heads * d, m.hidden, true},
              {gated ? "gate_up" : "fc1", m.hidden, gated ? 2 * m.ffn : m.ffn, true},
              {gated ? "down" : "fc2", m.ffn, m.hidden, true}};
  return c;
}

void sbp_search(const TrainingScenario& s, const SbpSearchOptions& o, std::ostream& out) {
  const SbpChain chain = transformer_layer_chain(s.model, o.global_batch);
  const std::vector<NodeId> devices(s.cluster.accelerators().begin(), s.cluster.accelerators().end());
  NetworkFabric fabric(s.cluster, s.catalog);
  const ComputeModel compute(s.catalog.accelerator(s.cluster.node(devices.front()).model));
  struct Row {
    std::string name;
    SbpPlan plan;
    double estimate_s, replay_s;
  };
  std::vector<Row> rows;
  auto add = [&](const std::string& name, const SbpPlan& plan) {
    rows.push_back({name, plan, sbp_cost(chain, plan, devices, fabric, compute).total(),
                    replay_sbp_plan(chain, plan, devices, fabric, compute, s.network)});
  };
  std::uint64_t evaluated = 0;
  if (o.mcmc) {
    McmcOptions mo;
    mo.seed = o.seed;
    mo.iterations = o.iterations;
    mo.network = s.network;
    const McmcResult r = mcmc_sbp_search(chain, data_parallel_plan(chain, {static_cast<int>(devices.size())}), devices,
                                         fabric, compute, mo);
    evaluated = r.replayed;
    add("mcmc", r.plan);
  } else {
    const SbpSearchResult a = autoddl_search(chain, devices, fabric, compute);
    evaluated = a.evaluated;
    add("autoddl", a.plan);
  }
  add("data-parallel", data_parallel_plan(chain, {static_cast<int>(devices.size())}));
  add("megatron", megatron_plan(chain, static_cast<int>(devices.size())));
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) { return x.replay_s < y.replay_s; });

  if (o.json) {
    nlohmann::ordered_json j;
    j["scenario"] = s.name;
    j["method"] = o.mcmc ? "mcmc" : "autoddl";
    j["rows"] = chain.m;
    j["layers"] = s.model.layers;
    j["evaluated"] = evaluated;
    nlohmann::ordered_json ranked = nlohmann::ordered_json::array();
    for (const Row& r : rows) {
      nlohmann::ordered_json e;
      e["name"] = r.name;
      e["mesh"] = r.plan.dims;
      nlohmann::ordered_json ops = nlohmann::ordered_json::object();
      for (std::size_t i = 0; i < chain.layers.size(); ++i) {
        const MatmulSignature& sig = r.plan.layers[i];
        ops[chain.layers[i].name] = to_string(sig.a) + " x " + to_string(sig.b) + " -> " + to_string(sig.c);
      }
      e["signatures"] = ops;
      e["layer_estimate_s"] = r.estimate_s;
      e["layer_step_s"] = r.replay_s;
      ranked.push_back(e);
    }
    j["ranked"] = ranked;
    out << j.dump(2) << "\n";
    return;
  }
  out << "scenario: " << s.name << " (" << s.model.name << " on " << devices.size()
      << " accelerators, network " << network_model_name(s.network) << ")\n";
  out << "searched: one layer's linear chain (";
  for (std::size_t i = 0; i < chain.layers.size(); ++i) out << (i ? ", " : "") << chain.layers[i].name;
  out << ") on " << chain.m << " rows (global batch x sequence), SBP signatures on 1-D and 2-D meshes, "
      << (o.mcmc ? "Metropolis-Hastings with the replay as cost" : "coordinate descent on the analytical cost") << "\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%4s  %-14s %-10s %16s %16s %18s\n", "rank", "name", "mesh", "estimate (ms)",
                "replay (ms)", "x layers (s)");
  out << line;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string mesh;
    for (int d : rows[i].plan.dims) mesh += (mesh.empty() ? "" : "x") + std::to_string(d);
    std::snprintf(line, sizeof line, "%4zu  %-14s %-10s %16.3f %16.3f %18.3f\n", i + 1, rows[i].name.c_str(), mesh.c_str(),
                  rows[i].estimate_s * 1e3, rows[i].replay_s * 1e3,
                  rows[i].replay_s * static_cast<double>(s.model.layers));
    out << line;
  }
  out << "\nbest: " << rows.front().name << ", " << describe_sbp_plan(chain, rows.front().plan);
  out << "\n" << evaluated << (o.mcmc ? " plans replayed" : " plans estimated")
      << ". SBP plans cover the linear layers only (not attention, norms, embedding, pipelines or memory),\n"
         "and 'ddlsim run' cannot replay them yet.\n";
}

}  // namespace ddlsim
