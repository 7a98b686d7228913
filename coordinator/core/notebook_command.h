// The command of a notebook job's ranks (JobSpec::notebook), written by the
// coordinator when the job is accepted: Jupyter's classic notebook server
// (Debian's jupyter-notebook), serving the rank's work folder on a unix socket
// inside its sandbox under /notebook/<job>/ (common/notebook_paths.h). Its
// token is not on the command line: the agent gives each notebook rank a
// fresh one in JUPYTER_TOKEN, through the sandbox's environment file.
//
// A notebook job's command is always this one: a command given with the
// request is replaced (the CLI refuses `--notebook -- CMD`; a spec carried
// over from an instance snapshot holds the previous instance's).
#pragma once

#include <string>
#include <vector>

namespace athanor::coord {

std::vector<std::string> NotebookCommand(const std::string& job_id);

}  // namespace athanor::coord
