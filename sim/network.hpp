// Choosing a network model by name: what scenarios and commands offer the user.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sim/core/resource_model.hpp"

namespace ddlsim {

class NetworkFabric;

enum class NetworkModelKind { kFlow, kAnalytical };

/// "flow" or "analytical"; nullopt for any other name.
std::optional<NetworkModelKind> parse_network_model(std::string_view name);
std::string_view network_model_name(NetworkModelKind kind);

/// A FlowNetwork or an AnalyticalNetwork over `fabric`, which must outlive it.
std::unique_ptr<ResourceModel> make_network(NetworkModelKind kind, std::string name, NetworkFabric& fabric);

}  // namespace ddlsim
