// ArenaMessages: a gRPC message allocator that places a callback call's
// request and response on one protobuf arena, which starts in a block inside
// the holder itself.
//
// A heartbeat reply carries every rank its node should run, each with its
// whole environment: dozens of small strings and map nodes per rank. On the
// heap each is a separate allocation and a separate free, and at 1,000
// agents those made up a tenth of the coordinator's CPU (docs/benchmarks.md,
// "Coordinator at fleet scale"). On the arena they are carved from one block
// and let go together when gRPC releases the call.
//
// Thread-safe: each call gets its own holder. The allocator must outlive the
// server it is registered with (grpc::MessageAllocator's contract).
#pragma once

#include <cstddef>

#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

namespace athanor::coord {

template <typename Request, typename Response, size_t kInlineBytes = 8192>
class ArenaMessages final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override { return new Holder; }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder() : arena_(Options(block_)) {
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&arena_));
      this->set_response(google::protobuf::Arena::CreateMessage<Response>(&arena_));
    }
    // gRPC calls this once the call is over; the arena's destructor runs the
    // messages' cleanups and frees any blocks it added past the first.
    void Release() override { delete this; }

   private:
    static google::protobuf::ArenaOptions Options(char* block) {
      google::protobuf::ArenaOptions o;
      o.initial_block = block;
      o.initial_block_size = kInlineBytes;
      return o;
    }

    alignas(std::max_align_t) char block_[kInlineBytes];
    google::protobuf::Arena arena_;  // after block_: built on it
  };
};

}  // namespace athanor::coord
