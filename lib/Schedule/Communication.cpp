//===- Communication.cpp - Send/recv insertion and deadlock check ---------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Schedule/Communication.h"

#include "ActionIndex.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <set>
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
                                        const Schedule &schedule) {
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
  std::map<int64_t, int64_t> sendsOnChannel;
  for (int rank = 0; rank < p; ++rank) {
    for (const Action &action : schedule.ranks[rank]) {
      std::optional<Transfer> out = outgoing(stageRanks, action);
      if (!out)
        continue;
      int64_t channel = channelOf(action.stage, out->otherStage);
      seqOf[out->forward][action.stage * m + action.microbatch] =
          sendsOnChannel[channel]++;
    }
  }

  program.ranks.resize(p);
  for (int rank = 0; rank < p; ++rank) {
    const std::vector<Action> &actions = schedule.ranks[rank];
    int n = static_cast<int>(actions.size());

    // The recvs of this rank, grouped by channel: (seq, consumer index, op).
    std::map<int64_t, std::vector<std::pair<int, CommOp>>> recvsByChannel;
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
      recvsByChannel[recv.channel].push_back({i, recv});
    }

    // A recv goes right before the first consumer of it or of any later
    // message on its channel, so each channel is received in send order.
    std::vector<std::vector<CommOp>> recvsBefore(n);
    for (auto &[channel, recvs] : recvsByChannel) {
      std::sort(recvs.begin(), recvs.end(), [](const auto &a, const auto &b) {
        return a.second.seq < b.second.seq;
      });
      int deadline = n;
      for (auto it = recvs.rbegin(); it != recvs.rend(); ++it) {
        deadline = std::min(deadline, it->first);
        it->first = deadline;
      }
      for (const auto &[before, recv] : recvs)
        recvsBefore[before].push_back(recv);
    }

    std::vector<CommOp> &ops = program.ranks[rank];
    for (int i = 0; i < n; ++i) {
      // Channels come out of the map in order, each in seq order.
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

std::optional<Deadlock> checkDeadlock(const CommProgram &program) {
  // A transfer: (from rank, to rank, channel, seq).
  using Key = std::array<int64_t, 4>;
  int p = static_cast<int>(program.ranks.size());
  std::vector<std::size_t> next(p, 0);
  std::set<Key> sent;
  std::map<Key, int> waiting;
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
      if (op.kind == CommOpKind::Send) {
        Key key{rank, op.peer, op.channel, op.seq};
        sent.insert(key);
        auto it = waiting.find(key);
        if (it != waiting.end()) {
          ready.push_back(it->second);
          waiting.erase(it);
        }
      } else if (op.kind == CommOpKind::Recv) {
        Key key{op.peer, rank, op.channel, op.seq};
        if (!sent.count(key)) {
          waiting[key] = rank;
          break;
        }
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

PlacementFit inferPlacement(const std::vector<int> &stageRanks, int numRanks) {
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
  int loopBad = firstMismatch(Placement::Loop);
  if (loopBad < 0) {
    fit.ok = true;
    fit.placement = Placement::Loop;
    return fit;
  }
  int vBad = firstMismatch(Placement::V);
  if (vBad < 0) {
    fit.ok = true;
    fit.placement = Placement::V;
    return fit;
  }
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
