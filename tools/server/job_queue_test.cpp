#include "server/job_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace sd::server {
namespace {

// A job that reports steps until it is told to stop (as the engine does on cancel).
struct Blocking {
  std::atomic<bool> stop{false};
  std::atomic<bool> running{false};
  Work work() {
    return [this](const JobReporter& report) {
      running = true;
      for (int step = 1; !stop; ++step) {
        report.progress(step, 1000, 0.01);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      throw std::runtime_error("stopped");
      return JobResult{};
    };
  }
};

void wait_until(const std::function<bool()>& done) {
  for (int i = 0; i < 5000 && !done(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(done());
}

TEST(JobQueue, RunsJobsAndKeepsTheirResults) {
  JobQueue queue(2, 10, [] {});
  auto submitted = queue.submit("img_gen", [](const JobReporter& report) {
    report.progress(1, 1, 0.5);
    JobResult r;
    r.output_format = "png";
    r.images = {"bytes"};
    r.seeds = {42};
    return r;
  });
  ASSERT_TRUE(submitted.job);
  const auto done = queue.wait_finished(submitted.job->id);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, JobStatus::Completed);
  EXPECT_EQ(done->result.images, std::vector<std::string>{"bytes"});
  EXPECT_EQ(done->progress.step, 1);
  EXPECT_GT(done->completed, 0);
}

// A synchronous call's wait ends at its deadline with the job's state then; the job goes on.
TEST(JobQueue, AWaitWithADeadlineEndsWhileTheJobRuns) {
  Blocking blocking;
  JobQueue queue(2, 10, [&blocking] { blocking.stop = true; });
  auto submitted = queue.submit("img_gen", blocking.work());
  ASSERT_TRUE(submitted.job);
  const auto waited = queue.wait_finished(submitted.job->id, 50);
  ASSERT_TRUE(waited);
  EXPECT_TRUE(waited->status == JobStatus::Queued || waited->status == JobStatus::Generating);
  EXPECT_FALSE(blocking.stop);
  queue.shutdown();
}

TEST(JobQueue, ARunningJobShowsItsLatestPreview) {
  JobQueue queue(2, 10, [] {});
  std::atomic<bool> release{false};
  auto submitted = queue.submit("img_gen", [&release](const JobReporter& report) {
    report.preview(1, "first");
    report.preview(2, "second");
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return JobResult{};
  });
  const std::string id = submitted.job->id;
  wait_until([&] { return queue.find(id)->preview.step == 2; });
  const JobState running = *queue.find(id);
  ASSERT_TRUE(running.preview.png);
  EXPECT_EQ(*running.preview.png, "second");
  release = true;
  EXPECT_EQ(queue.wait_finished(id)->status, JobStatus::Completed);
}

TEST(JobQueue, AFailedJobSaysWhy) {
  JobQueue queue(2, 10, [] {});
  auto submitted = queue.submit("img_gen", [](const JobReporter&) -> JobResult {
    throw std::runtime_error("generation failed: out of memory");
  });
  const auto done = queue.wait_finished(submitted.job->id);
  EXPECT_EQ(done->status, JobStatus::Failed);
  EXPECT_EQ(done->error_message, "generation failed: out of memory");
}

TEST(JobQueue, RefusesPastItsLimitAndCancelsWaitingAndRunningJobs) {
  Blocking blocking;
  JobQueue queue(1, 10, [&] { blocking.stop = true; });
  const auto running = queue.submit("img_gen", blocking.work());
  wait_until([&] { return blocking.running.load(); });
  const auto waiting = queue.submit("img_gen", [](const JobReporter&) { return JobResult{}; });
  ASSERT_TRUE(waiting.job);
  EXPECT_EQ(queue.find(waiting.job->id)->queue_position, 1);
  EXPECT_EQ(queue.submit("img_gen", [](const JobReporter&) { return JobResult{}; }).refusal,
            JobQueue::Refusal::Full);

  EXPECT_EQ(queue.cancel(waiting.job->id), JobQueue::CancelOutcome::Cancelled);
  EXPECT_EQ(queue.find(waiting.job->id)->status, JobStatus::Cancelled);
  EXPECT_EQ(queue.cancel(waiting.job->id), JobQueue::CancelOutcome::AlreadyFinished);
  EXPECT_EQ(queue.cancel("job_unknown"), JobQueue::CancelOutcome::NotFound);

  EXPECT_EQ(queue.cancel(running.job->id), JobQueue::CancelOutcome::Requested);
  const auto done = queue.wait_finished(running.job->id);
  EXPECT_EQ(done->status, JobStatus::Cancelled);
  EXPECT_EQ(done->error_code, "cancelled");
}

TEST(JobQueue, ShutdownCancelsEverythingAndRefusesNewJobs) {
  Blocking blocking;
  JobQueue queue(4, 10, [&] { blocking.stop = true; });
  const auto running = queue.submit("img_gen", blocking.work());
  const auto waiting = queue.submit("img_gen", [](const JobReporter&) { return JobResult{}; });
  wait_until([&] { return blocking.running.load(); });
  queue.shutdown();
  EXPECT_EQ(queue.find(running.job->id)->status, JobStatus::Cancelled);
  EXPECT_EQ(queue.find(running.job->id)->error_code, "shutdown");
  EXPECT_EQ(queue.find(waiting.job->id)->status, JobStatus::Cancelled);
  EXPECT_EQ(queue.submit("img_gen", [](const JobReporter&) { return JobResult{}; }).refusal,
            JobQueue::Refusal::Stopping);
}

TEST(JobQueue, ForgetsTheOldestFinishedJobs) {
  JobQueue queue(4, 2, [] {});
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto s = queue.submit("img_gen", [](const JobReporter&) { return JobResult{}; });
    ids.push_back(s.job->id);
    queue.wait_finished(s.job->id);
  }
  EXPECT_FALSE(queue.find(ids[0]));
  EXPECT_TRUE(queue.find(ids[2]));
}

}  // namespace
}  // namespace sd::server
