#include "coordinator/wire/proto_json.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/type_resolver_util.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace athanor::coord {

namespace pb = google::protobuf;

// Protobuf's JSON printer, over a deterministic serialisation: map entries
// (a spec's env, a node's labels) come out sorted, so a record always
// encodes to the same text.
std::string ToProtoJson(const pb::Message& row) {
  static pb::util::TypeResolver* const resolver =
      pb::util::NewTypeResolverForDescriptorPool("type.googleapis.com", pb::DescriptorPool::generated_pool());
  std::string binary;
  {
    pb::io::StringOutputStream stream(&binary);
    pb::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    row.SerializeToCodedStream(&coded);
  }
  pb::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  auto status = pb::util::BinaryToJsonString(
      resolver, absl::StrCat("type.googleapis.com/", row.GetDescriptor()->full_name()), binary, &out, options);
  // Only a message the generated pool lacks could fail: a build error.
  ATHANOR_CHECK(status.ok()) << status.ToString();
  return out;
}

absl::Status FromProtoJson(const char* what, std::string_view text, pb::Message* row) {
  auto status = pb::util::JsonStringToMessage(std::string(text), row, pb::util::JsonParseOptions());
  if (!status.ok()) return absl::DataLossError(absl::StrCat(what, " record: ", status.message().ToString()));
  return absl::OkStatus();
}

absl::Status RowError(const char* what, const absl::Status& conversion) {
  if (conversion.ok()) return conversion;
  return absl::DataLossError(absl::StrCat(what, " record: ", conversion.message()));
}

}  // namespace athanor::coord
