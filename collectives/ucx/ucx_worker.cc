#include "collectives/ucx/ucx_worker.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status.h"

namespace athanor {
namespace ucx_internal {
void CloseEndpoints(ucp_worker_h worker, const std::vector<ucp_ep_h>& eps, bool progress) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  for (ucp_ep_h ep : eps) {
    if (ep == nullptr) continue;
    ucs_status_ptr_t p = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(p)) {
      for (int i = 0; i < 100000 && progress; ++i) {
        if (ucp_request_check_status(p) != UCS_INPROGRESS) break;
        ucp_worker_progress(worker);
      }
      ucp_request_free(p);
    }
  }
}

absl::StatusOr<std::unique_ptr<UcxWorker>> UcxWorker::Create(const Options& options,
                                                             TcpStoreClient* store,
                                                             PeerWatch* peers) {
  std::unique_ptr<UcxWorker> w(new UcxWorker());
  RETURN_IF_ERROR(w->Init(options, store, peers));
  return w;
}

absl::Status UcxWorker::Init(const Options& o, TcpStoreClient* store, PeerWatch* peers) {
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return UcsError("ucp_config_read", s);
  // Our defaults for UCX's own settings go through the config object, never
  // the process environment (setenv races with every other thread's
  // getenv), and UCX's own UCX_* variables win over them. Those are UCX's
  // configuration, which ucp_config_read above has just taken from the
  // environment itself; whether one is set can only be seen there, so this
  // is the one place below main that looks at the environment.
  // Larger shared-memory FIFO cells: messages up to ~256 B go in one cell
  // (eager short) instead of a bounce buffer, ~0.2 us less per small call.
  // UCX applies names it does not know at the UCP level to every transport
  // that has them ("MM_" covers both sysv and posix).
  if (std::getenv("UCX_SYSV_FIFO_ELEM_SIZE") == nullptr &&
      std::getenv("UCX_POSIX_FIFO_ELEM_SIZE") == nullptr &&
      std::getenv("UCX_MM_FIFO_ELEM_SIZE") == nullptr) {
    s = ucp_config_modify(config, "MM_FIFO_ELEM_SIZE", "320");
    if (s != UCS_OK) ATHANOR_LOG(DEBUG) << "ucx: MM_FIFO_ELEM_SIZE: " << ucs_status_string(s);
  }
  if (!o.keepalive_interval.empty() && std::getenv("UCX_KEEPALIVE_INTERVAL") == nullptr) {
    ucp_config_modify(config, "KEEPALIVE_INTERVAL", o.keepalive_interval.c_str());
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG;
  if (o.rma) params.features |= UCP_FEATURE_RMA;
  if (o.wakeup) params.features |= UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (s != UCS_OK) return UcsError("ucp_init", s);
  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  s = ucp_worker_create(context_, &wparams, &worker_);
  if (s != UCS_OK) return UcsError("ucp_worker_create", s);
  ucp_address_t* address = nullptr;
  size_t address_len = 0;
  s = ucp_worker_get_address(worker_, &address, &address_len);
  if (s != UCS_OK) return UcsError("ucp_worker_get_address", s);
  std::string mine(reinterpret_cast<const char*>(address), address_len);
  ucp_worker_release_address(worker_, address);

  ASSIGN_OR_RETURN(std::vector<std::string> addresses,
                   AllGatherThroughStore(store, "ucx/address", o.rank, o.world_size, mine, o.timeout));
  eps_.assign(o.world_size, nullptr);
  for (int peer = 0; peer < o.world_size; ++peer) {
    if (peer == o.rank) continue;
    // UCX 1.13's shared-memory transports cannot report a dead peer, and
    // asking for peer error handling drops them (leaving TCP). For peers
    // on this host we keep shared memory and watch them otherwise.
    const bool local = !o.local_peers.empty() && o.local_peers[peer];
    ep_contexts_.push_back(std::make_unique<EpContext>(EpContext{peers, peer}));
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(addresses[peer].data());
    ep.err_mode = local ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t status) {
      auto* ctx = static_cast<EpContext*>(arg);
      ctx->peers->OnEndpointError(ctx->peer, status);
    };
    ep.err_handler.arg = ep_contexts_.back().get();
    s = ucp_ep_create(worker_, &ep, &eps_[peer]);
    if (s != UCS_OK) return UcsError(absl::StrCat("ucp_ep_create to rank ", peer), s);
  }
  RETURN_IF_ERROR(Hello(o, peers));
  int right = (o.rank + 1) % o.world_size;
  const std::string lanes = Lanes(right);
  if (o.rank == 0) {
    ATHANOR_LOG(INFO) << "ucx: rank 0 -> rank " << right << " transports: " << lanes;
  } else {
    ATHANOR_LOG(DEBUG) << "ucx: rank " << o.rank << " -> rank " << right << " transports: " << lanes;
  }
  return absl::OkStatus();
}

// One empty message to and from every peer, so every endpoint is wired up
// (and watched for errors) before the first collective. No other thread
// runs yet, so no lock.
absl::Status UcxWorker::Hello(const Options& o, PeerWatch* peers) {
  const int n = o.world_size, r = o.rank;
  std::vector<void*> requests;
  ucp_request_param_t param{};
  for (int peer = 0; peer < n; ++peer) {
    if (peer == r) continue;
    ucs_status_ptr_t rp = ucp_tag_recv_nbx(worker_, nullptr, 0, MakeTag(kHelloTagBase, peer, 0, 0),
                                           kFullMask, &param);
    ucs_status_ptr_t sp = ucp_tag_send_nbx(eps_[peer], nullptr, 0, MakeTag(kHelloTagBase, r, 0, 0),
                                           &param);
    for (ucs_status_ptr_t p : {rp, sp}) {
      if (UCS_PTR_IS_ERR(p)) return UcsError(absl::StrCat("hello to rank ", peer), UCS_PTR_STATUS(p));
      if (p != nullptr) requests.push_back(p);
    }
  }
  auto deadline = std::chrono::steady_clock::now() + o.timeout;
  absl::Status status;
  while (!requests.empty()) {
    ucp_worker_progress(worker_);
    for (size_t i = 0; i < requests.size();) {
      ucs_status_t st = ucp_request_check_status(requests[i]);
      if (st == UCS_INPROGRESS) {
        ++i;
        continue;
      }
      if (st != UCS_OK && status.ok()) status = UcsError("ucx hello", st);
      ucp_request_free(requests[i]);
      requests.erase(requests.begin() + i);
    }
    if (!peers->error().ok()) status = peers->error();
    if (status.ok() && std::chrono::steady_clock::now() > deadline) {
      status = absl::DeadlineExceededError("ucx: peers did not answer the start-up hello");
    }
    if (!status.ok()) {
      for (void* req : requests) ucp_request_cancel(worker_, req);
      if (!peers->error().ok()) return status;
    }
  }
  return status;
}

std::string UcxWorker::Lanes(int peer) const {
  char* text = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  if (f == nullptr) return "";
  ucp_ep_print_info(eps_[peer], f);
  fclose(f);
  std::string lanes;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text, len), '\n')) {
    size_t at = line.find("lane[");
    if (at == absl::string_view::npos) continue;
    absl::StrAppend(&lanes, lanes.empty() ? "" : "; ", line.substr(at));
  }
  free(text);
  return lanes;
}

void UcxWorker::CloseEndpoints(bool progress) {
  if (worker_ == nullptr) return;
  ucx_internal::CloseEndpoints(worker_, eps_, progress);
  eps_.assign(eps_.size(), nullptr);
}

void UcxWorker::DestroyWorker() {
  if (worker_ == nullptr) return;
  ucp_worker_destroy(worker_);
  worker_ = nullptr;
}

UcxWorker::~UcxWorker() {
  DestroyWorker();
  if (context_ != nullptr) ucp_cleanup(context_);
}

}  // namespace ucx_internal
}  // namespace athanor
