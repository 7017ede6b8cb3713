//! How a simulated n8n fails when its database refuses it, as n8n 2.41.1 was measured to (the
//! project's reference facts, "Postgres out of connections"; docs/sim.md): the caller of a failed execution gets
//! HTTP 500 `{"message":"Error in workflow"}`, the caller of one whose last node's data main
//! could not read back gets HTTP 200 with n8n's "did not return any data" message — **no answer
//! names Postgres** — while main's and the workers' logs say "Problem with execution N:
//! <Postgres' message>. Aborting.".

/// n8n's answer to an execution that ended in error.
pub const ERROR_IN_WORKFLOW: &str = "Error in workflow";

/// n8n's answer when the execution succeeded but the last node's data could not be read.
pub const NO_DATA: &str =
    "Workflow executed successfully but the last node did not return any data";

/// What marks a job's error as the database's, between the simulated worker and main (never
/// shown to a caller).
pub const DB_FAILED: &str = "database: ";

/// What marks a job whose end could not be written because the database was away (a
/// restart): main holds its caller unanswered, as n8n 2.41.1 did (the third lab: the executions
/// in flight at a Postgres stop stayed `running` and their callers never got an answer).
pub const DB_LOST: &str = "database lost: ";

/// Whether a job's error says its end was lost with the database.
pub fn lost(error: Option<&str>) -> bool {
    error.is_some_and(|e| e.starts_with(DB_LOST))
}

/// The line n8n logs for an execution its database refused.
pub fn problem(id: u64, message: &str) -> String {
    format!(
        "Problem with execution {id}: {}. Aborting.",
        crate::util::escape_control(message)
    )
}

/// Logs it, on the process's standard error as n8n's logger writes.
pub fn log_problem(id: u64, message: &str) {
    eprintln!("{}", problem(id, message));
}

/// The database's words of a job's error, when the database failed it.
pub fn db_words(error: Option<&str>) -> Option<&str> {
    error.and_then(|e| e.strip_prefix(DB_FAILED))
}

/// Why a simulated job failed: the text main's log carries, and whether n8n's failed-jobs
/// counter counts it.
#[derive(Debug)]
pub struct JobFailed {
    pub why: String,
    pub counted: bool,
}

impl JobFailed {
    pub fn counted(why: String) -> Self {
        JobFailed { why, counted: true }
    }

    /// The database refused the job's statement: n8n's line in the worker's log, and the job
    /// failed (counted) with the database's words for main's log.
    pub fn db(id: u64, e: &str) -> Self {
        log_problem(id, e);
        JobFailed::counted(format!("{DB_FAILED}{e}"))
    }

    /// The database was away when the job's start or end was written: the worker's hook fails
    /// with n8n's line, the job is not counted failed and main never answers its caller.
    pub fn lost(e: &str) -> Self {
        eprintln!(
            "There was a problem running hook \"workflowExecuteAfter\" Error: {}",
            crate::util::escape_control(e)
        );
        JobFailed {
            why: format!("{DB_LOST}{e}"),
            counted: false,
        }
    }

    /// A database error as the job fails with it: refused (counted, answered 500) or lost.
    pub fn of(id: u64, e: &super::db_monitor::DbError) -> Self {
        if e.lost {
            JobFailed::lost(&e.words)
        } else {
            JobFailed::db(id, &e.words)
        }
    }
}
