#include "collectives/ucx/hier_exchange.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectives/reduce/reduce_kernels.h"
#include "collectives/ucx/shm_segment.h"
#include "collectives/ucx/ucx_worker.h"

namespace athanor {
namespace ucx_internal {
namespace {

constexpr uint64_t kOrderTagBase = 0xFFFFEull << 44;
constexpr uint64_t kOrderMask = (1ull << 36) - 1;

}  // namespace

HierExchange::HierExchange(ucp_worker_h worker, const std::vector<ucp_ep_h>* eps,
                           const Topology* topology, int rank)
    : worker_(worker),
      eps_(eps),
      topology_(topology),
      rank_(rank),
      host_(topology->host_of[rank]) {}

HierExchange::~HierExchange() {
  // The links' I/O thread lets go of every buffer first.
  const bool ucx_data = links_ == nullptr;
  links_.reset();
  // Transfers UCX still holds requests of are leaked rather than freed
  // under a late callback (the worker is destroyed after this).
  for (auto& [key, t] : transfers_) {
    if (ucx_data && t->outstanding > 0) t.release();
  }
  for (auto& t : abandoned_) {
    if (t->outstanding > 0) t.release();
  }
  if (order_handle_ != nullptr) {
    ucp_request_cancel(worker_, order_handle_);
    ucp_request_free(order_handle_);
  }
  for (OrderSend& s : order_sends_) ucp_request_free(s.handle);
}

void HierExchange::SendDone(void* request, ucs_status_t status, void* user_data) {
  auto* req = static_cast<Request*>(user_data);
  req->handle = nullptr;
  if (status != UCS_OK && req->transfer->error == UCS_OK) {
    req->transfer->error = status;
    req->transfer->error_peer = req->peer;
  }
  --req->transfer->outstanding;
  ucp_request_free(request);
}

void HierExchange::RecvDone(void* request, ucs_status_t status, const ucp_tag_recv_info_t*,
                            void* user_data) {
  SendDone(request, status, user_data);
}

std::vector<int> HierExchange::LinkPeers(const Topology& topology, int rank) {
  std::vector<int> peers;
  const int host = topology.host_of[rank];
  for (int b = 0; b < topology.max_local; ++b) {
    if (topology.Owner(host, b) != rank) continue;
    for (int h = 0; h < topology.num_hosts(); ++h) {
      const int p = topology.Owner(h, b);
      if (h != host && std::find(peers.begin(), peers.end(), p) == peers.end()) peers.push_back(p);
    }
  }
  std::sort(peers.begin(), peers.end());
  return peers;
}

bool HierExchange::Post(Request* req, const void* buf, size_t bytes, uint64_t tag) {
  if (links_ != nullptr) {
    req->transfer->outstanding.fetch_add(1, std::memory_order_relaxed);
    if (req->receive) {
      links_->Recv(req->peer, tag, const_cast<void*>(buf), bytes, &req->transfer->outstanding);
    } else {
      links_->Send(req->peer, tag, buf, bytes, &req->transfer->outstanding);
    }
    return true;
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.user_data = req;
  ucs_status_ptr_t p;
  if (req->receive) {
    param.cb.recv = RecvDone;
    p = ucp_tag_recv_nbx(worker_, const_cast<void*>(buf), bytes, tag, kFullMask, &param);
  } else {
    param.cb.send = SendDone;
    p = ucp_tag_send_nbx((*eps_)[req->peer], buf, bytes, tag, &param);
  }
  if (UCS_PTR_IS_ERR(p)) {
    req->transfer->error = UCS_PTR_STATUS(p);
    req->transfer->error_peer = req->peer;
    return false;
  }
  if (p != nullptr) {
    req->handle = p;
    ++req->transfer->outstanding;
  }
  return true;
}

absl::Status HierExchange::Start(ShmOp* op, size_t chunk, int block, char* data, size_t count) {
  if (links_ != nullptr && (links_->failed() || links_->stopped())) {
    return links_->failed() ? links_->status()
                            : absl::UnavailableError("ucx: exchange between hosts stopped");
  }
  auto& slot = transfers_[{op, chunk}];
  if (slot == nullptr) {
    slot = std::make_unique<Transfer>();
    slot->type = op->type;
    slot->op = op->op;
    if (!free_scratch_.empty()) {
      slot->scratch = std::move(free_scratch_.back());
      free_scratch_.pop_back();
    }
  }
  Transfer* t = slot.get();
  const size_t bytes = count * DataTypeSize(op->type);
  const int hosts = topology_->num_hosts();
  // The parts' partials share one buffer; reserve before any receive points
  // into it (growing it later would move them).
  if (t->parts.empty()) {
    const int blocks_here = (topology_->max_local + static_cast<int>(topology_->hosts[host_].size()) - 1) /
                            static_cast<int>(topology_->hosts[host_].size());
    const size_t need = static_cast<size_t>(blocks_here) * (hosts - 1) * bytes + 64;
    if (t->scratch.size() < need) t->scratch.resize(need);
    t->parts.reserve(blocks_here);
  }
  size_t used = 0;
  for (const Part& p : t->parts) used += p.count * DataTypeSize(op->type) * (hosts - 1);
  if (used + (hosts - 1) * bytes > t->scratch.size() || t->parts.size() == t->parts.capacity()) {
    return absl::InternalError("ucx: hierarchical all-reduce: block larger than its scratch");
  }
  t->parts.push_back({data, count, t->scratch.data() + used, block});
  if (t->parts.size() == 1) {
    t->ring = UsesRing(op->count * DataTypeSize(op->type));
    t->net_tag = op->net_tag;
    t->chunk = chunk;
  }
  if (t->ring) {
    if (block >= 64) return absl::InternalError("ucx: ring between hosts: block number too large");
    PostRingStep(t, t->parts.size() - 1);
    if (t->error != UCS_OK) {
      return absl::UnavailableError(absl::StrCat("ucx: all-reduce failed talking to peer rank ",
                                                 t->error_peer, ": ", ucs_status_string(t->error)));
    }
    return absl::OkStatus();
  }
  char* partials = t->parts.back().partials;
  int slot_index = 0;
  for (int h = 0; h < hosts; ++h) {
    if (h == host_) continue;
    const int peer = topology_->Owner(h, block);
    Request* recv = &t->requests.emplace_back(Request{t, peer});
    recv->receive = true;
    if (!Post(recv, partials + slot_index * bytes, bytes,
              MakeTag(op->net_tag, peer, chunk & 0xFFF, block))) {
      break;
    }
    Request* send = &t->requests.emplace_back(Request{t, peer});
    if (!Post(send, data, bytes, MakeTag(op->net_tag, rank_, chunk & 0xFFF, block))) break;
    ++slot_index;
  }
  if (t->error != UCS_OK) {
    return absl::UnavailableError(absl::StrCat("ucx: all-reduce failed talking to peer rank ",
                                               t->error_peer, ": ", ucs_status_string(t->error)));
  }
  return absl::OkStatus();
}

bool HierExchange::UsesRing(size_t bytes) const {
  const int hosts = topology_->num_hosts();
  return hosts >= 3 && 2 * (hosts - 1) < 64 && topology_->max_local <= 64 && bytes >= ring_min_bytes_;
}

std::string HierExchange::AlgorithmFor(size_t bytes) const {
  const int hosts = topology_->num_hosts();
  if (hosts == 2) return "one exchange between the 2 hosts";
  return UsesRing(bytes) ? absl::StrCat("a ring between the ", hosts, " hosts")
                         : absl::StrCat("a direct exchange among the ", hosts, " hosts");
}

bool HierExchange::PostRingStep(Transfer* t, size_t i) {
  const int hosts = topology_->num_hosts();
  const size_t elem = DataTypeSize(t->type);
  Part& p = t->parts[i];
  const int next = topology_->Owner((host_ + 1) % hosts, p.block);
  const int prev = topology_->Owner((host_ + hosts - 1) % hosts, p.block);
  const int s = t->step;
  // Reduce-scatter: send piece host-s, receive piece host-s-1 (into the
  // scratch, folded in after). All-gather (k = s - (hosts-1)): send piece
  // host+1-k, receive piece host-k straight into place.
  const bool gather = s >= hosts - 1;
  const int k = gather ? s - (hosts - 1) : s;
  const int send_piece = ((gather ? host_ + 1 - k : host_ - s) % hosts + hosts) % hosts;
  const int recv_piece = ((gather ? host_ - k : host_ - s - 1) % hosts + hosts) % hosts;
  auto [slo, shi] = Share(p.count, hosts, send_piece, elem);
  auto [rlo, rhi] = Share(p.count, hosts, recv_piece, elem);
  const int msg = (s << 6) | p.block;
  Request* recv = &t->requests.emplace_back(Request{t, prev});
  recv->receive = true;
  char* into = gather ? p.data + rlo * elem : p.partials;
  if (!Post(recv, into, (rhi - rlo) * elem, MakeTag(t->net_tag, prev, t->chunk & 0xFFF, msg))) {
    return false;
  }
  Request* send = &t->requests.emplace_back(Request{t, next});
  return Post(send, p.data + slo * elem, (shi - slo) * elem,
              MakeTag(t->net_tag, rank_, t->chunk & 0xFFF, msg));
}

void HierExchange::RingFold(Transfer* t) {
  const int hosts = topology_->num_hosts();
  if (t->step >= hosts - 1) return;  // all-gather: received in place
  const size_t elem = DataTypeSize(t->type);
  for (Part& p : t->parts) {
    const int piece = ((host_ - t->step - 1) % hosts + hosts) % hosts;
    auto [lo, hi] = Share(p.count, hosts, piece, elem);
    ReduceBuffers(t->type, t->op, p.data + lo * elem, p.data + lo * elem, p.partials, hi - lo);
  }
}

void HierExchange::Reduce(Transfer* t) {
  const int hosts = topology_->num_hosts();
  const size_t elem = DataTypeSize(t->type);
  for (const Part& p : t->parts) {
    const size_t bytes = p.count * elem;
    // Partial of host h: ours in p.data, the others' in p.partials in host
    // order (ours left out). Reduce in host order so every rank gets the
    // same bits; with ours first, in place.
    auto partial = [&](int h) -> char* {
      if (h == host_) return p.data;
      return p.partials + (h < host_ ? h : h - 1) * bytes;
    };
    if (host_ < 2) {
      // Ours is among the first two: reduce straight into it (elementwise,
      // so the output may alias an input), no copy back.
      ReduceBuffers(t->type, t->op, p.data, partial(0), partial(1), p.count);
      for (int h = 2; h < hosts; ++h) ReduceBuffers(t->type, t->op, p.data, p.data, partial(h), p.count);
      continue;
    }
    char* acc = partial(0);
    for (int h = 1; h < hosts; ++h) ReduceBuffers(t->type, t->op, acc, acc, partial(h), p.count);
    if (acc != p.data) std::memcpy(p.data, acc, bytes);
  }
}

absl::StatusOr<bool> HierExchange::Finish(ShmOp* op, size_t chunk) {
  auto it = transfers_.find({op, chunk});
  if (it == transfers_.end()) return true;  // no block of this chunk had elements here
  Transfer* t = it->second.get();
  if (links_ != nullptr && links_->failed()) return links_->status();
  if (t->error != UCS_OK) {
    return absl::UnavailableError(absl::StrCat("ucx: all-reduce failed talking to peer rank ",
                                               t->error_peer, ": ", ucs_status_string(t->error)));
  }
  if (t->outstanding.load(std::memory_order_acquire) > 0) return false;
  if (t->ring) {
    const int steps = 2 * (topology_->num_hosts() - 1);
    RingFold(t);
    if (++t->step < steps) {
      // Done requests are dropped (UCX let go of them; links hold none).
      t->requests.clear();
      for (size_t i = 0; i < t->parts.size(); ++i) {
        if (!PostRingStep(t, i)) break;
      }
      if (t->error != UCS_OK) {
        return absl::UnavailableError(absl::StrCat("ucx: all-reduce failed talking to peer rank ",
                                                   t->error_peer, ": ",
                                                   ucs_status_string(t->error)));
      }
      return false;
    }
  } else {
    Reduce(t);
  }
  free_scratch_.push_back(std::move(t->scratch));
  transfers_.erase(it);
  return true;
}

void HierExchange::Abandon(ShmOp* op) {
  if (links_ != nullptr) {
    // The streams cannot skip a message: stop moving data altogether (the
    // communicator is unusable after any failure). The sockets stay open, so
    // peers keep blaming the rank that actually died.
    links_->Stop();
    for (auto it = transfers_.begin(); it != transfers_.end();) {
      it = it->first.first == op ? transfers_.erase(it) : std::next(it);
    }
    return;
  }
  for (auto it = transfers_.begin(); it != transfers_.end();) {
    if (it->first.first != op) {
      ++it;
      continue;
    }
    // Sends to a dead peer complete with an error; receives never would.
    for (Request& r : it->second->requests) {
      if (r.receive && r.handle != nullptr) ucp_request_cancel(worker_, r.handle);
    }
    abandoned_.push_back(std::move(it->second));
    it = transfers_.erase(it);
  }
}

void HierExchange::Sweep() {
  for (auto it = abandoned_.begin(); it != abandoned_.end();) {
    it = (*it)->outstanding == 0 ? abandoned_.erase(it) : std::next(it);
  }
  for (auto it = order_sends_.begin(); it != order_sends_.end();) {
    if (ucp_request_check_status(it->handle) == UCS_INPROGRESS) {
      ++it;
      continue;
    }
    ucp_request_free(it->handle);
    it = order_sends_.erase(it);
  }
}

void HierExchange::PublishOrder(uint64_t d, uint64_t key) {
  ucp_request_param_t param{};
  for (int h = 0; h < topology_->num_hosts(); ++h) {
    if (h == host_) continue;
    OrderSend& s = order_sends_.emplace_back(OrderSend{key, nullptr});
    ucs_status_ptr_t p = ucp_tag_send_nbx((*eps_)[topology_->hosts[h][0]], &s.key, sizeof(s.key),
                                          kOrderTagBase | (d & kOrderMask), &param);
    if (UCS_PTR_IS_PTR(p)) {
      s.handle = p;
    } else {
      // Done at once, or failed: a dead leader shows up as that host's
      // exchange failing.
      order_sends_.pop_back();
    }
  }
}

bool HierExchange::ReceiveOrder(uint64_t d, uint64_t* key) {
  if (order_d_ != d) {
    order_d_ = d;
    order_done_ = false;
    ucp_request_param_t param{};
    ucs_status_ptr_t p = ucp_tag_recv_nbx(worker_, &order_value_, sizeof(order_value_),
                                          kOrderTagBase | (d & kOrderMask), kFullMask, &param);
    if (UCS_PTR_IS_ERR(p)) return false;  // a dead peer fails the op by its own path
    order_handle_ = p;
    order_done_ = p == nullptr;
  }
  if (!order_done_) {
    if (ucp_request_check_status(order_handle_) == UCS_INPROGRESS) return false;
    ucp_request_free(order_handle_);
    order_handle_ = nullptr;
    order_done_ = true;
  }
  *key = order_value_;
  return true;
}

}  // namespace ucx_internal
}  // namespace athanor
