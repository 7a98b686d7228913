#include "coordinator/core/notebook_command.h"

#include "common/notebook_paths.h"

namespace athanor::coord {

std::vector<std::string> NotebookCommand(const std::string& job_id) {
  return {"jupyter", "notebook", "--no-browser",
          "--sock=" + NotebookSocketPath(job_id),
          "--NotebookApp.base_url=" + NotebookBaseUrl(job_id),
          // Requests arrive through the coordinator's proxy with its Host
          // header; the proxy has authenticated them (docs/security.md).
          "--NotebookApp.allow_remote_access=True",
          // The rank's cwd: its own work folder (archived with the instance).
          "--notebook-dir=."};
}

}  // namespace athanor::coord
