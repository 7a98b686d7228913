// Fuzzes the rank manifest and COMMIT decoders: the input is one JSON text,
// decoded as both; an accepted manifest must satisfy CheckManifest and
// survive an encode/decode round trip.
#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (auto m = athanor::DecodeManifest(text); m.ok()) {
    if (!athanor::CheckManifest(*m).ok()) __builtin_trap();
    auto again = athanor::DecodeManifest(athanor::EncodeManifest(*m));
    if (!again.ok() || again->tensors.size() != m->tensors.size()) __builtin_trap();
  }
  if (auto c = athanor::DecodeCommit(text); c.ok()) {
    auto again = athanor::DecodeCommit(athanor::EncodeCommit(*c));
    if (!again.ok() || again->shards.size() != c->shards.size()) __builtin_trap();
    (void)c->TotalBytes();
  }
  return 0;
}
