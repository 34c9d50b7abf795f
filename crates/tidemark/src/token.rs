//! `tidemark token`: mint a token (printing its credentials entry) or hash
//! one.

use clap::Subcommand;
use tidemark_server::auth::AuthConfig;

#[derive(Debug, Subcommand)]
pub(crate) enum TokenCommand {
    /// Create a random token; prints it once, with the [[token]] entry (its
    /// SHA-256) to add to the credentials file.
    Mint {
        /// The token's name (the principal in history and logs).
        #[arg(long)]
        name: String,
        /// Roles: worker, maintainer, viewer, operator.
        #[arg(long = "role", required = true)]
        roles: Vec<String>,
        /// Table globs it may touch (default: all).
        #[arg(long = "table")]
        tables: Vec<String>,
    },
    /// Print the SHA-256 (hex) of a token read from standard input.
    Hash,
}

#[allow(clippy::print_stdout)] // printing the token is the point
pub(crate) fn token(command: TokenCommand) -> anyhow::Result<()> {
    use tidemark_server::auth::{hash_token, hex, mint_token};
    match command {
        TokenCommand::Mint { name, roles, tables } => {
            let token = mint_token().map_err(anyhow::Error::msg)?;
            let quote = |items: &[String]| items.iter().map(|i| format!("{i:?}")).collect::<Vec<_>>().join(", ");
            let entry = format!(
                "[[token]]\nname = {name:?}\nsha256 = \"{}\"\nroles = [{}]\n{}",
                hex(&hash_token(&token)),
                quote(&roles),
                if tables.is_empty() {
                    String::new()
                } else {
                    format!("tables = [{}]\n", quote(&tables))
                }
            );
            // Check the entry parses before showing it.
            AuthConfig::parse(&entry, "the new entry").map_err(anyhow::Error::msg)?;
            println!("token (shown once; give it to the client, e.g. as TIDEMARK_TOKEN):\n{token}\n");
            println!("add to the server's credentials file:\n{entry}");
            Ok(())
        }
        TokenCommand::Hash => {
            let mut token = String::new();
            std::io::stdin().read_line(&mut token)?;
            println!("{}", hex(&hash_token(token.trim())));
            Ok(())
        }
    }
}
