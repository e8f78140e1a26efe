//===- ProfileTest.cpp - The profile's writer and reader ------------------===//
//
// Part of ZeroBubble MLIR.
//
//===----------------------------------------------------------------------===//

#include "zb/Dialect/Sched/Profile.h"

#include <gtest/gtest.h>

using namespace zb::sched;

namespace {

TEST(Profile, WhatIsWrittenReadsBack) {
  StageProfile written{{1.5, 0.25, 1e-9}, {2.0, 0.0, 3.75}, {0.5, 1.0, 0.0}};
  StageProfile read;
  std::optional<std::string> error =
      parseProfile(writeProfile(written), 3, read);
  ASSERT_FALSE(error) << *error;
  EXPECT_EQ(read.f, written.f);
  EXPECT_EQ(read.b, written.b);
  EXPECT_EQ(read.w, written.w);
}

TEST(Profile, WIsOptional) {
  StageProfile read;
  ASSERT_FALSE(
      parseProfile(R"({"stages": [{"stage": 0, "f": 1, "b": 2}]})", 1, read));
  EXPECT_EQ(read.w, std::vector<double>{0.0});
}

TEST(Profile, BadProfilesAreNamed) {
  auto error = [](const std::string &text, int stages) {
    StageProfile read;
    return parseProfile(text, stages, read).value_or("(accepted)");
  };
  EXPECT_NE(error("{", 1).find("invalid JSON"), std::string::npos);
  EXPECT_EQ(error(R"({"stage": []})", 1),
            "expected an object with a \"stages\" array");
  EXPECT_EQ(error(R"({"stages": [{"stage": 0, "f": 1, "b": 1}]})", 2),
            "no entry for stage 1");
  EXPECT_EQ(error(R"({"stages": [{"stage": 0, "f": 1, "b": 1},
                                {"stage": 0, "f": 1, "b": 1}]})",
                  1),
            "stage 0 appears twice");
  EXPECT_EQ(error(R"({"stages": [{"stage": 3, "f": 1, "b": 1}]})", 1),
            "entry 0 of \"stages\" names stage 3, but the model has 1 stages");
  EXPECT_EQ(error(R"({"stages": [{"stage": 0, "f": -1, "b": 1}]})", 1),
            "entry 0 of \"stages\" (stage 0) has a cost that is negative, "
            "not finite or past 1e12 ms");
  // Past 1e12 ms, sums of costs could overflow the partition's search.
  EXPECT_EQ(error(R"({"stages": [{"stage": 0, "f": 1, "b": 1e308}]})", 1),
            "entry 0 of \"stages\" (stage 0) has a cost that is negative, "
            "not finite or past 1e12 ms");
  EXPECT_EQ(error(R"({"stages": [{"stage": 0, "f": 1e12, "b": 1}]})", 1),
            "(accepted)");
  // Nesting that would exhaust the parser's stack; brackets in strings do
  // not count.
  EXPECT_EQ(error(std::string(100000, '[') + std::string(100000, ']'), 1),
            "invalid JSON: nested more than 64 levels deep");
  EXPECT_EQ(error(R"({"note": ")" + std::string(1000, '[') +
                      R"(", "stages": [{"stage": 0, "f": 1, "b": 1}]})",
                  1),
            "(accepted)");
  EXPECT_EQ(error(R"({"stages": [{"stage": 0, "f": 1}]})", 1),
            "entry 0 of \"stages\" (stage 0) needs numbers \"f\" and \"b\"");
}

} // namespace
