#include <algorithm>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/truncate.h"
#include "launcher/cli_top.h"

namespace athanor::cli {
namespace {

std::string Fit(std::string s, int width) {
  if (static_cast<int>(s.size()) > width) s.resize(std::max(0, width));
  return s;
}

std::string Eta(const rpc::JobStatus& j) {
  const rpc::TelemetrySample& t = j.last();
  if (t.total_steps() <= 0 || j.steps_per_s() <= 0 || t.step() >= t.total_steps()) return "-";
  const int64_t s = static_cast<int64_t>(static_cast<double>(t.total_steps() - t.step()) / j.steps_per_s());
  if (s >= 86400) return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%dm%02ds", s / 60, s % 60);
}

std::string WallClockText(int64_t unix_ms) {
  time_t t = static_cast<time_t>(unix_ms / 1000);
  tm parts{};
  localtime_r(&t, &parts);
  char buf[16];
  strftime(buf, sizeof(buf), "%H:%M:%S", &parts);
  return buf;
}

}  // namespace

std::vector<std::string> RenderTop(const rpc::ClusterView& view, const std::string& coordinator,
                                   int width, int height) {
  std::vector<std::string> lines;
  int gpus = 0, allocated = 0, running = 0;
  for (const rpc::NodeStatus& n : view.nodes()) {
    for (const rpc::GpuSlot& g : n.gpus()) {
      ++gpus;
      allocated += g.job_id().empty() ? 0 : 1;
    }
  }
  for (const rpc::JobStatus& j : view.jobs()) running += j.state() == "RUNNING" ? 1 : 0;
  lines.push_back(absl::StrFormat("athanor top  %s  %s  nodes %d  GPUs %d/%d  running %d  queue %d",
                                  view.unix_ms() > 0 ? WallClockText(view.unix_ms()) : "--:--:--", coordinator,
                                  view.nodes_size(), allocated, gpus, running, view.queue_length()));
  lines.push_back("");
  // Nodes x GPUs: each cell is the holding job (or '.') and its measured use.
  lines.push_back("NODE         STATE     GPUs (job:util%, . free)");
  const int cells = std::max(1, (width - 23) / 9);
  const size_t node_rows = std::max<size_t>(1, static_cast<size_t>(height) / 3);
  size_t shown = 0;
  for (const rpc::NodeStatus& n : view.nodes()) {
    if (shown++ == node_rows) {
      lines.push_back(absl::StrCat("  ... ", view.nodes_size() - node_rows, " more nodes"));
      break;
    }
    std::string row = absl::StrFormat("%-12s %-9s", Fit(n.name(), 12), Fit(n.state(), 9));
    int i = 0;
    for (const rpc::GpuSlot& g : n.gpus()) {
      if (i++ == cells) {
        absl::StrAppend(&row, " +", n.gpus_size() - cells);
        break;
      }
      std::string cell = g.job_id().empty() ? "." : Fit(g.job_id(), 4);
      absl::StrAppend(&cell, ":", g.measured() ? absl::StrFormat("%.0f", g.utilization()) : "-");
      absl::StrAppend(&row, " ", absl::StrFormat("%-8s", Fit(cell, 8)));
    }
    lines.push_back(row);
  }
  lines.push_back("");
  lines.push_back("JOB    TENANT     STATE      GPUS   STEP      LOSS  STEP/S      ETA");
  std::vector<const rpc::JobStatus*> active, pending;
  for (const rpc::JobStatus& j : view.jobs()) {
    if (j.state() == "PENDING") {
      pending.push_back(&j);
    } else if (j.state() == "RUNNING" || j.state() == "STARTING" || j.state() == "PREEMPTING") {
      active.push_back(&j);
    }
  }
  // What is left below the jobs' header goes to jobs first, then the queue.
  const int room = height - static_cast<int>(lines.size()) - 3;
  const int job_rows = std::max(1, pending.empty() ? room : room - std::min<int>(room / 2, pending.size() + 1));
  int n = 0;
  for (const rpc::JobStatus* j : active) {
    if (n++ == job_rows) break;
    const bool figures = j->last().step() >= 0 && j->last().unix_ms() > 0;
    lines.push_back(absl::StrFormat(
        "%-6s %-10s %-10s %4d %6s %9s %7s %8s", Fit(j->id(), 6), Fit(j->tenant(), 10), j->state(), j->gpus(),
        figures ? absl::StrCat(j->last().step()) : "-", figures ? absl::StrFormat("%.4f", j->last().loss()) : "-",
        figures ? absl::StrFormat("%.2f", j->steps_per_s()) : "-", figures ? Eta(*j) : "-"));
  }
  if (active.empty()) lines.push_back("  (no running jobs)");
  lines.push_back("QUEUE  TENANT     GPUS  WHY");
  for (const rpc::JobStatus* j : pending) {
    if (static_cast<int>(lines.size()) >= height - 1) break;
    std::string line = absl::StrFormat("%-6s %-10s %4d  ", Fit(j->id(), 6), Fit(j->tenant(), 10), j->gpus());
    // The reason ends at a whole word, marked, where the screen cuts it (`athanor why` has it all).
    const std::string why = j->why_size() > 0 ? j->why(0) : j->reason();
    lines.push_back(line + TruncateAtWord(why, static_cast<size_t>(std::max(0, width - static_cast<int>(line.size())))));
  }
  if (pending.empty()) lines.push_back("  (queue empty)");
  lines.resize(std::max(0, height - 1));
  lines.push_back("q quits");
  for (std::string& l : lines) {
    l = Fit(l, width);
    while (!l.empty() && l.back() == ' ') l.pop_back();
  }
  return lines;
}

}  // namespace athanor::cli
