//===- Communication.cpp - Send/recv insertion and deadlock check ---------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Schedule/Communication.h"

#include "ActionIndex.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <deque>
#include <map>
#include <tuple>
#include <utility>

namespace zb::schedule {

std::string describe(const CommOp &op) {
  std::string payload = std::string(kindName(op.action.kind)) + " stage " +
                        std::to_string(op.action.stage) + " microbatch " +
                        std::to_string(op.action.microbatch);
  switch (op.kind) {
  case CommOpKind::Compute:
    return "compute " + payload;
  case CommOpKind::Send:
    return "send " + payload + " to " + std::to_string(op.peer);
  case CommOpKind::Recv:
    return "recv " + payload + " from " + std::to_string(op.peer);
  }
  return payload;
}

int64_t channelOf(int producerStage, int consumerStage) {
  if (consumerStage == producerStage + 1)
    return 2 * static_cast<int64_t>(producerStage);
  if (consumerStage == producerStage - 1)
    return 2 * static_cast<int64_t>(consumerStage) + 1;
  return -1;
}

//===----------------------------------------------------------------------===//
// insertCommunication
//===----------------------------------------------------------------------===//

namespace {
/// A cross-rank edge of one action: the stage on the other side and whether
/// the output travels forward (activation) or backward (gradient).
struct Transfer {
  int otherStage = -1;
  bool forward = true;
};
} // namespace

/// Where the output of `action` goes when it leaves its rank.
static std::optional<Transfer> outgoing(const std::vector<int> &stageRanks,
                                        const Action &action) {
  int s = action.stage, numStages = static_cast<int>(stageRanks.size());
  if (action.kind == ActionKind::F && s + 1 < numStages &&
      stageRanks[s + 1] != stageRanks[s])
    return Transfer{s + 1, true};
  if ((action.kind == ActionKind::B || action.kind == ActionKind::BW) &&
      s > 0 && stageRanks[s - 1] != stageRanks[s])
    return Transfer{s - 1, false};
  return std::nullopt;
}

/// Where the input `action` needs from another rank comes from.
static std::optional<Transfer> incoming(const std::vector<int> &stageRanks,
                                        const Action &action) {
  int s = action.stage, numStages = static_cast<int>(stageRanks.size());
  if (action.kind == ActionKind::F && s > 0 &&
      stageRanks[s - 1] != stageRanks[s])
    return Transfer{s - 1, true};
  if ((action.kind == ActionKind::B || action.kind == ActionKind::BW) &&
      s + 1 < numStages && stageRanks[s + 1] != stageRanks[s])
    return Transfer{s + 1, false};
  return std::nullopt;
}

Result<CommProgram> insertCommunication(const Problem &problem,
                                        const Schedule &schedule,
                                        RecvOrder order) {
  std::string error;
  if (!problem.verify(error))
    return Failure{"invalid problem: " + error};
  std::vector<detail::StructuralIssue> issues;
  detail::ActionIndex index(problem, schedule, issues);
  if (!issues.empty())
    return Failure{issues.front().message};

  int p = problem.numRanks, m = problem.numMicrobatches;
  int numStages = problem.numStages();
  CommProgram program;
  program.name = schedule.name;
  program.numStages = numStages;
  program.numMicrobatches = m;
  for (int stage = 0; stage < numStages; ++stage)
    program.stageRanks.push_back(problem.rankOfStage(stage));
  const std::vector<int> &stageRanks = program.stageRanks;

  // Number the sends of each channel in their sender's program order. Every
  // payload is sent at most once: seqOf[forward][stage * m + mb].
  std::vector<int64_t> seqOf[2];
  seqOf[0].assign(static_cast<std::size_t>(numStages) * m, -1);
  seqOf[1].assign(static_cast<std::size_t>(numStages) * m, -1);
  // Channels are numbered below 2 * numStages (channelOf).
  std::vector<int64_t> sendsOnChannel(2 * static_cast<std::size_t>(numStages));
  // With RecvOrder::PerLink, also each send's place among its link's sends
  // (a rank sends to its neighbours only: at most a few links each).
  bool perLink = order == RecvOrder::PerLink;
  std::vector<int64_t> linkOrderOf[2];
  if (perLink) {
    linkOrderOf[0].assign(static_cast<std::size_t>(numStages) * m, -1);
    linkOrderOf[1].assign(static_cast<std::size_t>(numStages) * m, -1);
  }
  for (int rank = 0; rank < p; ++rank) {
    std::map<int, int64_t> sendsOnLink;
    for (const Action &action : schedule.ranks[rank]) {
      std::optional<Transfer> out = outgoing(stageRanks, action);
      if (!out)
        continue;
      int64_t channel = channelOf(action.stage, out->otherStage);
      std::size_t key =
          static_cast<std::size_t>(action.stage) * m + action.microbatch;
      seqOf[out->forward][key] = sendsOnChannel[channel]++;
      if (perLink)
        linkOrderOf[out->forward][key] =
            sendsOnLink[stageRanks[out->otherStage]]++;
    }
  }

  program.ranks.resize(p);
  for (int rank = 0; rank < p; ++rank) {
    const std::vector<Action> &actions = schedule.ranks[rank];
    int n = static_cast<int>(actions.size());

    // The recvs of this rank, grouped by channel (or link).
    struct PendingRecv {
      int before; // the consumer's index
      CommOp op;
      int64_t order; // its place in the group's send order
    };
    std::map<int64_t, std::vector<PendingRecv>> recvsByChannel;
    for (int i = 0; i < n; ++i) {
      std::optional<Transfer> in = incoming(stageRanks, actions[i]);
      if (!in)
        continue;
      int producer = in->otherStage, mb = actions[i].microbatch;
      Action payload{ActionKind::F, producer, mb};
      if (!in->forward)
        payload.kind = index.find(ActionKind::B, producer, mb).rank >= 0
                           ? ActionKind::B
                           : ActionKind::BW;
      CommOp recv;
      recv.kind = CommOpKind::Recv;
      recv.action = payload;
      recv.peer = stageRanks[producer];
      recv.channel = channelOf(producer, actions[i].stage);
      recv.seq = seqOf[in->forward][producer * m + mb];
      std::size_t key = static_cast<std::size_t>(producer) * m + mb;
      recvsByChannel[perLink ? recv.peer : recv.channel].push_back(
          {i, recv, perLink ? linkOrderOf[in->forward][key] : recv.seq});
    }

    // A recv goes right before the first consumer of it or of any later
    // message on its channel (link), so each channel (link) is received in
    // send order.
    std::vector<std::vector<CommOp>> recvsBefore(n);
    for (auto &[channel, recvs] : recvsByChannel) {
      std::sort(recvs.begin(), recvs.end(),
                [](const PendingRecv &a, const PendingRecv &b) {
                  return a.order < b.order;
                });
      int deadline = n;
      for (auto it = recvs.rbegin(); it != recvs.rend(); ++it) {
        deadline = std::min(deadline, it->before);
        it->before = deadline;
      }
      for (const PendingRecv &recv : recvs)
        recvsBefore[recv.before].push_back(recv.op);
    }

    std::vector<CommOp> &ops = program.ranks[rank];
    for (int i = 0; i < n; ++i) {
      // Channels (links) come out of the map in order, each in send order.
      for (const CommOp &recv : recvsBefore[i])
        ops.push_back(recv);
      const Action &action = actions[i];
      CommOp compute;
      compute.action = action;
      ops.push_back(compute);
      if (std::optional<Transfer> out = outgoing(stageRanks, action)) {
        CommOp send;
        send.kind = CommOpKind::Send;
        send.action = action;
        send.peer = stageRanks[out->otherStage];
        send.channel = channelOf(action.stage, out->otherStage);
        send.seq = seqOf[out->forward][action.stage * m + action.microbatch];
        ops.push_back(send);
      }
    }
  }
  return program;
}

//===----------------------------------------------------------------------===//
// checkDeadlock
//===----------------------------------------------------------------------===//

/// Numbers the transfers of `program`: for each op, by rank and position,
/// the id of its transfer (from rank, to rank, channel, seq), the same for a
/// send and the recvs that match it; -1 for compute ops. Returns a bound on
/// the ids. A program has few links and channels and numbers each one's
/// transfers from 0, so ids are dense per (from, to, channel); a channel
/// whose numbers are not (a malformed program) is numbered by sorting. Array
/// lookups keep the run that follows fast (ordered or hashed sets of keys
/// were most of the validation's time at p * m in the millions).
static int64_t numberTransfers(const CommProgram &program,
                               std::vector<std::vector<int64_t>> &idOf) {
  using Triple = std::array<int64_t, 3>; // from, to, channel
  std::map<Triple, int> tripleIds;
  struct Channel {
    int64_t minSeq = INT64_MAX, maxSeq = INT64_MIN, count = 0, base = 0;
    bool dense = false;
  };
  std::vector<Channel> channels;
  // The triple of each transfer op, by rank and position (-1: compute).
  idOf.assign(program.ranks.size(), {});
  int lastTriple = -1;
  Triple last{-1, -1, -1};
  for (std::size_t rank = 0; rank < program.ranks.size(); ++rank) {
    const std::vector<CommOp> &ops = program.ranks[rank];
    idOf[rank].assign(ops.size(), -1);
    int64_t self = static_cast<int64_t>(rank);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const CommOp &op = ops[i];
      if (op.kind == CommOpKind::Compute)
        continue;
      Triple triple = op.kind == CommOpKind::Send
                          ? Triple{self, op.peer, op.channel}
                          : Triple{op.peer, self, op.channel};
      if (lastTriple < 0 || triple != last) {
        auto [it, added] =
            tripleIds.try_emplace(triple, static_cast<int>(tripleIds.size()));
        if (added)
          channels.emplace_back();
        lastTriple = it->second;
        last = triple;
      }
      Channel &channel = channels[lastTriple];
      channel.minSeq = std::min(channel.minSeq, op.seq);
      channel.maxSeq = std::max(channel.maxSeq, op.seq);
      ++channel.count;
      idOf[rank][i] = lastTriple;
    }
  }
  int64_t next = 0;
  for (Channel &channel : channels) {
    channel.dense = channel.minSeq >= 0 && channel.maxSeq < 2 * channel.count;
    if (channel.dense) {
      channel.base = next;
      next += channel.maxSeq + 1;
    }
  }
  // Sparse channels: their transfers' distinct keys, sorted.
  std::vector<std::tuple<int, int64_t, int, std::size_t>> unsorted;
  for (std::size_t rank = 0; rank < program.ranks.size(); ++rank) {
    const std::vector<CommOp> &ops = program.ranks[rank];
    for (std::size_t i = 0; i < ops.size(); ++i) {
      int64_t &id = idOf[rank][i];
      if (id < 0)
        continue;
      const Channel &channel = channels[id];
      if (channel.dense)
        id = channel.base + ops[i].seq;
      else
        unsorted.emplace_back(static_cast<int>(id), ops[i].seq,
                              static_cast<int>(rank), i);
    }
  }
  std::sort(unsorted.begin(), unsorted.end());
  for (std::size_t k = 0; k < unsorted.size(); ++k) {
    auto [triple, seq, rank, index] = unsorted[k];
    if (k > 0 && (std::get<0>(unsorted[k - 1]) != triple ||
                  std::get<1>(unsorted[k - 1]) != seq))
      ++next;
    idOf[rank][index] = next;
  }
  return unsorted.empty() ? next : next + 1;
}

std::optional<Deadlock> checkDeadlock(const CommProgram &program) {
  int p = static_cast<int>(program.ranks.size());
  std::vector<std::size_t> next(p, 0);
  std::vector<std::vector<int64_t>> idOf;
  int64_t numTransfers = numberTransfers(program, idOf);
  std::vector<char> sent(numTransfers, 0);
  // The rank blocked in a recv of each transfer (only the receiver can be).
  std::vector<int> waiting(numTransfers, -1);
  std::deque<int> ready;
  for (int rank = 0; rank < p; ++rank)
    ready.push_back(rank);

  // Runs `rank` until it finishes or blocks in a recv.
  while (!ready.empty()) {
    int rank = ready.front();
    ready.pop_front();
    const std::vector<CommOp> &ops = program.ranks[rank];
    for (; next[rank] < ops.size(); ++next[rank]) {
      const CommOp &op = ops[next[rank]];
      int64_t id = idOf[rank][next[rank]];
      if (op.kind == CommOpKind::Send) {
        sent[id] = 1;
        if (waiting[id] >= 0) {
          ready.push_back(waiting[id]);
          waiting[id] = -1;
        }
      } else if (op.kind == CommOpKind::Recv && !sent[id]) {
        waiting[id] = rank;
        break;
      }
    }
  }

  Deadlock deadlock;
  for (int rank = 0; rank < p; ++rank)
    if (next[rank] < program.ranks[rank].size())
      deadlock.blocked.push_back({rank, static_cast<int>(next[rank])});
  if (deadlock.blocked.empty())
    return std::nullopt;

  // Each blocked rank waits for exactly one peer: follow the waits from each
  // blocked rank until a rank repeats (a cycle) or the chain leaves the
  // blocked ranks (a send that never comes).
  auto blockedPeer = [&](int rank) -> int {
    int64_t peer = program.ranks[rank][next[rank]].peer;
    if (peer < 0 || peer >= p || next[peer] >= program.ranks[peer].size())
      return -1;
    return static_cast<int>(peer);
  };
  std::vector<int> walkOf(p, -1);
  std::vector<int> chain;
  for (const Deadlock::Wait &start : deadlock.blocked) {
    if (walkOf[start.rank] >= 0)
      continue;
    std::vector<int> walk;
    int rank = start.rank;
    while (rank >= 0 && walkOf[rank] < 0) {
      walkOf[rank] = start.rank;
      walk.push_back(rank);
      rank = blockedPeer(rank);
    }
    if (rank >= 0 && walkOf[rank] == start.rank) {
      // A new cycle: the walk from `rank` on.
      auto from = std::find(walk.begin(), walk.end(), rank);
      std::vector<int> cycle(from, walk.end());
      std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()),
                  cycle.end());
      chain = cycle;
      deadlock.isCycle = true;
      break;
    }
    if (rank < 0 && chain.empty()) {
      chain = walk;
      deadlock.isCycle = false;
    }
  }

  for (int rank : chain) {
    deadlock.cycle.push_back({rank, static_cast<int>(next[rank])});
    if (!deadlock.cycleText.empty())
      deadlock.cycleText += " while ";
    deadlock.cycleText += "rank " + std::to_string(rank) + " waits in '" +
                          describe(program.ranks[rank][next[rank]]) + "'";
  }
  if (!deadlock.isCycle && !chain.empty()) {
    int64_t peer = program.ranks[chain.back()][next[chain.back()]].peer;
    if (peer >= 0 && peer < p)
      deadlock.cycleText +=
          ", which rank " + std::to_string(peer) + " never sends";
    else
      deadlock.cycleText += ", from a rank that does not exist";
  }
  return deadlock;
}

//===----------------------------------------------------------------------===//
// inferPlacement
//===----------------------------------------------------------------------===//

PlacementFit inferPlacement(const std::vector<int> &stageRanks, int numRanks,
                            Placement preferred) {
  PlacementFit fit;
  int numStages = static_cast<int>(stageRanks.size());
  if (numRanks < 1 || numStages == 0) {
    fit.message = "no stages to place";
    return fit;
  }
  for (int stage = 0; stage < numStages; ++stage) {
    if (stageRanks[stage] < 0 || stageRanks[stage] >= numRanks) {
      fit.stage = stage;
      fit.message = "stage " + std::to_string(stage) + " is on rank " +
                    std::to_string(stageRanks[stage]) + ", out of range [0, " +
                    std::to_string(numRanks) + ")";
      return fit;
    }
  }
  if (numStages % numRanks != 0) {
    fit.message = std::to_string(numStages) +
                  " stages do not divide evenly over " +
                  std::to_string(numRanks) + " ranks";
    return fit;
  }
  fit.numChunks = numStages / numRanks;

  Problem problem;
  problem.numRanks = numRanks;
  problem.numChunks = fit.numChunks;
  auto firstMismatch = [&](Placement placement) {
    problem.placement = placement;
    for (int stage = 0; stage < numStages; ++stage)
      if (problem.rankOfStage(stage) != stageRanks[stage])
        return stage;
    return -1;
  };
  Placement other =
      preferred == Placement::Loop ? Placement::V : Placement::Loop;
  for (Placement placement : {preferred, other})
    if (firstMismatch(placement) < 0) {
      fit.ok = true;
      fit.placement = placement;
      return fit;
    }
  int loopBad = firstMismatch(Placement::Loop);
  int vBad = firstMismatch(Placement::V);
  auto expected = [&](Placement placement, int stage) {
    problem.placement = placement;
    return std::to_string(problem.rankOfStage(stage));
  };
  fit.stage = std::max(loopBad, vBad);
  fit.message = "the stages fit neither placement: loop placement puts stage " +
                std::to_string(loopBad) + " on rank " +
                expected(Placement::Loop, loopBad) + " (not " +
                std::to_string(stageRanks[loopBad]) +
                "), v placement puts stage " + std::to_string(vBad) +
                " on rank " + expected(Placement::V, vBad) + " (not " +
                std::to_string(stageRanks[vBad]) + ")";
  return fit;
}

//===----------------------------------------------------------------------===//
// writeSchedProgram
//===----------------------------------------------------------------------===//

void writeSchedProgram(const CommProgram &program, std::ostream &os) {
  os << "sched.program ranks " << program.ranks.size() << " stages "
     << program.numStages << " microbatches " << program.numMicrobatches;
  bool hasName = !program.name.empty();
  bool hasRanks = !program.stageRanks.empty();
  if (hasName || hasRanks) {
    os << " attributes {";
    if (hasName)
      os << "schedule = \"" << program.name << "\"";
    if (hasRanks) {
      os << (hasName ? ", " : "") << "stage_ranks = array<i64: ";
      for (std::size_t i = 0; i < program.stageRanks.size(); ++i)
        os << (i ? ", " : "") << program.stageRanks[i];
      os << ">";
    }
    os << "}";
  }
  os << "\n";
  for (std::size_t rank = 0; rank < program.ranks.size(); ++rank) {
    os << "rank " << rank << " {\n";
    for (const CommOp &op : program.ranks[rank]) {
      const Action &action = op.action;
      os << "  sched."
         << (op.kind == CommOpKind::Compute ? "compute"
             : op.kind == CommOpKind::Send  ? "send"
                                            : "recv")
         << " " << kindName(action.kind) << " stage " << action.stage
         << " microbatch " << action.microbatch;
      if (op.kind != CommOpKind::Compute)
        os << (op.kind == CommOpKind::Send ? " to " : " from ") << op.peer
           << " channel " << op.channel << " seq " << op.seq;
      os << "\n";
    }
    os << "}\n";
  }
}

//===----------------------------------------------------------------------===//
// checkLinkOrder
//===----------------------------------------------------------------------===//

std::optional<std::string> checkLinkOrder(const CommProgram &program) {
  // Per link (from, to): its sends and its recvs, each in program order.
  std::map<std::pair<int64_t, int64_t>, std::vector<const CommOp *>> sends,
      recvs;
  for (std::size_t rank = 0; rank < program.ranks.size(); ++rank)
    for (const CommOp &op : program.ranks[rank]) {
      int64_t self = static_cast<int64_t>(rank);
      if (op.kind == CommOpKind::Send)
        sends[{self, op.peer}].push_back(&op);
      else if (op.kind == CommOpKind::Recv)
        recvs[{op.peer, self}].push_back(&op);
    }
  auto ordinal = [](std::size_t i) {
    std::size_t n = i + 1;
    const char *suffix = n % 100 >= 11 && n % 100 <= 13 ? "th"
                         : n % 10 == 1                  ? "st"
                         : n % 10 == 2                  ? "nd"
                         : n % 10 == 3                  ? "rd"
                                                        : "th";
    return std::to_string(n) + suffix;
  };
  for (const auto &[link, linkSends] : sends) {
    const std::vector<const CommOp *> &linkRecvs = recvs[link];
    for (std::size_t i = 0; i < linkSends.size() && i < linkRecvs.size(); ++i)
      if (linkSends[i]->channel != linkRecvs[i]->channel ||
          linkSends[i]->seq != linkRecvs[i]->seq)
        return "rank " + std::to_string(link.first) + " sends '" +
               describe(*linkSends[i]) + "' " + ordinal(i) + " to rank " +
               std::to_string(link.second) + ", which receives '" +
               describe(*linkRecvs[i]) + "' " + ordinal(i);
  }
  return std::nullopt;
}

} // namespace zb::schedule
