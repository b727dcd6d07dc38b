// pg_weft.hpp — the torch 1.13 layer: Weft as a c10d::ProcessGroup.
//
// Every method forwards to the backend-neutral Core (weft_core.hpp). torch
// 2.x moves these virtuals to c10d::Backend with the same signatures, so
// its port is this class with another base and constructor.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "weft_core.hpp"

namespace weft_torch {

class ProcessGroupWeft : public c10d::ProcessGroup {
 public:
  // Collective over the ranks of the group: the unique id goes through
  // @store (rank 0 sets it); @timeout bounds every wait of the
  // communicator (the bootstrap and each operation).
  ProcessGroupWeft(
      const c10::intrusive_ptr<c10d::Store>& store,
      int rank,
      int size,
      std::chrono::milliseconds timeout);
  ~ProcessGroupWeft() override;

  const std::string getBackendName() const override {
    return "weft";
  }

  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  WorkPtr broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts)
      override;
  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts)
      override;
  WorkPtr allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts) override;
  WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  WorkPtr allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  WorkPtr _allgather_base(
      at::Tensor& output,
      at::Tensor& input,
      const c10d::AllgatherOptions& opts) override;
  WorkPtr gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override;
  WorkPtr scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override;
  WorkPtr reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  WorkPtr _reduce_scatter_base(
      at::Tensor& output,
      at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override;
  WorkPtr alltoall_base(
      at::Tensor& output,
      at::Tensor& input,
      std::vector<int64_t>& output_splits,
      std::vector<int64_t>& input_splits,
      const c10d::AllToAllOptions& opts) override;
  WorkPtr alltoall(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts) override;
  WorkPtr allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  WorkPtr barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;
  // Agreed when the group was made (rank 0's number, through the store, as
  // Gloo agrees it); setting it again keeps it.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override;
  WorkPtr send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  WorkPtr recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  WorkPtr recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  std::string dump(const std::string& path) {
    return core_->dump(path);
  }
  std::string describe() {
    return core_->describe();
  }

  // A process group over a communicator already made (a shrink's).
  ProcessGroupWeft(std::shared_ptr<Core> core);

  // weft_comm_revoke, weft_comm_shrink and weft_comm_failed_ranks for
  // weft.torch (its revoke, shrink and failed_ranks say what they do).
  void revoke() {
    core_->revoke();
  }
  // The new group (None on a rank that excluded itself) and each of its
  // ranks' rank in this group.
  std::pair<c10::intrusive_ptr<ProcessGroupWeft>, std::vector<int64_t>> shrink(
      const std::vector<int64_t>& exclude,
      bool abort);
  std::vector<std::pair<int64_t, std::string>> failed_ranks() {
    return core_->failed_ranks();
  }

 private:
  std::shared_ptr<Core> core_;
  std::chrono::milliseconds timeout_; // the group's: a monitored barrier's default
};

// The floor of c10d's own dispatch for the benchmark: every operation is
// complete at once and moves nothing.
class ProcessGroupNull : public c10d::ProcessGroup {
 public:
  ProcessGroupNull(int rank, int size);
  const std::string getBackendName() const override {
    return "weft_null";
  }
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
};

} // namespace weft_torch
