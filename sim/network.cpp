#include "sim/network.hpp"

#include "sim/analytical_network.hpp"
#include "sim/flow_network.hpp"

namespace ddlsim {

std::optional<NetworkModelKind> parse_network_model(std::string_view name) {
  if (name == "flow") return NetworkModelKind::kFlow;
  if (name == "analytical") return NetworkModelKind::kAnalytical;
  return std::nullopt;
}

std::string_view network_model_name(NetworkModelKind kind) {
  return kind == NetworkModelKind::kFlow ? "flow" : "analytical";
}

std::unique_ptr<NetworkModel> make_network(NetworkModelKind kind, std::string name, NetworkFabric& fabric) {
  if (kind == NetworkModelKind::kFlow) return std::make_unique<FlowNetwork>(std::move(name), fabric);
  return std::make_unique<AnalyticalNetwork>(std::move(name), fabric);
}

}  // namespace ddlsim
