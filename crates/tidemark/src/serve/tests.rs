//! `tidemark serve`'s flags against the server's own defaults.

use clap::Parser;

use super::{MetricsListen, ServeArgs, lease_policy, server_config};

/// `tidemark serve`'s flags alone, as the command line parses them.
#[derive(Debug, Parser)]
struct Serve {
    #[command(flatten)]
    args: ServeArgs,
}

/// The defaults users get from the command line are the ones
/// `ServerConfig::default()` gives the tests and embedders: one set of
/// defaults, checked here so the two cannot drift apart again.
#[test]
fn command_line_defaults_are_the_server_defaults() {
    let args = Serve::try_parse_from(["serve"]).unwrap().args;
    let from_cli = format!("{:?}", server_config(&args));
    let defaults = format!("{:?}", tidemark_server::ServerConfig::default());
    assert_eq!(from_cli, defaults);
    assert_eq!(
        format!("{:?}", lease_policy(&args)),
        format!("{:?}", tidemark_core::LeasePolicy::default())
    );
    assert_eq!(
        format!("{:?}", args.database.postgres_options()),
        format!("{:?}", tidemark_store::PostgresOptions::default())
    );
}

#[test]
fn metrics_listen_is_an_address_or_off() {
    assert_eq!("off".parse::<MetricsListen>(), Ok(MetricsListen(None)));
    assert_eq!("OFF".parse::<MetricsListen>(), Ok(MetricsListen(None)));
    let address = "127.0.0.1:9464".parse().unwrap();
    assert_eq!(
        "127.0.0.1:9464".parse::<MetricsListen>(),
        Ok(MetricsListen(Some(address)))
    );
    assert!("localhost".parse::<MetricsListen>().is_err());
    let refused = Serve::try_parse_from(["serve", "--metrics-listen", "nowhere"]).unwrap_err();
    assert_eq!(refused.kind(), clap::error::ErrorKind::ValueValidation, "{refused}");
}
