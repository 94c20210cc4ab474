#include "topology/catalog.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "support/input_error.hpp"
#include "support/json_reader.hpp"
#include "support/strings.hpp"
#include "topology/catalog_data.hpp"

namespace ddlsim {
namespace {

constexpr double kGB = 1e9;

AcceleratorSpec read_accelerator(const std::string& id, JsonObject& o) {
  AcceleratorSpec a;
  a.id = id;
  a.name = o.string("name");
  JsonObject tflops = o.object("tflops");
  bool any = false;
  for (std::size_t d = 0; d < kDtypeNames.size(); ++d) {
    const std::string key(kDtypeNames[d]);
    tflops.known(key);
    if (!tflops.has(key)) continue;
    a.peak[d] = FlopsPerSecond(tflops.number(key, 1e-6, 1e6) * 1e12);
    any = true;
  }
  tflops.finish();
  if (!any) throw InputError(tflops.path() + ": expected at least one of fp32, tf32, bf16, fp16, fp8");
  // Capacity in decimal or binary units, exactly one of them: NVIDIA's "80GB" parts hold
  // 80 GiB (the driver reports 81920 MiB on an A100 80GB), so binary is the usual truth.
  o.known("memory_gb");
  o.known("memory_gib");
  const bool gb = o.has("memory_gb");
  if (gb == o.has("memory_gib"))
    throw InputError(o.path() + ": give the memory capacity as exactly one of memory_gb (10^9 bytes) or memory_gib (2^30 bytes)" +
                     (gb ? ", not both" : ""));
  // Whole bytes (79.65 GiB is not), so that a report's fits_in_memory is what its
  // whole-byte peak and capacity say.
  a.memory = Bytes(std::round(gb ? o.number("memory_gb", 1e-6, 1e6) * kGB : o.number("memory_gib", 1e-6, 1e6) * kGiB));
  a.memory_source = o.string_or("memory_source", "");
  a.context_memory = Bytes(std::round(o.number_or("context_mib", 0.0, 1e6, 0.0) * kMiB));
  a.communicator_memory = Bytes(std::round(o.number_or("communicator_mib", 0.0, 1e6, 0.0) * kMiB));
  a.runtime_memory_source = o.string_or("runtime_memory_source", "");
  a.memory_bandwidth = BytesPerSecond(o.number("memory_gbytes_per_s", 1e-6, 1e6) * kGB);
  a.scale_up = o.string("scale_up");
  a.scale_up_links = static_cast<int>(o.positive_int("scale_up_links"));
  if (a.scale_up_links > 1024) throw InputError(o.field_path("scale_up_links") + ": at most 1024, got " + std::to_string(a.scale_up_links));
  const std::int64_t sms = o.positive_int_or("sms", 0);
  if (sms > 100000) throw InputError(o.field_path("sms") + ": at most 100000, got " + std::to_string(sms));
  a.sms = static_cast<int>(sms);
  o.known("sms_source");
  a.source = o.string("source");
  if (a.source.empty()) throw InputError(o.field_path("source") + ": expected a non-empty string naming the source");
  o.finish();
  return a;
}

LinkSpec read_link(const std::string& id, JsonObject& o) {
  LinkSpec l;
  l.id = id;
  l.name = o.string("name");
  l.bandwidth = BytesPerSecond(o.number("gbytes_per_s", 1e-6, 1e6) * kGB);
  l.latency = Seconds(o.number("latency_us", 0.0, 1e6) * 1e-6);
  l.source = o.string("source");
  if (l.source.empty()) throw InputError(o.field_path("source") + ": expected a non-empty string naming the source");
  l.latency_source = o.string_or("latency_source", "");
  l.efficiency = o.number_or("efficiency", 1e-3, 1.0, 1.0);
  l.efficiency_source = o.string_or("efficiency_source", "");
  l.ring_overhead = o.number_or("ring_overhead", 0.0, 10.0, 0.0);
  l.ring_overhead_source = o.string_or("ring_overhead_source", "");
  if (o.has("ll_latency_us")) l.ll_latency = Seconds(o.number("ll_latency_us", 0.0, 1e6) * 1e-6);
  l.ll_latency_source = o.string_or("ll_latency_source", "");
  l.ll_transport_latency = Seconds(o.number_or("ll_transport_latency_us", 0.0, 1e6, 0.0) * 1e-6);
  l.ll_transport_latency_source = o.string_or("ll_transport_latency_source", "");
  l.transport_latency = Seconds(o.number_or("transport_latency_us", 0.0, 1e6, 0.0) * 1e-6);
  l.transport_latency_source = o.string_or("transport_latency_source", "");
  if (o.has("ll_bus_gbytes_per_s")) l.ll_bus_bandwidth = BytesPerSecond(o.number("ll_bus_gbytes_per_s", 1e-6, 1e6) * kGB);
  l.ll_bus_bandwidth_source = o.string_or("ll_bus_bandwidth_source", "");
  o.finish();
  return l;
}

template <class Map>
const auto& find_entry(const Map& map, std::string_view id, const char* what) {
  const auto it = map.find(id);
  if (it != map.end()) return it->second;
  std::vector<std::string> ids;
  for (const auto& [k, v] : map) ids.push_back(k);
  std::string list;
  for (const auto& k : ids) list += (list.empty() ? "" : ", ") + k;
  throw InputError(std::string("unknown ") + what + " '" + std::string(id) + "'" + did_you_mean(id, ids) +
                   "; the catalog has: " + list);
}

}  // namespace

Catalog Catalog::builtin() {
  Catalog c;
  c.doc_ = std::string(kCatalogJson);
  c.parse("catalog.json");
  return c;
}

void Catalog::parse(const std::string& source) {
  const nlohmann::json doc = parse_json(doc_, source);
  JsonObject root(doc, "");
  root.string_or("about", "");
  std::map<std::string, AcceleratorSpec, std::less<>> accelerators;
  std::map<std::string, LinkSpec, std::less<>> links;
  {
    JsonObject group = root.object("links");
    for (const auto& item : doc.at("links").items()) {
      JsonObject o = group.object(item.key());
      links.emplace(item.key(), read_link(item.key(), o));
    }
  }
  {
    JsonObject group = root.object("accelerators");
    for (const auto& item : doc.at("accelerators").items()) {
      JsonObject o = group.object(item.key());
      AcceleratorSpec a = read_accelerator(item.key(), o);
      if (links.find(a.scale_up) == links.end()) {
        std::vector<std::string> ids;
        for (const auto& [k, v] : links) ids.push_back(k);
        throw InputError(source + ": accelerators." + item.key() + ".scale_up: no link '" + a.scale_up +
                         "' in the catalog" + did_you_mean(a.scale_up, ids));
      }
      accelerators.emplace(item.key(), std::move(a));
    }
  }
  root.finish();
  accelerators_ = std::move(accelerators);
  links_ = std::move(links);
}

void Catalog::merge(const nlohmann::json& patch, const std::string& source) {
  try {
    merge_checked(patch, source);
  } catch (const InputError& e) {
    const std::string what = e.what();
    throw InputError(what.rfind(source, 0) == 0 ? what : source + ": " + what);
  }
}

void Catalog::merge_checked(const nlohmann::json& patch, const std::string& source) {
  JsonObject root(patch, "");
  root.string_or("about", "");
  nlohmann::json merged = nlohmann::json::parse(doc_);
  for (const char* group : {"accelerators", "links"}) {
    root.known(group);
    if (!root.has(group)) continue;
    JsonObject entries = root.object(group);
    for (const auto& item : patch.at(group).items()) {
      JsonObject e = entries.object(item.key());  // checks it is an object
      (void)e;
      nlohmann::json& target = merged[group][item.key()];
      if (target.is_null()) {
        target = item.value();
      } else {
        // A patch that gives the capacity in one unit replaces the entry's figure in the other.
        if (item.value().is_object()) {
          if (item.value().contains("memory_gb")) target.erase("memory_gib");
          if (item.value().contains("memory_gib")) target.erase("memory_gb");
        }
        target.merge_patch(item.value());
      }
    }
  }
  root.finish();
  Catalog next;
  next.doc_ = merged.dump();
  next.parse(source);
  *this = std::move(next);
}

const AcceleratorSpec& Catalog::accelerator(std::string_view id) const {
  return find_entry(accelerators_, id, "accelerator");
}

const LinkSpec& Catalog::link(std::string_view id) const { return find_entry(links_, id, "link"); }

std::vector<std::string> Catalog::accelerator_ids() const {
  std::vector<std::string> ids;
  for (const auto& [k, v] : accelerators_) ids.push_back(k);
  return ids;
}

std::vector<std::string> Catalog::link_ids() const {
  std::vector<std::string> ids;
  for (const auto& [k, v] : links_) ids.push_back(k);
  return ids;
}

std::string Catalog::to_json() const { return nlohmann::json::parse(doc_).dump(2); }

}  // namespace ddlsim
