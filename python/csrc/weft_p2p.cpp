// weft_p2p.cpp — alltoall (one tensor with equal or uneven splits, and
// lists) and the barriers, plain and monitored, on Weft's calls (torch's
// send and recv are in weft_match.cpp).
#include <algorithm>
#include <string>

#include <c10/util/Exception.h>

#include "weft_core.hpp"
#include "weft_tensors.hpp"

namespace weft_torch {

using WorkPtr = Core::WorkPtr;

namespace {

// weft_alltoallv's arrays (bytes), alive until the Work completes.
struct Blocks {
  std::vector<size_t> scount, sdispl, rcount, rdispl;
};

// c10d splits along dim 0, in rows; an empty list splits evenly.
void fill_blocks(
    const at::Tensor& t,
    const std::vector<int64_t>& splits,
    int size,
    const char* what,
    std::vector<size_t>& count,
    std::vector<size_t>& displ) {
  TORCH_CHECK(t.dim() >= 1, "weft: alltoall_base: a 0-dimensional tensor has no rows to split");
  int64_t rows = t.size(0);
  size_t row_bytes = t.element_size();
  for (int64_t d = 1; d < t.dim(); d++)
    row_bytes *= t.size(d);
  std::vector<int64_t> s = splits;
  if (s.empty()) {
    TORCH_CHECK(rows % size == 0, "weft: alltoall_base: ", rows, " rows of the ", what,
                " tensor do not split evenly over ", size, " ranks");
    s.assign(size, rows / size);
  }
  TORCH_CHECK(static_cast<int>(s.size()) == size, "weft: alltoall_base: ", what,
              "_split_sizes has ", s.size(), " entries, expected ", size);
  int64_t sum = 0;
  for (int64_t v : s) {
    TORCH_CHECK(v >= 0, "weft: alltoall_base: ", what, "_split_sizes has a negative entry");
    count.push_back(static_cast<size_t>(v) * row_bytes);
    displ.push_back(static_cast<size_t>(sum) * row_bytes);
    sum += v;
  }
  TORCH_CHECK(sum == rows, "weft: alltoall_base: ", what, "_split_sizes add up to ", sum,
              " rows, but the ", what, " tensor has ", rows);
}

} // namespace

WorkPtr Core::alltoall_base(
    at::Tensor& output,
    at::Tensor& input,
    std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits,
    const c10d::AllToAllOptions& opts) {
  check_tensor(input, "alltoall_base", "input");
  check_tensor(output, "alltoall_base", "output");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "weft: alltoall_base: input is ",
              input.scalar_type(), " but output is ", output.scalar_type());
  const void* in = input.data_ptr();
  void* out = output.data_ptr();
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(input.numel() % size_ == 0 && output.numel() == input.numel(),
                "weft: alltoall_base: input (", input.numel(), " elements) and output (",
                output.numel(), ") must be equal and split evenly over ", size_, " ranks");
    size_t per = nbytes(input) / size_;
    return launch({.type = c10d::OpType::ALLTOALL_BASE,
                   .name = "alltoall_base",
                   .inputs = {input},
                   .outputs = {output},
                   .keep = {output, input},
                   .posts = {[=](weft_comm_t c, weft_request_t* r) {
                     return weft_ialltoall(in, out, per, WEFT_UINT8, c, r);
                   }},
                   .timeout = opts.timeout});
  }
  auto b = std::make_shared<Blocks>();
  fill_blocks(input, input_splits, size_, "input", b->scount, b->sdispl);
  fill_blocks(output, output_splits, size_, "output", b->rcount, b->rdispl);
  Blocks* p = b.get();
  return launch({.type = c10d::OpType::ALLTOALL_BASE,
                 .name = "alltoall_base",
                 .inputs = {input},
                 .outputs = {output},
                 .keep = {output, input},
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_ialltoallv(in, p->scount.data(), p->sdispl.data(), out,
                                          p->rcount.data(), p->rdispl.data(), WEFT_UINT8, c, r);
                 }},
                 .keep_extra = b,
                 .timeout = opts.timeout});
}

// Lists: a send and a receive per peer, side by side in one Weft group,
// each tensor's own memory; the block to itself is a copy.
WorkPtr Core::alltoall(
    std::vector<at::Tensor>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_ &&
                  static_cast<int>(inputs.size()) == size_,
              "weft: alltoall: ", inputs.size(), " inputs and ", outputs.size(),
              " outputs, expected ", size_, " of each (one per rank)");
  std::vector<Post> posts;
  for (int p = 0; p < size_; p++) {
    check_tensor(inputs[p], "alltoall", "an input");
    check_tensor(outputs[p], "alltoall", "an output");
    TORCH_CHECK(inputs[p].scalar_type() == outputs[p].scalar_type(),
                "weft: alltoall: input and output ", p, " differ in type");
    if (p == rank_) {
      TORCH_CHECK(nbytes(inputs[p]) == nbytes(outputs[p]),
                  "weft: alltoall: this rank's input and output to itself differ in size");
      outputs[p].copy_(inputs[p]);
      continue;
    }
    const void* in = inputs[p].data_ptr();
    void* out = outputs[p].data_ptr();
    size_t sn = nbytes(inputs[p]), rn = nbytes(outputs[p]);
    posts.push_back([=](weft_comm_t c, weft_request_t* r) {
      return weft_irecv(out, rn, WEFT_UINT8, p, c, r);
    });
    posts.push_back([=](weft_comm_t c, weft_request_t* r) {
      return weft_isend(in, sn, WEFT_UINT8, p, c, r);
    });
  }
  std::vector<at::Tensor> keep(inputs);
  keep.insert(keep.end(), outputs.begin(), outputs.end());
  return launch({.type = c10d::OpType::ALLTOALL,
                 .name = "alltoall",
                 .inputs = inputs,
                 .outputs = outputs,
                 .keep = keep,
                 .posts = posts,
                 .group = true,
                 .timeout = opts.timeout});
}

// opts.device_ids name GPUs: a CPU barrier has none to synchronise, and
// ignores them as Gloo does. opts.timeout bounds this barrier alone.
WorkPtr Core::barrier(const c10d::BarrierOptions& opts) {
  return launch({.type = c10d::OpType::BARRIER,
                 .name = "barrier",
                 .posts = {[](weft_comm_t c, weft_request_t* r) { return weft_ibarrier(c, r); }},
                 .timeout = opts.timeout});
}

namespace {

std::string join(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks)
    out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

} // namespace

// torch's monitored barrier (Gloo's monitoredBarrier) on Weft: a barrier
// bounded by @timeout from the call (weft_request_set_timeout), running or
// queued behind a collective some rank never finished. When ranks fail to
// arrive, it times out on every rank that did, each with the job-wide
// verdict (weft_comm_stragglers), and each throws naming them in Gloo's
// words, which torch's tests match: on rank 0 "[Rank 0]: Rank 1 failed to
// pass monitoredBarrier in 2000 ms" ("Ranks 1, 2 ..." with
// @wait_all_ranks), on the others "Rank 2 successfully reached
// monitoredBarrier, but received errors while waiting for send/recv from
// rank 0", followed here by the same names: Gloo learns them on rank 0
// alone, from a send and receive per rank, and its other ranks can only
// say to read rank 0's logs. Weft's message with the verdict follows. The
// group's communicator is dead after a failure, as after any timeout.
void Core::monitored_barrier(std::chrono::milliseconds timeout, bool wait_all_ranks) {
  TORCH_CHECK(timeout.count() > 0, "Rank ", rank_, " timed out in monitoredBarrier after ",
              timeout.count(), " ms (no rank can arrive in no time)");
  Launch l{.type = c10d::OpType::BARRIER,
           .name = "monitored_barrier",
           .posts = {[](weft_comm_t c, weft_request_t* r) { return weft_ibarrier(c, r); }},
           .timeout = timeout};
  auto work = make_work(l);
  {
    std::lock_guard<std::recursive_mutex> order(order_mu_);
    lane_->launch(work, l); // not counted: Gloo's is made of sends and receives
  }
  try {
    work->wait();
    return;
  } catch (const std::exception& e) {
    std::vector<int> late(size_);
    int count = -1;
    weft_comm_stragglers(lane_->comm(), late.data(), size_, &count);
    late.resize(count > 0 ? std::min(count, size_) : 0);
    std::string who;
    if (!late.empty() && (wait_all_ranks || late.size() == 1))
      who = std::string(wait_all_ranks ? "Ranks " : "Rank ") + join(late) +
          " failed to pass monitoredBarrier in " + std::to_string(timeout.count()) + " ms";
    else if (!late.empty())
      who = "Rank " + std::to_string(late[0]) + " failed to pass monitoredBarrier in " +
          std::to_string(timeout.count()) + " ms (and ranks " +
          join(std::vector<int>(late.begin() + 1, late.end())) + ")";
    else
      who = "monitoredBarrier failed";
    if (rank_ == 0)
      TORCH_CHECK(false, "[Rank 0]: ", who, "\n Original exception: \n", e.what());
    TORCH_CHECK(false, "Rank ", rank_, " successfully reached monitoredBarrier, but received "
                "errors while waiting for send/recv from rank 0: ", who,
                " (Weft's job-wide verdict: every rank that reached it knows)"
                "\n Original exception: \n", e.what());
  }
}

} // namespace weft_torch
