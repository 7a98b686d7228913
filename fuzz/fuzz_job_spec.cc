// Fuzzes job-spec validation from a decoded proto: the input is a serialized
// rpc::JobSpec (as SubmitJob receives it), converted and validated as the
// coordinator does before anything reaches its state machine.
#include <cstddef>
#include <cstdint>

#include "coordinator/model/validation.h"
#include "coordinator/wire/proto_convert.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/athanor.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in strings is expected here
    return true;
  }();
  (void)quiet;
  athanor::rpc::JobSpec proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  athanor::coord::JobSpec spec = athanor::coord::FromProto(proto);
  (void)athanor::coord::ValidateJobSpec(spec);
  return 0;
}
