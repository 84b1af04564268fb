// The durable job queue's tables in PostgreSQL, created and migrated by the server itself:
// a numbered list of migrations, applied in order under an advisory lock so that servers
// starting together do it once. A database newer than this server is refused.
#pragma once

#include <string>

#include "server/pg_connection.h"

namespace sd::server {

// The schema's version this build writes.
int queue_schema_version();

// Creates or upgrades the tables in `schema` (a plain lower-case SQL identifier, checked by
// the server's options). Throws PgError.
void migrate_queue_schema(PgConnection& c, const std::string& schema);

// `sql` with every "{s}" replaced by the schema's name.
std::string in_schema(std::string sql, const std::string& schema);

}  // namespace sd::server
