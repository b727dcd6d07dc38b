// pg_weft.cpp — see pg_weft.hpp.
#include "pg_weft.hpp"

namespace weft_torch {

ProcessGroupWeft::ProcessGroupWeft(
    const c10::intrusive_ptr<c10d::Store>& store,
    int rank,
    int size,
    std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size),
      core_(Core::create(store, rank, size, timeout)),
      timeout_(timeout) {
  init();
}

ProcessGroupWeft::ProcessGroupWeft(std::shared_ptr<Core> core)
    : c10d::ProcessGroup(core->rank(), core->size()), core_(std::move(core)) {
  init();
}

ProcessGroupWeft::~ProcessGroupWeft() = default;

std::pair<c10::intrusive_ptr<ProcessGroupWeft>, std::vector<int64_t>> ProcessGroupWeft::shrink(
    const std::vector<int64_t>& exclude,
    bool abort) {
  std::vector<int64_t> parent_ranks;
  auto core = core_->shrink(exclude, abort, parent_ranks);
  if (!core)
    return {c10::intrusive_ptr<ProcessGroupWeft>(), {}};
  return {c10::make_intrusive<ProcessGroupWeft>(std::move(core)), parent_ranks};
}

using WorkPtr = ProcessGroupWeft::WorkPtr;

WorkPtr ProcessGroupWeft::broadcast(
    std::vector<at::Tensor>& tensors,
    const c10d::BroadcastOptions& opts) {
  return core_->broadcast(tensors, opts);
}

WorkPtr ProcessGroupWeft::allreduce(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceOptions& opts) {
  return core_->allreduce(tensors, opts);
}

WorkPtr ProcessGroupWeft::allreduce_coalesced(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceCoalescedOptions& opts) {
  return core_->allreduce_coalesced(tensors, opts);
}

WorkPtr ProcessGroupWeft::reduce(
    std::vector<at::Tensor>& tensors,
    const c10d::ReduceOptions& opts) {
  return core_->reduce(tensors, opts);
}

WorkPtr ProcessGroupWeft::allgather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return core_->allgather(outputs, inputs, opts);
}

WorkPtr ProcessGroupWeft::_allgather_base(
    at::Tensor& output,
    at::Tensor& input,
    const c10d::AllgatherOptions& opts) {
  return core_->allgather_base(output, input, opts);
}

WorkPtr ProcessGroupWeft::gather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  return core_->gather(outputs, inputs, opts);
}

WorkPtr ProcessGroupWeft::scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  return core_->scatter(outputs, inputs, opts);
}

WorkPtr ProcessGroupWeft::reduce_scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return core_->reduce_scatter(outputs, inputs, opts);
}

WorkPtr ProcessGroupWeft::_reduce_scatter_base(
    at::Tensor& output,
    at::Tensor& input,
    const c10d::ReduceScatterOptions& opts) {
  return core_->reduce_scatter_base(output, input, opts);
}

WorkPtr ProcessGroupWeft::alltoall_base(
    at::Tensor& output,
    at::Tensor& input,
    std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits,
    const c10d::AllToAllOptions& opts) {
  return core_->alltoall_base(output, input, output_splits, input_splits, opts);
}

WorkPtr ProcessGroupWeft::alltoall(
    std::vector<at::Tensor>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
  return core_->alltoall(outputs, inputs, opts);
}

WorkPtr ProcessGroupWeft::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return core_->allgather_coalesced(outputs, inputs, opts);
}

WorkPtr ProcessGroupWeft::barrier(const c10d::BarrierOptions& opts) {
  return core_->barrier(opts);
}

void ProcessGroupWeft::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  core_->monitored_barrier(opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout,
                           waitAllRanks);
}

uint64_t ProcessGroupWeft::getSequenceNumberForGroup() {
  return core_->sequence_number();
}

WorkPtr ProcessGroupWeft::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  return core_->send(tensors, dst, tag);
}

WorkPtr ProcessGroupWeft::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  return core_->recv(tensors, src, tag);
}

WorkPtr ProcessGroupWeft::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return core_->recv_anysource(tensors, tag);
}

// ---- the do-nothing process group

namespace {

class WorkDone : public c10d::Work {
 public:
  WorkDone(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type), outputs_(std::move(outputs)) {
    completed_ = true;
  }
  bool isCompleted() override {
    return true;
  }
  bool isSuccess() const override {
    return true;
  }
  bool wait(std::chrono::milliseconds) override {
    return true;
  }
  std::vector<at::Tensor> result() override {
    return outputs_;
  }

 private:
  std::vector<at::Tensor> outputs_;
};

} // namespace

ProcessGroupNull::ProcessGroupNull(int rank, int size) : c10d::ProcessGroup(rank, size) {
  init();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNull::allreduce(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceOptions&) {
  return c10::make_intrusive<WorkDone>(rank_, c10d::OpType::ALLREDUCE, tensors);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNull::barrier(const c10d::BarrierOptions&) {
  return c10::make_intrusive<WorkDone>(rank_, c10d::OpType::BARRIER, std::vector<at::Tensor>{});
}

} // namespace weft_torch
