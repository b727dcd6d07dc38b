// weft_core.hpp — the backend-neutral core of Weft's torch.distributed
// backend: one Weft communicator, the c10d::Work objects its operations
// return, and every collective in terms of tensors and c10d's option
// structs (which torch 1.13 and 2.x share). The layer that makes it a
// process group (pg_weft.cpp: c10d::ProcessGroup in 1.13; c10d::Backend in
// 2.x) only forwards to it.
//
// Threads and locks:
//  - mu_ serialises every Weft call on the communicator made from torch's
//    threads (posts, tests, waits): Weft wants one caller at a time, and
//    the calls come from Python, the DDP reducer and future callbacks.
//  - Weft's progress thread (weft_config_t.progress_thread = 1) drives the
//    operations. It runs Request::on_done when one finishes, holding
//    Weft's own communicator lock and not the GIL; that marks the Work
//    complete (Work::mutex_, cv_) and nothing more.
//  - A Work whose future was asked for is handed to the completion thread
//    (Completions: its own mutex, condition and queue), which marks the
//    future: future callbacks (DDP comm hooks, Python .then()) may call
//    back into this process group or take the GIL, so they never run
//    under Weft's lock. A callback may also drop the last reference to the
//    group: ~Core then runs on the completion thread itself, so that
//    thread's state is a Completions it shares (shared_ptr) and never the
//    Core, and it marks every future still queued before it ends.
//  - Work::wait() without a timeout drives its requests itself (weft_wait
//    under mu_): the caller then gets the result without a hand-over
//    from another thread.
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
class WorkWeft;

// The completion thread's queue, owned jointly by the Core and the thread:
// whichever lets go last frees it.
struct Completions {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<c10::intrusive_ptr<WorkWeft>> queue;
  bool stop = false;
  void push(WorkWeft* work);
  void run(); // the thread: mark futures until stopped and drained
};

// One operation: a c10d::Work over one or more Weft requests.
class WorkWeft : public c10d::Work {
 public:
  WorkWeft(
      Core* core,
      std::weak_ptr<Core> owner,
      int rank,
      c10d::OpType type,
      const char* name,
      std::vector<at::Tensor> outputs);
  ~WorkWeft() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // For the core. Tensors and arrays Weft reads or writes stay alive in
  // the Work until it completes.
  std::vector<at::Tensor> keep;
  std::shared_ptr<void> keep_extra;
  std::function<void()> finish;

 private:
  friend class Core;
  friend struct Completions;
  // One of its requests finished (in the thread that finished it).
  void request_done(weft_status_t status);
  void mark_future();

  Core* core_; // valid while a request of this Work is pending
  std::weak_ptr<Core> owner_;
  const char* name_;
  std::vector<at::Tensor> outputs_;
  std::atomic<int> remaining_{0};
  weft_status_t status_ = WEFT_SUCCESS;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A post: start one non-blocking Weft call, returning its request.
using Post = std::function<weft_status_t(weft_comm_t, weft_request_t*)>;

class Core : public std::enable_shared_from_this<Core> {
 public:
  // Join a job: rank 0 creates the unique id and hands it to the other
  // ranks through @store; every rank then creates the communicator, with a
  // progress thread and @timeout bounding every wait.
  static std::shared_ptr<Core> create(
      const c10::intrusive_ptr<c10d::Store>& store,
      int rank,
      int size,
      std::chrono::milliseconds timeout);
  Core(weft_comm_t comm, int rank, int size);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  int rank() const {
    return rank_;
  }
  int size() const {
    return size_;
  }

  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  WorkPtr broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts);
  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts);
  WorkPtr allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts);
  WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts);
  WorkPtr allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts);
  WorkPtr allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts);
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
  WorkPtr send(std::vector<at::Tensor>& tensors, int dst, int tag);
  WorkPtr recv(std::vector<at::Tensor>& tensors, int src, int tag);

  // weft_comm_describe as JSON text (a collective, in call order).
  std::string describe();
  // weft_comm_dump: the flight recorder to @path ("" : WEFT_TRACE_DIR's
  // file); not collective, any thread. Returns what weft_comm_dump wrote
  // to ("" when it was WEFT_TRACE_DIR's file: its name is Weft's).
  std::string dump(const std::string& path);
  // A Work.wait() that timed out: the recorder to WEFT_TRACE_DIR, if set
  // (as torch's NCCL watchdog dumps its flight recorder on a timeout).
  void dump_on_timeout(const char* what);

 private:
  friend class WorkWeft;
  struct Request {
    weft_request_t req = nullptr; // nullptr once weft_test/weft_wait freed it
    c10::intrusive_ptr<WorkWeft> work;
    std::atomic<bool> finished{false};
  };
  static void on_done(void* arg, weft_status_t status);

  // Start @posts as one Work (inside one Weft group when @group: sends and
  // receives that must run side by side). Throws, with Weft's message,
  // when the first post fails.
  // @finish runs once every request succeeded, before the Work completes,
  // in the thread that completes it (a copy out of a staging buffer).
  c10::intrusive_ptr<WorkWeft> launch(
      c10d::OpType type,
      const char* name,
      std::vector<at::Tensor> outputs,
      std::vector<at::Tensor> keep,
      const std::vector<Post>& posts,
      bool group = false,
      std::function<void()> finish = nullptr,
      std::shared_ptr<void> keep_extra = nullptr);
  void reap(); // with mu_: free the requests that finished
  void drive(WorkWeft* work); // with mu_ taken inside: weft_wait its requests
  void enqueue_future(WorkWeft* work);
  std::string last_error() const;

  weft_comm_t comm_;
  int rank_, size_;
  std::mutex mu_;
  std::list<Request> pending_;

  std::shared_ptr<Completions> done_;
  std::thread done_thread_;
};

// Checks shared by the collectives: CPU, dense, contiguous (TORCH_CHECK
// errors that name the call and the tensor).
void check_tensor(const at::Tensor& t, const char* call, const char* what);
weft_datatype_t reduce_dtype(const at::Tensor& t, const char* call);
weft_op_t reduce_op(const c10d::ReduceOp& op, const char* call);

} // namespace weft_torch
