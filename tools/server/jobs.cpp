#include "server/jobs.h"

#include <cstdio>
#include <mutex>
#include <random>

namespace sd::server {

const char* job_status_name(JobStatus status) {
  switch (status) {
    case JobStatus::Queued:
      return "queued";
    case JobStatus::Generating:
      return "generating";
    case JobStatus::Completed:
      return "completed";
    case JobStatus::Failed:
      return "failed";
    case JobStatus::Cancelled:
      return "cancelled";
  }
  return "unknown";
}

bool job_finished(JobStatus status) {
  return status == JobStatus::Completed || status == JobStatus::Failed ||
         status == JobStatus::Cancelled;
}

std::optional<JobStatus> parse_job_status(const std::string& name) {
  for (JobStatus s : {JobStatus::Queued, JobStatus::Generating, JobStatus::Completed,
                      JobStatus::Failed, JobStatus::Cancelled})
    if (name == job_status_name(s)) return s;
  return std::nullopt;
}

const char* video_mime_type(const std::string& output_format) {
  if (output_format == "webm") return "video/webm";
  if (output_format == "mp4") return "video/mp4";
  if (output_format == "avi") return "video/x-msvideo";
  if (output_format == "webp") return "image/webp";
  return "application/octet-stream";
}

std::string new_job_id() {
  static std::mutex mutex;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mutex);
  char text[40];
  std::snprintf(text, sizeof text, "job_%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return text;
}

}  // namespace sd::server
