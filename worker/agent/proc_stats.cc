#include "worker/agent/proc_stats.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace athanor::agent {

bool ParseProcStat(const std::string& line, long ticks_per_second, pid_t* pgid, double* cpu_s) {
  // "pid (comm) state ppid pgrp ..." where comm may contain spaces and ')'.
  size_t close = line.rfind(')');
  if (close == std::string::npos || ticks_per_second <= 0) return false;
  std::istringstream in(line.substr(close + 1));
  std::vector<std::string> f;
  std::string tok;
  while (in >> tok && f.size() < 16) f.push_back(tok);
  // f[0]=state f[1]=ppid f[2]=pgrp ... f[11]=utime f[12]=stime f[13]=cutime f[14]=cstime
  if (f.size() < 15) return false;
  try {
    *pgid = static_cast<pid_t>(std::stol(f[2]));
    double ticks = std::stod(f[11]) + std::stod(f[12]) + std::stod(f[13]) + std::stod(f[14]);
    *cpu_s = ticks / static_cast<double>(ticks_per_second);
  } catch (...) {
    return false;
  }
  return true;
}

double ProcessGroupCpuSeconds(pid_t pgid, const std::string& proc_root) {
  static const long ticks = sysconf(_SC_CLK_TCK);
  double total = 0;
  bool found = false;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    pid_t group = 0;
    double cpu = 0;
    if (!ParseProcStat(line, ticks, &group, &cpu) || group != pgid) continue;
    total += cpu;
    found = true;
  }
  return found ? total : -1;
}

}  // namespace athanor::agent
