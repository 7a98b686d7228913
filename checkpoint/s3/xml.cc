#include "checkpoint/s3/xml.h"

#include <expat.h>

#include <climits>

#include "absl/strings/str_cat.h"

namespace athanor::xml {
namespace {

absl::string_view LocalName(const char* name) {
  absl::string_view n(name);
  size_t colon = n.rfind(':');
  return colon == absl::string_view::npos ? n : n.substr(colon + 1);
}

// Builds the tree while expat parses. Owned by Parse(); expat calls back on
// the parsing thread only.
struct Builder {
  XML_Parser parser = nullptr;
  Element root;
  std::vector<Element*> stack;  // open elements, innermost last
  size_t elements = 0;
  bool have_root = false;
  std::string error;  // set when a callback stopped the parser

  void Stop(std::string why) {
    if (error.empty()) error = std::move(why);
    XML_StopParser(parser, XML_FALSE);
  }
};

void OnStart(void* user, const XML_Char* name, const XML_Char** /*attributes*/) {
  auto* b = static_cast<Builder*>(user);
  if (!b->error.empty()) return;
  if (++b->elements > kMaxElements) return b->Stop(absl::StrCat("more than ", kMaxElements, " elements"));
  if (static_cast<int>(b->stack.size()) >= kMaxDepth) {
    return b->Stop(absl::StrCat("elements nested deeper than ", kMaxDepth));
  }
  Element* e;
  if (b->stack.empty()) {
    b->have_root = true;
    e = &b->root;
  } else {
    b->stack.back()->children.emplace_back();
    e = &b->stack.back()->children.back();
  }
  e->name = std::string(LocalName(name));
  b->stack.push_back(e);
}

void OnEnd(void* user, const XML_Char* /*name*/) {
  auto* b = static_cast<Builder*>(user);
  if (!b->stack.empty()) b->stack.pop_back();
}

void OnText(void* user, const XML_Char* text, int len) {
  auto* b = static_cast<Builder*>(user);
  if (!b->stack.empty() && b->error.empty()) b->stack.back()->text.append(text, len);
}

void OnDoctype(void* user, const XML_Char* /*name*/, const XML_Char* /*sysid*/,
               const XML_Char* /*pubid*/, int /*has_internal_subset*/) {
  static_cast<Builder*>(user)->Stop("a document type declaration is not allowed");
}

void FindFirst(const Element& e, absl::string_view tag, const Element** found) {
  if (*found != nullptr) return;
  if (e.name == tag) {
    *found = &e;
    return;
  }
  for (const Element& c : e.children) FindFirst(c, tag, found);
}

}  // namespace

const Element* Element::Child(absl::string_view child) const {
  for (const Element& c : children) {
    if (c.name == child) return &c;
  }
  return nullptr;
}

std::string Element::ChildText(absl::string_view child) const {
  const Element* c = Child(child);
  return c == nullptr ? std::string() : c->text;
}

std::vector<const Element*> Element::Children(absl::string_view child) const {
  std::vector<const Element*> out;
  for (const Element& c : children) {
    if (c.name == child) out.push_back(&c);
  }
  return out;
}

absl::StatusOr<Element> Parse(absl::string_view doc) {
  if (doc.size() > kMaxDocumentBytes || doc.size() > static_cast<size_t>(INT_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("XML document of ", doc.size(),
                                                   " bytes is over the limit of ", kMaxDocumentBytes));
  }
  Builder b;
  b.parser = XML_ParserCreate("UTF-8");
  if (b.parser == nullptr) return absl::ResourceExhaustedError("XML: cannot create a parser");
  XML_SetUserData(b.parser, &b);
  XML_SetElementHandler(b.parser, OnStart, OnEnd);
  XML_SetCharacterDataHandler(b.parser, OnText);
  XML_SetStartDoctypeDeclHandler(b.parser, OnDoctype);
  XML_Status st = XML_Parse(b.parser, doc.data(), static_cast<int>(doc.size()), XML_TRUE);
  std::string why;
  if (!b.error.empty()) {
    why = b.error;
  } else if (st != XML_STATUS_OK) {
    why = absl::StrCat(XML_ErrorString(XML_GetErrorCode(b.parser)), " at line ",
                       XML_GetCurrentLineNumber(b.parser));
  } else if (!b.have_root) {
    why = "no root element";
  }
  XML_ParserFree(b.parser);
  if (!why.empty()) return absl::InvalidArgumentError(absl::StrCat("malformed XML: ", why));
  return std::move(b.root);
}

std::string FindText(absl::string_view doc, absl::string_view tag) {
  absl::StatusOr<Element> root = Parse(doc);
  if (!root.ok()) return "";
  const Element* found = nullptr;
  FindFirst(*root, tag, &found);
  return found == nullptr ? std::string() : found->text;
}

std::string Escape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace athanor::xml
