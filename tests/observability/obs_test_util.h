// Helpers shared by the observability tests: a training job to watch, tool
// runs with captured output, and reads of the coordinator's JSON API.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cluster_harness.h"

namespace athanor::testing {

// Coordinator flags giving this cluster's attempts a MASTER_PORT that was
// free a moment ago (not the shared default range, which other clusters on
// this machine use too).
std::vector<std::string> OwnMasterPort();

// Submits a `nodes` x `gpus_per_node` athanor-train job for `tenant` that
// runs far longer than any test (cancelled by the test); returns its id.
std::string SubmitLongTraining(LocalCluster& cluster, const std::string& tenant, int nodes,
                               int gpus_per_node);

// Runs argv to completion; its exit code and stdout (stderr into *err).
CliResult RunTool(const std::vector<std::string>& argv, const std::string& err_path);

// GET on the coordinator's HTTP endpoint, parsed as JSON (null on failure).
nlohmann::json GetJson(LocalCluster& cluster, const std::string& path);

// step -> loss from rank 0's step lines (`athanor logs ID --rank 0`).
std::map<int64_t, double> StepLosses(LocalCluster& cluster, const std::string& job);

// base64(SHA-256(SubjectPublicKeyInfo)) of a PEM certificate: what
// Chromium's --ignore-certificate-errors-spki-list pins ("" when unreadable).
std::string SpkiSha256Base64(const std::string& cert_pem);

// Where screenshots and page dumps go: $ATHANOR_ARTIFACT_DIR, else
// <build>/tests/artifacts/observability (created).
std::string ArtifactDir();

}  // namespace athanor::testing
