// The trees the tree algorithms run on: every rank's own view (computed from (size, rank)
// alone) must add up to one consistent tree.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "algorithms/partition.hpp"
#include "algorithms/topology.hpp"

namespace kolo::algo {
namespace {

TEST(BinomialTree, ParentsChildrenAndSubtreesAgree) {
  for (int size = 1; size <= 40; ++size)
    for (int root : {0, size / 2, size - 1}) {
      std::vector<BinomialNode> nodes;
      for (int r = 0; r < size; ++r) nodes.push_back(binomial_node(size, root, r));
      int roots = 0;
      for (int r = 0; r < size; ++r) {
        const BinomialNode& n = nodes[r];
        if (n.parent < 0) {
          ++roots;
          EXPECT_EQ(r, root);
          EXPECT_EQ(n.subtree, size);
        }
        // The subtree is this node plus its children's subtrees, which tile [rel+1, rel+subtree)
        // in decreasing size order.
        int next = n.rel + n.subtree;
        for (int child_rel : n.children_rel) {
          const BinomialNode& c = nodes[rel_to_rank(child_rel, root, size)];
          EXPECT_EQ(c.parent, r) << "size " << size << " root " << root;
          EXPECT_EQ(c.rel, child_rel);
          EXPECT_EQ(child_rel + c.subtree, next) << "size " << size << " root " << root << " rank " << r;
          next = child_rel;
          EXPECT_EQ(binomial_subtree(size, child_rel), c.subtree);
        }
        EXPECT_EQ(next, n.rel + 1) << "size " << size << " root " << root << " rank " << r;
      }
      EXPECT_EQ(roots, 1);
    }
}

TEST(DoubleBinaryTree, EachTreeIsConsistentAndSpansAllRanks) {
  for (int size = 1; size <= 64; ++size)
    for (int tree = 0; tree < 2; ++tree) {
      std::vector<BinaryTreeNode> nodes;
      for (int r = 0; r < size; ++r) nodes.push_back(double_binary_tree_node(size, r, tree));
      int roots = 0, max_depth = 0;
      for (int r = 0; r < size; ++r) {
        const BinaryTreeNode& n = nodes[r];
        ASSERT_LE(n.nchildren, 2);
        if (n.parent < 0) {
          ++roots;
          EXPECT_EQ(n.depth, 0);
        } else {
          const BinaryTreeNode& p = nodes[n.parent];
          EXPECT_TRUE(std::count(p.children, p.children + p.nchildren, r) == 1)
              << "size " << size << " tree " << tree << ": rank " << r << " not a child of its parent " << n.parent;
          EXPECT_EQ(n.depth, p.depth + 1);
        }
        for (int k = 0; k < n.nchildren; ++k) EXPECT_EQ(nodes[n.children[k]].parent, r);
        max_depth = std::max(max_depth, n.depth);
      }
      EXPECT_EQ(roots, 1) << "size " << size << " tree " << tree;
      int log2 = 0;
      while ((1 << log2) < size) ++log2;
      EXPECT_LE(max_depth, log2 + 1) << "size " << size;  // balanced: depth is logarithmic
    }
}

// With an even number of ranks the second tree mirrors the first: a rank with children in
// one tree is a leaf in the other, so no rank forwards both halves of the data.
TEST(DoubleBinaryTree, TreesAreComplementaryForEvenSizes) {
  for (int size = 2; size <= 64; size += 2)
    for (int r = 0; r < size; ++r) {
      const BinaryTreeNode t0 = double_binary_tree_node(size, r, 0), t1 = double_binary_tree_node(size, r, 1);
      EXPECT_FALSE(t0.nchildren > 0 && t1.nchildren > 0) << "size " << size << " rank " << r;
    }
}

}  // namespace
}  // namespace kolo::algo

// The ring arithmetic the algorithms use instead of divisions (partition.hpp, topology.hpp)
// against the plain modulo, over every argument the algorithms pass and beyond.
TEST(RingArithmetic, AgreesWithTheModuloItReplaces) {
  for (int n = 1; n <= 70; ++n) {
    for (int x = -3 * n; x <= 3 * n; ++x) ASSERT_EQ(kolo::algo::ring_mod(x, n), ((x % n) + n) % n) << x << " mod " << n;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        ASSERT_EQ(kolo::algo::add_mod(a, b, n), (a + b) % n) << a << " + " << b << " mod " << n;
        ASSERT_EQ(kolo::algo::rel_to_rank(a, b, n), (a + b) % n);
        ASSERT_EQ(kolo::algo::binomial_node(n, b, a).rel, (a - b + n) % n) << "rank " << a << " root " << b;
      }
  }
}
