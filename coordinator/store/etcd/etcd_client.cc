#include "coordinator/store/etcd/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <functional>
#include <limits>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "proto/etcd/rpc.grpc.pb.h"
#include "security/private_file.h"

namespace athanor::coord::etcd {
namespace {

namespace pb = ::etcdserverpb;
using Clock = std::chrono::system_clock;

// Caps on what members send back, checked before use.
constexpr int kMaxMembers = 128;
constexpr int kMaxClientUrls = 16;
// Largest answer taken (a page of LoadAll); etcd's own requests are capped
// by its --max-request-bytes.
constexpr int kMaxReceiveBytes = 256 << 20;
// An attempt on one member gets at least this much of the call's deadline
// (or all that is left), so that a member that hangs leaves time to ask the
// next one, and a slow but healthy one still answers.
constexpr std::chrono::milliseconds kMinAttempt{1000};
// The pause after a round in which every member failed.
constexpr std::chrono::milliseconds kRoundPause{100};

absl::Status FromGrpc(const grpc::Status& s, const std::string& member, absl::string_view call) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("etcd ", member, ": ", call, ": ", s.error_message()));
}

// Retrying on another member helps only when this one could not be reached
// or did not answer in time; etcd's own refusals are the same everywhere.
bool MoveOn(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  // A member that comes back is found again within seconds (gRPC's default
  // backoff grows to two minutes). The minimum is left alone: gRPC also
  // takes it as the connect timeout (20 s by default).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // gRPC 1.51's pick_first waits for the next name resolution before it
  // reconnects a failed member, and resolves at most every 30 s by default:
  // a member that was down at first would stay unreachable that long.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
  // A member whose machine vanished (no RST) is noticed by pings; etcd
  // allows one every 5 s (--grpc-keepalive-min-time) while calls are open.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  return args;
}

// "http://h:2379" -> "h:2379"; empty for a URL this client cannot dial.
std::string EndpointOfUrl(const std::string& url, bool tls) {
  absl::string_view scheme = tls ? "https://" : "http://";
  if (!absl::StartsWith(url, scheme)) return "";
  std::string rest = url.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  return rest;
}

KeyValue ToKeyValue(const ::mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

pb::Compare ToCompare(const Compare& c) {
  pb::Compare out;
  out.set_key(c.key);
  switch (c.result) {
    case Compare::Result::kEqual: out.set_result(pb::Compare::EQUAL); break;
    case Compare::Result::kGreater: out.set_result(pb::Compare::GREATER); break;
    case Compare::Result::kLess: out.set_result(pb::Compare::LESS); break;
    case Compare::Result::kNotEqual: out.set_result(pb::Compare::NOT_EQUAL); break;
  }
  switch (c.target) {
    case Compare::Target::kVersion:
      out.set_target(pb::Compare::VERSION);
      out.set_version(c.number);
      break;
    case Compare::Target::kCreateRevision:
      out.set_target(pb::Compare::CREATE);
      out.set_create_revision(c.number);
      break;
    case Compare::Target::kModRevision:
      out.set_target(pb::Compare::MOD);
      out.set_mod_revision(c.number);
      break;
    case Compare::Target::kValue:
      out.set_target(pb::Compare::VALUE);
      out.set_value(c.value);
      break;
    case Compare::Target::kLease:
      out.set_target(pb::Compare::LEASE);
      out.set_lease(c.number);
      break;
  }
  return out;
}

pb::RequestOp ToRequestOp(const Op& op) {
  pb::RequestOp out;
  switch (op.kind) {
    case Op::Kind::kPut: {
      pb::PutRequest* put = out.mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
      put->set_lease(op.lease);
      break;
    }
    case Op::Kind::kDelete: {
      pb::DeleteRangeRequest* del = out.mutable_request_delete_range();
      del->set_key(op.key);
      del->set_range_end(op.range_end);
      break;
    }
    case Op::Kind::kRange: {
      pb::RangeRequest* range = out.mutable_request_range();
      range->set_key(op.key);
      range->set_range_end(op.range_end);
      break;
    }
  }
  return out;
}

int64_t ClampToInt64(uint64_t v) {
  return v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
             ? std::numeric_limits<int64_t>::max()
             : static_cast<int64_t>(v);
}

}  // namespace

struct EtcdClient::Channels {
  struct Member {
    std::string endpoint;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::KV::Stub> kv;
    std::unique_ptr<pb::Lease::Stub> lease;
    std::unique_ptr<pb::Cluster::Stub> cluster;
    std::unique_ptr<pb::Maintenance::Stub> maintenance;
  };

  static std::unique_ptr<Member> Dial(const std::string& endpoint,
                                      const std::shared_ptr<grpc::ChannelCredentials>& creds) {
    auto m = std::make_unique<Member>();
    m->endpoint = endpoint;
    m->channel = grpc::CreateCustomChannel(endpoint, creds, ChannelArgs());
    m->kv = pb::KV::NewStub(m->channel);
    m->lease = pb::Lease::NewStub(m->channel);
    m->cluster = pb::Cluster::NewStub(m->channel);
    m->maintenance = pb::Maintenance::NewStub(m->channel);
    return m;
  }

  using Attempt = std::function<grpc::Status(Member&, grpc::ClientContext*)>;
  // `answered_by` (optional): the member that answered, for messages.
  static absl::Status Call(EtcdClient& client, absl::string_view name, const Attempt& attempt,
                           std::string* answered_by = nullptr);

  bool tls = false;
  std::shared_ptr<grpc::ChannelCredentials> creds;
  std::vector<std::unique_ptr<Member>> members;  // constant after Create
};

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(
    const EtcdUri& uri, const EtcdTls& tls, std::chrono::milliseconds call_timeout) {
  if (uri.endpoints.empty()) return absl::InvalidArgumentError("etcd: no endpoint");
  if (call_timeout <= std::chrono::milliseconds::zero()) {
    return absl::InvalidArgumentError("etcd: the call timeout must be positive");
  }
  auto channels = std::make_unique<Channels>();
  if (tls.ca_file.empty()) {
    if (!tls.cert_file.empty() || !tls.key_file.empty()) {
      return absl::InvalidArgumentError("etcd: a client certificate needs a CA file too");
    }
    channels->creds = grpc::InsecureChannelCredentials();
  } else {
    if (tls.cert_file.empty() != tls.key_file.empty()) {
      return absl::InvalidArgumentError("etcd: a client certificate needs both its cert and key file");
    }
    grpc::SslCredentialsOptions options;
    ASSIGN_OR_RETURN(options.pem_root_certs, security::ReadSmallFile(tls.ca_file));
    if (!tls.cert_file.empty()) {
      ASSIGN_OR_RETURN(options.pem_cert_chain, security::ReadSmallFile(tls.cert_file));
      ASSIGN_OR_RETURN(options.pem_private_key, security::ReadPrivateFile(tls.key_file));
    }
    channels->creds = grpc::SslCredentials(options);
    channels->tls = true;
  }
  for (const std::string& endpoint : uri.endpoints) {
    channels->members.push_back(Channels::Dial(endpoint, channels->creds));
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(uri, call_timeout, std::move(channels)));
}

EtcdClient::EtcdClient(EtcdUri uri, std::chrono::milliseconds call_timeout,
                       std::unique_ptr<Channels> channels)
    : uri_(std::move(uri)), call_timeout_(call_timeout), channels_(std::move(channels)) {}

EtcdClient::~EtcdClient() = default;

// Runs `attempt` on the member that answered last, then on the next ones
// while it fails Unavailable or DeadlineExceeded and the call's deadline
// lasts. `attempt` fills its answer itself; its grpc::Status decides.
absl::Status EtcdClient::Channels::Call(EtcdClient& client, absl::string_view name,
                                        const Attempt& attempt, std::string* answered_by) {
  const Channels& self = *client.channels_;
  const Clock::time_point deadline = Clock::now() + client.call_timeout_;
  const size_t n = self.members.size();
  size_t i;
  {
    absl::MutexLock lock(&client.mu_);
    i = client.current_;
  }
  // Each attempt gets a share of the deadline, so that one hung member
  // cannot use all of it.
  const std::chrono::milliseconds share =
      std::max(client.call_timeout_ / static_cast<int64_t>(n), kMinAttempt);
  grpc::Status last;
  std::string last_member;
  for (size_t tries = 0;; ++tries) {
    Member& m = *self.members[i];
    const Clock::time_point now = Clock::now();
    if (tries > 0 && now >= deadline) break;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::min(deadline, now + share));
    grpc::Status s = attempt(m, &ctx);
    if (s.ok()) {
      if (answered_by != nullptr) *answered_by = m.endpoint;
      absl::MutexLock lock(&client.mu_);
      client.current_ = i;
      return absl::OkStatus();
    }
    last = s;
    last_member = m.endpoint;
    if (!MoveOn(s)) break;
    i = (i + 1) % n;
    // Every member failed in a row (refused connections fail at once, and
    // so does a cluster without a leader): pause before the next round
    // rather than spin until the deadline.
    if ((tries + 1) % n == 0) {
      absl::SleepFor(absl::FromChrono(std::min<Clock::duration>(
          kRoundPause, std::max<Clock::duration>(deadline - Clock::now(), Clock::duration::zero()))));
    }
  }
  return FromGrpc(last, last_member, name);
}

absl::StatusOr<RangeResult> EtcdClient::Range(const std::string& key, const std::string& range_end,
                                              int64_t limit) {
  if (limit < 0) return absl::InvalidArgumentError("etcd: Range: negative limit");
  pb::RangeRequest req;
  req.set_key(key);
  req.set_range_end(range_end);
  req.set_limit(limit);
  pb::RangeResponse resp;
  std::string member;
  RETURN_IF_ERROR(Channels::Call(*this, "Range", [&](Channels::Member& m, grpc::ClientContext* ctx) {
    return m.kv->Range(ctx, req, &resp);
  }, &member));
  if (limit > 0 && resp.kvs_size() > limit) {
    return absl::InternalError(
        absl::StrCat("etcd ", member, ": Range: ", resp.kvs_size(), " keys answered for a limit of ", limit));
  }
  RangeResult out;
  out.kvs.reserve(resp.kvs_size());
  for (const ::mvccpb::KeyValue& kv : resp.kvs()) out.kvs.push_back(ToKeyValue(kv));
  out.revision = resp.header().revision();
  out.more = resp.more();
  return out;
}

absl::StatusOr<TxnResult> EtcdClient::Txn(const std::vector<Compare>& compares,
                                          const std::vector<Op>& success,
                                          const std::vector<Op>& failure) {
  pb::TxnRequest req;
  for (const Compare& c : compares) *req.add_compare() = ToCompare(c);
  for (const Op& op : success) *req.add_success() = ToRequestOp(op);
  for (const Op& op : failure) *req.add_failure() = ToRequestOp(op);
  pb::TxnResponse resp;
  std::string member;
  RETURN_IF_ERROR(Channels::Call(*this, "Txn", [&](Channels::Member& m, grpc::ClientContext* ctx) {
    return m.kv->Txn(ctx, req, &resp);
  }, &member));
  const std::vector<Op>& ran = resp.succeeded() ? success : failure;
  if (static_cast<size_t>(resp.responses_size()) != ran.size()) {
    return absl::InternalError(absl::StrCat("etcd ", member, ": Txn: ", resp.responses_size(),
                                            " answers for ", ran.size(), " operations"));
  }
  TxnResult out;
  out.succeeded = resp.succeeded();
  out.revision = resp.header().revision();
  for (size_t k = 0; k < ran.size(); ++k) {
    if (ran[k].kind != Op::Kind::kRange) continue;
    const pb::ResponseOp& r = resp.responses(static_cast<int>(k));
    if (!r.has_response_range()) {
      return absl::InternalError(absl::StrCat("etcd ", member, ": Txn: operation ", k, " (a range) answered otherwise"));
    }
    std::vector<KeyValue>& kvs = out.ranges.emplace_back();
    kvs.reserve(r.response_range().kvs_size());
    for (const ::mvccpb::KeyValue& kv : r.response_range().kvs()) kvs.push_back(ToKeyValue(kv));
  }
  return out;
}

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value,
                                        int64_t lease) {
  pb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  pb::PutResponse resp;
  RETURN_IF_ERROR(Channels::Call(*this, "Put", [&](Channels::Member& m, grpc::ClientContext* ctx) {
    return m.kv->Put(ctx, req, &resp);
  }));
  return resp.header().revision();
}

absl::StatusOr<Lease> EtcdClient::GrantLease(int64_t ttl_s) {
  if (ttl_s <= 0) return absl::InvalidArgumentError(absl::StrCat("etcd: GrantLease: TTL ", ttl_s, " s"));
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl_s);
  pb::LeaseGrantResponse resp;
  std::string member;
  RETURN_IF_ERROR(Channels::Call(*this, "GrantLease", [&](Channels::Member& m, grpc::ClientContext* ctx) {
    return m.lease->LeaseGrant(ctx, req, &resp);
  }, &member));
  if (!resp.error().empty()) {
    return absl::UnavailableError(absl::StrCat("etcd ", member, ": GrantLease: ", resp.error()));
  }
  if (resp.id() == 0 || resp.ttl() <= 0) {
    return absl::InternalError(absl::StrCat("etcd ", member, ": GrantLease: granted lease ", resp.id(),
                                            " with TTL ", resp.ttl()));
  }
  return Lease{resp.id(), resp.ttl()};
}

absl::StatusOr<int64_t> EtcdClient::KeepAlive(int64_t lease) {
  pb::LeaseKeepAliveRequest req;
  req.set_id(lease);
  pb::LeaseKeepAliveResponse resp;
  std::string member;
  RETURN_IF_ERROR(Channels::Call(*this, "KeepAlive", [&](Channels::Member& m, grpc::ClientContext* ctx) {
    std::unique_ptr<grpc::ClientReaderWriter<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>>
        stream = m.lease->LeaseKeepAlive(ctx);
    bool answered = stream->Write(req) && stream->Read(&resp);
    stream->WritesDone();
    grpc::Status s = stream->Finish();
    if (!s.ok()) return s;
    if (!answered) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream closed without an answer");
    return grpc::Status::OK;
  }, &member));
  if (resp.id() != lease) {
    return absl::InternalError(
        absl::StrCat("etcd ", member, ": KeepAlive: asked for lease ", lease, ", answered for ", resp.id()));
  }
  if (resp.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd ", member, ": KeepAlive: lease ", lease, " expired or was revoked"));
  }
  return resp.ttl();
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  pb::LeaseRevokeRequest req;
  req.set_id(lease);
  pb::LeaseRevokeResponse resp;
  return Channels::Call(*this, "RevokeLease", [&](Channels::Member& m, grpc::ClientContext* ctx) {
    return m.lease->LeaseRevoke(ctx, req, &resp);
  });
}

absl::StatusOr<std::vector<MemberStatus>> EtcdClient::Members() {
  const Clock::time_point deadline = Clock::now() + call_timeout_;
  pb::MemberListRequest req;
  pb::MemberListResponse resp;
  std::string member;
  RETURN_IF_ERROR(Channels::Call(*this, "MemberList", [&](Channels::Member& m, grpc::ClientContext* ctx) {
    return m.cluster->MemberList(ctx, req, &resp);
  }, &member));
  if (resp.members_size() > kMaxMembers) {
    return absl::InternalError(
        absl::StrCat("etcd ", member, ": MemberList: ", resp.members_size(), " members (at most ", kMaxMembers, " taken)"));
  }
  std::vector<MemberStatus> out(resp.members_size());
  std::vector<std::string> endpoints(out.size());
  for (size_t k = 0; k < out.size(); ++k) {
    const pb::Member& m = resp.members(static_cast<int>(k));
    if (m.clienturls_size() > kMaxClientUrls) {
      return absl::InternalError(absl::StrCat("etcd ", member, ": MemberList: member ", m.name(), " lists ",
                                              m.clienturls_size(), " client URLs"));
    }
    out[k].id = m.id();
    out[k].name = m.name();
    out[k].client_urls.assign(m.clienturls().begin(), m.clienturls().end());
    for (const std::string& url : out[k].client_urls) {
      endpoints[k] = EndpointOfUrl(url, channels_->tls);
      if (!endpoints[k].empty()) break;
    }
  }
  // Each member asked directly, all at once, within what is left of the
  // call's deadline; a member known by its endpoint reuses its channel.
  std::vector<std::thread> askers;
  askers.reserve(out.size());
  for (size_t k = 0; k < out.size(); ++k) {
    if (endpoints[k].empty()) continue;  // not started yet, or no URL we can dial
    askers.emplace_back([&, k] {
      std::unique_ptr<Channels::Member> dialed;
      Channels::Member* member = nullptr;
      for (auto& known : channels_->members) {
        if (known->endpoint == endpoints[k]) member = known.get();
      }
      if (member == nullptr) {
        dialed = Channels::Dial(endpoints[k], channels_->creds);
        member = dialed.get();
      }
      grpc::ClientContext ctx;
      ctx.set_deadline(deadline);
      pb::StatusRequest sreq;
      pb::StatusResponse sresp;
      if (!member->maintenance->Status(&ctx, sreq, &sresp).ok()) return;
      out[k].reachable = true;
      out[k].is_leader = sresp.leader() != 0 && sresp.leader() == out[k].id;
      out[k].raft_index = ClampToInt64(sresp.raftindex());
      out[k].raft_term = ClampToInt64(sresp.raftterm());
      out[k].db_size = sresp.dbsize();
    });
  }
  for (std::thread& t : askers) t.join();
  return out;
}

}  // namespace athanor::coord::etcd
