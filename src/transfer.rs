//! `lore org export`, `lore org import` and `lore org move-in`: an org's keys moved a page at a
//! time (`lore_directory::transfer`), between a local database (`--db`) and a server's operator
//! routes (`--url`, with `LORE_OPERATOR_SECRET`), and an export written as a lore database file
//! that `lore restore` accepts and `lore org import` reads.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use base64::Engine as _;
use serde_json::{Value, json};

use lore_base::ids::OrgId;
use lore_base::ports::Ports;
use lore_base::storage::Batch;
use lore_directory::transfer::{self, MAX_PAGE, Page};

use crate::outbound::UreqClient;
use crate::ports::{EmbedderChoice, native_ports};
use crate::sqlite::{changes_path, side_files};

/// Where an org is read from or written to.
pub enum Side {
    /// A local database file.
    Db(PathBuf),
    /// A server's operator routes: its base URL and the operator secret.
    Remote { base: String, secret: String },
}

impl Side {
    /// `--url` (any URL of the server: its base, or its MCP URL) with the secret, else `--db`.
    pub fn from_args(
        db: PathBuf,
        url: Option<String>,
        secret: Option<String>,
    ) -> anyhow::Result<Self> {
        let Some(url) = url else {
            return Ok(Self::Db(db));
        };
        let Some(secret) = secret else {
            bail!(
                "--url needs the server's operator secret in LORE_OPERATOR_SECRET (or --operator-secret)"
            );
        };
        let trimmed = url.trim_end_matches('/');
        let base = match trimmed.rfind("/mcp") {
            Some(at) => &trimmed[..at],
            None => trimmed,
        };
        Ok(Self::Remote {
            base: base.to_string(),
            secret,
        })
    }
}

/// What a transfer did, for the command's output.
#[derive(serde::Serialize)]
pub struct Moved {
    pub org: String,
    pub entries: usize,
    pub pages: usize,
    /// An import: principals the file holds that the target already had (kept as they are).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principals_kept: Option<usize>,
    /// An import: tokens and passwords in the file that were not carried (issue them anew).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_left: Option<usize>,
}

async fn operator(base: &str, secret: &str, action: &str, args: Value) -> anyhow::Result<Value> {
    crate::client::call_remote_admin(
        &UreqClient::default(),
        &format!("{base}/operator/{action}"),
        Some(secret),
        args,
    )
    .await
    .with_context(|| format!("operator route {action}"))
}

fn local(db: &Path) -> anyhow::Result<Ports> {
    native_ports(db, &EmbedderChoice::Builtin)
        .with_context(|| format!("cannot open database {}", db.display()))
}

/// A side opened: a local database opened once for every page, or a server's operator routes.
enum Source<'a> {
    Local(Ports),
    Remote { base: &'a str, secret: &'a str },
}

impl<'a> Source<'a> {
    fn open(side: &'a Side) -> anyhow::Result<Self> {
        Ok(match side {
            Side::Db(db) => Self::Local(local(db)?),
            Side::Remote { base, secret } => Self::Remote { base, secret },
        })
    }
}

/// Reads one page of `org`'s export from `source`.
async fn read_page(
    source: &Source<'_>,
    org: &OrgId,
    after: Option<String>,
) -> anyhow::Result<Page> {
    match source {
        Source::Local(ports) => {
            Ok(transfer::export_page(ports, org, after.as_deref(), MAX_PAGE).await?)
        }
        Source::Remote { base, secret } => {
            let answer = operator(
                base,
                secret,
                "org-export",
                json!({ "org": org.as_str(), "after": after }),
            )
            .await?;
            let b64 = base64::engine::general_purpose::STANDARD;
            let mut entries = Vec::new();
            for entry in answer["entries"].as_array().into_iter().flatten() {
                let (Some(key), Some(value)) = (entry[0].as_str(), entry[1].as_str()) else {
                    bail!("the server sent an entry that is not [key, base64]: {entry}");
                };
                entries.push((
                    key.to_string(),
                    b64.decode(value).context("an entry's value")?,
                ));
            }
            let next = answer["next"].as_str().map(str::to_string);
            Ok(Page { entries, next })
        }
    }
}

/// Every page of `org`'s export from `side`, each handed to `sink` in order.
async fn each_page(
    side: &Side,
    org: &OrgId,
    mut sink: impl AsyncFnMut(Vec<(String, Vec<u8>)>, bool) -> anyhow::Result<()>,
) -> anyhow::Result<Moved> {
    let mut moved = Moved {
        org: org.to_string(),
        entries: 0,
        pages: 0,
        principals_kept: None,
        credentials_left: None,
    };
    let source = Source::open(side)?;
    let mut after = None;
    loop {
        let page = read_page(&source, org, after).await?;
        moved.entries += page.entries.len();
        sink(page.entries, moved.pages == 0).await?;
        moved.pages += 1;
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok(moved),
        }
    }
}

/// `lore org export`: writes `org` from `side` into a new lore database at `file`.
pub async fn export(side: &Side, org: &str, file: &Path, force: bool) -> anyhow::Result<Moved> {
    let org = OrgId::parse(org)?;
    if file.exists() {
        if !force {
            bail!("{} exists; pass --force to replace it", file.display());
        }
        for path in std::iter::once(file.to_path_buf()).chain(side_files(file)) {
            remove_if_present(&path)?;
        }
    }
    let out = local(file)?;
    let moved = each_page(side, &org, async |entries, _| {
        let mut batch = Batch::new();
        for (key, value) in entries {
            batch.put(key, value);
        }
        Ok(out.storage.commit(batch).await?)
    })
    .await?;
    // An export is one file to move: closing it checkpoints the WAL into it (SQLite removes
    // `-wal` and `-shm`), and its change counters serve only processes sharing a live database.
    drop(out);
    remove_if_present(&changes_path(file))?;
    Ok(moved)
}

fn remove_if_present(path: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// `lore org import`: writes `org` from the lore database `file` (an export, a backup) into
/// `side`, where it must be new. The file is not trusted (`transfer::import_page`): its tokens
/// and passwords are carried only with `credentials` `Carry`.
pub async fn import(
    side: &Side,
    file: &Path,
    org: &str,
    credentials: transfer::Credentials,
) -> anyhow::Result<Moved> {
    let org = OrgId::parse(org)?;
    if !file.exists() {
        bail!("{} does not exist", file.display());
    }
    let from = Side::Db(file.to_path_buf());
    let target = Source::open(side)?;
    let (mut kept, mut left) = (0, 0);
    let mut moved = each_page(&from, &org, async |entries, first| {
        match &target {
            Source::Local(ports) => {
                let done = transfer::import_page(ports, &org, entries, first, credentials).await?;
                kept += done.kept;
                left += done.credentials_left;
            }
            Source::Remote { base, secret } => {
                let b64 = base64::engine::general_purpose::STANDARD;
                let entries: Vec<(String, String)> = entries
                    .into_iter()
                    .map(|(k, v)| (k, b64.encode(v)))
                    .collect();
                let done = operator(
                    base,
                    secret,
                    "org-import",
                    json!({
                        "org": org.as_str(),
                        "entries": entries,
                        "first": first,
                        "carry_credentials": credentials == transfer::Credentials::Carry,
                    }),
                )
                .await?;
                kept += done["kept"].as_u64().unwrap_or(0) as usize;
                left += done["credentials_left"].as_u64().unwrap_or(0) as usize;
            }
        }
        Ok(())
    })
    .await?;
    moved.principals_kept = Some(kept);
    moved.credentials_left = Some(left);
    Ok(moved)
}

/// `lore org move-in`: on a Workers deployment made before org objects, copies `org`'s rows
/// from D1 into its object, a page per request.
pub async fn move_in(base: &str, secret: &str, org: &str) -> anyhow::Result<Moved> {
    let org = OrgId::parse(org)?;
    let mut moved = Moved {
        org: org.to_string(),
        entries: 0,
        pages: 0,
        principals_kept: None,
        credentials_left: None,
    };
    let mut after: Option<String> = None;
    loop {
        let answer = operator(
            base,
            secret,
            "org-move-in",
            json!({ "org": org.as_str(), "after": after }),
        )
        .await?;
        moved.entries += answer["moved"].as_u64().unwrap_or(0) as usize;
        moved.pages += 1;
        match answer["next"].as_str() {
            Some(next) => after = Some(next.to_string()),
            None => return Ok(moved),
        }
    }
}
