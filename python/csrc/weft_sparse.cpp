// weft_sparse.cpp — all_reduce of a sparse (COO) tensor, SUM, as Gloo does
// it: every rank gets every rank's indices and values and sums them
// (DDP's sparse gradients, nn.Embedding(sparse=True)). Two allgathers:
// each rank's shape and nnz, then indices and values padded to the
// largest nnz; the result replaces the tensor's contents.
//
// It runs in the caller, one allgather after the other (the second's size
// is the first's answer, and every rank must post Weft's collectives in the
// same order): the Work it returns is complete. Traffic: n ranks x the
// largest rank's indices and values, to every rank (Gloo's allgatherv sends
// each rank's own size; the padding is the price of Weft's equal blocks).
#include <string>

#include <c10/util/Exception.h>

#include "weft_core.hpp"
#include "weft_tensors.hpp"

namespace weft_torch {

namespace {

constexpr int kMaxDims = 12;
// One rank's card: nnz, sparse dims, dense dims, dims, its sizes.
constexpr int kCard = 4 + kMaxDims;

at::Tensor card_of(const at::Tensor& t) {
  at::Tensor card = at::zeros({kCard}, at::kLong);
  auto c = card.accessor<int64_t, 1>();
  c[0] = t._nnz();
  c[1] = t.sparse_dim();
  c[2] = t.dense_dim();
  c[3] = t.dim();
  for (int64_t d = 0; d < t.dim(); d++)
    c[4 + d] = t.size(d);
  return card;
}

// Every rank's card but the nnz must be this rank's: the same shape.
void check_cards(const at::Tensor& cards, int rank, int size) {
  auto c = cards.accessor<int64_t, 2>();
  for (int r = 0; r < size; r++)
    for (int k = 1; k < kCard; k++)
      TORCH_CHECK(c[r][k] == c[rank][k], "weft: allreduce: the sparse tensor of rank ", r,
                  " differs from this rank's (", rank, ") in its ",
                  k == 1 ? "sparse dims" : k == 2 ? "dense dims" : k == 3 ? "dims" : "sizes",
                  ": every rank must pass the same shape");
}

} // namespace

Core::WorkPtr Core::sparse_allreduce(at::Tensor& t, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(opts.reduceOp == c10d::ReduceOp::SUM, "weft: allreduce: a sparse tensor is "
              "reduced with SUM only (as Gloo's): densify it (tensor.to_dense()) for other ops");
  TORCH_CHECK(t.device().is_cpu(), "weft: allreduce: the sparse tensor is on ", t.device(),
              "; the weft backend takes CPU tensors");
  TORCH_CHECK(t.dim() <= kMaxDims, "weft: allreduce: a sparse tensor of ", t.dim(),
              " dims (at most ", kMaxDims, ")");
  Launch l{.type = c10d::OpType::ALLREDUCE,
           .name = "allreduce",
           .title = "weft:sparse_all_reduce",
           .inputs = {t},
           .outputs = {t}};
  auto work = make_work(l); // the profiler's event spans what follows
  at::Tensor in = t.coalesce();
  at::Tensor cards = at::empty({size_, kCard}, at::kLong);
  at::Tensor mine = card_of(in);
  std::vector<at::Tensor> card_out{cards};
  // the order lock: this rank's collectives stay in call order meanwhile
  std::lock_guard<std::recursive_mutex> order(order_mu_);
  allgather_base(card_out[0], mine, {})->wait();
  check_cards(cards, rank_, size_);
  int64_t most = cards.select(1, 0).max().item<int64_t>();
  int64_t sdim = in.sparse_dim();
  at::Tensor values = in._values().contiguous();
  int64_t row = values.element_size(); // bytes of one nonzero's values
  for (int64_t d = 1; d < values.dim(); d++)
    row *= values.size(d);
  // indices, then values, padded to the most, each block aligned for views
  int64_t block = (most * (sdim * 8 + row) + 15) / 16 * 16;
  at::Tensor flat = at::zeros({block * size_}, at::kByte);
  if (block > 0) {
    at::Tensor own = flat.narrow(0, rank_ * block, block);
    int64_t n = in._nnz();
    own.narrow(0, 0, sdim * n * 8).copy_(in._indices().contiguous().view({-1}).view(at::kByte));
    own.narrow(0, sdim * most * 8, n * row).copy_(values.view({-1}).view(at::kByte));
    at::Tensor part = flat.narrow(0, rank_ * block, block);
    allgather_base(flat, part, {})->wait();
  }
  std::vector<at::Tensor> idx, val;
  auto c = cards.accessor<int64_t, 2>();
  std::vector<int64_t> vshape(values.sizes().begin(), values.sizes().end());
  for (int r = 0; r < size_ && block > 0; r++) {
    at::Tensor b = flat.narrow(0, r * block, block);
    int64_t n = c[r][0];
    idx.push_back(b.narrow(0, 0, sdim * most * 8).view(at::kLong).view({sdim, most})
                      .narrow(1, 0, n));
    vshape[0] = most;
    val.push_back(b.narrow(0, sdim * most * 8, most * row).view(values.scalar_type())
                      .view(vshape).narrow(0, 0, n));
  }
  at::Tensor sum = block > 0
      ? at::sparse_coo_tensor(at::cat(idx, 1), at::cat(val, 0), in.sizes()).coalesce()
      : in;
  t.copy_(sum);
  work->finish_now(nullptr);
  return work;
}

} // namespace weft_torch
