//! An [`Embedder`] over any OpenAI-compatible embeddings endpoint (OpenAI, Azure OpenAI's
//! compatible routes, Ollama, vLLM, llama.cpp, text-embeddings-inference...), reached through
//! the [`HttpClient`] port: `POST {url}` with `{"model", "input": [...]}`, vectors read from
//! `data[].embedding` in `index` order.

use std::rc::Rc;

use async_trait::async_trait;
use serde::Deserialize;

use lore_base::ports::{Embedder, HttpClient, OutboundRequest, PortError};

/// Inputs per request at most: OpenAI accepts 2,048, some compatible servers far fewer (Cohere's
/// API takes 96), and a smaller request fails or times out alone.
pub const MAX_BATCH: usize = 96;

/// How an OpenAI-compatible embeddings endpoint is reached. Its `Debug` hides the key.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiConfig {
    /// The full endpoint URL, e.g. `https://api.openai.com/v1/embeddings`.
    pub url: String,
    /// The `model` field of each request; also the embedder's model id.
    pub model: String,
    /// Sent as `Authorization: Bearer {key}` when present.
    pub key: Option<String>,
    /// The length of every vector the endpoint returns.
    pub dimensions: usize,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field("dimensions", &self.dimensions)
            .finish()
    }
}

/// Embeds through an OpenAI-compatible endpoint. Every answer is checked: one vector per
/// input, each of [`OpenAiConfig::dimensions`] finite numbers.
pub struct OpenAiEmbedder {
    config: OpenAiConfig,
    http: Rc<dyn HttpClient>,
}

impl OpenAiEmbedder {
    pub fn new(config: OpenAiConfig, http: Rc<dyn HttpClient>) -> Self {
        Self { config, http }
    }

    /// Asks the endpoint for one vector and returns its length: what
    /// [`OpenAiConfig::dimensions`] should be when the operator did not say.
    pub async fn probe_dimensions(
        url: &str,
        model: &str,
        key: Option<&str>,
        http: &dyn HttpClient,
    ) -> Result<usize, PortError> {
        let vectors = request(
            url,
            model,
            key,
            http,
            &["dimension probe".to_string()],
            None,
        )
        .await?;
        Ok(vectors[0].len())
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }
}

#[async_trait(?Send)]
impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.config.model
    }

    fn dimensions(&self) -> usize {
        self.config.dimensions
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(MAX_BATCH) {
            let c = &self.config;
            out.extend(
                request(
                    &c.url,
                    &c.model,
                    c.key.as_deref(),
                    self.http.as_ref(),
                    batch,
                    Some(c.dimensions),
                )
                .await?,
            );
        }
        Ok(out)
    }
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

/// One request for `inputs` (at most [`MAX_BATCH`]); the vectors in input order, each checked
/// to be `dimensions` long when given, else all as long as the first.
async fn request(
    url: &str,
    model: &str,
    key: Option<&str>,
    http: &dyn HttpClient,
    inputs: &[String],
    dimensions: Option<usize>,
) -> Result<Vec<Vec<f32>>, PortError> {
    let fail = |what: String| PortError(format!("embeddings endpoint {url}: {what}"));
    if inputs.is_empty() {
        return Ok(Vec::new());
    }
    let body = serde_json::to_vec(&serde_json::json!({ "model": model, "input": inputs }))
        .map_err(|e| fail(e.to_string()))?;
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        ("accept".to_string(), "application/json".to_string()),
    ];
    if let Some(key) = key {
        headers.push(("authorization".to_string(), format!("Bearer {key}")));
    }
    let response = http
        .send(OutboundRequest {
            method: "POST".into(),
            url: url.to_string(),
            headers,
            body,
            // A URL the operator configured (or the CLI's user named).
            reach: lore_base::outbound::Reach::Configured,
            share: lore_base::outbound::Share::Server,
            timeout_ms: 30_000,
        })
        .await?;
    if !(200..300).contains(&response.status) {
        return Err(fail(format!(
            "HTTP {} (check the endpoint's URL, model and key): {}",
            response.status,
            excerpt(&response.body)
        )));
    }
    let parsed: EmbeddingsResponse = serde_json::from_slice(&response.body).map_err(|e| {
        fail(format!(
            "the answer is not an embeddings response ({e}): {}",
            excerpt(&response.body)
        ))
    })?;
    if parsed.data.len() != inputs.len() {
        return Err(fail(format!(
            "{} vectors for {} inputs",
            parsed.data.len(),
            inputs.len()
        )));
    }
    let mut vectors: Vec<Option<Vec<f32>>> = vec![None; inputs.len()];
    for item in parsed.data {
        let slot = vectors
            .get_mut(item.index)
            .ok_or_else(|| fail(format!("index {} out of range", item.index)))?;
        if slot.replace(item.embedding).is_some() {
            return Err(fail(format!("index {} answered twice", item.index)));
        }
    }
    // Every slot is filled: as many distinct in-range indexes as inputs.
    let vectors: Vec<Vec<f32>> = vectors.into_iter().flatten().collect();
    let expected = dimensions.unwrap_or(vectors[0].len());
    if expected == 0 {
        return Err(fail("empty vectors".to_string()));
    }
    if let Some(bad) = vectors.iter().find(|v| v.len() != expected) {
        return Err(fail(format!(
            "a vector of {} dimensions where {expected} were expected \
             (configure the model's dimensions)",
            bad.len()
        )));
    }
    if vectors.iter().flatten().any(|x| !x.is_finite()) {
        return Err(fail("a vector with a non-finite number".to_string()));
    }
    Ok(vectors)
}

/// The start of a response body, for error messages.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut cut: String = text.chars().take(300).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}
