// CheckpointService's private state: a staging area and a rank connection.
// Fields are guarded by the service's mu_, except the request fields
// (attempt..manifest), which the upload thread alone reads while `uploading`.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "checkpoint/manifest.h"
#include "checkpoint/service/checkpoint_service.h"

namespace athanor::ckptsvc {

struct CheckpointService::Area {
  uint64_t id = 0;
  std::string key, job;
  std::string note_path;  // the .handoff note while uploading
  int32_t rank = 0;
  uid_t uid = 0;  // of the rank that made it (the job's uid); the upload's file identity
  gid_t gid = 0;
  int fd = -1;    // the sealed memfd; -1 before the first grant and once reclaimed
  uint64_t capacity = 0;  // its size, counted in the budget
  absl::Time granted_at;  // of the last grant
  std::string reclaimed;  // non-empty: why the last grant was taken back
  Connection* owner = nullptr;  // the connection of the rank using it
  bool staged = false;          // granted to the rank, not yet handed off
  bool uploading = false;
  int32_t attempt = 0, world_size = 0, keep_last = 0;
  int64_t step = 0;
  std::string uri;
  std::map<std::string, std::string> env;
  RankManifest manifest;
  std::thread uploader;
};

struct CheckpointService::Connection {
  int fd = -1;
  uid_t uid = 0;  // the peer's (SO_PEERCRED)
  gid_t gid = 0;
  std::thread thread;
  Area* area = nullptr;
  bool done = false;
};

}  // namespace athanor::ckptsvc
