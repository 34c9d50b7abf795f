//! Where statements run: the pool, directly or behind a connection pooler.
//!
//! Behind PgBouncer in transaction mode a server connection is ours only
//! inside a transaction, and sqlx sends a statement in two exchanges (parse,
//! then bind and execute), each ending in a `Sync` after which the pooler
//! may hand the server to another client. So there every statement runs
//! unnamed inside a transaction of its own, begun together with its
//! timeouts (`SET LOCAL`, since no session setting survives), and is
//! acknowledged only once that transaction committed. Directly or behind a
//! session pooler, statements are named and cached as usual.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, TryFutureExt};
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use sqlx::postgres::{PgArguments, PgConnection, PgPool, PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{Either, Execute, Executor, Postgres};

/// What sits between tidemark and Postgres (`--db-pooler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DbPooler {
    /// A direct connection (or a proxy that keeps sessions whole).
    #[default]
    None,
    /// PgBouncer (or alike) in session mode: a server connection is ours
    /// for as long as our connection lasts, but no startup parameter beyond
    /// the few it knows is accepted.
    Session,
    /// PgBouncer in transaction mode: a server connection is ours for one
    /// transaction at a time.
    Transaction,
}

impl DbPooler {
    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DbPooler::None => "none",
            DbPooler::Session => "session",
            DbPooler::Transaction => "transaction",
        }
    }
}

impl fmt::Display for DbPooler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DbPooler {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(DbPooler::None),
            "session" => Ok(DbPooler::Session),
            "transaction" => Ok(DbPooler::Transaction),
            other => Err(format!("unknown pooler {other:?}: none, session or transaction")),
        }
    }
}

/// Which pooled connections may be handed out again: those made after the
/// database last stopped answering. A failover leaves every open connection
/// half-open (no error and no answer, until TCP gives up after ~15
/// minutes), and a call cut short by its deadline returns its connection to
/// the pool for the next call, which hangs the same way: a replica could
/// serve nothing for minutes. Readiness, finding the database silent, moves
/// this mark, and the pool closes the older connections instead of handing
/// them out (a fresh one reaches the new primary).
/// Statements already sent for several callers (group commit, group read)
/// on those connections are given up too, at once (see [`Distrust::raised_since`]).
#[derive(Debug, Clone)]
pub(crate) struct Distrust(Arc<tokio::sync::watch::Sender<u64>>);

impl Default for Distrust {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::Sender::new(0)))
    }
}

/// What [`Distrust`] measures from.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

impl Distrust {
    fn nanos_at(at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Connections made before now are not handed out again.
    pub(crate) fn connections_made_before_now(&self) {
        let now = Self::nanos_at(Instant::now());
        let previous = self.0.send_replace(now);
        // Once per outage in the log, not once per probe.
        if now.saturating_sub(previous) > 10_000_000_000 {
            tracing::warn!(
                "the database stopped answering: pooled connections made before now are closed instead of reused, \
                 and statements waiting on them given up (a failover leaves them half-open)"
            );
        }
    }

    /// Whether a pooled connection of this age may be handed out.
    pub(crate) fn trusts(&self, age: Duration) -> bool {
        let made = Self::nanos_at(Instant::now()).saturating_sub(u64::try_from(age.as_nanos()).unwrap_or(u64::MAX));
        made >= *self.0.borrow()
    }

    /// Resolves once connections made before `at` are distrusted (a
    /// statement sent at `at` may be waiting on one of them).
    pub(crate) async fn raised_since(&self, at: Instant) {
        let sent = Self::nanos_at(at);
        let mut marks = self.0.subscribe();
        let _ = marks.wait_for(|mark| *mark > sent).await;
    }
}

/// The pool, with how statements must run on it.
#[derive(Debug, Clone)]
pub(crate) struct Db {
    pool: PgPool,
    /// Behind a transaction pooler: what begins each statement's
    /// transaction (`BEGIN` and the `SET LOCAL`s). `None` otherwise.
    begin: Option<Arc<str>>,
    /// Which of its connections the pool may hand out (see [`Distrust`]).
    pub(crate) distrust: Distrust,
    /// How long a statement sent for several callers (group commit, group
    /// read) may go unanswered, by this client's clock: the database's own
    /// statement timeout cannot end a statement on a half-open connection.
    pub(crate) statement_limit: Duration,
}

impl Db {
    pub(crate) fn new(
        pool: PgPool,
        pooler: DbPooler,
        local_settings: &[(&str, String)],
        distrust: Distrust,
        statement_limit: Duration,
    ) -> Self {
        let begin = (pooler == DbPooler::Transaction).then(|| begin_sql(local_settings).into());
        Self {
            pool,
            begin,
            distrust,
            statement_limit,
        }
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Whether statements must be unnamed, each in a transaction.
    pub(crate) fn transaction_pooled(&self) -> bool {
        self.begin.is_some()
    }

    /// A transaction (with the session's timeouts, behind a transaction
    /// pooler). Run its statements through [`Db::on`].
    pub(crate) async fn begin(&self) -> Result<sqlx::Transaction<'static, Postgres>, sqlx::Error> {
        match &self.begin {
            Some(begin) => self.pool.begin_with(sqlx::AssertSqlSafe(begin.to_string())).await,
            None => self.pool.begin().await,
        }
    }

    /// `connection` as an executor that names statements only where that
    /// is safe.
    pub(crate) fn on<'c>(&self, connection: &'c mut PgConnection) -> On<'c> {
        On {
            connection,
            unnamed: self.transaction_pooled(),
        }
    }
}

/// `BEGIN` followed by `SET LOCAL name = 'value'` for each setting (the
/// values are tidemark's own: numbers and a schema name it validated).
fn begin_sql(settings: &[(&str, String)]) -> String {
    let mut sql = String::from("BEGIN");
    for (name, value) in settings {
        sql.push_str(&format!("; SET LOCAL {name} = '{}'", value.replace('\'', "''")));
    }
    sql
}

/// A query that is never prepared under a name.
struct Unnamed<E>(E);

impl<'q, E: Execute<'q, Postgres>> Execute<'q, Postgres> for Unnamed<E> {
    fn sql(self) -> sqlx::SqlStr {
        self.0.sql()
    }

    fn statement(&self) -> Option<&PgStatement> {
        self.0.statement()
    }

    fn take_arguments(&mut self) -> Result<Option<PgArguments>, sqlx::error::BoxDynError> {
        self.0.take_arguments()
    }

    fn persistent(&self) -> bool {
        false
    }
}

type Item = Result<Either<PgQueryResult, PgRow>, sqlx::Error>;

impl<'p> Executor<'p> for &'_ Db {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Item>
    where
        'p: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let Some(begin) = self.begin.clone() else {
            return (&self.pool).fetch_many(query);
        };
        let pool = self.pool.clone();
        // Collected, then committed, then handed out: a row is only seen
        // once what produced it is durable.
        let all = async move {
            let mut tx = pool.begin_with(sqlx::AssertSqlSafe(begin.to_string())).await?;
            let items: Vec<Either<PgQueryResult, PgRow>> = tx.fetch_many(Unnamed(query)).try_collect().await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(futures::stream::iter(items.into_iter().map(Ok)))
        };
        all.try_flatten_stream().boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let Some(begin) = self.begin.clone() else {
            return (&self.pool).fetch_optional(query);
        };
        let pool = self.pool.clone();
        Box::pin(async move {
            let mut tx = pool.begin_with(sqlx::AssertSqlSafe(begin.to_string())).await?;
            let row = tx.fetch_optional(Unnamed(query)).await?;
            tx.commit().await?;
            Ok(row)
        })
    }

    fn prepare_with<'e>(
        self,
        sql: sqlx::SqlStr,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement, sqlx::Error>>
    where
        'p: 'e,
    {
        (&self.pool).prepare_with(sql, parameters)
    }
}

/// A connection (a transaction's, usually) as an executor: statements
/// unnamed behind a transaction pooler.
#[derive(Debug)]
pub(crate) struct On<'c> {
    connection: &'c mut PgConnection,
    unnamed: bool,
}

impl<'c> Executor<'c> for On<'c> {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(self, query: E) -> BoxStream<'e, Item>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if self.unnamed {
            self.connection.fetch_many(Unnamed(query))
        } else {
            self.connection.fetch_many(query)
        }
    }

    fn fetch_optional<'e, 'q: 'e, E>(self, query: E) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        if self.unnamed {
            self.connection.fetch_optional(Unnamed(query))
        } else {
            self.connection.fetch_optional(query)
        }
    }

    fn prepare_with<'e>(
        self,
        sql: sqlx::SqlStr,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement, sqlx::Error>>
    where
        'c: 'e,
    {
        self.connection.prepare_with(sql, parameters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_begin_statement_sets_each_setting_locally_and_quotes_values() {
        assert_eq!(begin_sql(&[]), "BEGIN");
        assert_eq!(
            begin_sql(&[("statement_timeout", "10000".into()), ("search_path", "a'b".into())]),
            "BEGIN; SET LOCAL statement_timeout = '10000'; SET LOCAL search_path = 'a''b'"
        );
    }

    #[test]
    fn the_pooler_flag_round_trips_and_names_the_choices_when_wrong() {
        for pooler in [DbPooler::None, DbPooler::Session, DbPooler::Transaction] {
            assert_eq!(pooler.as_str().parse::<DbPooler>(), Ok(pooler));
        }
        let error = "pgbouncer".parse::<DbPooler>().unwrap_err();
        assert!(error.contains("none, session or transaction"), "{error}");
    }
}
