// How a control-socket read that gave no record ends the reading (transports/common/seqpacket.hpp,
// read_end, shared by the shm and cuda_ipc pairs): the first ECONNRESET must read on, so that the
// abort notice a closing peer queued behind it is still read and its reason reported.
#include <gtest/gtest.h>

#include <cerrno>

#include "transports/common/seqpacket.hpp"

using kolo::transport::seqpacket::read_end;
using kolo::transport::seqpacket::ReadEnd;

TEST(SeqpacketReadEnd, TheFirstResetReadsOnTheNextOneIsTheHangUp) {
  bool reset_seen = false;
  EXPECT_EQ(read_end(-1, ECONNRESET, reset_seen), ReadEnd::read_on);
  EXPECT_TRUE(reset_seen);
  EXPECT_EQ(read_end(-1, ECONNRESET, reset_seen), ReadEnd::hang_up);
}

TEST(SeqpacketReadEnd, EndOfFileIsTheHangUpWhateverErrnoHolds) {
  bool reset_seen = false;
  EXPECT_EQ(read_end(0, 0, reset_seen), ReadEnd::hang_up);
  EXPECT_EQ(read_end(0, EAGAIN, reset_seen), ReadEnd::hang_up);
  EXPECT_FALSE(reset_seen);
}

TEST(SeqpacketReadEnd, InterruptedReadsOnEmptyQueueIsDrainedOtherErrorsAreErrors) {
  bool reset_seen = false;
  EXPECT_EQ(read_end(-1, EINTR, reset_seen), ReadEnd::read_on);
  EXPECT_EQ(read_end(-1, EAGAIN, reset_seen), ReadEnd::drained);
  EXPECT_EQ(read_end(-1, EWOULDBLOCK, reset_seen), ReadEnd::drained);
  EXPECT_EQ(read_end(-1, EBADF, reset_seen), ReadEnd::error);
  EXPECT_EQ(read_end(-1, EPIPE, reset_seen), ReadEnd::error);
  EXPECT_FALSE(reset_seen);
}
