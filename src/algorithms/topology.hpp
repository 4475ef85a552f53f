// The trees the tree algorithms run on. Every rank computes its own place from (size, rank)
// alone, and all ranks agree because the construction is deterministic.
#pragma once
#include <cstddef>

namespace kolo::algo {

// A binomial node's children: at most one per bit of a rank, so 31 for any int group size. A
// fixed array: nodes are computed on every call of a tree algorithm and must not allocate.
struct ChildList {
  int v[31];
  int n = 0;
  void push_back(int x) { v[n++] = x; }
  size_t size() const { return static_cast<size_t>(n); }
  bool empty() const { return n == 0; }
  int operator[](size_t i) const { return v[i]; }
  const int* begin() const { return v; }
  const int* end() const { return v + n; }
};

// Binomial tree rooted at `root`, over relative ranks rel = (rank - root) mod size. The subtree
// of relative rank v holds the relative ranks [v, v + subtree), so a subtree's blocks are
// contiguous in relative order (what gather and scatter forward in one message).
struct BinomialNode {
  int rel = 0;
  int parent = -1;                // actual rank; -1 at the root
  ChildList children_rel;         // relative ranks, biggest subtree first
  int subtree = 1;                // ranks in this node's subtree, itself included
};
BinomialNode binomial_node(int size, int root, int rank);
int binomial_subtree(int size, int rel);
// rel and root in [0, size): a compare, not a division (every tree algorithm call maps ranks).
inline int rel_to_rank(int rel, int root, int size) {
  const int r = rel + root;
  return r >= size ? r - size : r;
}

// One of the two complementary binary trees of NCCL's double binary tree. Tree 0 is the
// in-order binary tree over 0..size-1 in which a node's level is its lowest set bit (rank 0 is
// the root, with one child); tree 1 is tree 0 mirrored (rank -> size-1-rank) when size is even
// and shifted by one rank when size is odd, so that most ranks that are leaves in one tree are
// inner nodes in the other and each tree's inner nodes get the other tree's spare bandwidth.
struct BinaryTreeNode {
  int parent = -1;  // -1 at the root
  int children[2] = {-1, -1};
  int nchildren = 0;
  int depth = 0;  // edges from the root
};
BinaryTreeNode double_binary_tree_node(int size, int rank, int tree);

}  // namespace kolo::algo
