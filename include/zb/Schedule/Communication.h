//===- Communication.h - Send/recv insertion and deadlock check -*- C++ -*-===//
//
// Turns a schedule (compute actions per rank) into a communication program:
// per rank, the compute actions interleaved with the sends and recvs of
// every cross-rank dependency, and checks such a program for deadlock.
//
// Dependencies that cross ranks: F(s, j) -> F(s+1, j) (the activation) and
// B or BW of (s, j) -> B or BW of (s-1, j) (the input gradient). The rule:
//  - a send comes right after its producer;
//  - a recv comes as late as possible before its consumer, but the recvs of
//    one channel stay in send order (a recv is placed before the earliest
//    consumer of it and of every later message on its channel), so the k-th
//    send on a channel meets the k-th recv;
//  - channel 2b carries activations across the boundary between stages b and
//    b+1 (sent by stage b), channel 2b+1 carries gradients back across it
//    (sent by stage b+1); seq counts the transfers on a channel from 0.
// Each channel has one sending rank, so receiving in send order never adds
// a wait that the consumer did not already have: the program deadlocks only
// if the schedule's implied order does.
//
// For transports that match transfers per link (sender, receiver) in issue
// order without tags (NCCL), RecvOrder::PerLink keeps the recvs of a whole
// link, across its channels, in the sender's send order instead (a recv
// goes before the earliest consumer of it and of every later message on its
// link). V placements, whose links carry activations one way and gradients
// of the other chunk the same way, then receive some messages earlier than
// they need them; that can add waits, and the result is checked for
// deadlock like any program.
//
//===----------------------------------------------------------------------===//

#ifndef ZB_SCHEDULE_COMMUNICATION_H
#define ZB_SCHEDULE_COMMUNICATION_H

#include "zb/Schedule/Problem.h"
#include "zb/Schedule/Result.h"
#include "zb/Schedule/Schedule.h"

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace zb::schedule {

/// What an op of a rank program does.
enum class CommOpKind { Compute, Send, Recv };

/// One op of a rank program.
struct CommOp {
  CommOpKind kind = CommOpKind::Compute;
  /// Compute: the action run. Send and Recv: the action whose output travels
  /// (the payload).
  Action action;
  /// Send: the destination rank; Recv: the source rank; -1 for Compute.
  int64_t peer = -1;
  int64_t channel = -1;
  /// The transfer's number on (sender, receiver, channel), from 0.
  int64_t seq = -1;

  bool operator==(const CommOp &other) const {
    return kind == other.kind && action == other.action && peer == other.peer &&
           channel == other.channel && seq == other.seq;
  }
  bool operator!=(const CommOp &other) const { return !(*this == other); }
};

/// Renders an op the way sched IR spells it, without channel and seq:
/// "compute F stage 1 microbatch 0", "send F stage 0 microbatch 0 to 1",
/// "recv B stage 1 microbatch 0 from 1".
std::string describe(const CommOp &op);

/// A schedule with its transfers: one op list per rank.
struct CommProgram {
  /// The schedule's name ("zb-h1", ...); may be empty.
  std::string name;
  int numStages = 0;
  int numMicrobatches = 0;
  /// stageRanks[s] is the rank that runs stage s.
  std::vector<int> stageRanks;
  /// ranks[r] is rank r's program order.
  std::vector<std::vector<CommOp>> ranks;
};

/// The channel of transfers from `producerStage` to the adjacent
/// `consumerStage`: 2*s for activations from s to s+1, 2*s+1 for gradients
/// from s+1 to s.
int64_t channelOf(int producerStage, int consumerStage);

/// The order in which a rank posts its recvs (see the file comment).
enum class RecvOrder {
  /// Each channel's recvs in its send order.
  PerChannel,
  /// Each link's recvs in its send order, across channels.
  PerLink,
};

/// Inserts a send and a recv for every cross-rank dependency of `schedule`
/// (see the file comment for the placement and channel rule). Fails with a
/// one-line message when the problem is invalid or the schedule is not
/// structurally sound (an action missing, duplicated or on the wrong rank).
/// It does not check for deadlock: see checkDeadlock.
Result<CommProgram>
insertCommunication(const Problem &problem, const Schedule &schedule,
                    RecvOrder order = RecvOrder::PerChannel);

/// Why a program cannot finish.
struct Deadlock {
  /// A blocked op: rank and position in program.ranks[rank].
  struct Wait {
    int rank;
    int index;
  };
  /// Every rank that cannot finish, in rank order, at the recv it waits in.
  std::vector<Wait> blocked;
  /// The wait-for cycle, starting at its lowest rank; each entry waits for a
  /// send of the next one's rank, the last for the first's. When no cycle
  /// exists (a recv whose send the peer never executes), the chain of waits
  /// ending at that recv.
  std::vector<Wait> cycle;
  bool isCycle = true;
  /// "rank 0 waits in 'recv B stage 1 microbatch 0 from 1' while rank 1
  /// waits in 'recv F stage 0 microbatch 0 from 0'".
  std::string cycleText;

  /// "deadlock: " followed by cycleText.
  std::string message() const { return "deadlock: " + cycleText; }
};

/// Runs all ranks with non-blocking sends and blocking recvs (a recv on
/// rank r from rank q, channel c, seq k completes once q has executed its
/// send to r on channel c with seq k). Returns nothing when every rank
/// finishes, otherwise where they are stuck.
std::optional<Deadlock> checkDeadlock(const CommProgram &program);

/// For backends that match transfers per link (sender, receiver) in issue
/// order without tags (NCCL): the first link whose receiver posts its recvs
/// in another order than the sender's sends, as a one-line message
/// ("rank 0 sends 'send ...' 2nd to rank 1, which receives 'recv ...'
/// 2nd"); nothing when every link's order agrees. The channel and seq of a
/// transfer still say which recv it meets; only the order across channels
/// can differ (V placements: activations and gradients share a link).
std::optional<std::string> checkLinkOrder(const CommProgram &program);

/// Fits `stageRanks` (stage s on rank stageRanks[s]) to a placement of the
/// problem: numRanks ranks, stageRanks.size()/numRanks chunks, loop
/// (preferred when both fit) or v.
struct PlacementFit {
  bool ok = false;
  Placement placement = Placement::Loop;
  int numChunks = 0;
  /// On failure, the stage to blame (-1 when none is) and a one-line message.
  int stage = -1;
  std::string message;
};
/// Where both placements fit (one rank, or one chunk), `preferred`.
PlacementFit inferPlacement(const std::vector<int> &stageRanks, int numRanks,
                            Placement preferred = Placement::Loop);

/// Writes `program` as a textual `sched.program` (one op per line, in the
/// form zb-opt prints).
void writeSchedProgram(const CommProgram &program, std::ostream &os);

} // namespace zb::schedule

#endif // ZB_SCHEDULE_COMMUNICATION_H
