// weft_match.cpp — see weft_match.hpp.
#include "weft_match.hpp"

#include <stdexcept>

#include <c10/util/Exception.h>

#include "weft_tensors.hpp"

namespace weft_torch {

namespace {

constexpr uint32_t kEnvelopeMagic = 0x57465431; // "WFT1"
constexpr uint64_t kMaxBytes = uint64_t(1) << 48;

std::exception_ptr failure(const std::string& what) {
  return std::make_exception_ptr(std::runtime_error(what));
}

const at::Tensor& p2p_tensor(const at::Tensor& t, const char* call) {
  check_tensor(t, call, "the tensor");
  return t;
}

} // namespace

Match::Match(Core* core, weft_comm_t comm)
    : core_(core),
      rank_(core->rank()),
      size_(core->size()),
      done_(core->done_),
      lane_(std::make_unique<Lane>(comm, false)),
      peers_(core->size()) {}

Match::~Match() {
  shut();
}

void Match::shut() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!lane_)
      return;
    if (dead_.empty())
      dead_ = "the process group was destroyed before a message came";
    for (auto& w : wants_)
      w.work->finish_now(failure(std::string("weft: ") + w.work->name() + ": " + dead_));
    wants_.clear();
  }
  // Envelopes asked of peers that never sent again are still posted: the
  // lane aborts its communicator and fails them (their jobs see dead_).
  lane_.reset();
}

void Match::revoke() {
  weft_comm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    comm = lane_ ? lane_->comm() : nullptr;
  }
  // Outside mu_: the receives it fails finish in callbacks that take it.
  // The lane lives while the group does (shut() is ~Core's).
  if (comm)
    weft_comm_revoke(comm);
}

c10::intrusive_ptr<WorkWeft> Match::send(const at::Tensor& tensor, int dst, int tag) {
  const at::Tensor& t = p2p_tensor(tensor, "send");
  TORCH_CHECK(dst >= 0 && dst < size_ && dst != rank_, "weft: send: peer ", dst,
              " is not another rank (0..", size_ - 1, ", this is ", rank_, ")");
  auto env = std::make_shared<Envelope>(Envelope{kEnvelopeMagic, tag, nbytes(t)});
  const void* p = t.data_ptr();
  size_t n = nbytes(t);
  Launch l{.type = c10d::OpType::SEND,
           .name = "send",
           .inputs = {t},
           .outputs = {t},
           .keep = {t},
           .posts = {[=, e = env.get()](weft_comm_t c, weft_request_t* r) {
             return weft_isend(e, sizeof(*e), WEFT_UINT8, dst, c, r);
           }},
           .group = true, // the envelope and the payload side by side
           .keep_extra = env};
  if (n > 0)
    l.posts.push_back([=](weft_comm_t c, weft_request_t* r) {
      return weft_isend(p, n, WEFT_UINT8, dst, c, r);
    });
  auto work = core_->make_work(l);
  std::lock_guard<std::mutex> lock(mu_); // the lane lives while mu_ says so
  TORCH_CHECK(lane_ && dead_.empty(), "weft: send: ", dead_);
  lane_->launch(work, l);
  return work;
}

c10::intrusive_ptr<WorkWeft> Match::recv(const at::Tensor& tensor, int src, int tag) {
  bool any = src < 0;
  const char* call = any ? "recvAnysource" : "recv";
  const at::Tensor& t = p2p_tensor(tensor, call);
  TORCH_CHECK(any || (src < size_ && src != rank_), "weft: recv: peer ", src,
              " is not another rank (0..", size_ - 1, ", this is ", rank_, ")");
  TORCH_CHECK(size_ > 1, "weft: ", call, ": a group of one rank has no one to receive from");
  Launch l{.type = any ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV,
           .name = call,
           .inputs = {t},
           .outputs = {t},
           .keep = {t}};
  auto work = core_->make_work(l);
  std::lock_guard<std::mutex> lock(mu_);
  if (!dead_.empty()) {
    work->finish_now(failure(std::string("weft: ") + call + ": " + dead_));
    return work;
  }
  wants_.push_back({src, tag, t, work});
  step();
  return work;
}

// Give every waiting receive, in the order torch asked, the first message
// of its peer(s) and tag: one read already, else one whose envelope is in;
// then ask the peers the rest wait for.
void Match::step() {
  try {
    for (auto it = wants_.begin(); it != wants_.end();) {
      if (from_held(*it) || from_wire(*it))
        it = wants_.erase(it);
      else
        ++it;
    }
    for (const auto& w : wants_)
      ask_more(w);
  } catch (const std::exception& e) { // Weft refused a post: the lane is dead
    fail_all(e.what());
  }
}

bool Match::from_held(Want& w) {
  for (auto it = held_.begin(); it != held_.end(); ++it) {
    if (!accepts(w, it->src) || it->tag != w.tag)
      continue;
    size_t want = nbytes(w.tensor), got = static_cast<size_t>(it->bytes.numel());
    if (want != got)
      w.work->finish_now(failure(
          std::string("weft: ") + w.work->name() + ": rank " + std::to_string(it->src) +
          " sent " + std::to_string(got) + " bytes with tag " + std::to_string(w.tag) +
          ", but the receive's tensor holds " + std::to_string(want)));
    else {
      if (got > 0)
        w.tensor.view({-1}).view(at::kByte).copy_(it->bytes);
      w.work->finish_now(nullptr, it->src);
    }
    held_.erase(it);
    return true;
  }
  return false;
}

// The envelope of @w's tag that arrived first among its peers: its payload
// straight into the tensor (of another size: read aside, and from_held
// fails the receive saying so).
bool Match::from_wire(Want& w) {
  int best = -1;
  for (int p = 0; p < size_; p++) {
    const Peer& peer = peers_[p];
    if (accepts(w, p) && peer.phase == Phase::ARRIVED && peer.env.tag == w.tag &&
        (best < 0 || peer.arrival < peers_[best].arrival))
      best = p;
  }
  if (best < 0)
    return false;
  if (peers_[best].env.bytes != nbytes(w.tensor)) {
    take_payload(best, nullptr);
    return false;
  }
  take_payload(best, &w);
  return true;
}

// @w waits on: each of its peers whose next envelope is not asked for yet
// is asked; one whose envelope (of another tag) is in has its payload read
// aside, so that the messages behind it can come.
void Match::ask_more(const Want& w) {
  for (int p = 0; p < size_; p++) {
    if (p == rank_ || !accepts(w, p))
      continue;
    if (peers_[p].phase == Phase::IDLE)
      ask_envelope(p);
    else if (peers_[p].phase == Phase::ARRIVED)
      take_payload(p, nullptr);
  }
}

void Match::later(void (Match::*fn)(int, weft_status_t), int peer, weft_status_t status) {
  done_->push([m = weak_from_this(), fn, peer, status] {
    if (auto self = m.lock())
      (self.get()->*fn)(peer, status);
  });
}

void Match::ask_envelope(int p) {
  Peer& peer = peers_[p];
  peer.phase = Phase::ASKED;
  Envelope* env = &peer.env;
  // The lane's callbacks run while the lane lives, inside this Match's life.
  lane_->post(
      [=](weft_comm_t c, weft_request_t* r) {
        return weft_irecv(env, sizeof(*env), WEFT_UINT8, p, c, r);
      },
      [this, p](weft_status_t st) { later(&Match::on_envelope, p, st); });
}

void Match::take_payload(int p, Want* w) {
  Peer& peer = peers_[p];
  peer.phase = Phase::PAYLOAD;
  size_t n = static_cast<size_t>(peer.env.bytes);
  if (n == 0) { // no payload message: done at once
    if (w)
      w->work->finish_now(nullptr, p);
    else
      held_.push_back({p, peer.env.tag, at::empty({0}, at::kByte)});
    peer.phase = Phase::IDLE;
    return;
  }
  if (w) {
    void* dst = w->tensor.data_ptr();
    w->work->source_ = p;
    lane_->post(
        [=](weft_comm_t c, weft_request_t* r) {
          return weft_irecv(dst, n, WEFT_UINT8, p, c, r);
        },
        [this, p](weft_status_t st) { later(&Match::on_payload, p, st); }, w->work);
    return;
  }
  at::Tensor buf = at::empty({static_cast<int64_t>(n)}, at::kByte);
  held_pending_[p] = Held{p, peer.env.tag, buf};
  void* dst = buf.data_ptr();
  lane_->post(
      [=](weft_comm_t c, weft_request_t* r) { return weft_irecv(dst, n, WEFT_UINT8, p, c, r); },
      [this, p](weft_status_t st) { later(&Match::on_payload, p, st); });
}

void Match::on_envelope(int p, weft_status_t status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dead_.empty())
    return;
  if (status != WEFT_SUCCESS)
    return fail_all(std::string(weft_status_string(status)) + ": " + lane_->last_error());
  Peer& peer = peers_[p];
  if (peer.env.magic != kEnvelopeMagic || peer.env.bytes > kMaxBytes)
    return fail_all("rank " + std::to_string(p) + " sent a message that is not a send's "
                    "envelope: its sends and this rank's receives are out of step");
  peer.phase = Phase::ARRIVED;
  peer.arrival = ++arrivals_;
  step();
}

void Match::on_payload(int p, weft_status_t status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dead_.empty())
    return;
  if (status != WEFT_SUCCESS)
    return fail_all(std::string(weft_status_string(status)) + ": " + lane_->last_error());
  auto it = held_pending_.find(p);
  if (it != held_pending_.end()) {
    held_.push_back(std::move(it->second));
    held_pending_.erase(it);
  }
  peers_[p].phase = Phase::IDLE;
  step();
}

void Match::fail_all(const std::string& why) {
  dead_ = why;
  for (auto& w : wants_)
    w.work->finish_now(failure(std::string("weft: ") + w.work->name() + ": " + why));
  wants_.clear();
}

// ---- the Core's point to point: one tensor per call, as Gloo takes

namespace {

const at::Tensor& one(std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "weft: ", call, " takes one tensor, got ", tensors.size());
  return tensors[0];
}

} // namespace

Core::WorkPtr Core::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  return match_->send(one(tensors, "send"), dst, tag);
}

Core::WorkPtr Core::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  TORCH_CHECK(src >= 0, "weft: recv: peer ", src, " is not a rank");
  return match_->recv(one(tensors, "recv"), src, tag);
}

Core::WorkPtr Core::recv_anysource(std::vector<at::Tensor>& tensors, int tag) {
  return match_->recv(one(tensors, "recvAnysource"), -1, tag);
}

} // namespace weft_torch
