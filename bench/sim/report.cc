#include "bench/sim/report.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace athanor::sim {

namespace {

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

// Gang sizes in GPUs, by their largest member.
struct Range {
  const char* label;
  int hi;
};
constexpr Range kSizes[] = {{"1", 1}, {"2-8", 8}, {"9-64", 64}, {"65-256", 256}, {"257+", 1 << 30}};

}  // namespace

double StarvationRule::Base(const JobOutcome& job) const {
  return std::max({static_cast<double>(job.queued_s()), kStarvationFloorS,
                   run_fraction * static_cast<double>(job.run_s)});
}

PolicySummary Summarise(const SimResult& r, const SimResult& baseline, const StarvationRule& rule) {
  PolicySummary s;
  s.policy = r.policy;
  s.rejected = r.rejected;
  std::vector<double> jct, queued;
  std::vector<std::vector<double>> by_size(std::size(kSizes));
  std::vector<int> starved_by_size(std::size(kSizes), 0);
  double lost = 0;
  int top_class = std::numeric_limits<int>::min();
  for (const JobOutcome& job : r.jobs) top_class = std::max(top_class, job.priority);
  std::vector<double> run;
  for (size_t i = 0; i < r.jobs.size(); ++i) {
    const JobOutcome& job = r.jobs[i];
    lost += job.lost_gpu_s;
    if (job.finish_s < 0) {
      ++s.unfinished;
      continue;
    }
    ++s.finished;
    s.credit_held_h += static_cast<double>(job.credit_held_s) / 3600;
    run.push_back(static_cast<double>(job.run_s));
    jct.push_back(static_cast<double>(job.jct_s()));
    queued.push_back(static_cast<double>(job.queued_s()));
    size_t bucket = 0;
    while (bucket + 1 < std::size(kSizes) && job.gpus > kSizes[bucket].hi) ++bucket;
    by_size[bucket].push_back(queued.back());
    if (i < baseline.jobs.size() && baseline.jobs[i].finish_s >= 0) {
      const double ratio = rule.Ratio(job, baseline.jobs[i]);
      const bool starved = ratio > kStarvedRatio;
      s.worst_queue_ratio = std::max(s.worst_queue_ratio, ratio);
      s.starved += starved;
      if (starved) {
        s.starved_preempted += job.preemptions > 0;
        s.starved_lower_class += job.preemptions == 0 && job.priority < top_class;
        s.starved_other += job.preemptions == 0 && job.priority >= top_class;
      }
      starved_by_size[bucket] += starved;
    }
  }
  s.unfinished -= r.rejected;  // never started: counted apart
  s.jct_mean_s = Mean(jct);
  s.run_mean_s = Mean(run);
  s.jct_p99_s = Percentile(jct, 0.99);
  s.queued_mean_s = Mean(queued);
  for (size_t b = 0; b < std::size(kSizes); ++b) {
    s.by_size.push_back({kSizes[b].label, static_cast<int>(by_size[b].size()), Mean(by_size[b]),
                         Percentile(by_size[b], 0.99), starved_by_size[b]});
  }
  s.makespan_s = static_cast<double>(r.end_s - r.start_s);
  const double capacity = static_cast<double>(r.total_gpus) * s.makespan_s;
  s.utilisation = capacity > 0 ? r.busy_gpu_s / capacity : 0;
  const double arrivals = static_cast<double>(r.total_gpus) * static_cast<double>(r.last_submit_s - r.start_s);
  s.utilisation_arrivals = arrivals > 0 ? r.busy_gpu_s_arrivals / arrivals : 0;
  s.stranded_gpus = s.makespan_s > 0 ? r.stranded_gpu_s / s.makespan_s : 0;
  s.lost_gpu_h = lost / 3600;
  s.preemptions = r.preemptions;
  s.grows = r.grows;
  s.credit_holds = r.credit_holds;
  s.credit_stops = r.credit_stops;
  s.node_failures = r.node_failures;
  s.passes = static_cast<int>(r.pass_us.size());
  s.pass_mean_us = Mean(r.pass_us);
  s.pass_p99_us = Percentile(r.pass_us, 0.99);
  std::vector<double> per_k;
  for (size_t i = 0; i < r.pass_us.size() && i < r.pass_work.size(); ++i) {
    if (r.pass_work[i] > 0) per_k.push_back(r.pass_us[i] * 1000 / static_cast<double>(r.pass_work[i]));
  }
  s.pass_mean_us_per_k = Mean(per_k);
  s.pass_p99_us_per_k = Percentile(per_k, 0.99);
  if (&r != &baseline) {
    PolicySummary base = Summarise(baseline, baseline);
    s.jct_vs_baseline = base.jct_mean_s > 0 ? s.jct_mean_s / base.jct_mean_s : 0;
    s.jct_floor_vs_baseline = base.jct_mean_s > 0 ? s.run_mean_s / base.jct_mean_s : 0;
    s.util_vs_baseline = base.utilisation > 0 ? s.utilisation / base.utilisation : 0;
  } else {
    s.jct_floor_vs_baseline = s.jct_mean_s > 0 ? s.run_mean_s / s.jct_mean_s : 0;
  }
  return s;
}

std::vector<StarvedJob> StarvedJobs(const SimResult& r, const SimResult& baseline, const StarvationRule& rule) {
  std::vector<StarvedJob> out;
  for (size_t i = 0; i < r.jobs.size() && i < baseline.jobs.size(); ++i) {
    const JobOutcome& job = r.jobs[i];
    if (job.finish_s < 0 || baseline.jobs[i].finish_s < 0) continue;
    const double ratio = rule.Ratio(job, baseline.jobs[i]);
    if (ratio > kStarvedRatio) out.push_back({i, ratio});
  }
  std::stable_sort(out.begin(), out.end(), [](const StarvedJob& a, const StarvedJob& b) { return a.ratio > b.ratio; });
  return out;
}

void PrintStarved(std::ostream& out, const SimResult& r, const SimResult& baseline, const StarvationRule& rule) {
  const std::vector<StarvedJob> rows = StarvedJobs(r, baseline, rule);
  out << absl::StrFormat("%s: %d starved\n", r.policy, rows.size());
  if (rows.empty()) return;
  out << absl::StrFormat("  %6s %5s %4s %9s %8s %8s %8s %8s %6s %5s %4s %6s %8s\n", "job", "gpus", "prio",
                         "submit_h", "run_h", "first_h", "queued_h", "fifo_q_h", "ratio", "preem", "fail", "cstop",
                         "cheld_h");
  auto hours = [](int64_t s) { return static_cast<double>(s) / 3600; };
  for (const StarvedJob& row : rows) {
    const JobOutcome& job = r.jobs[row.index];
    out << absl::StrFormat("  %6d %5d %4d %9.2f %8.2f %8.2f %8.2f %8.2f %6.1f %5d %4d %6d %8.2f\n", row.index,
                           job.gpus, job.priority, hours(job.submit_s - r.start_s), hours(job.run_s),
                           hours(job.first_start_s - job.submit_s), hours(job.queued_s()),
                           hours(baseline.jobs[row.index].queued_s()), row.ratio, job.preemptions, job.failures,
                           job.credit_stops, hours(job.credit_held_s));
  }
}

nlohmann::json StarvedToJson(const SimResult& r, const SimResult& baseline, const StarvationRule& rule) {
  nlohmann::json out = nlohmann::json::array();
  for (const StarvedJob& row : StarvedJobs(r, baseline, rule)) {
    const JobOutcome& job = r.jobs[row.index];
    out.push_back({{"job", row.index},
                   {"gpus", job.gpus},
                   {"priority", job.priority},
                   {"submit_s", job.submit_s - r.start_s},
                   {"run_s", job.run_s},
                   {"first_wait_s", job.first_start_s - job.submit_s},
                   {"queued_s", job.queued_s()},
                   {"fifo_queued_s", baseline.jobs[row.index].queued_s()},
                   {"ratio", row.ratio},
                   {"preemptions", job.preemptions},
                   {"failures", job.failures},
                   {"credit_stops", job.credit_stops},
                   {"credit_held_s", job.credit_held_s}});
  }
  return out;
}

void PrintTable(std::ostream& out, const std::vector<PolicySummary>& rows) {
  out << absl::StrFormat("%-14s %8s %10s %10s %7s %10s %6s %8s %8s %9s %6s %7s %8s %9s %9s\n", "policy",
                         "finished", "jct_mean_h", "jct_p99_h", "x_fifo", "makespan_h", "util", "util_arr",
                         "stranded", "lost_gpuh", "preem", "starved", "worst_q", "pass_us", "p99_us");
  for (const PolicySummary& s : rows) {
    out << absl::StrFormat("%-14s %8d %10.2f %10.2f %7.3f %10.1f %6.3f %8.3f %8.1f %9.0f %6d %7d %8.1f %9.0f %9.0f\n",
                           s.policy, s.finished, s.jct_mean_s / 3600, s.jct_p99_s / 3600,
                           s.jct_vs_baseline, s.makespan_s / 3600, s.utilisation, s.utilisation_arrivals, s.stranded_gpus,
                           s.lost_gpu_h, s.preemptions, s.starved, s.worst_queue_ratio,
                           s.pass_mean_us, s.pass_p99_us);
  }
  out << "\nqueueing delay by gang size (GPUs): mean / p99 hours [starved jobs]\n";
  out << absl::StrFormat("%-14s", "policy");
  if (!rows.empty()) {
    for (const SizeBucket& b : rows.front().by_size) {
      out << absl::StrFormat(" %23s", absl::StrCat(b.label, " (", b.jobs, ")"));
    }
  }
  out << "\n";
  for (const PolicySummary& s : rows) {
    out << absl::StrFormat("%-14s", s.policy);
    for (const SizeBucket& b : s.by_size) {
      out << absl::StrFormat(" %7.2f /%7.2f [%4d]", b.queued_mean_s / 3600, b.queued_p99_s / 3600, b.starved);
    }
    out << "\n";
  }
  if (!rows.empty()) {
    const PolicySummary& base = rows.front();
    out << absl::StrFormat("\nmean run time %.2f h: no policy's mean JCT gets below %.3fx %s's\n",
                           base.run_mean_s / 3600, base.jct_floor_vs_baseline, base.policy);
  }
  if (std::any_of(rows.begin(), rows.end(), [](const PolicySummary& s) { return s.grows > 0; })) {
    out << "elastic jobs stopped to grow:";
    for (const PolicySummary& s : rows) out << " " << s.policy << " " << s.grows;
    out << "\n";
  }
  if (std::any_of(rows.begin(), rows.end(), [](const PolicySummary& s) { return s.credit_holds > 0; })) {
    out << "out of credit: tenants held / attempts stopped / job-hours held (not in the queueing delays)\n";
    for (const PolicySummary& s : rows) {
      out << absl::StrFormat("%-14s %5d / %5d / %9.1f\n", s.policy, s.credit_holds, s.credit_stops, s.credit_held_h);
    }
  }
  out << "pass time per 1,000 nodes + jobs (pending and running) at the pass: mean / p99 µs\n";
  for (const PolicySummary& s : rows) {
    out << absl::StrFormat("%-14s %8.2f / %8.2f\n", s.policy, s.pass_mean_us_per_k, s.pass_p99_us_per_k);
  }
  out << "starved jobs by cause: preempted at least once / in a lower class (never preempted) / other\n";
  for (const PolicySummary& s : rows) {
    out << absl::StrFormat("%-14s %5d / %5d / %5d\n", s.policy, s.starved_preempted, s.starved_lower_class,
                           s.starved_other);
  }
}

nlohmann::json ToJson(const std::vector<PolicySummary>& rows) {
  nlohmann::json policies = nlohmann::json::array();
  for (const PolicySummary& s : rows) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const SizeBucket& b : s.by_size) {
      sizes.push_back({{"gpus", b.label}, {"jobs", b.jobs}, {"queued_mean_s", b.queued_mean_s},
                       {"queued_p99_s", b.queued_p99_s}, {"starved", b.starved}});
    }
    policies.push_back({{"policy", s.policy},
                        {"finished", s.finished},
                        {"unfinished", s.unfinished},
                        {"rejected", s.rejected},
                        {"jct_mean_s", s.jct_mean_s},
                        {"jct_p99_s", s.jct_p99_s},
                        {"queued_mean_s", s.queued_mean_s},
                        {"queued_by_gang_size", sizes},
                        {"makespan_s", s.makespan_s},
                        {"gpu_utilisation", s.utilisation},
                        {"gpu_utilisation_arrivals", s.utilisation_arrivals},
                        {"stranded_gpus_mean", s.stranded_gpus},
                        {"lost_gpu_hours", s.lost_gpu_h},
                        {"preemptions", s.preemptions},
                        {"grows", s.grows},
                        {"credit_holds", s.credit_holds},
                        {"credit_stops", s.credit_stops},
                        {"credit_held_hours", s.credit_held_h},
                        {"node_failures", s.node_failures},
                        {"passes", s.passes},
                        {"pass_mean_us", s.pass_mean_us},
                        {"pass_p99_us", s.pass_p99_us},
                        {"pass_mean_us_per_1000_nodes_and_jobs", s.pass_mean_us_per_k},
                        {"pass_p99_us_per_1000_nodes_and_jobs", s.pass_p99_us_per_k},
                        {"jct_mean_vs_fifo", s.jct_vs_baseline},
                        {"utilisation_vs_fifo", s.util_vs_baseline},
                        {"starved_jobs", s.starved},
                        {"starved_by_cause",
                         {{"preempted", s.starved_preempted},
                          {"lower_class", s.starved_lower_class},
                          {"other", s.starved_other}}},
                        {"run_mean_s", s.run_mean_s},
                        {"jct_floor_vs_fifo", s.jct_floor_vs_baseline},
                        {"worst_queue_ratio_vs_fifo", s.worst_queue_ratio}});
  }
  return policies;
}

absl::Status WritePlots(const std::string& dir, const std::vector<SimResult>& results) {
  if (results.empty()) return absl::OkStatus();
  std::error_code made;
  std::filesystem::create_directories(dir, made);
  if (made) return absl::InternalError(absl::StrCat("cannot make the plot folder ", dir, ": ", made.message()));
  // The timelines end a quarter past the last instant any policy had a job
  // pending: after that only the longest jobs run on (openb's longest runs
  // 145 days), and drawing that would squeeze the queueing into a sliver.
  int64_t start = results.front().start_s, end = start, last_pending = start;
  for (const SimResult& r : results) {
    end = std::max(end, r.end_s);
    for (size_t i = 0; i < r.steps.size(); ++i) {
      if (r.steps[i].pending > 0) {
        last_pending = std::max(last_pending, i + 1 < r.steps.size() ? r.steps[i + 1].t_s : r.end_s);
      }
    }
  }
  if (last_pending > start) end = std::min(end, last_pending + (last_pending - start) / 4);
  constexpr int kBins = 300;
  const double width = std::max<double>(1.0, static_cast<double>(end - start) / kBins);
  for (const SimResult& r : results) {
    // Time-weighted averages of the step function over each bin.
    std::vector<double> busy(kBins, 0), pending(kBins, 0);
    for (size_t i = 0; i < r.steps.size(); ++i) {
      const double from = static_cast<double>(r.steps[i].t_s - start);
      const double to = static_cast<double>(
          std::min(end, i + 1 < r.steps.size() ? r.steps[i + 1].t_s : r.end_s) - start);
      // Bin by index: recomputing it from t / width can round down onto a
      // bin whose upper edge is t, which dropped the rest of the step.
      double t = from;
      for (int bin = std::min(kBins - 1, static_cast<int>(from / width)); t < to && bin < kBins; ++bin) {
        const double edge = bin == kBins - 1 ? to : std::min(to, (bin + 1) * width);
        const double span = std::max(edge - t, 0.0);
        busy[bin] += static_cast<double>(r.steps[i].busy_gpus) * span / width;
        pending[bin] += static_cast<double>(r.steps[i].pending) * span / width;
        t = std::max(t, edge);
      }
    }
    std::ofstream timeline(absl::StrCat(dir, "/timeline-", r.policy, ".dat"));
    timeline << "# hours utilisation pending_jobs\n";
    for (int b = 0; b < kBins; ++b) {
      timeline << absl::StrFormat("%.3f %.4f %.1f\n", (b + 0.5) * width / 3600,
                                  busy[b] / static_cast<double>(std::max<int64_t>(r.total_gpus, 1)), pending[b]);
    }
    std::vector<double> jct;
    for (const JobOutcome& job : r.jobs) {
      if (job.finish_s >= 0) jct.push_back(static_cast<double>(std::max<int64_t>(job.jct_s(), 1)) / 3600);
    }
    std::sort(jct.begin(), jct.end());
    std::ofstream cdf(absl::StrCat(dir, "/jct-", r.policy, ".dat"));
    cdf << "# jct_hours fraction_of_jobs\n";
    const size_t step = std::max<size_t>(1, jct.size() / 2000);
    for (size_t i = 0; i < jct.size(); i += step) {
      cdf << absl::StrFormat("%.5f %.5f\n", jct[i], static_cast<double>(i + 1) / static_cast<double>(jct.size()));
    }
    if (!jct.empty()) cdf << absl::StrFormat("%.5f 1\n", jct.back());
    if (!timeline || !cdf) return absl::InternalError(absl::StrCat("cannot write the plot data in ", dir));
  }
  std::ofstream gp(dir + "/plots.gp");
  // `only`: the policies to draw (gnuplot refuses a plot with no points).
  auto plot = [&](const std::string& png, const std::string& title, const std::string& prefix,
                  const std::string& using_cols, const std::vector<bool>& only) {
    if (std::find(only.begin(), only.end(), true) == only.end()) return;
    gp << "set output '" << png << "'\nset title '" << title << "'\nplot ";
    const char* sep = "";
    for (size_t i = 0; i < results.size(); ++i) {
      if (!only[i]) continue;
      gp << sep << "'" << prefix << results[i].policy << ".dat' using " << using_cols << " with lines title '"
         << results[i].policy << "'";
      sep = ", ";
    }
    gp << "\n";
  };
  std::vector<bool> every(results.size(), true), finished;
  for (const SimResult& r : results) {
    finished.push_back(std::any_of(r.jobs.begin(), r.jobs.end(), [](const JobOutcome& j) { return j.finish_s >= 0; }));
  }
  gp << "set terminal pngcairo size 900,500\nset key outside right\nset grid\n";
  gp << "set xlabel 'hours'\nset ylabel 'GPUs held / GPUs'\nset yrange [0:1.05]\n";
  plot("utilisation.png", "GPU utilisation over time", "timeline-", "1:2", every);
  gp << "set ylabel 'pending jobs'\nset autoscale y\n";
  plot("queue.png", "Queue length over time", "timeline-", "1:3", every);
  gp << "set logscale x\nset xlabel 'JCT (hours)'\nset ylabel 'fraction of jobs'\nset yrange [0:1]\n";
  plot("jct.png", "JCT distribution (CDF)", "jct-", "1:2", finished);  // none: no jct.png
  gp.close();
  if (!gp) return absl::InternalError(absl::StrCat("cannot write ", dir, "/plots.gp"));
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("gnuplot not found: data and plots.gp are in ", dir, "; no PNGs drawn"));
  }
  const std::string cmd = absl::StrCat("cd '", dir, "' && gnuplot plots.gp");
  if (std::system(cmd.c_str()) != 0) return absl::InternalError(absl::StrCat("gnuplot failed in ", dir));
  return absl::OkStatus();
}

}  // namespace athanor::sim
