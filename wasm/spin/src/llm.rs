//! Embeddings from the platform: Spin's `fermyon:spin/llm` `generate-embeddings` with
//! `all-minilm-l6-v2`, the model `lore serve` runs in process, so the component carries no
//! weights and its vectors are stored under the same name as `lore serve`'s (an org moves
//! between them without re-embedding). A host that refuses the model gets the built-in static
//! table instead, said on stderr (Spin's log); whether it embeds is asked once per
//! [`PROBE_TTL_SECS`] and kept in key-value, not on every request.

use std::rc::Rc;

use async_trait::async_trait;
use lore_base::ports::{Cache, Embedder, PortError};
use lore_embed::builtin::BuiltinEmbedder;
use lore_embed::{MINILM_DIMENSIONS, MINILM_MODEL_ID};
use spin_sdk::llm::{EmbeddingModel, generate_embeddings};

/// How long an answer to "does the platform embed?" is kept.
const PROBE_TTL_SECS: u32 = 300;
const PROBE_KEY: &str = "lore:platform-embeddings";

/// all-MiniLM-L6-v2 through the platform.
pub struct SpinLlmEmbedder;

#[async_trait(?Send)]
impl Embedder for SpinLlmEmbedder {
    fn model_id(&self) -> &str {
        MINILM_MODEL_ID
    }

    fn dimensions(&self) -> usize {
        MINILM_DIMENSIONS
    }

    /// The built-in table: a compact `search` ranks a hundred or so SDK texts on every call,
    /// each a call to the platform here.
    fn for_catalog(&self) -> Option<Rc<dyn Embedder>> {
        Some(Rc::new(BuiltinEmbedder::new()))
    }

    /// One text per call: `spin up`'s local engine mean-pools a batch over its padding, so a
    /// text embedded beside a longer one would get another vector than alone (and than
    /// natively). The host cuts a text at the model's 256 word pieces, as `lore serve` does (the
    /// tokenizer `lore model --spin-app` lays out says so).
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, PortError> {
        texts.iter().map(|text| embed_one(text)).collect()
    }
}

pub fn embed_one(text: &str) -> Result<Vec<f32>, PortError> {
    let result = generate_embeddings(EmbeddingModel::AllMiniLmL6V2, &[text.to_string()])
        .map_err(|e| PortError(format!("the platform's embeddings failed: {e:?}")))?;
    result
        .embeddings
        .into_iter()
        .next()
        .ok_or_else(|| PortError("the platform's embeddings returned no vector".into()))
}

/// Whether the platform embeds with all-MiniLM-L6-v2, as `cache` last heard (asked anew when
/// it has no answer).
pub async fn platform_embeds(cache: &dyn Cache) -> bool {
    if let Some(answer) = cache.get(PROBE_KEY).await {
        return answer == b"1";
    }
    let embeds = match embed_one("lore") {
        Ok(v) if v.len() == MINILM_DIMENSIONS => true,
        Ok(v) => {
            eprintln!(
                "lore: the platform's all-minilm-l6-v2 returned {} dimensions; embedding with the built-in static table",
                v.len()
            );
            false
        }
        Err(e) => {
            eprintln!(
                "lore: {e}; embedding with the built-in static table (put the model where `spin up` looks: `lore model --spin-app <app dir>`)"
            );
            false
        }
    };
    cache
        .put(
            PROBE_KEY,
            vec![if embeds { b'1' } else { b'0' }],
            PROBE_TTL_SECS,
        )
        .await;
    embeds
}
