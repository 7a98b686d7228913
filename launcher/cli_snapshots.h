// Instance snapshots in the CLI (launcher/cli_snapshots.cc): `athanor
// snapshots` lists and removes them; `athanor alloc --restore/--resume`
// finds the one to start from and takes the instance's request from it.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "launcher/cli_commands.h"
#include "proto/athanor_interactive.pb.h"

namespace athanor::cli {

// The snapshot `restore` (an id), or with `resume` (a job id) the newest
// complete snapshot of that job; the coordinator's error, or NotFound
// naming what is missing.
absl::StatusOr<rpc::InstanceSnapshot> FindSnapshot(const CliContext& ctx, const std::string& restore,
                                                   const std::string& resume);

// Fills what the user left out of `spec` from the snapshot's request: the
// shape (nodes 0 / gpus 0 : unset), image, volumes (as the snapshot mounted
// them), idle timeout (0 : unset), command (none given and no notebook);
// sets spec.restore_snapshot.
void FillFromSnapshot(const rpc::InstanceSnapshot& snapshot, rpc::JobSpec* spec);

// The table `athanor snapshots` prints.
std::string FormatSnapshots(const rpc::ListSnapshotsResponse& resp);

}  // namespace athanor::cli
