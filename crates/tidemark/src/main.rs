//! `tidemark`: the recovery coordination service for streaming readers of
//! snapshot-based tables.

use std::io::IsTerminal;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use tidemark_store::redact;

mod cli;
mod database;
mod flags;
mod serve;
mod token;
mod traces;

use database::DatabaseArgs;
use serve::ServeArgs;
use token::TokenCommand;

/// mimalloc rather than glibc's malloc: a call allocates and frees many
/// small buffers across threads (h2 frames, protobuf messages, query
/// arguments), and glibc's allocator took about a tenth of the server's CPU
/// at 16 committing workers (docs/bench/HISTORY.md, "Step 4").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "tidemark",
    version,
    about = "Recovery coordination for streaming readers of snapshot-based tables"
)]
struct Cli {
    #[command(flatten)]
    log: LogArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the gRPC API.
    Serve(Box<ServeArgs>),
    /// Apply the database migrations and exit (safe when several replicas
    /// run it at once).
    Migrate(DatabaseArgs),
    /// Operators: list, describe, reset, delete, clear, revoke and expire
    /// consumers (talks gRPC to a server; changes are plans unless --execute).
    Consumers {
        #[command(flatten)]
        connection: cli::Connection,
        // Boxed: its reset form's flags make it the largest command.
        #[command(subcommand)]
        command: Box<cli::ConsumersCommand>,
    },
    /// Operators: a table's consumer options (consumer.expiration-time, ...).
    Options {
        #[command(flatten)]
        connection: cli::Connection,
        #[command(subcommand)]
        command: cli::OptionsCommand,
    },
    /// Operators: Paimon tables whose consumer files tidemark mirrors
    /// (register, unregister, list, import existing consumers).
    Tables {
        #[command(flatten)]
        connection: cli::Connection,
        #[command(subcommand)]
        command: cli::TablesCommand,
    },
    /// Operators: export tidemark's state (consumers, epochs, options,
    /// registrations) as JSON lines, or import an export (a backup's
    /// restore, a move between clusters).
    State {
        #[command(flatten)]
        connection: cli::Connection,
        #[command(subcommand)]
        command: cli::StateCommand,
    },
    /// Operators: a branch's retention fences (--explain: everything holding
    /// retention back).
    Fence {
        #[command(flatten)]
        connection: cli::Connection,
        #[command(flatten)]
        args: cli::FenceArgs,
    },
    /// Credentials: mint a token (printing its configuration entry) or hash
    /// one for the credentials file.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Operators: the history of a consumer or a table, newest first.
    History {
        #[command(flatten)]
        connection: cli::Connection,
        #[command(flatten)]
        args: cli::HistoryArgs,
    },
    /// This client's version, and the server's (when it can be reached).
    Version {
        #[command(flatten)]
        connection: cli::Connection,
    },
    /// Prints a shell completion script (e.g. `tidemark completions bash >
    /// /etc/bash_completion.d/tidemark`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
struct LogArgs {
    /// Log format.
    #[arg(
        long,
        env = "TIDEMARK_LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true,
        help_heading = "Global"
    )]
    log_format: LogFormat,
    /// Log filter (tracing env-filter syntax, e.g. "info" or "tidemark=debug").
    #[arg(
        long,
        env = "TIDEMARK_LOG",
        default_value = "info",
        global = true,
        help_heading = "Global"
    )]
    log: String,
    /// Also append every executed operator change (principal, request id,
    /// what changed from what to what) to this file, one JSON object per
    /// line, for a SIEM; they are in the log too, under the target
    /// tidemark::audit.
    #[arg(long, env = "TIDEMARK_AUDIT_LOG", global = true, help_heading = "Global")]
    audit_log: Option<std::path::PathBuf>,
    /// On an error, print every cause and, with RUST_BACKTRACE=1, where it
    /// happened (for a bug report); without it, one line and a hint.
    #[arg(long, env = "TIDEMARK_DEBUG", global = true, help_heading = "Global")]
    debug: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Logging, and for `serve` the trace exporter when the environment asks
/// for one.
fn init_logging(args: &LogArgs, serving: bool) -> anyhow::Result<Option<traces::Traces>> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log).context("invalid --log filter")?;
    let console = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let console = match args.log_format {
        LogFormat::Text => console.boxed(),
        LogFormat::Json => console.json().flatten_event(true).boxed(),
    }
    .with_filter(filter);
    let audit = match &args.audit_log {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open the audit log {}", path.display()))?;
            let only_audit = tracing_subscriber::filter::Targets::new()
                .with_target(tidemark_store::audit::AUDIT_TARGET, tracing::Level::INFO);
            Some(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_writer(std::sync::Mutex::new(file))
                    .with_filter(only_audit),
            )
        }
        None => None,
    };
    let (exporting, traces) = match serving {
        true => traces::layer()?.map_or((None, None), |(layer, traces)| (Some(layer), Some(traces))),
        false => (None, None),
    };
    tracing_subscriber::registry()
        .with(console)
        .with(audit)
        .with(exporting)
        .init();
    if let Some(traces) = &traces {
        tracing::info!(protocol = traces.protocol, "exporting traces over OTLP");
    }
    Ok(traces)
}

/// The command line, with the exit-code table under every command's help.
fn parse_command_line() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    fn with_exit_codes(command: clap::Command) -> clap::Command {
        command.after_help(cli::exit::TABLE).mut_subcommands(with_exit_codes)
    }
    let command = with_exit_codes(Cli::command());
    let matches = command
        .clone()
        .try_get_matches()
        .unwrap_or_else(|e| exit_with(e, &command));
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| exit_with(e, &command))
}

/// Prints a command-line error and exits. clap's usage line names every
/// option that has a value, one from an environment variable included, so
/// with TIDEMARK_SERVER set it read `tidemark consumers describe --server
/// <SERVER> <TABLE> ...`, as if --server were required; optional options
/// that can come from the environment are taken out of it.
fn exit_with(error: clap::Error, command: &clap::Command) -> ! {
    use clap::error::ErrorKind;
    if matches!(error.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        error.exit()
    }
    let mut from_env = Vec::new();
    collect_env_options(command, &mut from_env);
    let text = error.render().to_string();
    let mut fixed = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        if line.starts_with("Usage: ") {
            fixed.push_str(&without_options(line, &from_env));
        } else {
            fixed.push_str(line);
        }
    }
    #[allow(clippy::print_stderr)] // what clap's own exit does
    {
        eprint!("{fixed}");
    }
    std::process::exit(error.exit_code())
}

/// `--name` of every optional option, in the whole command tree, that an
/// environment variable can set.
fn collect_env_options(command: &clap::Command, into: &mut Vec<String>) {
    for arg in command.get_arguments() {
        if let (Some(_), Some(long), false) = (arg.get_env(), arg.get_long(), arg.is_required_set()) {
            let flag = format!("--{long}");
            if !into.contains(&flag) {
                into.push(flag);
            }
        }
    }
    for sub in command.get_subcommands() {
        collect_env_options(sub, into);
    }
}

/// A usage line without ` --flag` / ` --flag <VALUE>` for each of `flags`.
fn without_options(line: &str, flags: &[String]) -> String {
    let mut line = line.to_owned();
    for flag in flags {
        let needle = format!(" {flag}");
        while let Some(at) = line.find(&needle) {
            let rest = &line[at + needle.len()..];
            if !(rest.starts_with(' ') || rest.starts_with('\n') || rest.is_empty()) {
                break; // a longer flag with this one as its prefix
            }
            let mut end = at + needle.len();
            if line[end..].starts_with(" <")
                && let Some(close) = line[end..].find('>')
            {
                end += close + 1;
            }
            line.replace_range(at..end, "");
        }
    }
    line
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = parse_command_line();
    let debug = cli.log.debug;
    let serving = matches!(cli.command, Command::Serve(_));
    let traces = match init_logging(&cli.log, serving) {
        Ok(traces) => traces,
        Err(e) => {
            eprintln!("{}", cli::explain(&e, debug));
            return std::process::ExitCode::from(cli::exit::USAGE);
        }
    };
    let outcome = run(cli).await;
    if let Some(traces) = traces {
        traces.shutdown().await;
    }
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", cli::explain(&e, debug));
            std::process::ExitCode::from(cli::exit::code_of(&e))
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    use cli::port_hint::explained;
    match cli.command {
        Command::Serve(args) => serve::serve(*args).await,
        // A call that reached an HTTP port instead of the gRPC one says so.
        Command::Consumers { connection, command } => {
            explained(cli::consumers(&connection, *command).await, &connection).await
        }
        Command::Options { connection, command } => {
            explained(cli::options(&connection, command).await, &connection).await
        }
        Command::Tables { connection, command } => {
            explained(cli::tables(&connection, command).await, &connection).await
        }
        Command::State { connection, command } => explained(cli::state(&connection, command).await, &connection).await,
        Command::Fence { connection, args } => explained(cli::fence(&connection, args).await, &connection).await,
        Command::History { connection, args } => explained(cli::history(&connection, args).await, &connection).await,
        Command::Version { connection } => explained(cli::version(&connection).await, &connection).await,
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "tidemark", &mut std::io::stdout());
            Ok(())
        }
        Command::Token(command) => token::token(command),
        Command::Migrate(args) => {
            let backend = args.store_backend().await?;
            args.migrate(backend.as_ref()).await?;
            tracing::info!(database = %redact(&args.database_url), "migrations applied");
            backend.close().await;
            Ok(())
        }
    }
}
