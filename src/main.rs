//! The `lore` command: serve, init, orgs, tokens, and running tools from the shell.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::{Value, json};

use lore::block_on;
use lore::client::{admin_url, call_remote_admin, call_remote_tool};
use lore::outbound::UreqClient;
use lore::ports::{EmbedderChoice, native_ports};
use lore::server::{ConnectionLimits, ServeOptions, serve};
use lore::transfer::Side;
use lore_base::model::{Role, Scopes};
use lore_directory::admin::{self, InitOutcome, IssuedToken, TokenRequest};
use lore_front::headers::OriginPolicy;
use lore_front::{Config, IndexWork, Lore};

/// `println!` through [`out`], which handles a closed pipe.
macro_rules! outln {
    ($($t:tt)*) => {
        out(format_args!($($t)*))
    };
}

mod args;

use args::{
    Cli, Command, EmbeddingsArgs, LogFormat, MemoryCommand, OrgCommand, ServeArgs, TokenCommand,
};
use lore::backup::DoctorArgs;

/// Every request allocates many small JSON values; mimalloc serves them faster than glibc's
/// allocator across worker threads. The meter around it counts what scripts hold, for the
/// sandbox's memory cap.
#[global_allocator]
static ALLOCATOR: lore_meter::Metered<mimalloc::MiMalloc> = lore_meter::Metered(mimalloc::MiMalloc);

fn main() {
    // A script process of `lore serve` (src/scripts.rs): nothing of the CLI runs in it.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == lore::script_child::ARG)
    {
        std::process::exit(lore::script_child::run());
    }
    let cli = Cli::parse();
    let log = init_logging(cli.log_format);
    if let Err(e) = run(cli.command) {
        drop(log);
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// Log lines go to stderr from a thread of their own: a request only formats its line and
/// hands it over, and the thread writes what has queued up in one write (flushed whenever the
/// queue is empty, so an idle server's lines appear at once). Nothing is dropped: a full queue
/// makes the logger wait. The returned guard writes out what is left when dropped (at the end
/// of `main`, after a server has drained). Colours only on a terminal, unless `NO_COLOR`.
fn init_logging(format: LogFormat) -> tracing_appender::non_blocking::WorkerGuard {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .thread_name("lore-log")
        .finish(std::io::BufWriter::new(std::io::stderr()));
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
    guard
}

/// A core instance over the database at `db`. Commands that never embed (init, orgs, tokens)
/// pass [`EmbedderChoice::Builtin`], which costs nothing until used.
fn open(db: &Path, embedder: &EmbedderChoice) -> anyhow::Result<Lore> {
    let ports = native_ports(db, embedder)
        .with_context(|| format!("cannot open database {}", db.display()))?;
    Ok(Lore::new(ports, Config::default()))
}

/// Prints `Lore::memory_index`'s report for people: a line per org.
fn print_memory_index(index: &Value) {
    println!("memory index (what a fresh server loads):");
    for org in index["orgs"].as_array().into_iter().flatten() {
        let name = org["org"].as_str().unwrap_or("?");
        if let Some(error) = org["error"].as_str() {
            println!("  FAIL  {name:<20} {error}");
            continue;
        }
        let k = &org["keyword_segments"];
        let mark = if org["healthy"] == true {
            "ok  "
        } else {
            "FAIL"
        };
        let mut line = format!(
            "  {mark}  {name:<20} {} events; keyword segments {}",
            org["events"],
            k["state"].as_str().unwrap_or("?")
        );
        if k["state"] == "healthy" {
            line.push_str(&format!(
                " ({} segments, {} documents, {} bytes, to event {})",
                k["segments"], k["documents"], k["bytes"], k["covers_seq"]
            ));
        }
        if let Some(why) = k["why"].as_str() {
            line.push_str(&format!(": {why}"));
        }
        if let Some(queued) = org["vectors"]["queued"].as_u64().filter(|&n| n > 0) {
            line.push_str(&format!(
                "; {queued} memories waiting for their vectors (`lore serve` embeds them, or `lore reindex --embeddings`)"
            ));
        }
        println!("{line}");
    }
}

/// Prints what an org transfer moved.
fn moved(moved: lore::transfer::Moved, json: bool) {
    if json {
        print_json(&serde_json::to_value(&moved).unwrap_or_default());
    } else {
        outln!(
            "{}: {} entries in {} pages",
            moved.org,
            moved.entries,
            moved.pages
        );
        if let Some(kept) = moved.principals_kept.filter(|n| *n > 0) {
            outln!("{kept} principals were already here and were kept as they are");
        }
        if let Some(left) = moved.credentials_left.filter(|n| *n > 0) {
            outln!(
                "{left} tokens and passwords were not carried: issue tokens anew with `lore token create --org {}`, and people sign in again (or import with --carry-credentials, for a file you made)",
                moved.org
            );
        }
    }
}

fn print_json(v: &Value) {
    outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// Writes a line to stdout. A closed pipe (`lore memory run … | head`) ends the program
/// quietly with success, as `head` expects of what feeds it; another write error says so.
fn out(text: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_fmt(format_args!("{text}\n"))
        .and_then(|()| stdout.flush())
    {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write the output: {e}");
        std::process::exit(1);
    }
}

fn print_issued(issued: &IssuedToken, json_out: bool) {
    if json_out {
        outln!(
            "{}",
            json!({ "org": issued.org, "token": issued.token, "token_id": issued.token_id, "principal": issued.principal })
        );
    } else {
        outln!("org:   {}", issued.org);
        outln!("token: {}", issued.token);
        outln!(
            "(token id {}; the secret is shown only once)",
            issued.token_id
        );
    }
}

fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(args) => run_serve(args),
        Command::Password { db, password_stdin } => {
            let lore = open(&db, &EmbedderChoice::Builtin)?;
            match set_owner_password(&lore, password_stdin)? {
                NewPassword::Generated(p) => {
                    outln!("owner password: {p}\n(shown only once)")
                }
                NewPassword::Given => outln!("owner password set"),
            }
            Ok(())
        }
        Command::Init {
            db,
            org,
            password_stdin,
            json,
        } => {
            let lore = open(&db, &EmbedderChoice::Builtin)?;
            match block_on(admin::init(lore.ports(), &org))? {
                InitOutcome::Created(issued) => {
                    let password = set_owner_password(&lore, password_stdin)?;
                    if json {
                        let mut out = json!({ "org": issued.org, "token": issued.token, "token_id": issued.token_id, "principal": issued.principal });
                        if let NewPassword::Generated(p) = &password {
                            out["owner_password"] = json!(p);
                        }
                        outln!("{out}");
                    } else {
                        print_issued(&issued, false);
                        if let NewPassword::Generated(p) = &password {
                            outln!("owner password (for the sign-in page): {p}");
                        }
                    }
                }
                InitOutcome::AlreadyInitialised { owner } => {
                    if json {
                        outln!(
                            "{}",
                            json!({ "status": "already_initialised", "owner": owner })
                        );
                    } else {
                        outln!(
                            "{} is already initialised (owner {owner}); nothing changed",
                            db.display()
                        );
                    }
                }
            }
            Ok(())
        }
        Command::Org { command } => org(command),
        Command::Token { command } => token(command),
        Command::Backup(a) => copied(lore::backup::backup(&a.db, &a.file, a.force)?, a.json),
        Command::Restore(a) => copied(lore::backup::restore(&a.file, &a.db, a.force)?, a.json),
        Command::Doctor {
            args,
            org,
            embeddings,
        } => doctor(args, org, embeddings),
        Command::Reindex {
            db,
            org,
            json,
            vectors,
            embeddings,
        } => reindex(db, org, json, vectors, embeddings),
        Command::Model {
            verify,
            spin_app,
            embed,
        } => {
            let dir = lore::model::ensure(true)?;
            if verify {
                lore::model::verify(&dir)?;
            }
            let shown = match spin_app {
                Some(app) => lore::model::lay_out_for_spin(&dir, &app)?,
                None => dir.clone(),
            };
            if embed.is_empty() {
                println!("{}", shown.display());
                return Ok(());
            }
            let model = lore::model::load(&dir)?;
            let vectors = embed
                .iter()
                .map(|text| {
                    model
                        .embed(std::slice::from_ref(text))
                        .map(|mut v| v.remove(0))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let out = serde_json::json!({
                "model": lore_embed::transformer::MODEL_ID,
                "vectors": vectors,
            });
            println!("{out}");
            Ok(())
        }
        Command::Login { url, no_browser } => {
            let path = block_on(lore::login::login(
                &UreqClient::default(),
                &url,
                !no_browser,
            ))?;
            eprintln!(
                "Signed in to {url}; the token is in {} (readable by you only)",
                path.display()
            );
            Ok(())
        }
        Command::Logout { url } => {
            if block_on(lore::login::logout(&UreqClient::default(), &url))? {
                eprintln!("Signed out of {url}: the token is revoked and forgotten");
            } else {
                eprintln!("No stored sign-in for {url}; nothing to do");
            }
            Ok(())
        }
        Command::Memory { command } => memory(command),
    }
}

/// `lore serve`: opens (and on first run creates) the database, then serves until stopped.
fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    let ServeArgs {
        addr,
        db,
        no_auth,
        org,
        allowed_origins,
        allowed_hosts,
        workers,
        max_body_bytes,
        max_connections,
        rate_token_per_minute,
        rate_org_per_minute,
        rate_anonymous_per_minute,
        outbound_allow,
        script_wall_ms,
        script_memory_bytes,
        max_scripts,
        max_scripts_per_org,
        max_scripts_per_token,
        embeddings,
        public_url,
    } = args;
    if no_auth && !addr.ip().is_loopback() {
        bail!(
            "--no-auth serves anyone who can connect as the owner; it is refused on {addr}, use a loopback address"
        );
    }
    let embedder = embeddings.choice()?;
    let lore = open(&db, &embedder)?;
    let first_run = block_on(admin::init(lore.ports(), &org))?;
    // A new database gets an owner password for the sign-in page: the one in
    // LORE_OWNER_PASSWORD, or a random one shown once below.
    let first_password = match &first_run {
        InitOutcome::Created(_) => Some(set_owner_password(&lore, false)?),
        InitOutcome::AlreadyInitialised { .. } => None,
    };
    let origins = if !allowed_hosts.is_empty() {
        OriginPolicy {
            allowed_hosts: Some(allowed_hosts),
            allowed_origins,
        }
    } else if addr.ip().is_loopback() {
        OriginPolicy {
            allowed_origins,
            ..OriginPolicy::loopback()
        }
    } else {
        OriginPolicy {
            allowed_hosts: None,
            allowed_origins,
        }
    };
    let config = Config {
        default_org: lore_base::ids::OrgId::parse(&org)?,
        no_auth,
        origins,
        max_body_bytes,
        public_url: public_url.map(|u| validate_public_url(&u)).transpose()?,
        upstream: lore_front::providers::from_vars(|name| std::env::var(name).ok())
            .map_err(|e| anyhow::anyhow!("identity provider configuration: {e}"))?,
        rate_limits: lore_base::ratelimit::RateLimits {
            token_per_minute: rate_token_per_minute,
            org_per_minute: rate_org_per_minute,
        },
        anonymous_per_minute: rate_anonymous_per_minute,
        outbound: lore_base::outbound::Policy::parse(&outbound_allow.join(","))
            .map_err(|e| anyhow::anyhow!("--outbound-allow: {e}"))?,
        scripts: lore_engine::ScriptCaps {
            wall_ms: script_wall_ms,
            memory_bytes: script_memory_bytes,
            ..lore_engine::ScriptCaps::default()
        },
        ..Config::default()
    };
    drop(lore);
    let workers =
        workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let options = ServeOptions {
        addr,
        db: db.clone(),
        config,
        workers,
        limits: ConnectionLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(10),
            max_connections,
        },
        scripts: {
            let max = max_scripts.unwrap_or(8 * workers).max(1);
            lore_base::ratelimit::ScriptSlots::with_shares(
                max,
                max_scripts_per_org.unwrap_or(max / 2),
                max_scripts_per_token.unwrap_or(max / 4),
            )
        },
        embedder,
        script_program: std::env::current_exe()
            .context("cannot find the lore binary to start script processes from")?,
    };
    serve(options, |local| {
        let url = format!("http://{local}/mcp");
        if let InitOutcome::Created(issued) = &first_run {
            eprintln!(
                "Created {} with org {:?} and its owner token (shown once):\n\n  {}\n",
                db.display(),
                issued.org,
                issued.token
            );
            eprintln!(
                "Connect Claude Code:\n  claude mcp add --transport http lore {url} --header \"Authorization: Bearer {}\"\n",
                issued.token
            );
        }
        if let Some(NewPassword::Generated(password)) = &first_password {
            eprintln!(
                "Owner password for the sign-in page (shown once; change it with `lore password`):\n\n  {password}\n"
            );
        }
        eprintln!(
            "OAuth clients (Claude, ChatGPT, Cursor) connect to {url} and sign in at http://{local}/oauth/signin\n"
        );
        if no_auth {
            tracing::warn!(
                "--no-auth: requests without a token act as the local owner of org {org:?}"
            );
        }
        tracing::info!(%url, db = %db.display(), workers, "lore listening");
        eprintln!("lore listening on {url}");
    })
}

/// `lore org …`.
fn org(command: OrgCommand) -> anyhow::Result<()> {
    match command {
        OrgCommand::Create {
            name,
            location_hint,
            jurisdiction,
            db,
            json,
        } => {
            let lore = open(&db, &EmbedderChoice::Builtin)?;
            let placement = lore_base::model::Placement::new(
                location_hint.as_deref(),
                jurisdiction.as_deref(),
            )?;
            let issued = admin::create_placed_org(lore.ports(), &name, placement);
            print_issued(&block_on(issued)?, json);
            Ok(())
        }
        OrgCommand::List { db, json } => {
            let lore = open(&db, &EmbedderChoice::Builtin)?;
            let orgs = block_on(admin::list_orgs(lore.ports()))?;
            if json {
                print_json(&serde_json::to_value(&orgs)?);
            } else {
                for o in orgs {
                    outln!("{}", o.id);
                }
            }
            Ok(())
        }
        OrgCommand::Export {
            org,
            file,
            side,
            force,
            json,
        } => {
            let side = Side::from_args(side.db, side.url, side.operator_secret)?;
            moved(
                block_on(lore::transfer::export(&side, &org, &file, force))?,
                json,
            );
            Ok(())
        }
        OrgCommand::Import {
            file,
            org,
            side,
            carry_credentials,
            json,
        } => {
            let side = Side::from_args(side.db, side.url, side.operator_secret)?;
            let credentials = if carry_credentials {
                lore_directory::transfer::Credentials::Carry
            } else {
                lore_directory::transfer::Credentials::IssueAnew
            };
            moved(
                block_on(lore::transfer::import(&side, &file, &org, credentials))?,
                json,
            );
            Ok(())
        }
        OrgCommand::MoveIn {
            org,
            url,
            operator_secret,
            json,
        } => {
            let Side::Remote { base, secret } =
                Side::from_args(PathBuf::new(), Some(url), Some(operator_secret))?
            else {
                unreachable!("a URL was given");
            };
            moved(
                block_on(lore::transfer::move_in(&base, &secret, &org))?,
                json,
            );
            Ok(())
        }
    }
}

/// `lore doctor`: the database's checks, then its memory indexes.
fn doctor(args: DoctorArgs, org: Option<String>, embeddings: EmbeddingsArgs) -> anyhow::Result<()> {
    let report = lore::backup::doctor(&args.db);
    // The memory index only of a database that opened and checked out.
    let index = if report.ok {
        let lore = open(&args.db, &embeddings.choice()?)?;
        Some(block_on(
            lore.memory_index(org.as_deref(), IndexWork::Check),
        )?)
    } else {
        None
    };
    if args.json {
        let mut out = serde_json::to_value(&report)?;
        out["memory_index"] = index.clone().unwrap_or(Value::Null);
        print_json(&out);
    } else {
        lore::backup::print_report(&report);
        if let Some(index) = &index {
            print_memory_index(index);
        }
    }
    if !report.ok {
        bail!("{} has problems (see the report)", args.db.display());
    }
    if index.is_some_and(|i| i["healthy"] != true) {
        bail!(
            "a memory index is unusable (see the report); `lore reindex` rebuilds it (servers also rebuild it themselves)"
        );
    }
    Ok(())
}

/// `lore reindex`: rebuilds the memory indexes of one org or every org; with `--embeddings`,
/// queues every memory without a vector under this embedder and embeds them here, unless a
/// server on the same database is at it (then it does, and `lore doctor` follows it).
fn reindex(
    db: PathBuf,
    org: Option<String>,
    json_out: bool,
    vectors: bool,
    embeddings: EmbeddingsArgs,
) -> anyhow::Result<()> {
    let lore = open(&db, &embeddings.choice()?)?;
    let work = if vectors {
        IndexWork::Embeddings
    } else {
        IndexWork::Rebuild
    };
    let mut index = block_on(lore.memory_index(org.as_deref(), work))?;
    if vectors {
        let queued: u64 = index["orgs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["vectors"]["queued"].as_u64())
            .sum();
        if !json_out && queued > 0 {
            eprintln!("{queued} memories to embed; the log says how far it got every 10 s");
        } else if !json_out {
            eprintln!("every memory has its vectors under this embedder");
        }
        block_on(lore.embedding_pass());
        index = block_on(lore.memory_index(org.as_deref(), IndexWork::Check))?;
    }
    if json_out {
        print_json(&index);
    } else {
        print_memory_index(&index);
    }
    if index["healthy"] != true {
        bail!("an org's memory index could not be rebuilt (see the report)");
    }
    Ok(())
}

/// `lore memory run`: one tool or SDK method, on a local database or a server.
fn memory(command: MemoryCommand) -> anyhow::Result<()> {
    let MemoryCommand::Run {
        tool,
        args,
        db,
        url,
        token,
        org,
        raw,
        embeddings,
    } = command;
    let args: Value = serde_json::from_str(&args).context("the arguments are not valid JSON")?;
    if !args.is_object() {
        bail!("the arguments must be a JSON object, e.g. '{{\"query\": \"billing\"}}'");
    }
    let admin = tool.contains('.')
        || lore_engine::tools::find(&tool).is_some_and(|t| t.profile().is_none());
    // Without --token, a remote URL uses what `lore login` stored for it.
    let token = match (&url, token.filter(|t| !t.is_empty())) {
        (Some(url), None) => block_on(lore::login::token_for(&UreqClient::default(), url))?,
        (_, token) => token,
    };
    let result = match url {
        Some(url) if admin => block_on(call_remote_admin(
            &UreqClient::default(),
            &admin_url(&url, org.as_deref(), &tool)?,
            token.as_deref(),
            args,
        ))?,
        Some(url) => {
            let envelope = block_on(call_remote_tool(
                &UreqClient::default(),
                &compact_url(url, &tool),
                token.as_deref(),
                &tool,
                args,
            ))?;
            if raw {
                envelope
            } else {
                tool_result(envelope)?
            }
        }
        None => {
            let db = db.unwrap_or_else(|| PathBuf::from("./lore.db"));
            if !db.exists() {
                bail!(
                    "{} does not exist; run `lore init --db {}` first or pass --url",
                    db.display(),
                    db.display()
                );
            }
            let lore = open(&db, &embeddings.choice()?)?;
            block_on(async {
                let caller = lore.local_caller(org.as_deref()).await?;
                lore.call_tool(&caller, &tool, args).await
            })
            .map_err(|e| anyhow::anyhow!("{}", e.to_json()))?
        }
    };
    print_json(&result);
    Ok(())
}

/// What a person wants of a `tools/call` result: its structured content (or its text content,
/// as JSON where it parses); a tool error is the command's error, exit status 1.
fn tool_result(envelope: Value) -> anyhow::Result<Value> {
    let text = || {
        envelope["content"]
            .as_array()
            .and_then(|c| c.iter().find_map(|item| item["text"].as_str()))
            .map(|t| serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_string())))
    };
    let result = match envelope.get("structuredContent") {
        Some(v) if !v.is_null() => v.clone(),
        _ => text().unwrap_or(Value::Null),
    };
    if envelope["isError"] == true {
        bail!(
            "{}",
            serde_json::to_string_pretty(&result).unwrap_or_default()
        );
    }
    Ok(result)
}

fn copied(c: lore::backup::Copied, json_out: bool) -> anyhow::Result<()> {
    if json_out {
        print_json(&serde_json::to_value(&c)?);
    } else {
        outln!(
            "{} -> {}: {} keys, {} bytes (integrity ok)",
            c.from.display(),
            c.to.display(),
            c.keys,
            c.bytes
        );
    }
    Ok(())
}

/// How the owner's password was chosen.
enum NewPassword {
    Given,
    /// Random, to be shown once.
    Generated(String),
}

/// Sets the local owner's sign-in password: from standard input, LORE_OWNER_PASSWORD, or a
/// random one.
fn set_owner_password(lore: &Lore, from_stdin: bool) -> anyhow::Result<NewPassword> {
    let (password, outcome) = if from_stdin {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("reading the password from standard input")?;
        (line.trim_end_matches(['\r', '\n']).to_string(), None)
    } else if let Some(p) = std::env::var("LORE_OWNER_PASSWORD")
        .ok()
        .filter(|p| !p.is_empty())
    {
        (p, None)
    } else {
        let mut bytes = [0u8; 18];
        getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("randomness: {e}"))?;
        let p = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, bytes);
        (p.clone(), Some(p))
    };
    block_on(admin::set_owner_password(lore.ports(), &password))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(outcome.map_or(NewPassword::Given, NewPassword::Generated))
}

/// A public URL is an origin: `http(s)://host[:port]`, without a path.
fn validate_public_url(url: &str) -> anyhow::Result<String> {
    let trimmed = url.trim().trim_end_matches('/');
    let parsed = url::Url::parse(trimmed).with_context(|| format!("--public-url {url:?}"))?;
    if !matches!(parsed.scheme(), "http" | "https")
        || parsed.path() != "/"
        || parsed.query().is_some()
    {
        bail!("--public-url must be an origin such as https://lore.example.com, without a path");
    }
    Ok(trimmed.to_string())
}

fn token(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create {
            db,
            org,
            role,
            scopes,
            name,
            principal,
            expires_in_days,
            json,
        } => {
            let lore = open(&db, &EmbedderChoice::Builtin)?;
            let now = lore.ports().clock.now_ms();
            let request = TokenRequest {
                org,
                role: role.as_deref().map(Role::parse).transpose()?,
                scopes: Scopes::parse(&scopes)?,
                principal,
                name,
                expires_at_ms: expires_in_days.map(|d| now + i64::from(d) * 86_400_000),
            };
            let issued = block_on(admin::create_token(lore.ports(), request))?;
            if json {
                outln!(
                    "{}",
                    json!({ "token": issued.token, "token_id": issued.token_id, "org": issued.org, "principal": issued.principal })
                );
            } else {
                print_issued(&issued, false);
            }
            Ok(())
        }
        TokenCommand::List { db, org, json } => {
            let lore = open(&db, &EmbedderChoice::Builtin)?;
            let tokens = block_on(admin::list_tokens(lore.ports(), &org))?;
            if json {
                print_json(&serde_json::to_value(&tokens)?);
            } else {
                for t in tokens {
                    let role = t.role.map_or("-", Role::as_str);
                    let state = if t.revoked { "revoked" } else { "active" };
                    outln!(
                        "{}  {}  {}  {}  {}  {}",
                        t.id,
                        t.principal,
                        role,
                        t.scopes,
                        state,
                        t.label.unwrap_or_default()
                    );
                }
            }
            Ok(())
        }
        TokenCommand::Revoke { id, db, org } => {
            let lore = open(&db, &EmbedderChoice::Builtin)?;
            block_on(admin::revoke_token(lore.ports(), &org, &id))?;
            outln!("revoked {id}");
            Ok(())
        }
    }
}

/// A compact-profile tool (`search`, `fetch`, `do`) is reached at `?profile=compact`.
fn compact_url(url: String, tool: &str) -> String {
    let compact = lore_engine::tools::find(tool)
        .is_some_and(|t| t.profile() == Some(lore_base::model::Profile::Compact));
    if !compact || url.contains("profile=") {
        return url;
    }
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}profile=compact")
}
