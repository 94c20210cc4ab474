// Network models: what they share (bytes carried per link), and choosing one by name,
// as scenarios and commands offer it to the user.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/resource_model.hpp"

namespace ddlsim {

class NetworkFabric;

/// A resource model that carries transfers over the fabric's links.
class NetworkModel : public ResourceModel {
 public:
  /// Bytes each directed link (by LinkId) carried since begin(): every transfer's bytes
  /// on every link of the route it took.
  [[nodiscard]] const std::vector<double>& link_bytes() const { return link_bytes_; }

 protected:
  void reset_link_bytes(std::size_t links) { link_bytes_.assign(links, 0.0); }
  template <class Route>
  void carry(const Route& route, double bytes) {
    for (const auto l : route) link_bytes_[l.value] += bytes;
  }

 private:
  std::vector<double> link_bytes_;
};

enum class NetworkModelKind { kFlow, kAnalytical };

/// "flow" or "analytical"; nullopt for any other name.
std::optional<NetworkModelKind> parse_network_model(std::string_view name);
std::string_view network_model_name(NetworkModelKind kind);

/// A FlowNetwork or an AnalyticalNetwork over `fabric`, which must outlive it.
std::unique_ptr<NetworkModel> make_network(NetworkModelKind kind, std::string name, NetworkFabric& fabric);

}  // namespace ddlsim
