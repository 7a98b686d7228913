// Helpers shared by the observability tests: a training job to watch, tool
// runs with captured output, reads of the coordinator's JSON API (as the
// admin or as another token), and the dashboard in headless Chromium.
#pragma once

#include <cstdint>
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

// GET on the coordinator's HTTPS endpoint with `token` as the bearer token
// (status 0 when there was no answer).
HttpResult HttpGetAs(LocalCluster& cluster, const std::string& token, const std::string& path);

// The dashboard in Debian's headless Chromium, which trusts exactly the
// coordinator's certificate's key (it is not from a CA Chromium knows):
// the page's DOM once its scripts ran (8 s of the page's virtual time), and
// a screenshot saved at `path` (its size in bytes, 0 when none was written).
// A missing or failing Chromium fails the test: it is required, never skipped.
std::string DumpDom(LocalCluster& cluster, const std::string& url);
uintmax_t Screenshot(LocalCluster& cluster, const std::string& url, const std::string& path);

// step -> loss from rank 0's step lines (`athanor logs ID --rank 0`).
std::map<int64_t, double> StepLosses(LocalCluster& cluster, const std::string& job);

// base64(SHA-256(SubjectPublicKeyInfo)) of a PEM certificate: what
// Chromium's --ignore-certificate-errors-spki-list pins ("" when unreadable).
std::string SpkiSha256Base64(const std::string& cert_pem);

// Where screenshots and page dumps go: $ATHANOR_ARTIFACT_DIR, else
// <build>/tests/artifacts/observability (created).
std::string ArtifactDir();

}  // namespace athanor::testing
