// EtcdClient: the few calls of etcd's v3 gRPC API the coordinator uses (KV
// ranges and transactions, leases, the cluster's members and status), over
// stubs generated from the v3 protos Debian ships (golang-etcd-server-dev;
// proto/etcd/ trims their Go-only options away).
//
// Endpoints: `etcd://h1:2379,h2:2379,h3:2379/PREFIX` (ParseEtcdUri). The
// client holds one channel per member and sends each call to the member that
// answered last; a call that fails Unavailable or DeadlineExceeded moves to
// the next member and is retried there while its deadline lasts, so the loss
// of one member is invisible to callers but for latency. etcd serialises
// every write through its Raft leader, so which member a call reaches does
// not change its result (reads are linearizable: the default).
//
// TLS: with EtcdTls set, every channel verifies the members' certificates
// against `ca_file` and presents `cert_file`/`key_file` when given.
//
// Thread model: thread-safe; calls block their caller (each has a deadline).
// Errors keep etcd's status code (Unavailable, DeadlineExceeded, ...) and
// say which member and which call: "etcd 127.0.0.1:2379: Txn: ...".
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace athanor::coord::etcd {

struct EtcdTls {
  std::string ca_file;    // PEM; empty: plaintext channels
  std::string cert_file;  // client certificate (optional)
  std::string key_file;
};

struct EtcdUri {
  std::vector<std::string> endpoints;  // host:port, in the URI's order
  std::string prefix;                  // "/athanor" by default; never ends in '/'
};

// Parses `etcd://h1:2379,h2:2379/PREFIX`. InvalidArgument naming what is
// wrong: another scheme, no endpoint, an endpoint without a port or with a
// port out of 1..65535, a prefix with characters other than [A-Za-z0-9_./-].
absl::StatusOr<EtcdUri> ParseEtcdUri(const std::string& uri);

// [key, range_end) as etcd reads it: range_end empty is the key alone;
// PrefixEnd(p) is every key that starts with p.
std::string PrefixEnd(const std::string& prefix);

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
};

// One comparison of a transaction (etcd's Compare).
struct Compare {
  enum class Target { kVersion, kCreateRevision, kModRevision, kValue, kLease };
  enum class Result { kEqual, kGreater, kLess, kNotEqual };
  std::string key;
  Target target = Target::kVersion;
  Result result = Result::kEqual;
  int64_t number = 0;  // for every target but kValue
  std::string value;   // for kValue
};

// One operation of a transaction: a put, a delete of [key, range_end) or a
// range read of [key, range_end).
struct Op {
  enum class Kind { kPut, kDelete, kRange };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;      // kPut
  int64_t lease = 0;      // kPut: attach to this lease (0: none)
  std::string range_end;  // kDelete, kRange
  static Op Put(std::string key, std::string value, int64_t lease = 0);
  static Op Delete(std::string key, std::string range_end = "");
  static Op Range(std::string key, std::string range_end = "");
};

struct TxnResult {
  bool succeeded = false;  // the comparisons held: the success ops ran
  int64_t revision = 0;    // the store's revision after the transaction
  // For each kRange op that ran, in order: what it read.
  std::vector<std::vector<KeyValue>> ranges;
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;  // the store's revision the read saw
  bool more = false;     // a limit cut the answer short
};

struct Lease {
  int64_t id = 0;
  int64_t ttl_s = 0;  // as granted
};

// A member of the etcd cluster as the cluster lists it, with its status when
// it answered (reachable false: it did not, within the call's deadline).
struct MemberStatus {
  uint64_t id = 0;
  std::string name;
  std::vector<std::string> client_urls;
  bool reachable = false;
  bool is_leader = false;   // leads etcd's Raft group
  int64_t raft_index = 0;   // how far its log goes (lag = leader's - this)
  int64_t raft_term = 0;
  int64_t db_size = 0;
};

class EtcdClient {
 public:
  // Makes channels to `uri`'s endpoints; connects lazily (the first call
  // fails Unavailable when no member answers). `call_timeout` bounds each
  // call, retries included.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(
      const EtcdUri& uri, const EtcdTls& tls = {},
      std::chrono::milliseconds call_timeout = std::chrono::seconds(5));
  ~EtcdClient();

  const EtcdUri& uri() const { return uri_; }

  // Keys [key, range_end) (range_end empty: the key alone); `limit` 0: all.
  absl::StatusOr<RangeResult> Range(const std::string& key, const std::string& range_end = "",
                                    int64_t limit = 0);
  // If every comparison holds, runs `success`, else `failure`; atomically.
  // etcd refuses more than its --max-txn-ops operations in one transaction
  // (128 by default): InvalidArgument from the member, passed on.
  absl::StatusOr<TxnResult> Txn(const std::vector<Compare>& compares, const std::vector<Op>& success,
                                const std::vector<Op>& failure = {});
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value, int64_t lease = 0);

  absl::StatusOr<Lease> GrantLease(int64_t ttl_s);
  // Renews `lease` once (one round on a LeaseKeepAlive stream): the TTL
  // left, or NotFound when the lease has expired or was revoked.
  absl::StatusOr<int64_t> KeepAlive(int64_t lease);
  absl::Status RevokeLease(int64_t lease);

  // Every member and its status (each asked directly, in parallel).
  absl::StatusOr<std::vector<MemberStatus>> Members();

 private:
  struct Channels;
  EtcdClient(EtcdUri uri, std::chrono::milliseconds call_timeout, std::unique_ptr<Channels> channels);

  const EtcdUri uri_;
  const std::chrono::milliseconds call_timeout_;
  std::unique_ptr<Channels> channels_;
  absl::Mutex mu_;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;  // the member that answered last
};

}  // namespace athanor::coord::etcd
