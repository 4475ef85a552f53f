#include "algorithms/topology.hpp"

#include <stdexcept>
#include <string>

namespace kolo::algo {

int binomial_subtree(int size, int rel) {
  if (rel == 0) return size;
  const int low = rel & -rel;
  return low < size - rel ? low : size - rel;
}

BinomialNode binomial_node(int size, int root, int rank) {
  BinomialNode node;
  node.rel = rank >= root ? rank - root : rank - root + size;
  node.subtree = binomial_subtree(size, node.rel);
  if (node.rel != 0) node.parent = rel_to_rank(node.rel - (node.rel & -node.rel), root, size);
  // Children are rel + m for the powers of two m below the lowest set bit (any m for the root)
  // that stay inside the group; the biggest m roots the biggest subtree.
  const int limit = node.rel == 0 ? size : (node.rel & -node.rel);
  int top = 1;
  while (top * 2 < limit) top *= 2;
  for (int m = top; m >= 1; m /= 2)
    if (m < limit && node.rel + m < size) node.children_rel.push_back(node.rel + m);
  return node;
}

namespace {

// Tree 0 of the double binary tree, for node r of n.
void in_order_tree(int n, int r, int& parent, int children[2], int& nchildren) {
  nchildren = 0;
  children[0] = children[1] = -1;
  if (r == 0) {
    parent = -1;
    if (n > 1) {
      int top = 1;
      while (top * 2 < n) top *= 2;
      children[nchildren++] = top;
    }
    return;
  }
  const int low = r & -r;
  // The parent is one level up: r with its lowest set bit moved one place left (r - low or
  // r + low), or, when that falls outside the group, r with the lowest set bit cleared.
  parent = (r ^ low) | (low << 1);
  if (parent >= n) parent = r ^ low;
  const int half = low >> 1;
  if (half >= 1) {
    // The left child always exists; the right one is the biggest step that stays in range.
    children[nchildren++] = r - half;
    for (int step = half; step >= 1; step >>= 1) {
      if (r + step < n) {
        children[nchildren++] = r + step;
        break;
      }
    }
  }
}

// Maps between a rank and its node in tree 0 for the requested tree.
int to_node(int n, int rank, int tree) {
  if (tree == 0) return rank;
  return n % 2 == 0 ? n - 1 - rank : (rank - 1 + n) % n;
}
int to_rank(int n, int node, int tree) {
  if (node < 0 || tree == 0) return node;
  return n % 2 == 0 ? n - 1 - node : (node + 1) % n;
}

}  // namespace

BinaryTreeNode double_binary_tree_node(int size, int rank, int tree) {
  if (tree != 0 && tree != 1) throw std::logic_error("double binary tree has trees 0 and 1, not " + std::to_string(tree));
  BinaryTreeNode out;
  int node = to_node(size, rank, tree);
  int parent = -1, children[2];
  in_order_tree(size, node, parent, children, out.nchildren);
  out.parent = to_rank(size, parent, tree);
  for (int k = 0; k < out.nchildren; ++k) out.children[k] = to_rank(size, children[k], tree);
  // Depth: walk up to the root (at most log2(size) + 1 steps).
  for (int up = parent; up >= 0; ++out.depth) {
    int grand = -1, unused[2], unused_n = 0;
    in_order_tree(size, up, grand, unused, unused_n);
    up = grand;
  }
  return out;
}

}  // namespace kolo::algo
