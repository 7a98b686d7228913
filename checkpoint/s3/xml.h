// A deliberately small XML reader for S3 responses (ListObjectsV2,
// InitiateMultipartUpload, ListMultipartUploads, Error). It finds elements by
// tag name and returns their raw inner text, decoding the five predefined
// entities and numeric character references. No DTDs, namespaces are ignored
// by matching on the local name, attributes are skipped. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace athanor::xml {

// Inner XML of every element named `tag` (at any depth, not nested in
// itself), in document order.
std::vector<std::string> Elements(absl::string_view doc, absl::string_view tag);
// Decoded text of the first element named `tag`, or "" when absent.
std::string Text(absl::string_view doc, absl::string_view tag);
// Decodes &amp; &lt; &gt; &quot; &apos; &#N; &#xN; (UTF-8 output).
std::string Unescape(absl::string_view text);
std::string Escape(absl::string_view text);

}  // namespace athanor::xml
