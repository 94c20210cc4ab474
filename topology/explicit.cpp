#include "topology/explicit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "sim/core/errors.hpp"
#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/strings.hpp"
#include "topology/routing.hpp"

namespace ddlsim {
namespace {

constexpr std::size_t kMaxNodes = 1u << 22;

Cluster read(const nlohmann::json& doc, const Catalog& catalog) {
  JsonObject root(doc, "");
  Cluster c;
  std::vector<std::string> names;
  std::unordered_map<std::string, std::size_t> index;
  JsonArray nodes = root.array("nodes");
  if (nodes.size() == 0) throw InputError("nodes: expected at least one node, got []");
  if (nodes.size() > kMaxNodes) throw InputError("nodes: at most 4194304 nodes, got " + std::to_string(nodes.size()));
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    JsonObject n = nodes.object(i);
    std::string name = n.string("name");
    if (name.empty()) throw InputError(n.field_path("name") + ": expected a non-empty string, got \"\"");
    const std::string kind = n.choice("kind", {"accelerator", "host", "nic", "switch"});
    std::string model = n.string_or("model", "");
    NodeKind k = NodeKind::kSwitch;
    if (kind == "accelerator") {
      if (model.empty()) throw InputError(n.field_path("model") + ": an accelerator needs a catalog model");
      try {
        (void)catalog.accelerator(model);
      } catch (const InputError& e) {
        throw InputError(n.field_path("model") + ": " + e.what());
      }
      k = NodeKind::kAccelerator;
    } else if (kind == "host") {
      k = NodeKind::kHost;
    } else if (kind == "nic") {
      k = NodeKind::kNic;
    }
    n.finish();
    if (const auto [it, fresh] = index.emplace(name, i); !fresh) {
      throw InputError(n.field_path("name") + ": '" + name + "' is already the name of nodes." + std::to_string(it->second));
    }
    names.push_back(name);
    c.add_node(k, std::move(name), std::move(model));
  }
  JsonArray links = root.array("links");
  for (std::size_t i = 0; i < links.size(); ++i) {
    JsonObject l = links.object(i);
    auto end = [&](const char* key) {
      const std::string name = l.string(key);
      const auto it = index.find(name);
      if (it == index.end()) {
        throw InputError(l.field_path(key) + ": no node named '" + name + "'" + did_you_mean(name, names));
      }
      return NodeId(static_cast<std::uint32_t>(it->second));
    };
    const NodeId a = end("a");
    const NodeId b = end("b");
    if (a == b) throw InputError(l.path() + ": joins '" + names[a.value] + "' to itself");
    std::string kind = "custom";
    double gbps = 0, latency_us = 0;
    bool from_catalog = false;
    if (l.has("link")) {
      const std::string id = l.string("link");
      try {
        const LinkSpec& spec = catalog.link(id);
        gbps = spec.bandwidth.value() / 1e9;
        latency_us = spec.latency.value() * 1e6;
        kind = id;
        from_catalog = true;
      } catch (const InputError& e) {
        throw InputError(l.field_path("link") + ": " + e.what());
      }
    }
    if (from_catalog) {
      // A catalog entry is one link; "count" bundles several into one cable (18 NVLinks).
      const std::int64_t count = l.positive_int_or("count", 1);
      if (count > 1024) throw InputError(l.field_path("count") + ": at most 1024 links in one cable, got " + std::to_string(count));
      gbps *= static_cast<double>(count);
      gbps = l.number_or("gbytes_per_s", 1e-6, 1e6, gbps);
      latency_us = l.number_or("latency_us", 0.0, 1e6, latency_us);
    } else {
      gbps = l.number("gbytes_per_s", 1e-6, 1e6);
      latency_us = l.number_or("latency_us", 0.0, 1e6, 0.0);
    }
    const double reverse = l.number_or("reverse_gbytes_per_s", 1e-6, 1e6, gbps);
    if (l.has("kind")) {
      // A kind other than "custom" decides the link's efficiency and whether it is
      // scale-up (from the catalog): a misspelt one would silently drop both.
      const std::string linked = kind;
      kind = l.string("kind");
      if (from_catalog && kind != linked) {
        throw InputError(l.field_path("kind") + ": '" + kind + "' beside link '" + linked +
                         "': a catalog link is of its own kind; give one of the two");
      }
      std::vector<std::string> ids = catalog.link_ids();
      if (kind != "custom" && std::find(ids.begin(), ids.end(), kind) == ids.end()) {
        ids.emplace_back("custom");
        throw InputError(l.field_path("kind") + ": unknown link kind '" + kind + "'" + did_you_mean(kind, ids) +
                         "; a kind names a catalog link (its efficiency applies) or is \"custom\"");
      }
    }
    l.finish();
    c.connect(a, b, BytesPerSecond(gbps * 1e9), Seconds(latency_us * 1e-6), kind, BytesPerSecond(reverse * 1e9));
  }
  root.known("tori");
  if (root.has("tori")) {
    JsonArray tori = root.array("tori");
    std::set<std::uint32_t> in_a_torus;
    for (std::size_t t = 0; t < tori.size(); ++t) {
      JsonObject o = tori.object(t);
      TorusShape shape;
      JsonArray dims = o.array("dims");
      JsonArray wrap = o.array("wrap");
      JsonArray chips = o.array("chips");
      shape.dims = dims.ints(1, 4096, "a size from 1 to 4096");
      std::size_t total = 1;
      for (int k : shape.dims) {
        total *= static_cast<std::size_t>(k);
        if (total > (std::size_t{1} << 24)) throw InputError(dims.path() + ": more than 2^24 chips");
      }
      if (dims.size() == 0) throw InputError(dims.path() + ": expected at least one dimension");
      if (wrap.size() != dims.size()) {
        throw InputError(wrap.path() + ": expected one true/false per dimension (" + std::to_string(dims.size()) + ")");
      }
      for (std::size_t d = 0; d < wrap.size(); ++d) {
        if (!wrap.at(d).is_boolean()) throw InputError(wrap.path() + "." + std::to_string(d) + ": expected true or false, got " + shown(wrap.at(d)));
        shape.wrap.push_back(wrap.at(d).get<bool>());
      }
      if (chips.size() != total) {
        throw InputError(chips.path() + ": expected " + std::to_string(total) + " chip names (the product of dims), got " +
                         std::to_string(chips.size()));
      }
      for (std::size_t i = 0; i < chips.size(); ++i) {
        const nlohmann::json& v = chips.at(i);
        const std::string where = chips.path() + "." + std::to_string(i);
        if (!v.is_string()) throw InputError(where + ": expected a node name, got " + shown(v));
        const auto it = index.find(v.get<std::string>());
        if (it == index.end()) throw InputError(where + ": no node named '" + v.get<std::string>() + "'");
        const NodeId n(static_cast<std::uint32_t>(it->second));
        if (c.node(n).kind != NodeKind::kAccelerator) throw InputError(where + ": '" + v.get<std::string>() + "' is not an accelerator");
        if (!in_a_torus.insert(n.value).second) {
          throw InputError(where + ": '" + v.get<std::string>() + "' is listed in a torus already");
        }
        shape.chips.push_back(n);
      }
      // Dimension-order routing steps to the neighbours along each dimension: the router
      // checks that their links are there, as the order of `chips` and `wrap` say.
      try {
        TorusRouter check(c, shape);
      } catch (const GraphError& e) {
        throw InputError(o.path() + ": " + e.what());
      }
      o.finish();
      c.add_torus_shape(std::move(shape));
    }
  }
  root.finish();
  try {
    c.validate();
  } catch (const GraphError& e) {
    throw InputError(e.what());
  }
  return c;
}

}  // namespace

Cluster read_explicit_topology(const nlohmann::json& doc, const Catalog& catalog, const std::string& source) {
  try {
    return read(doc, catalog);
  } catch (const InputError& e) {
    throw InputError(source + ": " + e.what());
  }
}

namespace {
// The number v to write so that reading it back (v * factor) gives exactly `si`: the file
// must reproduce the cluster bit for bit. si / factor is within a few ulps of such a v.
double exact_for_reading(double si, double factor) {
  double v = si / factor;
  for (int step = 0; step < 8 && v * factor != si; ++step) {
    v = std::nextafter(v, v * factor < si ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity());
  }
  return v * factor == si ? v : si / factor;
}
}  // namespace

std::string write_explicit_topology(const Cluster& c) {
  nlohmann::ordered_json doc;
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < c.node_count(); ++i) {
    const Node& n = c.node(NodeId(static_cast<std::uint32_t>(i)));
    nlohmann::ordered_json j{{"name", n.name}, {"kind", node_kind_name(n.kind)}};
    if (!n.model.empty()) j["model"] = n.model;
    nodes.push_back(std::move(j));
  }
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (std::size_t l = 0; l < c.link_count(); l += 2) {
    const Link& fwd = c.link(LinkId(static_cast<std::uint32_t>(l)));
    const Link& back = c.link(LinkId(static_cast<std::uint32_t>(l + 1)));
    nlohmann::ordered_json j{{"a", c.node(fwd.from).name},
                             {"b", c.node(fwd.to).name},
                             {"gbytes_per_s", exact_for_reading(fwd.bandwidth.value(), 1e9)},
                             {"latency_us", exact_for_reading(fwd.latency.value(), 1e-6)}};
    if (back.bandwidth != fwd.bandwidth) j["reverse_gbytes_per_s"] = exact_for_reading(back.bandwidth.value(), 1e9);
    j["kind"] = fwd.kind;
    links.push_back(std::move(j));
  }
  doc["nodes"] = std::move(nodes);
  doc["links"] = std::move(links);
  if (!c.tori().empty()) {
    nlohmann::ordered_json tori = nlohmann::ordered_json::array();
    for (const TorusShape& t : c.tori()) {
      nlohmann::ordered_json chips = nlohmann::ordered_json::array();
      for (NodeId n : t.chips) chips.push_back(c.node(n).name);
      tori.push_back({{"dims", t.dims}, {"wrap", t.wrap}, {"chips", std::move(chips)}});
    }
    doc["tori"] = std::move(tori);
  }
  return doc.dump(1) + "\n";
}

}  // namespace ddlsim
