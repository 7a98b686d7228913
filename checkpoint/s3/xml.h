// XML for S3 responses (ListObjectsV2, InitiateMultipartUpload,
// ListMultipartUploads, CompleteMultipartUpload, Error), parsed by expat.
//
// Parse() builds a small element tree: local names (any namespace prefix is
// dropped), and for each element the character data directly inside it
// (entities, character references and CDATA decoded; comments and processing
// instructions skipped). A document type declaration is refused outright, so
// no entity can expand, and depth, element count and size are capped: a
// response past them is an error, not a tree. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace athanor::xml {

constexpr size_t kMaxDocumentBytes = size_t{64} << 20;
constexpr int kMaxDepth = 32;
constexpr size_t kMaxElements = size_t{1} << 20;

struct Element {
  std::string name;  // local name
  std::string text;  // character data directly inside, concatenated
  std::vector<Element> children;

  // The first child named `name`, or null.
  const Element* Child(absl::string_view name) const;
  // Text of the first child named `name`, or "" when there is none.
  std::string ChildText(absl::string_view name) const;
  // Every child named `name`, in document order.
  std::vector<const Element*> Children(absl::string_view name) const;
};

// The root element; InvalidArgument naming expat's reason and line for a
// document that is not well-formed XML, has a DTD, or is past a cap.
absl::StatusOr<Element> Parse(absl::string_view doc);

// Text of the first element named `tag` anywhere in `doc` (depth first), or
// "" when there is none or `doc` is not XML (S3 error bodies may be empty or
// HTML from a proxy).
std::string FindText(absl::string_view doc, absl::string_view tag);

std::string Escape(absl::string_view text);

}  // namespace athanor::xml
