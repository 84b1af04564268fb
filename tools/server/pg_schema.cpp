#include "server/pg_schema.h"

#include <vector>

namespace sd::server {

namespace {

// Each entry moves the schema one version up. Never edit one that has shipped: add the next.
const std::vector<const char*> kMigrations = {
    // 1: jobs with their leases and progress, results, each run's record, the workers.
    R"sql(
CREATE TABLE {s}.jobs (
  id text PRIMARY KEY,
  seq bigserial NOT NULL,
  kind text NOT NULL,
  model text NOT NULL,
  tenant text NOT NULL DEFAULT '',
  priority integer NOT NULL DEFAULT 0,
  request text NOT NULL,
  state text NOT NULL DEFAULT 'queued'
    CHECK (state IN ('queued', 'generating', 'completed', 'failed', 'cancelled')),
  attempts integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL,
  cancel_requested boolean NOT NULL DEFAULT false,
  lease_owner text,
  lease_deadline timestamptz,
  created timestamptz NOT NULL DEFAULT now(),
  started timestamptz,
  completed timestamptz,
  step integer NOT NULL DEFAULT 0,
  steps integer NOT NULL DEFAULT 0,
  seconds_per_step double precision NOT NULL DEFAULT 0,
  preview_step integer NOT NULL DEFAULT 0,
  preview bytea,
  output_format text,
  error_code text,
  error_message text,
  version bigint NOT NULL DEFAULT 1
);
CREATE INDEX jobs_to_claim ON {s}.jobs (model, priority DESC, seq) WHERE state = 'queued';
CREATE INDEX jobs_by_tenant ON {s}.jobs (tenant) WHERE state = 'queued';
CREATE INDEX jobs_leased ON {s}.jobs (lease_deadline) WHERE state = 'generating';
CREATE INDEX jobs_finished ON {s}.jobs (completed) WHERE completed IS NOT NULL;

CREATE TABLE {s}.results (
  job_id text NOT NULL REFERENCES {s}.jobs (id) ON DELETE CASCADE,
  idx integer NOT NULL,
  seed bigint NOT NULL,
  infotext text NOT NULL,
  image bytea NOT NULL,
  PRIMARY KEY (job_id, idx)
);

CREATE TABLE {s}.attempts (
  job_id text NOT NULL REFERENCES {s}.jobs (id) ON DELETE CASCADE,
  number integer NOT NULL,
  worker text NOT NULL,
  started timestamptz NOT NULL DEFAULT now(),
  ended timestamptz,
  outcome text,
  error text,
  PRIMARY KEY (job_id, number)
);

CREATE TABLE {s}.workers (
  id text PRIMARY KEY,
  model text NOT NULL,
  host text NOT NULL,
  started timestamptz NOT NULL DEFAULT now(),
  heartbeat timestamptz NOT NULL DEFAULT now()
);

-- Every change of a job bumps its version and tells listeners which job changed; a job
-- that becomes claimable also tells the workers of its model.
CREATE FUNCTION {s}.job_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    NEW.version := OLD.version + 1;
  END IF;
  PERFORM pg_notify('{s}_jobs', NEW.id);
  IF NEW.state = 'queued' AND (TG_OP = 'INSERT' OR OLD.state <> 'queued') THEN
    PERFORM pg_notify('{s}_queued', NEW.model);
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER jobs_changed BEFORE INSERT OR UPDATE ON {s}.jobs
  FOR EACH ROW EXECUTE FUNCTION {s}.job_changed();
)sql",
    // 2: a video job's result: its container's frame rate and frame count.
    R"sql(
ALTER TABLE {s}.jobs ADD COLUMN fps integer, ADD COLUMN frame_count integer;
)sql",
};

}  // namespace

int queue_schema_version() {
  return static_cast<int>(kMigrations.size());
}

std::string in_schema(std::string sql, const std::string& schema) {
  for (size_t at = sql.find("{s}"); at != std::string::npos; at = sql.find("{s}", at)) {
    sql.replace(at, 3, schema);
    at += schema.size();
  }
  return sql;
}

void migrate_queue_schema(PgConnection& c, const std::string& schema) {
  c.exec("BEGIN");
  try {
    // One server migrates; the others wait here and then find the work done.
    c.exec("SELECT pg_advisory_xact_lock(hashtext($1))", {pg_text("sd-server queue " + schema)});
    c.exec(in_schema("CREATE SCHEMA IF NOT EXISTS {s}", schema));
    c.exec(in_schema("CREATE TABLE IF NOT EXISTS {s}.schema_version (version integer NOT NULL)",
                     schema));
    PgResult r = c.exec(in_schema("SELECT max(version) FROM {s}.schema_version", schema));
    const int have = static_cast<int>(r.integer(0, 0));
    if (have > queue_schema_version())
      throw PgError("the queue's tables in schema '" + schema + "' are version " +
                        std::to_string(have) + ", newer than this sd-server's " +
                        std::to_string(queue_schema_version()) +
                        "; upgrade this server (or use another --queue-schema)",
                    false);
    for (int v = have; v < queue_schema_version(); ++v)
      c.exec_script(in_schema(kMigrations[v], schema));
    if (have < queue_schema_version()) {
      c.exec(in_schema("DELETE FROM {s}.schema_version", schema));
      c.exec(in_schema("INSERT INTO {s}.schema_version VALUES ($1)", schema),
             {pg_text(std::to_string(queue_schema_version()))});
    }
    c.exec("COMMIT");
  } catch (...) {
    try {
      c.exec("ROLLBACK");
    } catch (...) {
    }
    throw;
  }
}

}  // namespace sd::server
