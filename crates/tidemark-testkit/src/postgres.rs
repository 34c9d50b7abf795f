//! Whole Postgres databases for tests that run the binary.

/// A fresh Postgres database (not just a schema: the binary takes a plain
/// URL), dropped afterwards.
#[derive(Debug)]
pub struct FreshDatabase {
    admin_url: String,
    name: String,
    /// Its URL.
    pub url: String,
}

impl FreshDatabase {
    /// A new database on the test cluster; `None` without Postgres.
    pub async fn create() -> Option<Self> {
        let admin_url = crate::postgres_url()?;
        let name = format!("tidemark_cli_{}", uuid_like());
        let pool = sqlx::PgPool::connect(&admin_url).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&pool)
            .await
            .unwrap();
        pool.close().await;
        let base = admin_url.rsplit_once('/').map(|(b, _)| b.to_owned()).unwrap();
        Some(Self {
            url: format!("{base}/{name}"),
            admin_url,
            name,
        })
    }

    /// Drops it (forcing off any session).
    pub async fn drop_now(self) {
        let pool = sqlx::PgPool::connect(&self.admin_url).await.unwrap();
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .execute(&pool)
        .await;
        pool.close().await;
    }
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{:x}{:x}", nanos, std::process::id())
}
