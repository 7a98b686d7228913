#include "coordinator/rpc/blob_intake.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/rpc/node_data_service.h"

namespace athanor::coord {

absl::Status CheckDigest(const std::string& digest) {
  bool ok = digest.size() == 71 && absl::StartsWith(digest, "sha256:");
  for (size_t i = 7; ok && i < digest.size(); ++i) {
    ok = absl::ascii_isdigit(digest[i]) || (digest[i] >= 'a' && digest[i] <= 'f');
  }
  if (!ok) return absl::InvalidArgumentError("digest: not \"sha256:\" and 64 lowercase hex digits");
  return absl::OkStatus();
}

absl::Status BlobIntake::Take(bool has_header, const std::string& data) {
  const int64_t n = static_cast<int64_t>(data.size());
  if (has_header || n > kDataChunkBytes || n > size_bytes_ - got_) {
    return absl::InvalidArgumentError(absl::StrCat(method_, ": a piece after the header holds a header, more than ",
                                                   kDataChunkBytes, " bytes, or bytes past size_bytes (", size_bytes_,
                                                   ")"));
  }
  hash_.Update(data.data(), data.size());
  got_ += n;
  return out_->Append(data);
}

absl::Status BlobIntake::Finish() {
  if (got_ != size_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(method_, ": ", got_, " bytes sent of ", size_bytes_));
  }
  const std::string digest = hash_.Finish();
  if (digest != digest_) {
    return absl::InvalidArgumentError(absl::StrCat(method_, ": the bytes hash to ", digest, ", not ", digest_));
  }
  return absl::OkStatus();
}

}  // namespace athanor::coord
