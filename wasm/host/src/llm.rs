//! `fermyon:spin/llm@2.0.0` as `spin up` provides it for embeddings: `generate-embeddings` with
//! `all-minilm-l6-v2`, read from `<state dir>/ai-models/all-minilm-l6-v2/model.safetensors`
//! (where `spin up` looks; `lore model --spin-app <app dir>` puts it there) and run by the
//! candle encoder `lore serve` runs, so a vector made here is the one `lore serve` makes for the
//! same text. The model is loaded on first use and shared by every request. `infer` answers
//! `model-not-supported`, as `spin up` does for a model it lacks.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use lore_embed::transformer::TransformerModel;
use wasmtime::Result;
use wasmtime::component::{ComponentType, Lift, Linker, Lower};

/// The model `spin up` names all-MiniLM-L6-v2 by.
const MINILM: &str = "all-minilm-l6-v2";

/// all-MiniLM-L6-v2's `config.json` (sentence-transformers'): `spin up` needs none beside the
/// weights, so neither does this host; one found beside them is used instead.
const MINILM_CONFIG: &str = r#"{"architectures":["BertModel"],"attention_probs_dropout_prob":0.1,"gradient_checkpointing":false,"hidden_act":"gelu","hidden_dropout_prob":0.1,"hidden_size":384,"initializer_range":0.02,"intermediate_size":1536,"layer_norm_eps":1e-12,"max_position_embeddings":512,"model_type":"bert","num_attention_heads":12,"num_hidden_layers":6,"pad_token_id":0,"position_embedding_type":"absolute","type_vocab_size":2,"use_cache":true,"vocab_size":30522}"#;

/// The models of one host: where they are, and all-MiniLM-L6-v2 once loaded.
pub struct Models {
    dir: PathBuf,
    minilm: OnceLock<Result<Arc<TransformerModel>, String>>,
}

impl Models {
    /// The models under `state_dir` (`ai-models/`), as `spin up` finds them under its state dir.
    pub fn under(state_dir: PathBuf) -> Arc<Self> {
        Arc::new(Self {
            dir: state_dir.join("ai-models"),
            minilm: OnceLock::new(),
        })
    }

    fn minilm(&self) -> Result<Arc<TransformerModel>, LlmError> {
        self.minilm
            .get_or_init(|| {
                let dir = self.dir.join(MINILM);
                if !dir.is_dir() {
                    return Err(format!(
                        "The directory expected to house the embeddings models '{}' does not exist.",
                        dir.display()
                    ));
                }
                let weights = std::fs::read(dir.join("model.safetensors")).map_err(|e| {
                    format!("Failed to load embeddings model from '{}': {e}", dir.display())
                })?;
                let config = std::fs::read(dir.join("config.json"))
                    .unwrap_or_else(|_| MINILM_CONFIG.as_bytes().to_vec());
                TransformerModel::load(&config, &weights)
                    .map(Arc::new)
                    .map_err(|e| format!("Failed to load embeddings model from '{}': {e}", dir.display()))
            })
            .clone()
            .map_err(LlmError::RuntimeError)
    }

    fn embed(&self, model: &str, texts: &[String]) -> Result<EmbeddingsResult, LlmError> {
        if model != MINILM {
            return Err(LlmError::ModelNotSupported);
        }
        let embeddings = self
            .minilm()?
            .embed(texts)
            .map_err(|e| LlmError::RuntimeError(e.to_string()))?;
        let words = texts.iter().map(|t| t.split_whitespace().count()).max();
        Ok(EmbeddingsResult {
            embeddings,
            usage: EmbeddingsUsage {
                prompt_token_count: u32::try_from(words.unwrap_or(0)).unwrap_or(u32::MAX),
            },
        })
    }
}

#[derive(ComponentType, Lift, Lower, Clone, Debug)]
#[component(variant)]
pub enum LlmError {
    #[component(name = "model-not-supported")]
    ModelNotSupported,
    #[component(name = "runtime-error")]
    RuntimeError(String),
    #[component(name = "invalid-input")]
    InvalidInput(String),
}

#[derive(ComponentType, Lift, Lower)]
#[component(record)]
pub struct EmbeddingsUsage {
    #[component(name = "prompt-token-count")]
    prompt_token_count: u32,
}

#[derive(ComponentType, Lift, Lower)]
#[component(record)]
pub struct EmbeddingsResult {
    embeddings: Vec<Vec<f32>>,
    usage: EmbeddingsUsage,
}

#[derive(ComponentType, Lift, Lower)]
#[component(record)]
pub struct InferencingParams {
    #[component(name = "max-tokens")]
    max_tokens: u32,
    #[component(name = "repeat-penalty")]
    repeat_penalty: f32,
    #[component(name = "repeat-penalty-last-n-token-count")]
    repeat_penalty_last_n_token_count: u32,
    temperature: f32,
    #[component(name = "top-k")]
    top_k: u32,
    #[component(name = "top-p")]
    top_p: f32,
}

#[derive(ComponentType, Lift, Lower)]
#[component(record)]
pub struct InferencingUsage {
    #[component(name = "prompt-token-count")]
    prompt_token_count: u32,
    #[component(name = "generated-token-count")]
    generated_token_count: u32,
}

#[derive(ComponentType, Lift, Lower)]
#[component(record)]
pub struct InferencingResult {
    text: String,
    usage: InferencingUsage,
}

pub fn add_to_linker<T: Send + 'static>(linker: &mut Linker<T>, models: Arc<Models>) -> Result<()> {
    let mut llm = linker.instance("fermyon:spin/llm@2.0.0")?;
    llm.func_wrap(
        "generate-embeddings",
        move |_store, (model, texts): (String, Vec<String>)| Ok((models.embed(&model, &texts),)),
    )?;
    llm.func_wrap(
        "infer",
        |_store,
         (_model, _prompt, _params): (String, String, Option<InferencingParams>)|
         -> Result<(Result<InferencingResult, LlmError>,)> {
            Ok((Err(LlmError::ModelNotSupported),))
        },
    )?;
    Ok(())
}
