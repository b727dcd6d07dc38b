// weft_match.hpp — torch's point to point on Weft: tags, receives from any
// rank, and sends and receives that never wait behind a collective.
//
// Weft matches a peer's sends with this rank's receives from it in call
// order, and knows no tags (weft.h). torch's send and recv carry a tag and
// match by (peer, tag), in order for each pair and tag, whatever the order
// of other tags (Gloo's semantics); recvAnysource takes the first message
// of its tag to arrive from any rank. So every torch send here is two Weft
// messages to the peer, side by side: a 16-byte envelope (tag, length) and
// the payload, from the tensor itself. A receive from a peer asks for that
// peer's next envelope; when its tag matches, the payload goes straight
// into the tensor. An envelope of another tag waits, its payload still in
// the wire, until a receive of its tag comes, or until a later message of
// that peer is wanted: its payload then goes to a buffer of its own, and a
// receive of its tag later copies it out. A receive from any rank asks
// every peer for its next envelope and takes, in arrival order, the first
// whose tag matches; the envelopes of the others wait as above.
//
// Why a communicator of its own (split from the collectives' one at
// init): an envelope asked for stays posted until that peer sends again —
// the other peers asked by a receive from any rank may never — and Weft's
// collectives run in call order behind the receives posted before them,
// on connections whose messages must arrive in order. Here they never meet.
//
// Costs: a second communicator per process group (its connections, a
// progress thread and the watch's; about 5 MB, mostly its staging); one
// more message per send (16 bytes, sent with the payload, so a round
// trip's latency grows by a small message's, not by a round trip); a copy
// for a message that arrives before a receive of its tag while a later one
// of the same peer is wanted; and, when an envelope arrives, a hop to the
// completion thread, which asks Weft for the payload (Weft's callbacks may
// not call Weft).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "weft_core.hpp"

namespace weft_torch {

// What precedes every payload on the point-to-point communicator.
struct Envelope {
  uint32_t magic; // kEnvelopeMagic: a stream out of step is caught at once
  int32_t tag;
  uint64_t bytes;
};
static_assert(sizeof(Envelope) == 16, "an envelope is 16 bytes on the wire");

class Match : public std::enable_shared_from_this<Match> {
 public:
  // Over @comm, split from @core's collectives' communicator (it owns it).
  Match(Core* core, weft_comm_t comm);
  ~Match();
  // The group goes: every receive still waiting fails, the communicator
  // is aborted if anything is posted, and freed.
  void shut();
  // weft_comm_revoke on the point-to-point communicator: what waits fails.
  void revoke();

  c10::intrusive_ptr<WorkWeft> send(const at::Tensor& t, int dst, int tag);
  // @src -1: from any rank (recvAnysource).
  c10::intrusive_ptr<WorkWeft> recv(const at::Tensor& t, int src, int tag);

 private:
  // Where a peer's stream stands: the next message from it is an
  // envelope (IDLE; ASKED once a receive for it is posted) or the payload
  // of the envelope in env (ARRIVED: still in the wire; PAYLOAD: a receive
  // for it is posted).
  enum class Phase { IDLE, ASKED, ARRIVED, PAYLOAD };
  struct Peer {
    Phase phase = Phase::IDLE;
    Envelope env{};
    uint64_t arrival = 0; // order among the envelopes that arrived
  };
  // A receive torch asked for and no message has been given yet.
  struct Want {
    int src; // -1: any rank
    int tag;
    at::Tensor tensor;
    c10::intrusive_ptr<WorkWeft> work;
  };
  // A message whose payload was read into a buffer of its own.
  struct Held {
    int src;
    int tag;
    at::Tensor bytes; // uint8
  };

  void step(); // with mu_: give messages to receives, ask peers for more
  bool from_held(Want& w);
  bool from_wire(Want& w);
  void ask_more(const Want& w);
  void ask_envelope(int peer);
  void take_payload(int peer, Want* w); // into @w's tensor, or held if null
  void on_envelope(int peer, weft_status_t status);
  void on_payload(int peer, weft_status_t status);
  void fail_all(const std::string& why); // with mu_: the communicator died
  void later(void (Match::*fn)(int, weft_status_t), int peer, weft_status_t status);
  bool accepts(const Want& w, int peer) const {
    return w.src < 0 || w.src == peer;
  }

  Core* core_;
  int rank_, size_;
  std::shared_ptr<Completions> done_;
  std::unique_ptr<Lane> lane_;
  std::mutex mu_;
  std::vector<Peer> peers_;
  std::list<Want> wants_; // in the order torch asked
  std::list<Held> held_; // in arrival order
  std::map<int, Held> held_pending_; // [peer]: its payload being read aside
  uint64_t arrivals_ = 0;
  std::string dead_; // why the communicator died; empty while it lives
};

} // namespace weft_torch
