// weft_core.hpp — the backend-neutral core of Weft's torch.distributed
// backend: one Weft communicator for the collectives and one for point to
// point (weft_match.hpp), the c10d::Work objects their operations return,
// and every operation in terms of tensors and c10d's option structs (which
// torch 1.13 and 2.x share). The layer that makes it a process group
// (pg_weft.cpp: c10d::ProcessGroup in 1.13; c10d::Backend in 2.x) only
// forwards to it.
//
// Threads and locks:
//  - Each communicator is a Lane whose mu serialises every Weft call on it
//    made from torch's threads (posts, tests, waits): Weft wants one caller
//    at a time, and the calls come from Python, the DDP reducer, future
//    callbacks and the completion thread.
//  - Weft's progress threads (weft_config_t.progress_thread = 1) drive the
//    operations. A request's callback (Lane::on_done) runs in one, holding
//    Weft's own communicator lock and not the GIL; it marks the Work
//    complete (Work::mutex_, cv_) and queues any follow-up, nothing more.
//  - The completion threads (Completions: their own mutex, conditions and
//    queue; one, more while a callback waits) run what may call Weft or
//    Python: they mark futures (future callbacks — DDP comm hooks, Python
//    .then() — may call back into this process group, wait for another
//    future or take the GIL, so they never run under Weft's lock) and move
//    point-to-point matching on (weft_match.cpp). A callback may drop the
//    last reference to the group: ~Core then runs on a completion thread
//    itself, so the threads' state is a Completions they share
//    (shared_ptr) and never the Core, and they run every job still queued
//    before they end.
//  - Work::wait() without a timeout drives its requests itself (weft_wait
//    under the lane's mu): the caller then gets the result without a
//    hand-over from another thread.
//  - Lock order: Match::mu, then a Lane's mu, then Weft's own; Completions'
//    mu is a leaf, never held while a job runs.
#pragma once

#include <weft.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace weft_torch {

class Core;
class Lane;
class Match;

// The completion threads: a queue of jobs and the threads that run them,
// owned jointly by the Core and the threads (whichever lets go last frees
// it). One thread, and another whenever a job is queued while every thread
// is busy (up to kMaxThreads): a future's callback may wait for another
// future of this group (PowerSGD's hook does), which only a free thread
// can mark. A thread idle for kIdleSeconds ends, but the last.
struct Completions : std::enable_shared_from_this<Completions> {
  static constexpr int kMaxThreads = 16;
  static constexpr int kIdleSeconds = 30;
  std::mutex mu;
  std::condition_variable cv, gone;
  std::deque<std::function<void()>> queue;
  bool stop = false;
  int threads = 0, idle = 0;
  void push(std::function<void()> job);
  // Run what is queued, then let the threads end; wait for them (but for
  // the calling thread, when it is one of them: it goes on by itself).
  void shut();

 private:
  void run(); // a thread: run jobs until stopped and drained, or idle
};

// One operation: a c10d::Work over one or more Weft requests, or one that
// the point-to-point matching completes (finish_now).
class WorkWeft : public c10d::Work {
 public:
  // @title: the profiler's name for it ("weft:all_reduce"), recorded with
  // the shapes of @inputs as Gloo's are.
  WorkWeft(
      std::shared_ptr<Completions> done,
      std::weak_ptr<Core> owner,
      int rank,
      c10d::OpType type,
      const char* title,
      const char* name,
      const std::vector<at::Tensor>& inputs,
      std::vector<at::Tensor> outputs);
  ~WorkWeft() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // For the core. Tensors and arrays Weft reads or writes stay alive in
  // the Work until it completes.
  std::vector<at::Tensor> keep;
  std::shared_ptr<void> keep_extra;
  std::function<void()> finish;

  // One of its requests finished (in the thread that finished it); the
  // message of a failure is @lane's last error.
  void request_done(weft_status_t status, Lane* lane);
  // Complete it now, from @source (a receive), with @error or without.
  void finish_now(std::exception_ptr error, int source = -1);
  const char* name() const {
    return name_;
  }

 private:
  friend class Core;
  friend class Lane;
  friend class Match;
  void complete_locked(std::unique_lock<std::mutex>& lock);
  void mark_future();

  std::shared_ptr<Completions> done_;
  std::weak_ptr<Core> owner_;
  Lane* lane_ = nullptr; // its requests' lane (valid while the owner lives)
  const char* name_;
  std::vector<at::Tensor> outputs_;
  std::atomic<int> remaining_{0};
  weft_status_t status_ = WEFT_SUCCESS;
  int source_ = -1;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A post: start one non-blocking Weft call, returning its request.
using Post = std::function<weft_status_t(weft_comm_t, weft_request_t*)>;

// What an operation is made of (Lane::launch).
struct Launch {
  c10d::OpType type = c10d::OpType::UNKNOWN;
  const char* name = ""; // for messages: "allreduce"
  const char* title = nullptr; // the profiler's, if not profiling_title(type)
  std::vector<at::Tensor> inputs{}; // the profiler's shapes
  std::vector<at::Tensor> outputs{}; // Work::result()
  std::vector<at::Tensor> keep{}; // alive until it completes
  std::vector<Post> posts{};
  bool group = false; // in one Weft group: sends and receives side by side
  // Runs once every request succeeded, before the Work completes, in the
  // thread that completes it (a copy out of a staging buffer).
  std::function<void()> finish{};
  std::shared_ptr<void> keep_extra{};
  std::chrono::milliseconds timeout = c10d::kUnsetTimeout; // opts.timeout
};

// One Weft communicator and the requests pending on it.
class Lane {
 public:
  // @drive: a Work's wait() may drive its requests itself (weft_wait,
  // holding mu throughout); not where another thread must post on the
  // lane for the Work to finish (point to point: weft_match.hpp).
  Lane(weft_comm_t comm, bool drive) : comm_(comm), drive_(drive) {}
  ~Lane(); // fails what is pending (an abort), then destroys the communicator
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  // Start @l's posts as @work's requests. Throws, with Weft's message,
  // when the first post fails.
  void launch(const c10::intrusive_ptr<WorkWeft>& work, const Launch& l);
  // Start one request of no Work's: @then(status) runs when it finishes,
  // in the thread that finishes it (Weft's lock held: it must not call
  // Weft). Throws as launch does.
  // With @work, the request is that Work's (which completes with it).
  void post(
      const Post& post,
      std::function<void(weft_status_t)> then,
      c10::intrusive_ptr<WorkWeft> work = {});
  void drive(WorkWeft* work); // weft_wait its requests (mu taken inside)
  // weft_comm_shrink of this lane's communicator, with mu, once the
  // requests a revoke finished are freed (it refuses while any is pending).
  weft_status_t shrink(const std::vector<int>& exclude, bool abort, weft_comm_t* out);
  std::string last_error() const;
  weft_comm_t comm() const {
    return comm_;
  }
  std::mutex mu; // every Weft call on the communicator

 private:
  struct Request {
    weft_request_t req = nullptr; // nullptr once weft_test/weft_wait freed it
    c10::intrusive_ptr<WorkWeft> work;
    std::function<void(weft_status_t)> then;
    Lane* lane = nullptr;
    std::atomic<bool> finished{false};
  };
  static void on_done(void* arg, weft_status_t status);
  void reap(); // with mu: free the requests that finished

  weft_comm_t comm_;
  bool drive_;
  std::list<Request> pending_;
};

class Core : public std::enable_shared_from_this<Core> {
 public:
  // Join a job: rank 0 creates the unique id and a first sequence number
  // and hands them to the other ranks through @store; every rank then
  // creates the communicators, with a progress thread and @timeout
  // bounding every wait.
  static std::shared_ptr<Core> create(
      const c10::intrusive_ptr<c10d::Store>& store,
      int rank,
      int size,
      std::chrono::milliseconds timeout);
  // Over @comm (which it then owns), @seq the sequence number the group
  // agreed on. It splits the communicator for point to point (collective).
  Core(weft_comm_t comm, int rank, int size, uint64_t seq);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  int rank() const {
    return rank_;
  }
  int size() const {
    return size_;
  }
  // c10d's sequence number: agreed at creation, one more per collective
  // (as Gloo counts: every collective, not send/recv).
  uint64_t sequence_number() const {
    return seq_.load();
  }

  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  WorkPtr broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts);
  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts);
  // A sparse COO tensor, SUM (weft_sparse.cpp): complete when it returns.
  WorkPtr sparse_allreduce(at::Tensor& t, const c10d::AllreduceOptions& opts);
  WorkPtr allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts);
  // BAND, BOR, BXOR (weft_colls.cpp): on @root, or on every rank if -1.
  WorkPtr bitwise_reduce(
      at::Tensor& t,
      const c10d::ReduceOp& op,
      int root,
      std::chrono::milliseconds timeout,
      const char* call);
  WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts);
  WorkPtr allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts);
  WorkPtr allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts);
  WorkPtr allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts);
  WorkPtr gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts);
  WorkPtr scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts);
  WorkPtr reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts);
  WorkPtr reduce_scatter_base(
      at::Tensor& output,
      at::Tensor& input,
      const c10d::ReduceScatterOptions& opts);
  WorkPtr alltoall_base(
      at::Tensor& output,
      at::Tensor& input,
      std::vector<int64_t>& output_splits,
      std::vector<int64_t>& input_splits,
      const c10d::AllToAllOptions& opts);
  WorkPtr alltoall(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts);
  WorkPtr barrier(const c10d::BarrierOptions& opts);
  // Blocks: a barrier bounded by @timeout that, when ranks fail to arrive,
  // throws on every rank that did, naming them in Gloo's words.
  void monitored_barrier(std::chrono::milliseconds timeout, bool wait_all_ranks);
  WorkPtr send(std::vector<at::Tensor>& tensors, int dst, int tag);
  WorkPtr recv(std::vector<at::Tensor>& tensors, int src, int tag);
  WorkPtr recv_anysource(std::vector<at::Tensor>& tensors, int tag);

  // weft_comm_describe as JSON text (a collective, in call order).
  std::string describe();
  // weft_comm_dump: the flight recorder to @path ("" : WEFT_TRACE_DIR's
  // file); not collective, any thread. Returns what weft_comm_dump wrote
  // to ("" when it was WEFT_TRACE_DIR's file: its name is Weft's).
  std::string dump(const std::string& path);
  // A Work.wait() that timed out: the recorder to WEFT_TRACE_DIR, if set
  // (as torch's NCCL watchdog dumps its flight recorder on a timeout).
  void dump_on_timeout(const char* what);

  // weft_comm_revoke: every pending and later operation of this group, on
  // every rank, fails (from any thread: it takes no lock of ours).
  void revoke();
  // weft_comm_shrink, collective over the live ranks: a Core of the new
  // communicator (nullptr on a rank that excluded itself), and in
  // @parent_ranks each new rank's rank in this group (an allgather on the
  // new communicator, so every member has the same map).
  std::shared_ptr<Core> shrink(
      const std::vector<int64_t>& exclude,
      bool abort,
      std::vector<int64_t>& parent_ranks);
  // weft_comm_failed_ranks: (rank, how) pairs, how as Weft names it.
  std::vector<std::pair<int64_t, std::string>> failed_ranks();

 private:
  friend class Match;
  c10::intrusive_ptr<WorkWeft> make_work(const Launch& l);
  // Start @l on the collectives' communicator as one Work.
  c10::intrusive_ptr<WorkWeft> launch(Launch l);

  int rank_, size_;
  std::atomic<uint64_t> seq_;
  // Held while collectives are posted: a call that posts several, one
  // after another (a sparse all_reduce), keeps them in call order.
  std::recursive_mutex order_mu_;
  std::shared_ptr<Completions> done_;
  std::unique_ptr<Lane> lane_; // the collectives'
  std::shared_ptr<Match> match_; // point to point, on a lane of its own
};

// Checks shared by the collectives: CPU, dense, contiguous (TORCH_CHECK
// errors that name the call and the tensor).
void check_tensor(const at::Tensor& t, const char* call, const char* what);
weft_datatype_t reduce_dtype(const at::Tensor& t, const char* call);
weft_op_t reduce_op(const c10d::ReduceOp& op, const char* call);
std::runtime_error weft_error(const char* call, weft_status_t st, const std::string& msg);
// The name torch's profiler shows for an operation, as Gloo's with
// "weft:" ("weft:all_reduce").
const char* profiling_title(c10d::OpType type);

} // namespace weft_torch
