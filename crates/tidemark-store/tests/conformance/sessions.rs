//! Console sessions (`console_sessions`): a session one replica opened is
//! live on every replica until it expires or is signed out anywhere.

use std::time::Duration;

use tidemark_store::NewSession;
use tidemark_testkit::TestDb;

use super::store;

/// Expands to the session cases for a database kind.
#[macro_export]
macro_rules! sessions_conformance_suite {
    ($kind:expr) => {
        $crate::sessions_conformance_suite!($kind;
            a_console_session_lives_on_every_replica_until_it_expires_or_is_signed_out,
        );
    };
    ($kind:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let Some(db) = tidemark_testkit::TestDb::new($kind).await else { return };
                conformance::sessions::$case(&db).await;
            }
        )*
    };
}

pub(crate) async fn a_console_session_lives_on_every_replica_until_it_expires_or_is_signed_out(db: &TestDb) {
    // Two stores over one database: two replicas.
    let (one, other) = (store(db).await, store(db).await);
    let (id, token, unknown) = ([1u8; 32], [2u8; 32], [3u8; 32]);
    let session = |id: &'static [u8; 32], ttl| NewSession {
        id_sha256: id,
        token_sha256: &[2u8; 32],
        principal: "ops",
        ttl,
    };
    one.open_console_session(&session(&[1u8; 32], Duration::from_secs(3600)))
        .await
        .unwrap();
    assert_eq!(other.console_session(&id).await.unwrap(), Some(token));
    assert_eq!(other.console_session(&unknown).await.unwrap(), None);

    // Signed out on one replica: gone on both.
    assert!(other.close_console_session(&id).await.unwrap());
    assert_eq!(one.console_session(&id).await.unwrap(), None);
    assert!(!one.close_console_session(&id).await.unwrap());

    // Expired by the database's clock: no longer live, and swept when the
    // next session opens.
    one.open_console_session(&session(&[4u8; 32], Duration::from_millis(300)))
        .await
        .unwrap();
    assert_eq!(other.console_session(&[4u8; 32]).await.unwrap(), Some(token));
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(other.console_session(&[4u8; 32]).await.unwrap(), None);
    one.open_console_session(&session(&[5u8; 32], Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(
        !one.close_console_session(&[4u8; 32]).await.unwrap(),
        "the expired session was swept"
    );
    assert_eq!(one.console_session(&[5u8; 32]).await.unwrap(), Some(token));
}
