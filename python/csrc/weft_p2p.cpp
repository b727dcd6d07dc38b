// weft_p2p.cpp — alltoall (one tensor with equal or uneven splits, and
// lists), barrier, send and recv on Weft's calls.
#include <c10/util/Exception.h>

#include "weft_core.hpp"

namespace weft_torch {

using WorkPtr = Core::WorkPtr;

namespace {

size_t nbytes(const at::Tensor& t) {
  return t.numel() * t.element_size();
}

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
    const c10d::AllToAllOptions&) {
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
    return launch(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output}, {output, input},
                  {[=](weft_comm_t c, weft_request_t* r) {
                    return weft_ialltoall(in, out, per, WEFT_UINT8, c, r);
                  }});
  }
  auto b = std::make_shared<Blocks>();
  fill_blocks(input, input_splits, size_, "input", b->scount, b->sdispl);
  fill_blocks(output, output_splits, size_, "output", b->rcount, b->rdispl);
  Blocks* p = b.get();
  return launch(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output}, {output, input},
                {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_ialltoallv(in, p->scount.data(), p->sdispl.data(), out,
                                         p->rcount.data(), p->rdispl.data(), WEFT_UINT8, c, r);
                }},
                false, nullptr, b);
}

// Lists: a send and a receive per peer, side by side in one Weft group,
// each tensor's own memory; the block to itself is a copy.
WorkPtr Core::alltoall(
    std::vector<at::Tensor>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions&) {
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
  return launch(c10d::OpType::ALLTOALL, "alltoall", outputs, keep, posts, true);
}

WorkPtr Core::barrier(const c10d::BarrierOptions&) {
  return launch(c10d::OpType::BARRIER, "barrier", {}, {},
                {[](weft_comm_t c, weft_request_t* r) { return weft_ibarrier(c, r); }});
}

namespace {

const at::Tensor& p2p_tensor(std::vector<at::Tensor>& tensors, int peer, int rank, int size,
                             const char* call) {
  TORCH_CHECK(tensors.size() == 1, "weft: ", call, " takes one tensor, got ", tensors.size());
  check_tensor(tensors[0], call, "the tensor");
  TORCH_CHECK(peer >= 0 && peer < size && peer != rank, "weft: ", call, ": peer ", peer,
              " is not another rank (0..", size - 1, ", this is ", rank, ")");
  return tensors[0];
}

} // namespace

// Tags are not sent: a send meets the peer's receives from this rank in
// the order both were called (as NCCL's), whatever their tags.
WorkPtr Core::send(std::vector<at::Tensor>& tensors, int dst, int) {
  const at::Tensor& t = p2p_tensor(tensors, dst, rank_, size_, "send");
  const void* p = t.data_ptr();
  size_t n = nbytes(t);
  return launch(c10d::OpType::SEND, "send", tensors, {t},
                {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_isend(p, n, WEFT_UINT8, dst, c, r);
                }});
}

WorkPtr Core::recv(std::vector<at::Tensor>& tensors, int src, int) {
  const at::Tensor& t = p2p_tensor(tensors, src, rank_, size_, "recv");
  void* p = t.data_ptr();
  size_t n = nbytes(t);
  return launch(c10d::OpType::RECV, "recv", tensors, {t},
                {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_irecv(p, n, WEFT_UINT8, src, c, r);
                }});
}

} // namespace weft_torch
