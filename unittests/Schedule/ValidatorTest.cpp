//===- ValidatorTest.cpp - Validator and CSV import tests -------*- C++ -*-===//

#include "zb/Schedule/Validator.h"
#include "zb/Schedule/Export.h"
#include "zb/Schedule/Generators.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace zb::schedule;

namespace {

Problem smallProblem() {
  Problem problem;
  problem.numRanks = 3;
  problem.numMicrobatches = 4;
  problem.memB = 1.0;
  problem.memW = 0.5;
  return problem;
}

Schedule h1(const Problem &problem) {
  Result<Schedule> schedule = generateSchedule("zb-h1", problem);
  EXPECT_TRUE(schedule.ok()) << schedule.error();
  return *schedule;
}

/// Returns the first diagnostic, requiring that there is one.
Diagnostic first(const Problem &problem, const Schedule &schedule) {
  std::vector<Diagnostic> diagnostics = validate(problem, schedule);
  EXPECT_FALSE(diagnostics.empty());
  if (diagnostics.empty())
    return Diagnostic{DiagnosticKind::InvalidProblem, -1, -1, Action(), ""};
  return diagnostics.front();
}

} // namespace

TEST(Validator, AcceptsGeneratedSchedule) {
  Problem problem = smallProblem();
  EXPECT_TRUE(validate(problem, h1(problem)).empty());
}

TEST(Validator, Missing) {
  Problem problem = smallProblem();
  Schedule schedule = h1(problem);
  schedule.ranks[1].pop_back(); // the last W of rank 1
  Diagnostic d = first(problem, schedule);
  EXPECT_EQ(d.kind, DiagnosticKind::Missing);
  EXPECT_EQ(d.action, (Action{ActionKind::W, 1, 3}));
  EXPECT_NE(d.message.find("missing W(stage 1, mb 3)"), std::string::npos);
}

// Evaluation runs a schedule's F actions alone: complete without B and W,
// and still checked for missing F's and backward actions.
TEST(Validator, ForwardPart) {
  Problem problem = smallProblem();
  for (const char *name : {"1f1b", "zb-h1", "gpipe"}) {
    Result<Schedule> full = generateSchedule(name, problem);
    ASSERT_TRUE(full.ok()) << full.error();
    Schedule forward = forwardPart(*full);
    EXPECT_TRUE(forward.forwardOnly);
    EXPECT_EQ(forward.numActions(),
              size_t(problem.numStages() * problem.numMicrobatches));
    EXPECT_TRUE(validate(problem, forward).empty()) << name;
    // Not complete as a training schedule.
    Schedule training = forward;
    training.forwardOnly = false;
    EXPECT_EQ(first(problem, training).kind, DiagnosticKind::Missing);
  }
  Schedule forward = forwardPart(h1(problem));
  forward.ranks[2].pop_back();
  Diagnostic d = first(problem, forward);
  EXPECT_EQ(d.kind, DiagnosticKind::Missing);
  EXPECT_EQ(d.action, (Action{ActionKind::F, 2, 3}));
  forward = forwardPart(h1(problem));
  forward.ranks[0].push_back({ActionKind::B, 0, 0});
  d = first(problem, forward);
  EXPECT_NE(d.message.find("in a forward-only schedule"), std::string::npos)
      << d.message;
  // A V placement's rank 0 runs stage 3's F before stage 0's, which stage
  // 3 waits for through ranks 1 and 2: a deadlock, as in training.
  problem.numRanks = 2;
  problem.numChunks = 2;
  problem.placement = Placement::V;
  problem.numMicrobatches = 1;
  forward.ranks = {{{ActionKind::F, 3, 0}, {ActionKind::F, 0, 0}},
                   {{ActionKind::F, 1, 0}, {ActionKind::F, 2, 0}}};
  d = first(problem, forward);
  EXPECT_EQ(d.kind, DiagnosticKind::Deadlock) << d.message;
}

TEST(Validator, Duplicate) {
  Problem problem = smallProblem();
  Schedule schedule = h1(problem);
  schedule.ranks[0].push_back(schedule.ranks[0].front());
  Diagnostic d = first(problem, schedule);
  EXPECT_EQ(d.kind, DiagnosticKind::Duplicate);
  EXPECT_EQ(d.rank, 0);
  EXPECT_EQ(d.index, static_cast<int>(schedule.ranks[0].size()) - 1);
}

TEST(Validator, WrongRankAndOutOfRange) {
  Problem problem = smallProblem();
  Schedule schedule = h1(problem);
  std::swap(schedule.ranks[0][0], schedule.ranks[1][0]);
  EXPECT_EQ(first(problem, schedule).kind, DiagnosticKind::WrongRank);
  schedule = h1(problem);
  schedule.ranks[2].push_back({ActionKind::F, 2, 9});
  EXPECT_EQ(first(problem, schedule).kind, DiagnosticKind::OutOfRange);
}

TEST(Validator, MixedBackward) {
  Problem problem = smallProblem();
  Schedule schedule = h1(problem);
  schedule.ranks[2].push_back({ActionKind::BW, 2, 0});
  EXPECT_EQ(first(problem, schedule).kind, DiagnosticKind::MixedBackward);
}

TEST(Validator, DependencyOrder) {
  Problem problem = smallProblem();
  Schedule schedule = h1(problem);
  // Move rank 2's first W to the front, before its B.
  std::vector<Action> &rank = schedule.ranks[2];
  auto w = std::find(rank.begin(), rank.end(), Action{ActionKind::W, 2, 0});
  Action moved = *w;
  rank.erase(w);
  rank.insert(rank.begin(), moved);
  Diagnostic d = first(problem, schedule);
  EXPECT_EQ(d.kind, DiagnosticKind::DependencyOrder);
  EXPECT_EQ(d.rank, 2);
  EXPECT_EQ(d.index, 0);
  EXPECT_NE(d.message.find("before its dependency B(stage 2, mb 0)"),
            std::string::npos);
}

TEST(Validator, Deadlock) {
  Problem problem = smallProblem();
  problem.numRanks = 2;
  problem.numMicrobatches = 2;
  Schedule schedule;
  // Rank 1 wants microbatch 1 first, rank 0 waits for its B of microbatch 0
  // before sending F of microbatch 1: a cycle across ranks.
  schedule.ranks = {{{ActionKind::F, 0, 0},
                     {ActionKind::B, 0, 0},
                     {ActionKind::F, 0, 1},
                     {ActionKind::B, 0, 1},
                     {ActionKind::W, 0, 0},
                     {ActionKind::W, 0, 1}},
                    {{ActionKind::F, 1, 1},
                     {ActionKind::B, 1, 1},
                     {ActionKind::F, 1, 0},
                     {ActionKind::B, 1, 0},
                     {ActionKind::W, 1, 0},
                     {ActionKind::W, 1, 1}}};
  Diagnostic d = first(problem, schedule);
  EXPECT_EQ(d.kind, DiagnosticKind::Deadlock);
  EXPECT_EQ(d.rank, 0);
  EXPECT_EQ(d.action, (Action{ActionKind::B, 0, 0}));
  EXPECT_NE(d.message.find("waits for B(stage 1, mb 0)"), std::string::npos);
}

TEST(Validator, MemoryLimit) {
  Problem problem = smallProblem();
  problem.memLimit = 2.0;
  Result<Schedule> gpipe = generateSchedule("gpipe", problem);
  ASSERT_TRUE(gpipe.ok());
  Diagnostic d = first(problem, *gpipe);
  EXPECT_EQ(d.kind, DiagnosticKind::MemoryLimit);
  EXPECT_EQ(d.rank, 0);
  EXPECT_EQ(d.action, (Action{ActionKind::F, 0, 2}));
}

TEST(Csv, RoundTrip) {
  for (const char *name : {"zb-h1", "1f1b", "zb-v", "interleaved-1f1b"}) {
    const ScheduleInfo *info = lookupSchedule(name);
    Problem problem = smallProblem();
    problem.numMicrobatches = 6;
    problem.numChunks = info->defaultChunks;
    problem.placement = info->defaultPlacement;
    Result<Schedule> schedule = generateSchedule(name, problem);
    ASSERT_TRUE(schedule.ok()) << schedule.error();
    std::string csv =
        exportReport(analyze(problem, *schedule), ExportFormat::Csv);
    Result<Schedule> imported = importCsv(csv);
    ASSERT_TRUE(imported.ok()) << imported.error();
    EXPECT_EQ(*imported, *schedule) << name;
    EXPECT_TRUE(validate(problem, *imported).empty());
  }
}

TEST(Csv, SkipsCommunicationCells) {
  Result<Schedule> imported =
      importCsv("0F0,0SEND_F0,0I0,0W0\n1RECV_F0,1F0,1B0\n");
  ASSERT_TRUE(imported.ok()) << imported.error();
  ASSERT_EQ(imported->ranks.size(), 2u);
  EXPECT_EQ(imported->ranks[0].size(), 3u);
  EXPECT_EQ(imported->ranks[1][1], (Action{ActionKind::BW, 1, 0}));
}

TEST(Csv, RejectsBrokenCells) {
  Result<Schedule> bad = importCsv("0F0,0F1\n1F0,1X1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "line 2, cell 2: unknown action kind 'X' in '1X1' "
                         "(expected F, I, W or B)");
  bad = importCsv("0F0,F1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("line 1, cell 2: 'F1' is not an action"),
            std::string::npos);
  EXPECT_FALSE(importCsv("\n\n").ok());
  // A damaged file's bytes are quoted as \xNN, never echoed raw.
  bad = importCsv("0F0,0\xff\x01\\1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(),
            "line 1, cell 2: unknown action kind '\\xff\\x01\\x5c' "
            "in '0\\xff\\x01\\x5c1' (expected F, I, W or B)");
}

TEST(Csv, BrokenButParsableScheduleIsRejectedByValidator) {
  Problem problem = smallProblem();
  problem.numRanks = 2;
  problem.numMicrobatches = 1;
  // Rank 1 lists its W before its B.
  Result<Schedule> imported = importCsv("0F0,0I0,0W0\n1F0,1W0,1I0\n");
  ASSERT_TRUE(imported.ok());
  std::vector<Diagnostic> diagnostics = validate(problem, *imported);
  ASSERT_FALSE(diagnostics.empty());
  EXPECT_EQ(diagnostics.front().kind, DiagnosticKind::DependencyOrder);
}

TEST(Export, FormatsCarryTheSchedule) {
  Problem problem = smallProblem();
  ScheduleReport report = analyze(problem, h1(problem));
  std::string json = exportReport(report, ExportFormat::Json);
  for (const char *field :
       {"\"schedule\": \"zb-h1\"", "\"stages\": 3", "\"microbatches\": 4",
        "\"chunks\": 1", "\"makespan\":", "\"bubble_rate\":",
        "\"lower_bound\":", "\"peak_memory\": [3, 2.5, 2]", "\"valid\": true",
        "\"actions\":",
        "\"kind\": \"F\", \"stage\": 0, \"microbatch\": 0, "
        "\"start\": 0, \"end\": 1"})
    EXPECT_NE(json.find(field), std::string::npos) << field;
  std::string chrome = exportReport(report, ExportFormat::Chrome);
  EXPECT_NE(chrome.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(chrome.find("\"ph\": \"X\""), std::string::npos);
  std::string svg = exportReport(report, ExportFormat::Svg);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("class=\"W\""), std::string::npos);
  EXPECT_NE(svg.find("class=\"idle\""), std::string::npos);
  std::string text = exportReport(report, ExportFormat::Text);
  EXPECT_NE(text.find("valid yes"), std::string::npos);
}
