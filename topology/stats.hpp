// What `ddlsim topology` reports about a cluster.
#pragma once

#include <map>
#include <string>

#include "topology/cluster.hpp"

namespace ddlsim {

struct LinkGroup {
  std::size_t cables = 0;       // physical links (each two directed links)
  double gbytes_per_s = 0;      // per direction, of one cable (the first of its kind)
  double min_gbytes_per_s = 0;  // the slowest and fastest direction of any of its cables:
  double max_gbytes_per_s = 0;  // they differ for an asymmetric or mixed kind
};

struct TopologyStats {
  std::map<std::string, std::size_t> nodes_by_kind;    // "accelerator", "switch", ...
  std::map<std::string, std::size_t> accelerators_by_model;
  std::map<std::string, LinkGroup> links_by_kind;      // by catalog link id
  double injection_min_gbytes_per_s = 0;  // an accelerator's total outgoing bandwidth, over accelerators
  double injection_max_gbytes_per_s = 0;
  std::size_t diameter_hops = 0;          // longest shortest path between two accelerators
  bool diameter_exact = true;             // false: searched from a sample of sources only
  // Oversubscription per switch tier ("leaf", "spine"): the largest ratio, over switches
  // of that role, of bandwidth toward the endpoints to bandwidth toward the next tier.
  std::map<std::string, double> oversubscription;
  double bisection_gbytes_per_s = 0;      // the smallest max flow over the candidate halvings
  std::string bisection_cut;              // which halving gave it
};

/// Computes the stats. The diameter is exact up to 4096 accelerators and searched from
/// 64 evenly spaced sources beyond (a lower bound, flagged). The bisection is the
/// smallest maximum flow between two halves of the accelerators over these halvings: the
/// rank order (first half, second half), and for a torus that holds every accelerator,
/// each dimension of even size cut in half; in both directions (links may be
/// asymmetric). A cluster that is exactly one uniform torus gets the closed form instead:
/// cutting dimension d of size k costs (wraparound ? 2 : 1) x N / k links.
TopologyStats topology_stats(const Cluster& c);

}  // namespace ddlsim
