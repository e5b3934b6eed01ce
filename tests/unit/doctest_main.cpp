// Shared doctest entry point for every unit-test executable, with a listener that names each case
// skipped by a doctest::skip decorator (tests/unit/skip.h), so a skip is visible in ctest's log.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

namespace {

struct SkippedCases : doctest::IReporter {
  std::ostream& out;
  const doctest::ContextOptions& opt;
  explicit SkippedCases(const doctest::ContextOptions& o) : out(*o.cout), opt(o) {}

  void test_case_skipped(const doctest::TestCaseData& tc) override {
    // Cases left out by a filter (-tc, -sf) are skipped too, but only a decorator is "cannot run here".
    if (tc.m_skip && !opt.no_skip) out << "[doctest] SKIPPED: " << tc.m_name << " (" << tc.m_file.c_str() << ":" << tc.m_line << ")\n";
  }

  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("kiln-skipped-cases", 1, SkippedCases);
