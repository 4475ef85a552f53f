#include "sparse.hpp"

#include <algorithm>
#include <vector>

#include <c10/util/Exception.h>

#include "errors.hpp"
#include "tensors.hpp"

namespace kolo_torch {

namespace {

// kolo all-gather of the contiguous `src` into a new tensor of size() times its elements, waited for.
at::Tensor gather_all(kolo::ProcessGroup& pg, const at::Tensor& src, kolo::Milliseconds timeout) {
  at::Tensor out = at::empty({src.numel() * pg.size()}, src.options());
  kolo::AllgatherOptions o;
  o.timeout = timeout;
  with_torch_errors([&] { pg.allgather(move_buffer(src), move_buffer(out), o)->wait(); });
  return out;
}

// The first `rows` rows of `t`, padded with zero rows to `to` rows (contiguous).
at::Tensor pad_rows(const at::Tensor& t, int64_t to) {
  std::vector<int64_t> shape = t.sizes().vec();
  shape[0] = to;
  at::Tensor out = at::zeros(shape, t.options());
  if (t.size(0) > 0) out.narrow(0, 0, t.size(0)).copy_(t);
  return out;
}

}  // namespace

at::Tensor sparse_allreduce(kolo::ProcessGroup& pg, const at::Tensor& t, kolo::Milliseconds timeout) {
  const int size = pg.size();
  const at::Tensor in = t.coalesce();
  // Metadata: sparse dims, dense dims, nnz, then the sizes (every rank's must agree but nnz).
  std::vector<int64_t> meta = {in.sparse_dim(), in.dense_dim(), in._nnz()};
  for (int64_t s : in.sizes()) meta.push_back(s);
  const auto width = static_cast<int64_t>(meta.size());
  at::Tensor mine = at::tensor(meta, at::kLong);
  // A rank whose tensor has another number of dimensions sends metadata of another length;
  // kolo's all-gather refuses that with a MismatchError naming the rank.
  at::Tensor all = gather_all(pg, mine, timeout).view({size, width});
  int64_t max_nnz = 0;
  for (int r = 0; r < size; ++r) {
    at::Tensor row = all[r];
    for (int64_t i = 0; i < width; ++i) {
      if (i == 2) continue;
      TORCH_CHECK(row[i].item<int64_t>() == meta[i], "kolo: all_reduce of a sparse tensor: rank ", r,
                  "'s tensor has sizes/dimensions ", row, ", this rank's ", mine,
                  " (sparse dims, dense dims, nnz, sizes...)");
    }
    max_nnz = std::max(max_nnz, row[2].item<int64_t>());
  }
  const int64_t sparse_dim = in.sparse_dim();
  // Indices as rows (nnz x sparse_dim) and values (nnz x dense sizes), padded to the largest nnz.
  at::Tensor idx_rows = pad_rows(in._indices().t(), max_nnz).contiguous();
  at::Tensor vals = pad_rows(in._values(), max_nnz).contiguous();
  at::Tensor all_idx, all_vals;
  if (max_nnz > 0) {
    all_idx = gather_all(pg, idx_rows, timeout).view({size, max_nnz, sparse_dim});
    std::vector<int64_t> vshape = vals.sizes().vec();
    vshape.insert(vshape.begin(), size);
    all_vals = gather_all(pg, vals, timeout).view(vshape);
  }
  at::Tensor out;
  for (int r = 0; r < size; ++r) {
    const int64_t nnz = all[r][2].item<int64_t>();
    at::Tensor idx, val;
    if (max_nnz > 0) {
      idx = all_idx[r].narrow(0, 0, nnz).t();
      val = all_vals[r].narrow(0, 0, nnz);
    } else {
      idx = in._indices();
      val = in._values();
    }
    at::Tensor part = at::sparse_coo_tensor(idx, val, in.sizes(), in.options());
    if (r == 0)
      out = part;
    else
      out += part;
  }
  return out;
}

}  // namespace kolo_torch
